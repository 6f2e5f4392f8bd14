"""The whole stack: the API server's limits on its objects, hidden characters in its config, objects declared
twice, what a change leaves behind against the committed render (orphaned claims, hand-made objects no longer
declared), stacks that share a cluster, and acceptances that accept nothing.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from config import provenance
from config.errors import located
from config.kube import INSTANCE, PRIORITY_CLASS, QUEUE_NAME, SCC_USE_ROLE_PREFIX, ConfigPath, operator_network_name
from config.openshift import PLATFORM_NAMESPACES, SRIOV_OPERATOR_KINDS, SRIOV_OPERATOR_NAMESPACE, platform_namespace
from config.stack import HandMade
from config.values import OBJECT_MAX, is_label_value, qualified_name_problem
from policy.core import Finding, PodView, Stack, error, pod_view, ref, rule, warning

# The API server's limits on what an object carries (k8s.io/apimachinery ValidateAnnotations: TotalAnnotationSizeLimitB).
ANNOTATIONS_MAX = 256 * 1024


@rule(
    "api-limits",
    "Every rendered object passes the API server's own validation of what it carries: its annotations (a reason written "
    "into one, say) take at most 256 KiB in all, every label key is a qualified name and every label value at most 63 "
    "characters of the label grammar, and the whole object fits etcd's request limit (1.5 MiB). Otherwise `pulumi up` "
    "stops half-way, on the first object refused.",
)
def api_limits(stack: Stack) -> Iterator[Finding]:
    for obj, shown in [*((o, ref(o)) for o in stack.objects), *((p, ref(p) + " (patch)") for p in stack.patches)]:
        pod = pod_view(obj)
        metas = [("metadata", obj.get("metadata") or {})] + ([(pod.at("metadata"), pod.meta)] if pod and pod.base else [])
        for where, meta in metas:
            annotations = meta.get("annotations") or {}
            size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
            if size > ANNOTATIONS_MAX:
                yield error(
                    shown,
                    f"{where}.annotations",
                    f"its annotations take {size} bytes, over the {ANNOTATIONS_MAX} the API server takes (the object is refused)",
                    "shorten the text the config writes into it (a reason, a description): keep long text in the stack's notes",
                )
            for key, value in (meta.get("labels") or {}).items():
                problem = qualified_name_problem(str(key))
                if not problem and not is_label_value(str(value)):
                    problem = f"its value {str(value)[:80]!r} is not a label value"
                if problem:
                    yield error(
                        shown,
                        f"{where}.labels[{key}]",
                        f"the label {str(key)[:80]!r} is refused by the API server: {problem}",
                        "a label key is [DNS subdomain/]name with a name of at most 63 characters, a value at most 63 letters, "
                        "digits, '-', '_' and '.', starting and ending with a letter or digit: name what the label comes from so",
                    )
        size = len(json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > OBJECT_MAX:
            yield error(
                shown,
                "",
                f"the object takes {size} bytes, over the {OBJECT_MAX} the API server takes in one request (etcd's limit)",
                "move long text (scripts, environment values) into a volume or several ConfigMaps",
            )


# Characters that make text display otherwise than it reads to a program (Trojan Source, CVE-2021-42574): the bidi
# embeddings and overrides (U+202A..U+202E) and isolates (U+2066..U+2069), and the zero-width ones.
HIDDEN = frozenset([*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"])
_HIDDEN_PATTERN = re.compile("[" + "".join(sorted(HIDDEN)) + "]")


@rule(
    "hidden-characters",
    "No text of the config (a script, a Dockerfile, a command, an environment value, a name) holds a bidi override or "
    "isolate or a zero-width character: they make the text display otherwise than it runs (a warning, since text in a "
    "right-to-left language may need them).",
)
def hidden_characters(stack: Stack) -> Iterator[Finding]:
    dumped = stack.config.model_dump()
    # One search of the whole text first: a stack without them (nearly every one) is not walked string by string.
    if not _HIDDEN_PATTERN.search(json.dumps(dumped, ensure_ascii=False)):
        return
    for path, text in _texts(dumped, ()):
        found = sorted({c for c in text if c in HIDDEN})
        if not found:
            continue
        first = min(text.index(c) for c in found)
        names = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, '')}".strip() for c in found)
        yield warning(
            f"Stack {stack.config.name}",
            located(path, stack.config),
            f"the text holds {names} (first at character {first + 1}): it displays otherwise than it runs, so a reviewer "
            "does not see what it does",
            "retype the text without them (`grep -nP '[\\x{200B}-\\x{200D}\\x{202A}-\\x{202E}\\x{2060}\\x{2066}-\\x{2069}\\x{FEFF}]'` "
            "finds them); if they are meant (right-to-left text), accept the warning in accepted_warnings with the reason",
            config=path,
        )


def _texts(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string of a dumped config with its path (dict keys are names the model's grammars already restrict)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _texts(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _texts(v, (*path, i))


@rule(
    "platform-namespaces",
    "No object the stack declares is in a namespace of the platform (kube-*, openshift, openshift-*, default) or in the "
    "SR-IOV operator's source namespace: what a stack declares it owns, and `pulumi destroy` deletes it. The one exception: "
    "SriovNetworks and SriovNetworkNodePolicies, which go to fabric.operator_namespace (the operator reconciles them only "
    "there), and only they go there.",
)
def platform_namespaces(stack: Stack) -> Iterator[Finding]:
    fabric = stack.config.fabric
    source = fabric.nad_source_namespace if fabric else None
    operator = fabric.operator_namespace if fabric else None
    for o in stack.objects:
        ns = (o.get("metadata") or {}).get("namespace")
        if o.get("kind") in SRIOV_OPERATOR_KINDS:
            if ns != operator:
                yield error(
                    ref(o),
                    "metadata.namespace",
                    f"the SR-IOV operator reconciles only the {o.get('kind')}s of its own namespace "
                    f"({operator or SRIOV_OPERATOR_NAMESPACE}): one in {ns!r} is never acted on",
                    "declare it in fabric.operator_namespace",
                )
            continue
        if ns and ns == operator:
            yield error(
                ref(o),
                "metadata.namespace",
                f"{ns!r} is the SR-IOV operator's namespace (fabric.operator_namespace): only SriovNetworks and "
                "SriovNetworkNodePolicies go there; the stack would own anything else there, beside the cluster admin's",
                "declare the object in one of the stack's own projects",
            )
            continue
        if not ns or not (platform_namespace(ns) or ns == source):
            continue
        yield error(
            ref(o),
            "metadata.namespace",
            f"{ns!r} is a namespace of the platform ({', '.join(PLATFORM_NAMESPACES)}) or holds the SR-IOV operator's NADs: the "
            "stack would own the object there, and `pulumi destroy` would delete it from under the cluster. Only SriovNetworks "
            f"and SriovNetworkNodePolicies go to the operator's namespace ({operator or SRIOV_OPERATOR_NAMESPACE})",
            "declare the object in one of the stack's own projects",
        )


@rule(
    "unique-objects",
    "No object is declared twice: `pulumi up` refuses a program with two resources of one type and "
    "name, and the API server keeps only one of two objects with one name.",
)
def unique_objects(stack: Stack) -> Iterator[Finding]:
    seen: dict[tuple[Any, ...], list[str]] = {}
    for o in stack.objects:
        meta = o.get("metadata") or {}
        key = (o.get("apiVersion"), o.get("kind"), meta.get("namespace"), meta.get("name"))
        # The source of a derived object is its workload's instance label (NAME-PORT Routes, NAME-dev Services, ...).
        seen.setdefault(key, []).append(str((meta.get("labels") or {}).get(INSTANCE) or "the stack"))
    for (_, kind, ns, name), sources in sorted(seen.items(), key=str):
        if len(sources) > 1:
            yield error(
                f"{kind} {ns}/{name}" if ns else f"{kind} {name}",
                "metadata.name",
                f"declared {len(sources)} times (from {', '.join(sources)}): `pulumi up` stops with a duplicate URN",
                "give each workload, port, volume and script a name whose derived names (NAME-PORT, NAME-headless, "
                "VOLUME-WORKLOAD-ORDINAL) are unique in its namespace",
            )


@rule(
    "orphaned-claims",
    "A change that would detach a StatefulSet's per-pod claims (renaming the workload, its volume, "
    "or moving it) is flagged: the old claims stay with their data, unused, and the pods start on new, empty ones.",
)
def orphaned_claims(stack: Stack) -> Iterator[Finding]:
    if not stack.previous:
        return
    before: dict[str, str] = {}
    for name, w in (stack.previous.get("workloads") or {}).items():
        for claim in w.get("per_pod_claims") or []:
            before[claim] = name
    now = {c for p in stack.pods() for c in _claims_of(p, stack.pods_started(p))}
    lost = sorted(c for c in before if c not in now and _ordinal_kept(c, before[c], stack))
    by_workload: dict[str, list[str]] = {}
    for c in lost:
        by_workload.setdefault(before[c], []).append(c)
    for name, claims in sorted(by_workload.items()):
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
    """The config entry whose change left a workload's claims unmounted, and how, as far as the config tells: the workload
    itself where it is still there (moved, or its volume renamed), else the workload of its namespace whose switch to TCP
    dropped it as a TCP variant (named like its source). None for a workload renamed or removed: no entry is left."""
    entries = stack.config.located_workloads()
    for path, w in entries:
        if w.name == name:
            return path, ""
    was = ((stack.previous or {}).get("workloads") or {}).get(name) or {}
    if was.get("mode") != "tcp":
        return None, ""  # not a TCP variant: renamed or removed
    rdma_before = set(_was(stack, str(was.get("namespace")), "mode", "rdma"))
    switched = [(p, w) for p, w in entries if w.name in rdma_before and w.transport == "tcp" and not w.tcp_variants]
    switched.sort(key=lambda pw: not name.startswith(pw[1].name + "-"))  # its source first: variants are named after it
    if switched and (len(switched) == 1 or name.startswith(switched[0][1].name + "-")):
        path, w = switched[0]
        return (*path, "transport"), f" (the TCP switch of {w.name!r}, which drops its tcp_variants)"
    return None, ""


def _claims_of(pod: PodView, pods: int) -> list[str]:
    """The per-pod claims of a StatefulSet's `pods` pods (they exist whether it runs or is stopped)."""
    if pod.owner.get("kind") != "StatefulSet":
        return []
    templates = (pod.owner.get("spec") or {}).get("volumeClaimTemplates") or []
    return [f"{pod.namespace}/{t['metadata']['name']}-{pod.name}-{r}" for t in templates for r in range(pods)]


def _ordinal_kept(claim: str, workload: str, stack: Stack) -> bool:
    """A claim is orphaned by a rename or a move, not by scaling the same workload down (the
    retention policy keeps those, and scaling up again reattaches them)."""
    for pod in stack.pods():
        if pod.owner.get("kind") == "StatefulSet" and pod.name == workload:
            prefix = [
                f"{pod.namespace}/{t['metadata']['name']}-{pod.name}-"
                for t in (pod.owner.get("spec") or {}).get("volumeClaimTemplates") or []
            ]
            if any(claim.startswith(p) for p in prefix):
                return False
    return True


@rule(
    "hand-made",
    "Every object the stack lists as made by hand (hand_made) is one it declares, so the import plan adopts what is really there.",
)
def hand_made(stack: Stack) -> Iterator[Finding]:
    """The finding names the line of the HandMade(...) call in the stack module where it is known (a stack built in
    Python), says which change of the config left the object undeclared (a workload's switch to TCP, a namespace
    without RDMA pods, ...), and gives a fix that fits a list comprehension, as the committed stacks write them."""
    declared = {(o.get("kind"), (o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")) for o in stack.objects}
    entries: list[HandMade] = list(getattr(stack.config, "hand_made", []) or [])
    origins = [provenance.call_line(stack.config, ("hand_made", i)) for i in range(len(entries))]
    missing = {i for i, h in enumerate(entries) if (h.kind, h.namespace, h.name) not in declared}
    served = [i for i in sorted(missing) if _served_by_operator(stack, entries[i])]
    if len(served) > 1:  # one cause (nad_mode operator), many copies: one finding listing them, not one per copy
        yield _served_copies(stack, [entries[i] for i in served], [origins[i] for i in served])
        missing -= set(served)
    for i in sorted(missing):
        h, origin = entries[i], origins[i]
        where = f"{h.namespace}/{h.name}" if h.namespace else h.name
        at = _shown(origin)
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
    """A hand-made NAD copy of a project whose NADs the SR-IOV operator now makes (fabric.nad_mode operator)."""
    c, fabric = stack.config, stack.config.fabric
    return (
        h.kind == "NetworkAttachmentDefinition" and bool(h.namespace) and h.namespace in c.namespaces and fabric is not None
        and fabric.device_access == "sriov" and fabric.nad_mode == "operator" and h.name in {a.network for a in fabric.attachments}
        and h.namespace in {w.namespace for w in c.pod_specs() if w.transport == "rdma"}
    )  # fmt: skip


def _served_copies(stack: Stack, copies: list[HandMade], origins: list[tuple[str, int] | None]) -> Finding:
    """The hand-made NAD copies nad_mode operator replaces, as one finding at fabric.nad_mode: the objects listed, one
    `oc delete` per namespace."""
    by_ns: dict[str, list[str]] = {}
    for h in copies:
        by_ns.setdefault(str(h.namespace), []).append(h.name)
    deletes = "; ".join(f"`oc delete net-attach-def {' '.join(names)} -n {ns}`" for ns, names in sorted(by_ns.items()))
    lines = sorted({_shown(o) for o in origins if o is not None})
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


def _shown(origin: tuple[str, int] | None) -> str:
    """A source line as `clusters/NAME.py:N` (relative to the project when it is inside it)."""
    return provenance.shown(origin)


def _hand_made_fix(entries: list[HandMade], origins: list[tuple[str, int] | None], missing: set[int], i: int) -> str:
    h, origin = entries[i], origins[i]
    at = _shown(origin)
    if origin is None:
        return f"remove hand_made[{i}], or correct its kind, namespace or name"
    loop = [j for j, o in enumerate(origins) if o == origin]
    if len(loop) == 1:
        return f"remove the HandMade(...) at {at}, or correct its kind, namespace or name"
    # One call makes several entries: a comprehension (or a loop). Say what to leave out of what it iterates.
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
    """Why the stack does not declare a hand-made object, as far as its config says; and whether a workload's
    transport switch is the reason (a switch back would declare it again)."""
    c = stack.config
    ns = h.namespace
    if ns and ns not in c.namespaces:
        return f"{ns} is not one of the stack's namespaces ({', '.join(c.namespaces)})", False
    sec = c.security
    if h.kind == "NetworkAttachmentDefinition" and ns:
        fabric = c.fabric
        if fabric is None:
            return "the stack has no fabric, so no pod attaches an SR-IOV network", False
        if h.name not in {a.network for a in fabric.attachments}:
            return f"fabric.attachments names no network {h.name}", False
        served = fabric.device_access == "sriov" and fabric.nad_mode == "operator"
        if served and ns in {w.namespace for w in c.pod_specs() if w.transport == "rdma"}:
            made = f"{ns}/{operator_network_name(ns, h.name)}"
            return (
                f"fabric.nad_mode is operator: the SR-IOV operator makes {made} instead, from the platform tier's SriovNetwork. "
                f"Delete this copy (`oc delete net-attach-def {h.name} -n {ns}`) once no pod outside the stack uses it, and drop "
                "the entry",
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
    specs = [w for w in stack.config.pod_specs() if w.namespace == ns]
    tcp = sorted(w.name for w in specs if w.transport == "tcp")
    now = {w.name for w in stack.config.all_workloads()}
    was_rdma = _was(stack, ns, "mode", "rdma")
    switched = [n for n in was_rdma if n in tcp]
    if switched:
        return f"the TCP switch of {_names('workload', switched)} no longer needs {what} in namespace {ns} (no RDMA pod left there)", True
    gone = [n for n in was_rdma if n not in now]
    if gone:
        return f"{_names('workload', gone)}, the RDMA pods of namespace {ns} in the committed render, no longer exist", False
    if tcp:
        return f"no RDMA pod runs in namespace {ns}: {_names('workload', tcp)} use{'s' * (len(tcp) == 1)} transport tcp", True
    off = sorted(b.name for b in stack.config.bandwidth_checks if b.namespace == ns and b.transport == "rdma" and not b.enabled)
    if off:
        return f"no RDMA pod runs in namespace {ns}: {_names('bandwidth check', off)} {'is' if len(off) == 1 else 'are'} disabled", False
    return f"no workload or enabled bandwidth check runs in namespace {ns}", False


def _without_scc(stack: Stack, ns: str, scc: str) -> tuple[str, bool]:
    """Why no pod in `ns` runs under the stack's SCC any more (its use-grant is declared only where one does)."""
    specs = [w for w in stack.config.pod_specs() if w.namespace == ns]
    was = _was(stack, ns, "scc", scc)
    tcp = {w.name for w in specs if w.transport == "tcp"}
    switched = [n for n in was if n in tcp]
    if switched:
        return f"the TCP switch of {_names('workload', switched)} no longer needs the grant of SCC {scc} in namespace {ns}", True
    if specs:
        under = sorted({stack.config.scc_of(w) for w in specs})
        why = f" ({_names('workload', sorted(tcp))} use{'s' * (len(tcp) == 1)} transport tcp)" if tcp else ""
        return f"no pod in namespace {ns} runs under SCC {scc}: its pods run under {', '.join(under)}{why}", bool(tcp)
    return f"no workload or enabled bandwidth check runs in namespace {ns}", False


def cluster_host(api_host: str | None) -> str | None:
    """The host an api_host names, compared between stacks: without scheme, path, port, case and trailing dot
    (`https://API.example.org:6443/` and `api.example.org` are one API server); None when the stack names none."""
    host = (api_host or "").strip().lower().split("://", 1)[-1].split("/", 1)[0]
    if host.startswith("["):  # an IPv6 address, [::1]:6443
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".") or None


@rule(
    "shared-projects",
    "No two stacks of the project deploy to one API server (api_host), nor into one project on it: a copied stack "
    "module that still names the cluster and the projects it was copied from declares its objects over another "
    "team's, and each `pulumi up` (and `destroy`) acts on what it declares, whoever else declared it too.",
)
def shared_projects(stack: Stack) -> Iterator[Finding]:
    """Two stacks are on the same cluster when both name an api_host and it is the same host (`cluster_host`). A
    stack without api_host is compared with no other: the config alone cannot tell which cluster it reaches (its
    Pulumi stack file's kubernetes:context decides), and a project name alone proves nothing, since project names
    are per cluster: Barcelona and Cairo both deploy into a project named nccl-test, on two clusters, with two
    API servers. So a shared namespace warns only on the same cluster; a shared api_host warns whatever the
    namespaces (two stacks may share a cluster knowingly: accept the warning, with the reason)."""
    host = cluster_host(stack.config.api_host)
    if host is None:
        return
    name = stack.config.name
    for other in sorted(stack.others, key=lambda c: c.name):
        if other.name == name or cluster_host(other.api_host) != host:
            continue
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
        theirs = set(other.namespaces)
        for i, ns in enumerate(stack.config.namespaces):
            if ns in theirs:
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


@rule(
    "accepted-warnings",
    "Every warning a stack accepts (accepted_warnings) still matches a finding, and the value it names (an image) is still the "
    "one the warning is about, so acceptances do not outlive what they accepted.",
)
def accepted_warnings(stack: Stack) -> Iterator[Finding]:
    return iter(())  # `check` reports stale acceptances under this id


@rule(
    "queue-edits",
    "On a queued cluster, an edit Kueue's webhooks refuse never reaches `pulumi up` (it would stop there, half applied): "
    "a running StatefulSet resized from N to M pods (Kueue allows a scale to 0 and from 0 only), the queue of a running "
    "workload changed, added or removed (of a StatefulSet, removed at all), a priority added to a running workload or "
    "removed from one that exists. Compared with the committed render.",
)
def queue_edits(stack: Stack) -> Iterator[Finding]:
    before = (stack.previous or {}).get("workloads") or {}
    q = stack.config.queueing
    moved: list[str] = []  # the workloads whose queue this change moves: one cause (the queue), one finding
    stuck = False  # one of them a StatefulSet losing its queue, which Kueue refuses even when stopped
    change: tuple[Any, Any] = (None, None)
    for path, w in stack.config.located_workloads():
        was = before.get(w.name)
        if not isinstance(was, dict) or was.get("namespace") != w.namespace or was.get("kind") != w.kind:
            continue  # new, renamed or moved: a new object, which Kueue takes as it comes
        ran, runs = was.get("state") == "running", w.state == "running"
        if w.kind == "job" and not (ran and runs and was.get("object") == w.object_name):
            continue  # a stopped Job is not on the cluster; a new run is a new Job
        queue_was, queue_now = was.get("queue"), (q.local_queue if q else None)
        priority_was, priority_now = was.get("priority"), (w.priority if q else None)
        what = f"{w.kind} {w.name!r}"
        if queue_was and queue_now and ran and runs and w.kind == "statefulset" and was.get("replicas") != w.nodes:
            yield error(
                f"Workload {w.name}",
                "spec.replicas",
                f"the committed render runs {what} with {was.get('replicas')} pods and this change runs it with {w.nodes}: Kueue "
                "refuses to resize a queued StatefulSet other than to 0 and from 0 (its pods are admitted as one group)",
                f"stop it first (state: stopped, `pulumi up`), then start it with nodes: {w.nodes}: it waits in the queue again",
                config=(*path, "nodes"),
            )
        if queue_was != queue_now and (ran or (w.kind == "statefulset" and queue_was and not queue_now)):
            moved.append(f"{what}{' (running)' if ran else ' (stopped)'}")
            stuck = stuck or (not queue_now and w.kind == "statefulset")
            change = (queue_was, queue_now)
        if priority_was and not priority_now:
            yield error(
                f"Workload {w.name}",
                f'metadata.labels["{PRIORITY_CLASS}"]',
                f"this change removes priority {priority_was!r} from {what}: Kueue refuses to remove a workload's priority",
                "keep it, or name another of queueing.priority_classes",
                config=(*path, "priority"),
            )
        elif priority_now and not priority_was and ran and queue_was:
            yield error(
                f"Workload {w.name}",
                f'metadata.labels["{PRIORITY_CLASS}"]',
                f"this change gives the running {what} priority {priority_now!r}: Kueue refuses to add one to a running workload",
                "stop it first (state: stopped, `pulumi up`), then give it the priority",
                config=(*path, "priority"),
            )
    if moved:
        queue_was, queue_now = change
        if queue_was and queue_now:
            how = f"changes the queue from {queue_was!r} to {queue_now!r}"
        else:
            how = "takes the workloads out of their queue" if queue_was else f"puts the workloads in queue {queue_now!r}"
        fix = "stop them first (state: stopped, `pulumi up`), then change the queue"
        if stuck:
            fix += (
                "; Kueue refuses to take the queue off a StatefulSet even when stopped: remove such a workload from the stack "
                "(`pulumi up` deletes it; its claims stay), then add it back"
            )
        yield error(
            f"Stack {stack.config.name}",
            f'metadata.labels["{QUEUE_NAME}"]',
            f"this edit {how} of {', '.join(moved)}: Kueue refuses to change the queue of a running workload",
            fix,
            config=("queueing", "local_queue") if q and queue_was else ("queueing",),
        )
