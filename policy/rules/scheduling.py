"""Scheduling: GPU pods tolerate the GPU nodes' taints, keep off the control plane's nodes, and all running pods
fit at once on the nodes the stack counts on (the search is policy/placement.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from config.kube import GPU, HOSTNAME
from config.openshift import CONTROL_PLANE_ROLES
from policy.core import Finding, PodView, Stack, amount, error, rule, warning
from policy.placement import Group, place

_ANY_VALUE = ("Exists",)  # a toleration's value that matches any: no taint value is a tuple


def _tolerated(tolerations: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """What a pod's tolerations match, as (key, effect or None, value or _ANY_VALUE for Exists): built once per pod, so
    each taint is a lookup and the rule stays linear in tolerations and taints, not their product."""
    out = set()
    for t in tolerations:
        value = _ANY_VALUE if t.get("operator", "Equal") == "Exists" else t.get("value")
        out.add((t.get("key"), t.get("effect") or None, value))
    return out


def _tolerates(tolerated: set[tuple[Any, ...]], taint: Any) -> bool:
    # A toleration matches its key with any effect (none named) or the taint's, and any value (Exists) or the taint's.
    return any((taint.key, effect, value) in tolerated for effect in (None, taint.effect) for value in (_ANY_VALUE, taint.value))


@rule(
    "gpu-toleration",
    "Every GPU pod tolerates the taints the stack says its GPU nodes carry (gpu_tolerations), or it "
    "stays Pending forever (NERC's nvidia.com/gpu.product taint).",
)
def gpu_toleration(stack: Stack) -> Iterator[Finding]:
    taints = stack.config.gpu_tolerations
    for pod in stack.pods():
        if not any(amount(c.get("resources") or {}, "limits", GPU) for _, c in pod.containers()):
            continue
        tolerated = _tolerated(pod.spec.get("tolerations") or [])
        for t in taints:
            if not _tolerates(tolerated, t):
                yield error(
                    pod.ref,
                    pod.at("spec.tolerations"),
                    f"the GPU nodes are tainted {t.key}{'=' + t.value if t.value else ''}:{t.effect or '*'} and this GPU pod does "
                    "not tolerate it: it stays Pending",
                    "let the program add gpu_tolerations to every GPU pod (components/training.py scheduling)",
                    config=("gpu_tolerations",),
                )


@rule(
    "control-plane-nodes",
    "No GPU pod selects or tolerates the control plane's nodes (node-role.kubernetes.io/master, control-plane, arbiter, "
    "in a node selector, node affinity or toleration; a toleration without key and with operator Exists tolerates every "
    "taint, theirs too): a training pod there takes the CPU, memory and network the API server and etcd need.",
)
def control_plane_nodes(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    entries = {(w.namespace, w.name): path[:2] for path, w in config.located_workloads()}  # a variant's fields are its source's
    fix = (
        "remove it: GPU pods belong on the GPU nodes (node_sets, gpu_node_selector) and tolerate their taints by key "
        "(gpu_tolerations). On a compact cluster the control-plane nodes are workers too: select them by their GPU label"
    )
    for pod in stack.pods():
        if not _gpus(pod):
            continue
        own = entries.get((pod.namespace, pod.instance))
        w = stack.workload(pod)
        # Where each rendered value comes from: the stack's GPU settings, then the workload's own (components/training.py).
        selectors: dict[str, tuple[str | int, ...]] = {key: ("gpu_node_selector", key) for key in config.gpu_node_selector}
        tolerations: list[tuple[str | int, ...]] = [("gpu_tolerations", i) for i in range(len(config.gpu_tolerations))]
        if own and w:
            selectors.update({key: (*own, "node_selector", key) for key in w.node_selector})
            tolerations += [(*own, "tolerations", i) for i in range(len(w.tolerations))]
        for key in pod.spec.get("nodeSelector") or {}:
            if key in CONTROL_PLANE_ROLES:
                yield error(
                    pod.ref,
                    pod.at(f"spec.nodeSelector[{key}]"),
                    f"the GPU pod selects the control plane's nodes ({key})",
                    fix,
                    config=selectors.get(key),
                )
        for i, t in enumerate(pod.spec.get("tolerations") or []):
            key = t.get("key") or ""
            if key not in CONTROL_PLANE_ROLES and (key or t.get("operator") != "Exists"):
                continue
            what = f"the control plane's taint {key}" if key else "every taint (no key, operator Exists), the control plane's included"
            at = tolerations[i] if i < len(tolerations) else None
            yield error(pod.ref, pod.at(f"spec.tolerations[{i}]"), f"the GPU pod tolerates {what}", fix, config=at)
        affinity = ((pod.spec.get("affinity") or {}).get("nodeAffinity")) or {}
        terms = ((affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or []
        terms = [*terms, *((p.get("preference") or {}) for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])]
        for term in terms:
            for e in term.get("matchExpressions") or []:
                if e.get("key") in CONTROL_PLANE_ROLES and e.get("operator") in ("In", "Exists"):
                    yield error(pod.ref, pod.at("spec.affinity.nodeAffinity"), f"the GPU pod's node affinity asks for {e['key']}", fix)


def _hostnames(pod: PodView) -> tuple[str, list[str]]:
    """('In'|'NotIn'|'', hostnames) of the pod's required node affinity on kubernetes.io/hostname."""
    aff = ((pod.spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in aff.get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            if e.get("key") == HOSTNAME and e.get("operator") in ("In", "NotIn"):
                return str(e["operator"]), list(e.get("values") or [])
    return "", []


def _gpus(pod: PodView) -> int:
    return sum(amount(c.get("resources") or {}, "limits", GPU) for _, c in pod.containers())


@rule(
    "capacity",
    "Every running pod of the stack (workloads and enabled bandwidth checks) can be scheduled at once on the "
    "nodes the stack counts on (node_sets): GPUs per node, one pod of a workload per node, node pins. Pending pods "
    "never start, and an enabled check would wait out its deadline.",
)
def capacity(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    # The nodes as the search takes them: a named node each (pods pin them by name), and a count set's nodes as one
    # entry standing for all of them (identical, and never pinned), so the setup grows with entries, not with 4,096 nodes.
    nodes: dict[str, int] = {}  # entry -> GPUs of each of its nodes
    counts: dict[str, int] = {}  # entry -> how many nodes it stands for, where more than one
    for s in config.node_sets:
        for n in s.nodes:
            nodes[n] = s.gpus_per_node
        if not s.nodes:
            nodes[f"{s.name}#"] = s.gpus_per_node  # `#` is in no node name (a label value)
            counts[f"{s.name}#"] = s.count or 0
    named = {n for s in config.node_sets for n in s.nodes}
    everywhere = tuple(nodes)
    pinned: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}  # a pin -> its candidates, once per distinct pin
    groups: list[Group] = []
    changed: dict[str, str] = {}  # group -> how this change (against the committed render) made it run, or more of it
    for pod in stack.pods():
        if pod.replicas <= 0:
            continue
        op, hosts = _hostnames(pod)
        if op == "In":
            unknown = [h for h in hosts if h not in named]
            if unknown:
                yield error(
                    pod.ref,
                    pod.at("spec.affinity.nodeAffinity"),
                    f"pinned to {', '.join(unknown)}, which are not among the nodes the stack counts on (node_sets)",
                    "pin only nodes listed in node_sets (names as `oc get nodes` shows them)",
                )
        pin = (op, tuple(hosts))
        if pin not in pinned:
            if op == "In":
                pinned[pin] = tuple(h for h in hosts if h in named)
            elif op == "NotIn":
                avoided = set(hosts)
                pinned[pin] = tuple(n for n in everywhere if n not in avoided)
            else:
                pinned[pin] = everywhere
        spread = bool((pod.spec.get("affinity") or {}).get("podAntiAffinity")) or pod.replicas == 1
        groups.append(Group(pod.ref, pod.replicas, _gpus(pod), pinned[pin], spread))
        how = _started_by_this_change(stack, pod, groups[-1])
        if how:
            changed[pod.ref] = how
    result = place(nodes, groups, counts=counts)
    if result.placed:
        return
    if result.exhausted:
        yield warning(
            f"Stack {config.name}",
            "node_sets",
            "the placement search gave up before deciding whether every running pod fits at once",
            "run fewer workloads at once, or check the placement by hand",
            config=("node_sets",),
        )
        return
    culprits = _unplaceable(nodes, counts, groups, changed) or [result.unplaced.name if result.unplaced else f"Stack {config.name}"]

    def short(group: str) -> str:  # `StatefulSet ns/name` -> name: the workload's name in the stack file
        return group.rsplit("/", 1)[-1]

    demand = "; ".join(f"{short(g.name)}: {g.pods} x {g.gpus} GPUs" for g in sorted(groups, key=lambda g: g.name))
    supply = "; ".join(f"{s.name}: {s.size} node(s) x {s.gpus_per_node} GPUs" for s in config.node_sets)
    named_culprits = ", ".join(short(c) + (f" ({changed[c]})" if c in changed else "") for c in culprits)
    yield error(
        culprits[0],
        "spec.replicas",
        f"the running workloads cannot all be scheduled at once: no placement fits {named_culprits} beside the others, so "
        f"{'its' if len(culprits) == 1 else 'their'} pods would stay Pending. They ask for {demand}, and the stack counts on {supply}",
        "stop a workload (state: stopped), disable a bandwidth check, shrink one (nodes), or count more nodes in node_sets",
        setting="state" if changed.get(culprits[0], "").startswith(("started", "added")) else "",
    )


def _started_by_this_change(stack: Stack, pod: PodView, group: Group) -> str:
    """How the change against the committed render (stack.previous) makes this pod group ask for more: `started by this
    change`, `N pods, was M`, ...; "" when it asked for as much before, or when there is no committed render."""
    if not stack.previous:
        return ""
    before = (stack.previous.get("workloads") or {}).get(pod.instance) or (stack.previous.get("bandwidth_checks") or {}).get(pod.instance)
    if not isinstance(before, dict):
        return "added by this change"
    if before.get("state", "running") != "running" or not before.get("replicas", group.pods):
        return "started by this change"
    if before.get("replicas") != group.pods:
        return f"{group.pods} pods, was {before.get('replicas')}"
    if before.get("gpus_per_node") != group.gpus:
        return f"{group.gpus} GPUs per pod, was {before.get('gpus_per_node')}"
    return ""


def _unplaceable(nodes: dict[str, int], counts: dict[str, int], groups: list[Group], changed: dict[str, str]) -> list[str]:
    """The groups this change made ask for more that do not fit beside what ran before, in the order of the config:
    the workloads to name first. Empty when what ran before no longer fits on its own (a node set shrank), or when
    nothing changed: the search's own culprit is named then."""
    before = [g for g in groups if g.name not in changed]
    if not changed or not place(nodes, before, counts=counts).placed:
        return []
    fitting: list[Group] = []
    out = []
    for g in (g for g in groups if g.name in changed):
        if place(nodes, [*before, *fitting, g], counts=counts).placed:
            fitting.append(g)
        else:
            out.append(g.name)
    return out
