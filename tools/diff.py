"""What changed between two renderings of a stack, object by object and field by field.

`python -m stacks diff STACK --against REF` compares the render committed at REF (rendered/STACK/
in git) with a fresh render of the working tree's code, and prints it the way a reviewer reads a
change: which objects are added or removed, and for each changed object the paths of the fields that
changed (`spec.template.spec.containers[training].env[NCCL_IB_HCA].value: 'a' -> 'b'`).

The comparison itself is pure: `diff_trees` takes two {relative path: parsed object} dicts. Reading
them (from git, or by rendering) is kept apart at the bottom of this module.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import stacks
from components.lifecycle import (
    HELD,
    PATCH_REMOVED,
    QUEUED_START,
    REMOVES,
    RESTART,
    held,
    queued_replacement,
    replacement,
    restarts,
)
from config.kube import QUEUE_NAME
from tools.writer import MANIFEST, write

OUTPUTS = "outputs.json"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
TEXT_DIFF_LINES = 60  # a changed launcher module is shown as a unified diff, cut after this many lines
SHOW_CHARS = 400  # a value longer than this (as one line) is cut


# --- the comparison -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldChange:
    """One changed field of an object; `old`/`new` are None when the field was added/removed."""

    path: str
    old: Any
    new: Any
    added: bool = False
    removed: bool = False

    @property
    def is_text(self) -> bool:
        """A change of a multi-line string (a launcher module in a ConfigMap): shown as a unified diff."""
        return isinstance(self.old, str) and isinstance(self.new, str) and ("\n" in self.old or "\n" in self.new)

    def lines(self, same_as: str | None = None) -> list[str]:
        """The change as text; `same_as` names an object whose identical text change was shown already."""
        if self.added:
            return [f"{self.path}: added {show(self.new)}"]
        if self.removed:
            return [f"{self.path}: removed (was {show(self.old)})"]
        if self.is_text:
            if same_as:
                return [f"{self.path}: text changed, the same change as in {same_as}"]
            return [f"{self.path}: text changed", *("    " + line for line in text_diff(self.old, self.new))]
        return [f"{self.path}: {show(self.old)} -> {show(self.new)}"]


@dataclass
class ObjectChange:
    """One file of a rendered stack: an object, or the stack outputs."""

    path: str
    status: str  # "added" | "removed" | "changed"
    label: str
    fields: list[FieldChange] = field(default_factory=list)
    kind: str = ""
    """The object's kind ("" for the outputs and other files)."""
    patch: bool = False
    """A server-side apply patch of an object the stack does not own."""
    queued: bool = False
    """A StatefulSet or Job Kueue admits (its kueue.x-k8s.io/queue-name label): some edits requeue it."""


def show(value: Any) -> str:
    """A value as one line: strings quoted, everything else as compact JSON. A multi-line string (a
    whole launcher module) is only counted, and anything long is cut: the file diff has it all."""
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        return f"text of {len(value.splitlines())} lines"
    text = repr(value) if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) > SHOW_CHARS:
        text = f"{text[:SHOW_CHARS]}... ({len(text) - SHOW_CHARS} more characters)"
    return text


def text_diff(old: str, new: str) -> list[str]:
    """A unified diff of two multi-line strings (the launcher source in a ConfigMap)."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", n=1, lineterm=""))[2:]
    if len(lines) > TEXT_DIFF_LINES:
        lines = lines[:TEXT_DIFF_LINES] + [f"... {len(lines) - TEXT_DIFF_LINES} more diff lines (git diff shows them all)"]
    return lines


def key_path(base: str, key: str) -> str:
    """`a.b` for plain keys; `a["nvidia.com/gpu"]` for keys with dots or slashes, so paths stay unambiguous."""
    if _PLAIN_KEY.match(key):
        return f"{base}.{key}" if base else key
    return f"{base}[{json.dumps(key)}]"


def _named(items: list[Any]) -> dict[str, Any] | None:
    """A list of objects each with a distinct string `name` (env, containers, volumes, ports...),
    keyed by name; None for any other list."""
    if not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    by_name = {i["name"]: i for i in items}
    return by_name if len(by_name) == len(items) else None


def diff_values(old: Any, new: Any, path: str = "") -> list[FieldChange]:
    """Every difference between two parsed values, as field paths in document order."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[FieldChange] = []
        for key in [*old, *(k for k in new if k not in old)]:
            sub = key_path(path, str(key))
            if key not in new:
                out.append(FieldChange(sub, old[key], None, removed=True))
            elif key not in old:
                out.append(FieldChange(sub, None, new[key], added=True))
            else:
                out += diff_values(old[key], new[key], sub)
        return out
    if isinstance(old, list) and isinstance(new, list):
        return _diff_lists(old, new, path)
    return [FieldChange(path, old, new)]


def _diff_lists(old: list[Any], new: list[Any], path: str) -> list[FieldChange]:
    old_named, new_named = _named(old), _named(new)
    if old_named is not None and new_named is not None and (old or new):
        out: list[FieldChange] = []
        for name in [*old_named, *(n for n in new_named if n not in old_named)]:
            sub = f"{path}[{name}]"
            if name not in new_named:
                out.append(FieldChange(sub, old_named[name], None, removed=True))
            elif name not in old_named:
                out.append(FieldChange(sub, None, new_named[name], added=True))
            else:
                out += diff_values(old_named[name], new_named[name], sub)
        kept_old = [n for n in old_named if n in new_named]
        kept_new = [n for n in new_named if n in old_named]
        if kept_old != kept_new:  # order matters for env (later entries may reference earlier ones)
            out.append(FieldChange(f"{path} (order of names)", kept_old, kept_new))
        return out
    if all(not isinstance(v, (dict, list)) for v in [*old, *new]):
        return [FieldChange(path, old, new)]  # command, args, access modes: read best whole
    out = []
    for i in range(max(len(old), len(new))):
        sub = f"{path}[{i}]"
        if i >= len(new):
            out.append(FieldChange(sub, old[i], None, removed=True))
        elif i >= len(old):
            out.append(FieldChange(sub, None, new[i], added=True))
        else:
            out += diff_values(old[i], new[i], sub)
    return out


def label(path: str, obj: Any) -> str:
    """`StatefulSet nccl-test/h-kim` for an object, the file name for anything else."""
    if isinstance(obj, dict) and isinstance(obj.get("kind"), str) and isinstance(obj.get("metadata"), dict):
        meta = obj["metadata"]
        name = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
        patch = " (patch)" if Path(path).name.startswith("patch-") else ""
        return f"{obj['kind']} {name}{patch}"
    return path


def diff_trees(old: dict[str, Any], new: dict[str, Any]) -> list[ObjectChange]:
    """Compare two renderings given as {path relative to the stack folder: parsed document}.
    Unchanged files are left out; the result is sorted by path, outputs.json last."""
    out: list[ObjectChange] = []
    for path in sorted(old.keys() | new.keys(), key=lambda p: (p == OUTPUTS, p)):
        doc = new.get(path, old.get(path))
        kind = doc["kind"] if isinstance(doc, dict) and isinstance(doc.get("kind"), str) else ""
        patch = Path(path).name.startswith("patch-")
        labels = ((doc.get("metadata") or {}).get("labels") or {}) if isinstance(doc, dict) else {}
        queued = kind in ("StatefulSet", "Job") and QUEUE_NAME in labels
        if path not in new:
            out.append(ObjectChange(path, "removed", label(path, old[path]), kind=kind, patch=patch, queued=queued))
        elif path not in old:
            out.append(ObjectChange(path, "added", label(path, new[path]), kind=kind, patch=patch, queued=queued))
        elif old[path] != new[path]:
            out.append(ObjectChange(path, "changed", label(path, new[path]), diff_values(old[path], new[path]), kind, patch, queued))
    return out


MARK = {"added": "+", "removed": "-", "changed": "~"}


def consequence(change: ObjectChange) -> str | None:
    """What `pulumi up` does to the object beyond an update: a replacement (and its cost), a change held for
    the next run, a restart of running pods, or the deletion of something that holds data or a run
    (components/lifecycle.py)."""
    kind = change.kind
    if change.status == "removed":
        return PATCH_REMOVED if change.patch else REMOVES.get(kind)
    if change.queued and (change.status == "added" or any(f.path == "spec.replicas" and f.old == 0 for f in change.fields)):
        return f"QUEUED: {QUEUED_START}"
    if change.status != "changed" or change.patch:  # a patch changes fields of the object in place
        return None
    costs = sorted({cost for f in change.fields if (cost := replacement(kind, f.path))})
    if change.queued:
        costs = sorted({*costs, *(cost for f in change.fields if (cost := queued_replacement(kind, f.path)))})
    if costs:
        return "REPLACES the object: " + "; ".join(costs)
    if any(held(kind, f.path) for f in change.fields):
        return f"HELD: {HELD}"
    if any(restarts(kind, f.path) for f in change.fields):
        return f"RESTARTS: {RESTART}"
    return None


def report(stack: str, before: str, changes: list[ObjectChange], total: int, after: str = "working tree") -> str:
    """The text `python -m stacks diff` prints for one stack."""
    counts = {s: sum(1 for c in changes if c.status == s) for s in ("added", "removed", "changed")}
    unchanged = total - counts["added"] - counts["changed"]
    head = f"{stack}: {counts['added']} added, {counts['removed']} removed, {counts['changed']} changed, {unchanged} unchanged"
    lines = [f"{head} ({before} -> {after})"]
    if not changes:
        lines.append("  no change")
    # Every workload ships the same launcher: show a text diff once, then refer to it.
    shown: dict[tuple[str, str], str] = {}
    for c in changes:
        lines.append(f"{MARK[c.status]} {c.status} {c.label}  [{c.path}]")
        cost = consequence(c)
        if cost:
            lines.append(f"    ! {cost}")
        for f in c.fields:
            same_as = None
            if f.is_text:
                same_as = shown.setdefault((f.old, f.new), c.label)
                same_as = None if same_as == c.label else same_as
            lines += ["    " + line for line in f.lines(same_as)]
    return "\n".join(lines) + "\n"


# --- reading the two sides ----------------------------------------------------------------------


class DiffError(Exception):
    """The comparison cannot be made (no git repository, unknown ref); the message says why."""


def parse(path: str, text: str, source: str | None = None) -> Any:
    """One rendered file: outputs.json, or one YAML document (patch files start with a comment). Read as a config
    is read (stacks.parse_yaml: bounded depth, size and values, no aliases), with a rendered file's limits: a
    committed render is anyone's commit. `source` names the file in errors (default: `path`)."""
    if path.endswith(".json"):
        return stacks.parse_json(text, source or path, stacks.RENDERED_LIMITS)
    doc = stacks.parse_yaml(text, source or path, stacks.RENDERED_LIMITS)
    # The render writes one object per file; anything else (a list, an empty file) would be compared field by field
    # with the object it replaces and shown as a change of nothing in particular.
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not (isinstance(doc, dict) and isinstance(doc.get("kind"), str) and isinstance(meta, dict) and isinstance(meta.get("name"), str)):
        what = {type(None): "empty", list: "a list", dict: "a mapping without them"}.get(type(doc), "a scalar")
        raise stacks.ConfigError(
            f"{source or path}: not a rendered object ({what}): a rendered file is one mapping with kind and metadata.name"
        )
    return doc


def read_folder(folder: Path) -> dict[str, Any]:
    """Every rendered file under a stack folder, keyed by its path relative to the folder."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    return {p.relative_to(folder).as_posix(): parse(p.name, stacks.read_text(p, stacks.RENDERED_LIMITS), str(p)) for p in files}


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise DiffError("git is not installed: `stacks diff` reads the committed render with git") from None
    if done.returncode != 0:
        raise DiffError(done.stderr.decode(errors="replace").strip() or f"git {' '.join(args)} failed")
    return done.stdout


def committed(root: Path, ref: str, folder: str) -> dict[str, Any] | None:
    """The files under `folder` (relative to `root`) as committed at `ref`; None if the ref has no
    such folder (a new stack). Raises DiffError outside a git repository or for an unknown ref, and ConfigError
    naming `REF:PATH` for a file that is not one a render writes (parse)."""
    try:
        _git(root, "rev-parse", "--git-dir")
    except DiffError:
        raise DiffError(f"{root} is not inside a git repository: `stacks diff` compares with a commit's rendered/") from None
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").decode().strip()
    except DiffError:
        raise DiffError(f"unknown git ref {ref!r}: give a branch, tag or commit (e.g. --against origin/main)") from None
    # `ls-tree -l` gives each blob's size: one past a rendered file's limit is refused before git reads it out.
    listing = _git(root, "ls-tree", "-r", "-l", "-z", commit, "--", f"{folder}/").decode("utf-8", "replace").split("\0")
    sizes: dict[str, str] = {}
    for entry in filter(None, listing):
        info, name = entry.split("\t", 1)
        if not name.endswith("/" + MANIFEST):
            sizes[name] = info.split()[-1]
    if not sizes:
        return None
    for name, size in sizes.items():
        shown = f"{ref}:{name}"
        if not size.isdecimal():  # a submodule (a commit), not a file
            raise stacks.ConfigError(f"{shown}: not a file: a committed render holds files only")
        if int(size) > stacks.RENDERED_LIMITS.max_bytes:
            raise stacks.ConfigError(f"{shown}: {size} bytes is larger than a rendered file can be ({stacks.RENDERED_LIMITS.max_bytes})")
    # One `git cat-file --batch` reads every blob (a `git show` per file would start ~40 processes).
    prefix = _git(root, "rev-parse", "--show-prefix").decode().strip()
    request = "".join(f"{commit}:{prefix}{n}\n" for n in sizes).encode()
    blob = _git(root, "cat-file", "--batch", stdin=request)
    files: dict[str, Any] = {}
    pos = 0
    for name in sizes:
        header_end = blob.index(b"\n", pos)
        header = blob[pos:header_end].split()
        if len(header) != 3 or not header[2].isdigit():  # `NAME missing`: a name git's batch protocol cannot carry
            raise stacks.ConfigError(f"{ref}:{name}: git cannot read it back ({blob[pos:header_end].decode('utf-8', 'replace')})")
        length = int(header[2])
        raw = blob[header_end + 1 : header_end + 1 + length]
        pos = header_end + 1 + length + 1  # the content is followed by a newline
        shown = f"{ref}:{name}"
        files[name[len(folder) + 1 :]] = parse(name, stacks.decode_text(raw, shown, stacks.RENDERED_LIMITS), shown)
    return files


def fresh(config: Any) -> dict[str, Any]:
    """Render the working tree's program for one config, exactly as `python -m stacks render` writes it."""
    # Imported here: `check` reads the committed render through this module and never renders, so it starts without
    # the renderer and the Pulumi SDK it loads (tests/cli/test_check.py).
    from tools.render import run

    with tempfile.TemporaryDirectory(prefix="stacks-diff-") as tmp:
        return read_folder(write(run(config), Path(tmp)))
