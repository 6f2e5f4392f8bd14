"""Reading files: YAML configs and stack files (PyYAML's composer: each key keeps its line), YAML or JSON from elsewhere
(a committed render, the cluster's output: bounded); each failure a ConfigError naming the file."""

import os
import re
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from config.values import TooDeep, bounded_json

Lines = dict[tuple[str | int, ...], int]


class ConfigError(Exception):
    """Bad configuration: the message names the file, the field and the fix."""


@dataclass(frozen=True)
class Limits:
    """What one reader takes (`what`: the file as the messages say it): a file past them is refused, naming it."""

    what: str
    max_bytes: int = 8 * 1024 * 1024
    max_depth: int = 40


CONFIG_LIMITS = Limits("a config")
RENDERED_LIMITS = Limits("a rendered file")  # a launcher ConfigMap is its source in one value (a ConfigMap holds 1 MiB)
LIVE_LIMITS = Limits("a live object")


def read_text(path: Path, limits: Limits = CONFIG_LIMITS, source: str | None = None) -> str:
    """A regular file's text, bounded: a FIFO or a device is refused, never read forever. `source`: the file as messages
    name it (default: `path`)."""
    source = source or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ConfigError(f"{source}: not a regular file (a directory, device or FIFO): {limits.what} is a file")
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(limits.max_bytes + 1)
    except OSError as err:
        raise ConfigError(f"{source}: cannot read the file: {err.strerror or err}") from None
    return decode_text(raw, source, limits)


def _bounded(data: bytes | str, source: str, limits: Limits) -> None:
    if len(data) > limits.max_bytes:
        raise ConfigError(f"{source}: larger than {limits.what} can be ({limits.max_bytes} bytes)")


def decode_text(raw: bytes, source: str, limits: Limits = CONFIG_LIMITS) -> str:
    """Bytes read elsewhere (a file, a git blob) as text: at most limits.max_bytes, UTF-8 only."""
    _bounded(raw, source, limits)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ConfigError(f"{source}:{line}: not a UTF-8 text file (byte {err.start}): {limits.what} is text") from None


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's reading (a tenth of the pure-Python loader's time), no timestamps (YAML 1.2): `2001-12-14` stays text."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
_STR, _INT, _FLOAT = "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_UNSUPPORTED = {
    "tag:yaml.org,2002:set": "a set has no order, so two renders could differ: write a list ([a, b])",
    "tag:yaml.org,2002:omap": "write a mapping (a: 1)",
    "tag:yaml.org,2002:pairs": "write a mapping (a: 1)",
    "tag:yaml.org,2002:binary": "a config holds text (a Secret's data is base64 text)",
}
# What YAML 1.1 (PyYAML's reading) makes a number of, though its writer almost certainly meant `017` or `1:30`.
_YAML11_NUMBER = re.compile(r"[-+]?(0[0-7_]+|[1-9][0-9_]*(:[0-5]?[0-9])+)")


def _yaml11_problem(text: str) -> str:
    if ":" in text:
        return f"{text} is a base-60 number in YAML 1.1: quote it ('{text}') if it is text, or write the number"
    digits = text.lstrip("+-").replace("_", "").lstrip("0") or "0"
    reading = int(text.replace("_", ""), 8)
    return (
        f"{text} is an octal number in YAML 1.1 (it reads as {reading}, not {digits}): write {digits}, or quote it ('{text}') if it is text"
    )


def _checked(node: yaml.Node, source: str, lines: Lines, surprises: list[tuple[tuple[str | int, ...], str]]) -> None:
    """The line of every key and list item; refused at its line: a key not text or twice, an alias, a tag, inf, nan."""
    seen: set[int] = set()
    todo: deque[tuple[yaml.Node, tuple[str | int, ...]]] = deque([(node, ())])
    while todo:
        node, path = todo.popleft()
        where = f"{source}:{lines.get(path, node.start_mark.line + 1)}"
        if id(node) in seen:
            raise ConfigError(f"{where}: YAML aliases (*name) are not supported in a config")
        seen.add(id(node))
        if node.tag in _UNSUPPORTED:
            raise ConfigError(f"{where}: not valid YAML: {node.tag.rsplit(':', 1)[-1]} is not supported: {_UNSUPPORTED[node.tag]}")
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                at = key.start_mark.line + 1
                if not isinstance(key, yaml.ScalarNode) or key.tag != _STR:
                    shown = repr(key.value) if isinstance(key, yaml.ScalarNode) else "of type " + type(key).__name__[:-4].lower()
                    raise ConfigError(f"{source}:{at}: not valid YAML: the key {shown} is not text: quote it")
                if (*path, key.value) in lines:  # a key of this very mapping
                    raise ConfigError(f"{source}:{at}: not valid YAML: duplicate key {key.value!r} (YAML keeps only the last one)")
                lines[(*path, key.value)] = at
                todo.append((value, (*path, key.value)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines[(*path, i)] = item.start_mark.line + 1
                todo.append((item, (*path, i)))
        elif node.tag == _INT and isinstance(node, yaml.ScalarNode) and not node.style and _YAML11_NUMBER.fullmatch(node.value):
            surprises.append((path, _yaml11_problem(node.value)))
        elif node.tag == _FLOAT and node.value.lower().lstrip("+-") in (".inf", ".nan"):
            raise ConfigError(f"{where}: not valid YAML: {node.value} is not a JSON number: write a finite number")


def read_yaml_lines(path: Path | str, text: str | None = None) -> tuple[Any, Lines, list[tuple[tuple[str | int, ...], str]]]:
    """A YAML config: (its data, the line of every key and list item by config path, the YAML 1.1 readings by path)."""
    source = str(path)
    text = read_text(Path(path)) if text is None else text
    lines: Lines = {}
    surprises: list[tuple[tuple[str | int, ...], str]] = []
    loader = _Loader(text)
    try:
        if (node := loader.get_single_node()) is None:
            return None, lines, surprises
        _checked(node, source, lines, surprises)
        data = loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise ConfigError(f"{source}{where}: not valid YAML: {getattr(err, 'problem', None) or err}") from None
    except ValueError as err:  # int() of more than 4300 digits
        raise ConfigError(f"{source}: a value cannot be read: {err}") from None
    finally:
        loader.dispose()
    return data, lines, surprises


def read_yaml(path: Path, limits: Limits = CONFIG_LIMITS) -> Any:
    """A YAML file (a stack file, a kubeconfig, a live object), checked as a config is."""
    return read_yaml_lines(path, read_text(path, limits))[0]


def parse_yaml(text: str, source: str, limits: Limits = RENDERED_LIMITS) -> Any:
    """YAML text the program wrote (a committed render read from git), read as it was written; `source` names it."""
    _bounded(text, source, limits)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not valid YAML: {getattr(err, 'problem', None) or err}") from None


def parse_json(text: str, source: str, limits: Limits = CONFIG_LIMITS) -> Any:
    """JSON text (the cluster's, a state file's: untrusted) with the limits of the reader: size, depth, no NaN."""
    _bounded(text, source, limits)
    try:
        return bounded_json(text, limits.max_depth)
    except TooDeep as err:
        raise ConfigError(f"{source}: {err}") from None
    except ValueError as err:  # JSONDecodeError, NaN, and int() of more than 4300 digits
        raise ConfigError(f"{source}: not valid JSON: {err}") from None


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Never writes anchors and aliases (the reader refuses them), and writes scripts as blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not value.endswith((" ", "\t")) and "\r" not in value else None
    return dumper.represent_scalar(_STR, value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any) -> str:
    """Data as YAML, the form read_yaml_lines reads back to the same data."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
