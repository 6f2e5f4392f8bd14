"""After a killed `pulumi up` (`python -m stacks recover`): the exact refresh that makes the state true again.

A run killed mid-way (SIGKILL, a cancelled CI job, a closed laptop) leaves two things behind (docs/lifecycle.md "An
interrupted run"): the backend's lock, which only `pulumi cancel` removes (the command cannot know that no other
run holds it: the operator says so), and pending operations in the state: for each object the engine had started
to create, update or delete when it died. The engine clears pending updates and deletes on the next refresh, but
not pending creates: it cannot know whether the create happened. The kubernetes provider can: the object exists
on the cluster or it does not. So this reads the state (`pulumi stack export`) and the cluster, and prints the one
`pulumi refresh` that imports each create that happened (`--import-pending-creates URN --import-pending-creates ID`) and drops the others
(`--clear-pending-creates`). Without it, the next `up` would create again what exists (a provider since 4.29 fails
with AlreadyExists) or lose track of it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stacks
from components.kube import Declared, logical_name
from config import project
from config.text import escaped
from tools import drift, kubectl


@dataclass(frozen=True)
class Pending:
    """One operation the killed run had started."""

    op: str
    """creating, updating, deleting, reading, importing."""
    urn: str
    obj: dict[str, Any] | None
    """The object's apiVersion, kind and metadata (from the operation's inputs); None for a non-Kubernetes resource."""

    @property
    def label(self) -> str:
        return f"{self.obj['kind']} {logical_name(self.obj)}" if self.obj else self.urn.rsplit("::", 1)[-1]


STATE_LIMITS = stacks.Limits("a stack export", max_bytes=kubectl.MAX_OUTPUT, max_depth=64)
"""A state export nests as deep as the objects it holds (a dozen levels) under a few of its own: 64 leaves room, and a
file nested 100,000 deep is refused before anything walks it."""


def exported(stack: str, state_file: str | None) -> dict[str, Any]:
    """The stack's state: a saved `pulumi stack export`, or the export of `stack` by the Pulumi CLI on PATH."""
    if state_file:
        text = stacks.read_text(Path(state_file), STATE_LIMITS)
        where = escaped(state_file)
    else:
        cmd = ["pulumi", "stack", "export", "-s", stack]
        shown = shlex.join(cmd)
        try:
            proc = subprocess.run(cmd, cwd=project.ROOT, capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise stacks.ConfigError(f"recover: `{shown}` failed: {escaped(err)} (or give the export with --state FILE)") from None
        answer = kubectl.Answer(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))
        if answer.returncode != 0:
            raise stacks.ConfigError(f"recover: `{shown}` failed: {answer.said}")
        text, where = answer.stdout, f"`{shown}`"
    try:
        data = stacks.parse_json(text, where, STATE_LIMITS)
    except stacks.ConfigError as err:
        raise stacks.ConfigError(f"{err}: not a stack export") from None
    if not isinstance(data, dict) or not isinstance(data.get("deployment", {}), dict):
        raise stacks.ConfigError(f"{where}: not a stack export (no deployment)")
    return data


def diy_root() -> Path | None:
    """The folder of a file:// state backend (PULUMI_BACKEND_URL, else the one `pulumi login` made current), or None."""
    url = os.environ.get("PULUMI_BACKEND_URL")
    if not url:
        home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
        try:
            credentials = stacks.parse_json(stacks.read_text(home / "credentials.json"), "credentials.json")
        except stacks.ConfigError:  # no login, or a file Pulumi could not read either
            return None
        url = credentials.get("current") if isinstance(credentials, dict) else None
    if not isinstance(url, str) or not url.startswith("file://"):
        return None
    return Path(os.path.expanduser(url[len("file://") :].split("?", 1)[0]))


# How Pulumi's file backend lays out a stack (pkg/backend/diy, pulumi/pulumi at 1b59498): `.pulumi/meta.yaml` says
# `version: 1` for the project-scoped layout (meta.go; a state without it is the legacy one, which a new state is not
# given), where a stack's checkpoint is `.pulumi/stacks/PROJECT/STACK.json` (store.go projectReferenceStore
# StackBasePath; gzip and zstd add .gz and .zst) and its locks are in `.pulumi/locks/organization/PROJECT/STACK/`
# (lock.go stackLockDir of the FullyQualifiedName, backend.go: organization/PROJECT/STACK); in the legacy layout
# `.pulumi/stacks/STACK.json` and `.pulumi/locks/STACK/`. A checkpoint's backup is the same name with `.bak` (state.go),
# and gocloud's fileblob writes each file's attributes beside it as NAME.attrs. A shared backend (`pulumi login
# --local` is ~/.pulumi for every project) holds other projects' stacks of the same name: only these paths are ours.
_CHECKPOINTS = ("", ".gz", ".zst")


def _project_layout(state: Path) -> bool:
    """Whether the state is laid out by project (meta.yaml version 1 or more), or the legacy way."""
    try:
        meta = stacks.read_yaml(state / "meta.yaml")
    except stacks.ConfigError:
        return False
    version = meta.get("version") if isinstance(meta, dict) else None
    return isinstance(version, int) and not isinstance(version, bool) and version >= 1


def stack_paths(root: Path, stack: str) -> tuple[list[Path], Path]:
    """(the stack's checkpoint files, with their backups; its lock folder) in a file backend, this project's only."""
    stacks.check_stack_name(stack, "stack")  # a name of Pulumi's grammar holds no `/`, `..` or glob character
    state = root / ".pulumi"
    if _project_layout(state):
        base, lock_dir = state / "stacks" / stacks.PROJECT / stack, state / "locks" / "organization" / stacks.PROJECT / stack
    else:
        base, lock_dir = state / "stacks" / stack, state / "locks" / stack
    return [Path(f"{base}.json{ext}{bak}") for ext in _CHECKPOINTS for bak in ("", ".bak")], lock_dir


def half_written(root: Path, stack: str) -> list[Path]:
    """Empty `.attrs` files beside the stack's checkpoint and locks. The file backend writes its checkpoint by rename
    (whole or not at all) but each file's `.attrs` beside it in place: a run killed at that moment leaves it empty, and
    every command then fails with `failed to load checkpoint: EOF` (seen in the live tier). The file it describes is
    whole; without the `.attrs` it is read with no attributes, as a file the backend wrote without any."""
    checkpoints, lock_dir = stack_paths(root, stack)
    found = [Path(f"{p}.attrs") for p in checkpoints]
    if lock_dir.is_dir():
        found += [p for p in lock_dir.iterdir() if p.name.endswith(".json.attrs")]
    return sorted(p for p in found if p.is_file() and not p.is_symlink() and p.stat().st_size == 0)


def locks(root: Path, stack: str) -> list[Path]:
    """The lock files of the stack in a file backend: a run that was killed leaves its own."""
    _, lock_dir = stack_paths(root, stack)
    return sorted(p for p in lock_dir.iterdir() if p.name.endswith(".json") and p.is_file()) if lock_dir.is_dir() else []


_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_API_VERSION = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?v[0-9]+[a-z0-9]{0,20}")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def pending(state: dict[str, Any]) -> list[Pending]:
    """The pending operations of an export, with the Kubernetes object each is about. The export is a file: an entry of
    the wrong type is one error naming it, and an object whose kind, apiVersion or names the API server would not take
    is not one the cluster can hold (it is cleared, never imported)."""
    ops = (state.get("deployment") or {}).get("pending_operations") or []
    if not isinstance(ops, list):
        raise stacks.ConfigError("the stack export: deployment.pending_operations is not a list: not a stack export")
    out = []
    for i, op in enumerate(ops):
        where = f"the stack export: deployment.pending_operations[{i}]"
        resource = op.get("resource") if isinstance(op, dict) else None
        if not isinstance(resource, dict) or not isinstance(resource.get("urn"), str) or not isinstance(op.get("type"), str):
            raise stacks.ConfigError(f"{where}: not a pending operation (a type and a resource with its urn)")
        urn = resource["urn"]
        if not urn.isprintable():
            # The URN goes into the refresh command printed for a user to paste: it must be shown as it is.
            raise stacks.ConfigError(f"{where}: its urn {escaped(urn[:200])} holds control characters: no URN Pulumi writes")
        inputs = kubectl.mapping(resource.get("inputs"))
        meta = kubectl.mapping(inputs.get("metadata"))
        name, namespace, kind, api = meta.get("name"), meta.get("namespace"), inputs.get("kind"), inputs.get("apiVersion")
        obj = None
        named = (
            isinstance(name, str)
            and _NAME.fullmatch(name)
            and (namespace is None or isinstance(namespace, str) and _NAME.fullmatch(namespace))
        )
        if named and isinstance(kind, str) and _KIND.fullmatch(kind) and isinstance(api, str) and _API_VERSION.fullmatch(api):
            obj = {"apiVersion": api, "kind": kind, "metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}
        out.append(Pending(op["type"], urn, obj))
    return out


def plan(
    stack: str, ops: list[Pending], on_cluster: set[tuple[str, str, str]], locked: list[Path] | None = None
) -> tuple[str, list[str] | None]:
    """(the report, the refresh command's arguments, or None when there is nothing to refresh). `locked`: the lock
    files of a file backend (None: a backend whose locks cannot be seen from here)."""
    # Every command is printed quoted (shlex), ready to paste; everything read from the state is shown escaped.
    up, unlock = shlex.join(["pulumi", "up", "-s", stack]), shlex.join(["pulumi", "cancel", "--yes", "-s", stack])
    if locked is None:
        cancel = f"if `pulumi up` says the stack is locked and no other run is going on: {unlock}"
    elif locked:
        cancel = f"the stack is locked ({len(locked)} lock file(s)); if no other run is going on: {unlock}"
    else:
        cancel = ""
    if not ops:
        first = f" First, {cancel}." if cancel else ""
        return f"{escaped(stack)}: the state has no pending operations: `{up}` converges.{first}\n", None
    lines = [f"{escaped(stack)}: the last run was interrupted with {len(ops)} operation(s) under way:"]
    imports: list[str] = []
    clear = False
    for p in ops:
        if p.op != "creating":
            lines.append(escaped(f"  {p.op} {p.label}: the refresh reads it again"))
            continue
        key = (p.obj["kind"], p.obj["metadata"].get("namespace", ""), p.obj["metadata"]["name"]) if p.obj else None
        if key is not None and key in on_cluster:
            assert p.obj is not None
            imports += [p.urn, logical_name(p.obj)]
            lines.append(escaped(f"  creating {p.label}: it exists on the cluster: imported into the state"))
        else:
            clear = True
            lines.append(escaped(f"  creating {p.label}: not on the cluster: dropped from the state (the next `up` creates it)"))
    args = ["pulumi", "refresh", "-s", stack, "--yes"]
    # The flag takes one value each time it is given (a string array): URN and ID alternate, each flagged.
    for value in imports:
        args += ["--import-pending-creates", value]
    if clear:
        args.append("--clear-pending-creates")
    steps = [cancel] if cancel else []
    steps += [shlex.join(args), up]
    lines += ["", *(f"{i}. {step}" for i, step in enumerate(steps, 1))]
    return "\n".join(lines) + "\n", args


def existing(objs: list[dict[str, Any]], context: str | None) -> set[tuple[str, str, str]]:
    """Which of these objects the cluster has (read only)."""
    return keys_of(drift.read_live([Declared("", "", o) for o in objs], context) if objs else [])


def keys_of(live: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(kind, namespace or "", name) of each object."""
    metas = [(o, kubectl.mapping(o.get("metadata"))) for o in live]
    return {(str(o.get("kind")), str(m.get("namespace") or ""), str(m.get("name"))) for o, m in metas}
