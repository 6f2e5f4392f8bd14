"""Level 3: the program's queued stack against the real Kueue (v0.17.0, live/kueue.py), deployed by the real Pulumi
engine on a simulated cluster: kube-scheduler places the pods Kueue admits on kwok nodes made from the config's own
node set (live/nodes.py: four nodes of 4 nvidia.com/gpu), and the ClusterQueue, ResourceFlavor and LocalQueue are
the ones components/queueing.py declares (docs/shared-clusters.md).

The config is the tests' own (tests/fixtures.py `tcp`, queued as tests/fixtures.py `queued` queues it), deployed
as YAML through barcelona's two stack files (platform tier, then project tier). In order, on ONE control plane with
Kueue running before the first `up`:
1. `up` of both tiers succeeds; every running workload is admitted (its Workload Admitted) and Ready, a Job too
   (created suspended by Kueue's webhook, started when admitted: `up` does not wait for it); after a refresh, a
   preview of each tier is empty: the provider matches the `containers[*]` paths of replaceOnChanges, server-side
   apply leaves alone what Kueue sets (a Job's `spec.suspend`, a StatefulSet's pod-template labels and
   annotations), and the ResourceFlavor's node labels and tolerations Kueue adds to the pods are no drift; the Job,
   ended, is Complete and its Workload Finished;
2. two multi-node workloads that do not fit together: one runs whole, the other waits whole (no pod placed), and
   `python -m stacks status` says why in the stack file's words; stopping the first (an edit and `up`) admits it;
3. a workload larger than the queue's quota is refused by `python -m stacks check` (no `up`);
4. an edit a queued run allows (the image: in place) and one that requeues it (the CPU request: the StatefulSet is
   replaced) preview what `stacks diff` predicts and converge;
then, with hand-written objects beside the stack's: a namespace without the managed label is left alone, and
`waitForPodsReady` evicts and requeues a run whose pods cannot all start, releasing its quota.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from config.kube import GPU
from live import clusters, nodes, toolchain
from live.controlplane import ControlPlane
from live.kueue import (
    ADMISSION_GATE,
    API,
    JOB_UID,
    KUEUE_12232,
    MANAGED,
    QUEUE_NAME,
    Kueue,
    condition,
    delete_orphaned,
    holds,
    workload_of,
)
from live.tests.harness import PULUMI_STACKS, Project, failure, kubeconfig_of, project_copy, pulumi_env, yaml_config
from live.tests.test_pulumi import actual, predicted
from live.tests.test_scheduling import status_of
from tests import fixtures

CLUSTER = "barcelona"  # a committed cluster with two tiers' stack files; what they deploy is the tests' config
PLATFORM, PROJECT = (next(s.name for s in PULUMI_STACKS if s.cluster == CLUSTER and s.tier == t) for t in ("platform", "project"))
NODES = 4
GPUS_PER_NODE = 4
CLUSTER_QUEUE = "gpu"
LOCAL_QUEUE = "gpu-training"  # queueing.local_queue's default
NAMESPACE = "proj"
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"  # Kueue's StatefulSet webhook sets it on the pod template
JOB = "batch-r1"  # workloads[batch]: a Job named by its run_number
READY_TIMEOUT = 20  # waitForPodsReady.timeout, s: kwok makes a placed pod Ready at once
BACKOFF = 5  # requeuingStrategy.backoffBaseSeconds: an evicted workload waits this long before it is tried again
EXIT = "live.gpu-training.local/exit"  # live/kwok-stages.yaml: a Job's pod ends with this exit code
WAIT = 60.0
# s: a stopped StatefulSet's Kueue Workload is deleted (its quota released) by the garbage collector once its pods, its
# last owners, are gone (Kueue takes its own reference off at 0 replicas). Within seconds mostly; at load average 16 to
# 23 it took more than 60 s twice: the waits that depend on it allow this much (Release).
RELEASE = 150.0


def queued_config() -> dict[str, Any]:
    """The tcp fixture queued, as barcelona: one node set of 4 nodes (16 GPUs, the whole quota); `one` runs on 2
    nodes (8 GPUs), `two` (3 nodes, 12 GPUs) is stopped: either fits alone, not both."""
    d = fixtures.data("tcp")
    d["name"] = CLUSTER
    d["queueing"] = {"cluster_queue": CLUSTER_QUEUE}
    d["node_sets"][0].update(count=NODES, gpus_per_node=GPUS_PER_NODE, allocatable_cpu="64", allocatable_memory="512Gi",
                             labels={"gpu-pool": "pool"})  # fmt: skip
    fixtures.workload(d, "one").update(nodes=2)
    fixtures.workload(d, "two").update(nodes=3)
    # A training run as a Job (4 GPUs): Kueue's webhook creates it suspended and starts it when admitted.
    d["workloads"].append({**copy.deepcopy(fixtures.workload(d, "one")), "name": "batch", "kind": "job", "nodes": 1})
    return d


def edited(d: dict[str, Any], name: str, **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(d)
    fixtures.workload(out, name).update(fields)
    return out


def until(what: str, probe: Callable[[], Any], timeout: float = WAIT, explain: Callable[[], str] | None = None) -> Any:
    """probe()'s first truthy value, looked for every half second; a failure naming `what` after `timeout` (with what
    `explain()` says of the state it is in)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s" + (f"\n{explain()}" if explain else ""), pytrace=False)
        time.sleep(0.5)


class Release:
    """Waits for what stopping workloads[`stopped`] frees. Kueue v0.17.0 can leave its Workload admitted with no owner
    (live.kueue.orphaned, KUEUE_12232: the garbage collector took the pods' references off before Kueue took its own),
    and nothing ever collects it: it holds its quota for good. At each look, any such Workload must be named by
    `python -m stacks status` on the stopped workload (exit 1, with the command that frees it); the test then deletes
    it as that command would (docs/shared-clusters.md), goes on, and warns naming the Kueue bug."""

    def __init__(self, plane: ControlPlane, namespace: str, stopped: str, status_line: Callable[[str], tuple[int, str]]) -> None:
        self.plane = plane
        self.namespace = namespace
        self.stopped = stopped
        self.status_line = status_line
        self.deleted: list[str] = []

    def free(self) -> None:
        self.deleted.extend(delete_orphaned(self.plane, self.namespace, lambda: self.status_line(self.stopped)))

    def until(self, what: str, probe: Callable[[], Any], explain: Callable[[], str] | None = None) -> Any:
        """probe()'s first truthy value, as `until`, within RELEASE; what Kueue left holding quota freed at each look."""

        def look() -> Any:
            self.free()
            return probe()

        found = until(f"{what} once workloads[{self.stopped}] stopped", look, timeout=RELEASE, explain=explain)
        if self.deleted:
            warnings.warn(
                f"workloads[{self.stopped}]: Workload(s) {self.deleted} held quota with no owner left ({KUEUE_12232}): "
                "`status` named them; deleted",
                stacklevel=2,
            )
        return found


class Queued:
    """The module's one plane and project, and the config deployed last."""

    def __init__(self, project: Project, plane: ControlPlane) -> None:
        self.project = project
        self.plane = plane
        self.data = queued_config()

    def up(self, data: dict[str, Any], stack: str = PROJECT) -> dict[str, Any]:
        yaml_config(self.project, CLUSTER, data)
        result = self.project.drive(stack, "up")
        assert result["ok"], failure(result)
        self.data = data
        return result


@pytest.fixture(scope="module")
def queued(
    tools: dict[str, Path | str],
    pulumi_tools: dict[str, Path],
    sim_tools: dict[str, Path],
    queue_tools: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Queued]:
    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    work = tmp_path_factory.mktemp("kueue")
    bins = {**{n: Path(tools[n]) for n in toolchain.LEVEL1}, **sim_tools}
    plane = ControlPlane(CLUSTER, work / CLUSTER, bins).start()
    try:
        config = stacks.validate(queued_config(), "live")
        clusters.install_crds(plane)
        clusters.seed(plane, config)
        plane.make_nodes(nodes.nodes(config))
        Kueue(plane, queue_tools["kueue"], pods_ready_timeout=READY_TIMEOUT, backoff_seconds=BACKOFF).start()
        (work / "state").mkdir()
        env = pulumi_env(
            [p.parent for p in pulumi_tools.values()], kubeconfig_of([plane], work / "kubeconfig"), work / "state", work / "home"
        )
        yield Queued(Project(project_copy(work / "project"), env, {CLUSTER: plane}), plane)
    finally:
        plane.stop()


# --- what the cluster says of a workload ----------------------------------------------------------------------


def pods(plane: ControlPlane, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))})
    return list((plane.get(f"/api/v1/namespaces/{namespace}/pods?{query}") or {}).get("items", []))


def of_workload(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name}


def ready(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and holds(pod, "Ready")


def running_whole(plane: ControlPlane, namespace: str, selector: dict[str, str], count: int) -> list[dict[str, Any]]:
    """The pods when all `count` are Ready, else []."""
    found = [p for p in pods(plane, namespace, selector) if not p["metadata"].get("deletionTimestamp")]
    return found if len(found) == count and all(ready(p) for p in found) else []


def waiting_whole(plane: ControlPlane, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
    """The pods when none is placed and each is held by Kueue's admission gate, else []."""
    found = pods(plane, namespace, selector)
    held = all(not p["spec"].get("nodeName") and ADMISSION_GATE in {g["name"] for g in p["spec"].get("schedulingGates", [])} for p in found)
    return found if found and held else []


def field(source: ControlPlane | dict[str, Any] | None, path: str, *keys: str) -> Any:
    """A field of the object at /apis/`path` of the plane (or of `source` itself, an object or None); None if absent."""
    value: Any = source.get(f"/apis/{path}") if isinstance(source, ControlPlane) else source
    for key in keys:
        value = (value or {}).get(key)
    return value


def sts_uid(plane: ControlPlane, name: str) -> str:
    return str(field(plane, f"apps/v1/namespaces/{NAMESPACE}/statefulsets/{name}", "metadata", "uid") or "")


def admitted(plane: ControlPlane, namespace: str, uid: str) -> dict[str, Any] | None:
    wl = workload_of(plane, namespace, uid)
    return wl if holds(wl, "Admitted") else None


def sts_admitted(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    uid = sts_uid(plane, name)
    return admitted(plane, NAMESPACE, uid) if uid else None


def queue_state(plane: ControlPlane) -> str:
    """The queue's objects and the Workloads in the stack's namespace, their conditions: what a failure shows."""
    out = []
    for path in (
        f"{API}/clusterqueues",
        f"{API}/resourceflavors",
        f"{API}/namespaces/{NAMESPACE}/localqueues",
        f"{API}/namespaces/{NAMESPACE}/workloads",
    ):
        for o in (plane.get(f"/apis/{path}") or {}).get("items", []):
            conditions = [(c["type"], c["status"], c.get("reason"), c.get("message")) for c in o.get("status", {}).get("conditions", [])]
            out.append(f"{o['kind']} {o['metadata']['name']}: {o.get('spec')} {conditions}")
    sts = [s["metadata"] for s in (plane.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets") or {}).get("items", [])]
    return "\n".join(out + [f"StatefulSet {m['name']} labels {m.get('labels')}" for m in sts])


def runs(q: Queued, name: str) -> list[dict[str, Any]]:
    """Workload `name` of the config admitted by Kueue and all its pods Ready (a failure after WAIT otherwise)."""
    w = fixtures.workload(q.data, name)
    until(f"the Kueue Workload of workloads[{name}] is admitted", lambda: sts_admitted(q.plane, name), explain=lambda: queue_state(q.plane))
    found: list[dict[str, Any]] = until(
        f"all {w['nodes']} pods of workloads[{name}] are Ready", lambda: running_whole(q.plane, NAMESPACE, of_workload(name), w["nodes"])
    )
    return found


def status_line(q: Queued, tools: dict[str, Path | str], name: str) -> tuple[int, str]:
    done = status_of(q.project, tools, PROJECT)
    line = next((ln for ln in done.stdout.splitlines() if f"workloads[{name}]" in ln), "")
    return done.returncode, line or done.stdout + done.stderr


# --- the program's objects --------------------------------------------------------------------------------------


def test_up_of_both_tiers_admits_every_running_workload_and_settles(queued: Queued) -> None:
    q = queued
    q.up(q.data, PLATFORM)
    assert holds(q.plane.get(f"/apis/{API}/clusterqueues/{CLUSTER_QUEUE}"), "Active"), "the platform tier's ClusterQueue is active"
    namespace = q.plane.get(f"/api/v1/namespaces/{NAMESPACE}")
    assert field(namespace, "", "metadata", "labels", MANAGED) == "true", "the platform tier marks the namespace managed"
    q.up(q.data, PROJECT)
    running = runs(q, "one")
    assert len({p["spec"]["nodeName"] for p in running}) == 2, "one pod per node"
    assert all(p["spec"]["nodeSelector"].get("gpu-pool") == "pool" for p in running), "the flavor's node labels are on the pods"
    wl = sts_admitted(q.plane, "one")
    assert wl and wl["spec"]["queueName"] == LOCAL_QUEUE and wl["status"]["admission"]["clusterQueue"] == CLUSTER_QUEUE
    assert wl["spec"]["podSets"][0]["count"] == 2, "the two pods are admitted as one group"
    until(
        "StatefulSet one reports 2 ready replicas",
        lambda: field(q.plane, f"apps/v1/namespaces/{NAMESPACE}/statefulsets/one", "status", "readyReplicas") == 2,
    )
    assert not pods(q.plane, NAMESPACE, of_workload("two")), "the stopped workload has no pod"
    template = field(q.plane, f"apps/v1/namespaces/{NAMESPACE}/statefulsets/one", "spec", "template", "metadata", "annotations")
    assert (template or {}).get(SUSPENDING_PARENT) == "statefulset", (
        "Kueue's webhook marked the template (what the preview must leave alone)"
    )
    # The Job: `up` did not wait for it (skipAwait); Kueue admits it and starts it (spec.suspend false).
    job_path = f"batch/v1/namespaces/{NAMESPACE}/jobs/{JOB}"
    job_uid = str(field(q.plane, job_path, "metadata", "uid"))
    until(f"the Workload of Job {JOB} is admitted", lambda: admitted(q.plane, NAMESPACE, job_uid), explain=lambda: queue_state(q.plane))
    assert field(q.plane, job_path, "spec", "suspend") is False, "Kueue started the Job it admitted"
    (job_pod,) = until(f"the pod of Job {JOB} is Ready", lambda: running_whole(q.plane, NAMESPACE, of_workload("batch"), 1))

    # What Kueue wrote since (the webhooks' template labels and annotations, the flavor's tolerations on the pods,
    # the Workloads' owner references) read back, and nothing to do: no perpetual diff, no fight.
    refreshed = q.project.drive(PROJECT, "refresh")
    assert refreshed["ok"], failure(refreshed)
    for stack in (PLATFORM, PROJECT):
        settled = q.project.drive(stack, "preview", "--expect-no-changes")
        assert settled["ok"], failure(settled)

    # The run ends (kwok's stages: the exit code it is given): the Job is Complete, its Workload Finished, and the
    # quota it held free again.
    status, body = q.plane.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{job_pod['metadata']['name']}",
                                   {"metadata": {"annotations": {EXIT: "0"}}}, content_type="application/merge-patch+json")  # fmt: skip
    assert status == 200, body
    until(f"Job {JOB} is Complete", lambda: holds(q.plane.get(f"/apis/{job_path}"), "Complete"))
    until("its Workload is Finished", lambda: holds(workload_of(q.plane, NAMESPACE, job_uid), "Finished"))


def test_two_workloads_that_do_not_fit_together_one_runs_whole_the_other_waits_whole(queued: Queued, tools: dict[str, Path | str]) -> None:
    q = queued
    q.up(edited(q.data, "two", state="running"))  # 8 + 12 GPUs asked, 16 in the queue
    until(
        "all 3 pods of workloads[two] are made and held by Kueue", lambda: len(waiting_whole(q.plane, NAMESPACE, of_workload("two"))) == 3
    )

    def refused() -> str:
        uid = sts_uid(q.plane, "two")
        return str(condition(workload_of(q.plane, NAMESPACE, uid) if uid else None, "QuotaReserved").get("message") or "")

    until("Kueue says why workloads[two] waits", refused)
    code, line = status_line(q, tools, "two")  # `stacks status` reads what Kueue said: once is enough
    # It stays so (`status` took seconds): the waiting one gets no pod placed.
    assert len(running_whole(q.plane, NAMESPACE, of_workload("one"), 2)) == 2, "the first still runs whole"
    assert len(waiting_whole(q.plane, NAMESPACE, of_workload("two"))) == 3, "no pod of the waiting workload is placed"
    assert not sts_admitted(q.plane, "two")
    assert code == 1 and f"waiting in queue {CLUSTER_QUEUE}" in line and f"more {GPU} than the queue has free" in line, line

    q.up(edited(q.data, "one", state="stopped"))
    released = Release(q.plane, NAMESPACE, "one", lambda name: status_line(q, tools, name))
    released.until("the Kueue Workload of workloads[two] is admitted", lambda: sts_admitted(q.plane, "two"), lambda: queue_state(q.plane))
    runs(q, "two")
    until("workloads[one] has no pod", lambda: not pods(q.plane, NAMESPACE, of_workload("one")))
    done = status_of(q.project, tools, PROJECT, "--json")
    (two,) = [w for w in json.loads(done.stdout)["workloads"] if w["config"] == "workloads[two]"]
    assert done.returncode == 0 and two["state"] == "running" and two["queue"]["admission"] == "admitted", two


def test_a_workload_larger_than_the_quota_is_refused_by_check(queued: Queued) -> None:
    """A shared cluster's share stated as the quota (12 GPUs of 16): a workload of 4 x 4 GPUs can never be admitted,
    and `check` says so, in the file's words, before any `up` (nothing is deployed here)."""
    too_big = edited(queued_config(), "two", state="running", nodes=NODES)
    too_big["queueing"]["quota"] = {"pool": {GPU: str(3 * GPUS_PER_NODE)}}
    root = queued.project.root
    path = root / "too-big.yaml"
    path.write_text(yaml.safe_dump(too_big, sort_keys=False))
    env = {**queued.project.env, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert f"error capacity workloads[two].nodes ({path.name}:" in said and "Kueue can never admit it" in said, said
    assert f"queueing.quota[pool][{GPU}]" in said and "FAIL: 1 error" in said and "Traceback" not in said, said


def test_an_edit_a_queued_run_allows_and_one_that_requeues_it_preview_as_diff_predicts_and_converge(queued: Queued) -> None:
    q = queued
    before_uid = sts_uid(q.plane, "two")
    for what, after in (
        ("the image (in place)", edited(q.data, "two", image=fixtures.PYTORCH)),
        ("the CPU request (requeues: replaced)", edited(q.data, "two", cpu="6")),
    ):
        yaml_config(q.project, CLUSTER, after)
        preview = q.project.drive(PROJECT, "preview", "--diff")
        assert preview["ok"], failure(preview)
        # The preview also shows anything the last `up` left undone: an empty rest proves it converged.
        assert actual(preview) == predicted(CLUSTER, "project", q.data, after) == {f"StatefulSet {NAMESPACE}/two"}, what
        ops = {s["op"] for s in preview["steps"] if s["urn"].endswith(f"StatefulSet::{NAMESPACE}/two")}
        assert ("replace" in ops or "create-replacement" in ops) == ("requeues" in what), (what, ops)
        q.up(after)
        runs(q, "two")
    assert sts_uid(q.plane, "two") != before_uid, "the CPU edit replaced the StatefulSet"
    settled = q.project.drive(PROJECT, "preview", "--expect-no-changes")
    assert settled["ok"], failure(settled)


# --- hand-written objects beside the stack's: what the program's tests above do not redo ---------------------------
# By now workloads[two] holds 12 of the queue's 16 GPUs: one node's worth is free.


def pod_template(app: str, gpus: int, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "nodeSelector": node_selector or {},
            "tolerations": [{"key": "nvidia.com/gpu.product", "operator": "Exists", "effect": "NoSchedule"}],
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
    plural = obj["kind"].lower() + "s"
    status, body = plane.request("POST", f"/apis/{obj['apiVersion']}/namespaces/{obj['metadata']['namespace']}/{plural}", obj)
    assert status == 201, f"creating {obj['kind']} {obj['metadata']['name']}: {status} {body}"
    return dict(body)


def remove(plane: ControlPlane, namespace: str, made: list[dict[str, Any]]) -> None:
    """Delete what a test made, and its Workloads (as the garbage collector would once it has discovered their kind:
    it looks every 30 s); wait until their pods are gone, so the next test has the quota they held."""
    for obj in made:
        plural = obj["kind"].lower() + "s"
        plane.request(
            "DELETE", f"/apis/{obj['apiVersion']}/namespaces/{namespace}/{plural}/{obj['metadata']['name']}?propagationPolicy=Background"
        )
        wl = workload_of(plane, namespace, obj["metadata"]["uid"])
        if wl:
            plane.request("DELETE", f"/apis/{API}/namespaces/{namespace}/workloads/{wl['metadata']['name']}")
    for obj in made:
        app = {"app": obj["metadata"]["name"]}
        until(f"the pods of {app['app']} are gone", lambda: not pods(plane, namespace, app))  # noqa: B023 (used at once)


def test_kueue_leaves_a_namespace_without_the_managed_label_alone(queued: Queued) -> None:
    """Its webhooks and managedJobsNamespaceSelector reach only managed namespaces: elsewhere a StatefulSet, even one
    naming a queue, runs as it would without Kueue (no gate, no pod group) and holds no quota. Kueue v0.17.0 still
    makes a Workload for it (statefulset_reconciler.go creates one for every StatefulSet naming a queue), which the
    ClusterQueue, selecting the stack's namespaces only, never admits."""
    plane, name = queued.plane, "unmanaged"
    reserving = field(plane, f"{API}/clusterqueues/{CLUSTER_QUEUE}", "status", "reservingWorkloads")
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    sts = create(plane, statefulset(name, "free", replicas=1))
    try:
        (pod,) = until("the pod of free is Ready without Kueue", lambda: running_whole(plane, name, {"app": "free"}, 1))
        assert not pod["spec"].get("schedulingGates")
        assert not [k for k in pod["metadata"].get("labels", {}) if k.startswith("kueue.x-k8s.io/")], "no pod group of Kueue's"
        time.sleep(2)  # Kueue's reconcilers have seen it
        assert condition(workload_of(plane, name, sts["metadata"]["uid"]), "QuotaReserved").get("status") != "True"
        assert field(plane, f"{API}/clusterqueues/{CLUSTER_QUEUE}", "status", "reservingWorkloads") == reserving
    finally:  # its GPUs back for the next test
        remove(plane, name, [sts])


def test_a_workload_whose_pods_cannot_all_start_is_evicted_and_requeued_releasing_its_quota(queued: Queued) -> None:
    # Admitted by quota (the queue's last 4 GPUs), but no node has the label its pod selects: the scheduler cannot
    # place it. Without waitForPodsReady it would hold the quota forever, and the next run would wait forever.
    plane = queued.plane
    stuck = create(plane, statefulset(NAMESPACE, "stuck", replicas=1, node_selector={"live.gpu-training.local/absent": "true"}))
    made = [stuck]
    try:
        until("the Workload of stuck is admitted", lambda: admitted(plane, NAMESPACE, stuck["metadata"]["uid"]))
        admitted_at = time.monotonic()
        after = create(plane, statefulset(NAMESPACE, "next", replicas=1))
        made.append(after)
        until("next waits for the quota stuck holds", lambda: waiting_whole(plane, NAMESPACE, {"app": "next"}))

        def evicted() -> dict[str, Any] | None:
            wl = workload_of(plane, NAMESPACE, stuck["metadata"]["uid"])
            return wl if condition(wl, "Evicted").get("reason") == "PodsReadyTimeout" or field(wl, "", "status", "requeueState") else None

        wl = until("stuck is evicted for its pods' readiness", evicted, timeout=READY_TIMEOUT + WAIT)
        waited = time.monotonic() - admitted_at
        assert waited >= READY_TIMEOUT - 2, f"evicted after {waited:.0f} s, before the {READY_TIMEOUT} s timeout"
        until("stuck gives its admission back", lambda: not admitted(plane, NAMESPACE, wl["metadata"]["labels"][JOB_UID]))

        # The quota it held goes to the next in line, which runs; stuck is requeued and waits, whole, for quota.
        until("next is admitted once stuck released its quota", lambda: admitted(plane, NAMESPACE, after["metadata"]["uid"]))
        until("the pod of next is Ready", lambda: running_whole(plane, NAMESPACE, {"app": "next"}, 1))
        assert until("stuck's pod is held again", lambda: len(waiting_whole(plane, NAMESPACE, {"app": "stuck"})) == 1)
        uid = stuck["metadata"]["uid"]
        requeued = until("stuck is requeued", lambda: field(workload_of(plane, NAMESPACE, uid), "", "status", "requeueState"))
        assert requeued.get("count", 0) >= 1
    finally:
        remove(plane, NAMESPACE, made)
