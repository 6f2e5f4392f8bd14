"""The layers of the program (docs/architecture.md), held: each package imports only the packages below it, and no
module imports itself back through others (no cycle), counting every import, at the top of a module or inside a
function, under TYPE_CHECKING or not.

    config  <  stacks  <  components, policy  <  tools  <  cli

`make lint` runs this file as a command (`python -m tests.test_layers`), printing each import that breaks a rule;
`make test` runs it as tests, together with cases that show the check finds what it must.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS: tuple[tuple[str, ...], ...] = (("config",), ("stacks",), ("components", "policy"), ("tools",), ("cli",))
"""Bottom to top. Packages on one level (the program and the preflight) do not import each other."""

ENTRY_POINTS = {"stacks.__main__": "cli"}
"""A module that belongs to a higher layer than its folder: `python -m stacks` is the command line's entry point, kept
where users know it."""

USERS: dict[str, tuple[str, ...]] = {"clusters": ("config", "stacks")}
"""Folders outside the layers that may import only these: a cluster module is user code, and the vocabulary it may use
is the config's (and the loader's `load_file`)."""


def level(package: str) -> int | None:
    return next((i for i, names in enumerate(LAYERS) if package in names), None)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, name: str, known: Iterable[str] = ()) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in the file, relative ones resolved. `from package import module`
    imports that module (one of `known`), not the package's own names: it counts as the module."""
    known = set(known)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base


def modules(root: Path, folders: Iterable[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_name(path, root)] = path
    return found


def layer_of(name: str) -> str:
    return ENTRY_POINTS.get(name, name.split(".")[0])


def problems(root: Path = ROOT) -> list[str]:
    """Every import that breaks a layer rule, and every cycle, as `FILE:LINE: what`."""
    packages = [p for names in LAYERS for p in names]
    program = modules(root, packages)
    users = modules(root, USERS)
    out: list[str] = []
    graph: dict[str, set[str]] = {name: set() for name in program}
    for name, path in {**program, **users}.items():
        mine = layer_of(name)
        for line, target in imports(path, name, program):
            top = target.split(".")[0]
            if top not in packages:
                continue  # the standard library, pulumi, pydantic, ...
            where = f"{path.relative_to(root).as_posix()}:{line}"
            if mine in USERS:
                if top not in USERS[mine]:
                    out.append(f"{where}: {mine}/ may import only {', '.join(USERS[mine])}, not {target}")
                continue
            if top != mine:
                below = level(top) is not None and level(top) < level(mine)  # type: ignore[operator]
                if not below:
                    out.append(f"{where}: {mine} imports {target}, which is not below it ({' < '.join('/'.join(n) for n in LAYERS)})")
            if target in program and target != name:
                graph[name].add(target)
    out += [f"{program[cycle[0]].relative_to(root).as_posix()}: import cycle {' -> '.join(cycle)}" for cycle in cycles(graph)]
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules that has one (Tarjan's algorithm), as a path that
    ends where it starts."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_path_through(graph, set(group)) for group in groups]


def _path_through(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A cycle inside the group, from its first module (breadth first: the shortest one back)."""
    start = min(group)
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for to in sorted(graph[node] & group):
                if to == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, node, start]
                if to not in came:
                    came[to] = node
                    nxt.append(to)
        frontier = nxt
    return sorted(group)


def test_the_program_keeps_its_layers() -> None:
    found = problems()
    assert not found, "imports that break the layers (docs/architecture.md):\n" + "\n".join(found)


def test_every_package_of_the_program_is_in_a_layer() -> None:
    """A new top-level package must be placed: otherwise nothing would hold its imports."""
    listed = {p for names in LAYERS for p in names} | set(USERS)
    others = {"tests", "live", "bench", "schemas", "rendered", "docs"}  # above the program, or not code
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith((".", "_")) and any(p.glob("*.py"))}
    assert packages - listed - others == set()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


BROKEN = {
    "an upward import at the top": ({"config/model.py": "import stacks\n"}, "config/model.py:1: config imports stacks"),
    "an upward import inside a function": (
        {"stacks/load.py": "def f():\n    from tools import render\n"},
        "stacks/load.py:2: stacks imports tools",
    ),
    "an upward import under TYPE_CHECKING": (
        {"policy/core.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cli.main import main\n"},
        "policy/core.py:3: policy imports cli.main",
    ),
    "siblings importing each other": ({"policy/core.py": "from components import kube\n"}, "policy/core.py:1: policy imports components"),
    "a relative import upward": ({"config/a.py": "from ..tools import diff\n"}, "config/a.py:1: config imports tools"),
    "a cluster module importing the program": (
        {"clusters/x.py": "from components.program import build\n"},
        "clusters/x.py:1: clusters/ may import only config, stacks, not components.program",
    ),
    "a cycle inside a package": (
        {"policy/core.py": "from policy import rules\n", "policy/rules.py": "def f():\n    import policy.core\n"},
        "policy/core.py: import cycle policy.core -> policy.rules -> policy.core",
    ),
    "a cycle through three modules": (
        {"config/a.py": "import config.b\n", "config/b.py": "import config.c\n", "config/c.py": "from config import a\n"},
        "config/a.py: import cycle config.a -> config.b -> config.c -> config.a",
    ),
    "python -m stacks placed below the command line": (
        {"stacks/__main__.py": "from cli.main import run\n", "cli/main.py": "import tools.render\n", "tools/render.py": "import stacks\n"},
        None,
    ),
}


@pytest.mark.parametrize("files,expected", BROKEN.values(), ids=BROKEN.keys())
def test_the_check_finds_what_breaks_the_layers(tmp_path: Path, files: dict[str, str], expected: str | None) -> None:
    found = problems(_tree(tmp_path, files))
    if expected is None:
        assert found == []
    else:
        assert any(p.startswith(expected) for p in found), found


def main() -> int:
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"{len(found)} import(s) break the layers: docs/architecture.md says which package may import which", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
