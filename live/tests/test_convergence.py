"""docs/lifecycle.md "Drift" and "An interrupted run", run as an operator would on NERC's stack (project tier), each a
real sequence against the real engine, provider and API server:

- `pulumi up`; hand edits with kubectl (scale, set env, delete an owned object, relabel it); a plain preview sees
  nothing; `stacks drift` names each in the stack file's words; `pulumi up --refresh` restores what the stack
  declares, and removes the env variable added by hand; `stacks drift` then finds none; a second preview is empty.
  And the control: the same program without `pulumi.com/patchForce` is stuck at the conflict the issue reported.
- `pulumi up` killed with SIGKILL (its whole process group) at three points: before any object, mid-way, during the
  last waits; the next `up` refuses (the lock); `pulumi cancel`, `stacks recover` and the refresh it prints; then
  `up` converges and a second preview is empty.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from live import procs
from live.controlplane import ControlPlane
from live.tests.harness import UP_BOUND_SECONDS, Project, failure, kubeconfig_of, project_copy, pulumi_env

ROOT = Path(__file__).resolve().parent.parent.parent

import stacks  # noqa: E402

STACK = "nerc"
STS = "deepti-nerc"


def _plane(tools: dict[str, Path | str], work: Path) -> ControlPlane:
    from live import clusters, toolchain

    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    plane = ControlPlane(STACK, work / "plane", {n: Path(tools[n]) for n in toolchain.LEVEL1}).start()
    try:
        clusters.install_crds(plane)
        clusters.seed(plane, stacks.load(STACK))
    except BaseException:
        plane.stop()
        raise
    return plane


def _project(plane: ControlPlane, tools: dict[str, Path | str], pulumi_tools: dict[str, Path], work: Path) -> Project:
    kubeconfig = kubeconfig_of([plane], work / "kubeconfig")
    (work / "state").mkdir()
    # kubectl on PATH too: `stacks drift` and `stacks recover` read the cluster with it, as an operator's would.
    bins = [p.parent for p in pulumi_tools.values()] + [Path(tools["kubectl"]).parent]
    env = pulumi_env(bins, kubeconfig, work / "state", work / "home")
    return Project(project_copy(work / "project"), env, {STACK: plane})


@pytest.fixture(scope="module")
def nerc(tools: dict[str, Path | str], pulumi_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    work = tmp_path_factory.mktemp("converge")
    plane = _plane(tools, work)
    try:
        yield _project(plane, tools, pulumi_tools, work)
    finally:
        plane.stop()


def stacks_cmd(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m stacks ...` in the project copy, with the operator's PATH (pulumi, kubectl) and kubeconfig."""
    env = {**project.env, "PYTHONPATH": str(project.root)}
    return procs.run([sys.executable, "-m", "stacks", *args], cwd=project.root, env=env, timeout=300)


def namespace() -> str:
    return next(w.namespace for w in stacks.load(STACK).workloads if w.name == STS)


def statefulset(plane: ControlPlane) -> dict[str, Any]:
    live = plane.get(f"/apis/apps/v1/namespaces/{namespace()}/statefulsets/{STS}")
    assert live is not None, f"StatefulSet {STS} is gone"
    return dict(live)


def env_of(sts: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in sts["spec"]["template"]["spec"]["containers"][0].get("env", [])}


def hand_edit(plane: ControlPlane) -> None:
    """What someone does on a shared cluster: grab GPUs, change a setting, clean up, relabel."""
    ns = namespace()
    plane.kubectl("scale", "statefulset", STS, "--replicas=3", "-n", ns)
    plane.kubectl("set", "env", f"statefulset/{STS}", "NCCL_DEBUG=WARN", "ADDED_BY_HAND=1", "-n", ns)
    plane.kubectl("delete", "serviceaccount", "ml-dev-sa", "-n", ns)
    plane.kubectl("label", "--overwrite", "statefulset", STS, "app.kubernetes.io/part-of=someone-else", "-n", ns)


def test_hand_edits_are_seen_by_drift_and_restored_by_up_refresh(nerc: Project) -> None:
    up = nerc.drive(STACK, "up")
    assert up["ok"], failure(up)
    plane = nerc.planes[STACK]
    assert stacks_cmd(nerc, "drift", STACK).returncode == 0
    hand_edit(plane)
    # A plain preview compares the program with the state, not with the cluster: it sees nothing.
    quiet = nerc.drive(STACK, "preview", "--expect-no-changes")
    assert quiet["ok"], failure(quiet)
    # stacks drift names each edit by the config entry that declares it.
    seen = stacks_cmd(nerc, "drift", STACK)
    assert seen.returncode == 1, seen.stdout + seen.stderr
    line = f"workloads[{STS}] (clusters/nerc.py:"
    for phrase in (
        f"{line}", "replicas 3 on the cluster, 1 in the stack", "env NCCL_DEBUG WARN on the cluster, INFO in the stack",
        "label app.kubernetes.io/part-of someone-else on the cluster, gpu-training in the stack",
        "security.service_accounts[ml-dev-sa] (clusters/nerc.py:", "missing on the cluster",
        "env ADDED_BY_HAND=1 on the cluster, not in the stack", f"pulumi up --refresh -s {STACK}",
    ):  # fmt: skip
        assert phrase in seen.stdout, f"{phrase!r} not in:\n{seen.stdout}"
    # The documented procedure.
    restored = nerc.drive(STACK, "up", "--refresh")
    assert restored["ok"], failure(restored)
    sts = statefulset(plane)
    assert sts["spec"]["replicas"] == 1
    assert env_of(sts)["NCCL_DEBUG"] == "INFO"
    assert sts["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpu-training"
    assert plane.get(f"/api/v1/namespaces/{namespace()}/serviceaccounts/ml-dev-sa") is not None
    # The variable added by hand is gone too: the provider took kubectl-set's claim to it back with the rest.
    assert "ADDED_BY_HAND" not in env_of(sts)
    clean = stacks_cmd(nerc, "drift", STACK)
    assert clean.returncode == 0 and "no drift" in clean.stdout, clean.stdout
    settled = nerc.drive(STACK, "preview", "--expect-no-changes")
    assert settled["ok"], failure(settled)


def test_without_patch_force_the_up_after_a_refresh_is_stuck(
    tools: dict[str, Path | str], pulumi_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The control: the program with lifecycle.owned a no-op reproduces the conflict the issue reported, on every up."""
    work = tmp_path_factory.mktemp("stuck")
    plane = _plane(tools, work)
    try:
        project = _project(plane, tools, pulumi_tools, work)
        lifecycle = project.root / "components" / "lifecycle.py"
        text = lifecycle.read_text()
        signature = "def owned(obj: dict[str, Any]) -> dict[str, Any]:\n"  # a `return obj` first, whatever its body is
        assert signature in text, "lifecycle.owned's signature changed: the control cannot make it a no-op"
        lifecycle.write_text(text.replace(signature, signature + "    return obj\n", 1))
        up = project.drive(STACK, "up")
        assert up["ok"], failure(up)
        assert "pulumi.com/patchForce" not in statefulset(plane)["metadata"].get("annotations", {})
        plane.kubectl("scale", "statefulset", STS, "--replicas=3", "-n", namespace())
        for _ in range(2):
            stuck = project.drive(STACK, "up", "--refresh")
            assert not stuck["ok"], "the up after a refresh passed without patchForce"
            said = "\n".join(stuck["diagnostics"]) + stuck.get("error", "")
            assert "conflict" in said.lower() and ".spec.replicas" in said, said[-2000:]
    finally:
        plane.stop()


# --- an interrupted run -------------------------------------------------------------------------------------


def _events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def _k8s(events: list[dict[str, Any]], kind: str = "", event: str = "done") -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == event and "$kubernetes:" in e["urn"] and e["urn"].split("::")[-2].endswith(kind)]


def _awaited(plane: ControlPlane) -> bool:
    """The running StatefulSet is created and `up` waits for it (waitFor): its create is still pending in the state."""
    return plane.get(f"/apis/apps/v1/namespaces/{namespace()}/statefulsets/{STS}") is not None


@contextmanager
def controllers_paused(plane: ControlPlane, paused: bool) -> Iterator[None]:
    """kube-controller-manager stopped (SIGSTOP) while `paused`: no StatefulSet gets its pods, so `up` waits for them
    (waitFor status.replicas) until it is killed, however fast or loaded the machine; it runs on again after."""
    manager = next(p for p in plane.procs if any("kube-controller-manager" in str(a) for a in p.args))
    if paused:
        os.killpg(manager.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if paused:
            os.killpg(manager.pid, signal.SIGCONT)


KILL_POINTS: dict[str, Callable[[list[dict[str, Any]], ControlPlane], bool]] = {
    # The engine has started (the stack's own step) and no object is made yet.
    "before any object": lambda ev, plane: any(e["event"] == "pre" for e in ev),
    # Some objects exist, others not yet (the stack declares about 15).
    "mid-way": lambda ev, plane: len(_k8s(ev)) >= 5,
    # The StatefulSets are declared last and awaited (waitFor): killed while up waits for one that exists.
    "during the last waits": lambda ev, plane: bool(_k8s(ev, "StatefulSet", "pre")) and _awaited(plane),
}


def _killed_up(project: Project, at: Callable[[list[dict[str, Any]], ControlPlane], bool]) -> list[dict[str, Any]]:
    """Start `pulumi up` in a session of its own and SIGKILL the whole session (the driver, the CLI and the provider,
    which the CLI starts in a process group of its own) when `at` holds: a machine that died, with nothing left
    running. Killing the driver's group alone left the provider orphaned, running until its health check ends it."""
    events = project.root / f".events-{time.monotonic_ns()}.jsonl"
    cmd = [sys.executable, "-m", "live.drive", STACK, "up", "--events", str(events)]
    proc = subprocess.Popen(cmd, cwd=project.root, env={**project.env, "PYTHONPATH": str(project.root)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + UP_BOUND_SECONDS
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if at(_events(events), project.planes[STACK]):
                procs.end_session(proc.pid)
                break
            time.sleep(0.02)
        assert proc.wait(timeout=60) == -signal.SIGKILL, "the run ended before the kill point"
    finally:
        procs.end_session(proc.pid)
    return _events(events)


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_killed_up_recovers_as_documented(nerc: Project, point: str) -> None:
    # From the stack's objects gone (the protected claim stays, as docs/adoption.md "Destroy" says).
    gone = nerc.drive(STACK, "destroy", "--exclude-protected")
    assert gone["ok"], failure(gone)
    with controllers_paused(nerc.planes[STACK], point == "during the last waits"):
        _killed_up(nerc, KILL_POINTS[point])
    # The documented recovery (docs/lifecycle.md "An interrupted run"): stacks recover first. A kill while the file
    # backend wrote an `.attrs` file leaves it empty and the state unreadable: recover names it, and its removal.
    plan = stacks_cmd(nerc, "recover", STACK)
    if plan.returncode == 1 and "1. rm " in plan.stdout:
        removal = next(line for line in plan.stdout.splitlines() if line.startswith("1. rm "))
        for path in shlex.split(removal)[2:]:
            Path(path).unlink()
        plan = stacks_cmd(nerc, "recover", STACK)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    blocked = nerc.drive(STACK, "up")
    assert not blocked["ok"] and "locked" in blocked.get("error", ""), failure(blocked)
    assert f"the stack is locked (1 lock file(s)); if no other run is going on: pulumi cancel --yes -s {STACK}" in plan.stdout
    nerc.pulumi("cancel", "--yes", "-s", STACK)
    if point == "during the last waits":  # the create that happened is imported, not made again
        assert f"creating StatefulSet {namespace()}/{STS}: it exists on the cluster: imported" in plan.stdout, plan.stdout
    refresh = [line.split(" ", 1)[1] for line in plan.stdout.splitlines() if line.startswith("2. pulumi refresh")]
    assert refresh or "no pending operations" in plan.stdout, plan.stdout
    if refresh:
        done = nerc.pulumi(*shlex.split(refresh[0])[1:], "--non-interactive", "--color=never", check=False)
        assert done.returncode == 0, f"{refresh[0]}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    up = nerc.drive(STACK, "up")
    assert up["ok"], f"after `stacks recover` ({plan.stdout}):\n" + failure(up)
    again = nerc.drive(STACK, "preview", "--expect-no-changes")
    assert again["ok"], failure(again)
    assert statefulset(nerc.planes[STACK])["spec"]["replicas"] == 1
