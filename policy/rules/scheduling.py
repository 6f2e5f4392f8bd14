"""Scheduling: GPU pods tolerate the GPU nodes' taints, keep off the control plane's nodes, and all running pods
fit at once on the nodes the stack counts on (the search is policy/placement.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from config.kube import GPU, HOSTNAME
from config.openshift import CONTROL_PLANE_ROLES
from config.values import quantity_text, quantity_value
from policy.core import Finding, PodView, Stack, amount, error, rule, warning
from policy.placement import UNBOUNDED, Free, Group, place

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
    "nodes the stack counts on (node_sets): GPUs per node, CPU and memory where the set states them, one pod of a "
    "workload per node, node pins. Pending pods never start, and an enabled check would wait out its deadline. A "
    "placement that needs unlike pods packed onto shared nodes is a warning: the scheduler may place them otherwise. "
    "On a queued cluster (queueing) the queue decides what runs at once: each workload alone must fit its node set's "
    "quota in the ClusterQueue, and its node set's nodes; one that never can is an error (Kueue would keep it waiting).",
)
def capacity(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    # The nodes as the search takes them: a named node each (pods pin them by name), and a count set's nodes as one
    # entry standing for all of them (identical, and never pinned), so the setup grows with entries, not with 4,096 nodes.
    nodes: dict[str, Free] = {}  # entry -> what each of its nodes offers: GPUs, and CPU and memory where stated
    counts: dict[str, int] = {}  # entry -> how many nodes it stands for, where more than one
    for s in config.node_sets:
        offered = (s.gpus_per_node, _quantity(s.allocatable_cpu, 1000), _quantity(s.allocatable_memory, 1))
        for n in s.nodes:
            nodes[n] = offered
        if not s.nodes:
            nodes[f"{s.name}#"] = offered  # `#` is in no node name (a label value)
            counts[f"{s.name}#"] = s.count or 0
    named = {n for s in config.node_sets for n in s.nodes}
    everywhere = tuple(nodes)
    pinned: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}  # a pin -> its candidates, once per distinct pin
    groups: list[Group] = []
    changed: dict[str, str] = {}  # group -> how this change (against the committed render) made it run, or more of it
    queued: list[tuple[PodView, Group]] = []
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
        groups.append(Group(pod.ref, pod.replicas, _gpus(pod), pinned[pin], spread, *_requests(pod)))
        how = _started_by_this_change(stack, pod, groups[-1])
        if how:
            changed[pod.ref] = how
        queued.append((pod, groups[-1]))
    if config.queueing is not None:
        yield from _against_the_queue(stack, queued)
        return
    result = place(nodes, groups, counts=counts)
    if result.placed:
        yield from _packed(config, nodes, counts, groups)
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

    stated = any(s.allocatable_cpu or s.allocatable_memory for s in config.node_sets)  # else GPUs are all that count
    demand = "; ".join(f"{short(g.name)}: {g.pods} x {_shown(g.need, stated)}" for g in sorted(groups, key=lambda g: g.name))
    supply = "; ".join(
        f"{s.name}: {s.size} node(s) x {_shown(nodes[s.nodes[0] if s.nodes else s.name + '#'], stated)}" for s in config.node_sets
    )
    named_culprits = ", ".join(short(c) + (f" ({changed[c]})" if c in changed else "") for c in culprits)
    yield error(
        culprits[0],
        "spec.replicas",
        f"the running workloads cannot all be scheduled at once: no placement fits {named_culprits} beside the others, so "
        f"{'its' if len(culprits) == 1 else 'their'} pods would stay Pending. They ask for {demand}, and the stack counts on {supply}",
        "stop a workload (state: stopped), disable a bandwidth check, shrink one (nodes), or count more nodes in node_sets",
        setting="state" if changed.get(culprits[0], "").startswith(("started", "added")) else "",
    )


def _against_the_queue(stack: Stack, queued: list[tuple[PodView, Group]]) -> Iterator[Finding]:
    """On a queued cluster: each workload on its own against its node set's quota (the ResourceFlavor its pods match:
    Kueue admits a pod set whole, on one flavor). Running workloads are not summed: what does not fit beside the others
    waits in the queue, which is the point of it. That a workload fits its node set's nodes alone, the config holds
    already (`nodes` within the set's size, each pod within a node's GPUs, CPU and memory)."""
    config = stack.config
    quota = config.queue_quota()
    whole = {r: sum((quantity_value(q[r]) for q in quota.values()), Decimal(0)) for r in next(iter(quota.values()))}
    for pod, group in queued:
        spec = stack.spec_of(pod)
        node_set = config.node_set(spec.node_set if spec is not None else None)
        own = quota[node_set.name]
        for resource, per_pod in _pod_requests(pod).items():
            want = per_pod * group.pods
            if resource in own and want <= quantity_value(own[resource]):
                continue
            if resource not in own:
                problem = f"its pods request {resource}, which the ClusterQueue does not cover (queueing.quota names no such resource)"
            elif want > whole[resource]:
                problem = (
                    f"it asks for {group.pods} x {quantity_text(per_pod)} {resource}, more than the whole queue holds "
                    f"({quantity_text(whole[resource])}, queueing.quota or the node sets' totals)"
                )
            else:
                problem = (
                    f"it asks for {group.pods} x {quantity_text(per_pod)} {resource}, more than node set {node_set.name!r} holds in "
                    f"the queue ({own[resource]}): its pods can use that set's ResourceFlavor only, and Kueue admits a workload whole"
                )
            yield error(
                pod.ref,
                "spec.replicas",
                f"{problem}: Kueue can never admit it, so it would wait in the queue for ever",
                f"shrink it (nodes, gpus_per_node, cpu, memory), or raise queueing.quota[{node_set.name}][{resource}] "
                "as far as the set holds",
                setting="nodes",
            )
            break


@rule(
    "queue-quota",
    "On a queued cluster each quota the stack states (queueing.quota) lies between what a workload of the queue needs "
    "and what its node set holds: a quota under a stopped workload's need leaves it waiting in the queue for ever once "
    "started (a running one is capacity's error); a quota over the set's GPUs, or its stated CPU or memory, lets Kueue admit "
    "pods no node can take, which stay Pending holding the quota.",
)
def queue_quota(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    q = config.queueing
    if q is None:
        return
    for node_set in config.node_sets:
        held = {GPU: Decimal(node_set.gpus_per_node)}
        held.update({r: quantity_value(v) for r, v in (("cpu", node_set.allocatable_cpu), ("memory", node_set.allocatable_memory)) if v})
        workloads = [w for w in config.all_workloads() if config.node_set(w.node_set).name == node_set.name]
        for resource, stated in (q.quota.get(node_set.name) or {}).items():
            quota = quantity_value(stated)
            where = ("queueing", "quota", node_set.name, resource)
            per_node = held.get(resource)
            if per_node is not None and quota > per_node * node_set.size:
                holds = quantity_text(per_node * node_set.size)
                yield warning(
                    f"Stack {config.name}",
                    "queueing.quota",
                    f"the quota of {resource} on {node_set.name!r} is {stated}, more than the node set holds ({node_set.size} node(s) x "
                    f"{quantity_text(per_node)} = {holds}): Kueue would admit workloads whose pods no node can take, and they "
                    "would stay Pending holding the quota",
                    f"state at most {holds} (what the set holds; less where other tenants share its nodes)",
                    config=where,
                    value=f"{resource}={stated}",
                )
            # The stopped workloads only: a running one that cannot be admitted is the capacity rule's error, at the workload.
            short = [
                (w, need)
                for w in workloads
                if w.state == "stopped" and resource in (per_pod := config.pod_requests(w))
                and (need := quantity_value(per_pod[resource]) * w.nodes) > quota
            ]  # fmt: skip
            if short:
                needs = ", ".join(f"{w.name} ({w.nodes} x {config.pod_requests(w)[resource]})" for w, _ in short)
                most = quantity_text(max(need for _, need in short))
                yield warning(
                    f"Stack {config.name}",
                    "queueing.quota",
                    f"the quota of {resource} on {node_set.name!r} is {stated}, less than what stopped workload(s) of the queue "
                    f"need: {needs}. Started, Kueue could never admit them: they would wait in the queue for ever",
                    f"raise it to {most} (as far as the set holds), or shrink those workloads (nodes, gpus_per_node, cpu, memory)",
                    config=where,
                    value=f"{resource}={stated}",
                )


def _pod_requests(pod: PodView) -> dict[str, Decimal]:
    """Every resource one pod requests, as Kueue counts it: its containers' requests added up, or its largest init
    container's where that is more (a request not given is its limit). CPU in cores, memory in bytes."""

    def of(container: dict[str, Any]) -> dict[str, Decimal]:
        res = container.get("resources") or {}
        out: dict[str, Decimal] = {}
        for name, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            try:
                out[name] = quantity_value(str(value))
            except ValueError:
                continue  # not a quantity: the model and the API server refuse it
        return out

    total: dict[str, Decimal] = {}
    for c in pod.spec.get("containers") or []:
        for name, amount_ in of(c).items():
            total[name] = total.get(name, Decimal(0)) + amount_
    for c in pod.spec.get("initContainers") or []:
        for name, amount_ in of(c).items():
            total[name] = max(total.get(name, Decimal(0)), amount_)
    return total


def _quantity(value: str | None, scale: int) -> int:
    """A node set's stated CPU (scale 1000: millicores) or memory (bytes); UNBOUNDED where it states none."""
    return UNBOUNDED if value is None else int(quantity_value(value) * scale)


def _requests(pod: PodView) -> tuple[int, int]:
    """The CPU (millicores) and memory (bytes) a pod takes of its node, as the scheduler counts them: its containers'
    requests added up, or its largest init container's where that is more (a request not given is its limit, as the
    API server defaults it; a value that is no quantity counts as none: the model and the API server refuse it)."""

    def of(container: dict[str, Any], name: str, scale: int) -> int:
        res = container.get("resources") or {}
        value = (res.get("requests") or {}).get(name, (res.get("limits") or {}).get(name))
        try:
            return int(quantity_value(str(value)) * scale) if value is not None else 0
        except ValueError:
            return 0

    def total(name: str, scale: int) -> int:
        running = sum(of(c, name, scale) for c in pod.spec.get("containers") or [])
        return max([running, *(of(c, name, scale) for c in pod.spec.get("initContainers") or [])])

    return total("cpu", 1000), total("memory", 1)


def _shown(amounts: Free, stated: bool) -> str:
    """`4 GPUs`, or `4 GPUs, 32 CPUs, 256Gi` where a node set states CPU and memory (an unstated one is left out)."""
    gpus, cpu, memory = amounts
    out = f"{gpus} GPUs"
    if stated and cpu < UNBOUNDED:
        out += f", {cpu / 1000:g} CPUs"
    if stated and memory < UNBOUNDED:
        out += f", {memory / 2**30:g}Gi"
    return out


def _packed(config: Any, nodes: dict[str, Free], counts: dict[str, int], groups: list[Group]) -> Iterator[Finding]:
    """The nodes whose pods fit only if the scheduler packs them as the search did. It places pods one at a time, each
    where it fits (its scoring weighs CPU and memory, not GPUs), and never moves one. Where a set's pods have a node
    each, an empty node is left for every pod in any order; where they are alike (and none of a multi-node workload),
    every node holds as many of them in any order. Otherwise the order they arrive in decides: a warning (the judgement whether that order
    is the user's to choose), at the workload most likely left Pending: a multi-node one, then the largest pods.
    Pods share nodes only with the pods of the same pin (named sets are pinned, count sets share the rest)."""
    by_pin: dict[tuple[str, ...], list[Group]] = {}
    for g in groups:
        by_pin.setdefault(g.candidates, []).append(g)
    for candidates, mine in by_pin.items():
        size = sum(counts.get(n, 1) for n in candidates)
        pods = sum(g.pods for g in mine)
        alike = len({g.need for g in mine}) == 1 and not any(g.spread and g.pods > 1 for g in mine)
        if pods <= size or alike:
            continue
        victim = max(mine, key=lambda g: (g.spread and g.pods > 1, g.gpus, g.pods, g.name))
        sets = sorted({s.name for s in config.node_sets for n in candidates if n in s.nodes or n == f"{s.name}#"})
        names = ", ".join(g.name.rsplit("/", 1)[-1] for g in sorted(mine, key=lambda g: g.name))
        yield warning(
            victim.name,
            "spec.replicas",
            f"the running pods fit on the nodes of {', '.join(sets)} only if the scheduler packs {names} onto shared nodes "
            f"({pods} pods on {size} node(s)): it places pods one at a time, each where it fits, and never moves one, so "
            f"{victim.name.rsplit('/', 1)[-1]} can be left without a node and stay Pending",
            "give each pod a node of its own there (count more nodes in node_sets, or run fewer pods at once), or make the "
            "pods that share nodes alike (the same GPUs, CPU and memory); accept this warning where "
            "you start them in an order that packs them",
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


def _unplaceable(nodes: dict[str, Free], counts: dict[str, int], groups: list[Group], changed: dict[str, str]) -> list[str]:
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
