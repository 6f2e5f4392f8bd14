"""`python -m stacks render` writes the objects the program declares (tools.render.declared), not a run of the program
under Pulumi's mock runtime (tools.render.run, most of a render's time): the two write the same files, byte for byte,
for the committed stacks, the test-owned fixtures in every tier, and generated stacks. rendered/ itself is held
to the mock runtime's rendering by tests/test_rendered_is_fresh.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import stacks
from config.stack import ClusterConfig
from tests import fixtures
from tests.helpers import rendered_fixture, rendered_stack
from tests.test_properties import configs
from tools.render import Rendering, declared, run
from tools.writer import write

TIERS = ("all", "platform", "project")


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def same_files(config: ClusterConfig, tier: str, tmp_path: Path, by_mocks_all: Rendering | None = None) -> None:
    """`by_mocks_all`: the config's rendering under the mocks in tier all, where the session has it already."""
    rendering = by_mocks_all if by_mocks_all is not None and tier == "all" else run(config, tier)
    by_mocks = files(write(rendering, tmp_path / "mocks"))
    by_layout = files(write(declared(config, tier), tmp_path / "declared"))
    assert sorted(by_layout) == sorted(by_mocks)
    assert [f for f in by_mocks if by_mocks[f] != by_layout[f]] == []


@pytest.mark.parametrize("name", stacks.names())
def test_a_committed_stack_is_written_the_same_without_the_mock_runtime(name: str, tmp_path: Path) -> None:
    same_files(stacks.load(name), "all", tmp_path, rendered_stack(name))


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_a_fixture_is_written_the_same_without_the_mock_runtime(name: str, tier: str, tmp_path: Path) -> None:
    same_files(fixtures.config(name), tier, tmp_path, rendered_fixture(name))


def test_the_outputs_carry_numbers_as_the_sdk_exports_them(tmp_path: Path) -> None:
    """The mock runtime gives every number back as a float, the writer whole ones as ints: a check's line rate is 800."""
    outputs = declared(fixtures.config("roce")).outputs
    assert outputs["bandwidth_checks"]["fabric"]["line_rate_gbps"] == 800 and "scc" in outputs
    tcp = declared(fixtures.config("tcp")).outputs
    assert "scc" not in tcp  # a top-level None is not exported (the SDK drops it)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], derandomize=True
)
@given(data=configs())
def test_generated_stacks_are_written_the_same_without_the_mock_runtime(
    data: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    config = stacks.validate(data, "generated")
    same_files(config, "all", tmp_path_factory.mktemp("generated"))
