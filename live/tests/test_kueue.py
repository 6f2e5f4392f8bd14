"""Level 3: the real Kueue (v0.17.0, live/kueue.py) on a simulated cluster: kube-scheduler places the pods it
admits on four kwok nodes of 4 nvidia.com/gpu each, and a ClusterQueue's quota of 16 GPUs is the whole cluster.

What a researcher on a shared cluster relies on, shown with hand-written objects in the shapes the program renders
(a StatefulSet of one pod per node, a bandwidth-check Job):
- a queued multi-node workload is admitted and runs whole, and a namespace without the managed label is left alone;
- two that do not fit together: one runs whole, the other waits whole (no pod of it placed), and stopping the first
  admits the second;
- `waitForPodsReady`: an admitted workload whose pods cannot all start is evicted within the timeout and requeued,
  and the quota it held goes to the next in line;
- a suspended Job with a queue name is admitted and runs to completion.

One control plane for the module; each test has a namespace of its own (labelled as the Red Hat build's managed
namespaces are) and leaves the queue empty.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from config.kube import GPU
from live import nodes, toolchain
from live.controlplane import ControlPlane
from live.kueue import ADMISSION_GATE, API, JOB_UID, MANAGED, QUEUE_NAME, Kueue, condition, holds, workload_of

NODES = 4
GPUS_PER_NODE = 4
QUOTA = NODES * GPUS_PER_NODE
FLAVOR = "live-gpu"
CLUSTER_QUEUE = "live-shared"
LOCAL_QUEUE = "training"
READY_TIMEOUT = 20  # waitForPodsReady.timeout, s: kwok makes a placed pod Ready at once
BACKOFF = 5  # requeuingStrategy.backoffBaseSeconds: an evicted workload waits this long before it is tried again
EXIT = "live.gpu-training.local/exit"  # live/kwok-stages.yaml: a Job's pod ends with this exit code
WAIT = 60.0


def until(what: str, probe: Callable[[], Any], timeout: float = WAIT) -> Any:
    """probe()'s first truthy value, looked for every half second; a failure naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s", pytrace=False)
        time.sleep(0.5)


@pytest.fixture(scope="module")
def plane(
    tools: dict[str, Path | str], sim_tools: dict[str, Path], queue_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    bins = {**{n: Path(tools[n]) for n in toolchain.LEVEL1}, **sim_tools}
    started = ControlPlane("kueue", tmp_path_factory.mktemp("kueue"), bins).start()
    try:
        resources = {"cpu": "64", "memory": "512Gi", "pods": nodes.MAX_PODS, GPU: str(GPUS_PER_NODE)}
        started.make_nodes([nodes.node(f"live-gpu-{i}", {nodes.NODE_SET: "gpu"}, resources, []) for i in range(NODES)])
        Kueue(started, queue_tools["kueue"], pods_ready_timeout=READY_TIMEOUT, backoff_seconds=BACKOFF).start()
        # The platform's queue: one flavor for the GPU nodes (Kueue adds its node labels to the pods it admits), and
        # a quota of every resource the pods request: a pod asking for a resource no quota covers is never admitted.
        started.apply({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
                       "spec": {"nodeLabels": {nodes.NODE_SET: "gpu"}}})  # fmt: skip
        started.apply({
            "apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
            "spec": {
                "namespaceSelector": {"matchLabels": {MANAGED: "true"}},
                "resourceGroups": [{
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [{"name": FLAVOR, "resources": [
                        {"name": "cpu", "nominalQuota": str(64 * NODES)},
                        {"name": "memory", "nominalQuota": f"{512 * NODES}Gi"},
                        {"name": GPU, "nominalQuota": str(QUOTA)},
                    ]}],
                }],
            },
        })  # fmt: skip
        until("the ClusterQueue is active", lambda: holds(started.get(f"/apis/{API}/clusterqueues/{CLUSTER_QUEUE}"), "Active"))
        yield started
    finally:
        started.stop()


@pytest.fixture
def namespace(plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A managed namespace with the project's LocalQueue; afterwards its workloads are deleted and the queue's quota
    is free again for the next test."""
    name = "q-" + request.node.name.removeprefix("test_")[:40].replace("_", "-").rstrip("-")
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {MANAGED: "true"}}})
    # Written in the older API version (v1beta1, which the Red Hat build 1.3 serves too): the CRD converts it
    # through the manager's /convert, and it is read back in v1beta2.
    plane.apply({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": LOCAL_QUEUE, "namespace": name},
                 "spec": {"clusterQueue": CLUSTER_QUEUE}})  # fmt: skip
    until("the LocalQueue is active", lambda: holds(plane.get(f"/apis/{API}/namespaces/{name}/localqueues/{LOCAL_QUEUE}"), "Active"))
    yield name
    # The Workloads too, as the garbage collector would once it has discovered their kind (it looks every 30 s).
    for kind in ("apps/v1/namespaces/{}/statefulsets", "batch/v1/namespaces/{}/jobs", API + "/namespaces/{}/workloads"):
        plane.request("DELETE", f"/apis/{kind.format(name)}?propagationPolicy=Background")

    def drained() -> bool:
        queue = plane.get(f"/apis/{API}/clusterqueues/{CLUSTER_QUEUE}") or {}
        status = queue.get("status", {})
        return status.get("reservingWorkloads", 1) == 0 and not pods(plane, name)

    until(f"the quota {name}'s workloads held is released", drained)


# --- objects in the program's shapes --------------------------------------------------------------------------


def pod_template(app: str, gpus: int, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            # One pod per node, as the program's multi-node workloads ask.
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"},
            ]}},
            "nodeSelector": node_selector or {},
            "containers": [{
                "name": "train", "image": "registry.example/train:1",
                "resources": {"requests": {"cpu": "8", "memory": "64Gi", GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
            }],
        },
    }  # fmt: skip


def statefulset(namespace: str, name: str, replicas: int, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_NAME: LOCAL_QUEUE}},
        "spec": {
            "replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(name, GPUS_PER_NODE, node_selector),
        },
    }  # fmt: skip


def create(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    api = obj["apiVersion"]
    plural = obj["kind"].lower() + "s"
    status, body = plane.request("POST", f"/apis/{api}/namespaces/{obj['metadata']['namespace']}/{plural}", obj)
    assert status == 201, f"creating {obj['kind']} {obj['metadata']['name']}: {status} {body}"
    return dict(body)


def pods(plane: ControlPlane, namespace: str, app: str | None = None) -> list[dict[str, Any]]:
    query = "?" + urllib.parse.urlencode({"labelSelector": f"app={app}"}) if app else ""
    return list((plane.get(f"/api/v1/namespaces/{namespace}/pods{query}") or {}).get("items", []))


def ready(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and holds(pod, "Ready")


def running_whole(plane: ControlPlane, namespace: str, app: str, count: int) -> list[dict[str, Any]]:
    """The workload's pods when all `count` are Ready, else []."""
    found = [p for p in pods(plane, namespace, app) if not p["metadata"].get("deletionTimestamp")]
    return found if len(found) == count and all(ready(p) for p in found) else []


def waiting_whole(plane: ControlPlane, namespace: str, app: str) -> list[dict[str, Any]]:
    """The workload's pods when none is placed and each is held by Kueue's admission gate, else []."""
    found = pods(plane, namespace, app)
    held = all(not p["spec"].get("nodeName") and ADMISSION_GATE in {g["name"] for g in p["spec"].get("schedulingGates", [])} for p in found)
    return found if found and held else []


def field(source: ControlPlane | dict[str, Any] | None, path: str, *keys: str) -> Any:
    """A field of the object at /apis/`path` of the plane (or of `source` itself, an object or None); None if absent."""
    value: Any = source.get(f"/apis/{path}") if isinstance(source, ControlPlane) else source
    for key in keys:
        value = (value or {}).get(key)
    return value


def admitted(plane: ControlPlane, namespace: str, uid: str) -> dict[str, Any] | None:
    wl = workload_of(plane, namespace, uid)
    return wl if holds(wl, "Admitted") else None


# --- the tests ----------------------------------------------------------------------------------------------------


def test_a_queued_statefulset_is_admitted_and_runs_whole(plane: ControlPlane, namespace: str) -> None:
    sts = create(plane, statefulset(namespace, "pair", replicas=2))
    wl = until("the Workload of StatefulSet pair is admitted", lambda: admitted(plane, namespace, sts["metadata"]["uid"]))
    running = until("both pods of pair are Ready", lambda: running_whole(plane, namespace, "pair", 2))

    assert {p["spec"]["nodeName"] for p in running} and len({p["spec"]["nodeName"] for p in running}) == 2, "one pod per node"
    assert all(p["spec"]["nodeSelector"].get(nodes.NODE_SET) == "gpu" for p in running), "the flavor's node labels are on the pods"
    assert wl["spec"]["queueName"] == LOCAL_QUEUE and wl["status"]["admission"]["clusterQueue"] == CLUSTER_QUEUE
    assert wl["spec"]["podSets"][0]["count"] == 2, "the two pods are admitted as one group"
    usage = wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
    assert usage[GPU] == "8"
    # The StatefulSet itself is Ready: what `pulumi up` of a workload on a queued cluster would see in the end.
    sts_path = f"apps/v1/namespaces/{namespace}/statefulsets/pair"
    until("StatefulSet pair reports 2 ready replicas", lambda: field(plane, sts_path, "status", "readyReplicas") == 2)


def test_kueue_leaves_a_namespace_without_the_managed_label_alone(plane: ControlPlane) -> None:
    """Its webhooks and managedJobsNamespaceSelector reach only managed namespaces: elsewhere a StatefulSet, even one
    naming a queue, runs as it would without Kueue (no gate, no pod group) and holds no quota. Kueue v0.17.0 still
    makes a Workload for it (statefulset_reconciler.go creates one for every StatefulSet naming a queue), which the
    ClusterQueue, selecting managed namespaces only, never admits."""
    name = "unmanaged"
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    sts = create(plane, statefulset(name, "free", replicas=1))
    try:
        (pod,) = until("the pod of free is Ready without Kueue", lambda: running_whole(plane, name, "free", 1))
        assert not pod["spec"].get("schedulingGates")
        assert not [k for k in pod["metadata"].get("labels", {}) if k.startswith("kueue.x-k8s.io/")], "no pod group of Kueue's"
        time.sleep(2)  # Kueue's reconcilers have seen it
        assert condition(workload_of(plane, name, sts["metadata"]["uid"]), "QuotaReserved").get("status") != "True"
        assert field(plane, f"{API}/clusterqueues/{CLUSTER_QUEUE}", "status", "reservingWorkloads") == 0
    finally:  # its GPUs back for the next test
        plane.request("DELETE", f"/apis/apps/v1/namespaces/{name}/statefulsets/free")
        plane.request("DELETE", f"/apis/{API}/namespaces/{name}/workloads")
        until("the pod of free is gone", lambda: not pods(plane, name, "free"))


def test_two_workloads_that_do_not_fit_together_one_runs_whole_the_other_waits_whole(plane: ControlPlane, namespace: str) -> None:
    # 12 GPUs each, 16 in the quota (and on the nodes): either fits alone, not both. Created at once.
    first, second = (create(plane, statefulset(namespace, name, replicas=3)) for name in ("run-a", "run-b"))
    uids = {"run-a": first["metadata"]["uid"], "run-b": second["metadata"]["uid"]}

    def one_admitted() -> str:
        admitted_now = [name for name, uid in uids.items() if admitted(plane, namespace, uid)]
        return admitted_now[0] if len(admitted_now) == 1 else ""

    winner = until("one of the two Workloads is admitted", one_admitted)
    loser = next(n for n in uids if n != winner)
    until(f"all 3 pods of {winner} are Ready", lambda: running_whole(plane, namespace, winner, 3))
    held = until(f"all 3 pods of {loser} are made and held by Kueue", lambda: len(waiting_whole(plane, namespace, loser)) == 3)
    assert held

    # It stays so: the waiting one gets no pod placed, and says why in the words `stacks status` repeats.
    time.sleep(3)
    assert admitted(plane, namespace, uids[winner]) and not admitted(plane, namespace, uids[loser])
    assert len(running_whole(plane, namespace, winner, 3)) == 3
    assert len(waiting_whole(plane, namespace, loser)) == 3, "no pod of the waiting workload is placed"
    waiting = workload_of(plane, namespace, uids[loser])
    reserved = condition(waiting, "QuotaReserved")
    assert reserved.get("status") == "False" and f"insufficient unused quota for {GPU}" in reserved.get("message", ""), reserved

    # Stopping the first (what `running: false` renders: replicas 0) admits the second, whole.
    status, body = plane.request("PATCH", f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{winner}",
                                 {"spec": {"replicas": 0}}, content_type="application/merge-patch+json")  # fmt: skip
    assert status == 200, body
    until(f"the Workload of {loser} is admitted once {winner} stopped", lambda: admitted(plane, namespace, uids[loser]))
    until(f"all 3 pods of {loser} are Ready", lambda: running_whole(plane, namespace, loser, 3))
    assert not pods(plane, namespace, winner)


def test_a_workload_whose_pods_cannot_all_start_is_evicted_and_requeued_releasing_its_quota(plane: ControlPlane, namespace: str) -> None:
    # Admitted by quota (16 GPUs, the whole queue), but no node has the label its pods select: the scheduler cannot
    # place them. Without waitForPodsReady it would hold the quota forever, and the next run would wait forever.
    stuck = create(plane, statefulset(namespace, "stuck", replicas=NODES, node_selector={"live.gpu-training.local/absent": "true"}))
    until("the Workload of stuck is admitted", lambda: admitted(plane, namespace, stuck["metadata"]["uid"]))
    admitted_at = time.monotonic()
    after = create(plane, statefulset(namespace, "next", replicas=1))
    until("next waits for the quota stuck holds", lambda: waiting_whole(plane, namespace, "next"))

    def evicted() -> dict[str, Any] | None:
        wl = workload_of(plane, namespace, stuck["metadata"]["uid"])
        return wl if condition(wl, "Evicted").get("reason") == "PodsReadyTimeout" or field(wl, "", "status", "requeueState") else None

    wl = until("stuck is evicted for its pods' readiness", evicted, timeout=READY_TIMEOUT + WAIT)
    waited = time.monotonic() - admitted_at
    assert waited >= READY_TIMEOUT - 2, f"evicted after {waited:.0f} s, before the {READY_TIMEOUT} s timeout"
    until("stuck gives its admission back", lambda: not admitted(plane, namespace, wl["metadata"]["labels"][JOB_UID]))

    # The quota it held goes to the next in line, which runs; stuck is requeued and waits, whole, for quota.
    until("next is admitted once stuck released its quota", lambda: admitted(plane, namespace, after["metadata"]["uid"]))
    until("the pod of next is Ready", lambda: running_whole(plane, namespace, "next", 1))
    assert until("stuck's pods are held again", lambda: len(waiting_whole(plane, namespace, "stuck")) == NODES)
    uid = stuck["metadata"]["uid"]
    requeued = until("stuck is requeued", lambda: field(workload_of(plane, namespace, uid), "", "status", "requeueState"))
    assert requeued.get("count", 0) >= 1


def test_a_suspended_job_with_a_queue_name_is_admitted_and_completes(plane: ControlPlane, namespace: str) -> None:
    # The bandwidth check's shape: a Job created suspended, which Kueue starts once admitted.
    job = create(plane, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bw", "namespace": namespace, "labels": {QUEUE_NAME: LOCAL_QUEUE}},
        "spec": {"suspend": True, "backoffLimit": 0, "template": {
            **pod_template("bw", 2), "spec": {**pod_template("bw", 2)["spec"], "restartPolicy": "Never"},
        }},
    })  # fmt: skip
    until("the Workload of Job bw is admitted", lambda: admitted(plane, namespace, job["metadata"]["uid"]))
    until("Job bw is started", lambda: field(plane, f"batch/v1/namespaces/{namespace}/jobs/bw", "spec", "suspend") is False)
    (pod,) = until("the pod of bw is Ready", lambda: running_whole(plane, namespace, "bw", 1))
    status, body = plane.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
                                 {"metadata": {"annotations": {EXIT: "0"}}}, content_type="application/merge-patch+json")  # fmt: skip
    assert status == 200, body
    until("Job bw is Complete", lambda: holds(plane.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/bw"), "Complete"))
    until("its Workload is Finished", lambda: holds(workload_of(plane, namespace, job["metadata"]["uid"]), "Finished"))
