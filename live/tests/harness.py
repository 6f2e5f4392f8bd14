"""What the live tests share: the committed Pulumi stacks in the order they deploy, the project copy and its
environment, a real Pulumi run (`Project.drive`), an edited config deployed as YAML, a project admin's token, and
the timings of every run (printed by conftest.py at the end)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import stacks
from live import procs
from live.controlplane import ControlPlane, kubeconfig_of

ROOT = Path(__file__).resolve().parent.parent.parent


# Each cluster's stacks, the platform tier first (it makes the SCC and the grants the project tier reads).
ORDER = {"platform": 0, "all": 1, "project": 2}
PULUMI_STACKS = sorted(stacks.pulumi_stacks(), key=lambda s: (s.cluster, ORDER[s.tier]))
STACK_IDS = [s.name for s in PULUMI_STACKS]
UP_BOUND_SECONDS = 600  # lifecycle.py: nothing waits longer than 5 minutes; twice that is a failure

# (stack, operation, wall seconds, the program's own seconds) of every real Pulumi run, printed at the end.
TIMINGS: list[tuple[str, str, float, float | None]] = []


IGNORED = shutil.ignore_patterns(".git", ".venv*", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", "rendered")


def project_copy(dest: Path) -> Path:
    """The project as committed to the work tree, for the Pulumi CLI to run in."""
    shutil.copytree(ROOT, dest, ignore=IGNORED)
    return dest


def pulumi_env(bin_dirs: list[Path], kubeconfig: Path, state: Path, home: Path) -> dict[str, str]:
    """The environment of a real Pulumi run: the built CLI and provider first on PATH (the provider as the
    ambient plugin), a file:// backend with a passphrase, no Pulumi Cloud, no update checks, the kubeconfig
    whose contexts carry the stack files' names. Nothing of the caller's PULUMI_*/KUBECONFIG leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "KUBECONFIG"))}
    env.update({
        "PATH": os.pathsep.join([*map(str, bin_dirs), str(Path(sys.executable).parent), env.get("PATH", "")]),
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": "live-tier",
        "PULUMI_HOME": str(home),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "KUBECONFIG": str(kubeconfig),
    })  # fmt: skip
    return env


@dataclass
class Project:
    """The project copied into a temporary folder, with the real CLI, a file:// backend and every cluster's context."""

    root: Path
    env: dict[str, str]
    planes: dict[str, ControlPlane]
    reports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def drive(self, stack: str, op: str, *flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        report = self.root / f".live-{stack}-{op}-{time.monotonic_ns()}.json"
        # In a session of its own, ended with everything in it: the CLI, and the plugins it starts in groups of their own.
        proc = procs.run(
            [sys.executable, "-m", "live.drive", stack, op, *flags, "--report", str(report)],
            cwd=self.root, env={**self.env, **(env or {}), "PYTHONPATH": str(self.root)}, timeout=UP_BOUND_SECONDS + 120,
        )  # fmt: skip
        if not report.exists():
            raise AssertionError(f"live.drive {stack} {op} wrote no report:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(report.read_text())
        self.reports.setdefault(stack, []).append(result)
        if not env:
            TIMINGS.append((stack, op, result["wall_seconds"], result["program_seconds"]))
        return result

    def pulumi(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return procs.run(["pulumi", *args], cwd=self.root, env={**self.env, **(env or {})}, check=check, timeout=600)


def yaml_config(project: Project, cluster: str, data: dict[str, Any]) -> None:
    """Deploy an edited config: the YAML form of the stack (`python -m stacks config`), named by every stack file
    of the cluster (README: "To deploy a config written as YAML")."""
    (project.root / f"live-{cluster}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    for s in PULUMI_STACKS:
        if s.cluster == cluster:
            path = project.root / s.path.name
            doc = yaml.safe_load(path.read_text())
            doc["config"][stacks.CONFIG_FILE_KEY] = f"live-{cluster}.yaml"
            path.write_text(yaml.safe_dump(doc, sort_keys=False))


def config_data(cluster: str) -> dict[str, Any]:
    """A committed cluster's config as plain data, to edit and deploy with yaml_config()."""
    return dict(yaml.safe_load(stacks.dump(stacks.load(cluster))))


def failure(result: dict[str, Any]) -> str:
    """The engine's errors first (the diagnostics), then the end of the CLI's output."""
    errors = [d for d in result["diagnostics"] if d.startswith("error")]
    return f"{result['stack']} {result['op']} failed:\n" + "\n".join(errors)[-4000:] + "\n...\n" + result.get("error", "")[-2000:]


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


__all__ = [
    "PULUMI_STACKS",
    "STACK_IDS",
    "TIMINGS",
    "ControlPlane",
    "Project",
    "config_data",
    "failure",
    "kubeconfig_of",
    "project_admin",
    "project_copy",
    "pulumi_env",
    "yaml_config",
]
