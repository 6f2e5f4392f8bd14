"""Shared fixtures.

Rendering runs the real program under Pulumi's mock runtime (render.engine.run). The mock runtime is
process-global, so each run sets up its own event loop and root stack. Program tests render the
configs the tests own (tests/fixtures.py); the committed stacks are rendered once per session for
the tests that check their facts (test_committed_stacks.py) and validity.
"""

from __future__ import annotations

import socket
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import stacks  # noqa: E402
from render.engine import Rendering, run  # noqa: E402


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
