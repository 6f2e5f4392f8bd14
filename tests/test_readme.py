"""The documentation tells the truth about what the program does: every preflight rule is listed (docs/preflight.md),
and the lifecycle tables are the ones components/lifecycle.py renders (docs/lifecycle.md). The README and docs/ hold
no link to a file that is not there, and docs/README.md lists every page of docs/. (What each stack holds is the
stack's business: a new cluster is a module and a stack file, with no documentation edit required.)"""

from __future__ import annotations

import re
from pathlib import Path

import policy
import policy.rules  # noqa: F401  (registers the rules)
from components.lifecycle import CHECK_MARGIN_MINUTES, POD_CREATION_TIMEOUT, REPLACES
from tests.helpers import ROOT

DOCS = ROOT / "docs"


def section(page: str, title: str) -> str:
    """The text under the heading `title` (any level) of docs/`page`, up to the next heading of that level or above."""
    text = (DOCS / page).read_text(encoding="utf-8")
    found = re.search(rf"^(#+) {re.escape(title)}\n", text, flags=re.M)
    assert found, f"docs/{page} has no heading {title!r}: update tests/test_readme.py with the documentation"
    level = len(found.group(1))
    rest = text[found.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.M)
    return rest[: end.start()] if end else rest


def test_every_preflight_rule_is_listed() -> None:
    table = section("preflight.md", "Preflight checks")
    assert [r for r in policy.RULES if f"| `{r}` |" not in table] == []


def test_the_lifecycle_tables_are_what_the_program_does() -> None:
    lifecycle = section("lifecycle.md", "Lifecycle: what `pulumi up` does, and what it waits for")
    # The waits the components render, as the table states them.
    waits = (f"at most {POD_CREATION_TIMEOUT}:", f"at most {POD_CREATION_TIMEOUT}.", f"at most deadline_minutes + {CHECK_MARGIN_MINUTES}.")
    assert [w for w in waits if w not in lifecycle] == []
    for kind, (fields, cost) in REPLACES.items():
        assert f"| {kind} | {', '.join(fields)} | {cost} |" in lifecycle, kind


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def test_every_relative_link_names_a_file_that_exists() -> None:
    broken = []
    for page in pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#", 1)[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_table_of_contents_lists_every_page() -> None:
    contents = (DOCS / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(([\w.-]+\.md)\)", contents))
    assert sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md" and p.name not in listed) == []
    assert "[docs/README.md](docs/README.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
