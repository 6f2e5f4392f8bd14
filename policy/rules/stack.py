"""The whole stack: the API server's limits, hidden characters, objects declared twice, derived names that meet, what a
change leaves behind (orphaned claims, hand-made objects no longer declared), stacks that share a cluster."""

import json
import re
import unicodedata
from collections.abc import Iterator
from functools import partial
from typing import Any

from config import provenance
from config.errors import located
from config.kube import INSTANCE, SCC_USE_ROLE_PREFIX, ConfigPath, operator_network_name
from config.openshift import PLATFORM_NAMESPACES, SRIOV_OPERATOR_KINDS, SRIOV_OPERATOR_NAMESPACE, platform_namespace
from config.stack import HandMade
from config.values import OBJECT_MAX, is_label_value, qualified_name_problem
from policy.core import Finding, PodView, Stack, error, grouped, pod_view, ref, rule, warning

ANNOTATIONS_MAX = 256 * 1024  # the API server's TotalAnnotationSizeLimitB
CONFIG_MAP_MAX = 1000 * 1024  # a ConfigMap's data, with a margin below the API server's 1 MiB


@rule("api-limits", "every object passes the API server's limits on annotations, labels, ConfigMap data and size")
def api_limits(stack: Stack) -> Iterator[Finding]:
    too_large: set[ConfigPath] = set()  # the entries whose pods are too large: a TCP variant's are its source's
    for obj, shown in [*((o, ref(o)) for o in stack.objects), *((p, ref(p) + " (patch)") for p in stack.patches)]:
        pod = pod_view(obj)
        limit_error = partial(error, shown)
        metas = [("metadata", obj.get("metadata") or {})] + ([(pod.at("metadata"), pod.meta)] if pod else [])
        for where, meta in metas:
            size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in (meta.get("annotations") or {}).items())
            if size > ANNOTATIONS_MAX:
                yield limit_error(
                    f"{where}.annotations",
                    f"its annotations take {size} bytes, over the {ANNOTATIONS_MAX} the API server takes (the object is refused)",
                    "shorten the text the config writes into it (a reason, a description): keep long text in the stack's notes",
                )
            for key, value in (meta.get("labels") or {}).items():
                value_problem = "" if is_label_value(str(value)) else f"its value {str(value)[:80]!r} is not a label value"
                if problem := qualified_name_problem(str(key)) or value_problem:
                    yield limit_error(
                        f"{where}.labels[{key}]",
                        f"the label {str(key)[:80]!r} is refused by the API server: {problem}",
                        "a label key is [DNS subdomain/]name with a name of at most 63 characters, a value at most 63 letters, "
                        "digits, '-', '_' and '.', starting and ending with a letter or digit: name what the label comes from so",
                    )
        data = sum(len(k) + len(str(v).encode("utf-8", "surrogatepass")) for k, v in (obj.get("data") or {}).items())
        if obj.get("kind") == "ConfigMap" and data > CONFIG_MAP_MAX:
            yield limit_error(
                "data",
                f"{data} bytes of keys and files: the API server refuses a ConfigMap over 1 MiB of data (and etcd a request over 1.5 MiB)",
                "Split the files over several entries of scripts, or put large files on a volume",
                setting="files",
            )
            continue
        size = len(json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        entry = stack.entry_of(pod) if pod is not None else None
        if size > OBJECT_MAX and entry not in too_large:
            if entry is not None:
                too_large.add(entry)
            yield limit_error(
                "",
                f"the object takes {size} bytes, over the {OBJECT_MAX} the API server takes in one request (etcd's limit)",
                "move long text (scripts, environment values) into a volume or several ConfigMaps",
                config=(*entry, _longest_text(pod)) if entry and pod else None,
            )


def _longest_text(pod: PodView) -> str:
    """The field of a pod's workload most of its size comes from: args (LAUNCHER_ARGS) or env."""
    sizes = {"args": 0, "env": 0}
    for _, c in pod.containers():
        for e in c.get("env") or []:
            sizes["args" if e.get("name") == "LAUNCHER_ARGS" else "env"] += len(str(e.get("value") or ""))
    return max(sizes, key=lambda k: sizes[k])


# What displays otherwise than it runs (Trojan Source, CVE-2021-42574): bidi embeddings, overrides, isolates, zero-widths.
HIDDEN = frozenset([*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"])
_HIDDEN_PATTERN = re.compile("[" + "".join(sorted(HIDDEN)) + "]")
GREP = "[\\x{200B}-\\x{200D}\\x{202A}-\\x{202E}\\x{2060}\\x{2066}-\\x{2069}\\x{FEFF}]"  # grep -P's class of them

# Hidden characters in the config's text that runs are an error; in what people read (right-to-left text), a warning.
RUNS = [
    tuple(path.split("."))
    for path in (
        "workloads.args workloads.env workloads.working_dir workloads.deepspeed_hostfile bandwidth_checks.env defaults.nccl_env_rdma "
        "defaults.nccl_env_tcp defaults.tcp_socket_ifname scripts.files images.dockerfile fabric.attachments.cni_config"
    ).split()
]


@rule("hidden-characters", "no bidi override or zero-width character in the config's text (Trojan Source)")
def hidden_characters(stack: Stack) -> Iterator[Finding]:
    dumped = stack.config.model_dump()
    if not _HIDDEN_PATTERN.search(json.dumps(dumped, ensure_ascii=False)):
        return
    for path, text in _texts(dumped, ()):
        if not (found := sorted({c for c in text if c in HIDDEN})):
            continue
        first = min(text.index(c) for c in found)
        names = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, '')}".strip() for c in found)
        fields = tuple(p for p in path if isinstance(p, str))
        runs = any(fields[: len(r)] == r for r in RUNS)
        message = f"the text holds {names} (first at character {first + 1}): it displays otherwise than it " + (
            "runs, so a reviewer does not see what the pod runs" if runs else "reads, so a reviewer does not see what it says"
        )
        fix = f"retype the text without them (`grep -nP '{GREP}'` finds them); " + (
            "where one is meant, write it as an escape (Python's \\u202e, bash's $'\\u202e')"
            if runs
            else "if they are meant (right-to-left text), accept the warning in accepted_warnings with the reason"
        )
        yield (error if runs else warning)(f"Stack {stack.config.name}", located(path, stack.config), message, fix, config=path)


def _texts(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string of a dumped config with its path (the keys are names the model restricts)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict | list):
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            yield from _texts(v, (*path, k))


@rule("platform-namespaces", "no object in a platform namespace; only SR-IOV operator objects in its namespace")
def platform_namespaces(stack: Stack) -> Iterator[Finding]:
    fabric = stack.config.fabric
    source, operator = (fabric.nad_source_namespace, fabric.operator_namespace) if fabric else (None, None)
    for o in stack.objects:
        ns, fix = (o.get("metadata") or {}).get("namespace"), "declare the object in one of the stack's own projects"
        if o.get("kind") in SRIOV_OPERATOR_KINDS:
            if ns == operator:
                continue
            fix = "declare it in fabric.operator_namespace"
            message = (
                f"the SR-IOV operator reconciles only the {o.get('kind')}s of its own namespace "
                f"({operator or SRIOV_OPERATOR_NAMESPACE}): one in {ns!r} is never acted on"
            )
        elif ns and ns == operator:
            message = (
                f"{ns!r} is the SR-IOV operator's namespace (fabric.operator_namespace): only SriovNetworks and "
                "SriovNetworkNodePolicies go there; the stack would own anything else there, beside the cluster admin's"
            )
        elif ns and (platform_namespace(ns) or ns == source):
            message = (
                f"{ns!r} is a namespace of the platform ({', '.join(PLATFORM_NAMESPACES)}) or holds the SR-IOV operator's NADs: the "
                "stack would own the object there, and `pulumi destroy` would delete it from under the cluster. Only SriovNetworks "
                f"and SriovNetworkNodePolicies go to the operator's namespace ({operator or SRIOV_OPERATOR_NAMESPACE})"
            )
        else:
            continue
        yield error(ref(o), "metadata.namespace", message, fix)


@rule("unique-objects", "no object is declared twice (a duplicate URN)")
def unique_objects(stack: Stack) -> Iterator[Finding]:
    seen = grouped(
        ((o.get("apiVersion"), ref(o)), str(((o.get("metadata") or {}).get("labels") or {}).get(INSTANCE) or "the stack"))
        for o in stack.objects
    )
    for (_, obj), sources in sorted(seen.items(), key=str):
        if len(sources) > 1:
            yield error(
                obj,
                "metadata.name",
                f"declared {len(sources)} times (from {', '.join(sources)}): `pulumi up` stops with a duplicate URN",
                "give each workload, port, volume and script a name whose derived names (NAME-PORT, NAME-headless, "
                "VOLUME-WORKLOAD-ORDINAL) are unique in its namespace",
            )


@rule("derived-names", "no name the program derives (per-pod claims, Route hosts) meets another on the cluster")
def derived_names(stack: Stack) -> Iterator[Finding]:
    c = stack.config
    owners: dict[tuple[str, str, str], tuple[ConfigPath, str]] = {}  # (kind, namespace, name) -> the entry making it first
    reported: set[ConfigPath] = set()  # one finding per entry

    def own(kind: str, ns: str, name: str, where: ConfigPath, what: str, obj: str) -> Iterator[Finding]:
        first = owners.setdefault((kind, ns, name), (where, what))
        if first != (where, what) and where not in reported:
            reported.add(where)
            place = f" in namespace {ns!r}" if ns else ""
            yield error(
                obj,
                "metadata.name",
                f"{what} makes {kind} {name!r}{place}, and so does {first[1]} ({located(first[0], c)}): one object with two owners",
                "Rename one of them",
                config=where,
            )

    for i, v in enumerate(c.volumes):
        if v.shared or v.existing:
            yield from own(
                "claim", v.namespace, v.name, ("volumes", i, "name"), f"volume {v.name!r}", f"PersistentVolumeClaim {v.namespace}/{v.name}"
            )
    for path, w in c.located_workloads():
        src, label = path[:2], f"workload {w.name!r}"
        for k, port in enumerate(w.ports):
            if port.route:
                where = (*src, "ports", k, "name") if path == src else (*path, "name")
                route, what = f"{w.name}-{port.name}", f"port {port.name!r} of {label} (namespace {w.namespace})"
                yield from own("Route host", "", f"{route}-{w.namespace}", where, what, f"Route {w.namespace}/{route}")
        for k, m in enumerate(w.mounts if w.kind == "statefulset" else []):
            v = c.volume(w.namespace, m.volume)
            where = (*src, "mounts", k, "volume") if path == src else (*path, "name")
            for r in range(w.nodes) if not (v.shared or v.existing) else ():
                claim, what = f"{v.name}-{w.name}-{r}", f"the per-pod claim of {label} on volume {v.name!r}"
                yield from own("claim", w.namespace, claim, where, what, f"PersistentVolumeClaim {w.namespace}/{claim}")
    for i, f in enumerate(c.pvc_fixes):
        owner = owners.get(("claim", f.namespace, f.pvc))
        if owner is not None and not (owner[1] == f"volume {f.pvc!r}" and c.volume(f.namespace, f.pvc).existing):
            yield error(
                f"PersistentVolumeClaim {f.namespace}/{f.pvc} (patch)",
                "spec.storageClassName",
                f"claim {f.namespace}/{f.pvc} is created by this stack ({owner[1]}, {located(owner[0], c)}): a pvc_fixes patch is "
                "for a claim that exists without a storage class",
                "Set the volume's storage_class instead, and drop the patch",
                config=("pvc_fixes", i, "pvc"),
            )


@rule("orphaned-claims", "a change that detaches a StatefulSet's per-pod claims from its pods is flagged")
def orphaned_claims(stack: Stack) -> Iterator[Finding]:
    if not stack.previous:
        return
    before = {claim: name for name, w in (stack.previous.get("workloads") or {}).items() for claim in w.get("per_pod_claims") or []}
    now = {prefix + str(r) for p in stack.pods() for prefix in _claim_prefixes(p) for r in range(stack.pods_started(p))}
    # Orphaned by a rename or a move, not by scaling the same workload down (scaling up reattaches it).
    kept = {(p.name, prefix) for p in stack.pods() for prefix in _claim_prefixes(p)}
    lost = sorted(c for c in before if c not in now and not any(w == before[c] and c.startswith(prefix) for w, prefix in kept))
    for name, claims in sorted(grouped((before[c], c) for c in lost).items()):
        entry, because = _orphaned_by(stack, name)
        yield warning(
            f"Workload {name}",
            "name / mounts[].volume",
            f"the committed render gives {name!r} the per-pod claims {', '.join(claims)}; after this change{because} no pod "
            "mounts them: they keep their data but the pods start on new, empty claims",
            "keep the workload's and the volume's names (and namespace), or move the data into the new claims first "
            "(e.g. a pod that mounts both); delete the old claims by hand when they are no longer needed",
            config=entry,
            value=", ".join(claims),
        )


def _orphaned_by(stack: Stack, name: str) -> tuple[ConfigPath | None, str]:
    """The config entry whose change left a workload's claims unmounted, and how: the workload itself (moved, or its
    volume renamed), or the one whose switch to TCP dropped it as a TCP variant; None for one renamed or removed."""
    entries = stack.config.located_workloads()
    for path, w in entries:
        if w.name == name:
            return path, ""
    was = ((stack.previous or {}).get("workloads") or {}).get(name) or {}
    if was.get("mode") != "tcp":
        return None, ""  # not a TCP variant: renamed or removed
    rdma_before = set(_was(stack, str(was.get("namespace")), "mode", "rdma"))
    switched = [(p, w) for p, w in entries if w.name in rdma_before and not w.uses_rdma and not w.tcp_variants]
    switched.sort(key=lambda pw: not name.startswith(pw[1].name + "-"))  # its source first: variants are named after it
    if switched and (len(switched) == 1 or name.startswith(switched[0][1].name + "-")):
        path, w = switched[0]
        return (*path, "transport"), f" (the TCP switch of {w.name!r}, which drops its tcp_variants)"
    return None, ""


def _claim_prefixes(pod: PodView) -> list[str]:
    """`NAMESPACE/TEMPLATE-NAME-` of a StatefulSet's per-pod claims, less the ordinal (they exist whether it runs or is stopped)."""
    return [f"{pod.namespace}/{t['metadata']['name']}-{pod.name}-" for t in (pod.owner.get("spec") or {}).get("volumeClaimTemplates") or []]


@rule("hand-made", "every object listed as made by hand (hand_made) is one the stack declares")
def hand_made(stack: Stack) -> Iterator[Finding]:
    declared = {(o.get("kind"), (o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")) for o in stack.objects}
    entries = stack.config.hand_made
    origins = [provenance.call_line(stack.config, ("hand_made", i)) for i in range(len(entries))]
    missing = {i for i, h in enumerate(entries) if (h.kind, h.namespace, h.name) not in declared}
    served = [i for i in sorted(missing) if _served_by_operator(stack, entries[i])]
    if len(served) > 1:  # one cause (nad_mode operator), many copies: one finding listing them, not one per copy
        yield _served_copies(stack, [entries[i] for i in served], [origins[i] for i in served])
        missing -= set(served)
    for i in sorted(missing):
        h, at = entries[i], provenance.shown(origins[i])
        where = f"{h.namespace}/{h.name}" if h.namespace else h.name
        because, temporary = _undeclared_because(stack, h)
        listed = f"listed as made by hand at {at} (HandMade)" if at else "listed as made by hand (hand_made)"
        yield warning(
            f"{h.kind} {where}",
            f"hand_made[{i}]",
            f"{listed}, but the stack does not declare it: {because}. The import plan leaves it out, and Pulumi neither "
            "adopts nor deletes it",
            _hand_made_fix(entries, origins, missing, i)
            + (", or, if the switch is temporary, accept this warning in accepted_warnings with that reason" if temporary else ""),
            config=("hand_made", i),
        )


def _served_by_operator(stack: Stack, h: HandMade) -> bool:
    """A hand-made NAD copy of a project whose NADs the SR-IOV operator now makes."""
    fabric = stack.config.fabric  # nad_mode operator needs device_access sriov (the model)
    return (
        h.kind == "NetworkAttachmentDefinition" and fabric is not None and fabric.nad_mode == "operator"
        and h.name in {a.network for a in fabric.attachments} and h.namespace in stack.config.rdma_namespaces()
    )  # fmt: skip


def _served_copies(stack: Stack, copies: list[HandMade], origins: list[tuple[str, int] | None]) -> Finding:
    """The hand-made NAD copies nad_mode operator replaces, as one finding at fabric.nad_mode."""
    by_ns = grouped((str(h.namespace), h.name) for h in copies)
    deletes = "; ".join(f"`oc delete net-attach-def {' '.join(names)} -n {ns}`" for ns, names in sorted(by_ns.items()))
    lines = sorted({provenance.shown(o) for o in origins if o is not None})
    at = f" (the HandMade(...) at {', '.join(lines)})" if lines else ""
    return warning(
        f"Stack {stack.config.name}",
        "hand_made",
        f"{len(copies)} hand_made entries are NAD copies the stack no longer declares: with fabric.nad_mode operator the SR-IOV "
        "operator makes each project's NADs itself (PROJECT-NETWORK) from the platform tier's SriovNetworks. The import plan "
        "leaves the copies out, and Pulumi neither adopts nor deletes them",
        f"delete them once no pod outside the stack uses them ({deletes}), and drop the entries from hand_made{at}",
        config=("fabric", "nad_mode"),
    )


def _hand_made_fix(entries: list[HandMade], origins: list[tuple[str, int] | None], missing: set[int], i: int) -> str:
    h, origin = entries[i], origins[i]
    at = provenance.shown(origin)
    if origin is None:
        return f"remove hand_made[{i}], or correct its kind, namespace or name"
    loop = [j for j, o in enumerate(origins) if o == origin]
    if len(loop) == 1:
        return f"remove the HandMade(...) at {at}, or correct its kind, namespace or name"
    # One call makes several entries (a comprehension): say what to leave out of what it iterates.
    same_ns = [j for j in loop if entries[j].namespace == h.namespace]
    same_name = [j for j in loop if entries[j].name == h.name]
    if h.namespace and len({entries[j].namespace for j in loop}) > 1 and all(j in missing for j in same_ns):
        return (
            f"drop {h.namespace} from the namespaces the comprehension at {at} iterates (it makes {len(loop)} entries, "
            f"{len(same_ns)} of them in {h.namespace}, none declared)"
        )
    if len({entries[j].name for j in loop}) > 1 and all(j in missing for j in same_name):
        return f"drop what makes the name {h.name} from what the comprehension at {at} iterates (it makes {len(loop)} entries)"
    return (
        f"leave this one out of the comprehension at {at} (an `if` on its kind, namespace and name; it makes "
        f"{len(loop)} entries), or correct its kind, namespace or name"
    )


def _undeclared_because(stack: Stack, h: HandMade) -> tuple[str, bool]:
    """Why the stack does not declare a hand-made object; and whether a workload's transport switch is why."""
    c, ns = stack.config, h.namespace
    if ns and ns not in c.namespaces:
        return f"{ns} is not one of the stack's namespaces ({', '.join(c.namespaces)})", False
    sec = c.security
    if h.kind == "NetworkAttachmentDefinition" and ns:
        if (fabric := c.fabric) is None:
            return "the stack has no fabric, so no pod attaches an SR-IOV network", False
        if h.name not in {a.network for a in fabric.attachments}:
            return f"fabric.attachments names no network {h.name}", False
        if _served_by_operator(stack, h):
            made = f"{ns}/{operator_network_name(ns, h.name)}"
            return (
                f"fabric.nad_mode is operator: the SR-IOV operator makes {made} instead, from the platform tier's SriovNetwork. Delete "
                f"this copy (`oc delete net-attach-def {h.name} -n {ns}`) once no pod outside the stack uses it, and drop the entry",
                False,
            )
        if fabric.device_access != "sriov" or fabric.nad_mode != "copy":
            return f"fabric.nad_mode is {fabric.nad_mode} (device_access {fabric.device_access}): the stack makes no NAD copies", False
        return _without_rdma(stack, ns, "the NAD copies")
    scc = h.name.removeprefix(SCC_USE_ROLE_PREFIX)
    if h.kind == "SecurityContextConstraints" or (h.kind == "ClusterRole" and h.name.startswith(SCC_USE_ROLE_PREFIX)):
        if scc != sec.scc:
            return f"the stack's SCC is {sec.scc or 'none'} (security.scc), not {scc}", False
        if not sec.create:
            return f"security.create is false: the stack uses the existing SCC {scc} and declares neither it nor its use-role", False
    if h.kind == "RoleBinding" and h.name.startswith(SCC_USE_ROLE_PREFIX) and ns:
        if scc != sec.scc:
            return f"the stack grants its own SCC {sec.scc or '(none)'} (security.scc), not {scc}", False
        if not sec.grant:
            return "security.grant is false: the stack grants no SCC", False
        return _without_scc(stack, ns, scc)
    if h.kind == "ServiceAccount" and ns:
        return f"security.service_accounts lists no {h.name} in {ns}", False
    if h.kind == "PersistentVolumeClaim" and ns:
        return f"volumes has no volume {h.name} in {ns}", False
    return "nothing in its config renders this object (check its kind, namespace and name)", False


def _was(stack: Stack, ns: str, key: str, value: str) -> list[str]:
    """The workloads the committed render ran in `ns` with that output value (mode rdma, scc NAME)."""
    before = (stack.previous or {}).get("workloads") or {}
    return sorted(n for n, w in before.items() if isinstance(w, dict) and w.get("namespace") == ns and w.get(key) == value)


def _names(kind: str, names: list[str]) -> str:
    return f"{kind}{'s' * (len(names) != 1)} {', '.join(names)}"


def _without_rdma(stack: Stack, ns: str, what: str) -> tuple[str, bool]:
    """Why no pod in `ns` attaches the SR-IOV networks any more."""
    tcp = sorted(w.name for w in stack.config.pod_specs() if w.namespace == ns and not w.uses_rdma)
    now = {w.name for w in stack.config.all_workloads()}
    was_rdma = _was(stack, ns, "mode", "rdma")
    if switched := [n for n in was_rdma if n in tcp]:
        return f"the TCP switch of {_names('workload', switched)} no longer needs {what} in namespace {ns} (no RDMA pod left there)", True
    if gone := [n for n in was_rdma if n not in now]:
        return f"{_names('workload', gone)}, the RDMA pods of namespace {ns} in the committed render, no longer exist", False
    if tcp:
        return f"no RDMA pod runs in namespace {ns}: {_names('workload', tcp)} use{'s' * (len(tcp) == 1)} transport tcp", True
    if off := sorted(b.name for b in stack.config.bandwidth_checks if b.namespace == ns and b.uses_rdma and not b.enabled):
        return f"no RDMA pod runs in namespace {ns}: {_names('bandwidth check', off)} {'is' if len(off) == 1 else 'are'} disabled", False
    return f"no workload or enabled bandwidth check runs in namespace {ns}", False


def _without_scc(stack: Stack, ns: str, scc: str) -> tuple[str, bool]:
    """Why no pod in `ns` runs under the stack's SCC any more."""
    specs = [w for w in stack.config.pod_specs() if w.namespace == ns]
    tcp = {w.name for w in specs if not w.uses_rdma}
    if switched := [n for n in _was(stack, ns, "scc", scc) if n in tcp]:
        return f"the TCP switch of {_names('workload', switched)} no longer needs the grant of SCC {scc} in namespace {ns}", True
    if specs:
        under = sorted({stack.config.scc_of(w) for w in specs})
        why = f" ({_names('workload', sorted(tcp))} use{'s' * (len(tcp) == 1)} transport tcp)" if tcp else ""
        return f"no pod in namespace {ns} runs under SCC {scc}: its pods run under {', '.join(under)}{why}", bool(tcp)
    return f"no workload or enabled bandwidth check runs in namespace {ns}", False


def cluster_host(api_host: str | None) -> str | None:
    """The host an api_host names, without scheme, path, port, case and trailing dot; None when there is none."""
    host = (api_host or "").strip().lower().split("://", 1)[-1].split("/", 1)[0]
    if host.startswith("["):  # an IPv6 address, [::1]:6443
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".") or None


@rule("shared-projects", "no two stacks deploy to one API server, nor into one project on it")
def shared_projects(stack: Stack) -> Iterator[Finding]:
    # Project names are per cluster (Barcelona and Cairo both have an nccl-test): only one api_host means one cluster.
    if (host := cluster_host(stack.config.api_host)) is None:
        return
    name = stack.config.name
    for other in sorted((o for o in stack.others if cluster_host(o.api_host) == host), key=lambda c: c.name):
        yield warning(
            f"Stack {name}",
            "api_host",
            f"stack {other.name} deploys to the same API server ({host}): either this stack was copied from it and "
            "still names that cluster, or both share the cluster and must keep out of each other's projects",
            f"set api_host (and namespaces, node_sets, storage_classes, the Pulumi stack file's kubernetes:context: README "
            f"'Add a cluster') to this stack's own cluster; if both really deploy to {host}, accept the warning in "
            "accepted_warnings with the reason",
            config=("api_host",),
        )
        for i, ns in enumerate(stack.config.namespaces):
            if ns in other.namespaces:
                yield warning(
                    f"Namespace {ns}",
                    f"namespaces[{i}]",
                    f"stack {other.name} deploys into project {ns} on the same cluster ({host}) too: an object of one kind "
                    "and name there is one object for both stacks, so the second stack's `pulumi up` fails on AlreadyExists "
                    "(or, taking it over, both stacks own it), and either stack's destroy deletes it for both",
                    "deploy this stack into its own projects: change namespaces and every namespace= of its service "
                    "accounts, volumes, workloads, scripts, images, bandwidth checks, existing objects and hand_made entries",
                    config=("namespaces", i),
                )


@rule("accepted-warnings", "every accepted warning still matches a finding, about the value it names")
def accepted_warnings(stack: Stack) -> Iterator[Finding]:
    return iter(())  # `check` reports stale acceptances under this id
