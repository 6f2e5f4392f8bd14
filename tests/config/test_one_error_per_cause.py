"""One error per cause, at the line to change: a committed stack module edited as a user would (on a copy of HEAD),
each mistake one error line naming the line the edit changed, and none of its consequences (the memlock strategy and
SCC an RDMA pod without a fabric would lack). The edits are found in the modules (the first keyword of its kind), so a
stack edited later keeps its test. (A value a helper fills for several entries: tests/config/test_field_lines.py.)"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import stacks
from cli.main import main
from config import project
from tests.helpers import ROOT, export_head

Edit = tuple[str, str, str]  # (the keyword, the called model whose keyword it is, or "", the value written instead)


def first_keyword(text: str, name: str, called: str = "", value: Callable[[ast.expr], bool] = lambda v: True) -> ast.keyword | None:
    """The first keyword `name=` (in a call of `called`, where given) whose value `value` accepts, in source order."""
    found = []
    for node in ast.walk(ast.parse(text)):
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and (not called or getattr(func, "id", getattr(func, "attr", "")) == called):
            found += [k for k in node.keywords if k.arg == name and value(k.value)]
    return min(found, key=lambda k: (k.lineno, k.col_offset), default=None)


def edited(text: str, keyword: ast.keyword, new: str) -> str:
    """`text` with the value of `keyword` (on one line) replaced by the source `new`."""
    lines = text.splitlines(keepends=True)
    line = lines[keyword.value.lineno - 1].encode()
    assert keyword.value.end_lineno == keyword.value.lineno
    lines[keyword.value.lineno - 1] = (line[: keyword.value.col_offset] + new.encode() + line[keyword.value.end_col_offset :]).decode()
    return "".join(lines)


def is_text(v: ast.expr) -> bool:
    return isinstance(v, ast.Constant) and isinstance(v.value, str)


def tcp(v: ast.expr) -> bool:
    return isinstance(v, ast.Constant) and v.value == "tcp"


MISTAKES = [
    ("a node set of -1 nodes", "count", "NodeSet", lambda v: True, "-1", "greater than or equal to 1"),
    ("memory 1000GB", "memory", "", is_text, '"1000GB"', "not a Kubernetes quantity"),
    ("an undefined constant as a namespace", "namespace", "", lambda v: isinstance(v, ast.Name), "NAMESPACE", "NameError"),
    ("rdma on a cluster without a fabric", "transport", "", tcp, '"rdma"', "the cluster has no fabric"),
]


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("head") / "project"
    export_head(ROOT, folder)
    return folder


@pytest.mark.parametrize("name", ["nerc", "barcelona"])
@pytest.mark.parametrize(("case", "keyword", "called", "value", "new", "phrase"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_mistake_in_a_committed_stack_is_one_error_at_its_line(
    head: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    case: str,
    keyword: str,
    called: str,
    value: Callable[[ast.expr], bool],
    new: str,
    phrase: str,
) -> None:
    module_file = head / stacks.CLUSTERS / f"{name}.py"
    if not module_file.exists():
        pytest.skip(f"no {name} stack at HEAD")
    committed = module_file.read_text(encoding="utf-8")
    monkeypatch.setattr(project, "ROOT", head)
    if keyword == "transport" and stacks.load(name).fabric is not None:
        pytest.skip(f"{name} has an RDMA fabric")
    found = first_keyword(committed, keyword, called, value)
    if found is None:
        pytest.skip(f"{name}.py writes no {keyword}= of this kind")
    module_file.write_text(edited(committed, found, new), encoding="utf-8")
    try:
        code = main(["check", name])
    finally:
        module_file.write_text(committed, encoding="utf-8")
    out, err = capsys.readouterr()
    named = re.findall(rf"clusters/{name}\.py:(\d+)", out + err)
    assert code == 2 and named == [str(found.lineno)] and phrase in err, out + err
    assert "Traceback" not in err and "memlock" not in err, err
