"""Scheduling: each pod fits a node of its set, tolerates the GPU nodes' taints and keeps off the control plane's; all
running pods fit at once (policy/placement.py), or, queued, what Kueue admits together."""

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from functools import partial, reduce
from typing import Any

from config.cluster import Queueing
from config.kube import GPU, HOSTNAME, ConfigPath
from config.openshift import CONTROL_PLANE_ROLES
from config.stack import ClusterConfig
from config.values import quantity_text, quantity_value
from config.workloads import BandwidthCheck, Workload
from policy.core import Finding, PodView, Stack, error, grouped, pod_entries, rule, warning
from policy.placement import UNBOUNDED, Admission, Budget, Free, Group, fits, place


def _misfits(config: ClusterConfig, w: Workload | BandwidthCheck) -> Iterator[tuple[str, str, str, str]]:
    """(config field, object field, message, fix) of each way a pod does not fit a node of its set, or the pods its nodes."""
    node_set = config.node_set(w.node_set)
    if w.gpus_per_node > node_set.gpus_per_node:
        yield (
            "gpus_per_node",
            f'spec.template.spec.containers[0].resources.limits["{GPU}"]',
            f"{w.gpus_per_node} GPUs per pod, but the nodes of {node_set.name!r} have {node_set.gpus_per_node}: the pods never schedule",
            "Spread the training over more nodes",
        )
    if w.nodes > node_set.size:
        yield (
            "nodes",
            "spec.replicas" if isinstance(w, Workload) and w.kind == "statefulset" else "spec.parallelism",
            f"{w.nodes} pods, one per node, but node set {node_set.name!r} has {node_set.size} node(s)",
            f"run at most {node_set.size} pod(s), or count more nodes in node_sets[{node_set.name}]",
        )
    for field, have in (("cpu", node_set.allocatable_cpu), ("memory", node_set.allocatable_memory)):
        want = getattr(w, field)
        if have is not None and quantity_value(want) > quantity_value(have):
            yield (
                field,
                f"spec.template.spec.containers[0].resources.requests.{field}",
                f"each pod requests {field} {want}, but the nodes of {node_set.name!r} offer {have} (allocatable_{field}): the "
                f"pods stay Pending ('Insufficient {field}')",
                f"Request at most {have}",
            )


@rule("node-fit", "each pod fits one node of its set, and a workload's pods, one per node, the set's count of nodes")
def node_fit(stack: Stack) -> Iterator[Finding]:
    for at, w in pod_entries(stack.config):
        for field, where, message, fix in _misfits(stack.config, w):
            yield error(stack.owner(w), where, message, fix, config=(*at, field))


@rule("node-selector", "a workload's node selector keeps its pods on the GPU nodes the stack counts on")
def node_selector(stack: Stack) -> Iterator[Finding]:
    c = stack.config
    named = {n for s in c.node_sets for n in s.nodes}
    for at, w in pod_entries(c):
        own: dict[str, str] = w.node_selector if isinstance(w, Workload) else {}
        selector_error = partial(error, stack.owner(w), "spec.template.spec.nodeSelector")
        for key, value in own.items():
            if c.gpu_node_selector.get(key, value) != value:
                yield selector_error(
                    f"{key}={value} contradicts the stack's gpu_node_selector {key}={c.gpu_node_selector[key]}: the workload's "
                    "value replaces it, so the pods leave the GPU nodes the stack counts on",
                    "Remove it, or change gpu_node_selector",
                    config=(*at, "node_selector", key),
                )
        host, node_set = {**c.gpu_node_selector, **own}.get(HOSTNAME), c.node_set(w.node_set)
        if host is not None and node_set.nodes and host not in node_set.nodes:
            problem = f"pins the pods to {host}, which is not a node of their node set {node_set.name!r} ({', '.join(node_set.nodes)})"
        elif host is not None and not node_set.nodes and host in named:
            problem = f"pins the pods to {host}, a named node of another set, while the pods of {node_set.name!r} avoid named nodes"
        elif host is not None and w.nodes > 1:
            problem = f"pins all {w.nodes} pods to {host}, but the pods of a workload take one node each"
        else:
            continue
        yield selector_error(
            f"{HOSTNAME}: {problem}: they never schedule",
            "Choose the nodes with node_set (and the set's nodes), not node_selector",
            config=(*at, "node_selector", HOSTNAME) if HOSTNAME in own else ("gpu_node_selector", HOSTNAME),
        )


_ANY_VALUE = ("Exists",)  # a toleration's value that matches any: no taint value is a tuple


@rule("gpu-toleration", "every GPU pod tolerates the GPU nodes' taints (gpu_tolerations), or it stays Pending")
def gpu_toleration(stack: Stack) -> Iterator[Finding]:
    for pod in filter(PodView.gpus, stack.pods()):
        # (key, effect or None, value or _ANY_VALUE): each taint is a lookup, the rule linear in tolerations and taints.
        tolerated = {
            (t.get("key"), t.get("effect") or None, _ANY_VALUE if t.get("operator", "Equal") == "Exists" else t.get("value"))
            for t in pod.spec.get("tolerations") or []
        }
        for t in stack.config.gpu_tolerations:
            if not any((t.key, effect, value) in tolerated for effect in (None, t.effect) for value in (_ANY_VALUE, t.value)):
                yield error(
                    pod.ref,
                    pod.at("spec.tolerations"),
                    f"the GPU nodes are tainted {t.key}{'=' + t.value if t.value else ''}:{t.effect or '*'} and this GPU pod does "
                    "not tolerate it: it stays Pending",
                    "let the program add gpu_tolerations to every GPU pod (components/training.py scheduling)",
                    config=("gpu_tolerations",),
                )


@rule("control-plane-nodes", "no GPU pod selects or tolerates the control plane's nodes")
def control_plane_nodes(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    fix = (
        "remove it: GPU pods belong on the GPU nodes (node_sets, gpu_node_selector) and tolerate their taints by key "
        "(gpu_tolerations). On a compact cluster the control-plane nodes are workers too: select them by their GPU label"
    )
    for pod in filter(PodView.gpus, stack.pods()):
        own, w = stack.entry_of(pod), stack.workload(pod)
        # Where each rendered value comes from: the stack's GPU settings, then the workload's own.
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


@rule("capacity", "every running pod can be scheduled at once (or, queued, each run fits its quota and nodes)")
def capacity(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    per_pod_vfs = Counter(a.resource for a in config.fabric.attachments) if config.fabric else Counter()
    nodes, counts = _node_entries(config, per_pod_vfs)
    named = {n for s in config.node_sets for n in s.nodes}
    pinned: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}  # a pin -> its candidates, once per distinct pin
    groups: list[Group] = []
    changed: dict[str, str] = {}  # group -> how this change (against the committed render) made it run, or more of it
    queued: list[tuple[PodView, Group]] = []
    for pod in stack.pods():
        spec = stack.spec_of(pod)
        if pod.replicas <= 0 or (spec is not None and any(_misfits(config, spec))):
            continue  # a pod that fits no node of its set is node-fit's error
        op, hosts = _hostnames(pod)
        if op == "In" and (unknown := [h for h in hosts if h not in named]):
            yield error(
                pod.ref,
                pod.at("spec.affinity.nodeAffinity"),
                f"pinned to {', '.join(unknown)}, which are not among the nodes the stack counts on (node_sets)",
                "pin only nodes listed in node_sets (names as `oc get nodes` shows them)",
            )
        pin = (op, tuple(hosts))
        if pin not in pinned:
            avoided = set(hosts)
            pinned[pin] = tuple(h for h in hosts if h in named) if op == "In" else tuple(n for n in nodes if n not in avoided)
        spread = bool((pod.spec.get("affinity") or {}).get("podAntiAffinity")) or pod.replicas == 1
        requests = _pod_requests(pod)
        vfs = max((int(-(-requests[r] // n)) for r, n in per_pod_vfs.items() if requests.get(r)), default=0)  # 1 for an RDMA pod
        cpu, memory = int(requests.get("cpu", 0) * 1000), int(requests.get("memory", 0))
        groups.append(Group(pod.ref, pod.replicas, pod.gpus(), pinned[pin], spread, cpu, memory, vfs))
        if how := _started_by_this_change(stack, pod, groups[-1]):
            changed[pod.ref] = how
        queued.append((pod, groups[-1]))
    if config.queueing is not None:
        yield from _against_the_queue(stack, config.queueing, queued, nodes, counts)
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

    demand = "; ".join(f"{short(g.name)}: {g.pods} x {_shown(g.need, config.node_sets)}" for g in sorted(groups, key=lambda g: g.name))
    supply = "; ".join(
        f"{s.name}: {s.size} node(s) x {_shown(nodes[s.nodes[0] if s.nodes else s.name + '#'], config.node_sets, node=True)}"
        for s in config.node_sets
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


def _node_entries(config: ClusterConfig, per_pod_vfs: Mapping[str, int]) -> tuple[dict[str, Free], dict[str, int]]:
    """(entry -> what each of its nodes offers, entry -> how many nodes it stands for): a named node each, a count set as one."""
    nodes: dict[str, Free] = {}
    counts: dict[str, int] = {}
    for s in config.node_sets:
        vfs = s.vfs_per_node  # how many RDMA pods a node has VFs for (UNBOUNDED where its node_policies state none of the fabric's)
        vf_sets = min((vfs[r] // n for r, n in per_pod_vfs.items() if r in vfs), default=UNBOUNDED)
        offered = (s.gpus_per_node, _quantity(s.allocatable_cpu, 1000), _quantity(s.allocatable_memory, 1), vf_sets)
        nodes.update(dict.fromkeys(s.nodes, offered))
        if not s.nodes:
            nodes[f"{s.name}#"] = offered  # `#` is in no node name (a label value)
            counts[f"{s.name}#"] = s.count or 0
    return nodes, counts


def _against_the_queue(
    stack: Stack, q: Queueing, queued: list[tuple[PodView, Group]], nodes: dict[str, Free], counts: dict[str, int]
) -> Iterator[Finding]:
    """Each queued workload against its set's quota (Kueue admits a pod set whole, on one flavor), then what it admits."""
    config = stack.config
    quota = config.queue_quota()
    whole = {r: sum((quantity_value(q[r]) for q in quota.values()), Decimal(0)) for r in next(iter(quota.values()))}
    by_set: dict[str, list[tuple[PodView, Group, dict[str, Decimal]]]] = {}
    for pod, group in queued:
        spec = stack.spec_of(pod)
        node_set = config.node_set(spec.node_set if spec is not None else None)
        own = quota[node_set.name]
        unstated = config.unstated_quota(node_set)  # queue-flavors' error
        requests = {r: n for r, n in _pod_requests(pod).items() if r not in unstated}
        if "pods" in own:
            requests["pods"] = Decimal(1)  # Kueue counts a pod set's pods where the queue covers them
        for resource, per_pod in requests.items():
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
        else:
            by_set.setdefault(node_set.name, []).append((pod, group, requests))
    budget = Budget(QUEUE_BUDGET)  # one for the whole check: every node set's search and every fix's
    for name, runs in by_set.items():
        node_set = config.node_set(name)
        names = list(node_set.nodes) or [f"{name}#"]
        mine = {n: nodes[n] for n in names}, {n: counts[n] for n in names if n in counts}
        if q.topology_aware:
            yield from _topology_aware(node_set, runs, mine)
        else:
            yield from _admitted_together(stack, q, node_set, runs, quota[name], mine, budget)


QUEUE_BUDGET = 20_000  # steps of every queue search of one check (combinations looked at, placement steps)
FIX_STEPS = 500  # of them, the most each check of a lower GPU quota a fix may name takes


def _topology_aware(
    node_set: Any, runs: list[tuple[PodView, Group, dict[str, Decimal]]], mine: tuple[dict[str, Free], dict[str, int]]
) -> Iterator[Finding]:
    """Topology Aware Scheduling counts pods per node by their requests (kueue v0.17.0 fillInCounts), not anti-affinity:
    where two pods of a multi-node run fit one node it may bind both there, and the scheduler refuses the second."""
    offer, sets = next(iter(mine[0].values())), [node_set]
    for pod, group, _ in runs:
        gpus, cpu, memory, vfs = group.need
        if not group.spread or group.pods < 2 or not fits(offer, (2 * gpus, 2 * cpu, 2 * memory, 2 * vfs)):
            continue
        yield error(
            pod.ref,
            "spec.template.spec.affinity.podAntiAffinity",
            "with queueing.topology_aware, Kueue's Topology Aware Scheduling picks the nodes, and it counts what each pod requests of a "
            f"node, not one pod per node: two of {pod.instance}'s pods ({_shown(group.need, sets)} each) fit one node of {node_set.name} "
            f"({_shown(offer, sets, node=True)}), so it may bind both to one node, where the scheduler refuses the second (one pod per "
            "node): the run never starts, and is evicted and admitted again at every waitForPodsReady timeout",
            f"ask for more than half a node per pod (gpus_per_node above {offer[0] // 2} on {node_set.name}, or cpu or memory above "
            "half its allocatable), so that Topology Aware Scheduling too finds one pod per node; or turn queueing.topology_aware "
            "off (the preflight then checks what the quota admits together)",
            setting="gpus_per_node",
        )


def _units(resource: str, amount: Decimal) -> int:
    """An amount as Kueue counts it against a quota (ResourceValue): CPU in millicores, others whole, rounded up."""
    return math.ceil(amount * 1000) if resource == "cpu" else math.ceil(amount)


def _names(runs: list[tuple[PodView, Group, dict[str, Decimal]]], chosen: tuple[int, ...] | list[int]) -> str:
    shown = [runs[i][0].instance for i in chosen[:4]]
    return ", ".join(shown) + (f" and {len(chosen) - 4} more" if len(chosen) > 4 else "")


def _admitted_together(
    stack: Stack, q: Queueing, node_set: Any, runs: list[tuple[PodView, Group, dict[str, Decimal]]], quota: dict[str, str],
    mine: tuple[dict[str, Free], dict[str, int]], budget: Budget,
) -> Iterator[Finding]:  # fmt: skip
    """Kueue admits by quota only, in any order: where a combination it admits does not fit the set's nodes, the run
    admitted last holds its quota and GPUs until the waitForPodsReady timeout."""
    groups = [g for _, g, _ in runs]
    limit = {r: _units(r, quantity_value(v)) for r, v in quota.items()}
    charges = [  # what each run charges its flavor's quota: its pods' requests times its pods
        {r: g.pods * (1 if r == "pods" else _units(r, requests.get(r, Decimal(0)))) for r in {*limit, "pods"}} for _, g, requests in runs
    ]
    admission = Admission(mine[0], groups, charges, budget, mine[1])
    found = admission.check(limit)
    if found.fits:
        return
    where: ConfigPath = ("queueing", "quota", node_set.name) if node_set.name in q.quota else ("queueing",)
    cq, at = f"ClusterQueue {q.cluster_queue}", f"spec.resourceGroups[0].flavors[{stack.config.node_sets.index(node_set)}]"
    fixes = []
    if ("pods" not in limit or limit["pods"] > node_set.size) and admission.check({**limit, "pods": node_set.size}).fits:
        fixes.append(
            f"set queueing.quota[{node_set.name}][pods] to {node_set.size} (Kueue then admits at most as many pods as "
            f"{node_set.name} has nodes)"
        )
    if not found.decided:
        others = [i for i in range(len(runs)) if i not in found.room]
        proved = (
            f"It proved that {_names(runs, found.room)} can always find room beside what the quota admits with them; of the "
            f"combinations of the other {len(others)}"
            if found.room
            else f"It proved nothing by counting; of the combinations of the {len(others)} runs"
        )
        yield warning(
            cq,
            at,
            f"the preflight's search of what Kueue may admit together on node set {node_set.name!r} was cut short: the check's budget of "
            f"{QUEUE_BUDGET} steps ran out before it decided whether every combination of queued runs its quota admits fits its nodes. "
            f"{proved} ({_names(runs, others)}), the ones it placed ({found.fitting}) fit, and it did not get to the rest",
            ", or ".join([*fixes, f"lower queueing.quota[{node_set.name}][{GPU}]", "run fewer workloads on the set at once"]),
            config=where,
        )
        return
    names = " and ".join(f"{runs[i][0].instance} ({groups[i].pods} x {_shown(groups[i].need, [node_set])})" for i in found.bad)
    asked = "; ".join(
        f"{sum(charges[i][r] for i in found.bad)} of the {quota[r]} {r}"
        for r in limit
        if r in (GPU, "pods") and any(charges[i][r] for i in found.bad)
    )
    timeout = (
        f"until Kueue evicts it at the waitForPodsReady timeout ({q.pods_ready.timeout_minutes} minutes) and admits it again; "
        "which run loses varies"
        if q.pods_ready.enabled
        else "for ever: waitForPodsReady is off (queueing.pods_ready), so Kueue never evicts it"
    )
    yield error(
        cq,
        at,
        f"Kueue may admit {names} at once: they fit the quota of node set {node_set.name} ({asked}), but its nodes "
        f"({node_set.size} x {_shown(next(iter(mine[0].values())), [node_set], node=True)}) cannot hold their pods at once (one node "
        "for each pod of a multi-node workload). Kueue admits by quota, not by node: the run admitted last cannot start, and "
        f"holds its quota and its placed pods' GPUs {timeout}",
        ", or ".join([*_lower_gpu_quota(admission, limit, found.bad, node_set.name, budget), *fixes, "stop one of them (state: stopped)"])
        + "; where the cluster's Kueue runs Topology Aware Scheduling and each pod of a multi-node run takes more than half a "
        "node, queueing.topology_aware: true lets Kueue check the nodes itself",
        config=where,
    )


def _lower_gpu_quota(admission: Admission, limit: dict[str, int], bad: tuple[int, ...], node_set: str, budget: Budget) -> list[str]:
    """The largest lower GPU quota found under which every combination fits (an undecided one fails: a fix is proved)."""
    charges = admission.charges
    sums = reduce(lambda s, c: s | s << c[GPU], charges, 1)  # bit v: some runs ask for v GPUs in all
    least, below = max(c[GPU] for c in charges), sum(charges[i][GPU] for i in bad)
    values = [v for v in range(below - 1, least - 1, -1) if sums >> v & 1]  # the sums in [least, below), largest first
    # By halves: the good values all come after the others.
    proved = bisect_left(values, True, key=lambda v: all(admission.finds_room({**limit, GPU: v})))
    best = bisect_left(values[:proved], True, key=lambda v: admission.check({**limit, GPU: v}, budget.part(FIX_STEPS)).fits)
    return [f"lower queueing.quota[{node_set}][{GPU}] to {values[best]}"] if best < len(values) else []


@rule("queue-quota", "each queue quota lies between what a workload of the queue needs and what its node set holds")
def queue_quota(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    if (q := config.queueing) is None:
        return
    for node_set in config.node_sets:
        held = {GPU: Decimal(node_set.gpus_per_node)}
        held.update({r: quantity_value(v) for r, v in (("cpu", node_set.allocatable_cpu), ("memory", node_set.allocatable_memory)) if v})
        # The stopped workloads only: a running one that cannot be admitted is the capacity rule's error.
        mine = [w for w in config.all_workloads() if w.state == "stopped" and config.node_set(w.node_set).name == node_set.name]
        stopped = [(w, {**config.pod_requests(w), "pods": "1"}) for w in mine]
        for resource, stated in (q.quota.get(node_set.name) or {}).items():
            quota = quantity_value(stated)
            where = ("queueing", "quota", node_set.name, resource)
            quota_warning = partial(warning, f"Stack {config.name}", "queueing.quota", config=where, value=f"{resource}={stated}")
            if (per_node := held.get(resource)) is not None and quota > per_node * node_set.size:
                holds = quantity_text(per_node * node_set.size)
                yield quota_warning(
                    f"the quota of {resource} on {node_set.name!r} is {stated}, more than the node set holds ({node_set.size} node(s) x "
                    f"{quantity_text(per_node)} = {holds}): Kueue would admit workloads whose pods no node can take, and they "
                    "would stay Pending holding the quota",
                    f"state at most {holds} (what the set holds; less where other tenants share its nodes)",
                )
            asked = [(w, asks[resource], quantity_value(asks[resource]) * w.nodes) for w, asks in stopped if resource in asks]
            if short := [(w, ask, need) for w, ask, need in asked if need > quota]:
                needs = ", ".join(f"{w.name} ({w.nodes} x {ask})" for w, ask, _ in short)
                most = quantity_text(max(need for _, _, need in short))
                yield quota_warning(
                    f"the quota of {resource} on {node_set.name!r} is {stated}, less than what stopped workload(s) of the queue "
                    f"need: {needs}. Started, Kueue could never admit them: they would wait in the queue for ever",
                    f"raise it to {most} (as far as the set holds), or shrink those workloads (nodes, gpus_per_node, cpu, memory)",
                )


def _pod_requests(pod: PodView) -> dict[str, Decimal]:
    """Every resource one pod requests as Kueue and the scheduler count it: the containers' sum, or the largest init
    container's where more (a request not given is its limit). CPU in cores, memory in bytes."""
    total: dict[str, Decimal] = {}
    for key, add in (("containers", True), ("initContainers", False)):
        for c in pod.spec.get(key) or []:
            res = c.get("resources") or {}
            for name, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
                amount_ = quantity_value(str(value))
                was = total.get(name, Decimal(0))
                total[name] = was + amount_ if add else max(was, amount_)
    return total


def _quantity(value: str | None, scale: int) -> int:
    """A node set's stated CPU (scale 1000: millicores) or memory (bytes); UNBOUNDED where it states none."""
    return UNBOUNDED if value is None else int(quantity_value(value) * scale)


def _shown(amounts: Free, node_sets: Iterable[Any], node: bool = False) -> str:
    """`4 GPUs`, with CPUs, memory and VFs where the node sets state them (else GPUs are all that count)."""
    stated = any(s.allocatable_cpu or s.allocatable_memory or s.node_policies for s in node_sets)
    gpus, cpu, memory, vfs = amounts
    out = f"{gpus} GPUs"
    if stated and cpu < UNBOUNDED:
        out += f", {cpu / 1000:g} CPUs"
    if stated and memory < UNBOUNDED:
        out += f", {memory / 2**30:g}Gi"
    if node and vfs < UNBOUNDED:
        out += f", VFs for {vfs} RDMA pod{'' if vfs == 1 else 's'}"
    elif not node and stated and vfs:
        out += ", 1 VF per attachment"
    return out


def _packed(config: Any, nodes: dict[str, Free], counts: dict[str, int], groups: list[Group]) -> Iterator[Finding]:
    """Pods that fit only if the scheduler (one pod at a time, never moving one) packs them as the search did: unless
    each has a node or they are alike, their order decides (a warning at the workload likeliest left Pending)."""
    for candidates, mine in grouped((g.candidates, g) for g in groups).items():
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
            "give each pod a node of its own there (count more nodes in node_sets, or run fewer pods at once), or make the pods that share "
            "nodes alike (the same GPUs, CPU and memory); accept this warning where you start them in an order that packs them",
        )


def _started_by_this_change(stack: Stack, pod: PodView, group: Group) -> str:
    """How the change against the committed render makes this group ask for more (`N pods, was M`); "" if it does not."""
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
    """The groups this change made ask for more that do not fit beside what ran before (none where that alone fails)."""
    fitting = [g for g in groups if g.name not in changed]  # what ran before, then each changed group that fits beside it
    if not changed or not place(nodes, fitting, counts=counts).placed:
        return []
    out = []
    for g in (g for g in groups if g.name in changed):
        if place(nodes, [*fitting, g], counts=counts).placed:
            fitting.append(g)
        else:
            out.append(g.name)
    return out
