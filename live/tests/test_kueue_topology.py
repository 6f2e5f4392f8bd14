"""Level 3: queued runs are admitted whole on the NODES, not just in the quota (issue 36), against the real Kueue
(v0.17.0, live/kueue.py), the real kube-scheduler and kwok nodes, the program's own objects through real `pulumi up`s.

The tests' config (tests/fixtures.py `tcp`, queued, deployed as barcelona's two tiers as in test_kueue.py): one node
set `qb` of 3 nodes x 8 GPUs (live/nodes.py), two multi-node workloads that the quota admits together but whose pods
need 4 nodes, one pod per node. In order, on ONE control plane with Kueue running before the first `up`:

1. Without Topology Aware Scheduling (queueing.topology_aware false, the default), the issue's case: gamma 2 x 4 GPUs
   and delta 2 x 8, quota 24 (the set's 24 GPUs). `python -m stacks check` refuses it at the queue's line, naming the
   fixes; with the one it names that keeps the GPU quota (`pods: 3`, one pod per node), both started at once: exactly
   one runs whole, the other has no pod on a node (gated by Kueue, not admitted: no GPU, no quota); stopping the first
   runs the second whole; starting the first again makes it wait while the second runs (the mirror), and stopping
   the second runs it whole.
2. With Topology Aware Scheduling (the platform tier's Topology, flavors naming it, pods asking for it), and a pod of
   another project, not queued, holding 4 GPUs of one node: gamma 2 x 5 and delta 2 x 7 (more than half a node each:
   TAS sees one pod per node), quota 24 again: exactly one runs whole, the other waits with no pod on a node and
   `python -m stacks status` says why in the config's words; stopping the first runs the second. Then `big`, 3 x 5
   GPUs (15 of the quota's 24): Kueue never admits it while the other project's pod leaves one node 4 GPUs (status
   says why); once that pod is gone and Kueue looks again (a run of its queue, a Job, ends), it runs whole.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from config.kube import GPU
from live import clusters, nodes, toolchain
from live.controlplane import ControlPlane
from live.kueue import ADMISSION_GATE, API, Kueue, condition, holds, workload_of
from live.tests.harness import PULUMI_STACKS, Project, failure, kubeconfig_of, project_copy, pulumi_env, yaml_config
from live.tests.test_kueue import EXIT, Release, field, of_workload, pods, running_whole, until, waiting_whole
from live.tests.test_scheduling import status_of
from tests import fixtures

CLUSTER = "barcelona"  # a committed cluster with two tiers' stack files; what they deploy is the tests' config
PLATFORM, PROJECT = (next(s.name for s in PULUMI_STACKS if s.cluster == CLUSTER and s.tier == t) for t in ("platform", "project"))
SET = "qb"
NODES = 3
GPUS_PER_NODE = 8
CLUSTER_QUEUE = "gpu"
NAMESPACE = "proj"
OTHER = "other"  # another project's namespace: not managed by Kueue, its pods not queued
READY_TIMEOUT = 20  # waitForPodsReady.timeout, s
SETTLE = 4.0  # s: long enough for Kueue to admit a waiting run if it were going to (it admits within a second)


def config(tas: bool, sizes: dict[str, tuple[int, int]], running: tuple[str, ...], quota: dict[str, str] | None = None) -> dict[str, Any]:
    """The tcp fixture queued as barcelona, its one node set `qb` (3 x 8 GPUs, CPU and memory stated, labelled), and
    one workload per `sizes` entry (name: pods, GPUs per pod), the `running` ones running."""
    d = fixtures.data("tcp")
    d["name"] = CLUSTER
    d["queueing"] = {"cluster_queue": CLUSTER_QUEUE, "topology_aware": tas}
    if quota:
        d["queueing"]["quota"] = {SET: quota}
    d["node_sets"] = [{"name": SET, "count": NODES, "gpus_per_node": GPUS_PER_NODE, "allocatable_cpu": "64",
                       "allocatable_memory": "512Gi", "labels": {"gpu-pool": SET}}]  # fmt: skip
    base = fixtures.workload(d, "one")
    d["workloads"] = [
        {**copy.deepcopy(base), "name": name, "nodes": pods, "gpus_per_node": gpus, "state": "running" if name in running else "stopped",
         "kind": "job" if name in JOBS else "statefulset"}
        for name, (pods, gpus) in sizes.items()
    ]  # fmt: skip
    return d


ISSUE = {"gamma": (2, 4), "delta": (2, 8)}  # 8 + 16 GPUs: the quota's 24, on 4 nodes
# Each multi-node run's pods take more than half a node: Topology Aware Scheduling finds one per node.
WIDE = {"gamma": (2, 5), "delta": (2, 7), "big": (3, 5), "tiny": (1, 1)}
JOBS = {"tiny"}  # a training Job: it ends, and Kueue marks its Workload Finished itself


class Gang:
    def __init__(self, project: Project, plane: ControlPlane, tools: dict[str, Path | str]) -> None:
        self.project = project
        self.plane = plane
        self.tools = tools

    def up(self, data: dict[str, Any], *stacks_: str) -> None:
        yaml_config(self.project, CLUSTER, data)
        for stack in stacks_:
            result = self.project.drive(stack, "up")
            assert result["ok"], failure(result)

    def check(self, data: dict[str, Any], name: str) -> subprocess.CompletedProcess[str]:
        root = self.project.root
        path = root / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        env = {**self.project.env, "PYTHONPATH": str(root)}
        return subprocess.run(
            [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=root, env=env, capture_output=True, text=True, timeout=120
        )

    def status_line(self, name: str) -> tuple[int, str]:
        done = status_of(self.project, self.tools, PROJECT)
        line = next((ln for ln in done.stdout.splitlines() if f"workloads[{name}]" in ln), "")
        return done.returncode, line or done.stdout + done.stderr

    def admitted(self, name: str) -> bool:
        uid = str(field(self.plane, f"apps/v1/namespaces/{NAMESPACE}/statefulsets/{name}", "metadata", "uid") or "")
        return bool(uid) and holds(workload_of(self.plane, NAMESPACE, uid), "Admitted")

    def whole(self, name: str, count: int = 2) -> list[dict[str, Any]]:
        return running_whole(self.plane, NAMESPACE, of_workload(name), count)

    def runs_whole_once_stopped(self, running: str, stopped: str) -> None:
        """`running` runs whole once `stopped` (its StatefulSet at 0 replicas) released its quota (a Workload Kueue
        v0.17.0 left holding it named by `status`, then deleted: test_kueue.Release)."""
        self.released(stopped).until(f"{running} runs whole", lambda: self.whole(running), explain=self.state)

    def released(self, stopped: str) -> Release:
        return Release(self.plane, NAMESPACE, stopped, self.status_line)

    def held(self, name: str) -> list[dict[str, Any]]:
        return waiting_whole(self.plane, NAMESPACE, of_workload(name))

    def one_runs_the_other_waits(self, a: str, b: str) -> tuple[str, str]:
        """Exactly one of `a` and `b` runs whole and the other waits whole; (the running one, the waiting one)."""

        def decided() -> tuple[str, str] | None:
            for first, second in ((a, b), (b, a)):
                if self.whole(first) and len(self.held(second)) == 2:
                    return first, second
            return None

        first, second = until(f"one of {a} and {b} runs whole, the other waits whole", decided, explain=self.state)
        time.sleep(SETTLE)  # and it stays so: Kueue does not admit the waiting one too
        assert self.whole(first), f"{first} still runs whole\n{self.state()}"
        assert len(self.held(second)) == 2 and not self.admitted(second), f"{second} waits: no pod placed, not admitted\n{self.state()}"
        return first, second

    def state(self) -> str:
        out = []
        for o in (self.plane.get(f"/apis/{API}/namespaces/{NAMESPACE}/workloads") or {}).get("items", []):
            conditions = [(c["type"], c["status"], c.get("reason"), c.get("message")) for c in o.get("status", {}).get("conditions", [])]
            meta = o["metadata"]
            owners = [(r["kind"], r["name"]) for r in meta.get("ownerReferences", [])]
            out.append(
                f"Workload {meta['name']}: {conditions} owners {owners} finalizers {meta.get('finalizers')} "
                f"deleting {meta.get('deletionTimestamp')}"
            )
        for p in (self.plane.get(f"/api/v1/namespaces/{NAMESPACE}/pods") or {}).get("items", []):
            gates = [g["name"] for g in p["spec"].get("schedulingGates", [])]
            out.append(f"Pod {p['metadata']['name']}: node {p['spec'].get('nodeName')} gates {gates} {condition(p, 'PodScheduled')}")
        return "\n".join(out)


@pytest.fixture(scope="module")
def gang(
    tools: dict[str, Path | str],
    pulumi_tools: dict[str, Path],
    sim_tools: dict[str, Path],
    queue_tools: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gang]:
    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    work = tmp_path_factory.mktemp("gang")
    bins = {**{n: Path(tools[n]) for n in toolchain.LEVEL1}, **sim_tools}
    plane = ControlPlane(CLUSTER, work / CLUSTER, bins).start()
    try:
        first = stacks.validate(config(False, ISSUE, (), {"pods": str(NODES)}), "live")
        clusters.install_crds(plane)
        clusters.seed(plane, first)
        plane.make_nodes(nodes.nodes(first))
        Kueue(plane, queue_tools["kueue"], pods_ready_timeout=READY_TIMEOUT, backoff_seconds=5).start()
        (work / "state").mkdir()
        env = pulumi_env(
            [p.parent for p in pulumi_tools.values()], kubeconfig_of([plane], work / "kubeconfig"), work / "state", work / "home"
        )
        yield Gang(Project(project_copy(work / "project"), env, {CLUSTER: plane}), plane, tools)
    finally:
        plane.stop()


def test_without_topology_aware_scheduling_check_refuses_the_quota_and_its_fix_admits_one_run_at_a_time(gang: Gang) -> None:
    g = gang
    refused = g.check(config(False, ISSUE, ("gamma", "delta")), "issue.yaml")
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "Traceback" not in said, said
    assert "error capacity queueing (issue.yaml:" in said and "Kueue may admit gamma" in said and "delta" in said, said
    assert f"lower queueing.quota[{SET}][{GPU}] to 16" in said and f"set queueing.quota[{SET}][pods] to {NODES}" in said, said

    fixed = config(False, ISSUE, ("gamma", "delta"), {"pods": str(NODES)})  # the fix that keeps the GPU quota
    g.up(fixed, PLATFORM, PROJECT)
    first, second = g.one_runs_the_other_waits("gamma", "delta")
    assert len({p["spec"]["nodeName"] for p in g.whole(first)}) == 2, "one pod per node"
    code, line = g.status_line(second)
    assert code == 1 and f"waiting in queue {CLUSTER_QUEUE}" in line and "more pods than the queue has free" in line, line

    g.up(config(False, ISSUE, (second,), {"pods": str(NODES)}), PROJECT)  # the first stops: the second runs whole
    g.runs_whole_once_stopped(second, first)
    until(f"{first} has no pod", lambda: not pods(g.plane, NAMESPACE, of_workload(first)))

    g.up(config(False, ISSUE, ("gamma", "delta"), {"pods": str(NODES)}), PROJECT)  # the mirror: the first waits now
    assert g.one_runs_the_other_waits("gamma", "delta") == (second, first)
    g.up(config(False, ISSUE, (first,), {"pods": str(NODES)}), PROJECT)
    g.runs_whole_once_stopped(first, second)


def other_projects_pod(node: str) -> dict[str, Any]:
    """A pod of another project, not queued (its namespace is not Kueue's), bound to `node` and holding 4 of its GPUs."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "squatter", "namespace": OTHER, "labels": {"app": "squatter"}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"key": "nvidia.com/gpu.product", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "registry.example/c:1",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: "4"}, "limits": {GPU: "4"}}}],
        },
    }  # fmt: skip


def test_with_topology_aware_scheduling_kueue_counts_the_nodes_other_projects_pods_included(gang: Gang) -> None:
    g = gang
    node = f"live-{SET}-0"
    g.plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHER}})
    status, body = g.plane.request("POST", f"/api/v1/namespaces/{OTHER}/pods", other_projects_pod(node))
    assert status == 201, body
    until("the other project's pod runs", lambda: holds(g.plane.get(f"/api/v1/namespaces/{OTHER}/pods/squatter"), "Ready"))

    # The platform tier moves the ClusterQueue to topology-aware flavors (new names: their fields are immutable) and
    # declares the Topology; the project tier starts both (their pods' shape changed: replaced, queued again).
    g.up(config(True, WIDE, ()), PLATFORM)
    topology = g.plane.get(f"/apis/{API}/topologies/{CLUSTER}-nodes")
    assert field(topology, "", "spec", "levels") == [{"nodeLabel": "kubernetes.io/hostname"}]
    until(
        "the ClusterQueue is active with its Topology", lambda: holds(g.plane.get(f"/apis/{API}/clusterqueues/{CLUSTER_QUEUE}"), "Active")
    )
    g.up(config(True, WIDE, ("gamma", "delta")), PROJECT)
    first, second = g.one_runs_the_other_waits("gamma", "delta")
    placed = {p["spec"]["nodeName"] for p in g.whole(first)}
    assert len(placed) == 2 and node not in placed, f"{first}: one pod per node, none beside the other project's pod ({placed})"
    code, line = g.status_line(second)
    assert code == 1 and f"waiting in queue {CLUSTER_QUEUE}: Kueue's Topology Aware Scheduling finds room for" in line, line
    assert f"pods on the nodes of {SET}" in line, line

    g.up(config(True, WIDE, (second,)), PROJECT)
    g.runs_whole_once_stopped(second, first)

    # A run larger than any placement while the other project's pod holds 4 GPUs of a node: 3 x 5 GPUs, 15 of the
    # quota's 24 (tiny, 1 GPU, beside it: admitted at once). Kueue never admits big, and status says why.
    g.up(config(True, WIDE, ("big", "tiny")), PROJECT)
    until("all 3 pods of big are made and held by Kueue", lambda: len(g.held("big")) == 3, explain=g.state)

    def refused() -> str:
        uid = str(field(g.plane, f"apps/v1/namespaces/{NAMESPACE}/statefulsets/big", "metadata", "uid") or "")
        return str(condition(workload_of(g.plane, NAMESPACE, uid) if uid else None, "QuotaReserved").get("message") or "")

    # The same `up` stopped the run that held the quota: Kueue may first say quota, then, once it is released, the nodes.
    g.released(second).until("Kueue's Topology Aware Scheduling says why big waits", lambda: "topology" in refused(), explain=g.state)
    code, line = g.status_line("big")
    assert code == 1 and "finds room for 2 of its 3 pods on the nodes of qb" in line and "nvidia.com/gpu" in line, line
    time.sleep(SETTLE)
    assert len(g.held("big")) == 3 and not g.admitted("big"), g.state()
    assert g.whole("tiny", 1), "a run that fits the nodes is admitted beside it"
    # The other project's pod leaves. Kueue v0.17.0 counts that (non_tas_usage_controller) but looks again at a run it
    # held back only when a run of its queue ends or leaves, or a node changes: here tiny's run ends (exit 0).
    status, body = g.plane.request("DELETE", f"/api/v1/namespaces/{OTHER}/pods/squatter?gracePeriodSeconds=0")
    assert status == 200, body
    until("the other project's pod is gone", lambda: not g.plane.get(f"/api/v1/namespaces/{OTHER}/pods/squatter"))
    (tiny,) = g.whole("tiny", 1)
    status, body = g.plane.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{tiny['metadata']['name']}",
                                   {"metadata": {"annotations": {EXIT: "0"}}}, content_type="application/merge-patch+json")  # fmt: skip
    assert status == 200, body
    until("big runs whole once the nodes have room and Kueue looked again", lambda: g.whole("big", 3), explain=g.state)
    assert not [p for p in pods(g.plane, NAMESPACE, of_workload("big")) if ADMISSION_GATE in str(p["spec"].get("schedulingGates"))]
