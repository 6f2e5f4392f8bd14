"""README "Adopting what exists", run exactly as it tells a cluster admin, on a control plane where the seeds'
hand-made objects exist the way the seeds made them:

- `oc adm policy add-scc-to-user SCC -z SA -n NS`: the ClusterRole `system:openshift:scc:SCC` and a RoleBinding of
  the same name in NS (KNOWLEDGE.md);
- `oc create serviceaccount`; the NADs copied into the projects with the seeds' sed pipeline; seed 002's SCC, which
  allows more than the stack's.

Then: step 1 (the provider alone), `import-plan`, `pulumi import`, `pulumi preview`: the state is valid, and nothing
adopted is created or deleted.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from live.controlplane import ControlPlane
from live.tests.harness import Project, failure, kubeconfig_of, project_copy, pulumi_env

ROOT = Path(__file__).resolve().parent.parent.parent

import stacks  # noqa: E402
from components.program import layout  # noqa: E402

CLUSTER, STACK = "barcelona", "barcelona-platform"

# Seed 002's SCC as applied by hand: more than the stack's (host IPC and network, hostPath, escalation,
# SYS_RESOURCE, a users list).
SEED_SCC_EXTRA = {
    "allowHostIPC": True,
    "allowHostNetwork": True,
    "allowHostDirVolumePlugin": True,
    "allowPrivilegeEscalation": True,
    "users": ["system:serviceaccount:nccl-test:h-kim-sa"],
}


def hand_made(config: Any) -> list[dict[str, Any]]:
    """The stack's `hand_made` objects as the seeds made them (the stack's own shape, seed 002's SCC broader)."""
    wanted = {(h.kind, h.namespace, h.name) for h in config.hand_made}
    out = []
    for d in layout(config):
        obj = copy.deepcopy(d.object)
        meta = obj["metadata"]
        if (obj["kind"], meta.get("namespace"), meta["name"]) not in wanted:
            continue
        meta.pop("labels", None)
        meta.pop("annotations", None) if obj["kind"] != "NetworkAttachmentDefinition" else None
        if obj["kind"] == "SecurityContextConstraints":
            obj.update(SEED_SCC_EXTRA)
            obj["allowedCapabilities"] = sorted({*(obj.get("allowedCapabilities") or []), "SYS_RESOURCE"})
        out.append(obj)
    return out


@pytest.fixture(scope="module")
def adopting(tools: dict[str, Path | str], pulumi_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Project:
    from live import clusters, toolchain

    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    work = tmp_path_factory.mktemp("adopt")
    plane = ControlPlane(CLUSTER, work / "plane", {n: Path(tools[n]) for n in toolchain.LEVEL1}).start()
    try:
        clusters.install_crds(plane)
        config = stacks.load(CLUSTER)
        clusters.seed(plane, config)
        for obj in hand_made(config):
            plane.apply(obj)
        kubeconfig = kubeconfig_of([plane], work / "kubeconfig")
        (work / "state").mkdir()
        env = pulumi_env([p.parent for p in pulumi_tools.values()], kubeconfig, work / "state", work / "home")
        yield Project(project_copy(work / "project"), env, {CLUSTER: plane})
    finally:
        plane.stop()


def test_adoption_as_the_readme_tells_it(adopting: Project) -> None:
    config = stacks.load(CLUSTER)
    provider = f"urn:pulumi:{STACK}::gpu-training::pulumi:providers:kubernetes::{CLUSTER}"
    assert provider in (ROOT / "README.md").read_text() or "pulumi up --target" in (ROOT / "docs" / "adoption.md").read_text()
    # 1. the stack's provider alone
    step1 = adopting.drive(STACK, "up", *adoption_step1_targets(STACK))
    assert step1["ok"], failure(step1)
    exported = json.loads(adopting.pulumi("stack", "export", "-s", STACK).stdout)
    resources = exported["deployment"].get("resources") or []
    urns = {r["urn"] for r in resources}
    orphans = [r["urn"] for r in resources if r.get("parent") and r["parent"] not in urns]
    assert not orphans, f"step 1 left resources whose parent is not in the state: {orphans}"
    # 3. the import plan, imported
    plan = adopting.root / "plan.json"
    subprocess.run([sys.executable, "-m", "stacks", "import-plan", STACK, "--out", str(plan)], cwd=adopting.root, check=True,
                   env={**adopting.env, "PYTHONPATH": str(adopting.root)})  # fmt: skip
    imported = adopting.drive(STACK, "import", "--file", str(plan))
    assert imported["ok"], failure(imported)
    # 4. nothing adopted is created or deleted; the SCC seed 002 made broader than the stack's fails with the field
    # conflicts the README describes (step 2's adopt-diff lists the same narrowing)
    preview = adopting.drive(STACK, "preview", "--diff")
    assert not preview["ok"], "preview after the import passed; the seed's broader SCC should conflict"
    conflicts = "\n".join(preview["diagnostics"])
    assert "conflict" in conflicts and "nccl-rdma-scc" in conflicts and ".allowHostIPC" in conflicts, conflicts[-3000:]
    adopted = {(h.kind, f"{h.namespace}/{h.name}" if h.namespace else h.name) for h in config.hand_made}
    assert not _touched(preview, adopted), f"after the import, preview would create or delete adopted objects: {_touched(preview, adopted)}"
    # 5. the narrowing accepted: forced for one run, then the setting removed; nothing left to do
    adopting.pulumi("config", "set", "kubernetes:enablePatchForce", "true", "-s", STACK)
    # The live provider (toolchain.PROVIDER_VERSION, docs/live.md) predates the enablePatchForce provider setting the
    # pinned 4.34.2 reads, and honours only the variable: both are set, so the run forces on either version.
    forced = adopting.drive(STACK, "up", env={"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"})
    assert forced["ok"], failure(forced)
    assert not _touched(forced, adopted), f"the forced run created or deleted adopted objects: {_touched(forced, adopted)}"
    adopting.pulumi("config", "rm", "kubernetes:enablePatchForce", "-s", STACK)
    unforced = adopting.drive(STACK, "up")  # the provider's setting back to false: the provider alone changes
    assert unforced["ok"], failure(unforced)
    changed = {s["type"] for s in unforced["steps"] if s["op"] not in ("same", "read")}
    assert changed <= {"pulumi:providers:kubernetes"}, f"removing enablePatchForce changed more than the provider: {changed}"
    settled = adopting.drive(STACK, "preview", "--expect-no-changes")
    assert settled["ok"], failure(settled)
    scc = adopting.planes[CLUSTER].get("/apis/security.openshift.io/v1/securitycontextconstraints/nccl-rdma-scc")
    assert scc is not None and not scc.get("allowHostIPC"), "the adopted SCC keeps what the stack does not declare"


def _touched(result: dict[str, Any], adopted: set[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        (s["op"], s["urn"]) for s in result["steps"]
        if s["op"] in ("create", "delete", "replace", "create-replacement", "delete-replaced")
        and (s["type"].rsplit(":", 1)[-1], s["urn"].split("::")[-1]) in adopted
    ]  # fmt: skip


def adoption_step1_targets(stack: str) -> list[str]:
    """The --target flags of README "Adopting what exists" step 1, read from the README itself."""
    import re

    text = (ROOT / "README.md").read_text()
    docs = ROOT / "docs" / "adoption.md"
    if docs.exists():
        text += docs.read_text()
    line = next(line for line in text.splitlines() if line.startswith("pulumi up --target"))
    flags = []
    for urn in re.findall(r"--target '([^']+)'", line):
        flags += ["--target", urn.replace("barcelona-platform", stack)]
    assert flags, line
    return flags
