"""Write a Rendering to disk: DIR/<stack>/<namespace or _cluster>/<kind>-<name>.yaml and outputs.json.

Output is deterministic (same config, same bytes): objects are written with apiVersion, kind and
metadata first and every other key sorted; multi-line strings (the launcher source) as YAML blocks.

The writer owns what it wrote and nothing else: DIR/<stack>/.render-manifest lists its files, and a
new render removes exactly those before writing. A folder that is not empty and has no manifest
was not written by it, and is refused rather than emptied.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from render import MANIFEST
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


class WriteError(Exception):
    """The output folder cannot be written; the message names the path and the fix."""


def _owned(target: Path) -> list[Path]:
    """The files a previous render wrote into target (from its manifest); refuses a folder with
    files and no manifest."""
    if not target.exists():
        return []
    if not target.is_dir():
        raise WriteError(f"{target} is not a folder: give --out a folder (the stack's files go to DIR/{target.name}/)")
    manifest = target / MANIFEST
    if not manifest.is_file():
        if any(target.iterdir()):
            raise WriteError(
                f"{target} is not empty and was not written by `python -m stacks render` (no {MANIFEST}): nothing was "
                "changed. Choose another --out folder, or empty this one yourself"
            )
        return []
    lines = manifest.read_text(encoding="utf-8").splitlines()
    files = [target / line for line in lines if line and not line.startswith("#")]
    # A manifest line that leaves the folder (../x, /etc/x) is not one the writer made.
    return [f for f in files if f.resolve().is_relative_to(target.resolve())]


def write(rendering: Rendering, out: Path) -> Path:
    """Replace DIR/<stack>/ with the rendering, touching only the files a render made; returns that folder."""
    target = out / rendering.config.name
    try:
        for old in _owned(target):
            old.unlink(missing_ok=True)
            parent = old.parent
            while parent != target and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
        files: dict[Path, str] = {relative_path(rec): document(rec) for rec in rendering.resources}
        files[Path("outputs.json")] = outputs_json(rendering.outputs)
        for rel, text in sorted(files.items()):
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        listing = "".join(f"{rel.as_posix()}\n" for rel in sorted(files))
        (target / MANIFEST).write_text(f"# files written by `python -m stacks render`; it removes only these\n{listing}", encoding="utf-8")
    except OSError as err:
        where = err.filename or target
        raise WriteError(f"{where}: cannot write the rendering: {err.strerror or err} (choose a writable --out folder)") from None
    return target
