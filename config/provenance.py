"""Where a config's values were written (the file and line behind a config path), so an error or a finding names the
line to change: the call in a clusters/ file that built each model (and the helpers it went through), or a YAML file's
line of each key. Kept beside the models, never in them: two configs with the same values stay equal."""

import ast
import functools
import sys
import traceback
import weakref
from pathlib import Path
from typing import Any, NamedTuple

from config import project

Path_ = tuple[str | int, ...]  # field names and list indexes (`("workloads", 2, "nodes")`), as pydantic locates errors
_WRITTEN_IN = frozenset({"<module>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


class Site(NamedTuple):
    """Where user code built a model: the call's file and line, and the first lines of the helpers it went through."""

    file: str
    line: int
    helpers: tuple[tuple[str, int], ...] = ()


def written_here() -> Site | None:
    """The innermost clusters/ frame, followed out through helpers to the module-level line; None outside user code."""
    frame = next((f for f, _ in traceback.walk_stack(sys._getframe(1)) if _user(f.f_code.co_filename)), None)
    if frame is None:
        return None
    helpers = []
    while frame.f_code.co_name not in _WRITTEN_IN and frame.f_back is not None and _user(frame.f_back.f_code.co_filename):
        helpers.append((frame.f_code.co_filename, frame.f_code.co_firstlineno))
        frame = frame.f_back
    return Site(frame.f_code.co_filename, frame.f_lineno, tuple(helpers))


def _user(file: str) -> bool:
    return Path(file).parent.name == "clusters"


_MODELS: dict[int, tuple[weakref.ReferenceType[Any], Site]] = {}
_YAML: dict[int, tuple[weakref.ReferenceType[Any], str, dict[Path_, int]]] = {}
_AGAIN: dict[int, tuple[weakref.ReferenceType[Any], Any]] = {}  # a config validated again -> the one user code built


def _keep(table: dict[int, Any], obj: Any, *value: Any) -> None:
    key = id(obj)
    table[key] = (weakref.ref(obj), *value)
    weakref.finalize(obj, table.pop, key, None).atexit = False


def _known(table: dict[int, Any], obj: Any) -> Any:
    entry = table.get(id(obj))
    return entry if entry is not None and entry[0]() is obj else None


def remember(model: Any, site: Site) -> None:
    _keep(_MODELS, model, site)


def register_yaml(config: Any, file: str, lines: dict[Path_, int]) -> None:
    _keep(_YAML, config, file, lines)


def yaml_line(file: str, lines: dict[Path_, int], path: Path_) -> tuple[str, int] | None:
    """The line of the deepest key on `path` the file writes."""
    return next(((file, lines[path[:end]]) for end in range(len(path), 0, -1) if path[:end] in lines), None)


def register(config: Any, source: Any) -> None:
    """Give `config` (validated again from `source`'s data) the lines of `source`: its YAML file's, or its calls'."""
    if found := _known(_YAML, source):
        register_yaml(config, found[1], found[2])
    else:
        _keep(_AGAIN, config, source)


def call_line(root: Any, path: Path_) -> tuple[str, int] | None:
    """(file, line) of the user's call that built the model at `path` itself (not one around it)."""
    if again := _known(_AGAIN, root):
        return call_line(again[1], path)
    site = _known(_MODELS, walk(root, path))
    return (site[1].file, site[1].line) if site else None


def child(node: Any, part: str | int) -> Any:
    if isinstance(part, int):
        try:
            return node[part]
        except (IndexError, KeyError, TypeError):
            return None
    return node.get(part) if isinstance(node, dict) else getattr(node, part, None)


def walk(root: Any, path: Path_) -> Any:
    return functools.reduce(child, path, root)  # None once a part is missing


def origin(root: Any, path: Path_, call: tuple[Site, str] | None = None) -> tuple[str, int] | None:
    """(file, line) that writes `path` of `root`: the deepest YAML key's, else the field's in the deepest model's call."""
    if known := _known(_YAML, root):
        return yaml_line(known[1], known[2], path)
    if again := _known(_AGAIN, root):
        return origin(again[1], path, call)
    end, known = next(((end, k) for end in range(len(path), -1, -1) if (k := _known(_MODELS, walk(root, path[:end])))), (0, None))
    site, name = (known[1], type(walk(root, path[:end])).__name__) if known else call or (None, "")
    return None if site is None else field_line(site, name, path[end:]) or (site.file, site.line)


class _Parsed(NamedTuple):
    text: str
    calls: dict[tuple[int, str], ast.Call]
    functions: dict[int, ast.FunctionDef | ast.Lambda]  # by first line: where a helper's values are written
    assigned: dict[str, int]  # the line of each module-level assignment of a plain name (the first)
    texts: dict[str, str]  # the text each module-level constant assigned a string literal holds


_PARSED: dict[str, _Parsed] = {}


def _parsed(file: str) -> _Parsed | None:
    """A module's calls by (line, called name), its functions, its constants; parsed once per text of the file."""
    try:
        text = Path(file).read_text(encoding="utf-8")
        if (cached := _PARSED.get(file)) is not None and cached.text == text:
            return cached
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    out = _Parsed(text, {}, {}, {}, {})
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            called = n.func.id if isinstance(n.func, ast.Name) else n.func.attr if isinstance(n.func, ast.Attribute) else ""
            out.calls.setdefault((n.lineno, called), n)
        elif isinstance(n, ast.FunctionDef | ast.Lambda):
            out.functions[n.lineno] = n
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name):
                out.assigned.setdefault(target.id, stmt.lineno)
                if isinstance(value := getattr(stmt, "value", None), ast.Constant) and isinstance(value.value, str):
                    out.texts.setdefault(target.id, value.value)
    _PARSED[file] = out
    return out


def assignments(file: str) -> dict[str, int]:
    """The line of each module-level assignment of a plain name in `file` (`NS = ...`: the first)."""
    return dict(parsed.assigned) if (parsed := _parsed(file)) else {}


def _dict_value(node: ast.Dict, key: str) -> ast.expr | None:
    return next((v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant) and k.value == key), None)


def _deeper(node: ast.expr | ast.keyword, path: Path_) -> ast.expr | ast.keyword:
    """The list item or dict value under `node` that `path` names, as deep as the source writes them literally."""
    value = node.value if isinstance(node, ast.keyword) else node
    for part in path:
        if isinstance(part, int) and isinstance(value, ast.List | ast.Tuple):
            items = value.elts[: part + 1]
            if len(items) != part + 1 or any(isinstance(item, ast.Starred) for item in items):
                break
            node = value = items[-1]
        elif isinstance(part, str) and isinstance(value, ast.Dict) and (found := _dict_value(value, part)) is not None:
            node = value = found
        else:
            break
    return node


def _in_call(call: ast.Call | None, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None) if call is not None else None


def _field_node(site: Site, called: str | None, path: Path_) -> tuple[str, ast.expr | ast.keyword] | None:
    """(file, expression) that writes `path` for the call at `site`: its keyword, else a helper's keyword or dict key."""
    if (parsed := _parsed(site.file)) is None or not path or not isinstance(path[0], str):
        return None
    name = path[0]
    found: ast.expr | ast.keyword | None = _in_call(parsed.calls.get((site.line, called or "")), name)
    if found is None:
        found = next((k for (at, _), c in parsed.calls.items() if at == site.line and (k := _in_call(c, name))), None)
    if found is not None:
        return site.file, _deeper(found, path[1:])
    for file, first in site.helpers:
        if (helper := _parsed(file)) is None or (function := helper.functions.get(first)) is None:
            continue
        # A value the helper passes on from its own parameter (`name=name`) is written where the helper is called.
        passed = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
        for n in ast.walk(function):
            value = n.value if isinstance(n, ast.keyword) and n.arg == name else _dict_value(n, name) if isinstance(n, ast.Dict) else None
            if value is not None and not (isinstance(value, ast.Name) and value.id in passed):
                return file, _deeper(value, path[1:])
    return None


def field_line(site: Site, called: str | None, path: Path_) -> tuple[str, int] | None:
    """(file, line) of the keyword, list item or dict value that writes `path` for the call at `site` (_field_node)."""
    found = _field_node(site, called, path)
    return (found[0], found[1].lineno) if found else None


def constant(site: Site, called: str | None, path: Path_, value: Any) -> tuple[str, tuple[str, int]] | None:
    """The module-level name (`NS`) the field at `path` is written as, or the one string constant holding its text."""
    file, node = _field_node(site, called, path) or (site.file, None)
    if isinstance(node, ast.keyword):
        node = node.value
    if (parsed := _parsed(file)) is None:
        return None
    if isinstance(node, ast.Name):
        line = parsed.assigned.get(node.id)
        return (node.id, (file, line)) if line is not None else None
    if node is None and isinstance(value, str):
        holders = [name for name, text in parsed.texts.items() if text == value]
        if len(holders) == 1:
            return holders[0], (file, parsed.assigned[holders[0]])
    return None


def shown(where: tuple[str, int] | None) -> str:
    """`clusters/NAME.py:N`, the form editors and terminals link: the file relative to the project (config.project.ROOT)."""
    if where is None:
        return ""
    path = Path(where[0])
    try:
        return f"{path.resolve().relative_to(project.ROOT.resolve()).as_posix()}:{where[1]}"
    except ValueError:
        return f"{path}:{where[1]}"
