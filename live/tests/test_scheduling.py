"""Level 3: the simulated cluster. Each cluster's control plane gets the real kube-scheduler and, as the kubelet of
Node objects built from the stack's own node sets (live/nodes.py), kwok; then every committed Pulumi stack is
deployed with the real engine and provider, the three clusters at once (their planes are independent).

What a user lives with after `pulumi up` is then the cluster's judgement, not ours: every running StatefulSet is
Ready (all its pods placed by the scheduler, each on a node of its node set, a multi-node workload's pods on
distinct nodes), every stopped one has no pod, and a bandwidth check's Job gates the rollout (`pulumi up` waits for
its verdict, docs/lifecycle.md): a pass lets `up` finish, a failure fails it at once, naming the Job.

kwok runs no container: the launcher, memlock and the bandwidth loop run on the real nodes (test_real_nodes.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import stacks
from live import clusters, nodes, toolchain
from live.controlplane import ControlPlane
from live.tests.harness import (
    PULUMI_STACKS,
    TIMINGS,
    UP_BOUND_SECONDS,
    Project,
    config_data,
    failure,
    kubeconfig_of,
    project_copy,
    pulumi_env,
    yaml_config,
)

ROOT = Path(__file__).resolve().parent.parent.parent


CLUSTERS = sorted({s.cluster for s in PULUMI_STACKS})
READY_BOUND_SECONDS = 120  # kwok makes a placed pod Ready at once: what takes longer is a pod the scheduler cannot place
EXIT = "live.gpu-training.local/exit"  # live/kwok-stages.yaml: a Job's pod ends with this exit code


def _simulated(cluster: str, bins: dict[str, Path], work: Path) -> ControlPlane:
    """A control plane with the scheduler and kwok, seeded as the cluster is, with the stack's nodes Ready."""
    plane = ControlPlane(cluster, work / cluster, bins).start()
    try:
        clusters.install_crds(plane)
        config = stacks.load(cluster)
        clusters.seed(plane, config)
        plane.make_nodes(nodes.nodes(config))
    except BaseException:
        plane.stop()
        raise
    return plane


def _in_parallel(work: Callable[[str], Any], names: list[str]) -> dict[str, Any]:
    """work(name) for every name at once (one thread each); every result, or the first error once all are done."""
    with ThreadPoolExecutor(len(names)) as pool:
        futures = {n: pool.submit(work, n) for n in names}
    errors = [f.exception() for f in futures.values() if f.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]
    return {n: f.result() for n, f in futures.items()}


@pytest.fixture(scope="module")
def sim(
    tools: dict[str, Path | str], pulumi_tools: dict[str, Path], sim_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Project]:
    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    work = tmp_path_factory.mktemp("sim")
    bins = {**{n: Path(tools[n]) for n in toolchain.LEVEL1}, **sim_tools}
    started: dict[str, ControlPlane] = {}

    def start(cluster: str) -> ControlPlane:
        started[cluster] = _simulated(cluster, bins, work)
        return started[cluster]

    try:
        _in_parallel(start, CLUSTERS)
        (work / "state").mkdir()
        env = pulumi_env([p.parent for p in pulumi_tools.values()], kubeconfig_of(list(started.values()), work / "kubeconfig"),
                         work / "state", work / "home")  # fmt: skip
        yield Project(project_copy(work / "project"), env, dict(started))
    finally:
        for plane in started.values():
            plane.stop()


# --- what the cluster says of a workload ----------------------------------------------------------------------


def statefulset(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any] | None:
    live = plane.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}")
    return dict(live) if live else None


def pods_of(plane: ControlPlane, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))})
    return list((plane.get(f"/api/v1/namespaces/{namespace}/pods?{query}") or {}).get("items", []))


def unscheduled(pods: list[dict[str, Any]]) -> str:
    """The scheduler's own word on the pods it did not place (their PodScheduled condition)."""
    said = {
        c.get("message", c.get("reason", ""))
        for p in pods
        for c in p.get("status", {}).get("conditions", [])
        if c["type"] == "PodScheduled" and c["status"] != "True"
    }
    return "; ".join(sorted(said)) or "no scheduling condition"


def problems(plane: ControlPlane, config: stacks.ClusterConfig) -> list[str]:
    """Every StatefulSet workload of `config` that is not as the stack declares it on the cluster: a running one not
    Ready, or with a pod off its node set, or two pods of a multi-node workload on one node; a stopped one with pods.
    A StatefulSet not on the cluster is left out (a tier that does not declare it)."""
    cluster = config.name
    node_set = {n["metadata"]["name"]: n["metadata"]["labels"].get(nodes.NODE_SET) for n in plane.get("/api/v1/nodes")["items"]}
    out = []
    for w in config.all_workloads():
        if w.kind != "statefulset":
            continue
        sts = statefulset(plane, w.namespace, w.name)
        if sts is None:
            continue
        pods = pods_of(plane, w.namespace, sts["spec"]["selector"]["matchLabels"])
        where = f"workloads[{w.name}] ({cluster}, StatefulSet {w.namespace}/{w.name})"
        if w.state == "stopped":
            out += [f"{where}: stopped, but pod {p['metadata']['name']} exists" for p in pods]
            continue
        ready = sts.get("status", {}).get("readyReplicas", 0)
        if ready != w.nodes or len(pods) != w.nodes:
            out.append(f"{where}: {ready} of {w.nodes} pods Ready, {len(pods)} exist; the scheduler: {unscheduled(pods)}")
        wanted = config.node_set(w.node_set).name
        placed = [p["spec"].get("nodeName") for p in pods]
        out += [f"{where}: pod on node {n}, of node set {node_set.get(n)}, not {wanted}" for n in placed if n and node_set.get(n) != wanted]
        if w.nodes > 1 and len(set(placed)) != len(placed):
            out.append(f"{where}: one pod per node, but the pods are on {placed}")
    return out


def wait_settled(plane: ControlPlane, config: stacks.ClusterConfig) -> float:
    """Seconds until every StatefulSet on the cluster is as `config` declares it (at most READY_BOUND_SECONDS)."""
    started = time.monotonic()
    while problems(plane, config) and time.monotonic() - started < READY_BOUND_SECONDS:
        time.sleep(0.25)
    return time.monotonic() - started


@pytest.fixture(scope="module")
def deployed(sim: Project) -> dict[str, dict[str, Any]]:
    """`pulumi up` of every committed stack, each cluster's tiers in order, the clusters at once; each result with
    `ready_seconds`: how long after `up` its StatefulSets took to be Ready (kept in the timings as `up+Ready`)."""

    def deploy(cluster: str) -> dict[str, dict[str, Any]]:
        results = {}
        for stack in (s for s in PULUMI_STACKS if s.cluster == cluster):
            up = sim.drive(stack.name, "up")
            up["ready_seconds"] = wait_settled(sim.planes[cluster], stacks.load(cluster)) if up["ok"] else None
            if up["ok"]:
                TIMINGS.append((stack.name, "up+Ready", up["wall_seconds"] + up["ready_seconds"], up["program_seconds"]))
            results[stack.name] = up
        return results

    return {name: up for per_cluster in _in_parallel(deploy, CLUSTERS).values() for name, up in per_cluster.items()}


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_running_statefulset_is_ready_on_its_own_nodes(sim: Project, deployed: dict[str, dict[str, Any]], cluster: str) -> None:
    for stack in (s for s in PULUMI_STACKS if s.cluster == cluster):
        assert deployed[stack.name]["ok"], failure(deployed[stack.name])
        assert deployed[stack.name]["wall_seconds"] < UP_BOUND_SECONDS
    plane = sim.planes[cluster]
    config = stacks.load(cluster)
    missing = [w.name for w in config.all_workloads() if w.kind == "statefulset" and statefulset(plane, w.namespace, w.name) is None]
    assert not missing, f"{cluster}: StatefulSets not on the cluster after up: {missing}"
    wrong = problems(plane, config)
    assert not wrong, f"{cluster}, {READY_BOUND_SECONDS} s after up:\n" + "\n".join(wrong)
    running = [w for w in config.all_workloads() if w.kind == "statefulset" and w.state == "running"]
    assert running, f"{cluster} runs no StatefulSet: nothing was scheduled"


# --- the bandwidth check gates the rollout ---------------------------------------------------------------------

CHECK_CLUSTER = "cairo"  # its check needs both nodes, which ml-dev-env holds: stop it to enable it (clusters/cairo.py)


def _decide(plane: ControlPlane, namespace: str, prefix: str, exit_code: str, done: threading.Event) -> list[str]:
    """Until `done`: every Running pod of a Job named PREFIX... gets its exit code (kwok ends it so, as the launcher's
    bandwidth.py exits 0 or 1 on its verdict); the nodes those pods ran on."""
    ran: dict[str, str] = {}
    while not done.wait(0.25):
        for pod in (plane.get(f"/api/v1/namespaces/{namespace}/pods") or {}).get("items", []):
            meta = pod["metadata"]
            job = meta.get("labels", {}).get("batch.kubernetes.io/job-name", "")
            if job.startswith(prefix) and pod["status"].get("phase") == "Running" and EXIT not in meta.get("annotations", {}):
                plane.kubectl("annotate", "pod", meta["name"], "-n", namespace, f"{EXIT}={exit_code}", check=False)
                ran[meta["name"]] = pod["spec"]["nodeName"]
    return sorted(ran.values())


def _check_config(stopped: bool, **check: Any) -> dict[str, Any]:
    """Cairo's config with ml-dev-env stopped or not, and its check as given."""
    data = config_data(CHECK_CLUSTER)
    for w in data["workloads"]:
        w["state"] = "stopped" if stopped else w["state"]
    data["bandwidth_checks"][0].update(check)
    return data


def _up(sim: Project, data: dict[str, Any], exit_code: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """`pulumi up` of the check's cluster's project tier with `data` (its platform tier has nothing of a check's: the
    check's grant is its service account's, already made), a Job's pods ended with `exit_code` while it runs (None:
    left running); the result, and the nodes the check's pods ran on."""
    yaml_config(sim, CHECK_CLUSTER, data)
    check = data["bandwidth_checks"][0]
    stack = next(s for s in PULUMI_STACKS if s.cluster == CHECK_CLUSTER and s.tier != "platform")
    done = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        decided = pool.submit(_decide, sim.planes[CHECK_CLUSTER], check["namespace"], f"{check['name']}-", exit_code or "", done)
        if exit_code is None:
            done.set()
        try:
            result = sim.drive(stack.name, "up")
        finally:
            done.set()
    return result, decided.result()


def _verdicts(plane: ControlPlane, namespace: str, name: str) -> set[str]:
    jobs = (plane.get(f"/apis/batch/v1/namespaces/{namespace}/jobs") or {}).get("items", [])
    return {
        c["type"]
        for j in jobs
        if j["metadata"]["name"].startswith(name)
        for c in j["status"].get("conditions", [])
        if c["status"] == "True"
    }


def test_stopping_a_workload_and_enabling_the_check_on_its_nodes_in_one_edit(sim: Project, deployed: dict[str, dict[str, Any]]) -> None:
    """`check` says it fits (ml-dev-env is stopped in the config), and so it does: the stopped workload goes first and
    the check waits until its pods are gone, then runs one pod on each node (found here first: the program used to
    declare the stopped workload after the check, whose pods then stayed Pending until its deadline). A one-minute
    deadline bounds the wait should that come back (the default is 30 minutes, plus `up`'s margin of 5)."""
    assert all(deployed[s.name]["ok"] for s in PULUMI_STACKS if s.cluster == CHECK_CLUSTER)
    data = _check_config(stopped=True, enabled=True, deadline_minutes=1)
    project, ran_on = _up(sim, data, exit_code="0")
    plane, check = sim.planes[CHECK_CLUSTER], data["bandwidth_checks"][0]
    pods = [p for p in pods_of(plane, check["namespace"], {}) if p["metadata"]["name"].startswith(check["name"])]
    assert project["ok"], f"the scheduler: {unscheduled(pods)}\n" + failure(project)
    assert len(set(ran_on)) == check.get("nodes", 2), ran_on
    assert "Complete" in _verdicts(plane, check["namespace"], check["name"])


@pytest.mark.parametrize(("run_number", "exit_code"), [(1, "0"), (2, "1")], ids=["passes", "fails"])
def test_a_bandwidth_check_gates_up_until_its_verdict(
    sim: Project, deployed: dict[str, dict[str, Any]], run_number: int, exit_code: str
) -> None:
    """As clusters/cairo.py says: stop ml-dev-env (an `up`), then enable the check (another): its pods take both nodes,
    one each, and `up` waits for the verdict: Complete lets it finish, Failed fails it at once, naming the check."""
    plane = sim.planes[CHECK_CLUSTER]
    holding = [
        w.name for w in stacks.load(CHECK_CLUSTER).all_workloads() if pods_of(plane, w.namespace, {"app.kubernetes.io/name": w.name})
    ]
    if holding:  # not yet stopped by an earlier case
        stopped, _ = _up(sim, _check_config(stopped=True, enabled=False))
        assert stopped["ok"], failure(stopped)
    data = _check_config(stopped=True, enabled=True, run_number=run_number)
    project, ran_on = _up(sim, data, exit_code)
    check = data["bandwidth_checks"][0]
    assert len(ran_on) == check["nodes"] == len(set(ran_on)), f"the check's pods ran on {ran_on}: one per node, {check['nodes']} nodes"
    verdicts = _verdicts(plane, check["namespace"], check["name"])
    if exit_code == "0":
        assert project["ok"], failure(project)
        assert "Complete" in verdicts, f"up finished; the Job's conditions: {verdicts}"
    else:
        assert not project["ok"], "up passed over a failed bandwidth check"
        said = project.get("error", "") + "\n".join(project["diagnostics"])
        assert "Failed" in verdicts and check["name"] in said, said[-3000:]
    assert not problems(plane, stacks.validate(data, "live"))  # ml-dev-env, stopped, has no pod


# --- `python -m stacks status` against what the cluster says ------------------------------------------------------
# Each case makes the simulated cluster produce one reason a run is not running, asserts the line `status` prints in
# the stack file's words, then undoes it and sees `status` say everything runs again. kwok runs no container, so an
# image that cannot be pulled and a crashing container are not produced here (tests/tools/test_status.py has them offline).

STATUS_CLUSTER = "barcelona"  # every GPU node in use: nothing else fits, so a tenant's pod leaves a workload no room
STATUS_QUOTA_CLUSTER = "nerc"


def status_of(sim: Project, tools: dict[str, Path | str], stack: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`python -m stacks status STACK` in the project copy, with kubectl on PATH and the project's kubeconfig, as an
    operator runs it."""
    env = {**sim.env, "PATH": f"{Path(tools['kubectl']).parent}:{sim.env['PATH']}", "PYTHONPATH": str(sim.root)}
    return subprocess.run(
        [sys.executable, "-m", "stacks", "status", stack, *flags], cwd=sim.root, env=env, capture_output=True, text=True, timeout=300
    )


def _until(what: Callable[[], bool], seconds: float = READY_BOUND_SECONDS) -> bool:
    end = time.monotonic() + seconds
    while not what():
        if time.monotonic() > end:
            return False
        time.sleep(0.5)
    return True


def _project_stack(cluster: str) -> str:
    return next(s.name for s in PULUMI_STACKS if s.cluster == cluster and s.tier != "platform")


def test_status_says_everything_runs_after_up(sim: Project, deployed: dict[str, dict[str, Any]], tools: dict[str, Path | str]) -> None:
    stack = _project_stack(STATUS_CLUSTER)
    assert deployed[stack]["ok"], failure(deployed[stack])
    done = status_of(sim, tools, stack)
    assert done.returncode == 0, done.stdout + done.stderr
    for w in stacks.load(STATUS_CLUSTER).all_workloads():
        if w.state == "running":
            assert f"workloads[{w.name}]" in done.stdout and "running" in done.stdout, done.stdout
    as_json = json.loads(status_of(sim, tools, stack, "--json").stdout)
    jsonschema.validate(as_json, json.loads((ROOT / "schemas" / "status.v1.json").read_text()))
    assert as_json["ok"] is True


def test_status_names_the_gpus_another_tenant_holds(
    sim: Project, deployed: dict[str, dict[str, Any]], tools: dict[str, Path | str]
) -> None:
    """A pod of another project takes the node deepti-barcelona runs on; its pod, deleted, comes back Pending: the
    scheduler says `Insufficient nvidia.com/gpu`, and `status` says which node set has no room and who holds it."""
    plane, config = sim.planes[STATUS_CLUSTER], stacks.load(STATUS_CLUSTER)
    w = next(w for w in config.all_workloads() if w.state == "running" and w.nodes == 1)
    (pod,) = [p for p in pods_of(plane, w.namespace, {"app.kubernetes.io/name": w.name})]
    node = pod["spec"]["nodeName"]
    plane.kubectl("create", "namespace", "other-tenant")
    tenant = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "holds-the-gpus", "namespace": "other-tenant"},
        "spec": {
            "nodeName": node,  # placed as a kubelet would run it, beside the workload's pod until that one goes
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "registry.example/busy", "resources": {"limits": {nodes.GPU: str(w.gpus_per_node)}}}],
        },
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(tenant))
    try:
        plane.kubectl("delete", "pod", pod["metadata"]["name"], "-n", w.namespace, "--wait=false")
        assert _until(lambda: "Insufficient" in unscheduled(pods_of(plane, w.namespace, {"app.kubernetes.io/name": w.name})))
        done = status_of(sim, tools, _project_stack(STATUS_CLUSTER))
        assert done.returncode == 1, done.stdout + done.stderr
        line = next((ln for ln in done.stdout.splitlines() if f"workloads[{w.name}]" in ln), "")
        assert "pending" in line and f"no node of {w.node_set} has {w.gpus_per_node} free GPUs" in line, done.stdout
    finally:
        plane.kubectl("delete", "namespace", "other-tenant", "--wait=false", check=False)
        plane.kubectl("delete", "pod", "holds-the-gpus", "-n", "other-tenant", "--grace-period=0", "--force", check=False)
    assert _until(lambda: status_of(sim, tools, _project_stack(STATUS_CLUSTER)).returncode == 0), "the pod was placed again"


def test_status_names_the_quota_that_refuses_a_pod(sim: Project, deployed: dict[str, dict[str, Any]], tools: dict[str, Path | str]) -> None:
    """A ResourceQuota that allows no GPU in the workload's project: the StatefulSet controller cannot create its pod
    (FailedCreate, `exceeded quota`), and `status` names the quota."""
    plane, config = sim.planes[STATUS_QUOTA_CLUSTER], stacks.load(STATUS_QUOTA_CLUSTER)
    w = next(w for w in config.all_workloads() if w.state == "running")
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-gpus", "namespace": w.namespace},
        "spec": {"hard": {f"requests.{nodes.GPU}": "0"}},
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(quota))
    try:
        assert _until(lambda: (plane.get(f"/api/v1/namespaces/{w.namespace}/resourcequotas/no-gpus") or {}).get("status", {}).get("hard"))
        for pod in pods_of(plane, w.namespace, {"app.kubernetes.io/name": w.name}):
            plane.kubectl("delete", "pod", pod["metadata"]["name"], "-n", w.namespace, "--wait=false")
        stack = _project_stack(STATUS_QUOTA_CLUSTER)

        def refused() -> bool:
            return "quota" in status_of(sim, tools, stack).stdout

        assert _until(refused), status_of(sim, tools, stack).stdout
        done = status_of(sim, tools, stack)
        assert done.returncode == 1
        line = next((ln for ln in done.stdout.splitlines() if f"workloads[{w.name}]" in ln), "")
        assert "no-gpus" in done.stdout and line, done.stdout
    finally:
        plane.kubectl("delete", "resourcequota", "no-gpus", "-n", w.namespace, check=False)
    assert _until(lambda: status_of(sim, tools, _project_stack(STATUS_QUOTA_CLUSTER)).returncode == 0, 300), "the pod came back"


def test_status_reports_the_bandwidth_checks_last_verdict(
    sim: Project, deployed: dict[str, dict[str, Any]], tools: dict[str, Path | str]
) -> None:
    """After the check cases above (the last one failed its check on purpose), `status` of the check's cluster reports
    the verdict, and exits 1: a failed check gates its transport's workloads."""
    plane = sim.planes[CHECK_CLUSTER]
    data = yaml.safe_load((sim.root / f"live-{CHECK_CLUSTER}.yaml").read_text())
    check = data["bandwidth_checks"][0]
    verdicts = _verdicts(plane, check["namespace"], check["name"])
    done = status_of(sim, tools, _project_stack(CHECK_CLUSTER), "--json")
    report = json.loads(done.stdout)
    (seen,) = [c for c in report["checks"] if c["config"] == f"bandwidth_checks[{check['name']}]"]
    assert seen["state"] == ("failed" if "Failed" in verdicts else "passed"), (verdicts, seen)
    assert done.returncode == (1 if "Failed" in verdicts else 0)
