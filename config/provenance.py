"""Where a config's values were written: the file and line behind a config path, so an error or a preflight
finding names the `Workload(...)` call in clusters/NAME.py (or the line of a YAML config) that holds the value.

Kept beside the models, never in them: two configs with the same values stay equal whichever way they were
written (a module, or its YAML dump). Two sources:
- a stack module: each model its code builds remembers the line of the call that built it (`remember`), the
  call as the file writes it: a helper function's line is skipped for the line that calls the helper, a
  comprehension's line is kept (it is where the entries are written);
- a YAML file: the line of every key and list item, read with the file (stacks.read_yaml_lines), registered
  for the config validated from it (`register_yaml`).
A stack module runs in a child process (stacks.load_module): there `calls(config)` collects the line of each model's
call by config path, and the parent registers that map (`register_calls`) for the config it validates from the
child's data, as the YAML route registers a file's lines.
`origin(root, path)` answers for any config path, from the deepest value on the path that has a line.
"""

from __future__ import annotations

import ast
import os
import sys
import weakref
from pathlib import Path
from typing import Any

from config import project

Path_ = tuple[str | int, ...]
"""A config path: field names and list indexes (`("workloads", 2, "nodes")`), as pydantic locates errors."""

_HERE = os.path.dirname(os.path.abspath(__file__))
# Frames that are the program building a model, not a user writing one: this package (its YAML loader validates
# plain data), pydantic, the import machinery.
_PROGRAM = (_HERE + os.sep, "<")
_WRITTEN_IN = frozenset({"<module>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


def _program(file: str) -> bool:
    return file.startswith(_PROGRAM) or "/pydantic/" in file.replace("\\", "/")


_MODELS: dict[int, tuple[weakref.ReferenceType[Any], str, int]] = {}
_YAML: dict[int, tuple[weakref.ReferenceType[Any], str, dict[Path_, int]]] = {}
_CALLS: dict[int, tuple[weakref.ReferenceType[Any], dict[Path_, tuple[str, int]]]] = {}


def written_here() -> tuple[str, int] | None:
    """(file, line) where user code wrote the call being run: the caller's frame outside this package and pydantic, and
    past a helper function of the user's to the line that calls the helper (a comprehension's line is kept: it is
    where the entries are written). None when no user code is on the stack (a YAML file's data)."""
    frame = sys._getframe(1)
    while frame is not None and _program(frame.f_code.co_filename):
        frame = frame.f_back  # type: ignore[assignment]
    chosen: tuple[str, int] | None = None
    while frame is not None and not _program(frame.f_code.co_filename):
        chosen = (frame.f_code.co_filename, frame.f_lineno)
        if frame.f_code.co_name in _WRITTEN_IN:
            break
        frame = frame.f_back  # type: ignore[assignment]
    return chosen


def remember(model: Any) -> None:
    """Remember where user code built `model` (written_here). Called by the model itself, only while a stack module
    runs (config.errors IN_STACK_MODULE) and only for a model built by a call, not from nested plain data."""
    chosen = written_here()
    if chosen is None:
        return
    key = id(model)
    _MODELS[key] = (weakref.ref(model), *chosen)
    weakref.finalize(model, _MODELS.pop, key, None).atexit = False  # nothing to tidy at exit


def source_line(model: Any) -> tuple[str, int] | None:
    """(file, line) of the call in a stack module that built `model`; None when a file's data or other code built it."""
    known = _MODELS.get(id(model))
    if known is None or known[0]() is not model:
        return None
    return known[1], known[2]


def register_yaml(config: Any, file: str, lines: dict[Path_, int]) -> None:
    """Remember the YAML lines a config was validated from."""
    key = id(config)
    _YAML[key] = (weakref.ref(config), file, lines)
    weakref.finalize(config, _YAML.pop, key, None).atexit = False


def yaml_line(file: str, lines: dict[Path_, int], path: Path_) -> tuple[str, int] | None:
    """The line of the deepest key on `path` the file writes."""
    for end in range(len(path), 0, -1):
        line = lines.get(path[:end])
        if line is not None:
            return file, line
    return None


def calls(config: Any) -> dict[Path_, tuple[str, int]]:
    """The (file, line) of the call that built each model of `config` (by config path), for the models built by a
    stack module's code (`remember`), or registered from such a map: what `register_calls` needs in another process."""
    known = _CALLS.get(id(config))
    if known is not None and known[0]() is config:
        return dict(known[1])
    out: dict[Path_, tuple[str, int]] = {}
    stack: list[tuple[Any, Path_]] = [(config, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, (*path, k)) for k, v in node.items() if isinstance(k, str))
        elif isinstance(node, list | tuple):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))
        elif hasattr(type(node), "model_fields"):  # a model: the fields are the keys of its dump
            line = source_line(node)
            if line is not None:
                out[path] = line
            stack.extend((getattr(node, f, None), (*path, f)) for f in type(node).model_fields)
    return out


def register_calls(config: Any, lines: dict[Path_, tuple[str, int]]) -> None:
    """Remember the model calls (`calls`) of the stack module a config was validated from."""
    key = id(config)
    _CALLS[key] = (weakref.ref(config), lines)
    weakref.finalize(config, _CALLS.pop, key, None).atexit = False


def yaml_of(config: Any) -> tuple[str, dict[Path_, int]] | None:
    """(file, lines) registered for a config validated from a YAML file, or None."""
    known = _YAML.get(id(config))
    return (known[1], known[2]) if known is not None and known[0]() is config else None


def call_line(root: Any, path: Path_) -> tuple[str, int] | None:
    """(file, line) of the model call in a stack module that built the model at `path` itself (not one around it)."""
    known = _CALLS.get(id(root))
    if known is not None and known[0]() is root:
        return known[1].get(path)
    node = root
    for part in path:
        node = _child(node, part)
    return source_line(node) if node is not None else None


def _child(node: Any, part: str | int) -> Any:
    if isinstance(part, int):
        try:
            return node[part]
        except (IndexError, KeyError, TypeError):
            return None
    if isinstance(node, dict):
        return node.get(part)
    return getattr(node, part, None)


def origin(root: Any, path: Path_, call: tuple[tuple[str, int], str] | None = None) -> tuple[str, int] | None:
    """(file, line) that writes the value at `path` of `root` (a config, or the data a config is being built from):
    the YAML line of the deepest key, else the line of the field itself in the call that built the deepest model on the
    path: the keyword that writes it (`nodes=2`), its list item or dict key (`namespaces=[...]`'s second line), not the
    line of `Workload(` or `ClusterConfig(`; the call's line where the call does not write the field itself (a helper's
    `**fields`, a `*spread`). `call`: ((file, line), model class) of the call `root` is the data of, when it is not
    registered (a model failing as a stack module builds it)."""
    known = _YAML.get(id(root))
    if known is not None and known[0]() is root:
        return yaml_line(known[1], known[2], path)
    called = _CALLS.get(id(root))
    if called is not None and called[0]() is root:  # a module's config, validated from its child's data
        end = next((end for end in range(len(path), -1, -1) if path[:end] in called[1]), None)
        if end is None:
            return None
        line_of_call = called[1][path[:end]]
        model = _walk(root, path[:end])
        name = type(model).__name__ if hasattr(type(model), "model_fields") else None
        return field_line(line_of_call, name, path[end:]) or line_of_call
    found = source_line(root)
    name = type(root).__name__
    if found is None and call is not None:
        found, name = call
    end = 0
    node = root
    for i, part in enumerate(path):
        node = _child(node, part)
        if node is None:
            break
        built = source_line(node)
        if built is not None:  # a model on the path built by a call of its own
            found, name, end = built, type(node).__name__, i + 1
    if found is None:
        return None
    return field_line(found, name, path[end:]) or found


def _walk(root: Any, path: Path_) -> Any:
    node = root
    for part in path:
        node = _child(node, part)
        if node is None:
            return None
    return node


_PARSED: dict[str, tuple[str, dict[tuple[int, str], ast.Call], dict[str, int], dict[str, str]]] = {}


def _parsed(file: str) -> tuple[dict[tuple[int, str], ast.Call], dict[str, int], dict[str, str]]:
    """A module's calls by (line, called name); the line of each module-level assignment of a plain name (`NS = ...`,
    the first one); and the text each module-level constant assigned a string literal holds. Parsed once per text of
    the file (a check asks for every finding; an edit between two checks of one process, as in a test, is read again)."""
    try:
        text = Path(file).read_text(encoding="utf-8")
        cached = _PARSED.get(file)
        if cached is None or cached[0] != text:
            tree = ast.parse(text)
            calls: dict[tuple[int, str], ast.Call] = {}
            for n in ast.walk(tree):
                if isinstance(n, ast.Call):
                    called = n.func.id if isinstance(n.func, ast.Name) else n.func.attr if isinstance(n.func, ast.Attribute) else ""
                    calls.setdefault((n.lineno, called), n)
            assigned: dict[str, int] = {}
            texts: dict[str, str] = {}
            for stmt in tree.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                value = getattr(stmt, "value", None)
                for target in targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, stmt.lineno)
                        if isinstance(value, ast.Constant) and isinstance(value.value, str):
                            texts.setdefault(target.id, value.value)
            cached = _PARSED[file] = (text, calls, assigned, texts)
    except (OSError, SyntaxError, ValueError):
        return {}, {}, {}
    return cached[1], cached[2], cached[3]


def _calls(file: str) -> dict[tuple[int, str], ast.Call]:
    return _parsed(file)[0]


def assignments(file: str) -> dict[str, int]:
    """The line of each module-level assignment of a plain name in `file` (`NS = ...`: the first)."""
    return dict(_parsed(file)[1])


def _field_node(file: str, line: int, called: str | None, path: Path_) -> ast.expr | ast.keyword | None:
    """The expression that writes `path` in the call of `called` at `line` of `file` (any call there with that keyword
    when `called` is None or not there: a helper's call, `_deepti("name", state="running")`): the keyword, its list item,
    its dict key's value, as deep as the source writes them literally (not past a `*spread` or `**spread`)."""
    if not path or not isinstance(path[0], str):
        return None
    calls = _calls(file)
    call = calls.get((line, called)) if called else None
    if call is None or not any(k.arg == path[0] for k in call.keywords):
        call = next((c for (at, _), c in calls.items() if at == line and any(k.arg == path[0] for k in c.keywords)), None)
    keyword = next((k for k in call.keywords if k.arg == path[0]), None) if call is not None else None
    if keyword is None:
        return None
    node: ast.expr | ast.keyword = keyword
    value = keyword.value
    for part in path[1:]:
        if isinstance(part, int) and isinstance(value, ast.List | ast.Tuple):
            items = value.elts[: part + 1]
            if len(items) != part + 1 or any(isinstance(item, ast.Starred) for item in items):
                break
            node = value = items[-1]
        elif isinstance(part, str) and isinstance(value, ast.Dict):
            found = next(
                (v for k, v in zip(value.keys, value.values, strict=True) if isinstance(k, ast.Constant) and k.value == part), None
            )
            if found is None:
                break
            node = value = found
        else:
            break
    return node


def field_line(call: tuple[str, int], called: str | None, path: Path_) -> tuple[str, int] | None:
    """(file, line) of the keyword, list item or dict value that writes `path` in the call at `call` (see _field_node)."""
    node = _field_node(call[0], call[1], called, path)
    return (call[0], node.lineno) if node is not None else None


def keyword_line(file: str, line: int, called: str, path: Path_) -> int | None:
    """The line of keyword `path[0]` in the call of `called` at `line` of `file`, or, where `path[1]` is an index into the
    list the keyword writes literally, the line of that item (not past a `*spread` before it, which shifts the indexes)."""
    call = _calls(file).get((line, called))
    if call is None:
        return None
    node = _field_node(file, line, called, path[:2])
    return node.lineno if node is not None else None


def constant(call: tuple[str, int], called: str | None, path: Path_, value: Any) -> tuple[str, tuple[str, int]] | None:
    """The module-level name (`NS`) whose value the field at `path` of the call at `call` is, and the line that sets it:
    where the field is written as that bare name, or, where the call does not write the field (a helper fills it in),
    the one module-level string constant holding that very text. None otherwise."""
    file = call[0]
    _, assigned, texts = _parsed(file)
    node = _field_node(file, call[1], called, path)
    if isinstance(node, ast.keyword):
        node = node.value
    if isinstance(node, ast.Name):
        line = assigned.get(node.id)
        return (node.id, (file, line)) if line is not None else None
    if node is None and isinstance(value, str):
        holders = [name for name, text in texts.items() if text == value]
        if len(holders) == 1:
            return holders[0], (file, assigned[holders[0]])
    return None


def shown(where: tuple[str, int] | None) -> str:
    """`clusters/NAME.py:N`, the form editors and terminals link: the file relative to the project (config.project.ROOT)."""
    if where is None:
        return ""
    path = Path(where[0])
    try:
        return f"{path.resolve().relative_to(project.ROOT.resolve()).as_posix()}:{where[1]}"
    except ValueError:
        pass
    return f"{path}:{where[1]}"
