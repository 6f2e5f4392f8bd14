"""Level 1: the objects the program renders, and the rights it says it needs, against a real API server.

No Pulumi here: what `python -m stacks render` wrote (rendered/, committed) goes through
`kubectl apply --server-side --dry-run=server` on the cluster's own control plane, with its CRDs and the
objects the stack relies on in place, so the API server's validation, defaulting and admission judge it.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from live.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

import stacks  # noqa: E402


def rendered_files(stack: str) -> list[Path]:
    return sorted(p for p in (ROOT / "rendered" / stack).rglob("*.yaml"))


@pytest.mark.parametrize("stack", stacks.names())
def test_every_rendered_object_is_accepted_by_the_api_server(planes, stack: str) -> None:
    plane = planes(stack)
    files = rendered_files(stack)
    assert files, f"rendered/{stack} holds no objects: run `make render`"
    rejected = []
    for f in files:
        r = plane.kubectl("apply", "--server-side", "--dry-run=server", "--field-manager=live-dry-run", "-f", str(f), check=False)
        if r.returncode != 0:
            rejected.append(f"{f.relative_to(ROOT)}: {r.stderr.strip()}")
    assert not rejected, f"the API server rejects {len(rejected)} rendered object(s) of {stack}:\n" + "\n".join(rejected)


# OpenShift aggregates its own kinds into the `admin` role (openshift-apiserver's bootstrap policy); a plain
# API server does not, so the live tier adds them the same way, by the aggregation label.
OPENSHIFT_ADMIN = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "live-openshift-aggregate-to-admin", "labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
    "rules": [
        {"apiGroups": ["route.openshift.io"], "resources": ["routes", "routes/custom-host"], "verbs": ["*"]},
        {"apiGroups": ["build.openshift.io"], "resources": ["buildconfigs", "builds", "buildconfigs/instantiate"], "verbs": ["*"]},
        {"apiGroups": ["image.openshift.io"], "resources": ["imagestreams", "imagestreamtags"], "verbs": ["*"]},
        {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["network-attachment-definitions"], "verbs": ["*"]},
    ],
}
# Every authenticated user may use the Docker build strategy on OpenShift (system:build-strategy-docker).
DOCKER_STRATEGY = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "live-build-strategy-docker"},
     "rules": [{"apiGroups": ["build.openshift.io"], "resources": ["builds/docker"], "verbs": ["create"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "live-build-strategy-docker"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "live-build-strategy-docker"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]},
]  # fmt: skip


def project_admin(plane: ControlPlane, namespaces: list[str]) -> str:
    """A token of an identity that is `admin` in the stack's namespaces and nothing else (a researcher)."""
    plane.apply(OPENSHIFT_ADMIN)
    for o in DOCKER_STRATEGY:
        plane.apply(o)
    ns0 = namespaces[0]
    name = f"researcher-{secrets.token_hex(3)}"
    plane.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns0}})
    for ns in namespaces:
        plane.apply({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"{name}-admin", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns0}],
        })  # fmt: skip
    return plane.kubectl("create", "token", name, "-n", ns0, "--duration=1h").stdout.strip()


def rights_lines(stack: str, tier: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "stacks", "rights", stack, "--tier", tier], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [line.split("oc auth can-i", 1)[1].split() for line in out.stdout.splitlines() if "oc auth can-i" in line]  # type: ignore[misc]


@pytest.mark.parametrize("stack", stacks.names())
def test_rights_agree_with_the_api_server(planes, stack: str) -> None:
    """`python -m stacks rights`: a project admin may do every project-tier line and read, and none of the
    platform tier's creates and binds (the platform stack is a cluster admin's)."""
    plane = planes(stack)
    config = stacks.load(stack)
    token = project_admin(plane, list(config.namespaces))

    def can(args: list[str]) -> bool:
        r = plane.kubectl("auth", "can-i", *args, token=token, check=False)
        return r.stdout.strip() == "yes"

    project = rights_lines(stack, "project")
    assert project, f"`python -m stacks rights {stack} --tier project` lists nothing"
    denied = [" ".join(a) for a in project if not can(a)]
    assert not denied, f"{stack}: a project admin may not do what the project tier needs:\n" + "\n".join(denied)
    platform = [a for a in rights_lines(stack, "platform") if a[0] in ("create", "bind", "patch")]
    allowed = [" ".join(a) for a in platform if can(a)]
    assert not allowed, f"{stack}: the platform tier lists what a project admin may do itself:\n" + "\n".join(allowed)
