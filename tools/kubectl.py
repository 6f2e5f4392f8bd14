"""What the cluster says, read safely: `oc`/`kubectl` runs (read only) whose bytes are decoded without failing, their
JSON parsed within bounds, and the shape of every object checked before `status`, `drift` or `recover` reads it.

An API server returns well-formed objects; what reaches these commands may not be one: a saved file edited by hand, a
proxy's error page, a log a container wrote (any bytes), a field another tool filled with the wrong type. Whatever it
is, the command says so in one line naming the object and the field, and exits 2 (a usage or input error), never 1
(`status`'s "not running", `drift`'s "drift") and never with a traceback. The shapes below are the fields the tools
read, with the types the API server gives them (k8s.io/api core/v1, apps/v1, batch/v1; Kueue's v1beta2): a field the
tools do not read is not looked at, and a field read must be added here, where its type is said once.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import stacks
from config.text import escaped

TIMEOUT = 60
"""Seconds one `oc` call may take."""
MAX_OUTPUT = 256 * 1024 * 1024
"""Bytes of one `oc get` answer (or one stack export) that are parsed: a namespace's objects are a few MiB."""
OUTPUT_LIMITS = stacks.Limits("the output of `oc get`", max_bytes=MAX_OUTPUT, max_depth=64)
"""An object nests a dozen levels (a pod's spec.containers[].env[].valueFrom...): 64 leaves room and stops a bomb."""
MAX_LOG_BYTES = 1024 * 1024
"""Bytes of a check's log read (`oc logs --limit-bytes`): its verdict is in its last lines."""
INT32 = 2**31
QUANTITY_CHARS = 64
"""A quantity as the API server writes it (`1000Gi`, `126500m`) is a few characters; hundreds of digits are no
quantity it returns, and would be no number a float holds."""


def tool(kubectl: str | None, command: str) -> str:
    """The client to run: `kubectl` when given, else `oc` where installed, else `kubectl`."""
    found = kubectl or shutil.which("oc") or shutil.which("kubectl")
    if found is None:
        raise stacks.ConfigError(f"{command} reads the cluster with `oc` or `kubectl`: neither is on PATH")
    return found


@dataclass(frozen=True)
class Answer:
    returncode: int
    stdout: str
    stderr: str

    @property
    def said(self) -> str:
        """The last lines of stderr, as one escaped line (what the client says when it fails)."""
        lines = [line.strip() for line in self.stderr.strip().splitlines()[-3:]]
        return cut(" | ".join(line for line in lines if line), 400)


def run(cmd: list[str], command: str) -> Answer:
    """Run a read-only client command; its output is decoded as UTF-8 with every byte that is not replaced (a log holds
    whatever the container wrote), so no output can stop the command."""
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise stacks.ConfigError(f"{command}: `{escaped(' '.join(cmd[:3]))} ...` failed: {escaped(err)}") from None
    return Answer(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def cut(text: str, limit: int) -> str:
    """Foreign text as one escaped line of at most `limit` characters (before escaping)."""
    line = text if len(text) <= limit else text[: limit - 3] + "..."
    return escaped(line)


def parse(text: str, source: str) -> list[dict[str, Any]]:
    """The objects of an `oc get -o json` answer: a List's items, or the one object. Not JSON, too deep or too large,
    or no objects: one ConfigError naming `source`."""
    if not text.strip():
        return []
    data = stacks.parse_json(text, source, OUTPUT_LIMITS)
    if not isinstance(data, dict):
        raise stacks.ConfigError(f"{source}: not a Kubernetes object or List (JSON {type(data).__name__})")
    if str(data.get("kind", "")).endswith("List"):
        items = data.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise stacks.ConfigError(f"{source}: items of the List is {_type(items)}, not a list of objects")
        return items
    return [data]


# --- the shapes ---------------------------------------------------------------------------------------------------

Check = Callable[[Any], str]
"""A leaf's check: why the value is not of the type, or ""."""


_TYPES = {"bool": "a boolean", "int": "a number", "float": "a number", "str": "text", "list": "a list", "dict": "a mapping"}


def _type(value: Any) -> str:
    return "null" if value is None else _TYPES.get(type(value).__name__, type(value).__name__)


def text(value: Any) -> str:
    return "" if isinstance(value, str) else f"{_type(value)}, not text"


def flag(value: Any) -> str:
    return "" if isinstance(value, bool) else f"{_type(value)}, not true or false"


def count(value: Any) -> str:
    """A count the API server keeps as a non-negative int32 (replicas, succeeded, restartCount, a queue position)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{_type(value)}, not a count"
    return "" if 0 <= value < INT32 else f"{_shown(value)}, not a count (0 to {INT32 - 1})"


def int32(value: Any) -> str:
    """An int32 that may be negative (a container's exit code)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{_type(value)}, not a whole number"
    return "" if -INT32 <= value < INT32 else f"{_shown(value)}, beyond an int32"


def quantity(value: Any) -> str:
    """A quantity as the API server writes it: text of a few characters (a number, in a file saved by another tool)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return f"{_type(value)}, not a quantity"
    shown = str(value)
    return "" if len(shown) <= QUANTITY_CHARS else f"{len(shown)} characters long, not a quantity the API server writes"


@dataclass(frozen=True)
class MapOf:
    """A mapping of names to values of one shape (labels, allocatable resources)."""

    value: Any


Shape = dict[str, Any] | list[Any] | MapOf | Check
"""A mapping's fields (those read; each may be absent or null), a list of one shape ([shape]), a MapOf, or a leaf."""

OWNER = {"apiVersion": text, "kind": text, "name": text, "uid": text, "controller": flag}
META = {
    "name": text,
    "namespace": text,
    "uid": text,
    "labels": MapOf(text),
    "annotations": MapOf(text),
    "ownerReferences": [OWNER],
    "creationTimestamp": text,
    "deletionTimestamp": text,
}
CONDITION = {"type": text, "status": text, "reason": text, "message": text}
_STATE = {"waiting": {"reason": text, "message": text}, "terminated": {"exitCode": int32, "reason": text, "message": text}}
_CONTAINER = {"name": text, "image": text, "resources": {"requests": MapOf(quantity), "limits": MapOf(quantity)}}
_CONTAINER_STATUS = {"name": text, "image": text, "restartCount": count, "state": _STATE, "lastState": _STATE}
SELECTOR = {"matchLabels": MapOf(text)}
_EVENT_ABOUT = {"kind": text, "namespace": text, "name": text, "uid": text}

SHAPES: dict[str, dict[str, Any]] = {
    "Pod": {
        "spec": {"nodeName": text, "containers": [_CONTAINER]},
        "status": {"phase": text, "conditions": [CONDITION], "containerStatuses": [_CONTAINER_STATUS]},
    },
    "Node": {
        "spec": {"taints": [{"key": text, "value": text, "effect": text}], "unschedulable": flag},
        "status": {"allocatable": MapOf(quantity)},
    },
    "StatefulSet": {"spec": {"replicas": count, "selector": SELECTOR}, "status": {"replicas": count, "readyReplicas": count}},
    "Job": {
        "spec": {"completions": count, "parallelism": count, "selector": SELECTOR},
        "status": {"succeeded": count, "failed": count, "active": count, "conditions": [CONDITION]},
    },
    "Event": {
        "involvedObject": _EVENT_ABOUT,
        "regarding": _EVENT_ABOUT,
        **{k: text for k in ("reason", "message", "note", "type", "lastTimestamp", "eventTime")},
    },
    "Workload": {"status": {"conditions": [CONDITION]}},
    "PendingWorkloadsSummary": {"items": [{"metadata": META, "positionInClusterQueue": count}]},
}
"""Per kind, the fields the tools read beyond every object's kind, apiVersion and metadata."""
BASE = {"kind": text, "apiVersion": text, "metadata": META}


def _shown(value: Any) -> str:
    shown = repr(value) if isinstance(value, str) else str(value)
    return cut(shown, 40) if len(shown) <= 60 else f"{cut(shown, 24)} ({len(shown)} characters)"


def problem(value: Any, shape: Shape, path: str = "") -> str:
    """`PATH is WHAT` for the first value that does not have its shape, or "". Walked with an explicit stack: a
    value nested deep must not exhaust Python's (the parser already bounds the depth)."""
    todo: list[tuple[Any, Shape, str]] = [(value, shape, path)]
    while todo:
        item, want, where = todo.pop()
        if item is None:
            continue  # an absent field, as the API server omits it
        if isinstance(want, dict):
            if not isinstance(item, dict):
                return f"{where or 'the object'} is {_type(item)}, not a mapping"
            todo += [(item.get(k), sub, f"{where}.{k}" if where else k) for k, sub in reversed(want.items())]
        elif isinstance(want, list):
            if not isinstance(item, list):
                return f"{where} is {_type(item)}, not a list"
            todo += [(v, want[0], f"{where}[{i}]") for i, v in reversed(list(enumerate(item)))]
        elif isinstance(want, MapOf):
            if not isinstance(item, dict):
                return f"{where} is {_type(item)}, not a mapping"
            todo += [(v, want.value, f"{where}[{k}]") for k, v in reversed(list(item.items()))]
        else:
            said = want(item)
            if said:
                return f"{where} is {said}"
    return ""


def mapping(value: Any) -> dict[str, Any]:
    """A value that should be a mapping, or an empty one."""
    return value if isinstance(value, dict) else {}


def label(obj: Mapping[str, Any]) -> str:
    """`Pod team-a/dev-0` for messages, escaped."""
    meta = mapping(obj.get("metadata"))
    name, ns = meta.get("name"), meta.get("namespace")
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "an object"
    where = f"{ns}/{name}" if isinstance(ns, str) and ns and isinstance(name, str) else name if isinstance(name, str) else ""
    return cut(f"{kind} {where}".strip(), 200)


def check(objects: list[Any], source: str) -> list[dict[str, Any]]:
    """The objects, each of the shape the tools read (SHAPES), or the ConfigError for the first that is not: `SOURCE:
    Pod team-a/dev-0: status.containerStatuses[0].restartCount is text, not a count (...)`."""
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict):
            raise stacks.ConfigError(f"{source}: item {i} is {_type(obj)}, not a Kubernetes object")
        found = problem(obj, BASE)
        kind = obj.get("kind")
        if not found and isinstance(kind, str) and kind in SHAPES:
            found = problem(obj, SHAPES[kind])
        if found:
            raise stacks.ConfigError(
                f"{source}: {label(obj)}: {cut(found, 300)}: not an object as the API server returns it (`oc get -o json`)"
            )
    return objects
