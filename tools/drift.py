"""What was changed by hand on the cluster since `pulumi up`, in the stack file's words (`python -m stacks drift`).

A plain `pulumi up` compares the program with the state, not with the cluster, so a hand edit (`oc scale`, `oc set
env`, an object deleted) goes unseen until a refresh; `pulumi preview --refresh` shows it as Pulumi's property diff.
This reads the objects the stack declares from the cluster (read only) and names each difference by the config
entry that declares it: `workloads[deepti-nerc] (clusters/nerc.py:120): replicas 3 on the cluster, 1 in the stack`.

Only what the stack declares is compared (docs/lifecycle.md "Drift": the stack owns the fields it declares, by
server-side apply): a field the stack does not set (what the API server defaults, what OpenShift's controllers add)
is never drift. One kind of addition is: an entry added by hand to a list the stack declares by name (an env
variable, a port, a volume). `pulumi up --refresh` removes it (the live tier saw the provider take an env variable
added with `kubectl set env` back out, with the field manager's claim to it: live/tests/test_convergence.py).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

import stacks
from components.kube import Declared, logical_name
from components.program import layout
from config import provenance
from config.errors import located
from config.stack import ClusterConfig
from config.text import escaped
from config.values import quantity_value
from tools import kubectl

# Set by the provider for its own bookkeeping, or by the API server: never declared drift.
IGNORED_ANNOTATIONS = ("pulumi.com/autonamed",)
# How the commands name a kind for `kubectl get` (the API group tells custom kinds apart).
GROUPS = {
    "apps/v1": "apps",
    "batch/v1": "batch",
    "networking.k8s.io/v1": "networking.k8s.io",
    "rbac.authorization.k8s.io/v1": "rbac.authorization.k8s.io",
}


@dataclass(frozen=True)
class Drift:
    """One difference between what the stack declares and what the cluster holds."""

    where: str
    """The config entry, as the stack file names it (`workloads[deepti-nerc]`), with its file and line."""
    obj: str
    """The object on the cluster (`StatefulSet ns/deepti-nerc`)."""
    what: str
    """The difference, in the stack's words (`replicas 3 on the cluster, 1 in the stack`)."""
    added: bool = False
    """An entry added by hand to a list the stack declares by name (the refresh and up remove it)."""


def resource_of(obj: dict[str, Any]) -> str:
    """`kubectl get` resource for an object's kind: `statefulset.apps`, `networkattachmentdefinition.k8s.cni.cncf.io`."""
    api = obj["apiVersion"]
    group = GROUPS.get(api, api.rsplit("/", 1)[0] if "/" in api else "")
    return f"{obj['kind'].lower()}.{group}" if group else obj["kind"].lower()


def read_live(declared: list[Declared], context: str | None, kubectl_path: str | None = None) -> list[dict[str, Any]]:
    """The declared objects as the cluster holds them: one `kubectl get` per namespace (read only); an absent object
    is simply not in the answer. `oc` is used where it is installed, else `kubectl`. An answer that is not JSON, or
    objects of the wrong shape, are one error (tools/kubectl.py)."""
    tool = kubectl.tool(kubectl_path, "drift")
    by_namespace: dict[str, list[str]] = {}
    for d in declared:
        ns = d.object["metadata"].get("namespace") or ""
        by_namespace.setdefault(ns, []).append(f"{resource_of(d.object)}/{d.object['metadata']['name']}")
    live: list[dict[str, Any]] = []
    for ns, refs in sorted(by_namespace.items()):
        cmd = [tool, "get", *refs, "-o", "json", "--ignore-not-found"]
        cmd += ["-n", ns] if ns else []
        cmd += ["--context", context] if context else []
        answer = kubectl.run(cmd, "drift")
        command = f"`{tool} get ... -n {ns or '(cluster)'}`"
        if answer.returncode != 0:
            raise stacks.ConfigError(f"drift: {command} failed: {answer.said}")
        live += kubectl.parse(answer.stdout, command)
    return kubectl.check(live, f"`{tool} get`")


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = kubectl.mapping(obj.get("metadata"))
    return str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def _same(declared: Any, live: Any) -> bool:
    if declared == live:
        return True
    if isinstance(declared, (str, int, float)) and isinstance(live, (str, int, float)) and not isinstance(declared, bool):
        try:  # the API server writes quantities in its canonical form (1024Mi is 1Gi; 4 CPUs may come back as "4")
            return quantity_value(str(declared)) == quantity_value(str(live))
        except (ValueError, TypeError):
            return str(declared) == str(live)
    return False


def _named(items: Any) -> bool:
    return isinstance(items, list) and bool(items) and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)


def compare(declared: Any, live: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, declared, live) for every declared leaf the cluster holds otherwise, and (path, None, live) for each
    entry added to a list the stack declares by name (env, ports, volumes, containers). What the stack does not
    declare is not compared."""
    if isinstance(declared, dict):
        if not isinstance(live, dict):
            return [(path, declared, live)] if declared else []
        out = []
        for k, v in declared.items():
            if path == "metadata.annotations" and k in IGNORED_ANNOTATIONS:
                continue
            out += compare(v, live.get(k), f"{path}.{k}" if path else k)
        return out
    if _named(declared) and isinstance(live, list):
        # Entries by name; one whose name is no text (no API server returns it) is shown as an entry added by hand.
        live_by_name = {_entry_name(i): i for i in live if isinstance(i, dict)}
        out = []
        for item in declared:
            out += compare(item, live_by_name.get(item["name"]), f"{path}[{item['name']}]")
        ours = {i["name"] for i in declared}
        out += [(f"{path}[{n}]", None, v) for n, v in live_by_name.items() if n not in ours]
        return out
    if isinstance(declared, list):
        if not isinstance(live, list) or len(live) != len(declared):
            return [(path, declared, live)]
        out = []
        for i, (d, lv) in enumerate(zip(declared, live, strict=True)):
            out += compare(d, lv, f"{path}[{i}]")
        return out
    if live is None and declared in ({}, [], "", None):
        return []
    return [] if _same(declared, live) else [(path, declared, live)]


def _entry_name(item: dict[str, Any]) -> str:
    name = item.get("name")
    return name if isinstance(name, str) else json.dumps(name, sort_keys=True)[:60]


# Paths whose difference has a name in the config (the rest are named by their path in the object).
def _words(kind: str, path: str) -> str:
    if kind in ("StatefulSet", "Job") and path == "spec.replicas":
        return "replicas"
    if ".env[" in path:
        var = path.split(".env[", 1)[1].split("]", 1)[0]
        return f"env {var}" + ("" if path.endswith("]") or path.endswith(".value") else path.split("]", 1)[1])
    if path.endswith(".image"):
        return "image"
    if path.startswith("metadata.labels."):
        return f"label {path.removeprefix('metadata.labels.')}"
    if path.startswith("metadata.annotations."):
        return f"annotation {path.removeprefix('metadata.annotations.')}"
    return path


def _entry(value: Any) -> str:
    """An entry added to a named list: `HAND=1` for an env variable, else the entry (escaped: an env value added by
    hand holds whatever its writer chose)."""
    if isinstance(value, dict) and set(value) == {"name", "value"}:
        return _shown(f"{value['name']}={value['value'] if isinstance(value['value'], str) else json.dumps(value['value'])}")
    return _shown(value)


def _shown(value: Any) -> str:
    """A value as the report shows it: one escaped line of at most 120 characters."""
    if value is None:
        return "nothing"
    text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
    return escaped(text if len(text) <= 120 else text[:117] + "...")


def drift(config: ClusterConfig, declared: list[Declared], live: list[dict[str, Any]]) -> list[Drift]:
    """Every difference between the declared objects (not the patches: those own a few fields of others' objects)
    and the cluster's, in the order the stack declares them."""
    on_cluster = {_key(o): o for o in live if isinstance(o, dict)}
    out: list[Drift] = []
    for d in declared:
        if d.patch:
            continue
        obj = d.object
        label = f"{obj['kind']} {logical_name(obj)}"
        where = located(d.source, config) if d.source else label
        line = provenance.shown(provenance.origin(config, d.source)) if d.source else ""
        where = f"{where} ({line})" if line else where
        current = on_cluster.get(_key(obj))
        if current is None:
            out.append(Drift(where, label, "missing on the cluster (deleted by hand?): `pulumi up --refresh` creates it again"))
            continue
        for path, want, have in compare(obj, current):
            words = escaped(_words(obj["kind"], path))  # a path may hold a name the cluster gave (an entry added by hand)
            if want is None:
                shown = f"env {_entry(have)}" if words.startswith("env ") else f"{words}: {_entry(have)}"
                out.append(Drift(where, label, f"{shown} on the cluster, not in the stack (added by hand; to keep it, declare it)", True))
            else:
                out.append(Drift(where, label, f"{words} {_shown(have)} on the cluster, {_shown(want)} in the stack"))
    return out


def report(config: ClusterConfig, found: list[Drift], stack_file: str) -> str:
    """The drift report: one line per difference, then what to do."""
    if not found:
        return f"{config.name}: no drift: the cluster holds what the stack declares\n"
    lines = [f"{config.name}: {len(found)} difference(s) between the cluster and the stack"]
    lines += [escaped(f"  {f.where}: {f.what} [{f.obj}]") for f in found]
    lines.append("")
    lines.append(
        f"To restore what the stack declares: {shlex.join(['pulumi', 'up', '--refresh', '-s', stack_file])}. A hand edit that "
        "should stay is a config "
        'edit (state="stopped", fewer nodes, the value in the config): docs/lifecycle.md "Drift".'
    )
    return "\n".join(lines) + "\n"


def declared_for(config: ClusterConfig, tier: str) -> list[Declared]:
    return [d for d in layout(config, tier) if not d.patch]
