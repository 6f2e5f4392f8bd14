"""Write a Rendering to disk: DIR/<stack>/<namespace or _cluster>/<kind>-<name>.yaml and outputs.json.

Output is deterministic (same config, same bytes): objects are written with apiVersion, kind and
metadata first and every other key sorted; multi-line strings (the launcher source) as YAML blocks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from render.engine import Recorded, Rendering

HEAD = ("apiVersion", "kind", "metadata")


def canonical(obj: Any, top: bool = False) -> Any:
    if isinstance(obj, dict):
        keys = [k for k in HEAD if k in obj] if top else []
        keys += sorted(k for k in obj if k not in keys)
        return {k: canonical(obj[k]) for k in keys}
    if isinstance(obj, list):
        return [canonical(v) for v in obj]
    return obj


# libyaml's emitter where PyYAML has it: the pure-Python one spends most of a render on the
# launcher source in every ConfigMap. Both write the same bytes.
_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[valid-type,misc]
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def to_yaml(obj: dict[str, Any]) -> str:
    return yaml.dump(canonical(obj, top=True), Dumper=_Dumper, sort_keys=False, width=4096, allow_unicode=True)


def relative_path(rec: Recorded) -> Path:
    obj = rec.object
    meta = obj.get("metadata") or {}
    folder = meta.get("namespace") or "_cluster"
    prefix = "patch-" if rec.is_patch else ""
    name = str(meta.get("name", rec.name)).replace(":", "_")
    return Path(folder) / f"{prefix}{obj['kind'].lower()}-{name}.yaml"


def document(rec: Recorded) -> str:
    head = "# server-side apply patch of an existing object: only these fields are managed\n" if rec.is_patch else ""
    return head + to_yaml(rec.object)


def outputs_json(outputs: dict[str, Any]) -> str:
    return json.dumps(outputs, indent=2, sort_keys=True) + "\n"


def write(rendering: Rendering, out: Path) -> Path:
    """Replace DIR/<stack>/ with the rendering; returns that folder."""
    target = out / rendering.config.name
    if target.exists():
        shutil.rmtree(target)
    for rec in rendering.resources:
        path = target / relative_path(rec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document(rec), encoding="utf-8")
    target.mkdir(parents=True, exist_ok=True)
    (target / "outputs.json").write_text(outputs_json(rendering.outputs), encoding="utf-8")
    return target
