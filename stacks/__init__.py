"""The stacks: one validated ClusterConfig per cluster, or one read from a YAML file.

`load(name)` is what `__main__.py` (Pulumi) and `python -m stacks` call. Errors are ConfigError with
a message that names the file and the field, never a traceback.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from stacks.model import ClusterConfig

STACKS = ("barcelona", "cairo", "nerc")


class ConfigError(Exception):
    """Bad configuration: the message names the file, the field and the fix."""


def _describe(source: str, err: ValidationError) -> str:
    lines = [f"{source}: invalid configuration"]
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; `python -m stacks schema` lists the fields)"
        # Checks across the whole config (ClusterConfig._references) name the field in the message.
        lines.append(f"  {where}: {msg}" if where else f"  {msg}")
    return "\n".join(lines)


def validate(data: Any, source: str) -> ClusterConfig:
    """Validate plain data (parsed YAML) as a ClusterConfig; `source` names it in errors."""
    if data is None:
        raise ConfigError(f"{source}: the file is empty: write the config (`python -m stacks config STACK` prints one)")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of fields, got {type(data).__name__}")
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_describe(source, err)) from None


def load(name: str) -> ClusterConfig:
    """The stack's config: its module in stacks/ (the file is named in any error)."""
    if name not in STACKS:
        raise ConfigError(f"unknown stack {name!r}: the stacks are {', '.join(STACKS)} (python -m stacks list)")
    try:
        return importlib.import_module(f"stacks.{name}").CONFIG  # type: ignore[no-any-return]
    except ValidationError as err:
        raise ConfigError(_describe(f"stacks/{name}.py", err)) from None


def load_file(path: str | Path) -> ClusterConfig:
    """A config written as YAML (the output of `python -m stacks config STACK`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{p}: cannot read the file: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p}: not a UTF-8 text file (byte {err.start}): a config is YAML text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{p}: not valid YAML{where}: {problem}") from None
    return validate(data, str(p))


def dump(config: ClusterConfig) -> str:
    """The config as YAML, the form `load_file` reads back to the same config."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, width=120, allow_unicode=True)
