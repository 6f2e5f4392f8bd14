"""The live tier's fixtures: the real toolchain (live/toolchain.py), one real control plane per cluster
(live/controlplane.py), seeded with what that cluster has (live/clusters.py), and a copy of the project for
the real Pulumi CLI to run in (its stack files get the backend's encryption salt; the work tree is never
touched).

Level 1 (etcd, kube-apiserver, kube-controller-manager, kubectl) is required: a build failure fails the
tests. Level 2 (the Pulumi CLI and the kubernetes provider) and level 3 (kube-scheduler and kwok; Kueue) skip, with the
build's own error, where they could not be built, except in CI (CI=true), where they fail; so do the SR-IOV
operator's controller (test_sriov_operator.py), OpenShift's SCC admission (test_scc.py) and the real nodes
(test_real_nodes.py: also where the machine cannot run them, or the image cannot be built).

Nothing a test starts may outlive the run: live/tests/leftovers.py (registered below) fails it when something does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

from live import clusters, image, realnodes, toolchain  # noqa: E402
from live.controlplane import ControlPlane  # noqa: E402
from live.tests import leftovers  # noqa: E402
from live.tests.harness import TIMINGS  # noqa: E402

SHARED_SCHEMAS = clusters.SHARED_SCHEMAS


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(leftovers, "live-leftovers")


@pytest.fixture(scope="session")
def tools() -> dict[str, Path | str]:
    built = toolchain.ensure(toolchain.LEVEL1)
    missing = {n: w for n, w in built.items() if not isinstance(w, Path)}
    if missing:
        pytest.fail("the live tier's control plane could not be built: " + "; ".join(str(w) for w in missing.values()), pytrace=False)
    return built


def _unavailable(said: str, names: tuple[str, ...]) -> None:
    """A skip, saying why; a failure in CI (toolchain.required()), where a skip would let a run that tested nothing of
    the level pass."""
    if set(names) <= set(toolchain.required()):
        pytest.fail(said + " (required in CI)", pytrace=False)
    pytest.skip(said)


def _level(names: tuple[str, ...], what: str) -> dict[str, Path]:
    """The binaries of a level above 1, or the test skips (fails in CI) with the build's reasons."""
    tools = toolchain.ensure(names)
    reasons = [str(tools[n]) for n in names if not isinstance(tools[n], Path)]
    if reasons:
        _unavailable(f"{what} is not available: " + "; ".join(reasons), names)
    return {n: Path(tools[n]) for n in names}


@pytest.fixture(scope="session")
def pulumi_tools(tools: dict[str, Path | str]) -> dict[str, Path]:
    """The real Pulumi CLI and kubernetes provider (level 2)."""
    return _level(toolchain.LEVEL2, "level 2 (the real Pulumi CLI and provider)")


@pytest.fixture(scope="session")
def sim_tools(tools: dict[str, Path | str]) -> dict[str, Path]:
    """The simulated cluster (level 3): kube-scheduler and kwok."""
    return _level(toolchain.LEVEL3, "level 3 (kube-scheduler and kwok, the simulated cluster)")


@pytest.fixture(scope="session")
def sriov_tools(tools: dict[str, Path | str]) -> Path:
    """The SR-IOV network operator's SriovNetwork controller, its CRDs and NAD templates beside it (live/sriov.py)."""
    return _level(toolchain.SRIOV, "the SR-IOV network operator's controller")["sriov-network-controller"]


@pytest.fixture(scope="session")
def scc_tools(tools: dict[str, Path | str]) -> Path:
    """OpenShift's SCC admission plugin in its webhook (live/scc.py)."""
    return _level(toolchain.SCC, "OpenShift's SCC admission")["scc-admission"]


@pytest.fixture(scope="session")
def queue_tools(tools: dict[str, Path | str]) -> dict[str, Path]:
    """Kueue's manager (level 3, apart from the simulated cluster's binaries: live/toolchain.py QUEUE)."""
    return _level(toolchain.QUEUE, "level 3 (Kueue, the queue of a shared cluster)")


@dataclass(frozen=True)
class NodeKit:
    """What real nodes run (live/realnodes.py): the kubelet and CoreDNS, Debian's runtime packages, the image."""

    kubelet: Path
    coredns: Path
    runtime: Path
    image: image.Image


@pytest.fixture(scope="session")
def node_tools(tools: dict[str, Path | str]) -> NodeKit:
    built = _level(toolchain.NODES, "the real nodes' kubelet and CoreDNS")
    try:
        realnodes.check_machine()
        kit, runtime = image.ensure()
    except (realnodes.NodesError, image.ImageError) as err:
        _unavailable(f"real nodes cannot run on this machine: {err}", toolchain.NODES)
        raise
    return NodeKit(built["kubelet"], built["coredns"], runtime, kit)


class Planes:
    """One control plane per cluster, started on first use and kept for the session."""

    def __init__(self, tools: dict[str, Path | str], workdir: Path) -> None:
        self.bins = {n: Path(tools[n]) for n in toolchain.LEVEL1}
        self.workdir = workdir
        self.started: dict[str, ControlPlane] = {}

    def __call__(self, cluster: str) -> ControlPlane:
        if cluster not in self.started:
            import stacks

            if not SHARED_SCHEMAS.is_dir():
                pytest.skip(f"../shared/schemas is absent ({SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
            plane = ControlPlane(cluster, self.workdir / cluster, self.bins).start()
            self.started[cluster] = plane  # stopped with the others, even if seeding it fails
            clusters.install_crds(plane)
            clusters.seed(plane, stacks.load(cluster))
        return self.started[cluster]

    def stop(self) -> None:
        for p in self.started.values():
            p.stop()
        self.started.clear()


# The session's planes, stopped after the last test that uses them (pytest_runtest_teardown): idle, three API
# servers and their controllers still take a tenth of the machine from every test after them.
_SESSION_PLANES: list[Planes] = []
_LAST_USER: list[pytest.Item] = []


@pytest.fixture(scope="session")
def planes(tools: dict[str, Path | str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planes]:
    p = Planes(tools, tmp_path_factory.mktemp("planes"))
    _SESSION_PLANES.append(p)
    yield p
    p.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    users = [i for i in items if "planes" in getattr(i, "fixturenames", ())]
    _LAST_USER[:] = users[-1:]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if _LAST_USER and item is _LAST_USER[0]:
        for p in _SESSION_PLANES:
            p.stop()  # a later test that asks for a plane gets it started again (Planes.__call__)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker of `-n 2` hands its runs' timings to the controller, which prints them (pytest_testnodedown)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["timings"] = json.dumps(TIMINGS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    TIMINGS.extend(tuple(t) for t in json.loads(getattr(node, "workeroutput", {}).get("timings", "[]")))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TIMINGS:
        return
    terminalreporter.section("real pulumi runs: wall time and the program's own share (first run of each)")
    seen: set[tuple[str, str]] = set()
    terminalreporter.write_line(f"{'stack':<22} {'operation':<10} {'wall s':>8} {'program s':>10}")
    for stack, op, wall, program in TIMINGS:
        if (stack, op) in seen:
            continue
        seen.add((stack, op))
        terminalreporter.write_line(f"{stack:<22} {op:<10} {wall:>8.1f} {program if program is not None else float('nan'):>10.2f}")
