"""`python -m stacks status` offline (docs/lifecycle.md "Why is my run not running"): per workload, running or why not,
in the stack file's words, from synthetic cluster objects shaped as `oc get -o json` prints them. The scheduler's
messages are k8s v1.34's (pkg/scheduler: FitError.Error, noderesources `Insufficient %v`, tainttoleration, nodeaffinity),
and the taint form of earlier versions. Configs are the tests' own (tests/fixtures.py)."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import stacks
from cli.main import main
from components.bandwidth import job_name
from config import project
from config.stack import ClusterConfig
from tests import fixtures
from tests.helpers import ROOT
from tools import drift
from tools.status import report as status
from tools.status.cluster import launcher_refusal, read_cluster
from tools.status.reasons import scheduler_reasons

Obj = dict[str, Any]

GPU_MSG = "0/9 nodes are available: 1 node(s) had untolerated taint(s), 3 node(s) didn't match Pod's node affinity/selector, " \
    "5 Insufficient nvidia.com/gpu. preemption: 0/9 nodes are available: 4 Preemption is not helpful for scheduling, " \
    "5 No preemption victims found for incoming pod."  # fmt: skip
OLD_GPU_MSG = "0/9 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, " \
    "3 node(s) didn't match Pod's node affinity/selector, 5 Insufficient nvidia.com/gpu. preemption: 0/9 nodes are available: " \
    "4 Preemption is not helpful for scheduling, 5 No preemption victims found for incoming pod."  # fmt: skip


# --- a synthetic cluster ------------------------------------------------------------------------------------------


def declared(config: ClusterConfig) -> dict[str, Obj]:
    """The StatefulSets and Jobs the stack declares, by name, as the cluster holds them (replicas as declared)."""
    return {
        d.object["metadata"]["name"]: copy.deepcopy(d.object)
        for d in drift.declared_for(config, "all")
        if d.object["kind"] in ("StatefulSet", "Job")
    }


def pod(owner: Obj, index: int, node: str | None = "node-a", ready: bool = True, phase: str = "Running", **container: Any) -> Obj:
    """A pod of a StatefulSet or Job, built from its template as the controller builds it; `container` is the
    container status's state fields (state, lastState, restartCount)."""
    template = owner["spec"]["template"]
    name = f"{owner['metadata']['name']}-{index}"
    labels = dict(template["metadata"]["labels"])
    uid = owner["metadata"].get("uid")
    if owner["kind"] == "Job":
        labels["batch.kubernetes.io/job-name"] = owner["metadata"]["name"]
        labels.update({"batch.kubernetes.io/controller-uid": uid} if uid else {})
        name += "-x7k2p"
    # The controller's reference (with the owner's uid where the owner has one): status tells a workload's pods by it.
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"], "controller": True}
    ref.update({"uid": uid} if uid else {})
    spec = copy.deepcopy(template["spec"])
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if node:
        spec["nodeName"] = node
        conditions.append({"type": "PodScheduled", "status": "True"})
    statuses = [{"name": "training", "image": spec["containers"][0]["image"], "restartCount": 0, **container}] if node else []
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": owner["metadata"]["namespace"], "labels": labels, "ownerReferences": [ref]},
        "spec": spec,
        "status": {"phase": phase, "conditions": conditions, "containerStatuses": statuses},
    }


def pending(owner: Obj, index: int, message: str) -> Obj:
    p = pod(owner, index, node=None, ready=False, phase="Pending")
    p["status"]["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message})
    return p


def node(name: str, gpus: int = 4, vfs: int = 8, labels: dict[str, str] | None = None, taints: list[Obj] | None = None) -> Obj:
    allocatable = {"cpu": "120", "memory": "1000Gi", "nvidia.com/gpu": str(gpus)}
    allocatable.update({f"openshift.io/port{i}rdma": str(vfs) for i in (1, 2)})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", **(labels or {})}},
        "spec": {"taints": taints or [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": allocatable},
    }


def roce_nodes() -> list[Obj]:
    return [node(f"node-{c}") for c in "abcdefg"]


def event(kind: str, namespace: str, name: str, reason: str, message: str, at: str = "2026-11-25T10:00:00Z") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.1", "namespace": namespace},
        "involvedObject": {"kind": kind, "namespace": namespace, "name": name},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "lastTimestamp": at,
    }


def complete(
    job: Obj, ok: bool = True, reason: str = "BackoffLimitExceeded", message: str = "Job has reached the specified backoff limit"
) -> Obj:
    job["status"] = {"succeeded": job["spec"]["completions"]} if ok else {"failed": 1}
    condition = {"type": "Complete", "status": "True"} if ok else {"type": "Failed", "status": "True", "reason": reason, "message": message}
    job["status"]["conditions"] = [condition]
    return job


def running_roce() -> tuple[ClusterConfig, dict[str, Obj], list[Obj]]:
    """The roce fixture with everything running: dev on node-a/b, train on node-e/f, solo on node-g, the check done."""
    config = fixtures.config("roce")
    objs = declared(config)
    check = objs[job_name(config, config.bandwidth_checks[0])]
    complete(check)
    pods = [pod(objs["dev"], 0, "node-a"), pod(objs["dev"], 1, "node-b")]
    pods += [pod(objs["train-r1"], 0, "node-e"), pod(objs["train-r1"], 1, "node-f"), pod(objs["solo"], 0, "node-g")]
    return config, objs, pods


def of(result: status.StackStatus, name: str) -> status.WorkloadStatus:
    return next(w for w in result.workloads if w.config.endswith(f"[{name}]"))


def run(
    config: ClusterConfig, objs: dict[str, Obj], pods: list[Obj], *extra: Obj, logs: dict[str, str] | None = None
) -> status.StackStatus:
    return status.stack_status(config, "lab", None, [*objs.values(), *pods, *extra], logs)


# --- running, stopped, partly ready ------------------------------------------------------------------------------


class TestStates:
    def test_everything_running_is_ok_and_short(self) -> None:
        config, objs, pods = running_roce()
        result = run(config, objs, pods, *roce_nodes())
        assert result.ok
        assert [(w.config, w.state, w.ready, w.wanted) for w in result.workloads] == [
            ("workloads[dev]", "running", 2, 2),
            ("workloads[dev].tcp_variants[dev-tcp]", "stopped", 0, 0),
            ("workloads[train]", "running", 2, 2),
            ("workloads[solo]", "running", 1, 1),
        ]
        text = status.report(result)
        assert "  workloads[dev]: running, 2/2 pods ready\n" in text and "workloads[dev].tcp_variants[dev-tcp]: stopped\n" in text

    @pytest.mark.parametrize("kind", ["statefulset", "job"])
    def test_a_stopped_workload_with_no_pods_is_stopped_and_ok(self, kind: str) -> None:
        def stop(d: Obj) -> None:
            fixtures.workload(d, "train" if kind == "job" else "dev")["state"] = "stopped"

        config = fixtures.config("roce", stop)
        objs = declared(config)
        result = run(config, objs, [pod(objs["solo"], 0, "node-g")])
        stopped = of(result, "train" if kind == "job" else "dev")
        assert (stopped.state, stopped.ok, stopped.wanted, stopped.reasons) == ("stopped", True, 0, [])

    @pytest.mark.parametrize(("kind", "left"), [("statefulset", "pod(s) still on the cluster"), ("job", "its Job train-r1 is still on")])
    def test_a_stopped_workload_whose_pods_or_job_remain_says_so(self, kind: str, left: str) -> None:
        config, objs, pods = running_roce()
        stopped = fixtures.config("roce", lambda d: fixtures.workload(d, "train" if kind == "job" else "dev").update(state="stopped"))
        result = run(stopped, objs, [p for p in pods if kind == "statefulset" or "train" not in p["metadata"]["name"]])
        w = of(result, "train" if kind == "job" else "dev")
        assert w.state == "stopped" and w.ok and left in w.reasons[0]

    @pytest.mark.parametrize(("ready", "state"), [(0, "pending"), (1, "pending"), (2, "running")])
    def test_a_statefulset_counts_its_ready_pods(self, ready: int, state: str) -> None:
        config, objs, _ = running_roce()
        pods = [pod(objs["dev"], i, f"node-{'ab'[i]}", ready=i < ready) for i in range(2)]
        w = of(run(config, objs, pods), "dev")
        assert (w.state, w.ready, w.wanted, w.ok) == (state, ready, 2, state == "running")
        if ready < 2:
            assert w.reasons == [f"{2 - ready} of 2 pods pending: running, not ready yet"]

    def test_a_missing_object_is_missing(self) -> None:
        config, objs, pods = running_roce()
        del objs["dev"]
        w = of(run(config, objs, pods), "dev")
        assert (w.state, w.ok) == (
            "missing",
            False,
        ) and "StatefulSet dev is not on the cluster: `pulumi up -s lab` creates it" in w.reasons[0]

    def test_a_hand_scaled_statefulset_is_named(self) -> None:
        config, objs, pods = running_roce()
        objs["dev"]["spec"]["replicas"] = 1
        w = of(run(config, objs, pods[:1] + pods[2:]), "dev")
        assert "1 replicas on the cluster, 2 in the stack" in w.reasons[0] and not w.ok


class TestJobs:
    @pytest.mark.parametrize(("ok", "state"), [(True, "succeeded"), (False, "failed")])
    def test_a_finished_job(self, ok: bool, state: str) -> None:
        config, objs, pods = running_roce()
        complete(objs["train-r1"], ok)
        if not ok:
            pods[2] = pod(
                objs["train-r1"], 0, "node-e", ready=False, phase="Failed", state={"terminated": {"exitCode": 1, "reason": "Error"}}
            )
        w = of(run(config, objs, pods), "train")
        assert (w.state, w.ok) == (state, ok)
        if not ok:
            assert w.reasons[0] == "the Job failed (BackoffLimitExceeded: Job has reached the specified backoff limit)"
            assert w.reasons[1] == "1 of 2 pods failed: the command exited 1 (Error)"

    @pytest.mark.parametrize(("replaced", "state"), [(False, "pending"), (True, "running")])
    def test_a_job_retrying_a_failed_pod_says_why_it_failed(self, replaced: bool, state: str) -> None:
        config = fixtures.config("roce", lambda d: fixtures.workload(d, "train").update(backoff_limit=2))
        objs = declared(config)
        failed = pod(objs["train-r1"], 0, "node-e", ready=False, phase="Failed", state={"terminated": {"exitCode": 2, "reason": "Error"}})
        pods = [failed, pod(objs["train-r1"], 1, "node-f"), *([pod(objs["train-r1"], 0, "node-e")] if replaced else [])]
        w = of(run(config, objs, pods), "train")
        assert (w.state, w.ok) == (state, replaced)
        assert w.reasons[0].startswith("1 of 2 pods failed earlier: exit 2 (Error): the launcher would not start it")

    @pytest.mark.parametrize("done", [0, 1])
    def test_a_job_running_counts_its_finished_pods_as_ready(self, done: int) -> None:
        config, objs, pods = running_roce()
        objs["train-r1"]["status"] = {"active": 2 - done, "succeeded": done}
        train = [p for p in pods if "train" in p["metadata"]["name"]][done:]
        w = of(run(config, objs, [p for p in pods if "train" not in p["metadata"]["name"]] + train), "train")
        assert (w.state, w.ready, w.wanted, w.ok) == ("running", 2, 2, True)

    def test_a_job_of_an_earlier_run_is_not_counted(self) -> None:
        config, objs, pods = running_roce()
        old = copy.deepcopy(objs["train-r1"])
        old["metadata"]["name"] = "train-r0"
        w = of(run(config, objs, [p for p in pods if "train" not in p["metadata"]["name"]] + [pod(old, 0), pod(old, 1)]), "train")
        assert (w.ready, w.state) == (0, "pending") and w.reasons == ["2 of 2 pods not created: not created yet (no event says why)"]


# --- FailedScheduling -------------------------------------------------------------------------------------------


def crowded() -> tuple[ClusterConfig, dict[str, Obj], list[Obj]]:
    """The roce fixture with a third workload of h-kim holding node-c and node-d: dev gets one node of main, not two."""

    def add(d: Obj) -> None:
        big = copy.deepcopy(fixtures.workload(d, "dev"))
        big.update(name="big", user="h-kim", tcp_variants=[], mounts=[], ports=[], deepspeed_hostfile=None)
        d["workloads"].append(big)

    config = fixtures.config("roce", add)
    objs = declared(config)
    pods = [pod(objs["big"], 0, "node-c"), pod(objs["big"], 1, "node-d"), pod(objs["dev"], 0, "node-a")]
    return config, objs, pods


class TestScheduling:
    @pytest.mark.parametrize("message", [GPU_MSG, OLD_GPU_MSG], ids=["v1.34", "taint-named"])
    @pytest.mark.parametrize("nodes", [True, False], ids=["nodes", "no-nodes"])
    def test_too_few_free_gpus_names_the_node_set_and_who_holds_them(self, message: str, nodes: bool) -> None:
        config, objs, pods = crowded()
        pods.append(pod(objs["dev"], 1, "node-b", ready=False))  # the other pod of dev is elsewhere: its GPUs count too
        pods[-1] = pending(objs["dev"], 1, message)
        pods.append(pod(objs["solo"], 0, "node-b"))  # bob's pod on a main node, by hand
        result = run(config, objs, pods, *(roce_nodes() if nodes else []))
        w = of(result, "dev")
        assert w.state == "pending" and w.ready == 1
        assert w.reasons == [
            "1 of 2 pods pending: no node of main has 4 free GPUs (main: 4 nodes, 16 GPUs, 14 in use by ada, bob, h-kim; node_sets[main])"
        ]
        assert ("nodes: none in what was read" in " ".join(result.unreadable)) != nodes

    @pytest.mark.parametrize("nodes", [True, False], ids=["nodes", "no-nodes"])
    @pytest.mark.parametrize("resource", ["openshift.io/port1rdma", "openshift.io/port2rdma"])
    def test_too_few_vfs_names_the_resource_and_its_attachment(self, nodes: bool, resource: str) -> None:
        config, objs, pods = crowded()
        pods.append(
            pending(
                objs["dev"], 1, f"0/9 nodes are available: 4 node(s) didn't match Pod's node affinity/selector, 5 Insufficient {resource}."
            )
        )
        w = of(run(config, objs, pods, *([node(f"node-{c}", vfs=1) for c in "abcdefg"] if nodes else [])), "dev")
        attachment = f"; fabric.attachments[{int(resource[-5]) - 1}])"  # attachments have no name: by index
        reason = w.reasons[0]
        assert reason.startswith(f"1 of 2 pods pending: no node of main has 1 free VF of {resource} (")
        assert attachment in reason and "3 in use by ada, h-kim" in reason
        assert ("main: 4 nodes, 4 VFs" in reason) == nodes and ("the nodes are not readable" in reason) != nodes

    @pytest.mark.parametrize(
        ("message", "taints", "expected"),
        [
            ("0/9 nodes are available: 4 node(s) had untolerated taint(s), 5 node(s) didn't match Pod's node affinity/selector.",
             [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
             "node node-a of main has the taint dedicated=ml:NoSchedule, which the pods do not tolerate (gpu_tolerations"),
            ("0/9 nodes are available: 4 node(s) had untolerated taint {dedicated: ml}, "
             "5 node(s) didn't match Pod's node affinity/selector.",
             None, "4 node(s) have a taint {dedicated: ml} the pods do not tolerate (gpu_tolerations"),
            ("0/9 nodes are available: 4 node(s) had untolerated taint(s), 5 node(s) didn't match Pod's node affinity/selector.",
             None, "4 node(s) have a taint the pods do not tolerate (gpu_tolerations"),
            ("0/9 nodes are available: 4 node(s) were unschedulable, 5 node(s) didn't match Pod's node affinity/selector.",
             None, "4 node(s) are cordoned (unschedulable)"),
        ],
        ids=["taint-from-nodes", "taint-named", "taint-unnamed", "cordoned"],
    )  # fmt: skip
    def test_a_taint_or_cordon_the_pods_cannot_pass(self, message: str, taints: list[Obj] | None, expected: str) -> None:
        config, objs, _ = running_roce()
        nodes = (
            [node(f"node-{c}", taints=[*taints, {"key": "nvidia.com/gpu", "effect": "NoSchedule"}]) for c in "abcdefg"] if taints else []
        )
        w = of(run(config, objs, [pending(objs["dev"], i, message) for i in range(2)], *nodes), "dev")
        assert w.reasons[0].startswith("2 of 2 pods pending: no node of main takes the pods: ")
        assert expected in w.reasons[0]
        assert ("the nodes are not readable" in w.reasons[0]) != bool(taints)

    @pytest.mark.parametrize(
        ("nodes", "expected"),
        [
            ([node("node-a"), node("node-b"), node("node-c")], "the cluster has no node node-d of main (node_sets[main])"),
            ([node(f"node-{c}", labels={"nvidia.com/gpu.present": "false"}) for c in "abcd"],
             "node node-a of main lacks the label nvidia.com/gpu.present=true the pods select (gpu_node_selector)"),
            ([], "9 node(s) are not among the nodes of main (node_sets[main]) or lack the labels nvidia.com/gpu.present=true"),
        ],
        ids=["absent-node", "label", "no-nodes"],
    )  # fmt: skip
    def test_a_selector_or_pin_that_matches_no_node(self, nodes: list[Obj], expected: str) -> None:
        config, objs, _ = running_roce()
        message = "0/9 nodes are available: 9 node(s) didn't match Pod's node affinity/selector. preemption: 0/9 nodes are available: " \
            "9 Preemption is not helpful for scheduling."  # fmt: skip
        w = of(run(config, objs, [pending(objs["dev"], 0, message), pod(objs["dev"], 1, "node-a")], *nodes), "dev")
        assert w.state == "pending" and expected in w.reasons[0], w.reasons

    @pytest.mark.parametrize(
        ("message", "reasons", "other"),
        [
            (GPU_MSG, {"node(s) had untolerated taint(s)": 1, "node(s) didn't match Pod's node affinity/selector": 3,
                       "Insufficient nvidia.com/gpu": 5}, ""),
            ("0/3 nodes are available: 2 Insufficient cpu, 2 Insufficient nvidia.com/gpu, 1 node(s) didn't match pod anti-affinity rules.",
             {"Insufficient cpu": 2, "Insufficient nvidia.com/gpu": 2, "node(s) didn't match pod anti-affinity rules": 1}, ""),
            ("0/6 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/6 nodes are available: "
             "6 Preemption is not helpful for scheduling.", {}, "pod has unbound immediate PersistentVolumeClaims"),
            ("no nodes available to schedule pods", {}, "no nodes available to schedule pods"),
        ],
        ids=["filters", "several-per-node", "prefilter", "other"],
    )  # fmt: skip
    def test_the_schedulers_message_is_read(self, message: str, reasons: dict[str, int], other: str) -> None:
        found, said = scheduler_reasons(message)
        assert (dict(found), said) == (reasons, other)

    @pytest.mark.parametrize(
        ("message", "expected"),
        [
            ("0/9 nodes are available: 2 node(s) didn't match pod anti-affinity rules, "
             "7 node(s) didn't match Pod's node affinity/selector.",
             "2 node(s) of main run a pod of it already (one pod per node)"),
            ("0/9 nodes are available: 4 Insufficient cpu, 5 node(s) didn't match Pod's node affinity/selector.",
             "no node of main has 32 free CPUs (workloads[dev].cpu)"),
            ("0/9 nodes are available: 4 Insufficient memory, 5 node(s) didn't match Pod's node affinity/selector.",
             "no node of main has 64Gi of free memory (workloads[dev].memory)"),
            ("0/9 nodes are available: 4 node(s) didn't have free ports for the requested pod ports, 5 node(s) had untolerated taint(s).",
             "4 node(s): node(s) didn't have free ports for the requested pod ports (the scheduler)"),
        ],
        ids=["one-per-node", "cpu", "memory", "other-filter"],
    )  # fmt: skip
    def test_other_reasons_on_the_sets_nodes(self, message: str, expected: str) -> None:
        config, objs, pods = running_roce()
        w = of(run(config, objs, [pods[0], pending(objs["dev"], 1, message)]), "dev")
        assert w.reasons == [f"1 of 2 pods pending: {expected}"]

    def test_an_unknown_reason_is_quoted(self) -> None:
        config, objs, _ = running_roce()
        message = "0/6 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: not helpful."
        w = of(run(config, objs, [pending(objs["dev"], i, message) for i in range(2)]), "dev")
        assert w.reasons == ["2 of 2 pods pending: the scheduler says: pod has unbound immediate PersistentVolumeClaims"]

    def test_the_message_is_taken_from_the_event_when_the_condition_has_none(self) -> None:
        config, objs, pods = crowded()
        p = pending(objs["dev"], 1, "")
        ev = event("Pod", "team-a", p["metadata"]["name"], "FailedScheduling", GPU_MSG)
        w = of(run(config, objs, [*pods, p], ev), "dev")
        assert "no node of main has 4 free GPUs" in w.reasons[0]


# --- FailedCreate ------------------------------------------------------------------------------------------------


SCC_DENIED = 'pods "{pod}" is forbidden: unable to validate against any security context constraint: ' \
    '[provider "gpu-rdma": Forbidden: not usable by user or serviceaccount, provider "restricted-v2": Forbidden: ' \
    'not usable by user or serviceaccount]'  # fmt: skip
SCC_INVALID = 'pods "{pod}" is forbidden: unable to validate against any security context constraint: [provider gpu-rdma: ' \
    '.containers[0].capabilities.add: Invalid value: "IPC_LOCK": capability may not be added]'  # fmt: skip
# What OpenShift's admission says when the SCC a pod pins is not there, behind the live tier's webhook prefix.
SCC_MISSING = 'admission webhook "scc.security.openshift.io" denied the request: pods "{pod}" is forbidden: failed to ' \
    'retrieve the required SCC "gpu-rdma": securitycontextconstraints.security.openshift.io "gpu-rdma" not found'  # fmt: skip
QUOTA = 'pods "{pod}" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=4, used: ' \
    'requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8'  # fmt: skip


class TestFailedCreate:
    @pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
    @pytest.mark.parametrize(
        ("message", "expected"),
        [
            (SCC_DENIED, "the SCC admission refuses the pods: service account trainer may not use the SCC gpu-rdma (security.scc; "
                         "security.service_accounts[trainer]): its grant is the platform tier's "
                         "(`pulumi up --refresh` of the platform stack)"),
            (SCC_INVALID, 'the SCC gpu-rdma (security.scc) does not admit the pods: [provider gpu-rdma: .containers[0].capabilities.add: '
                          'Invalid value: "IPC_LOCK": capability may not be added]'),
            (SCC_MISSING, "the SCC admission refuses the pods: the SCC gpu-rdma they pin (security.scc) is not on the cluster: the "
                          "platform tier creates it (`pulumi up --refresh` of the platform stack)"),
            (QUOTA, "the quota gpu-quota of namespace team-a is full: requested requests.nvidia.com/gpu=4, used requests.nvidia.com/gpu=8, "
                    "limited requests.nvidia.com/gpu=8 (asked by workloads[NAME].gpus_per_node)"),
        ],
        ids=["scc-grant", "scc-refuses", "scc-missing", "quota"],
    )  # fmt: skip
    def test_a_refusal_names_the_grant_or_quota_and_the_config(self, kind: str, message: str, expected: str) -> None:
        config, objs, pods = running_roce()
        obj = objs["dev" if kind == "StatefulSet" else "train-r1"]
        name = obj["metadata"]["name"]
        text = (f"create Pod {name}-0 in StatefulSet {name} failed error: " if kind == "StatefulSet" else "Error creating: ") + message
        ev = event(kind, "team-a", name, "FailedCreate", text.format(pod=f"{name}-0"))
        kept = [p for p in pods if not p["metadata"]["name"].startswith(name)]
        w = of(run(config, objs, kept, ev), "dev" if kind == "StatefulSet" else "train")
        assert (w.state, w.ok) == ("pending", False)
        assert w.reasons == ["2 of 2 pods not created: " + expected.replace("NAME", "dev" if kind == "StatefulSet" else "train")]

    def test_a_grant_the_stack_does_not_make_is_an_admins(self) -> None:
        config = fixtures.config("roce", lambda d: d["security"].update(grant=False))
        objs = declared(config)
        ev = event("StatefulSet", "team-a", "dev", "FailedCreate", SCC_DENIED.format(pod="dev-0"))
        w = of(run(config, objs, [], ev), "dev")
        assert w.reasons[0].endswith(
            "the stack does not grant it (security.grant): a cluster admin runs "
            "`oc adm policy add-scc-to-user gpu-rdma -z trainer -n team-a`"
        )

    def test_the_newest_event_is_the_one_told(self) -> None:
        config, objs, pods = running_roce()
        old = event("StatefulSet", "team-a", "dev", "FailedCreate", QUOTA.format(pod="dev-0"), at="2026-11-25T09:00:00Z")
        new = event("StatefulSet", "team-a", "dev", "FailedCreate", SCC_DENIED.format(pod="dev-0"), at="2026-11-25T10:00:00Z")
        w = of(run(config, objs, pods[2:], new, old), "dev")
        assert "SCC admission" in w.reasons[0]


# --- the containers ----------------------------------------------------------------------------------------------


class TestContainers:
    @pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff", "InvalidImageName"])
    @pytest.mark.parametrize(
        ("workload", "entry"),
        [("dev", "workloads[dev].image"), ("solo", "workloads[solo].image"), ("dev-tcp", "workloads[dev].image")],
    )
    def test_an_image_that_cannot_be_pulled_names_the_entry(self, reason: str, workload: str, entry: str) -> None:
        config = fixtures.config("roce", lambda d: fixtures.workload(d, "dev")["tcp_variants"][0].update(state="running", alongside=True))
        objs = declared(config)
        waiting = {"waiting": {"reason": reason, "message": 'Back-off pulling image "x"'}}
        pods = [
            pod(objs[workload], i, f"node-{'abcd'[i]}", ready=False, phase="Pending", state=waiting)
            for i in range(1 if workload == "solo" else 2)
        ]
        w = of(run(config, objs, pods), workload)
        image = pods[0]["spec"]["containers"][0]["image"]
        assert w.state == "pending"
        assert w.reasons[0].startswith(f"{len(pods)} of {len(pods)} pods pending: the image {image} cannot be pulled ({reason}: ")
        assert entry in w.reasons[0]
        assert ("built by images[trainer]" in w.reasons[0]) == (workload != "solo")

    @pytest.mark.parametrize(
        ("last", "expected"),
        [
            ({"exitCode": 2, "reason": "Error"}, "exit 2 (Error): the launcher would not start it"),
            ({"exitCode": 137, "reason": "OOMKilled"}, "killed for memory (OOMKilled, exit 137): raise workloads[dev].memory_limit"),
            ({"exitCode": 127, "reason": "Error"}, "exit 127 (Error): the command could not be executed (workloads[dev].args)"),
            ({"exitCode": 1, "reason": "Error", "message": "Traceback: boom"}, "the command exited 1 (Error): Traceback: boom"),
        ],
        ids=["launcher", "oom", "exec", "command"],
    )
    def test_a_crash_loop_tells_the_last_exit(self, last: Obj, expected: str) -> None:
        config, objs, pods = running_roce()
        crash = {"state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}, "lastState": {"terminated": last}}
        pods[1] = pod(objs["dev"], 1, "node-b", ready=False, restartCount=7, **crash)
        w = of(run(config, objs, pods), "dev")
        assert (w.state, w.ready, w.ok) == ("failed", 1, False)
        assert len(w.reasons) == 1 and w.reasons[0].startswith(
            f"1 of 2 pods failing: restarting (CrashLoopBackOff, 7 restarts): last {expected}"
        )

    @pytest.mark.parametrize("now", ["waiting", "running", "terminated"])
    def test_a_pod_the_launcher_stopped_says_the_launchers_first_error(self, now: str) -> None:
        """The cause is the launcher's own, from the start report its log ends with (read_cluster reads that log).
        Between two back-offs the container runs, Ready without a probe, until the launcher refuses it again; and it
        has just exited before the kubelet backs off: in each, the pod is failing, not ready."""
        config, objs, pods = running_roce()
        refused = {"exitCode": 2, "reason": "Error"}
        state = {"waiting": {"reason": "CrashLoopBackOff"}, "running": {"startedAt": "2026-12-01T00:00:00Z"}, "terminated": refused}
        crash = {"state": {now: state[now]}, "lastState": {"terminated": refused}}
        pods[1] = pod(objs["dev"], 1, "node-b", ready=now == "running", restartCount=3, **crash)
        cause = "no ACTIVE RDMA port with link layer RoCE v2 under /sys/class/infiniband (found: none)"
        report = {"schema": "launcher-report/v1", "verdict": "would-not-start", "errors": [cause, "a second one"], "warnings": []}
        name, container = pods[1]["metadata"]["name"], pods[1]["spec"]["containers"][0]["name"]
        logs = {f"team-a/pod/{name}/{container}": f"the human report\nLAUNCHER_REPORT {json.dumps(report)}\n"}
        w = of(run(config, objs, pods, logs=logs), "dev")
        assert (w.state, w.ready, w.ok) == ("failed", 1, False)
        assert w.reasons == [
            f"1 of 2 pods failing: restarting (CrashLoopBackOff, 3 restarts): last exit 2 (Error): the launcher would not start it: "
            f"{cause} (its report heads the log)"
        ]
        assert launcher_refusal("LAUNCHER_REPORT {not json") is None

    def test_a_container_waiting_for_its_config_quotes_the_kubelet(self) -> None:
        config, objs, pods = running_roce()
        waiting = {"waiting": {"reason": "CreateContainerConfigError", "message": 'secret "hf-secret" not found'}}
        pods[2] = pod(objs["train-r1"], 0, "node-e", ready=False, phase="Pending", state=waiting)
        w = of(run(config, objs, pods), "train")
        assert w.reasons == ['1 of 2 pods pending: its container waits: CreateContainerConfigError: secret "hf-secret" not found']


# --- bandwidth checks ----------------------------------------------------------------------------------------------


PASS_LOG = (
    "launcher: ...\nbandwidth check: PASS (mode rdma)\n  measured: 180.00 GB/s at the largest message, 1073741824 B\n  threshold: x\n"
)
FAIL_LOG = "bandwidth check: FAIL (mode rdma)\n  transport: socket\n  FAIL: NCCL used the socket transport in rdma mode (NET/Socket).\n"


class TestChecks:
    @pytest.mark.parametrize(
        ("done", "log", "state", "verdict"),
        [
            (True, PASS_LOG, "passed", "bandwidth check: PASS (mode rdma); measured: 180.00 GB/s at the largest message, 1073741824 B"),
            (False, FAIL_LOG, "failed",
             "bandwidth check: FAIL (mode rdma); FAIL: NCCL used the socket transport in rdma mode (NET/Socket)."),
            (True, None, "passed", None),
            (False, "no verdict in this log\n", "failed", None),
        ],
        ids=["pass", "fail", "no-log", "no-verdict"],
    )  # fmt: skip
    def test_the_last_verdict(self, done: bool, log: str | None, state: str, verdict: str | None) -> None:
        config, objs, pods = running_roce()
        job = job_name(config, config.bandwidth_checks[0])
        complete(objs[job], done, "DeadlineExceeded", "Job was active longer than specified deadline")
        result = run(config, objs, pods, logs={f"team-a/{job}": log} if log is not None else None)
        check = result.checks[0]
        assert (check.config, check.job, check.state, check.verdict, check.ok, result.ok) == (
            "bandwidth_checks[fabric]",
            job,
            state,
            verdict,
            done,
            done,
        )
        assert done or check.reasons[0] == "the Job failed (DeadlineExceeded: Job was active longer than specified deadline)"
        assert f"bandwidth_checks[fabric]: {state} (Job {job})" in status.report(result)

    def test_a_check_without_its_job_is_missing_and_a_disabled_one_is_not_listed(self) -> None:
        config, objs, pods = running_roce()
        del objs[job_name(config, config.bandwidth_checks[0])]
        assert run(config, objs, pods).checks[0].state == "missing"
        off = fixtures.config("roce", lambda d: d["bandwidth_checks"][0].update(enabled=False))
        assert run(off, objs, pods).checks == []


# --- the command ---------------------------------------------------------------------------------------------------


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose Pulumi stack `lab` deploys a YAML copy of the roce fixture (so lines are known) to context `lab`."""
    data = fixtures.roce()
    data["name"] = "lab"
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    for name, tier in (("lab", "project"), ("lab-platform", "platform")):
        stack = {
            "gpu-training:configFile": "lab.yaml",
            "gpu-training:cluster": "lab",
            "gpu-training:tier": tier,
            "kubernetes:context": "lab",
        }
        (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": stack}), encoding="utf-8")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    return tmp_path


def save(folder: Path, objects: list[Obj]) -> str:
    path = folder / "live.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
    return str(path)


def lab_cluster(broken: bool) -> list[Obj]:
    config = stacks.load("lab")
    objs = declared(config)
    complete(objs[job_name(config, config.bandwidth_checks[0])])
    pods = [
        pod(objs["dev"], 0, "node-a"),
        pod(objs["train-r1"], 0, "node-e"),
        pod(objs["train-r1"], 1, "node-f"),
        pod(objs["solo"], 0, "node-g"),
    ]
    pods.append(pending(objs["dev"], 1, GPU_MSG) if broken else pod(objs["dev"], 1, "node-b"))
    return [*objs.values(), *pods, *roce_nodes()]


class TestCommand:
    @pytest.mark.parametrize(("broken", "code"), [(False, 0), (True, 1)])
    def test_exit_status_and_lines_in_the_stack_files_words(
        self, lab: Path, broken: bool, code: int, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["status", "lab", "--live", save(lab, lab_cluster(broken))]) == code
        out = capsys.readouterr().out
        if broken:
            assert "  workloads[dev] (lab.yaml:" in out
            assert (
                "): pending, 1/2 pods ready: 1 of 2 pods pending: no node of main has 4 free GPUs (main: 4 nodes, 16 GPUs, 4 in use by "
                "ada; the rest is held by pods outside the stack's namespaces; node_sets[main] (lab.yaml:" in out
            )
        else:
            assert "  workloads[dev] (lab.yaml:" in out and "): running, 2/2 pods ready\n" in out
        assert "  bandwidth_checks[fabric] (lab.yaml:" in out and ": passed (Job fabric-" in out

    def test_the_items_of_a_list_alone_read_as_the_list(self, lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """`oc get ... -o json | jq .items` saved: the objects, not one object that is a list."""
        objects = lab_cluster(False)
        assert main(["status", "lab", "--live", save(lab, objects)]) == 0
        listed = capsys.readouterr().out
        (lab / "items.json").write_text(json.dumps(objects), encoding="utf-8")
        assert main(["status", "lab", "--live", str(lab / "items.json")]) == 0
        assert capsys.readouterr().out == listed

    @pytest.mark.parametrize(("args", "said"), [
        (["status", "nope"], "no Pulumi.nope.yaml"),
        (["status", "lab-platform"], "deploys the platform tier, which runs no pods"),
        (["status", "lab", "--live", "missing.json"], "missing.json"),
    ])  # fmt: skip
    def test_usage_errors_exit_2_with_one_line(self, lab: Path, args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(args) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err

    @pytest.mark.parametrize("broken", [False, True])
    def test_json_validates_against_the_published_schema(self, lab: Path, broken: bool, capsys: pytest.CaptureFixture[str]) -> None:
        main(["status", "lab", "--json", "--live", save(lab, lab_cluster(broken))])
        data = json.loads(capsys.readouterr().out)
        schema = json.loads((ROOT / status.SCHEMA_FILE).read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(data)) == []
        assert data["ok"] is not broken and data["schema_version"] == status.SCHEMA_VERSION
        assert data["context"] is None  # a saved file was read, not the context
        assert [w["config"] for w in data["workloads"]][:2] == ["workloads[dev]", "workloads[dev].tcp_variants[dev-tcp]"]

    def test_the_published_schema_is_what_the_command_prints(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["status-schema"]) == 0
        printed = capsys.readouterr().out
        assert (ROOT / status.SCHEMA_FILE).read_text(encoding="utf-8") == printed, (
            f"{status.SCHEMA_FILE} is stale: run `.venv/bin/python -m stacks status-schema > {status.SCHEMA_FILE}` and commit it"
        )
        schema = json.loads(printed)
        assert schema["$id"].endswith(":v1") and all(o["additionalProperties"] is False for o in [schema, *schema["$defs"].values()])


# --- reading the cluster -------------------------------------------------------------------------------------------


def fake_oc(folder: Path, cluster: list[Obj], nodes: str, logs: str = PASS_LOG, previous: str | None = None) -> str:
    """An `oc` that answers `get` per namespace and kind list from `cluster`, refuses what `nodes` says, prints `logs`
    (`previous` for `logs --previous`, if given), and records every call (to show it only reads)."""
    data = folder / "cluster.json"
    data.write_text(json.dumps(cluster), encoding="utf-8")
    script = folder / "oc"
    script.write_text(
        f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
open({str(folder / "calls")!r}, "a").write(" ".join(args) + "\\n")
items = json.load(open({str(data)!r}))
if args[0] == "logs":
    sys.stdout.write({previous!r} if "--previous" in args and {previous!r} is not None else {logs!r}); sys.exit(0)
if args[1] == "nodes":
    if {nodes!r} == "forbidden":
        sys.stderr.write('Error from server (Forbidden): nodes is forbidden: User "alice" cannot list resource "nodes"\\n'); sys.exit(1)
    print(json.dumps({{"kind": "List", "items": [o for o in items if o["kind"] == "Node"]}})); sys.exit(0)
if args[0] == "get" and "-n" in args:
    ns = args[args.index("-n") + 1]
    if ns == "team-b" and {nodes!r} == "refused":
        sys.stderr.write('Error from server (Forbidden): pods is forbidden\\n'); sys.exit(1)
    print(json.dumps({{"kind": "List", "items": [o for o in items if o["kind"] != "Node" and o["metadata"].get("namespace") == ns]}}))
""",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return str(script)


class TestReader:
    @pytest.mark.parametrize("nodes", ["readable", "forbidden"])
    def test_nodes_unreadable_still_say_what_they_can(self, tmp_path: Path, nodes: str) -> None:
        config, objs, pods = crowded()
        pods.append(pending(objs["dev"], 1, GPU_MSG))
        complete(objs[job_name(config, config.bandwidth_checks[0])])
        tool = fake_oc(tmp_path, [*objs.values(), *pods, *roce_nodes()], nodes)
        objects, logs, unreadable = read_cluster(config, "lab", tool)
        result = status.stack_status(config, "lab", "lab", objects, logs, unreadable)
        reason = of(result, "dev").reasons[0]
        assert "no node of main has 4 free GPUs (main: 4 nodes, 16 GPUs, 12 in use by ada, h-kim" in reason
        assert (unreadable == []) == (nodes == "readable")
        if nodes == "forbidden":
            assert unreadable[0].startswith("nodes (Error from server (Forbidden): nodes is forbidden")
            assert "not read: nodes (Error from server (Forbidden)" in status.report(result)
        assert result.checks[0].verdict is not None and result.checks[0].verdict.startswith("bandwidth check: PASS")
        calls = (tmp_path / "calls").read_text(encoding="utf-8").splitlines()
        assert {c.split()[0] for c in calls} == {"get", "logs"} and all("--context lab" in c for c in calls)
        assert sum(1 for c in calls if c.startswith("get statefulsets.apps,jobs.batch,pods,events -n ")) == 2  # one per namespace

    def test_a_container_restarted_before_its_log_is_read_still_says_the_launchers_error(self, tmp_path: Path) -> None:
        """`get` saw the run the launcher stopped; the kubelet started the next one before `logs` read it, so the current
        log has no report yet and the stopped run's log is the previous one."""
        config, objs, pods = running_roce()
        refused = {"terminated": {"exitCode": 2, "reason": "Error"}}
        pods[1] = pod(objs["dev"], 1, "node-b", ready=False, restartCount=1, state=refused, lastState=refused)
        report = {"schema": "launcher-report/v1", "verdict": "would-not-start", "errors": ["CapEff lacks IPC_LOCK"], "warnings": []}
        tool = fake_oc(
            tmp_path, [*objs.values(), *pods, *roce_nodes()], "readable", "starting\n", f"LAUNCHER_REPORT {json.dumps(report)}\n"
        )
        result = status.stack_status(config, "lab", "lab", *read_cluster(config, "lab", tool))
        assert "exit 2 (Error): the launcher would not start it: CapEff lacks IPC_LOCK" in of(result, "dev").reasons[0]
        calls = [c for c in (tmp_path / "calls").read_text(encoding="utf-8").splitlines() if c.startswith("logs -n team-a pod/")]
        assert len(calls) == 2 and "--previous" in calls[1], calls

    def test_a_namespace_the_cluster_refuses_is_one_error(self, tmp_path: Path) -> None:
        config, objs, pods = running_roce()
        with pytest.raises(stacks.ConfigError, match="-n team-b` failed: Error from server \\(Forbidden\\)"):
            read_cluster(config, None, fake_oc(tmp_path, [*objs.values(), *pods], "refused"))

    def test_no_oc_nor_kubectl_is_one_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("PATH", os.devnull)
        with pytest.raises(stacks.ConfigError, match="neither is on PATH"):
            read_cluster(fixtures.config("tcp"), None)
