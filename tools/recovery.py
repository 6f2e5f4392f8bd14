"""After a killed `pulumi up` (`python -m stacks recover`): the exact refresh that makes the state true again. A refresh
clears pending updates and deletes, not pending creates, which only the cluster knows happened: this prints the
`pulumi refresh` that imports each create that happened and drops the others (docs/lifecycle.md "An interrupted run")."""

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
from policy.core import ref
from tools import drift, kubectl


@dataclass(frozen=True)
class Pending:
    """One operation the killed run had started; `obj` the object's apiVersion, kind and metadata (None: not one)."""

    op: str  # creating, updating, deleting, reading, importing
    urn: str
    obj: dict[str, Any] | None

    @property
    def label(self) -> str:
        return ref(self.obj) if self.obj else self.urn.rsplit("::", 1)[-1]


STATE_LIMITS = stacks.Limits("a stack export", max_bytes=kubectl.MAX_OUTPUT, max_depth=64)  # objects nest a dozen levels


def exported(stack: str, state_file: str | None) -> dict[str, Any]:
    """The stack's state: a saved `pulumi stack export`, or the Pulumi CLI's export of `stack`."""
    if state_file:
        text, where = stacks.read_text(Path(state_file), STATE_LIMITS), escaped(state_file)
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
    if not (url := os.environ.get("PULUMI_BACKEND_URL")):
        home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
        try:
            credentials = stacks.parse_json(stacks.read_text(home / "credentials.json"), "credentials.json")
        except stacks.ConfigError:  # no login, or a file Pulumi could not read either
            return None
        url = credentials.get("current") if isinstance(credentials, dict) else None
    if not isinstance(url, str) or not url.startswith("file://"):
        return None
    return Path(os.path.expanduser(url[len("file://") :].split("?", 1)[0]))


# Pulumi's file backend (pkg/backend/diy): a checkpoint's layout by `.pulumi/meta.yaml`'s version, NAME.attrs beside each.
def stack_paths(root: Path, stack: str) -> tuple[list[Path], Path]:
    """(the stack's checkpoint files, with their backups; its lock folder) in a file backend, this project's only."""
    stacks.check_stack_name(stack, "stack")  # a name of Pulumi's grammar holds no `/`, `..` or glob character
    state = root / ".pulumi"
    try:
        meta = stacks.read_yaml(state / "meta.yaml")
    except stacks.ConfigError:
        meta = None
    version = meta.get("version") if isinstance(meta, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version >= 1:
        base, lock_dir = state / "stacks" / stacks.PROJECT / stack, state / "locks" / "organization" / stacks.PROJECT / stack
    else:
        base, lock_dir = state / "stacks" / stack, state / "locks" / stack
    return [Path(f"{base}.json{ext}{bak}") for ext in ("", ".gz", ".zst") for bak in ("", ".bak")], lock_dir


def half_written(root: Path, stack: str) -> list[Path]:
    """Empty `.attrs` files beside the stack's checkpoint and locks (written in place, unlike the checkpoint: a kill can
    leave one empty, and every command fails with `failed to load checkpoint: EOF`)."""
    checkpoints, lock_dir = stack_paths(root, stack)
    found = [Path(f"{p}.attrs") for p in checkpoints]
    if lock_dir.is_dir():
        found += [p for p in lock_dir.iterdir() if p.name.endswith(".json.attrs")]
    return sorted(p for p in found if p.is_file() and not p.is_symlink() and p.stat().st_size == 0)


def locks(root: Path, stack: str) -> list[Path]:
    _, lock_dir = stack_paths(root, stack)
    return sorted(p for p in lock_dir.iterdir() if p.name.endswith(".json") and p.is_file()) if lock_dir.is_dir() else []


_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_API_VERSION = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?v[0-9]+[a-z0-9]{0,20}")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def pending(state: dict[str, Any]) -> list[Pending]:
    """The pending operations of an export, each with its object (None where the API server would not take its kind,
    apiVersion or names: cleared, never imported); an entry of the wrong type is one error naming it."""
    if not isinstance(ops := (state.get("deployment") or {}).get("pending_operations") or [], list):
        raise stacks.ConfigError("the stack export: deployment.pending_operations is not a list: not a stack export")
    out = []
    for i, op in enumerate(ops):
        where = f"the stack export: deployment.pending_operations[{i}]"
        resource = op.get("resource") if isinstance(op, dict) else None
        if not isinstance(resource, dict) or not isinstance(resource.get("urn"), str) or not isinstance(op.get("type"), str):
            raise stacks.ConfigError(f"{where}: not a pending operation (a type and a resource with its urn)")
        if not (urn := resource["urn"]).isprintable():
            # The URN goes into the refresh command printed for a user to paste: it must be shown as it is.
            raise stacks.ConfigError(f"{where}: its urn {escaped(urn[:200])} holds control characters: no URN Pulumi writes")
        inputs = kubectl.mapping(resource.get("inputs"))
        meta = kubectl.mapping(inputs.get("metadata"))
        name, namespace, kind, api = meta.get("name"), meta.get("namespace"), inputs.get("kind"), inputs.get("apiVersion")
        ok = [(name, _NAME), ("a" if namespace is None else namespace, _NAME), (kind, _KIND), (api, _API_VERSION)]
        obj = {"apiVersion": api, "kind": kind, "metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}
        out.append(Pending(op["type"], urn, obj if all(isinstance(v, str) and pattern.fullmatch(v) for v, pattern in ok) else None))
    return out


def plan(stack: str, ops: list[Pending], live: set[tuple[str, str, str]], locked: list[Path] | None = None) -> tuple[str, list[str] | None]:
    """(the report, the refresh's arguments or None). `locked`: a file backend's lock files (None: not seen from here)."""
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
        elif p.obj is not None and drift.key_of(p.obj) in live:
            imports += [p.urn, logical_name(p.obj)]
            lines.append(escaped(f"  creating {p.label}: it exists on the cluster: imported into the state"))
        else:
            clear = True
            lines.append(escaped(f"  creating {p.label}: not on the cluster: dropped from the state (the next `up` creates it)"))
    # The flag takes one value each time it is given (a string array): URN and ID alternate, each flagged.
    args = ["pulumi", "refresh", "-s", stack, "--yes", *(a for value in imports for a in ("--import-pending-creates", value))]
    args += ["--clear-pending-creates"] if clear else []
    steps = [*([cancel] if cancel else []), shlex.join(args), up]
    lines += ["", *(f"{i}. {step}" for i, step in enumerate(steps, 1))]
    return "\n".join(lines) + "\n", args


def existing(objs: list[dict[str, Any]], context: str | None) -> set[tuple[str, str, str]]:
    return {drift.key_of(o) for o in (drift.read_live([Declared("", "", o) for o in objs], context) if objs else [])}
