"""The render's file names (tools/writer.py): an object name of 253 characters, the longest the API server takes, renders
to a file name the file system takes (cut, with a hash of the whole name); names that fit keep the form kind-name.yaml."""

from __future__ import annotations

import re
from pathlib import Path

from tests import fixtures
from tests.fixtures import sec
from tests.helpers import QUALIFIED_NAMES, cases_of
from tools import writer
from tools.render import run

LONG_SCC = ".".join(["a" * 63] * 3 + ["b" * 61])  # 253 characters: the longest object name


@cases_of(QUALIFIED_NAMES, 3)
def test_an_object_name_of_253_characters_renders(tmp_path: Path) -> None:
    assert len(LONG_SCC) == 253
    target = writer.write(run(fixtures.config("roce", sec(scc=LONG_SCC))), tmp_path)
    names = [p.relative_to(target).as_posix() for p in target.rglob("*.yaml")]
    assert len(set(names)) == len(names) and all(len(n.rsplit("/", 1)[-1].encode()) <= writer.FILE_NAME_MAX for n in names)
    # a name too long for a file name is cut and carries a hash of the whole name: the SCC, its use-role, the binding
    cut = sorted(n for n in names if "aaaaaaaaaa" in n)
    assert len(cut) == 3 and all(re.search(r"-[0-9a-f]{12}\.yaml$", n) for n in cut), cut
    assert "_cluster/securitycontextconstraints-" + LONG_SCC[:100] in cut[1]
    # names that fit keep their form, kind-name.yaml, so rendered/ does not change
    assert "team-a/statefulset-dev.yaml" in names and "team-a/route-dev-jupyter.yaml" in names
