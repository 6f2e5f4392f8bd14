"""Where a value of a stack module was written (config/provenance.py): the line of a keyword of the ClusterConfig(...)
call, of an item of a list it gives, and no line where the module does not write one."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import provenance

KEYWORDS = """CONFIG = ClusterConfig(
    name="x",
    namespaces=[
        "a",
        *OTHERS,
        "b",
    ],
    api_host=(
        "h"
    ),
    single=["c", "d"],
)
"""


@pytest.mark.parametrize(
    "path,line",
    [
        (("name",), 2),
        (("namespaces",), 3),
        (("namespaces", 0), 4),
        (("namespaces", 2), 3),  # past a *spread the index is not the item's: the keyword's line
        (("api_host",), 8),
        (("single", 1), 11),
        (("single", 5), 11),  # no such item: the keyword's line
        (("absent",), None),
    ],
)
def test_field_line(path: tuple[str | int, ...], line: int | None, tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(KEYWORDS, encoding="utf-8")
    assert provenance.field_line(provenance.Site(str(module), 1), "ClusterConfig", path) == (None if line is None else (str(module), line))
    assert provenance.field_line(provenance.Site(str(module), 2), "ClusterConfig", path) is None  # no such call on that line
