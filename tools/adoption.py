"""Bringing a cluster set up by hand under Pulumi (`import_plan`: a `pulumi import --file` plan of the `hand_made`
objects under their parent components; `adopt_diff`: what adopting a live object changes; `operator_deletions`: the
hand-made NADs the SR-IOV operator's would overwrite), and who may run which part (`rights_report`)."""

import shlex
from collections.abc import Callable
from typing import Any

import yaml

import stacks
from components.kube import NAD_KIND, PROVIDER_TOKEN, logical_name, provider_version, token
from components.networks import operator_namespaces
from components.prerequisites import requirements
from components.program import layout
from components.tiers import PLATFORM, PROJECT, can_i, can_i_read, tier_of
from config.kube import operator_network_name
from config.stack import ClusterConfig
from config.text import escaped
from policy.core import ref


def _handle(component_type: str, name: str) -> str:  # unique in the import file, distinct from every object's
    return f"{component_type.rsplit(':', 1)[-1]} {name}"


def _ref(obj: dict[str, Any]) -> tuple[str, str | None, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace"), meta["name"]


def import_entries(config: ClusterConfig, tier: str = "all") -> list[dict[str, Any]]:
    """Every object the tier declares (not the patches: not the stack's objects), as an import entry, marked hand-made."""
    made = {(h.kind, h.namespace, h.name) for h in config.hand_made}
    out = []
    for d in (d for d in layout(config, tier) if not d.patch):
        name, kind, component = logical_name(d.object), d.object["kind"], (d.component_type, d.component_name)
        entry = {"type": token(d.object), "name": f"{kind} {name}", "logicalName": name, "id": name, "parent": _handle(*component)}
        out.append({**entry, "component": component, "kind": kind, "hand_made": _ref(d.object) in made})
    return out


def import_plan(config: ClusterConfig, stack: str, tier: str = "all", kinds: list[str] | None = None) -> dict[str, Any]:
    """The import file: the tier's hand-made objects (of `kinds`), their parent components and the stack's provider."""
    if wanted := set(kinds or ()):
        known = {d.object["kind"] for d in layout(config, "all")}
        if unknown := sorted(wanted - known):
            raise stacks.ConfigError(f"--only: the stack declares no {', '.join(unknown)} (it declares {', '.join(sorted(known))})")
    entries = [e for e in import_entries(config, tier) if e["hand_made"] and (not wanted or e["kind"] in wanted)]
    resources: list[dict[str, Any]] = [
        {"type": ctype, "name": _handle(ctype, cname), "logicalName": cname, "component": True}
        for ctype, cname in sorted({e["component"] for e in entries})
    ]
    keys = ("type", "name", "logicalName", "id", "parent")
    resources += [{**{k: e[k] for k in keys}, "provider": "kubernetes", "version": provider_version()} for e in entries]
    provider = f"urn:pulumi:{stack}::{stacks.PROJECT}::{PROVIDER_TOKEN}::{config.name}"
    return {"nameTable": {"kubernetes": provider}, "resources": resources}


def operator_replaces(config: ClusterConfig, kind: str, namespace: str | None, name: str) -> str | None:
    """Why a NAD the SR-IOV operator would overwrite (nad_mode operator) must go first, with the command, or None."""
    fabric = config.fabric
    if kind != NAD_KIND or fabric is None or namespace not in operator_namespaces(config):
        return None
    delete = f"`{shlex.join(['oc', 'delete', 'net-attach-def', name, '-n', namespace])}`"
    for a in fabric.attachments:
        made = operator_network_name(namespace, a.network)
        if name == made:
            return (
                f"the SR-IOV operator makes {namespace}/{made} from the platform tier's SriovNetwork {fabric.operator_namespace}/{made} "
                f"and overwrites a NAD of that name in place: delete this one first ({delete})"
            )
        if name == a.network:
            return (
                f"a copy of {a.network}: in nad_mode operator the pods attach {namespace}/{made}, which the SR-IOV operator makes "
                f"and keeps; nothing keeps this copy in step any more: delete it first ({delete}), once no pod outside the "
                "stack attaches it"
            )
    return None


def operator_deletions(config: ClusterConfig) -> list[str]:
    found = [(h, operator_replaces(config, h.kind, h.namespace, h.name)) for h in config.hand_made]
    return [f"{h.kind} {h.namespace}/{h.name}: {why}" for h, why in found if why]


# What the API server or another controller sets: never the stack's to declare, never a change.
SERVER_SET = frozenset(
    {"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink", "ownerReferences", "deletionTimestamp"}
)
SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "openshift.io/", "include.release.openshift.io/")


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    """{path: value}; lists stay whole (adoption replaces them whole)."""
    if isinstance(value, dict):
        out = {leaf: v for k, inner in value.items() for leaf, v in _leaves(inner, f"{path}.{k}" if path else str(k)).items()}
        return out if out or not path else {path: {}}
    return {path: value}


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_SET}
    if annotations := {k: v for k, v in (meta.pop("annotations", None) or {}).items() if not k.startswith(SERVER_ANNOTATIONS)}:
        meta["annotations"] = annotations
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}


# Lists that restrict as they grow, flags as they turn true (other booleans restrict turning false, lists shrinking).
RESTRICTING_LISTS = ("requiredDropCapabilities", "forbiddenSysctls")
RESTRICTING_FLAGS = ("readOnlyRootFilesystem",)


class _OneLine(yaml.SafeDumper):
    """A string a line cannot show (a newline, an escape) double-quoted, where YAML escapes it."""


_OneLine.add_representer(
    str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style=None if value.isprintable() else '"')
)


def _yaml(value: Any) -> str:
    """A value as YAML's flow style writes it (null, false, 'true', [a, b]; never a Python repr), one escaped line."""
    text = yaml.dump(value, Dumper=_OneLine, default_flow_style=True, allow_unicode=True, sort_keys=False, width=1_000_000)
    return escaped(text.removesuffix("\n").removesuffix("\n...").strip())


def _narrowing(path: str, old: Any, new: Any) -> str | None:
    leaf = path.rsplit(".", 1)[-1]
    if isinstance(new, list) and leaf in RESTRICTING_LISTS:
        added = sorted(set(map(str, new)) - set(map(str, old if isinstance(old, list) else [])))
        return f"ADDS to {path}: {', '.join(added)}" if added else None
    if isinstance(old, list) and isinstance(new, list):
        removed = sorted(set(map(str, old)) - set(map(str, new)))
        return f"REMOVES from {path}: {', '.join(removed)} (declared: {_yaml(new)})" if removed else None
    if leaf in RESTRICTING_FLAGS:
        return f"REQUIRES {path}: {_yaml(old)} -> {_yaml(new)}" if new is True and old is not True else None
    if old is True and new is False:
        return f"REMOVES {path}: true -> false"
    if leaf == "type" and old == "RunAsAny" and new != "RunAsAny":
        return f"RESTRICTS {path}: RunAsAny -> {_yaml(new)}"
    return None


# What the API server takes a field to be when unset: declaring the other value changes it (where the stack declares it).
API_DEFAULTS: dict[str, dict[str, Any]] = {
    "ServiceAccount": {"automountServiceAccountToken": True},
    "SecurityContextConstraints": {"allowPrivilegeEscalation": True, "readOnlyRootFilesystem": False, "requiredDropCapabilities": []},
    "PersistentVolumeClaim": {"spec.volumeMode": "Filesystem"},
    "Service": {"spec.type": "ClusterIP", "spec.sessionAffinity": "None", "spec.publishNotReadyAddresses": False},
    "StatefulSet": {"spec.replicas": 1, "spec.podManagementPolicy": "OrderedReady", "spec.revisionHistoryLimit": 10},
    "Job": {"spec.backoffLimit": 6, "spec.completions": 1, "spec.parallelism": 1},
}
DEFAULTED = " (not set on the live object: the API's default)"


def _is_object(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("metadata"), dict) and isinstance(value.get("kind"), str)


def _check_object(source: str, obj: dict[str, Any], where: str = "") -> None:
    """Refuse metadata the API server would not return (a name, a namespace, labels and annotations of text)."""

    def shown(value: Any) -> str:
        text = _yaml(value)
        return text if len(text) <= 80 else text[:80] + "..."

    meta = obj["metadata"]
    name, namespace = meta.get("name"), meta.get("namespace")
    maps = {key: meta.get(key) or {} for key in ("labels", "annotations")}
    bad = [key for key, m in maps.items() if not isinstance(m, dict) or not all(isinstance(v, str) for v in m.values())]
    if not isinstance(name, str) or not name:
        problem = f"metadata.name is {shown(name)}, not a name"
    elif namespace is not None and (not isinstance(namespace, str) or not namespace):
        problem = f"metadata.namespace is {shown(namespace)}, not a namespace's name"
    elif bad:
        problem = f"metadata.{bad[0]} is {shown(meta[bad[0]])}, not a map of names to text"
    else:
        return
    named = escaped(f"{obj['kind']} {name}" if isinstance(name, str) and name else f"the {obj['kind']}")
    expected = "expected the output of `oc get KIND NAME -o yaml` as the cluster returns it"
    raise stacks.ConfigError(f"{source}: {where}{named}: {problem} ({expected})")


def adopt_diff(config: ClusterConfig, live: Any, source: str) -> tuple[str, bool]:
    """(report, whether adopting narrows the live object or any object of a List, typed or not)."""
    if isinstance(live, dict) and str(live.get("kind", "")).endswith("List") and isinstance(live.get("items"), list):
        return _adopt_diff_list(config, live["items"], source)
    if not _is_object(live):
        raise stacks.ConfigError(
            f"{source}: not a Kubernetes object (expected the output of `oc get KIND NAME -o yaml`, or of `oc get KIND -o yaml`: a List)"
        )
    _check_object(source, live)
    if (declared := _declared(config).get(_ref(live))) is None:
        if replaced := operator_replaces(config, *_ref(live)):
            return escaped(f"{ref(live)}: live ({source}): stack {config.name} does not adopt it: {replaced}") + "\n", True
        raise stacks.ConfigError(f"{source}: stack {config.name} declares no {escaped(ref(live))}: nothing would adopt it")
    lines, narrows = _diff_one(config, live, declared, source)
    return "\n".join(lines) + "\n", narrows


def _declared(config: ClusterConfig) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """What the stack declares (its patches too: a patch adopts the fields it sets; the first of a name wins)."""
    return {_ref(d.object): d.object for d in reversed(layout(config, "all"))}


def _adopt_diff_list(config: ClusterConfig, items: list[Any], source: str) -> tuple[str, bool]:
    """Each item of a List the stack declares, diffed as one object; the others named."""
    if (bad := next((i for i, item in enumerate(items) if not _is_object(item)), None)) is not None:
        raise stacks.ConfigError(f"{source}: items[{bad}] of the List is not a Kubernetes object (a kind and metadata)")
    for i, item in enumerate(items):
        _check_object(source, item, f"items[{i}] of the List, ")
    if not items:
        raise stacks.ConfigError(f"{source}: the List holds no items: nothing to adopt")
    declared = _declared(config)
    ours = [item for item in items if _ref(item) in declared]
    replaced = [(item, why) for item in items if _ref(item) not in declared and (why := operator_replaces(config, *_ref(item)))]
    others = [escaped(ref(item)) for item in items if _ref(item) not in declared and item not in [r for r, _ in replaced]]
    if not ours and not replaced:
        named = ", ".join(others)
        raise stacks.ConfigError(
            f"{source}: stack {config.name} declares none of the {len(items)} objects of the List: nothing would adopt them ({named})"
        )
    adopted = f"declares {len(ours)}, diffed one by one." if ours else "adopts none of them."
    lines = [f"{source}: a List of {len(items)} object(s); stack {config.name} {adopted}"]
    diffs = [_diff_one(config, item, declared[_ref(item)], source) for item in ours]
    lines += [line for one, _ in diffs for line in ("", *one)]
    if replaced:
        lines += ["", "Delete first:", *(f"  {ref(item)}: {why}" for item, why in replaced)]
    if others:
        lines += ["", f"Not declared by stack {config.name} (nothing adopts them; `pulumi up` leaves them as they are):"]
        lines += [f"  {label}" for label in others]
    return "\n".join(map(escaped, lines)) + "\n", bool(replaced) or any(narrows for _, narrows in diffs)


def _who_relies(kind: str, live: dict[str, Any]) -> list[str]:
    """Who loses what when adopting narrows an object of this kind, and how to find them (the caller ends the advice)."""
    if kind == "SecurityContextConstraints":
        return [
            "Pods or scripts that rely on what it takes away fail after the next `pulumi up` (e.g. a script that runs",
            "`ulimit -l unlimited` under `set -e` needs SYS_RESOURCE). Before adopting:",
            "find who relies on it (`oc get pods -A -o yaml | grep -B3 openshift.io/scc:`), move them to the stack's workloads, or",
        ]
    if kind == "ServiceAccount":
        meta = live["metadata"]
        columns = "custom-columns=POD:.metadata.name,SA:.spec.serviceAccountName"
        pods = shlex.join(["oc", "get", "pods", "-n", str(meta.get("namespace") or "NAMESPACE"), "-o", columns])
        return [
            "Pods that run as this service account and read its token (/var/run/secrets/kubernetes.io/serviceaccount: a client",
            "of the API server, `oc` in a pod) lose it: every pod created after the next `pulumi up` (a restart, a rollout)",
            f"starts without it. Before adopting: find them (`{pods} | {shlex.join(['grep', '-w', str(meta.get('name'))])}`),",
            "move them to the stack's workloads, or",
        ]
    return [
        f"Whatever relies on what this {kind} holds now loses it after the next `pulumi up`. Before adopting: find who",
        "relies on it, move them to the stack's workloads, or",
    ]


def _diff_one(config: ClusterConfig, live: dict[str, Any], declared: dict[str, Any], source: str) -> tuple[list[str], bool]:
    """The report on adopting one live object, and whether it narrows it."""
    kind = live["kind"]
    before, after = _leaves(_clean(live)), _leaves(declared)
    # A field the live object leaves out holds the API's default, where the stack declares it.
    defaulted = {path for path in API_DEFAULTS.get(kind, {}) if path in after and path not in before}
    before.update({path: API_DEFAULTS[kind][path] for path in defaulted})
    lines = [f"{ref(live)}: live ({source}) -> what stack {config.name} declares"]
    narrows: list[str] = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        unset = DEFAULTED if path in defaulted else ""
        if path not in after:
            lines.append(f"  = keeps {path}: {_yaml(old)} (not declared: it stays with the field manager that wrote it)")
        elif old == new:
            continue
        elif narrowing := _narrowing(path, old, new):
            narrows.append(path)
            lines.append(f"  - {narrowing}{unset}")
        elif path not in before:
            lines.append(f"  + sets {path}: {_yaml(new)}")
        else:
            lines.append(f"  ~ changes {path}: {_yaml(old)} -> {_yaml(new)}{unset}")
    if narrows:
        lines += [
            "",
            f"Adopting narrows this {kind}: {', '.join(narrows)}.",
            *_who_relies(kind, live),
            f"declare what they need in clusters/{config.name}.py. Server-side apply reports each field another manager owns as a",
            "conflict; `kubernetes:enablePatchForce` takes them over for one run (docs/adoption.md).",
        ]
    else:
        lines += ["", "Adopting takes nothing away from the live object."]
    # Each line may quote the live object (a key, a value, a name): escaped, so none can forge another line.
    return [escaped(line) for line in lines], bool(narrows)


def rights_report(config: ClusterConfig, tier: str = "all", answer: Callable[[str, str], str] | None = None) -> str:
    """Per tier, each `oc auth can-i` line once, after the objects that need it, then the reads; `answer`: --run's."""
    stack_files = {s.tier: s.name for s in stacks.pulumi_stacks() if s.cluster == config.name}
    lines = [
        f"{config.name}: who may declare what. Every line must answer yes: run them as yourself (oc login first),",
        f"or `python -m stacks rights {config.name} --run` runs each once and says its answer.",
    ]

    def shown(t: str, label: str, check: str) -> str:
        return f"  {label:<72} {check}" + (f"  -> {answer(t, check)}" if answer else "")

    declared = layout(config, tier)
    for t, who in ((PLATFORM, "cluster-admin"), (PROJECT, "admin of the stack's projects")):
        # Objects that need the same lines (a namespace's NADs) are one entry, named without their namespace.
        needs: dict[tuple[str, ...], list[str]] = {}
        for d in declared:
            if tier_of(d.object, config) == t:
                name = str(d.object["metadata"]["name"]) + (" (patch)" if d.patch else "")
                needs.setdefault(tuple(can_i(d.object, d.patch)), []).append(f"{d.object['kind']} {name}")
        if not needs:
            continue
        runs = stack_files.get(t) or stack_files.get("all")
        lines += ["", f"{t} tier ({who}; Pulumi stack {runs or 'none: add Pulumi.' + config.name + '-' + t + '.yaml'}):"]
        for checks, objects in needs.items():
            label = objects[0] + "".join(", " + o.split(" ", 1)[1] for o in objects[1:])
            lines += [shown(t, "" if i else label, check) for i, check in enumerate(checks)]
    if reads := requirements(config, tier):
        lines += ["", "reads (`pulumi preview` fails, naming the object, when one is missing or wrong):"]
        for r in reads:
            lines.append(shown("reads", r.kind + " " + r.object_id, can_i_read(r.kind, r.object_id, r.api_version)))
            lines.append(f"  {'':<72} if missing: {r.fix}")
    return "\n".join(lines) + "\n"
