"""What was changed by hand on the cluster since `pulumi up`, in the stack file's words (`python -m stacks drift`): only
what the stack declares (docs/lifecycle.md "Drift"), and entries added by hand to a list it declares by name (env)."""

import json
import shlex
from dataclasses import dataclass
from typing import Any

import stacks
from components.kube import Declared
from components.program import layout
from config import provenance
from config.errors import located
from config.stack import ClusterConfig
from config.text import escaped
from config.values import quantity_value
from policy.core import ref
from tools import kubectl

# Set by the provider for its own bookkeeping, or by the API server: never declared drift.
IGNORED_ANNOTATIONS = ("pulumi.com/autonamed",)


@dataclass(frozen=True)
class Drift:
    where: str  # the config entry as the stack file names it, with its file and line
    obj: str  # the object on the cluster (`StatefulSet ns/deepti-nerc`)
    what: str  # the difference in the stack's words
    added: bool = False  # an entry added by hand to a list the stack declares by name


def read_live(declared: list[Declared], context: str | None, kubectl_path: str | None = None) -> list[dict[str, Any]]:
    """The declared objects the cluster holds: one read-only `oc get` per namespace, its answer checked."""
    tool = kubectl.tool(kubectl_path, "drift")
    by_namespace: dict[str, list[str]] = {}
    for obj in (d.object for d in declared):
        group = obj["apiVersion"].rpartition("/")[0]  # `statefulset.apps/NAME`: the kind as `oc get` takes it
        resource = f"{obj['kind'].lower()}.{group}" if group else obj["kind"].lower()
        by_namespace.setdefault(obj["metadata"].get("namespace") or "", []).append(f"{resource}/{obj['metadata']['name']}")
    live: list[dict[str, Any]] = []
    for ns, refs in sorted(by_namespace.items()):
        where = [*(["-n", ns] if ns else []), *(["--context", context] if context else [])]
        answer = kubectl.run([tool, "get", *refs, "-o", "json", "--ignore-not-found", *where], "drift")
        command = f"`{tool} get ... -n {ns or '(cluster)'}`"
        if answer.returncode != 0:
            raise stacks.ConfigError(f"drift: {command} failed: {answer.said}")
        live += kubectl.parse(answer.stdout, command)
    return kubectl.check(live, f"`{tool} get`")


def key_of(obj: dict[str, Any]) -> tuple[str, str, str]:  # (kind, namespace or "", name)
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


def compare(declared: Any, live: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, declared, live) of each declared leaf the cluster holds otherwise; (path, None, live) of each added entry."""
    if isinstance(declared, dict):
        if not isinstance(live, dict):
            return [(path, declared, live)] if declared else []
        keys = [k for k in declared if not (path == "metadata.annotations" and k in IGNORED_ANNOTATIONS)]
        return [c for k in keys for c in compare(declared[k], live.get(k), f"{path}.{k}" if path else k)]
    if isinstance(declared, list):
        if declared and isinstance(live, list) and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in declared):
            # By name; an entry whose name is no text (no API server returns it) is shown as one added by hand.
            by_name = {
                n if isinstance(n := i.get("name"), str) else json.dumps(n, sort_keys=True)[:60]: i for i in live if isinstance(i, dict)
            }
            out = [c for item in declared for c in compare(item, by_name.get(item["name"]), f"{path}[{item['name']}]")]
            ours = {i["name"] for i in declared}
            return out + [(f"{path}[{n}]", None, v) for n, v in by_name.items() if n not in ours]
        if not isinstance(live, list) or len(live) != len(declared):
            return [(path, declared, live)]
        return [c for i, (d, lv) in enumerate(zip(declared, live, strict=True)) for c in compare(d, lv, f"{path}[{i}]")]
    return [] if (live is None and declared in ({}, [], "", None)) or _same(declared, live) else [(path, declared, live)]


def _words(kind: str, path: str) -> str:
    """A path's name in the config where it has one, else the path."""
    if kind in ("StatefulSet", "Job") and path == "spec.replicas":
        return "replicas"
    if ".env[" in path:
        var = path.split(".env[", 1)[1].split("]", 1)[0]
        return f"env {var}" + ("" if path.endswith("]") or path.endswith(".value") else path.split("]", 1)[1])
    if path.endswith(".image"):
        return "image"
    for prefix, word in (("metadata.labels.", "label"), ("metadata.annotations.", "annotation")):
        if path.startswith(prefix):
            return f"{word} {path.removeprefix(prefix)}"
    return path


def _entry(value: Any) -> str:
    """An entry added to a named list (escaped): `HAND=1` for an env variable, else the entry."""
    if isinstance(value, dict) and set(value) == {"name", "value"}:
        return _shown(f"{value['name']}={value['value'] if isinstance(value['value'], str) else json.dumps(value['value'])}")
    return _shown(value)


def _shown(value: Any) -> str:
    """A value as the report shows it: one escaped line of at most 120 characters."""
    if value is None:
        return "nothing"
    return kubectl.cut(json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value), 120)


def drift(config: ClusterConfig, declared: list[Declared], live: list[dict[str, Any]]) -> list[Drift]:
    """Every difference between the declared objects (not the patches) and the cluster's, in the stack's order."""
    on_cluster = {key_of(o): o for o in live if isinstance(o, dict)}
    out: list[Drift] = []
    for obj, source in ((d.object, d.source) for d in declared if not d.patch):
        label = ref(obj)
        line = provenance.shown(provenance.origin(config, source)) if source else ""
        where = (located(source, config) if source else label) + (f" ({line})" if line else "")
        if (current := on_cluster.get(key_of(obj))) is None:
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
    if not found:
        return f"{config.name}: no drift: the cluster holds what the stack declares\n"
    lines = [f"{config.name}: {len(found)} difference(s) between the cluster and the stack"]
    lines += [escaped(f"  {f.where}: {f.what} [{f.obj}]") for f in found]
    lines += [
        "",
        f"To restore what the stack declares: {shlex.join(['pulumi', 'up', '--refresh', '-s', stack_file])}. A hand edit that "
        'should stay is a config edit (state="stopped", fewer nodes, the value in the config): docs/lifecycle.md "Drift".',
    ]
    return "\n".join(lines) + "\n"


def declared_for(config: ClusterConfig, tier: str) -> list[Declared]:
    return [d for d in layout(config, tier) if not d.patch]
