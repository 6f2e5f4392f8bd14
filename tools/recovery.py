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

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stacks
from components.kube import Declared, logical_name
from config import project
from tools import drift


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


def exported(stack: str, state_file: str | None) -> dict[str, Any]:
    """The stack's state: a saved `pulumi stack export`, or the export of `stack` by the Pulumi CLI on PATH."""
    if state_file:
        text = stacks.read_text(Path(state_file))
        where = state_file
    else:
        cmd = ["pulumi", "stack", "export", "-s", stack]
        try:
            proc = subprocess.run(cmd, cwd=project.ROOT, capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise stacks.ConfigError(f"recover: `{' '.join(cmd)}` failed: {err} (or give the export with --state FILE)") from None
        if proc.returncode != 0:
            said = " | ".join(proc.stderr.strip().splitlines()[-3:])
            raise stacks.ConfigError(f"recover: `{' '.join(cmd)}` failed: {said}")
        text, where = proc.stdout, f"`{' '.join(cmd)}`"
    try:
        data = json.loads(text)
    except ValueError as err:
        raise stacks.ConfigError(f"{where}: not a stack export (JSON): {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("deployment", {}), dict):
        raise stacks.ConfigError(f"{where}: not a stack export (no deployment)")
    return data


def diy_root() -> Path | None:
    """The folder of a file:// state backend (PULUMI_BACKEND_URL, else the one `pulumi login` made current), or None."""
    url = os.environ.get("PULUMI_BACKEND_URL")
    if not url:
        try:
            home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
            url = json.loads((home / "credentials.json").read_text()).get("current") or ""
        except (OSError, ValueError, AttributeError):
            return None
    if not isinstance(url, str) or not url.startswith("file://"):
        return None
    return Path(os.path.expanduser(url[len("file://") :].split("?", 1)[0]))


def half_written(root: Path, stack: str) -> list[Path]:
    """Empty `.attrs` files beside the stack's checkpoint and locks. The file backend writes its checkpoint by rename
    (whole or not at all) but each file's `.attrs` beside it in place: a run killed at that moment leaves it empty, and
    every command then fails with `failed to load checkpoint: EOF` (seen in the live tier). The file it describes is
    whole; without the `.attrs` it is read with no attributes, as a file the backend wrote without any."""
    state = root / ".pulumi"
    found = [*(state / "stacks").glob(f"*/{stack}.json*.attrs"), *(state / "locks").glob(f"*/*/{stack}/*.attrs")]
    return sorted(p for p in found if p.is_file() and p.stat().st_size == 0)


def locks(root: Path, stack: str) -> list[Path]:
    """The lock files of the stack in a file backend: a run that was killed leaves its own."""
    return sorted((root / ".pulumi" / "locks").glob(f"*/*/{stack}/*.json"))


def pending(state: dict[str, Any]) -> list[Pending]:
    """The pending operations of an export, with the Kubernetes object each is about."""
    out = []
    for op in (state.get("deployment") or {}).get("pending_operations") or []:
        resource = op.get("resource") or {}
        inputs = resource.get("inputs") or {}
        meta = inputs.get("metadata") if isinstance(inputs.get("metadata"), dict) else None
        obj = None
        if meta and isinstance(meta.get("name"), str) and isinstance(inputs.get("kind"), str) and isinstance(inputs.get("apiVersion"), str):
            obj = {"apiVersion": inputs["apiVersion"], "kind": inputs["kind"], "metadata": {"name": meta["name"], **(
                {"namespace": meta["namespace"]} if isinstance(meta.get("namespace"), str) else {})}}  # fmt: skip
        out.append(Pending(str(op.get("type")), str(resource.get("urn")), obj))
    return out


def plan(
    stack: str, ops: list[Pending], on_cluster: set[tuple[str, str, str]], locked: list[Path] | None = None
) -> tuple[str, list[str] | None]:
    """(the report, the refresh command's arguments, or None when there is nothing to refresh). `locked`: the lock
    files of a file backend (None: a backend whose locks cannot be seen from here)."""
    if locked is None:
        cancel = f"if `pulumi up` says the stack is locked and no other run is going on: pulumi cancel --yes -s {stack}"
    elif locked:
        cancel = f"the stack is locked ({len(locked)} lock file(s)); if no other run is going on: pulumi cancel --yes -s {stack}"
    else:
        cancel = ""
    if not ops:
        first = f" First, {cancel}." if cancel else ""
        return f"{stack}: the state has no pending operations: `pulumi up -s {stack}` converges.{first}\n", None
    lines = [f"{stack}: the last run was interrupted with {len(ops)} operation(s) under way:"]
    imports: list[str] = []
    clear = False
    for p in ops:
        if p.op != "creating":
            lines.append(f"  {p.op} {p.label}: the refresh reads it again")
            continue
        key = (p.obj["kind"], p.obj["metadata"].get("namespace", ""), p.obj["metadata"]["name"]) if p.obj else None
        if key is not None and key in on_cluster:
            assert p.obj is not None
            imports += [p.urn, logical_name(p.obj)]
            lines.append(f"  creating {p.label}: it exists on the cluster: imported into the state")
        else:
            clear = True
            lines.append(f"  creating {p.label}: not on the cluster: dropped from the state (the next `up` creates it)")
    args = ["pulumi", "refresh", "-s", stack, "--yes"]
    # The flag takes one value each time it is given (a string array): URN and ID alternate, each flagged.
    for value in imports:
        args += ["--import-pending-creates", value]
    if clear:
        args.append("--clear-pending-creates")
    steps = [cancel] if cancel else []
    steps += [shlex.join(args), f"pulumi up -s {stack}"]
    lines += ["", *(f"{i}. {step}" for i, step in enumerate(steps, 1))]
    return "\n".join(lines) + "\n", args


def existing(objs: list[dict[str, Any]], context: str | None) -> set[tuple[str, str, str]]:
    """Which of these objects the cluster has (read only)."""
    return keys_of(drift.read_live([Declared("", "", o) for o in objs], context) if objs else [])


def keys_of(live: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(kind, namespace or "", name) of each object."""
    metas = [(o, o.get("metadata") or {}) for o in live]
    return {(str(o.get("kind")), str(m.get("namespace") or ""), str(m.get("name"))) for o, m in metas}
