"""Reasons (broad_grant_reason, route_reason, privileged_reason, an accepted warning's, node_level's, a PVC fix's, a
hand-made object's source): one made only of whitespace is no reason, and is refused naming the field; one with words is
kept without its surrounding whitespace."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import stacks
from tests import fixtures
from tests.fixtures import Data, Edit
from tests.helpers import ROOT, refusal

BLANKS = [" ", "\t\n  ", "\u200b", " \u00a0 "]
"""Whitespace, a zero-width space and a non-breaking space: nothing a reader sees."""


def _accepted(reason: str) -> Edit:
    return lambda d: d["accepted_warnings"].__setitem__(0, {**d["accepted_warnings"][0], "reason": reason})


def _routed_debugger(reason: str) -> Edit:
    def edit(d: Data) -> None:
        fixtures.workload(d, "dev")["ports"][1].update(route=True, route_reason=reason)

    return edit


REASONS: list[tuple[str, str, Callable[[str], Edit], str]] = [
    ("ib", "broad grant", lambda r: lambda d: d["security"].update(broad_grant_reason=r), "security.broad_grant_reason"),
    (
        "ib",
        "privileged workload",
        lambda r: lambda d: fixtures.workload(d, "env").update(privileged_reason=r),
        "workloads[env].privileged_reason",
    ),
    ("ib", "accepted warning", _accepted, "accepted_warnings[0].reason"),
    ("ib", "pvc fix", lambda r: lambda d: d["pvc_fixes"][0].update(reason=r), "pvc_fixes[0].reason"),
    ("roce", "routed debugger", _routed_debugger, "workloads[dev].ports[debugpy].route_reason"),
    ("roce", "node level", lambda r: lambda d: d.update(node_level={"iommu_passthrough": True, "reason": r}), "node_level.reason"),
    (
        "roce",
        "control plane",
        lambda r: lambda d: d.update(node_level={"pool": "master", "control_plane_reason": r}),
        "node_level.control_plane_reason",
    ),
    (
        "roce",
        "hand-made source",
        lambda r: lambda d: d.update(hand_made=[{"kind": "ServiceAccount", "name": "trainer", "namespace": "team-a", "source": r}]),
        "hand_made[trainer].source",
    ),
    (
        "roce",
        "bandwidth check",
        lambda r: lambda d: d["bandwidth_checks"][0].update(memlock="privileged", privileged_reason=r),
        "bandwidth_checks[fabric].privileged_reason",
    ),
]


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
@pytest.mark.parametrize("fixture,case,edit,path", REASONS, ids=[r[1] for r in REASONS])
def test_a_reason_of_whitespace_only_is_refused_naming_the_field(
    fixture: str, case: str, edit: Callable[[str], Edit], path: str, blank: str
) -> None:
    message = refusal(fixtures.data(fixture, edit(blank)))
    assert f"  {path}: a reason needs words" in message, message
    assert message.count("\n") == 1, message  # one line: this field, no other


@pytest.mark.parametrize("fixture,case,edit,path", REASONS, ids=[r[1] for r in REASONS])
def test_a_reason_with_words_is_kept_without_its_surrounding_whitespace(
    fixture: str, case: str, edit: Callable[[str], Edit], path: str
) -> None:
    config = stacks.validate(fixtures.data(fixture, edit("  the seed says so \n")), "my.yaml")
    assert "the seed says so" in config.model_dump_json()
    assert "  the seed says so \\n" not in config.model_dump_json()


def test_a_blank_broad_grant_reason_no_longer_passes_check(tmp_path: Path) -> None:
    """The audit's case through the CLI: the privileged SCC granted with broad_grant_reason ' ' is refused (exit 2),
    naming the field and the YAML line that writes it."""
    data = fixtures.data("ib", lambda d: d["security"].update(broad_grant_reason=" "))
    path = tmp_path / "ib.yaml"
    text = yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    line = text[: text.index("broad_grant_reason")].count("\n") + 1
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"security.broad_grant_reason ({path}:{line}): a reason needs words" in done.stderr, done.stderr


def test_an_empty_node_level_reason_is_the_default_not_a_blank() -> None:
    """node_level.reason is optional: "" (not given) is accepted, whitespace is refused (above)."""
    config = stacks.validate(fixtures.data("roce", lambda d: d.update(node_level={"reason": ""})), "my.yaml")
    assert config.node_level.reason == ""
