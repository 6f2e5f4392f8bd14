"""The map of launcher.py (the docstring of components/launcher/__init__.py) stays true: it names every section
banner of the file, in order, and nothing else, and each function it names is defined in the section it is listed
under. launcher.py ships verbatim into the pod, so the map lives beside it, not in it; this test is what keeps it
from drifting when a section is added, renamed or moved."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

import components.launcher
from components.launcher import LAUNCHER_PATH

# A section banner: a rule, one line naming the section ("Facts: what the kernel says."), a rule.
BANNER = re.compile(r"^# -{20,}\n# (?P<title>[^\n]+)\n# -{20,}$", re.MULTILINE)
# A line of the map: two spaces, the section's name, a colon, what it does (`function` names in backquotes).
ENTRY = re.compile(r"^  (?P<name>[A-Z][^:`]*): ")
DEFINED = re.compile(r"^(?:def|class) (?P<name>[A-Za-z_][A-Za-z0-9_]*)\b", re.MULTILINE)


def section_name(title: str) -> str:
    """What a banner calls its section: its title up to the first colon, or the whole title less its full stop."""
    return title.split(":", 1)[0].strip().rstrip(".")


def sections(source: str) -> list[tuple[str, set[str]]]:
    """The sections of launcher.py in order, each with the functions and classes defined in it."""
    found = list(BANNER.finditer(source))
    out = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(source)
        out.append((section_name(m["title"]), {d["name"] for d in DEFINED.finditer(source, m.end(), end)}))
    return out


def map_entries(doc: str) -> list[tuple[str, list[str]]]:
    """The map's lines in order: the section each names, and the names it gives in backquotes."""
    out = []
    for line in doc.splitlines():
        if m := ENTRY.match(line):
            out.append((m["name"].strip(), re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", line)))
    return out


def map_problems(source: str, doc: str) -> list[str]:
    """Everything in which the map and launcher.py disagree, as a reader of the map would be misled by it."""
    actual = sections(source)
    mapped = map_entries(doc)
    names = [name for name, _ in actual]
    listed = [name for name, _ in mapped]
    problems = [f"section {n!r} of launcher.py is not in the map" for n in names if n not in listed]
    problems += [f"the map names section {n!r}, which launcher.py has no banner for" for n in listed if n not in names]
    if not problems and listed != names:
        problems.append(f"the map lists the sections as {listed}, launcher.py has them as {names}")
    defined = dict(actual)
    for name, functions in mapped:
        problems += [f"the map puts `{f}` in {name!r}, which does not define it" for f in functions if f not in defined.get(name, {f})]
    return problems


def _doc() -> str:
    return components.launcher.__doc__ or ""


def _source() -> str:
    return LAUNCHER_PATH.read_text(encoding="utf-8")


def test_the_map_names_every_section_in_order_and_what_each_defines() -> None:
    assert len(sections(_source())) >= 4 and all(functions for _, functions in map_entries(_doc()))
    assert map_problems(_source(), _doc()) == [], "update the map in components/launcher/__init__.py"


def _drop_line(text: str, start: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith(start))


RULE = "# " + "-" * 93


@pytest.mark.parametrize(
    "source, doc, complaint",
    [
        # A section added to launcher.py and not to the map.
        (lambda: _source() + f"\n{RULE}\n# Telemetry: what the pod reports later.\n{RULE}\n", _doc, "section 'Telemetry' of launcher.py"),
        # A section of the map that launcher.py no longer has (its banner renamed).
        (lambda: _source().replace("# Facts: what the kernel", "# Readings: what the kernel"), _doc, "section 'Readings' of launcher.py"),
        (lambda: _source().replace("# Facts: what the kernel", "# Readings: what the kernel"), _doc, "the map names section 'Facts'"),
        # A map line dropped.
        (_source, lambda: _drop_line(_doc(), "  Decisions:"), "section 'Decisions' of launcher.py is not in the map"),
        # Two sections swapped in the map.
        (
            _source,
            lambda: _doc().replace("  Facts:", "  @@:").replace("  Configuration:", "  Facts:").replace("  @@:", "  Configuration:"),
            "the map lists the sections as ['Facts', 'Configuration'",
        ),
        # A function listed under the wrong section, or one that does not exist.
        (_source, lambda: _doc().replace("(`decide` ->", "(`load_config` ->"), "the map puts `load_config` in 'Decisions'"),
        (_source, lambda: _doc().replace("`prove_pinning`", "`prove_memlock`"), "the map puts `prove_memlock` in 'Facts'"),
    ],
)
def test_the_check_fails_when_the_map_goes_stale(source: Callable[[], str], doc: Callable[[], str], complaint: str) -> None:
    problems = map_problems(source(), doc())
    assert any(complaint in p for p in problems), problems


@pytest.mark.parametrize(
    "title, name",
    [
        ("Configuration: the environment contract, parsed and validated in one place.", "Configuration"),
        ("Output and the thin main.", "Output and the thin main"),
        ("Facts: what the kernel and sysfs say. Gathering them is all the reading.", "Facts"),
    ],
)
def test_a_banner_names_its_section_by_the_words_before_its_colon(title: str, name: str) -> None:
    assert section_name(title) == name
