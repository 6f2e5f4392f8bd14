"""What the cluster says, read safely: read-only `oc` runs decoded without failing, their JSON parsed within bounds, and
the shape of every object checked (SHAPES: the fields the tools read): a wrong type is one line, never a traceback."""

import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import stacks
from config.text import escaped

TIMEOUT = 60  # seconds one `oc` call may take
MAX_OUTPUT = 256 * 1024 * 1024  # bytes of one `oc get` answer (or stack export): a namespace's objects are a few MiB
OUTPUT_LIMITS = stacks.Limits("the output of `oc get`", max_bytes=MAX_OUTPUT, max_depth=64)  # objects nest a dozen levels
MAX_LOG_BYTES = 1024 * 1024  # of a check's log (`oc logs --limit-bytes`): its verdict is in its last lines
INT32 = 2**31
QUANTITY_CHARS = 64  # `1000Gi`, `126500m`: hundreds of digits are no quantity the API server returns


def tool(kubectl: str | None, command: str) -> str:
    if (found := kubectl or shutil.which("oc") or shutil.which("kubectl")) is None:
        raise stacks.ConfigError(f"{command} reads the cluster with `oc` or `kubectl`: neither is on PATH")
    return found


@dataclass(frozen=True)
class Answer:
    returncode: int
    stdout: str
    stderr: str

    @property
    def said(self) -> str:
        """The last lines of stderr (what the client says when it fails), as one escaped line."""
        return cut(" | ".join(line.strip() for line in self.stderr.strip().splitlines()[-3:] if line.strip()), 400)


def run(cmd: list[str], command: str) -> Answer:
    """Run a read-only client command, its output decoded replacing what is not UTF-8 (a log holds what a container wrote)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise stacks.ConfigError(f"{command}: `{escaped(' '.join(cmd[:3]))} ...` failed: {escaped(err)}") from None
    return Answer(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def cut(text: str, limit: int) -> str:
    """Foreign text as one escaped line of at most `limit` characters (before escaping)."""
    return escaped(text if len(text) <= limit else text[: limit - 3] + "...")


def parse(text: str, source: str) -> list[dict[str, Any]]:
    """The objects of an `oc get -o json` answer (a List's items, or the one object), or one ConfigError naming `source`."""
    if not text.strip():
        return []
    if not isinstance(data := stacks.parse_json(text, source, OUTPUT_LIMITS), dict):
        raise stacks.ConfigError(f"{source}: not a Kubernetes object or List (JSON {type(data).__name__})")
    if not str(data.get("kind", "")).endswith("List"):
        return [data]
    if not isinstance(items := data.get("items"), list | None):
        raise stacks.ConfigError(f"{source}: items of the List is {_type(items)}, not a list of objects")
    return items or []


Check = Callable[[Any], str]  # a leaf's check: why the value is not of the type, or ""
_TYPES = {"bool": "a boolean", "int": "a number", "float": "a number", "str": "text", "list": "a list", "dict": "a mapping"}


def _type(value: Any) -> str:
    return "null" if value is None else _TYPES.get(type(value).__name__, type(value).__name__)


def text(value: Any) -> str:
    return "" if isinstance(value, str) else f"{_type(value)}, not text"


def flag(value: Any) -> str:
    return "" if isinstance(value, bool) else f"{_type(value)}, not true or false"


def count(value: Any) -> str:
    """A non-negative int32 (replicas, succeeded, restartCount, a queue position)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{_type(value)}, not a count"
    return "" if 0 <= value < INT32 else f"{_shown(value)}, not a count (0 to {INT32 - 1})"


def int32(value: Any) -> str:
    """A container's exit code."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{_type(value)}, not a whole number"
    return "" if -INT32 <= value < INT32 else f"{_shown(value)}, beyond an int32"


def quantity(value: Any) -> str:
    """Text of a few characters (or a number, in a file saved by another tool)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return f"{_type(value)}, not a quantity"
    shown = str(value)
    return "" if len(shown) <= QUANTITY_CHARS else f"{len(shown)} characters long, not a quantity the API server writes"


@dataclass(frozen=True)
class MapOf:  # a mapping of names to values of one shape (labels, allocatable resources)
    value: Any


# A mapping's fields (those read; each may be absent or null), a list of one shape ([shape]), a MapOf, or a leaf.
Shape = dict[str, Any] | list[Any] | MapOf | Check

OWNER = {"apiVersion": text, "kind": text, "name": text, "uid": text, "controller": flag}
META = {"name": text, "namespace": text, "uid": text, "labels": MapOf(text), "annotations": MapOf(text), "ownerReferences": [OWNER]}
META |= {"creationTimestamp": text, "deletionTimestamp": text}
CONDITION = {"type": text, "status": text, "reason": text, "message": text}
_STATE = {"waiting": {"reason": text, "message": text}, "terminated": {"exitCode": int32, "reason": text, "message": text}}
_CONTAINER = {"name": text, "image": text, "resources": {"requests": MapOf(quantity), "limits": MapOf(quantity)}}
_CONTAINER_STATUS = {"name": text, "image": text, "restartCount": count, "state": _STATE, "lastState": _STATE}
SELECTOR = {"matchLabels": MapOf(text)}
_EVENT_ABOUT = {"kind": text, "namespace": text, "name": text, "uid": text}

SHAPES: dict[str, dict[str, Any]] = {  # per kind, the fields the tools read beyond kind, apiVersion and metadata
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
BASE = {"kind": text, "apiVersion": text, "metadata": META}


def _shown(value: Any) -> str:
    shown = repr(value) if isinstance(value, str) else str(value)
    return cut(shown, 40) if len(shown) <= 60 else f"{cut(shown, 24)} ({len(shown)} characters)"


def problem(value: Any, shape: Shape) -> str:
    """`PATH is WHAT` for the first value that does not have its shape, or "" (a loop: no recursion limit to reach)."""
    todo: list[tuple[Any, Shape, str]] = [(value, shape, "")]
    while todo:
        item, want, where = todo.pop()
        if item is None:
            continue  # an absent field, as the API server omits it
        if isinstance(want, dict | MapOf) and not isinstance(item, dict):
            return f"{where or 'the object'} is {_type(item)}, not a mapping"
        if isinstance(want, dict):
            todo += [(item.get(k), sub, f"{where}.{k}" if where else k) for k, sub in reversed(want.items())]
        elif isinstance(want, list):
            if not isinstance(item, list):
                return f"{where} is {_type(item)}, not a list"
            todo += [(v, want[0], f"{where}[{i}]") for i, v in reversed(list(enumerate(item)))]
        elif isinstance(want, MapOf):
            todo += [(v, want.value, f"{where}[{k}]") for k, v in reversed(list(item.items()))]
        elif said := want(item):
            return f"{where} is {said}"
    return ""


def mapping(value: Any) -> dict[str, Any]:  # a value that should be a mapping, or an empty one
    return value if isinstance(value, dict) else {}


def label(obj: Mapping[str, Any]) -> str:
    """`Pod team-a/dev-0` for messages, escaped."""
    meta = mapping(obj.get("metadata"))
    name, ns = meta.get("name"), meta.get("namespace")
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "an object"
    where = f"{ns}/{name}" if isinstance(ns, str) and ns and isinstance(name, str) else name if isinstance(name, str) else ""
    return cut(f"{kind} {where}".strip(), 200)


def check(objects: list[Any], source: str) -> list[dict[str, Any]]:
    """The objects, or the ConfigError for the first not of the shape the tools read (`SOURCE: Pod NS/NAME: PATH is ...`)."""
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict):
            raise stacks.ConfigError(f"{source}: item {i} is {_type(obj)}, not a Kubernetes object")
        if found := problem(obj, BASE) or problem(obj, SHAPES.get(str(obj.get("kind")), {})):
            raise stacks.ConfigError(
                f"{source}: {label(obj)}: {cut(found, 300)}: not an object as the API server returns it (`oc get -o json`)"
            )
    return objects
