"""OpenShift's SCC admission against the program (docs/live.md "SCC admission", issue 33 parts 1-3).

Each cluster's control plane runs OpenShift's own SCC admission plugin (live/scc.py: apiserver-library-go's
sccadmission in a webhook, the SCCs and grants OpenShift ships, each project's uid/MCS allocation) and its
controller-manager makes pods as a cluster's does, each controller under its own service account. Every committed
Pulumi stack is deployed with the real engine, the three clusters at once; Barcelona's plane also has kube-scheduler
and kwok (live/nodes.py), so its pods run and `python -m stacks status` can say everything runs. Then:

1. every pod of every running workload is admitted, under the SCC the stack's outputs name, and carries after
   admission's mutation what its memlock strategy needs (IPC_LOCK, SYS_RESOURCE, uid 0, or a privileged container);
   TCP pods run under restricted-v2 as a uid of their project's range, never root; nothing runs under `privileged`
   unless the stack names it with a reason. The bandwidth checks (disabled in the committed stacks) are asked of
   admission directly: their Jobs' pods, as the Job controller would create them, are admitted the same way;
2. refusals as a user meets them, each with OpenShift's own message (the controller's FailedCreate event), in the
   config's words from `python -m stacks status`, named by `stacks drift`, and undone by the advice both give;
3. a service account that may also use anyuid (as on the seeds' clusters) still gets the program's SCC, because
   every pod pins it; unpinned, the same TCP pod would run under anyuid.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import stacks
from components.outputs import stack_outputs
from components.program import layout
from config.kube import REQUIRED_SCC
from config.values import STRATEGY_CAPABILITIES, STRATEGY_RUNS_AS_ROOT
from live import clusters, nodes, scc, toolchain
from live.controlplane import ControlPlane
from live.tests.harness import PULUMI_STACKS, Project, config_data, failure, kubeconfig_of, project_copy, pulumi_env

CLUSTERS = sorted({s.cluster for s in PULUMI_STACKS})
SIMULATED = "barcelona"  # its plane places and runs the pods (status says "running"); the others' pods stay Pending
SETTLE_SECONDS = 180  # a StatefulSet controller that failed to create a pod retries with a backoff that doubles


def _plane(cluster: str, bins: dict[str, Path], work: Path) -> tuple[ControlPlane, scc.Admission]:
    sim = cluster == SIMULATED
    plane_bins = {n: p for n, p in bins.items() if sim or n not in toolchain.LEVEL3}
    plane = ControlPlane(cluster, work / cluster, plane_bins, controller_credentials=True).start()
    try:
        clusters.install_crds(plane)
        admission = scc.Admission(plane, bins["scc-admission"]).start()
        config = stacks.load(cluster)
        clusters.seed(plane, config)
        if sim:
            plane.make_nodes(nodes.nodes(config))
    except BaseException:
        plane.stop()
        raise
    return plane, admission


def _each(work: Callable[[str], Any], names: list[str]) -> dict[str, Any]:
    """work(name) for every name at once; every result, or the first error once all are done."""
    with ThreadPoolExecutor(len(names)) as pool:
        futures = {n: pool.submit(work, n) for n in names}
    errors = [f.exception() for f in futures.values() if f.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]
    return {n: f.result() for n, f in futures.items()}


class Admitted(Project):
    admissions: dict[str, scc.Admission]


@pytest.fixture(scope="module")
def project(
    tools: dict[str, Path | str],
    pulumi_tools: dict[str, Path],
    sim_tools: dict[str, Path],
    scc_tools: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Admitted]:
    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    work = tmp_path_factory.mktemp("scc")
    bins = {**{n: Path(tools[n]) for n in toolchain.LEVEL1}, **sim_tools, "scc-admission": scc_tools}
    started: dict[str, tuple[ControlPlane, scc.Admission]] = {}

    def start(cluster: str) -> None:
        started[cluster] = _plane(cluster, bins, work)

    try:
        _each(start, CLUSTERS)
        planes = {c: p for c, (p, _) in started.items()}
        (work / "state").mkdir()
        # kubectl on PATH too: `stacks status` and `stacks drift` read the cluster with it, as an operator's would.
        bin_dirs = [p.parent for p in pulumi_tools.values()] + [Path(tools["kubectl"]).parent]
        env = pulumi_env(bin_dirs, kubeconfig_of(list(planes.values()), work / "kubeconfig"), work / "state", work / "home")
        admitted = Admitted(project_copy(work / "project"), env, planes)
        admitted.admissions = {c: a for c, (_, a) in started.items()}
        yield admitted
    finally:
        for plane, admission in started.values():
            admission.stop()
            plane.stop()


@pytest.fixture(scope="module")
def deployed(project: Admitted) -> dict[str, dict[str, Any]]:
    """`pulumi up` of every committed stack, each cluster's tiers in order, the clusters at once."""

    def deploy(cluster: str) -> dict[str, dict[str, Any]]:
        return {s.name: project.drive(s.name, "up") for s in PULUMI_STACKS if s.cluster == cluster}

    results = {name: up for per_cluster in _each(deploy, CLUSTERS).values() for name, up in per_cluster.items()}
    for up in results.values():
        assert up["ok"], failure(up)
    return results


# --- what the cluster says of the pods ---------------------------------------------------------------------------


def outputs(project: Project, cluster: str) -> dict[str, Any]:
    """The outputs of the cluster's stack that runs its workloads (`pulumi stack output --json`)."""
    stack = next(s.name for s in PULUMI_STACKS if s.cluster == cluster and s.tier != "platform")
    return dict(json.loads(project.pulumi("stack", "output", "--json", "-s", stack).stdout))


def owner(plane: ControlPlane, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    group = "apps" if kind == "statefulset" else "batch"
    found = plane.get(f"/apis/{group}/v1/namespaces/{namespace}/{kind}s/{name}")
    return dict(found) if found else None


def pods_of(plane: ControlPlane, obj: dict[str, Any]) -> list[dict[str, Any]]:
    selector = ",".join(f"{k}={v}" for k, v in sorted(obj["spec"]["selector"]["matchLabels"].items()))
    return list((plane.get(f"/api/v1/namespaces/{obj['metadata']['namespace']}/pods?labelSelector={selector}") or {}).get("items", []))


def training_container(pod: dict[str, Any]) -> dict[str, Any]:
    """The container the launcher runs in (the one with LAUNCHER_MODE)."""
    return next(c for c in pod["spec"]["containers"] if any(e["name"] == "LAUNCHER_MODE" for e in c.get("env") or []))


def effective(pod: dict[str, Any], container: dict[str, Any], field: str) -> Any:
    """A security setting as the runtime applies it: the container's, else the pod's."""
    own = (container.get("securityContext") or {}).get(field)
    return own if own is not None else (pod["spec"].get("securityContext") or {}).get(field)


def allocation(plane: ControlPlane, namespace: str) -> tuple[range, str]:
    """The namespace's uid range and MCS label (what the allocation controller wrote)."""
    annotations = plane.get(f"/api/v1/namespaces/{namespace}")["metadata"]["annotations"]
    start, size = (int(x) for x in annotations[scc.UID_RANGE].split("/"))
    return range(start, start + size), annotations[scc.MCS]


def problems(plane: ControlPlane, config: stacks.ClusterConfig, pod: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """What is wrong with an admitted pod of a workload or check whose outputs are `expected` (scc, memlock_strategy,
    mode): its SCC, and what its strategy needs after admission's mutation."""
    name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    annotations = pod["metadata"].get("annotations") or {}
    out = []
    if annotations.get(scc.VALIDATED_SCC) != expected["scc"] or annotations.get(REQUIRED_SCC) != expected["scc"]:
        out.append(f"{name}: admitted under {annotations.get(scc.VALIDATED_SCC)!r}, pins {annotations.get(REQUIRED_SCC)!r}, "
                   f"the outputs say {expected['scc']!r}")  # fmt: skip
    c = training_container(pod)
    strategy = expected["memlock_strategy"]
    ctx = c.get("securityContext") or {}
    added = set((ctx.get("capabilities") or {}).get("add") or [])
    if strategy in STRATEGY_RUNS_AS_ROOT:
        missing = set(STRATEGY_CAPABILITIES[strategy]) - added
        if missing or effective(pod, c, "runAsUser") != 0:
            out.append(f"{name}: memlock {strategy} needs uid 0 and {sorted(STRATEGY_CAPABILITIES[strategy])}; after admission: "
                       f"uid {effective(pod, c, 'runAsUser')}, adds {sorted(added)}")  # fmt: skip
    elif strategy == "privileged" and not ctx.get("privileged"):
        out.append(f"{name}: memlock privileged, but the container is not privileged after admission")
    if expected["scc"] == "restricted-v2":
        uids, mcs = allocation(plane, pod["metadata"]["namespace"])
        uid = effective(pod, c, "runAsUser")
        level = (effective(pod, c, "seLinuxOptions") or {}).get("level")
        if uid not in uids or effective(pod, c, "runAsNonRoot") is not True or level != mcs:
            out.append(f"{name}: under restricted-v2 it runs as uid {uid} (the project's range {uids.start}-{uids.stop - 1}), "
                       f"runAsNonRoot {effective(pod, c, 'runAsNonRoot')}, SELinux level {level} (the project's {mcs})")  # fmt: skip
        if "ALL" not in ((ctx.get("capabilities") or {}).get("drop") or []) or ctx.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: under restricted-v2 it must drop ALL and not escalate: {ctx}")
    if annotations.get(scc.VALIDATED_SCC) == "privileged" and not (
        config.security.scc == "privileged" and config.security.broad_grant_reason
    ):
        out.append(f"{name}: runs under privileged, which the stack does not name with a reason (security.broad_grant_reason)")
    return out


# --- 1. every pod admitted under the program's SCC ----------------------------------------------------------------


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_running_pod_is_admitted_under_the_scc_the_stack_names(project: Admitted, deployed: dict[str, Any], cluster: str) -> None:
    plane, config = project.planes[cluster], stacks.load(cluster)
    declared = outputs(project, cluster)["workloads"]
    wrong, seen = [], 0
    for name, w in declared.items():
        if w["state"] != "running":
            continue
        obj = owner(plane, w["kind"], w["namespace"], w["object"])
        assert obj is not None, f"{cluster}: {w['kind']} {w['namespace']}/{w['object']} is not on the cluster"
        pods = pods_of(plane, obj)
        if len(pods) != w["replicas"]:
            events = plane.kubectl("get", "events", "-n", w["namespace"], "--field-selector=reason=FailedCreate", "-o", "json")
            said = [e["message"] for e in json.loads(events.stdout)["items"]]
            pytest.fail(f"{cluster}: workloads[{name}] has {len(pods)} of {w['replicas']} pods; FailedCreate: {said}")
        for pod in pods:
            wrong += problems(plane, config, pod, w)
            seen += 1
    assert seen, f"{cluster}: no pod runs"
    assert not wrong, "\n".join(wrong)


def test_the_controllers_create_pods_with_no_scc_rights_but_restricted(project: Admitted, deployed: dict[str, Any]) -> None:
    """The StatefulSet and Job controllers may use restricted-v2 (as every authenticated user) and no other SCC, as on
    OpenShift: the service account's grants decide what a pod may do, not who creates it."""
    plane = project.planes[SIMULATED]
    for account in (scc.STATEFULSET_CONTROLLER, scc.JOB_CONTROLLER):
        token = scc.token_of(plane, account)
        for name in scc.shipped_sccs() | {stacks.load(SIMULATED).security.scc or "": {}}:
            said = plane.kubectl(
                "auth", "can-i", "use", f"securitycontextconstraints.security.openshift.io/{name}", token=token, check=False
            )
            allowed = said.stdout.strip() == "yes"
            assert allowed == (name in ("restricted-v2", "restricted-v3")), f"{account} may use {name}: {said.stdout}"


@pytest.mark.parametrize("cluster", [c for c in CLUSTERS if stacks.load(c).bandwidth_checks])
def test_every_bandwidth_checks_pods_would_be_admitted_under_the_scc_the_outputs_name(
    project: Admitted, deployed: dict[str, Any], cluster: str
) -> None:
    """The committed stacks' checks are disabled (each needs nodes a running workload holds): each is rendered
    enabled, as its config says to do, and the pod the Job controller would make from it is asked of admission, as
    the Job controller (a dry run)."""
    plane = project.planes[cluster]
    data = config_data(cluster)
    for check in data["bandwidth_checks"]:
        check["enabled"] = True
    config = stacks.validate(data, "live")
    token = scc.token_of(plane, scc.JOB_CONTROLLER)
    checks = stack_outputs(config)["bandwidth_checks"]
    wrong = []
    for d in layout(config):
        obj = d.object
        if obj["kind"] != "Job" or obj["metadata"]["name"] not in {c["job"] for c in checks.values()}:
            continue
        expected = next(c for c in checks.values() if c["job"] == obj["metadata"]["name"])
        verdict = scc.review(plane, scc.pod_of(obj), token)
        if not verdict.admitted:
            wrong.append(f"check Job {obj['metadata']['name']}: {verdict}")
            continue
        wrong += problems(plane, config, verdict.pod, expected)
    assert len(checks) == len(config.bandwidth_checks)
    assert not wrong, "\n".join(wrong)


# --- 2. refusals as a user meets them -------------------------------------------------------------------------------


def stacks_cmd(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m stacks ...` in the project copy, as an operator runs it (kubectl and pulumi on PATH, the kubeconfig)."""
    env = {**project.env, "PYTHONPATH": str(project.root)}
    return subprocess.run([sys.executable, "-m", "stacks", *args], cwd=project.root, env=env, capture_output=True, text=True, timeout=300)


def _until(what: Callable[[], Any], seconds: float = SETTLE_SECONDS) -> Any:
    end = time.monotonic() + seconds
    while not (found := what()):
        if time.monotonic() > end:
            return found
        time.sleep(0.5)
    return found


def restart(plane: ControlPlane, sts: dict[str, Any]) -> None:
    """Delete a StatefulSet's pods, as a node drain or a crash would: the controller makes them again, through admission."""
    for pod in pods_of(plane, sts):
        plane.kubectl("delete", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"], "--wait=false")


def admitted_again(plane: ControlPlane, sts: dict[str, Any], under: str) -> bool:
    pods = pods_of(plane, sts)
    return len(pods) == sts["spec"]["replicas"] and all(
        not p["metadata"].get("deletionTimestamp") and (p["metadata"].get("annotations") or {}).get(scc.VALIDATED_SCC) == under
        for p in pods
    )


def line_of(said: str, workload: str) -> str:
    return next((ln for ln in said.splitlines() if f"workloads[{workload}]" in ln), "")


def _stack(cluster: str, platform: bool) -> str:
    return next(s.name for s in PULUMI_STACKS if s.cluster == cluster and (s.tier == "platform") == platform)


def _sts(plane: ControlPlane, config: stacks.ClusterConfig, name: str) -> tuple[Any, dict[str, Any]]:
    w = next(w for w in config.all_workloads() if w.name == name)
    obj = owner(plane, "statefulset", w.namespace, w.name)
    assert obj is not None
    return w, obj


def test_a_grant_removed_by_hand_and_a_service_account_without_it(project: Admitted, deployed: dict[str, Any]) -> None:
    """On Barcelona, two hand edits of the platform tier's grants (the RoleBindings to system:openshift:scc:nccl-rdma-scc):
    tsfm-node's project loses its RoleBinding; deepti-barcelona's keeps it, but without her service account. Their pods,
    made again, are refused by OpenShift's admission in its own words (the controller's FailedCreate event); `stacks
    status` says which service account may not use which SCC, in the stack file's words, and that the grant is the
    platform tier's; `stacks drift` of the platform tier names both edits; `pulumi up --refresh` of the platform tier, which
    both advise, restores them, and the pods are admitted again."""
    cluster = SIMULATED
    plane, config = project.planes[cluster], stacks.load(cluster)
    project_stack, platform = _stack(cluster, platform=False), _stack(cluster, platform=True)
    role = f"system:openshift:scc:{config.security.scc}"
    assert stacks_cmd(project, "status", project_stack).returncode == 0
    clean = stacks_cmd(project, "drift", platform)
    assert clean.returncode == 0, f"drift right after up (the allocation annotations are the cluster's, not drift):\n{clean.stdout}"

    tsfm, tsfm_sts = _sts(plane, config, "tsfm-node")
    deepti, deepti_sts = _sts(plane, config, "deepti-barcelona")
    plane.kubectl("delete", "rolebinding", role, "-n", tsfm.namespace)
    binding = plane.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{deepti.namespace}/rolebindings/{role}")
    kept = [s for s in binding["subjects"] if s["name"] != deepti.service_account]
    assert kept, "the RoleBinding grants only deepti's service account: the edit would remove the grant whole"
    patch = json.dumps([{"op": "replace", "path": "/subjects", "value": kept}])
    plane.kubectl("patch", "rolebinding", role, "-n", deepti.namespace, "--type=json", "-p", patch)
    for sts in (tsfm_sts, deepti_sts):
        restart(plane, sts)

    refusal = f'provider "{config.security.scc}": Forbidden: not usable by user or serviceaccount'
    for w in (tsfm, deepti):
        said = _until(lambda w=w: refusal in scc.refusal(plane, w.namespace, w.name) and scc.refusal(plane, w.namespace, w.name), 60)
        assert said, f"{w.name}: no FailedCreate quoting {refusal!r}: {scc.refusal(plane, w.namespace, w.name)!r}"
        assert "unable to validate against any security context constraint" in said, said

    status = stacks_cmd(project, "status", project_stack)
    assert status.returncode == 1, status.stdout + status.stderr
    for w in (tsfm, deepti):
        line = line_of(status.stdout, w.name)
        assert f"service account {w.service_account} may not use the SCC {config.security.scc} (security.scc" in line, status.stdout
        assert "its grant is the platform tier's (`pulumi up --refresh` of the platform stack)" in line, status.stdout

    drift = stacks_cmd(project, "drift", platform)
    assert drift.returncode == 1, drift.stdout + drift.stderr
    for phrase in (f"RoleBinding {tsfm.namespace}/{role}", f"RoleBinding {deepti.namespace}/{role}", f"pulumi up --refresh -s {platform}"):
        assert phrase in drift.stdout, f"{phrase!r} not in:\n{drift.stdout}"

    restored = project.drive(platform, "up", "--refresh")
    assert restored["ok"], failure(restored)
    for sts in (tsfm_sts, deepti_sts):
        assert _until(lambda sts=sts: admitted_again(plane, sts, config.security.scc)), f"{sts['metadata']['name']}: {pods_of(plane, sts)}"
    assert _until(lambda: stacks_cmd(project, "status", project_stack).returncode == 0, 60), stacks_cmd(
        project, "status", project_stack
    ).stdout


def test_the_platform_tiers_scc_missing(project: Admitted, deployed: dict[str, Any]) -> None:
    """The SCC the platform tier creates, deleted by hand (what a project tier meets when the platform tier is not, or no
    longer, applied): a pod made again is refused with OpenShift's `failed to retrieve the required SCC`; `stacks status`
    says the SCC the pods pin is not on the cluster and that the platform tier creates it; drift names it; `pulumi up
    --refresh` of the platform tier makes it again and the pods are admitted."""
    cluster = SIMULATED
    plane, config = project.planes[cluster], stacks.load(cluster)
    project_stack, platform = _stack(cluster, platform=False), _stack(cluster, platform=True)
    name = config.security.scc
    deepti, sts = _sts(plane, config, "deepti-barcelona")
    plane.kubectl("delete", "securitycontextconstraints.security.openshift.io", name)
    restart(plane, sts)
    refusal = f'failed to retrieve the required SCC "{name}"'
    said = _until(lambda: refusal in scc.refusal(plane, deepti.namespace, deepti.name), 60)
    assert said, scc.refusal(plane, deepti.namespace, deepti.name)

    status = stacks_cmd(project, "status", project_stack)
    assert status.returncode == 1, status.stdout + status.stderr
    line = line_of(status.stdout, deepti.name)
    assert f"the SCC {name} they pin (security.scc" in line and "is not on the cluster: the platform tier creates it" in line, status.stdout
    drift = stacks_cmd(project, "drift", platform)
    assert drift.returncode == 1 and f"SecurityContextConstraints {name}" in drift.stdout, drift.stdout

    restored = project.drive(platform, "up", "--refresh")
    assert restored["ok"], failure(restored)
    assert plane.get(f"/apis/security.openshift.io/v1/securitycontextconstraints/{name}") is not None
    assert _until(lambda: admitted_again(plane, sts, name)), pods_of(plane, sts)


def test_a_service_account_added_without_its_grant_is_refused_before_admission_and_admission_agrees(
    project: Admitted, deployed: dict[str, Any]
) -> None:
    """A new workload under a new service account, deployed with the project tier only (its grant is the platform
    tier's, not applied yet): `pulumi up` stops at the grant it reads, naming the service account and the fix, before
    any pod; and OpenShift's admission, asked for the pod the StatefulSet controller would make, refuses it in its own
    words: what the program said would happen."""
    from live.tests.harness import yaml_config

    cluster = SIMULATED
    plane = project.planes[cluster]
    data = config_data(cluster)
    deepti = next(w for w in data["workloads"] if w["name"] == "deepti-barcelona")
    data["security"]["service_accounts"].append({"name": "new-sa", "namespace": deepti["namespace"]})
    new = json.loads(json.dumps({k: v for k, v in deepti.items() if k != "tcp_variants"}))  # its variants' names are deepti's
    data["workloads"].append({**new, "name": "new-run", "service_account": "new-sa", "state": "stopped"})
    config = stacks.validate(data, "live")
    files = {s.path.name: (project.root / s.path.name).read_text() for s in PULUMI_STACKS if s.cluster == cluster}
    yaml_config(project, cluster, data)
    try:
        up = project.drive(_stack(cluster, platform=False), "up")
        assert not up["ok"], "the project tier deployed a workload whose service account has no grant"
        said = up.get("error", "") + "\n".join(up["diagnostics"])
        assert "new-sa" in said and _stack(cluster, platform=True) in said, said[-3000:]
    finally:  # the stack files as they were (with the backend's encryption salt), for the tests after this one
        for name, text in files.items():
            (project.root / name).write_text(text)
    assert owner(plane, "statefulset", deepti["namespace"], "new-run") is None, "the StatefulSet was made without its grant"
    (obj,) = [d.object for d in layout(config) if d.object["kind"] == "StatefulSet" and d.object["metadata"]["name"] == "new-run"]
    # Its service account: the failed `up` may have made it already (nothing of it waits on the grant's read).
    plane.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "new-sa", "namespace": deepti["namespace"]}})
    verdict = scc.review(plane, scc.pod_of(obj), scc.token_of(plane, scc.STATEFULSET_CONTROLLER))
    assert not verdict.admitted, verdict
    assert f'provider "{config.security.scc}": Forbidden: not usable by user or serviceaccount' in verdict.message, verdict.message


# --- 3. priority: a service account that may also use anyuid -------------------------------------------------------


@pytest.mark.parametrize(("cluster", "workload"), [("barcelona", "tsfm-node"), ("nerc", "deepti-nerc")], ids=["rdma", "tcp"])
def test_a_service_account_that_may_also_use_anyuid_still_gets_the_programs_scc(
    project: Admitted, deployed: dict[str, Any], cluster: str, workload: str
) -> None:
    """As on the seeds' clusters (`oc adm policy add-scc-to-user anyuid -z SA`): the workload's service account may use
    anyuid too, whose priority (10) puts it before every SCC of no priority. Its pods, made again, still run under the
    SCC the outputs name: each pins it (openshift.io/required-scc, the preflight's `required-scc` rule). And anyuid
    could not take them even unpinned: it allows no seccomp profile (its manifest has no seccompProfiles) and the
    program gives every container RuntimeDefault (`least-privilege`), nor an added capability (the RDMA pods add
    IPC_LOCK). Asked of admission, the same pod unpinned runs under the program's SCC all the same, and pinned to anyuid
    is refused, saying so."""
    plane, config = project.planes[cluster], stacks.load(cluster)
    w, sts = _sts(plane, config, workload)
    expected = outputs(project, cluster)["workloads"][workload]
    grant = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "system:openshift:scc:anyuid", "namespace": w.namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:openshift:scc:anyuid"},
        "subjects": [{"kind": "ServiceAccount", "name": w.service_account, "namespace": w.namespace}],
    }  # fmt: skip
    plane.apply(grant)
    try:
        restart(plane, sts)
        assert _until(lambda: admitted_again(plane, sts, expected["scc"]), 60), [
            p["metadata"].get("annotations") for p in pods_of(plane, sts)
        ]
        wrong = [p for pod in pods_of(plane, sts) for p in problems(plane, config, pod, expected)]
        assert not wrong, "\n".join(wrong)
        token = scc.token_of(plane, scc.STATEFULSET_CONTROLLER)
        unpinned = scc.pod_of(sts)
        unpinned["metadata"]["annotations"].pop(REQUIRED_SCC)
        verdict = scc.review(plane, unpinned, token)
        assert verdict.admitted and verdict.scc == expected["scc"], verdict
        unpinned["metadata"]["annotations"][REQUIRED_SCC] = "anyuid"
        verdict = scc.review(plane, unpinned, token)
        # (OpenShift's seccomp errors name the pod's annotation, not the provider: anyuid is the only one tried here.)
        assert not verdict.admitted and "seccomp may not be set" in verdict.message, verdict.message
        if expected["mode"] == "rdma":
            assert "capability may not be added" in verdict.message, verdict.message
    finally:
        plane.delete(grant)
