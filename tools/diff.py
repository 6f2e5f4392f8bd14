"""`python -m stacks diff STACK --against REF`: the render committed at REF against a fresh render of the working tree,
as a reviewer reads a change: objects added or removed, each changed field's path
(`spec.template.spec.containers[training].env[NCCL_IB_HCA].value: 'a' -> 'b'`), and what `pulumi up` does about it."""

import difflib
import json
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import stacks
from components.lifecycle import HELD, PATCH_REMOVED, QUEUED_START, REMOVES, RESTART, held, queued_replacement, replacement, restarts
from config.kube import QUEUE_NAME
from policy.core import ref
from tools.writer import MANIFEST, write

OUTPUTS = "outputs.json"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
TEXT_DIFF_LINES = 60  # a changed launcher module is shown as a unified diff, cut after this many lines
SHOW_CHARS = 400  # a value longer than this (as one line) is cut


@dataclass(frozen=True)
class FieldChange:
    path: str
    old: Any
    new: Any
    added: bool = False
    removed: bool = False

    @property
    def is_text(self) -> bool:  # a launcher module in a ConfigMap: shown as a unified diff
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
            diff = list(difflib.unified_diff(self.old.splitlines(), self.new.splitlines(), "before", "after", n=1, lineterm=""))[2:]
            if len(diff) > TEXT_DIFF_LINES:
                diff = diff[:TEXT_DIFF_LINES] + [f"... {len(diff) - TEXT_DIFF_LINES} more diff lines (git diff shows them all)"]
            return [f"{self.path}: text changed", *("    " + line for line in diff)]
        return [f"{self.path}: {show(self.old)} -> {show(self.new)}"]


@dataclass
class ObjectChange:
    """One file of a rendered stack: an object ("" its kind for the outputs), a patch, or a queued StatefulSet or Job."""

    path: str
    status: str  # "added" | "removed" | "changed"
    label: str
    fields: list[FieldChange] = field(default_factory=list)
    kind: str = ""
    patch: bool = False
    queued: bool = False  # Kueue admits it (its kueue.x-k8s.io/queue-name label): some edits requeue it


def show(value: Any) -> str:
    """A value as one line: strings quoted, anything else JSON; a multi-line string counted, anything long cut."""
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        return f"text of {len(value.splitlines())} lines"
    text = repr(value) if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) > SHOW_CHARS:
        text = f"{text[:SHOW_CHARS]}... ({len(text) - SHOW_CHARS} more characters)"
    return text


def key_path(base: str, key: str) -> str:
    """`a.b` for plain keys; `a["nvidia.com/gpu"]` for keys with dots or slashes."""
    if _PLAIN_KEY.match(key):
        return f"{base}.{key}" if base else key
    return f"{base}[{json.dumps(key)}]"


def _named(items: list[Any]) -> dict[str, Any] | None:
    """A list of objects each with a distinct string `name` (env, containers, volumes, ports), by name; else None."""
    if not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    by_name = {i["name"]: i for i in items}
    return by_name if len(by_name) == len(items) else None


def diff_values(old: Any, new: Any, path: str = "") -> list[FieldChange]:
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        return _diff_keyed(old, new, lambda key: key_path(path, str(key)))
    if isinstance(old, list) and isinstance(new, list):
        old_named, new_named = _named(old), _named(new)
        if old_named is not None and new_named is not None:
            out = _diff_keyed(old_named, new_named, lambda name: f"{path}[{name}]")
            kept_old = [n for n in old_named if n in new_named]
            kept_new = [n for n in new_named if n in old_named]
            if kept_old != kept_new:  # order matters for env (later entries may reference earlier ones)
                out.append(FieldChange(f"{path} (order of names)", kept_old, kept_new))
            return out
        if any(isinstance(v, (dict, list)) for v in [*old, *new]):
            return _diff_keyed(dict(enumerate(old)), dict(enumerate(new)), lambda i: f"{path}[{i}]")
        # command, args, access modes: read best whole
    return [FieldChange(path, old, new)]


def _diff_keyed(old: dict[Any, Any], new: dict[Any, Any], path_of: Callable[[Any], str]) -> list[FieldChange]:
    out: list[FieldChange] = []
    for key in [*old, *(k for k in new if k not in old)]:
        path = path_of(key)
        if key not in new:
            out.append(FieldChange(path, old[key], None, removed=True))
        elif key not in old:
            out.append(FieldChange(path, None, new[key], added=True))
        else:
            out += diff_values(old[key], new[key], path)
    return out


def label(path: str, obj: Any) -> str:
    """`StatefulSet nccl-test/h-kim` for an object (parse holds its name text), the file name for anything else."""
    if isinstance(obj, dict) and isinstance(obj.get("kind"), str) and isinstance(obj.get("metadata"), dict):
        return ref(obj) + (" (patch)" if Path(path).name.startswith("patch-") else "")
    return path


def diff_trees(old: dict[str, Any], new: dict[str, Any]) -> list[ObjectChange]:
    """The changed files of two renderings ({path in the stack folder: parsed document}), by path, outputs.json last."""
    out: list[ObjectChange] = []
    for path in sorted(old.keys() | new.keys(), key=lambda p: (p == OUTPUTS, p)):
        status = "removed" if path not in new else "added" if path not in old else "changed" if old[path] != new[path] else ""
        if not status:
            continue
        doc = new.get(path, old.get(path))
        kind = doc["kind"] if isinstance(doc, dict) and isinstance(doc.get("kind"), str) else ""
        labels = ((doc.get("metadata") or {}).get("labels") or {}) if isinstance(doc, dict) else {}
        fields = diff_values(old[path], new[path]) if status == "changed" else []
        patch, queued = Path(path).name.startswith("patch-"), kind in ("StatefulSet", "Job") and QUEUE_NAME in labels
        out.append(ObjectChange(path, status, label(path, doc), fields, kind, patch, queued))
    return out


def consequence(change: ObjectChange) -> str | None:
    """What `pulumi up` does beyond an update (components/lifecycle.py): replace, hold, restart or delete what matters."""
    kind = change.kind
    if change.status == "removed":
        return PATCH_REMOVED if change.patch else REMOVES.get(kind)
    if change.queued and (change.status == "added" or any(f.path == "spec.replicas" and f.old == 0 for f in change.fields)):
        return f"QUEUED: {QUEUED_START}"
    if change.status != "changed" or change.patch:  # a patch changes fields of the object in place
        return None
    judges = (replacement, queued_replacement) if change.queued else (replacement,)
    if costs := sorted({cost for f in change.fields for judge in judges if (cost := judge(kind, f.path))}):
        return "REPLACES the object: " + "; ".join(costs)
    if any(held(kind, f.path) for f in change.fields):
        return f"HELD: {HELD}"
    if any(restarts(kind, f.path) for f in change.fields):
        return f"RESTARTS: {RESTART}"
    return None


def report(stack: str, before: str, changes: list[ObjectChange], total: int, after: str = "working tree") -> str:
    counts = {s: sum(1 for c in changes if c.status == s) for s in ("added", "removed", "changed")}
    unchanged = total - counts["added"] - counts["changed"]
    head = f"{stack}: {counts['added']} added, {counts['removed']} removed, {counts['changed']} changed, {unchanged} unchanged"
    lines = [f"{head} ({before} -> {after})"]
    if not changes:
        lines.append("  no change")
    # Every workload ships the same launcher: show a text diff once, then refer to it.
    shown: dict[tuple[str, str], str] = {}
    for c in changes:
        mark = {"added": "+", "removed": "-", "changed": "~"}[c.status]
        lines.append(f"{mark} {c.status} {c.label}  [{c.path}]")
        if cost := consequence(c):
            lines.append(f"    ! {cost}")
        for f in c.fields:
            first = shown.setdefault((f.old, f.new), c.label) if f.is_text else c.label
            lines += ["    " + line for line in f.lines(None if first == c.label else first)]
    return "\n".join(lines) + "\n"


class DiffError(stacks.ConfigError):
    """No git repository, or an unknown ref: the message says why."""


def parse(path: str, text: str, source: str) -> Any:
    """One rendered file (outputs.json, or one YAML object) read with a rendered file's limits; `source` names it."""
    if path.endswith(".json"):
        return stacks.parse_json(text, source, stacks.RENDERED_LIMITS)
    doc = stacks.parse_yaml(text, source, stacks.RENDERED_LIMITS)
    # Anything but one object (a list, an empty file) would show as a change of nothing in particular.
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not (isinstance(doc, dict) and isinstance(doc.get("kind"), str) and isinstance(meta, dict) and isinstance(meta.get("name"), str)):
        what = {type(None): "empty", list: "a list", dict: "a mapping without them"}.get(type(doc), "a scalar")
        raise stacks.ConfigError(f"{source}: not a rendered object ({what}): a rendered file is one mapping with kind and metadata.name")
    return doc


def read_folder(folder: Path) -> dict[str, Any]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    return {p.relative_to(folder).as_posix(): parse(p.name, stacks.read_text(p, stacks.RENDERED_LIMITS), str(p)) for p in files}


def _git(root: Path, *args: str, stdin: bytes | None = None, failed: str = "") -> bytes:
    """What git prints; DiffError saying `failed`, or else what git said, when it fails."""
    try:
        done = subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise DiffError("git is not installed: `stacks diff` reads the committed render with git") from None
    if done.returncode != 0:
        raise DiffError(failed or done.stderr.decode(errors="replace").strip() or f"git {' '.join(args)} failed")
    return done.stdout


def committed(root: Path, ref: str, folder: str) -> dict[str, Any] | None:
    """The files under `folder` as committed at `ref`; None where the ref has no such folder (a new stack)."""
    _git(root, "rev-parse", "--git-dir", failed=f"{root} is not inside a git repository: `stacks diff` compares with a commit's rendered/")
    unknown = f"unknown git ref {ref!r}: give a branch, tag or commit (e.g. --against origin/main)"
    commit = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", failed=unknown).decode().strip()
    listing = _git(root, "ls-tree", "-r", "--name-only", "-z", commit, "--", f"{folder}/").decode("utf-8", "replace").split("\0")
    if not (names := [name for name in listing if name and not name.endswith("/" + MANIFEST)]):
        return None
    # One `git cat-file --batch` reads every blob (a `git show` per file would start ~40 processes).
    prefix = _git(root, "rev-parse", "--show-prefix").decode().strip()
    blob = _git(root, "cat-file", "--batch", stdin="".join(f"{commit}:{prefix}{n}\n" for n in names).encode())
    files: dict[str, Any] = {}
    pos = 0
    for name in names:
        shown, start = f"{ref}:{name}", blob.index(b"\n", pos) + 1
        header = blob[pos : start - 1].split()
        if len(header) != 3 or not header[2].isdigit():  # `NAME missing`: not a file, or a name the batch cannot carry
            raise stacks.ConfigError(f"{shown}: git cannot read it back ({blob[pos : start - 1].decode('utf-8', 'replace')})")
        pos = start + int(header[2]) + 1  # the content is followed by a newline
        files[name[len(folder) + 1 :]] = parse(name, stacks.decode_text(blob[start : pos - 1], shown, stacks.RENDERED_LIMITS), shown)
    return files


def fresh(config: Any) -> dict[str, Any]:
    """The working tree's render of one config, as `python -m stacks render` writes it."""
    # Imported here: `check` reads the committed render through this module and starts without the Pulumi SDK.
    from tools.render import run

    with tempfile.TemporaryDirectory(prefix="stacks-diff-") as tmp:
        return read_folder(write(run(config), Path(tmp)))
