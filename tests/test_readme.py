"""The README tells the truth about what the program does: every preflight rule is listed, and the lifecycle
tables are the ones components/lifecycle.py renders. (What each stack holds is the stack's business: a new
cluster is a module and a stack file, with no README edit required.)"""

from __future__ import annotations

import policy
import policy.rules  # noqa: F401  (registers the rules)
from components.lifecycle import AWAITS, REPLACES
from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    return README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_every_preflight_rule_is_listed() -> None:
    table = section("Preflight checks")
    assert [r for r in policy.RULES if f"| `{r}` |" not in table] == []


def test_the_lifecycle_tables_are_what_the_program_does() -> None:
    lifecycle = section("Lifecycle: what `pulumi up` does, and what it waits for")
    for kind, waits in AWAITS:
        assert f"| {kind} | {waits} |" in lifecycle, kind
    for kind, (fields, cost) in REPLACES.items():
        assert f"| {kind} | {', '.join(fields)} | {cost} |" in lifecycle, kind
