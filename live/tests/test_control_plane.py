"""Level 1: the objects the program renders, and the rights it says it needs, against a real API server.

No Pulumi here: what `python -m stacks render` wrote (rendered/, committed) goes through
`kubectl apply --server-side --dry-run=server` on the cluster's own control plane, with its CRDs and the
objects the stack relies on in place, so the API server's validation, defaulting and admission judge it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from live.tests.harness import project_admin

ROOT = Path(__file__).resolve().parent.parent.parent

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


def rights_lines(stack: str, tier: str) -> list[list[list[str]]]:
    """Per object (or read) of `python -m stacks rights STACK --tier T`, its `oc auth can-i` lines as kubectl arguments
    (an object's further lines have an empty label column)."""
    out = subprocess.run(
        [sys.executable, "-m", "stacks", "rights", stack, "--tier", tier], cwd=ROOT, capture_output=True, text=True, check=True
    )
    groups: list[list[list[str]]] = []
    for line in out.stdout.splitlines():
        if "oc auth can-i" not in line:
            continue
        label, check = line.split("oc auth can-i", 1)
        if label.strip() or not groups:
            groups.append([])
        groups[-1].append(check.split())
    return groups


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

    project = [args for group in rights_lines(stack, "project") for args in group]
    assert project, f"`python -m stacks rights {stack} --tier project` lists nothing"
    denied = [" ".join(a) for a in project if not can(a)]
    assert not denied, f"{stack}: a project admin may not do what the project tier needs:\n" + "\n".join(denied)
    # Each platform object needs something a project admin lacks (a RoleBinding to an SCC's use-role: `bind` on it).
    platform = [g for g in rights_lines(stack, "platform") if g[0][0] in ("create", "patch")]
    allowed = [" / ".join(" ".join(a) for a in g) for g in platform if all(can(a) for a in g)]
    assert not allowed, f"{stack}: the platform tier lists what a project admin may do itself:\n" + "\n".join(allowed)


@pytest.mark.parametrize("asked", [("version", "-o", "json"), ("get", "--raw", "/version")], ids=["kubectl-version", "raw-version"])
def test_the_control_plane_reports_the_release_it_is_built_from(planes, asked: tuple[str, ...]) -> None:
    """The binaries carry k8s.io/kubernetes's pinned release (toolchain.K8S_VERSION), not v0.0.0-master+$Format:%H$,
    which controllers that read the server's version (Kueue does) refuse: the server's /version and kubectl's own."""
    from live import toolchain

    said = json.loads(planes("nerc").kubectl(*asked).stdout)
    versions = [said["serverVersion"], said["clientVersion"]] if "serverVersion" in said else [said]
    for v in versions:
        assert (v["gitVersion"], v["major"], v["minor"]) == (f"v{toolchain.K8S_VERSION}", "1", "34"), v
