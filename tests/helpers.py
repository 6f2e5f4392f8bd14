"""What several test modules share: the checkout's folders, the renders of the committed stacks and of the
test-owned fixtures (each once per session), and readers of a rendered pod."""

from __future__ import annotations

import socket
from functools import cache
from pathlib import Path

import stacks
from tests import fixtures
from tools.render import Rendering, run

ROOT = Path(__file__).resolve().parent.parent
"""The checkout (never a test's copy: config.project.ROOT is the one a test may point elsewhere)."""
SHARED = ROOT.parent / "shared"


@cache
def rendered_stack(name: str) -> Rendering:
    """A committed stack, rendered once per session."""
    return run(stacks.load(name))


@cache
def rendered_fixture(name: str) -> Rendering:
    """A test-owned fixture (tests/fixtures.py), unedited, rendered once per session."""
    return run(fixtures.config(name))


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
