"""Bringing a cluster that was set up by hand under Pulumi, and who may run which part.

- `import_plan`: a `pulumi import --file` plan for the objects the stack declares that exist already
  (the config's `hand_made`), each with its type token, its logical name, its id (NAMESPACE/NAME or
  NAME) and its parent component, so that after the import `pulumi preview` plans no create and no
  delete for them. The components are declared in the file (`component: true`, Pulumi CLI 3.94+) and
  the entries use `logicalName` (3.98+); the stack's explicit provider must exist in the state first
  (`pulumi up --target` its URN; README "Adopting what exists").
- `adopt_diff`: what adopting a live object (`oc get -o yaml`) changes, and whether it narrows it:
  rights the live object grants that the stack's declaration takes away. A List (`oc get scc -o yaml`)
  is diffed item by item; the items the stack does not declare are named. Values read as YAML.
- `operator_replaces` / `operator_deletions`: in nad_mode operator, the NADs made by hand in the stack's projects
  (the seeds' copies) conflict with what the SR-IOV operator makes there: each is named with the `oc delete` to
  run before the platform tier's `pulumi up` (import-plan prints them; adopt-diff reports a live one).
- `rights_report`: per object its tier and the `oc auth can-i` line that says whether you may
  declare it; per read, the line that says whether you may read it, and the fix when it is missing.

The parents come from `components.program.layout`, the declarative form of what `build` registers;
a test holds the two equal under the mock runtime.
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml

import stacks
from components.kube import NAD_KIND, logical_name, token
from components.networks import operator_namespaces
from components.prerequisites import requirements
from components.program import layout
from components.tiers import PLATFORM, PROJECT, can_i, can_i_read, tier_of
from config.kube import operator_network_name
from config.stack import ClusterConfig
from config.text import escaped

PROVIDER_TYPE = "pulumi:providers:kubernetes"


def provider_urn(stack: str, config: ClusterConfig) -> str:
    """The URN of the stack's explicit kubernetes provider (components/program.py names it after the cluster)."""
    return f"urn:pulumi:{stack}::{stacks.PROJECT}::{PROVIDER_TYPE}::{config.name}"


def _handle(component_type: str, name: str) -> str:
    """A component's handle in the import file: unique, and distinct from every object's handle."""
    return f"{component_type.rsplit(':', 1)[-1]} {name}"


def _ref(obj: dict[str, Any]) -> tuple[str, str | None, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace"), meta["name"]


def import_entries(config: ClusterConfig, tier: str = "all") -> list[dict[str, Any]]:
    """Every object the tier declares, as an import entry, marked hand-made or fresh. Patches are not
    imported (a patch is a change to an object the stack does not own)."""
    made = {(h.kind, h.namespace, h.name) for h in config.hand_made}
    out = []
    for d in layout(config, tier):
        if d.patch:
            continue
        obj = d.object
        out.append(
            {
                "type": token(obj),
                "name": f"{obj['kind']} {logical_name(obj)}",
                "logicalName": logical_name(obj),
                "id": logical_name(obj),
                "parent": _handle(d.component_type, d.component_name),
                "component": (d.component_type, d.component_name),
                "kind": obj["kind"],
                "hand_made": _ref(obj) in made,
            }
        )
    return out


def import_plan(config: ClusterConfig, stack: str, tier: str = "all", kinds: list[str] | None = None) -> dict[str, Any]:
    """The import file: the hand-made objects of the tier (optionally only some kinds), their parent
    components (created empty if they are not in the state yet) and the stack's provider."""
    wanted = set(kinds) if kinds else None
    if wanted:
        known = {d.object["kind"] for d in layout(config, "all")}
        unknown = sorted(wanted - known)
        if unknown:
            raise stacks.ConfigError(f"--only: the stack declares no {', '.join(unknown)} (it declares {', '.join(sorted(known))})")
    # Imported here: the plan is the one thing in this module that needs the SDK. `adopt-diff`, `rights`, `drift` and
    # `recover` (cli/cluster.py imports this module for them all) then start without it.
    from pulumi_kubernetes import _utilities

    version = _utilities.get_version()
    entries = [e for e in import_entries(config, tier) if e["hand_made"] and (wanted is None or e["kind"] in wanted)]
    components = sorted({e["component"] for e in entries})
    resources: list[dict[str, Any]] = [
        {"type": ctype, "name": _handle(ctype, cname), "logicalName": cname, "component": True} for ctype, cname in components
    ]
    for e in entries:
        resources.append(
            {
                "type": e["type"],
                "name": e["name"],
                "logicalName": e["logicalName"],
                "id": e["id"],
                "parent": e["parent"],
                "provider": "kubernetes",
                "version": version,
            }
        )
    return {"nameTable": {"kubernetes": provider_urn(stack, config)}, "resources": resources}


def operator_replaces(config: ClusterConfig, kind: str, namespace: str | None, name: str, served: list[str] | None = None) -> str | None:
    """Why a NAD in one of the stack's projects must go before the SR-IOV operator makes the project's networks
    (nad_mode operator), with the command; None for any other object. `served`: operator_namespaces, when known."""
    fabric = config.fabric
    if kind != NAD_KIND or fabric is None or namespace not in (operator_namespaces(config) if served is None else served):
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
    """`Kind NAMESPACE/NAME: why and how` for each hand-made NAD the operator's networks replace (nad_mode operator)."""
    served = operator_namespaces(config)
    found = [(h, operator_replaces(config, h.kind, h.namespace, h.name, served)) for h in config.hand_made]
    return [f"{h.kind} {h.namespace}/{h.name}: {why}" for h, why in found if why]


def plan_summary(plan: dict[str, Any]) -> str:
    objects = [r for r in plan["resources"] if not r.get("component")]
    return f"{len(objects)} object(s) to adopt under {len(plan['resources']) - len(objects)} component(s)"


def fresh_objects(config: ClusterConfig, tier: str = "all") -> list[str]:
    """What the stack creates itself (not hand-made): `Kind NAMESPACE/NAME`."""
    return [e["name"] for e in import_entries(config, tier) if not e["hand_made"]]


# --- adopt-diff ---------------------------------------------------------------------------------

# What the API server or another controller sets: never the stack's to declare, never a change.
SERVER_SET = frozenset(
    {"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink", "ownerReferences", "deletionTimestamp"}
)
SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "openshift.io/", "include.release.openshift.io/")


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    """Flatten an object to {path: value}; lists stay whole (adoption replaces them whole)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{path}.{k}" if path else str(k)))
        return out if out or not path else {path: {}}
    return {path: value}


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_SET}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(SERVER_ANNOTATIONS)}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}


# Fields whose additions restrict what pods may do (an SCC's required drops, forbidden sysctls), and the boolean
# that restricts when it turns true; every other `allow*` boolean restricts when it turns false, every other
# list when an item goes, and a strategy when it leaves RunAsAny.
RESTRICTING_LISTS = ("requiredDropCapabilities", "forbiddenSysctls")
RESTRICTING_FLAGS = ("readOnlyRootFilesystem",)


class _OneLine(yaml.SafeDumper):
    """Writes a string that holds a character a line cannot show (a newline, an escape) double-quoted, where YAML
    escapes it, instead of as a scalar of several lines."""


def _one_line_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=None if value.isprintable() else '"')


_OneLine.add_representer(str, _one_line_str)


def _yaml(value: Any) -> str:
    """A value as YAML writes it in flow style: null, false, 0, RunAsAny, 'true' (a string that would read as a
    boolean is quoted), [a, b], {k: v}; never a Python repr (None, False, ['a']). One line, escaped: the live object
    holds whatever its writer chose."""
    text = yaml.dump(value, Dumper=_OneLine, default_flow_style=True, allow_unicode=True, sort_keys=False, width=1_000_000)
    return escaped(text.removesuffix("\n").removesuffix("\n...").strip())


def _narrowing(path: str, old: Any, new: Any) -> str | None:
    """How adopting narrows a field, or None when it does not."""
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


# What the API server takes a field to be when the object does not set it: a live object read back without it has
# this value, so declaring the other one changes it (and may narrow it: a ServiceAccount's token mount, an SCC's
# privilege escalation). Used only where the stack declares the field; paths as _leaves writes them.
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


def _metadata_problem(obj: dict[str, Any]) -> str | None:
    """What makes an object's metadata one the API server would not return, or None: adopt-diff names objects by
    kind, namespace and name and reads labels and annotations as maps of text."""
    meta = obj["metadata"]
    name, namespace = meta.get("name"), meta.get("namespace")

    def shown(value: Any) -> str:
        text = _yaml(value)
        return text if len(text) <= 80 else text[:80] + "..."

    if not isinstance(name, str) or not name:
        return f"metadata.name is {shown(name)}, not a name"
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        return f"metadata.namespace is {shown(namespace)}, not a namespace's name"
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            return f"metadata.{key} is {shown(value)}, not a map of names to text"
    return None


def _object_error(source: str, obj: dict[str, Any], where: str = "") -> stacks.ConfigError | None:
    """The error for an object whose metadata is malformed, naming the file and the object; None when it is sound."""
    problem = _metadata_problem(obj)
    if problem is None:
        return None
    name = obj["metadata"].get("name")
    named = escaped(f"{obj['kind']} {name}" if isinstance(name, str) and name else f"the {obj['kind']}")
    return stacks.ConfigError(
        f"{source}: {where}{named}: {problem} (expected the output of `oc get KIND NAME -o yaml` as the cluster returns it)"
    )


def _is_list(value: Any) -> bool:
    """`oc get KIND -o yaml` (kind: List), or a typed list the API returns (SecurityContextConstraintsList)."""
    return isinstance(value, dict) and str(value.get("kind", "")).endswith("List") and isinstance(value.get("items"), list)


def _label(obj: dict[str, Any]) -> str:
    """`Kind NAMESPACE/NAME`, escaped (what a live file names it)."""
    ns, name = obj["metadata"].get("namespace"), obj["metadata"].get("name")
    return escaped(f"{obj['kind']} {ns}/{name}" if ns else f"{obj['kind']} {name}")


def adopt_diff(config: ClusterConfig, live: Any, source: str) -> tuple[str, bool]:
    """(report, whether adopting narrows the live object, or any object of a List)."""
    if _is_list(live):
        return _adopt_diff_list(config, live, source)
    if not _is_object(live):
        raise stacks.ConfigError(
            f"{source}: not a Kubernetes object (expected the output of `oc get KIND NAME -o yaml`, or of `oc get KIND -o yaml`: a List)"
        )
    bad = _object_error(source, live)
    if bad:
        raise bad
    declared = _declared(config).get(_ref(live))
    replaced = operator_replaces(config, *_ref(live))
    if declared is None and replaced:
        return escaped(f"{_label(live)}: live ({source}): stack {config.name} does not adopt it: {replaced}") + "\n", True
    if declared is None:
        raise stacks.ConfigError(f"{source}: stack {config.name} declares no {_label(live)}: nothing would adopt it")
    lines, narrows = _diff_one(config, live, declared, source)
    return "\n".join(lines) + "\n", narrows


def _declared(config: ClusterConfig) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """What the stack declares (its patches too: a patch adopts the fields it sets), by kind, namespace and name."""
    out: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    for d in layout(config, "all"):
        out.setdefault(_ref(d.object), d.object)
    return out


def _adopt_diff_list(config: ClusterConfig, live: dict[str, Any], source: str) -> tuple[str, bool]:
    """Each item of a List the stack declares, diffed as one object; the others named."""
    items = live["items"]
    bad = [i for i, item in enumerate(items) if not _is_object(item)]
    if bad:
        raise stacks.ConfigError(f"{source}: items[{bad[0]}] of the List is not a Kubernetes object (a kind and metadata)")
    for i, item in enumerate(items):
        error = _object_error(source, item, f"items[{i}] of the List, ")
        if error:
            raise error
    if not items:
        raise stacks.ConfigError(f"{source}: the List holds no items: nothing to adopt")
    declared = _declared(config)
    served = operator_namespaces(config)
    replaced = [(item, why) for item in items if _ref(item) not in declared and (why := operator_replaces(config, *_ref(item), served))]
    ours = [item for item in items if _ref(item) in declared]
    others = [_label(item) for item in items if _ref(item) not in declared and item not in [r for r, _ in replaced]]
    if not ours and replaced:
        lines = [f"{source}: a List of {len(items)} object(s); stack {config.name} adopts none of them.", "", "Delete first:"]
        lines += [f"  {_label(item)}: {why}" for item, why in replaced]
        if others:
            lines += ["", f"Not declared by stack {config.name} (nothing adopts them; `pulumi up` leaves them as they are):"]
            lines += [f"  {label}" for label in others]
        return "\n".join(map(escaped, lines)) + "\n", True
    if not ours:
        raise stacks.ConfigError(
            f"{source}: stack {config.name} declares none of the {len(items)} objects of the List: nothing would adopt them ("
            + ", ".join(others)
            + ")"
        )
    lines = [f"{source}: a List of {len(items)} object(s); stack {config.name} declares {len(ours)}, diffed one by one."]
    narrowing = False
    for item in ours:
        one, narrows = _diff_one(config, item, declared[_ref(item)], source)
        lines += ["", *one]
        narrowing = narrowing or narrows
    if replaced:
        lines += ["", "Delete first:", *(f"  {_label(item)}: {why}" for item, why in replaced)]
        narrowing = True
    if others:
        lines += ["", f"Not declared by stack {config.name} (nothing adopts them; `pulumi up` leaves them as they are):"]
        lines += [f"  {label}" for label in others]
    return "\n".join(map(escaped, lines)) + "\n", narrowing


def _who_relies(kind: str, live: dict[str, Any]) -> list[str]:
    """Who loses what when adopting narrows an object of this kind, and how to find them: the advice ends in
    "move them to the stack's workloads, or" (the caller's next line says what else)."""
    if kind == "SecurityContextConstraints":
        return [
            "Pods or scripts that rely on what it takes away fail after the next `pulumi up` (e.g. a script that runs",
            "`ulimit -l unlimited` under `set -e` needs SYS_RESOURCE). Before adopting:",
            "find who relies on it (`oc get pods -A -o yaml | grep -B3 openshift.io/scc:`), move them to the stack's workloads, or",
        ]
    if kind == "ServiceAccount":
        meta = live["metadata"]
        pods = shlex.join(
            [
                "oc",
                "get",
                "pods",
                "-n",
                str(meta.get("namespace") or "NAMESPACE"),
                "-o",
                "custom-columns=POD:.metadata.name,SA:.spec.serviceAccountName",
            ]
        )
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
    """The report on adopting one live object, and whether adopting narrows it."""
    kind = live["kind"]
    before, after = _leaves(_clean(live)), _leaves(declared)
    # A field the live object leaves out holds the API's default, where the stack declares it.
    defaulted = {path for path in API_DEFAULTS.get(kind, {}) if path in after and path not in before}
    before.update({path: API_DEFAULTS[kind][path] for path in defaulted})
    lines = [f"{_label(live)}: live ({source}) -> what stack {config.name} declares"]
    narrows: list[str] = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if path not in after:
            lines.append(f"  = keeps {path}: {_yaml(old)} (not declared: it stays with the field manager that wrote it)")
            continue
        if old == new:
            continue
        narrowing = _narrowing(path, old, new)
        unset = DEFAULTED if path in defaulted else ""
        if narrowing:
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


# --- rights ---------------------------------------------------------------------------------------


def rights_report(config: ClusterConfig, tier: str = "all") -> str:
    """Per tier, every object with the `oc auth can-i` line that checks you may declare it; then the reads."""
    stack_files = {s.tier: s.name for s in stacks.pulumi_stacks() if s.cluster == config.name}
    lines = [
        f"{config.name}: who may declare what. Run each line as yourself (oc login first); every one must answer yes.",
    ]
    declared = layout(config, tier)
    for t, who in ((PLATFORM, "cluster-admin"), (PROJECT, "admin of the stack's projects")):
        rows = [d for d in declared if tier_of(d.object, config) == t]
        if not rows:
            continue
        runs = stack_files.get(t) or stack_files.get("all")
        lines += ["", f"{t} tier ({who}; Pulumi stack {runs or 'none: add Pulumi.' + config.name + '-' + t + '.yaml'}):"]
        for d in rows:
            obj = d.object
            label = f"{obj['kind']} {logical_name(obj)}" + (" (patch)" if d.patch else "")
            for check in can_i(obj, d.patch):
                lines.append(f"  {label:<72} {check}")
                label = ""
    reads = requirements(config, tier)
    if reads:
        lines += ["", "reads (`pulumi preview` fails, naming the object, when one is missing or wrong):"]
        for r in reads:
            lines.append(f"  {r.kind + ' ' + r.object_id:<72} {can_i_read(r.kind, r.object_id)}")
            lines.append(f"  {'':<72} if missing: {r.fix}")
    return "\n".join(lines) + "\n"
