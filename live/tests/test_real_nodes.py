"""Real nodes: the stacks' pods start on a real kubelet with containerd and runc (docs/live.md "Real nodes", issue 44).

Cairo's control plane (the real scheduler, OpenShift's SCC admission, kwok for its worker and control-plane node) gets two
real nodes carrying Cairo's node set (live/realnodes.py): its two named nodes, their labels, taint and GPUs. Every pod
is deployed by the real `pulumi up` of a stack and runs the image of live/image.py under the name the stack gives it.

1. the committed stack: ml-dev-env's two pods land on the real nodes and the launcher stops each at start (an RDMA pod
   on a node with no RDMA device), after reporting the uid, CapEff and RLIMIT_MEMLOCK predicted for it;
   `python -m stacks status` names the workload and the launcher's cause;
2. its TCP form: a two-node torchrun, rendezvous through the headless Service's name (CoreDNS), an all-reduce with the
   right sum; the claim on nfs-csi (RWX) written by pod 0 and read by pod 1 (seed 004's test);
3. the bandwidth check on those nodes, judged by the gate that gates `up`: a pass lets `up` finish, a fail fails it;
4. the seeds' trap: a non-root pod with IPC_LOCK added (seed 003's edit of the StatefulSet) is stopped by the launcher
   (CapEff 0: added capabilities are not effective for a non-root uid), and status names it;
5. `pulumi destroy` leaves the protected claims and what was written on them; nothing is left running on the nodes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import stacks
from live import clusters, image, nodes, realnodes, scc, toolchain
from live.controlplane import ControlPlane
from live.tests.conftest import NodeKit
from live.tests.harness import PULUMI_STACKS, Project, config_data, failure, kubeconfig_of, project_copy, pulumi_env, yaml_config

CLUSTER = "cairo"  # two named GPU nodes, RWX on nfs-csi, the existing privileged SCC (clusters/cairo.py)
NS = "nccl-test"
WORKLOAD = "ml-dev-env"
STACKS = [s.name for s in PULUMI_STACKS if s.cluster == CLUSTER]
START_SECONDS = 240  # a pod's image is local, but torch's import in each process takes seconds on two busy cores
REPORT = "LAUNCHER_REPORT "
SUM = re.compile(r"allreduce rank \d+ of \d+: sum \S+, expected \S+: (?:ok|WRONG)")

# The training script of the TCP run: written as for GPUs (NCCL, a CUDA device per local rank); the image's GPU stand-in
# runs it on the CPU over gloo (live/image.py).
ALLREDUCE = """import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
x = torch.ones(1024, device="cuda") * (rank + 1)
dist.all_reduce(x)
want = world * (world + 1) / 2
said = f"allreduce rank {rank} of {world}: sum {x[0].item():g}, expected {want:g}: {'ok' if x[0].item() == want else 'WRONG'}"
os.write(1, (said + "\\n").encode())  # one write: the ranks of a pod share its log
dist.destroy_process_group()
time.sleep(3600)  # a training run goes on: the pods stay Running for the claim's test
"""


@dataclass
class Real(Project):
    nodes: list[realnodes.Node] | None = None
    admission: scc.Admission | None = None


@pytest.fixture(scope="module")
def real(
    tools: dict[str, Path | str],
    pulumi_tools: dict[str, Path],
    sim_tools: dict[str, Path],
    scc_tools: Path,
    node_tools: NodeKit,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Real]:
    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    work = tmp_path_factory.mktemp("real")
    config = stacks.load(CLUSTER)
    specs = nodes.nodes(config)
    gpu = [n for n in specs if n["metadata"]["labels"].get(nodes.NODE_SET)]
    bins = {**{n: Path(tools[n]) for n in toolchain.LEVEL1}, **sim_tools}
    network = realnodes.Network.create()
    plane = ControlPlane(CLUSTER, work / CLUSTER, bins, controller_credentials=True, address=network.host,
                         volume_root=str(work / "volumes"))  # fmt: skip
    registry = image.Registry(node_tools.image, network.host)
    started: list[realnodes.Node] = []
    admission = None
    try:
        plane.start()
        clusters.install_crds(plane)
        admission = scc.Admission(plane, scc_tools).start()
        clusters.seed(plane, config)
        plane.make_nodes([n for n in specs if n not in gpu])  # kwok's: the worker and the control-plane node
        registry.start()
        realnodes.start_dns(plane, node_tools.coredns, network.host)
        indexes = list(range(1, len(gpu) + 1))
        for i, spec in zip(indexes, gpu, strict=True):
            node = realnodes.Node(spec, i, work / spec["metadata"]["name"], plane, network, node_tools.kubelet,
                                  node_tools.runtime, node_tools.image, registry.endpoint)  # fmt: skip
            started.append(node)
            node.start([j for j in indexes if j != i])
        (work / "state").mkdir()
        bin_dirs = [p.parent for p in pulumi_tools.values()] + [Path(tools["kubectl"]).parent]
        env = pulumi_env(bin_dirs, kubeconfig_of([plane], work / "kubeconfig"), work / "state", work / "home")
        yield Real(project_copy(work / "project"), env, {CLUSTER: plane}, nodes=started, admission=admission)
    finally:
        for node in started:
            node.stop()
        registry.stop()
        if admission is not None:
            admission.stop()
        plane.stop()
        network.stop()


# --- reading the cluster -----------------------------------------------------------------------------------------


def _until(what: Callable[[], Any], seconds: float = START_SECONDS) -> Any:
    end = time.monotonic() + seconds
    while not (found := what()) and time.monotonic() < end:
        time.sleep(1)
    return found


def pods(plane: ControlPlane, prefix: str = WORKLOAD) -> list[dict[str, Any]]:
    items = (plane.get(f"/api/v1/namespaces/{NS}/pods") or {}).get("items", [])
    return sorted((p for p in items if p["metadata"]["name"].startswith(prefix)), key=lambda p: p["metadata"]["name"])


def log(plane: ControlPlane, pod: dict[str, Any], previous: bool = False) -> str:
    """The training container's log through the API server and the node's kubelet, as `oc logs` reads it."""
    query = "container=training" + ("&previous=true" if previous else "")
    status, body = plane.request("GET", f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log?{query}")
    return str(body) if status == 200 else ""


def report(text: str) -> dict[str, Any] | None:
    """The launcher's start report (its LAUNCHER_REPORT line), by its JSON fields."""
    line = next((ln for ln in text.splitlines() if ln.startswith(REPORT)), None)
    return dict(json.loads(line[len(REPORT) :])) if line else None


def container(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "training")


def mode(pod: dict[str, Any]) -> str:
    """The launcher's mode the pod was rendered with (LAUNCHER_MODE)."""
    return next((str(e.get("value")) for e in container(pod).get("env") or [] if e["name"] == "LAUNCHER_MODE"), "")


def crash_looping(pod: dict[str, Any]) -> bool:
    for c in pod.get("status", {}).get("containerStatuses") or []:
        if (c.get("lastState") or {}).get("terminated") and c.get("restartCount", 0) >= 1:
            return True
    return False


def running_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions") or [])


def stacks_cmd(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**project.env, "PYTHONPATH": str(project.root)}
    return subprocess.run([sys.executable, "-m", "stacks", *args], cwd=project.root, env=env, capture_output=True, text=True, timeout=300)


def up(project: Project, data: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """`pulumi up` of Cairo's stacks, platform first: the committed config, or `data` deployed as YAML."""
    if data is not None:
        yaml_config(project, CLUSTER, data)
    return {s: project.drive(s, "up") for s in STACKS}


def starts_as_predicted(plane: ControlPlane, pod: dict[str, Any], previous: bool = False) -> dict[str, Any]:
    """The launcher's report of `pod` (its current container's, or its last one's), once its log has it, after checking
    that its uid, CapEff and RLIMIT_MEMLOCK are the predicted ones."""
    text = _until(lambda: t if REPORT in (t := log(plane, pod, previous)) else "", 120) or log(plane, pod, previous)
    found = report(text)
    assert found is not None, f"{pod['metadata']['name']}: no launcher report in its log:\n{text[-3000:]}"
    want = realnodes.predicted_start(pod)
    pinning = found["pinning"]
    got = {"uid": pinning["uid"], "cap_eff": int(pinning["cap_eff"], 16), "memlock": pinning["limit_at_start"]}
    assert got == want, f"{pod['metadata']['name']} started with {got}, predicted {want} (launcher report: {pinning})"
    return found


# --- 1. the committed stack ----------------------------------------------------------------------------------------


def test_the_real_nodes_carry_the_node_set(real: Real) -> None:
    plane = real.planes[CLUSTER]
    assert real.nodes
    for node in real.nodes:
        live = plane.get(f"/api/v1/nodes/{node.name}")
        info = live["status"]["nodeInfo"]
        assert info["kubeletVersion"] == f"v{toolchain.K8S_VERSION}", info
        assert info["containerRuntimeVersion"].startswith("containerd://1.6."), info
        for key, value in node.spec["metadata"]["labels"].items():
            assert live["metadata"]["labels"].get(key) == value, (key, live["metadata"]["labels"])
        taints = {(t["key"], t["effect"]) for t in live["spec"].get("taints") or []}
        assert taints >= {(t["key"], t["effect"]) for t in node.spec["spec"]["taints"]}, taints
        for resource, value in node.spec["status"]["capacity"].items():  # the node set's GPUs, and its CPU and memory
            assert realnodes.quantity(live["status"]["capacity"][resource]) == realnodes.quantity(value), (resource, live["status"])
    kwok = {n["metadata"]["name"] for n in plane.get("/api/v1/nodes")["items"]} - {n.name for n in real.nodes}
    assert kwok == {nodes.WORKER, nodes.CONTROL_PLANE}


def test_the_committed_stack_starts_on_the_real_nodes_as_predicted(real: Real) -> None:
    """ml-dev-env (RDMA, privileged) on nodes with no RDMA device: the launcher reports, then stops each pod."""
    plane = real.planes[CLUSTER]
    results = up(real)
    for result in results.values():
        assert result["ok"], failure(result)
    placed = _until(lambda: len(found := [p for p in pods(plane) if crash_looping(p)]) == 2 and found)
    assert placed, f"{WORKLOAD}'s pods did not start and stop: {[p.get('status') for p in pods(plane)]}"
    assert {p["spec"]["nodeName"] for p in placed} == {n.name for n in real.nodes or []}
    for pod in placed:
        found = starts_as_predicted(plane, pod, previous=True)
        assert found["verdict"] == "would-not-start", found
        assert any("RDMA" in e or "rdma" in e for e in found["errors"]), found["errors"]


def test_status_names_the_rdma_pod_the_launcher_stopped(real: Real) -> None:
    plane = real.planes[CLUSTER]
    assert _until(lambda: all(c.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
                              for p in pods(plane) for c in p["status"].get("containerStatuses") or []), 120)  # fmt: skip
    status = stacks_cmd(real, "status", "cairo")
    assert status.returncode == 1, status.stdout + status.stderr
    line = next((ln for ln in status.stdout.splitlines() if WORKLOAD in ln and "CrashLoopBackOff" in ln), "")
    assert "the launcher would not start it" in line, status.stdout
    assert "RDMA" in line or "rdma" in line, status.stdout


# --- 2. the TCP form: a two-node torchrun, and the shared claim -------------------------------------------------------


def tcp_config(**edits: Any) -> dict[str, Any]:
    """Cairo's config with ml-dev-env in its TCP form (seed 004's deploy-multi-node-tcp) running ALLREDUCE under torchrun,
    2 processes per pod; `edits` update the bandwidth check."""
    data = config_data(CLUSTER)
    w = next(w for w in data["workloads"] if w["name"] == WORKLOAD)
    w.update(transport="tcp", memlock=None, privileged_reason=None, run="torchrun", args=["/scripts/allreduce.py"],
             gpus_per_node=2, deepspeed_hostfile=None)  # fmt: skip
    data["scripts"][0]["files"]["allreduce.py"] = ALLREDUCE
    # Nothing runs privileged now: the accepted warning and the hand-made grant of the privileged SCC go with it.
    data["accepted_warnings"] = [a for a in data["accepted_warnings"] if a["rule"] != "privileged-container"]
    data["hand_made"] = [h for h in data["hand_made"] if h["kind"] != "RoleBinding"]
    check = data["bandwidth_checks"][0]
    check.update(transport="tcp", memlock=None, privileged_reason=None, tool="torch", gpus_per_node=1,
                 min_bytes=1 << 20, max_bytes=1 << 20, iterations=2, warmup_iterations=0, deadline_minutes=10)  # fmt: skip
    check.update(edits)
    if check.get("enabled"):
        w["state"] = "stopped"  # the check needs both nodes (clusters/cairo.py)
    return data


def test_a_two_node_tcp_run_sums_right_through_the_headless_service(real: Real) -> None:
    plane = real.planes[CLUSTER]
    results = up(real, tcp_config())
    for result in results.values():
        assert result["ok"], failure(result)
    ready = _until(lambda: len(found := [p for p in pods(plane) if running_ready(p) and mode(p) == "tcp"]) == 2 and found)
    assert ready, f"{WORKLOAD}'s TCP pods are not Running and Ready: {[p.get('status') for p in pods(plane)]}"
    namespace = plane.get(f"/api/v1/namespaces/{NS}")["metadata"]["annotations"]
    for pod in ready:
        found = starts_as_predicted(plane, pod)
        assert found["verdict"] == "start" and found["transport"] == "tcp", found
        assert found["pinning"]["uid"] == int(namespace[scc.UID_RANGE].split("/")[0]), "restricted-v2: the project's first uid"
        # The rendezvous as rendered: pod 0's name under the headless Service, resolved by the cluster DNS.
        assert found["rendezvous"]["MASTER_ADDR"] == f"{WORKLOAD}-0.{WORKLOAD}-headless.{NS}.svc.cluster.local", found["rendezvous"]

    def sums() -> list[str]:
        found = {m for p in ready for m in SUM.findall(log(plane, p))}
        return sorted(found) if len(found) == 4 else []

    said = _until(sums, 300)
    assert said and all(ln.endswith("expected 10: ok") for ln in said), [log(plane, p)[-2000:] for p in ready]


def test_the_rwx_claim_is_shared_by_both_nodes(real: Real) -> None:
    """Seed 004's check of the RWX workspace: written in pod 0, read in pod 1 (each on its own node)."""
    plane = real.planes[CLUSTER]
    mark = f"written by {WORKLOAD}-0 at {time.time()}"
    wrote = plane.kubectl("exec", "-n", NS, f"{WORKLOAD}-0", "-c", "training", "--", "sh", "-c", f"echo '{mark}' > /workspace/live-rwx",
                          check=False)  # fmt: skip
    assert wrote.returncode == 0, wrote.stderr
    read = plane.kubectl("exec", "-n", NS, f"{WORKLOAD}-1", "-c", "training", "--", "cat", "/workspace/live-rwx", check=False)
    assert read.stdout.strip() == mark, read.stderr
    nodes_of = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods(plane)}
    assert nodes_of[f"{WORKLOAD}-0"] != nodes_of[f"{WORKLOAD}-1"], nodes_of


# --- 3. the bandwidth check gates up ---------------------------------------------------------------------------------


def check_pods(plane: ControlPlane) -> list[dict[str, Any]]:
    return pods(plane, "rdma-bandwidth-")


def test_the_bandwidth_check_runs_on_the_real_nodes_and_gates_up(real: Real) -> None:
    plane = real.planes[CLUSTER]
    passed = up(real, tcp_config(enabled=True))
    for result in passed.values():
        assert result["ok"], failure(result)
    logs = [log(plane, p) for p in check_pods(plane)]
    assert len(logs) == 2 and all("bandwidth check: PASS (mode tcp)" in text for text in logs), [t[-1500:] for t in logs]
    assert {p["spec"]["nodeName"] for p in check_pods(plane)} == {n.name for n in real.nodes or []}
    # A line rate no TCP link has: the same gate fails the run, and `up` with it, naming the Job.
    failed = up(real, tcp_config(enabled=True, run_number=2, line_rate_gbps=100000))
    project = failed[STACKS[-1]]
    assert not project["ok"], "up passed a check whose gate failed"
    said = project.get("error", "") + "\n".join(project["diagnostics"])
    assert "rdma-bandwidth" in said, said[-3000:]
    verdicts = [text for text in (log(plane, p) for p in check_pods(plane)) if "bandwidth check: FAIL" in text]
    assert verdicts and all("is below" in text for text in verdicts), [log(plane, p)[-1500:] for p in check_pods(plane)]


# --- 4. the seeds' trap: a non-root uid with IPC_LOCK added -------------------------------------------------------------


def test_a_non_root_pod_with_ipc_lock_added_is_stopped_by_the_launcher(real: Real) -> None:
    """Seed 003: the StatefulSet edited by hand to run as uid 1000 with IPC_LOCK added; CapEff is 0 (no ambient set), so
    the launcher stops the pod at start, and status says why (its RDMA pods stop anyway here: no RDMA device)."""
    plane = real.planes[CLUSTER]
    data = config_data(CLUSTER)
    w = next(w for w in data["workloads"] if w["name"] == WORKLOAD)
    w.update(memlock="root-ipc-lock", privileged_reason=None)
    data["accepted_warnings"] = [a for a in data["accepted_warnings"] if a["rule"] != "privileged-container"]
    for result in up(real, data).values():
        assert result["ok"], failure(result)
    patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/securityContext/runAsUser", "value": 1000},
             {"op": "replace", "path": "/spec/template/spec/containers/0/securityContext/runAsNonRoot", "value": True}]  # fmt: skip
    plane.kubectl("patch", "statefulset", WORKLOAD, "-n", NS, "--type=json", "-p", json.dumps(patch))
    # The rollout replaces the last pod first and waits for it to be Ready, which it never is: one pod is edited.
    edited = _until(lambda: [p for p in pods(plane) if container(p)["securityContext"].get("runAsUser") == 1000 and crash_looping(p)])
    assert edited, f"the edited pod did not start and stop: {[p.get('status') for p in pods(plane)]}"
    for pod in edited:
        found = starts_as_predicted(plane, pod, previous=True)
        assert found["pinning"]["cap_eff"] == "0x0" and not found["pinning"]["ipc_lock"], found["pinning"]
        assert "IPC_LOCK" in found["errors"][0], found["errors"]
    status = stacks_cmd(real, "status", "cairo")
    assert status.returncode == 1, status.stdout + status.stderr
    line = next((ln for ln in status.stdout.splitlines() if f"workloads[{WORKLOAD}]" in ln), "")
    assert "the launcher would not start it" in line and "IPC_LOCK" in line, status.stdout


# --- 5. destroy ---------------------------------------------------------------------------------------------------------


def test_destroy_leaves_the_protected_claims_and_their_data_and_nothing_runs(real: Real) -> None:
    plane = real.planes[CLUSTER]
    for stack in reversed(STACKS):
        result = real.drive(stack, "destroy", "--exclude-protected")
        assert result["ok"], failure(result)
    assert _until(lambda: not pods(plane) and not check_pods(plane), 120), [p["metadata"]["name"] for p in pods(plane)]
    claim = plane.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/ml-dev-workspace")
    assert claim is not None and claim["status"]["phase"] == "Bound", claim
    volume = Path(plane.volume_root) / NS / "ml-dev-workspace" / "live-rwx"
    assert volume.read_text().startswith(f"written by {WORKLOAD}-0"), volume
    for node in real.nodes or []:
        left = node.containers()
        assert not left, f"{node.name}: containers still running after destroy: {left}"
