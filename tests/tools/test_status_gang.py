"""`python -m stacks status` on a queued cluster where the nodes, not the quota, decide (issue 36): a run Kueue admitted
whose pods cannot all be placed is reported broken, why (the scheduler's own message, in the config's words, without
its preemption notes) and what Kueue will do about it; a run Kueue's Topology Aware Scheduling holds back says why in
the config's words. Objects are synthetic, shaped as kube-scheduler v1.34.4 and Kueue v0.17.0 write them."""

from __future__ import annotations

import copy
from typing import Any

import stacks
from components.queueing import flavor_name
from config.stack import ClusterConfig
from tests import fixtures
from tools import drift
from tools.status import report as status
from tools.status.queue import queue_reason
from tools.status.reasons import scheduler_reasons

Obj = dict[str, Any]

# kube-scheduler v1.34.4's FitError for gamma-1 (k8s.io/kubernetes pkg/scheduler/framework/types.go FitError.Error:
# "0/N nodes are available: <FilterMsg>. <PostFilterMsg>"), on the live tier's plane: 3 nodes of qb (two full with
# delta's pods, one with gamma-0), a worker without the set's label, the tainted control-plane node. The PostFilter
# plugins' notes follow, joined by ", " (framework/runtime/framework.go RunPostFilterPlugins): DynamicResources' `no new
# claims to deallocate` (plugins/dynamicresources PostFilter: the pod has no claims), then DefaultPreemption's
# `preemption: ` and its own FitError (framework/preemption/preemption.go: no victim of a lower priority).
V1_34_4 = (
    "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod anti-affinity rules, "
    "1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/5 nodes are "
    "available: 2 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod."
)


def config(tas: bool = False, **queueing: Any) -> ClusterConfig:
    """The tcp fixture queued: one node set `qb` of 3 x 8 GPUs; gamma 2 x 4 GPUs (or 5 with TAS), delta 2 x 8."""
    d = fixtures.data("tcp")
    d["queueing"] = {"cluster_queue": "gpu", "topology_aware": tas, "quota": {"qb": {"pods": "3"}}, **queueing}
    d["node_sets"] = [{"name": "qb", "count": 3, "gpus_per_node": 8, "allocatable_cpu": "64", "allocatable_memory": "512Gi",
                       "labels": {"gpu-pool": "qb"}}]  # fmt: skip
    base = fixtures.workload(d, "one")
    d["workloads"] = [
        {**copy.deepcopy(base), "name": "gamma", "nodes": 2, "gpus_per_node": 5 if tas else 4},
        {**copy.deepcopy(base), "name": "delta", "nodes": 2, "gpus_per_node": 8},
    ]
    return stacks.validate(d, "gang")


def declared(c: ClusterConfig) -> dict[str, Obj]:
    out = {}
    for d in drift.declared_for(c, "all"):
        if d.object["kind"] == "StatefulSet":
            obj = copy.deepcopy(d.object)
            obj["metadata"]["uid"] = f"uid-{obj['metadata']['name']}"
            out[obj["metadata"]["name"]] = obj
    return out


def pod(owner: Obj, index: int, node: str | None, message: str = "") -> Obj:
    """A pod of the StatefulSet as its controller makes it: Running and Ready on `node`, or Pending with the scheduler's
    Unschedulable `message`."""
    template = owner["spec"]["template"]
    conditions = (
        [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
        if node
        else [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message},
            {"type": "Ready", "status": "False"},
        ]
    )
    spec = copy.deepcopy(template["spec"])
    if node:
        spec["nodeName"] = node
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{index}",
            "namespace": meta["namespace"],
            "labels": dict(template["metadata"]["labels"]),
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"], "uid": meta["uid"], "controller": True}
            ],
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending", "conditions": conditions},
    }


def node(name: str) -> Obj:
    allocatable = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "gpu-pool": "qb"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu.product", "value": "H100", "effect": "NoSchedule"}]},
        "status": {"allocatable": allocatable},
    }


def kueue_workload(owner: Obj, *conditions: Obj) -> Obj:
    meta = owner["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"statefulset-{meta['name']}-3f2a1",
            "namespace": meta["namespace"],
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"], "uid": meta["uid"], "controller": True}
            ],
        },
        "spec": {"queueName": "gpu-training"},
        "status": {"conditions": list(conditions)},
    }


def cond(kind: str, state: str, reason: str = "", message: str = "") -> Obj:
    return {"type": kind, "status": state, "reason": reason, "message": message}


def the_issue(c: ClusterConfig) -> list[Obj]:
    """delta runs on qb-0 and qb-1; gamma, admitted too, has gamma-0 on qb-2 and gamma-1 nowhere."""
    objs = declared(c)
    admitted = (cond("QuotaReserved", "True"), cond("Admitted", "True"))
    return [
        *objs.values(),
        *(node(f"live-qb-{i}") for i in range(3)),
        kueue_workload(objs["delta"], *admitted, cond("PodsReady", "True")),
        pod(objs["delta"], 0, "live-qb-0"),
        pod(objs["delta"], 1, "live-qb-1"),
        kueue_workload(objs["gamma"], *admitted),
        pod(objs["gamma"], 0, "live-qb-2"),
        pod(objs["gamma"], 1, None, V1_34_4),
    ]


def of(result: status.StackStatus, name: str) -> status.WorkloadStatus:
    return next(w for w in result.workloads if w.config == f"workloads[{name}]")


def test_the_schedulers_postfilter_notes_are_no_cause() -> None:
    reasons, prefilter = scheduler_reasons(V1_34_4)
    assert dict(reasons) == {
        "node(s) didn't match Pod's node affinity/selector": 1,
        "node(s) didn't match pod anti-affinity rules": 1,
        "node(s) had untolerated taint(s)": 1,
        "Insufficient nvidia.com/gpu": 2,
    }
    assert prefilter == ""
    before = V1_34_4.replace("no new claims to deallocate, ", "")  # kube-scheduler before 1.34 (no DRA PostFilter)
    assert scheduler_reasons(before) == (reasons, "")


def test_an_admitted_run_whose_pods_cannot_all_be_placed_is_reported_broken() -> None:
    c = config()
    result = status.stack_status(c, "lab", None, the_issue(c))
    gamma = of(result, "gamma")
    assert gamma.state == "pending" and not gamma.ok and (gamma.ready, gamma.wanted) == (1, 2)
    assert gamma.queue is not None and gamma.queue.admission == "admitted"
    broken, pending = gamma.reasons
    assert broken.startswith("broken: admitted by queue gpu, but 1 of its 2 pods cannot be placed, so it cannot start")
    assert "`python -m stacks check` names the runs the quota admits together that the nodes cannot hold" in broken
    assert broken.endswith(
        "Kueue evicts it at the waitForPodsReady timeout (5 minutes after its admission), releases its quota and queues it again; "
        "until then it holds its quota and its placed pods' GPUs"
    )
    assert pending.startswith("1 of 2 pods pending: ")
    assert "no node of qb has 4 free GPUs (qb: 3 nodes, 24 GPUs, 20 in use by di" in pending
    assert "1 node(s) of qb run a pod of it already (one pod per node)" in pending
    assert "preemption" not in pending and "claims" not in pending and "the scheduler)" not in pending
    assert of(result, "delta").ok and not result.ok
    line = next(ln for ln in status.report(result).splitlines() if "workloads[gamma]" in ln)
    assert ": pending, 1/2 pods ready: broken: admitted by queue gpu" in line


def test_without_waitforpodsready_it_is_never_evicted() -> None:
    c = config(pods_ready={"enabled": False})
    (broken, _) = of(status.stack_status(c, "lab", None, the_issue(c)), "gamma").reasons
    assert "waitForPodsReady is off (queueing.pods_ready), so Kueue never evicts it" in broken
    assert "until it is stopped (state: stopped)" in broken


def test_an_admitted_run_whose_pods_are_still_being_placed_is_not_broken() -> None:
    c = config()
    objs = [o for o in the_issue(c) if o["metadata"]["name"] != "gamma-1"]
    gamma = of(status.stack_status(c, "lab", None, objs), "gamma")
    assert gamma.reasons[0].startswith("admitted by queue gpu; Kueue evicts it and queues it again if its pods are not all Ready")


def test_a_run_topology_aware_scheduling_holds_back_says_why_in_the_configs_words() -> None:
    c = config(tas=True)
    objs = declared(c)
    flavor = flavor_name(c, c.node_sets[0])
    assert flavor.startswith("tcp-qb-") and flavor != "tcp-qb"
    message = (
        "couldn't assign flavors to pod set main: topology \"tcp-nodes\" doesn't allow to fit any of 2 pod(s). Total nodes: 3; "
        'excluded: resource "nvidia.com/gpu": 3'
    )
    waiting = kueue_workload(objs["gamma"], cond("QuotaReserved", "False", "Pending", message))
    gamma = of(status.stack_status(c, "lab", None, [*objs.values(), waiting]), "gamma")
    assert gamma.reasons == [
        "waiting in queue gpu: Kueue's Topology Aware Scheduling finds room for 0 of its 2 pods on the nodes of qb (3 nodes: 3 "
        "without the nvidia.com/gpu one pod requests free); it counts every pod on them, other projects' too: it is admitted "
        "once they have room for all of them, when Kueue looks again (a run of its queue ending or leaving, a change of the "
        "nodes) (queueing.topology_aware)"
    ]
    quota = f"couldn't assign flavors to pod set main: insufficient unused quota for pods in flavor {flavor}, 1 more needed"
    assert queue_reason(c, quota) == "needs 1 more pods than the queue has free"
    some = 'topology "tcp-nodes" allows to fit only 2 out of 3 pod(s). Total nodes: 3; excluded: taint "x=y:NoSchedule": 1'
    assert "finds room for 2 of its 3 pods on the nodes of qb (3 nodes: 1 with the taint x=y:NoSchedule" in queue_reason(c, some)
