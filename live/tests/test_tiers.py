"""Tiers for real: a cluster admin runs the platform tier, then a researcher who is only `admin` in the stack's
namespaces (a ServiceAccount token bound to the `admin` ClusterRole there, README "Pulumi stacks, tiers and rights")
runs the project tier, which succeeds; the same researcher running the platform tier fails, naming the object."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from live.controlplane import ControlPlane
from live.tests.harness import Project, failure, kubeconfig_of, project_admin, project_copy, pulumi_env

CLUSTER = "barcelona"


@pytest.fixture(scope="module")
def admin(tools: dict[str, Path | str], pulumi_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    import stacks
    from live import clusters, toolchain

    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    work = tmp_path_factory.mktemp("tiers")
    plane = ControlPlane(CLUSTER, work / "plane", {n: Path(tools[n]) for n in toolchain.LEVEL1}).start()
    try:
        clusters.install_crds(plane)
        clusters.seed(plane, stacks.load(CLUSTER))
        (work / "state").mkdir()
        env = pulumi_env(
            [p.parent for p in pulumi_tools.values()], kubeconfig_of([plane], work / "kubeconfig"), work / "state", work / "home"
        )
        yield Project(project_copy(work / "project"), env, {CLUSTER: plane})
    finally:
        plane.stop()


def as_researcher(admin: Project, name: str) -> Project:
    """The same project and control plane, as an identity that is admin in the stack's namespaces only, with its
    own state (a researcher's backend knows nothing of the platform stack's)."""
    import stacks

    plane: ControlPlane = admin.planes[CLUSTER]
    token = project_admin(plane, list(stacks.load(CLUSTER).namespaces))
    work = admin.root.parent / name
    work.mkdir()
    config = yaml.safe_load(plane.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    (work / "kubeconfig").write_text(yaml.safe_dump(config))
    (work / "state").mkdir()
    env = {**admin.env, "KUBECONFIG": str(work / "kubeconfig"), "PULUMI_BACKEND_URL": f"file://{work / 'state'}"}
    return Project(admin.root, env, admin.planes)


def test_the_project_tier_needs_only_project_admin_and_the_platform_tier_more(admin: Project) -> None:
    platform = admin.drive(f"{CLUSTER}-platform", "up")
    assert platform["ok"], failure(platform)
    researcher = as_researcher(admin, "researcher")
    project = researcher.drive(CLUSTER, "up")
    assert project["ok"], "the project tier as a project admin: " + failure(project)
    refused = as_researcher(admin, "researcher-platform").drive(f"{CLUSTER}-platform", "up")
    assert not refused["ok"], "the platform tier succeeded as a project admin"
    text = "\n".join(refused["diagnostics"]) + refused.get("error", "")
    assert "forbidden" in text.lower(), text[-3000:]
    assert any(k in text for k in ("securitycontextconstraints", "clusterroles", "storageclasses", "SecurityContextConstraints")), text[
        -3000:
    ]
