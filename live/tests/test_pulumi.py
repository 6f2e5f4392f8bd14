"""Level 2: the real Pulumi CLI and kubernetes provider, running the project's own program against the control
planes, every committed Pulumi stack in order (each cluster's platform tier before its project tier).

The tests of this module share one deployment and run in order: up, then what must hold of it (no changes
on a second preview, the outputs, a hostile environment), then edits, missing prerequisites, and destroy.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from live.controlplane import ControlPlane, api_path
from live.tests.harness import (
    PULUMI_STACKS,
    STACK_IDS,
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

import stacks  # noqa: E402
from components.program import layout  # noqa: E402
from components.tiers import keep_for  # noqa: E402


@pytest.fixture(scope="module")
def project(planes: Any, pulumi_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Project:
    clusters = sorted({s.cluster for s in PULUMI_STACKS})
    started = {c: planes(c) for c in clusters}
    work = tmp_path_factory.mktemp("pulumi")
    kubeconfig = kubeconfig_of(list(started.values()), work / "kubeconfig")
    (work / "state").mkdir()
    env = pulumi_env([p.parent for p in pulumi_tools.values()], kubeconfig, work / "state", work / "home")
    return Project(project_copy(work / "project"), env, started)


def declared(stack: stacks.PulumiStack) -> list[dict[str, Any]]:
    config = stacks.load(stack.cluster)
    keep = keep_for(config, stack.tier)
    return [d.object for d in layout(config) if keep(d.object) and not d.patch]


@pytest.mark.parametrize("stack", PULUMI_STACKS, ids=STACK_IDS)
def test_preview_then_up_of_every_stack(project: Project, stack: stacks.PulumiStack) -> None:
    preview = project.drive(stack.name, "preview")
    assert preview["ok"], failure(preview)
    up = project.drive(stack.name, "up")
    assert up["ok"], failure(up)
    assert up["wall_seconds"] < UP_BOUND_SECONDS
    # What lifecycle.py promises, with no kubelet and no scheduler: StatefulSets have their pods (Pending),
    # Jobs are started, the stack's own claims on Immediate classes are bound.
    plane = project.planes[stack.cluster]
    for obj in declared(stack):
        meta = obj["metadata"]
        if obj["kind"] == "StatefulSet":
            live = plane.get(f"/apis/apps/v1/namespaces/{meta['namespace']}/statefulsets/{meta['name']}")
            assert live["status"].get("replicas", 0) == obj["spec"]["replicas"], f"StatefulSet {meta['name']}: {live['status']}"
        elif obj["kind"] == "Job":
            live = plane.get(f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}")
            assert live["status"].get("startTime"), f"Job {meta['name']} was not started: {live['status']}"
        elif obj["kind"] == "PersistentVolumeClaim":
            live = plane.get(f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}")
            assert live["status"]["phase"] == "Bound", f"claim {meta['name']}: {live['status']}"


@pytest.mark.parametrize("stack", PULUMI_STACKS, ids=STACK_IDS)
def test_a_second_preview_has_nothing_to_do(project: Project, stack: stacks.PulumiStack) -> None:
    again = project.drive(stack.name, "preview", "--expect-no-changes", "--diff")
    assert again["ok"], failure(again)


@pytest.mark.parametrize("stack", PULUMI_STACKS, ids=STACK_IDS)
def test_stack_outputs_are_the_rendered_ones_and_valid(project: Project, stack: stacks.PulumiStack) -> None:
    out = json.loads(project.pulumi("stack", "output", "--json", "-s", stack.name).stdout)
    schema = json.loads((ROOT / "schemas" / "outputs.v2.json").read_text())
    jsonschema.validate(out, schema)
    from tools.render import run

    assert out == run(stacks.load(stack.cluster), stack.tier).outputs
    # rendered/CLUSTER/outputs.json is the whole cluster's (tier all); each tier's outputs differ from it in `tier` only.
    committed = json.loads((ROOT / "rendered" / stack.cluster / "outputs.json").read_text())
    assert {**out, "tier": "all"} == committed, f"pulumi stack output of {stack.name} differs from rendered/{stack.cluster}/outputs.json"


HOSTILE = {
    "PULUMI_K8S_SKIP_UPDATE_UNREACHABLE": "true",
    "PULUMI_K8S_DELETE_UNREACHABLE": "true",
    "PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY": "false",
    "PULUMI_K8S_ENABLE_CONFIGMAP_MUTABLE": "false",
    "PULUMI_K8S_ENABLE_SECRET_MUTABLE": "true",
    "PULUMI_K8S_UPSERT_EXISTING_OBJECTS": "true",
    "PULUMI_K8S_ENABLE_PATCH_FORCE": "true",
    "PULUMI_K8S_SUPPRESS_DEPRECATION_WARNINGS": "true",
    "PULUMI_K8S_AWAIT_ALL": "true",
    "PULUMI_K8S_CLIENT_TIMEOUT": "1",
    "PULUMI_K8S_CLIENT_QPS": "0.5",
    "PULUMI_K8S_CLIENT_BURST": "1",
}


# Every stack's provider is made by the same code (components/program.py); one stack of each tier shows it.
HOSTILE_STACKS = [next(s for s in PULUMI_STACKS if s.tier == "platform"), next(s for s in PULUMI_STACKS if s.tier != "platform")]


@pytest.mark.parametrize("stack", HOSTILE_STACKS, ids=[s.name for s in HOSTILE_STACKS])
def test_the_environment_cannot_change_the_provider(project: Project, stack: stacks.PulumiStack) -> None:
    hostile = project.drive(stack.name, "preview", "--expect-no-changes", env=HOSTILE)
    assert hostile["ok"], failure(hostile)


def test_refresh_behaves_as_documented(project: Project) -> None:
    """docs/lifecycle.md "Refresh while training runs": refresh reads StatefulSets and Jobs with the provider's own
    readiness check, so one whose pods are not all Ready (here: none ever is, no kubelet) comes back not initialized
    and the next `up` shows an update for it that changes nothing on the cluster; after it, nothing is left."""
    stack = _stack("nerc")
    refreshed = project.drive(stack.name, "refresh")
    assert refreshed["ok"], failure(refreshed)
    preview = project.drive(stack.name, "preview", "--diff")
    assert preview["ok"], failure(preview)
    updated = {_by_object(s["urn"]).split(" ")[0] for s in preview["steps"] if s["op"] == "update"}
    assert updated <= {"StatefulSet", "Job"}, f"after a refresh, preview updates more than StatefulSets and Jobs: {updated}"
    up = project.drive(stack.name, "up")
    assert up["ok"], failure(up)
    settled = project.drive(stack.name, "preview", "--expect-no-changes")
    assert settled["ok"], failure(settled)


def _by_object(urn: str) -> str:
    # urn:pulumi:STACK::PROJECT::...$kubernetes:apps/v1:StatefulSet::NS/NAME
    typ, name = urn.split("::")[-2:]
    return f"{typ.rsplit(':', 1)[-1]} {name}"


def predicted(cluster: str, tier: str, before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """What `python -m stacks diff` reports changed, as 'Kind NS/NAME', for the objects of one tier (a Job template
    change held for the next run left out: it is not applied to the Job that exists)."""
    import tempfile

    from components.lifecycle import held
    from components.tiers import tier_of
    from tools import diff
    from tools.render import run
    from tools.writer import write

    configs = [stacks.validate(data, "live") for data in (before, after)]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        old, new = (diff.read_folder(write(run(c), Path(t))) for c, t in zip(configs, (a, b), strict=True))
    out = set()
    for c in diff.diff_trees(old, new):
        if not c.kind or c.patch:
            continue
        if c.status == "changed" and c.fields and all(held(c.kind, f.path) for f in c.fields):
            continue
        doc = new.get(c.path) or old.get(c.path)
        if tier_of(doc, configs[1]) != tier and tier != "all":
            continue
        meta = doc["metadata"]
        out.add(f"{c.kind} {meta['namespace']}/{meta['name']}" if meta.get("namespace") else f"{c.kind} {meta['name']}")
    return out


def actual(result: dict[str, Any]) -> set[str]:
    """What the real preview says it would change, as 'Kind NS/NAME' (reads and components left out)."""
    changing = {"create", "update", "delete", "replace", "create-replacement", "delete-replaced"}
    return {
        _by_object(s["urn"]) for s in result["steps"]
        if s["op"] in changing and s["type"].startswith("kubernetes:") and not s["type"].startswith("pulumi:providers")
    }  # fmt: skip


def _stack(name: str) -> stacks.PulumiStack:
    return next(s for s in PULUMI_STACKS if s.name == name)


def _edit_workload(data: dict[str, Any], name: str, **fields: Any) -> None:
    w = next(w for w in data["workloads"] if w["name"] == name)
    w.update(fields)


def _running_statefulset(cluster: str) -> str:
    config = stacks.load(cluster)
    return next(w.name for w in config.workloads if w.state == "running" and w.kind == "statefulset")


def _workload(d: dict[str, Any], w: str) -> dict[str, Any]:
    return dict(next(x for x in d["workloads"] if x["name"] == w))


# Everyday edits of a cluster's config, each applied on top of the one before; (description, edit).
EDITS: list[tuple[str, Any]] = [
    ("stop a running workload", lambda d, w: _edit_workload(d, w, state="stopped")),
    ("start it again", lambda d, w: _edit_workload(d, w, state="running")),
    ("switch it to TCP", lambda d, w: _edit_workload(d, w, transport="tcp", tcp_variants=[])),
    ("raise its run_number", lambda d, w: _edit_workload(d, w, run_number=(_workload(d, w).get("run_number") or 0) + 1)),
    ("change its NCCL debug level", lambda d, w: _edit_workload(d, w, env={**(_workload(d, w).get("env") or {}), "NCCL_DEBUG": "WARN"})),
    ("add a node to its node set", lambda d, w: _add_node(d, _workload(d, w).get("node_set"))),
]


def _add_node(d: dict[str, Any], node_set: str | None) -> None:
    """A named set gets one more node; a counted set counts one more."""
    s = next(s for s in d["node_sets"] if node_set in (None, s["name"]))
    if s.get("nodes"):
        s["nodes"] = [*s["nodes"], "live-added-node"]
    else:
        s["count"] = (s.get("count") or 1) + 1


# Barcelona's project tier: RDMA workloads, NAD copies, a platform tier beside it. NERC's convergence (one tier, TCP)
# is test_convergence.py's; the same edits on it again took over a minute of the live tier's budget.
@pytest.mark.parametrize("cluster", ["barcelona"])
def test_everyday_edits_preview_what_stacks_diff_predicts_and_converge(project: Project, cluster: str) -> None:
    """Each edit: `pulumi preview --diff` changes exactly the objects `python -m stacks diff` reports changed (a Job
    template change held for the next run excepted), and `pulumi up` converges. An up that did not converge shows in
    the next edit's preview, which would change more than that edit; after the last edit, a second preview is empty."""
    workload = _running_statefulset(cluster)
    stack = next(s for s in PULUMI_STACKS if s.cluster == cluster and s.tier != "platform")
    before = config_data(cluster)
    done = ""
    for what, edit in EDITS:
        after = json.loads(json.dumps(before))
        edit(after, workload)
        if after == before:
            continue
        yaml_config(project, cluster, after)
        preview = project.drive(stack.name, "preview", "--diff")
        assert preview["ok"], f"{what}: " + failure(preview)
        want, got = predicted(cluster, stack.tier, before, after), actual(preview)
        assert got == want, (f"{what} ({workload} on {cluster}): pulumi preview changes {sorted(got)}, stacks diff predicted "
                             f"{sorted(want)}" + (f" (or the up after '{done}' did not converge)" if done else ""))  # fmt: skip
        up = project.drive(stack.name, "up")
        assert up["ok"], f"{what}: " + failure(up)
        before, done = after, what
    again = project.drive(stack.name, "preview", "--expect-no-changes")
    assert again["ok"], f"{done}: a second preview is not empty: " + failure(again)


def _fails_naming(result: dict[str, Any], *words: str) -> None:
    assert not result["ok"], f"{result['stack']} {result['op']} passed; expected it to fail naming {words}"
    text = result.get("error", "") + "\n".join(result["diagnostics"])
    missing = [w for w in words if w not in text]
    assert not missing, f"the failure does not name {missing}:\n{text[-4000:]}"


@contextmanager
def _removed(plane: ControlPlane, obj: dict[str, Any]) -> Iterator[None]:
    """The object deleted from the cluster for the block, then made again as it was."""
    kept = plane.get(api_path(obj))
    assert kept is not None, f"{obj['kind']} {obj['metadata']} is not on the cluster"
    plane.delete(obj)
    try:
        yield
    finally:
        kept["metadata"] = {k: v for k, v in kept["metadata"].items() if k in ("name", "namespace", "annotations", "labels")}
        plane.apply(kept)


def test_a_missing_source_nad_or_grant_fails_preview_with_the_fix(project: Project) -> None:
    plane = project.planes["barcelona"]
    config = stacks.load("barcelona")
    assert config.fabric is not None and config.security.scc
    nad = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
           "metadata": {"name": config.fabric.attachments[0].network, "namespace": config.fabric.nad_source_namespace}}  # fmt: skip
    with _removed(plane, nad):
        result = project.drive("barcelona-platform", "preview")
        _fails_naming(result, "NetworkAttachmentDefinition", nad["metadata"]["name"], "oc get net-attach-def")
    grant = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": f"system:openshift:scc:{config.security.scc}", "namespace": config.namespaces[0]}}  # fmt: skip
    with _removed(plane, grant):
        result = project.drive("barcelona", "preview")
        _fails_naming(result, "RoleBinding", grant["metadata"]["name"], "pulumi up -s barcelona-platform")


def test_destroy_stops_at_protected_claims_and_leaves_them(project: Project) -> None:
    plane = project.planes["nerc"]
    claims = [o for o in declared(_stack("nerc")) if o["kind"] == "PersistentVolumeClaim"]
    assert claims, "the NERC stack declares a shared claim"
    stopped = project.drive("nerc", "destroy")
    _fails_naming(stopped, "protected")
    done = project.drive("nerc", "destroy", "--exclude-protected")
    assert done["ok"], failure(done)
    for c in claims:
        meta = c["metadata"]
        live = plane.get(f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}")
        assert live is not None and live["status"]["phase"] == "Bound", f"claim {meta['name']} after destroy: {live}"
        assert plane.get(f"/api/v1/persistentvolumes/{live['spec']['volumeName']}") is not None
    left = [o for o in declared(_stack("nerc")) if o["kind"] == "StatefulSet"]
    for o in left:
        meta = o["metadata"]
        assert plane.get(f"/apis/apps/v1/namespaces/{meta['namespace']}/statefulsets/{meta['name']}") is None


def test_a_missing_namespace_fails_preview_with_the_fix(project: Project) -> None:
    plane = project.planes["cairo"]
    ns = stacks.load("cairo").namespaces[0]
    plane.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    deadline = time.monotonic() + 120
    while plane.get(f"/api/v1/namespaces/{ns}") is not None and time.monotonic() < deadline:
        time.sleep(1)
    result = project.drive("cairo", "preview")
    _fails_naming(result, "Namespace", ns, "oc new-project")
