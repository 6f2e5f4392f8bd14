"""The Pulumi program loads its stack's module and the others the preflight compares with in fresh interpreters
(policy/gate.py: its gRPC threads make a fork unsafe). `stacks.preload` runs them all in one interpreter, each module
still in a child of its own: one interpreter start per preview instead of one per module, and a misbehaving module
still reported by its own load, never mixed into another's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import stacks
from config import project
from stacks import _child

GOOD = """from config import ClusterConfig, NodeSet, Security, ServiceAccount
CONFIG = ClusterConfig(
    name="{name}", description="x", gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    namespaces=["{name}-ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="{name}-ns")]),
)
"""


@pytest.fixture
def spawned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str] | None]:
    """A project of the test's own, loaded as the Pulumi program loads it; the children started, by their spawn argv."""
    (tmp_path / stacks.CLUSTERS).mkdir()
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.setattr(stacks, "SPAWN_MODULES", True)
    monkeypatch.setattr(stacks, "_LOADED", {})
    for name in ("a", "b"):
        (tmp_path / stacks.CLUSTERS / f"{name}.py").write_text(GOOD.format(name=name), encoding="utf-8")
    (tmp_path / stacks.CLUSTERS / "c.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    started: list[list[str] | None] = []
    real = _child.run

    def counted(job, limit, spawn=None):  # type: ignore[no-untyped-def]
        started.append(spawn)
        return real(job, limit, spawn)

    monkeypatch.setattr(_child, "run", counted)
    for name in ("a", "b", "c"):
        monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.{name}", raising=False)
    return started


def test_one_interpreter_loads_every_module_ahead(spawned: list[list[str] | None]) -> None:
    stacks.preload(stacks.names())
    assert len(spawned) == 1, "one fresh interpreter for all the modules"
    assert [stacks.load(n).name for n in ("a", "b")] == ["a", "b"]
    assert len(spawned) == 1, "the loads after it run nothing again"


def test_a_module_that_exits_is_reported_by_its_own_load(spawned: list[list[str] | None]) -> None:
    stacks.preload(stacks.names())
    assert stacks.load("a").name == "a"
    with pytest.raises(stacks.ConfigError, match=r"clusters/c.py:2: the module exited \(code 3\)"):
        stacks.load("c")


def test_an_edited_module_runs_again(spawned: list[list[str] | None], tmp_path: Path) -> None:
    stacks.preload(["a"])
    (tmp_path / stacks.CLUSTERS / "a.py").write_text(GOOD.format(name="a").replace('"x"', '"edited"'), encoding="utf-8")
    assert stacks.load("a").description == "edited"


def test_preload_does_nothing_where_modules_are_forked(spawned: list[list[str] | None], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stacks, "SPAWN_MODULES", False)
    stacks.preload(stacks.names())
    assert spawned == []
