"""Shared fixtures.

Rendering runs the real program under Pulumi's mock runtime (render.engine.run). The mock runtime is
process-global, so each run sets up its own event loop and root stack. Program tests render the
configs the tests own (tests/fixtures.py); the committed stacks are rendered once per session for
the tests that check their facts (test_committed_stacks.py) and validity.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

# pytest keeps its assertion rewrite of each test module as a .pyc in __pycache__ (gitignored), unless bytecode writing
# is off (PYTHONDONTWRITEBYTECODE, which some shells and images set): then every run, in every xdist worker, rewrites and
# compiles all the test modules again (1.5 s a worker). The program's modules imported below are cached the same way.
sys.dont_write_bytecode = False

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import stacks  # noqa: E402
from render.engine import Rendering, run  # noqa: E402

# The longest tests (the recipes about 10 s of CPU, the properties 3 s) start first: `make test` runs the suite on a
# worker per core (pytest-xdist), and one of them started last would leave the other workers idle while it runs.
LONGEST_FIRST = ("tests/test_recipes.py::", "tests/test_properties.py::")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))  # stable: the rest keep their order


@cache
def rendered_stack(name: str) -> Rendering:
    """A committed stack, rendered once per session."""
    return run(stacks.load(name))


@cache
def rendered_fixture(name: str) -> Rendering:
    """A test-owned fixture (tests/fixtures.py), unedited, rendered once per session."""
    import fixtures

    return run(fixtures.config(name))


@pytest.fixture(params=stacks.names())
def stack_rendering(request: pytest.FixtureRequest) -> Rendering:
    """Each committed stack, rendered once per session."""
    return rendered_stack(request.param)


def find(rendering: Rendering, kind: str, name: str, namespace: str | None = None) -> dict:
    """The rendered object of that kind and name (and namespace); fails the test if absent."""
    hits = [
        o
        for o in rendering.objects()
        if o["kind"] == kind and o["metadata"]["name"] == name and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]
    assert len(hits) == 1, f"expected one {kind} {namespace}/{name}, found {len(hits)}"
    return hits[0]


def pod_spec(obj: dict) -> dict:
    return obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]


def container(obj: dict) -> dict:
    return pod_spec(obj)["containers"][0]


def env_of(obj: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container(obj)["env"]}


def free_port() -> int:
    """A TCP port on loopback nobody listens on (for the torchrun end-to-end tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fixture_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """A project folder whose one cluster is a test-owned fixture: clusters/NAME.py reading NAME.yaml (the
    fixture's data, edited), and the stack files of its two tiers (Pulumi.NAME.yaml: project,
    Pulumi.NAME-platform.yaml: platform). Commands that take a stack or a Pulumi stack then run on configs the
    tests own, whatever the committed stacks hold."""

    import fixtures
    import yaml

    def make(name: str, edit: Callable[[dict[str, Any]], Any] | None = None) -> Path:
        data = fixtures.data(name)
        if edit is not None:
            edit(data)
        folder = tmp_path / stacks.CLUSTERS
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        (folder / f"{name}.py").write_text(
            f'from pathlib import Path\n\nfrom stacks import load_file\n\nCONFIG = load_file(Path(__file__).with_name("{name}.yaml"))\n',
            encoding="utf-8",
        )
        for stack, tier in ((name, "project"), (f"{name}-platform", "platform")):
            settings = {"gpu-training:cluster": name, "gpu-training:tier": tier, "kubernetes:context": name}
            (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": settings}), encoding="utf-8")
        monkeypatch.setattr(stacks, "ROOT", tmp_path)
        monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.{name}", raising=False)
        return tmp_path

    return make
