"""An existing SCC held to the config's facts, against OpenShift's own SCC admission (docs/live.md "SCC admission", issue
43 Audit 5 item 2).

Barcelona's stacks, deployed as a YAML config whose `security` names an SCC its admin made (`site-rdma`: not the
stack's, not one OpenShift ships) where the committed stack creates its own, on a plane with OpenShift's SCC admission
(live/scc.py) whose controllers make pods under their own service accounts:

1. the audit's case: the facts say IPC_LOCK and no privileged containers while the cluster's object is a copy of
   `privileged` (capabilities `*`, host paths, the node's namespaces). `check` cannot know (the facts are narrow) and
   passes; the platform tier's preview reads the SCC and fails, naming each config field with the cluster's value;
2. the same SCC described honestly: `check` refuses the broad grant until `broad_grant_reason` says why, then prints
   it; preview prints it too, both tiers' `up` pass, every pod of every running workload is admitted under `site-rdma`
   as what its memlock strategy needs, and what the reason accepts is real: admission would admit a privileged pod
   with the node's `/` mounted, as that service account;
3. the reverse: a site SCC that is the stack's own least-privilege one but for runAsUser `MustRunAsRange` 0-65535,
   with facts IPC_LOCK and root: the platform tier's preview and `up` pass (they refused "its runAsUser
   (MustRunAsRange) does not admit uid 0"), and the pod the StatefulSet controller makes is admitted under it as uid 0.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import stacks
from components.outputs import stack_outputs
from components.program import layout
from components.security import scc_object
from config.kube import REQUIRED_SCC
from live import clusters, scc, toolchain
from live.controlplane import ControlPlane
from live.scc_differential import use_role_object
from live.tests.harness import Project, config_data, failure, kubeconfig_of, project_copy, pulumi_env, yaml_config

CLUSTER = "barcelona"
PLATFORM, PROJECT = "barcelona-platform", "barcelona"
SITE = "site-rdma"
REASON = "the site's admin grants a copy of privileged to the lab; a least-privilege SCC is requested (ticket 4711)"
LIED = {"existing_allowed_capabilities": ["IPC_LOCK"], "existing_allows_privileged": False}
HONEST = {
    "existing_allowed_capabilities": None, "existing_allows_privileged": True, "existing_allows_root": True,
    "existing_allows_host_paths": True, "existing_allows_host_namespaces": True,
}  # fmt: skip


class Admitted(Project):
    admission: scc.Admission


@pytest.fixture(scope="module")
def project(
    tools: dict[str, Path | str], pulumi_tools: dict[str, Path], scc_tools: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Admitted]:
    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    work = tmp_path_factory.mktemp("scc-existing")
    bins = {n: Path(tools[n]) for n in toolchain.LEVEL1}
    plane = ControlPlane(CLUSTER, work / CLUSTER, bins, controller_credentials=True).start()
    admission: scc.Admission | None = None
    try:
        clusters.install_crds(plane)
        admission = scc.Admission(plane, scc_tools).start()
        clusters.seed(plane, stacks.load(CLUSTER))
        (work / "state").mkdir()
        bin_dirs = [p.parent for p in pulumi_tools.values()] + [Path(tools["kubectl"]).parent]
        env = pulumi_env(bin_dirs, kubeconfig_of([plane], work / "kubeconfig"), work / "state", work / "home")
        admitted = Admitted(project_copy(work / "project"), env, {CLUSTER: plane})
        admitted.admission = admission
        yield admitted
    finally:
        if admission is not None:
            admission.stop()
        plane.stop()


def site_scc(name: str, base: dict[str, Any]) -> list[dict[str, Any]]:
    """An SCC an admin made from `base` (a copy, its grants to users and groups dropped), and its use-role, as `oc adm
    policy add-scc-to-user` makes it once."""
    obj = copy.deepcopy(base)
    obj["metadata"] = {"name": name}
    obj.update(users=[], groups=[])
    return [obj, use_role_object(name)]


def deploy_config(project: Project, **security: Any) -> stacks.ClusterConfig:
    """Barcelona's config with `security` changed, named by both its stack files (README "To deploy a config written as
    YAML"); the config, validated."""
    data = config_data(CLUSTER)
    data["security"].update({"create": False, **security})
    yaml_config(project, CLUSTER, data)
    return stacks.validate(data, "live")


def check(project: Project) -> subprocess.CompletedProcess[str]:
    """`python -m stacks check barcelona` in the project copy, as a user runs it."""
    env = {**project.env, "PYTHONPATH": str(project.root)}
    return subprocess.run(
        [sys.executable, "-m", "stacks", "check", PROJECT], cwd=project.root, env=env, capture_output=True, text=True, timeout=300
    )


def training(pod: dict[str, Any]) -> dict[str, Any]:
    """The securityContext of the container the launcher runs in (the one with LAUNCHER_MODE), after admission."""
    spec = pod.get("spec") or {}
    c = next(c for c in spec.get("containers", []) if any(e["name"] == "LAUNCHER_MODE" for e in c.get("env") or []))
    return dict(c.get("securityContext") or {})


def said(result: dict[str, Any]) -> str:
    return " ".join((result.get("error", "") + "\n" + "\n".join(result["diagnostics"])).split())


def test_an_existing_scc_broader_than_its_facts_fails_preview_naming_each_field(project: Admitted) -> None:
    plane = project.planes[CLUSTER]
    for obj in site_scc(SITE, scc.shipped_sccs()["privileged"]):
        plane.apply(obj)
    deploy_config(project, scc=SITE, **LIED)
    checked = check(project)
    assert checked.returncode == 0, checked.stdout + checked.stderr  # the facts are narrow: offline, nothing is wrong

    preview = project.drive(PLATFORM, "preview")
    assert not preview["ok"], "preview took a copy of privileged for an SCC of IPC_LOCK"
    text = said(preview)
    for field, live in [
        ("existing_allowed_capabilities says IPC_LOCK", "allowedCapabilities * (every capability)"),
        ("existing_allows_privileged says false", "allowPrivilegedContainer true"),
        ("existing_allows_host_paths says false", "allowHostDirVolumePlugin true"),
        ("existing_allows_host_namespaces says false", "allowHostIPC, allowHostNetwork, allowHostPID, allowHostPorts true"),
    ]:
        assert f"it has {live}, where security.{field}" in text, text[-4000:]
    assert f"SecurityContextConstraints {SITE}" in text and "security.broad_grant_reason" in text, text[-4000:]
    assert plane.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/nccl-test/rolebindings/system:openshift:scc:{SITE}") is None


def test_honest_facts_need_a_reason_and_with_it_the_pods_are_admitted_under_the_scc(project: Admitted) -> None:
    plane = project.planes[CLUSTER]
    deploy_config(project, scc=SITE, **HONEST)
    refused = check(project)
    out = " ".join(refused.stdout.split())
    assert refused.returncode == 1 and "error privileged-scc security.broad_grant_reason" in out, refused.stdout + refused.stderr

    config = deploy_config(project, scc=SITE, broad_grant_reason=REASON, **HONEST)
    checked = check(project)
    assert checked.returncode == 0 and f"broad_grant_reason: {REASON}" in " ".join(checked.stdout.split()), checked.stdout
    preview = project.drive(PLATFORM, "preview")
    assert preview["ok"], failure(preview)
    assert any("privileged-scc" in d and REASON in " ".join(d.split()) for d in preview["diagnostics"]), preview["diagnostics"]
    for stack in (PLATFORM, PROJECT):
        up = project.drive(stack, "up")
        assert up["ok"], failure(up)

    wrong, seen = [], 0
    for name, w in stack_outputs(config)["workloads"].items():
        if w["state"] != "running":
            continue
        obj = plane.get(f"/apis/apps/v1/namespaces/{w['namespace']}/statefulsets/{w['object']}")
        selector = ",".join(f"{k}={v}" for k, v in sorted(obj["spec"]["selector"]["matchLabels"].items()))
        pods = (plane.get(f"/api/v1/namespaces/{w['namespace']}/pods?labelSelector={selector}") or {}).get("items", [])
        refused = scc.refusal(plane, w["namespace"], w["object"])
        assert len(pods) == w["replicas"], f"workloads[{name}]: {len(pods)} of {w['replicas']} pods; FailedCreate: {refused}"
        for pod in pods:
            seen += 1
            under = (pod["metadata"].get("annotations") or {}).get(scc.VALIDATED_SCC)
            ctx = training(pod)
            if under != w["scc"] or ctx.get("runAsUser") != 0 or "IPC_LOCK" not in (ctx.get("capabilities") or {}).get("add", []):
                wrong.append(f"{pod['metadata']['name']}: under {under} (the outputs: {w['scc']}), {ctx}")
    assert seen and not wrong, "\n".join(wrong)
    assert {w["scc"] for w in stack_outputs(config)["workloads"].values() if w["state"] == "running"} == {SITE}

    # What the reason accepts: the same service account may run a privileged pod with the node's / mounted.
    w = next(w for w in config.all_workloads() if w.state == "running")
    host = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "host-root", "namespace": w.namespace, "annotations": {REQUIRED_SCC: SITE}},
        "spec": {"serviceAccountName": w.service_account, "automountServiceAccountToken": False,
                 "containers": [{"name": "c", "image": "registry.example/x:1", "securityContext": {"privileged": True},
                                 "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
                 "volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
    }  # fmt: skip
    verdict = scc.review(plane, host, scc.token_of(plane, scc.STATEFULSET_CONTROLLER))
    assert verdict.admitted and verdict.scc == SITE, verdict


def test_a_site_scc_whose_uid_range_starts_at_0_admits_root(project: Admitted) -> None:
    """The stack's own SCC, made by the site's admin with runAsUser MustRunAsRange 0-65535 (mustrunasrange.go takes any
    uid in [min, max]): with facts IPC_LOCK and root, the platform tier passes, and admission admits the pod the
    StatefulSet controller would make from the new template, as uid 0 with IPC_LOCK."""
    plane = project.planes[CLUSTER]
    own = scc_object(stacks.load(CLUSTER))
    own["runAsUser"] = {"type": "MustRunAsRange", "uidRangeMin": 0, "uidRangeMax": 65535}
    for obj in site_scc("site-range", own):
        plane.apply(obj)
    config = deploy_config(project, scc="site-range", existing_allowed_capabilities=own["allowedCapabilities"], existing_allows_root=True)
    for op in ("preview", "up"):
        result = project.drive(PLATFORM, op)
        assert result["ok"], failure(result)
    for sa in config.security.service_accounts:  # the project tier's (test 2 made them; made here if it did not run)
        plane.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa.name, "namespace": sa.namespace}})
    token = scc.token_of(plane, scc.STATEFULSET_CONTROLLER)
    wrong, seen = [], 0
    for d in layout(config):
        obj = d.object
        if obj["kind"] != "StatefulSet" or obj["spec"]["template"]["metadata"]["annotations"].get(REQUIRED_SCC) != "site-range":
            continue
        seen += 1
        verdict = scc.review(plane, scc.pod_of(obj), token)
        ctx = training(verdict.pod) if verdict.admitted else {}
        if verdict.scc != "site-range" or ctx.get("runAsUser") != 0 or "IPC_LOCK" not in (ctx.get("capabilities") or {}).get("add", []):
            wrong.append(f"StatefulSet {obj['metadata']['name']}: {verdict} {json.dumps(ctx)}")
    assert seen and not wrong, "\n".join(wrong)
