"""Scheduling: GPU pods tolerate the GPU nodes' taints, keep off the control plane's nodes, and all running pods
fit at once on the nodes the stack counts on (the search is policy/placement.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from config.kube import GPU, HOSTNAME, ConfigPath
from config.openshift import CONTROL_PLANE_ROLES
from config.values import quantity_text, quantity_value
from policy.core import Finding, PodView, Stack, amount, error, rule, warning
from policy.placement import UNBOUNDED, Free, Group, fits, place

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
    nodes: dict[str, Free] = {}  # entry -> what each of its nodes offers: GPUs, and CPU, memory and VFs where stated
    counts: dict[str, int] = {}  # entry -> how many nodes it stands for, where more than one
    per_pod_vfs = _vf_demand(config)
    for s in config.node_sets:
        offered = (s.gpus_per_node, _quantity(s.allocatable_cpu, 1000), _quantity(s.allocatable_memory, 1), _vf_sets(s, per_pod_vfs))
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
        groups.append(Group(pod.ref, pod.replicas, _gpus(pod), pinned[pin], spread, *_requests(pod), _pod_vfs(pod, per_pod_vfs)))
        how = _started_by_this_change(stack, pod, groups[-1])
        if how:
            changed[pod.ref] = how
        queued.append((pod, groups[-1]))
    if config.queueing is not None:
        yield from _against_the_queue(stack, queued, nodes, counts)
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

    stated = any(s.allocatable_cpu or s.allocatable_memory or s.node_policies for s in config.node_sets)  # else GPUs are all that count
    demand = "; ".join(f"{short(g.name)}: {g.pods} x {_shown(g.need, stated)}" for g in sorted(groups, key=lambda g: g.name))
    supply = "; ".join(
        f"{s.name}: {s.size} node(s) x {_shown(nodes[s.nodes[0] if s.nodes else s.name + '#'], stated, node=True)}"
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


def _against_the_queue(
    stack: Stack, queued: list[tuple[PodView, Group]], nodes: dict[str, Free], counts: dict[str, int]
) -> Iterator[Finding]:
    """On a queued cluster: each workload on its own against its node set's quota (the ResourceFlavor its pods match:
    Kueue admits a pod set whole, on one flavor) and its set's nodes. Running workloads are not summed: what does not
    fit beside the others waits in the queue, which is the point of it. But Kueue admits by quota: where it may admit
    together runs that their set's nodes cannot hold, the one admitted last cannot start (`_admitted_together`), unless
    Kueue's Topology Aware Scheduling checks the nodes first (`_topology_aware`)."""
    config = stack.config
    q = config.queueing
    assert q is not None
    quota = config.queue_quota()
    whole = {r: sum((quantity_value(q[r]) for q in quota.values()), Decimal(0)) for r in next(iter(quota.values()))}
    by_set: dict[str, list[tuple[PodView, Group, dict[str, Decimal]]]] = {}
    for pod, group in queued:
        spec = stack.spec_of(pod)
        node_set = config.node_set(spec.node_set if spec is not None else None)
        own = quota[node_set.name]
        requests = _pod_requests(pod)
        if "pods" in own:
            requests["pods"] = Decimal(1)  # Kueue counts a pod set's pods where the queue covers them
        never = False
        for resource, per_pod in requests.items():
            want = per_pod * group.pods
            if resource in own and want <= quantity_value(own[resource]):
                continue
            never = True
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
        if never:
            continue
        by_set.setdefault(node_set.name, []).append((pod, group, requests))
    for name, runs in by_set.items():
        node_set = config.node_set(name)
        if q.topology_aware:
            yield from _topology_aware(node_set, runs, _set_nodes(node_set, nodes, counts))
        else:
            yield from _admitted_together(stack, node_set, runs, quota[name], _set_nodes(node_set, nodes, counts))


PLACE_BUDGET = 5_000
"""Steps of one placement search of the queue's checks: a node set's runs, not the whole stack's, in each."""
SUBSET_BUDGET = 2_000
"""Combinations of runs the quota admits that `_admitted_together` looks at, per node set; past it, a warning."""


def _set_nodes(node_set: Any, nodes: dict[str, Free], counts: dict[str, int]) -> tuple[dict[str, Free], dict[str, int]]:
    """The capacity rule's node entries of one node set (its named nodes, or the one entry standing for its count)."""
    names = list(node_set.nodes) or [f"{node_set.name}#"]
    return {n: nodes[n] for n in names}, {n: counts[n] for n in names if n in counts}


def _topology_aware(
    node_set: Any, runs: list[tuple[PodView, Group, dict[str, Decimal]]], mine: tuple[dict[str, Free], dict[str, int]]
) -> Iterator[Finding]:
    """With Kueue's Topology Aware Scheduling, Kueue admits a run only where each of its pods fits a node's free
    resources (kueue v0.17.0 pkg/cache/scheduler/tas_flavor_snapshot.go: fillInCounts counts the pods that fit each node
    by their requests, `CountIn`); it reads no pod anti-affinity. So where two pods of a multi-node workload fit one
    node, it may bind both to it (its ungater writes the node into each pod's node selector), and the scheduler then
    refuses the second (one pod per node): the run never starts."""
    offer = next(iter(mine[0].values()))
    for pod, group, _ in runs:
        if not group.spread or group.pods < 2:
            continue
        gpus, cpu, memory, vfs = group.need
        if not fits(offer, (2 * gpus, 2 * cpu, 2 * memory, 2 * vfs)):
            continue
        stated = bool(node_set.allocatable_cpu or node_set.allocatable_memory or node_set.node_policies)
        yield error(
            pod.ref,
            "spec.template.spec.affinity.podAntiAffinity",
            f"with queueing.topology_aware, Kueue's Topology Aware Scheduling picks the nodes, and it counts what each pod requests "
            f"of a node, not one pod per node: two of {pod.instance}'s pods ({_shown(group.need, stated)} each) fit one node of "
            f"{node_set.name} ({_shown(offer, stated, node=True)}), so it may bind both to one node, where the scheduler refuses "
            "the second (one pod per node): the run never starts, and is evicted and admitted again at every waitForPodsReady "
            "timeout",
            f"ask for more than half a node per pod (gpus_per_node above {offer[0] // 2} on {node_set.name}, or cpu or memory above "
            "half its allocatable), so that Topology Aware Scheduling too finds one pod per node; or turn queueing.topology_aware "
            "off (the preflight then checks what the quota admits together)",
            setting="gpus_per_node",
        )


def _charges(runs: list[tuple[PodView, Group, dict[str, Decimal]]], covered: list[str]) -> list[dict[str, Decimal]]:
    """What each run charges its flavor's quota, per covered resource: its pods' requests (and pods) times its pods."""
    return [{r: Decimal(1 if r == "pods" else requests.get(r, 0)) * group.pods for r in covered} for _, group, requests in runs]


def _admitted(charges: list[dict[str, Decimal]], limit: dict[str, Decimal]) -> Iterator[tuple[int, frozenset[int], dict[str, Decimal]]]:
    """Every combination of runs (indexes) whose charges fit `limit`, depth first, as (runs decided, chosen, charges)."""
    resources = list(limit)
    todo: list[tuple[int, frozenset[int], dict[str, Decimal]]] = [(0, frozenset(), dict.fromkeys(resources, Decimal(0)))]
    while todo:
        i, chosen, total = todo.pop()
        yield i, chosen, total
        if i == len(charges):
            continue
        todo.append((i + 1, chosen, total))
        if all(total[r] + charges[i][r] <= limit[r] for r in resources):
            todo.append((i + 1, chosen | {i}, {r: total[r] + charges[i][r] for r in resources}))


def _gpu_sums(charges: list[dict[str, Decimal]], limit: dict[str, Decimal]) -> set[Decimal]:
    """The GPUs of every combination the quota admits (within the budget): the quotas that admit exactly those."""
    out: set[Decimal] = set()
    for seen, (i, _, total) in enumerate(_admitted(charges, limit)):
        if seen > SUBSET_BUDGET:
            break
        if i == len(charges):
            out.add(total.get(GPU, Decimal(0)))
    return out


def _bad_combination(
    groups: list[Group], charges: list[dict[str, Decimal]], limit: dict[str, Decimal], mine: tuple[dict[str, Free], dict[str, int]]
) -> tuple[list[int] | None, bool]:
    """A combination of runs (indexes) the quota `limit` admits together that the nodes cannot hold, or None; and
    whether the search stopped at its budget.

    Kueue may admit any combination whose charges fit the quota, in any order. Holding is monotone (fewer runs fit
    where more did), so only the combinations nothing more can join need a placement search; one that fails is then
    shrunk to the runs it cannot do without, so the finding names those."""
    resources = list(limit)
    held: dict[frozenset[int], bool] = {}

    def holds(chosen: frozenset[int]) -> bool:
        if chosen not in held:
            found = place(mine[0], [groups[i] for i in sorted(chosen)], budget=PLACE_BUDGET, counts=mine[1])
            held[chosen] = found.placed or found.exhausted  # an undecided search is not a proof of harm
        return held[chosen]

    for seen, (i, chosen, total) in enumerate(_admitted(charges, limit)):
        if seen > SUBSET_BUDGET:
            return None, True
        if i < len(groups) or len(chosen) < 2:
            continue
        if any(j not in chosen and all(total[r] + charges[j][r] <= limit[r] for r in resources) for j in range(len(groups))):
            continue  # not maximal: a larger combination holds it
        if not holds(chosen):
            culprit = set(chosen)
            for j in sorted(chosen):  # the runs it cannot do without
                if len(culprit) > 2 and not holds(frozenset(culprit - {j})):
                    culprit.discard(j)
            return sorted(culprit), False
    return None, False


def _admitted_together(
    stack: Stack, node_set: Any, runs: list[tuple[PodView, Group, dict[str, Decimal]]], quota: dict[str, str],
    mine: tuple[dict[str, Free], dict[str, int]],
) -> Iterator[Finding]:  # fmt: skip
    """Without Topology Aware Scheduling Kueue admits by quota only: any combination of a set's queued runs whose
    charges fit the set's quota, in any order. Where one such combination does not fit the set's nodes, the run admitted
    last gets some of its pods placed and waits for the rest: it holds its quota and their GPUs until Kueue evicts it
    at the waitForPodsReady timeout, then is admitted again, and which run loses varies."""
    if len(runs) < 2:
        return
    groups = [g for _, g, _ in runs]
    if place(mine[0], groups, budget=PLACE_BUDGET, counts=mine[1]).placed:
        return  # all of them at once fit: so does any combination
    config = stack.config
    q = config.queueing
    assert q is not None
    limit = {r: quantity_value(v) for r, v in quota.items()}
    charges = _charges(runs, list(limit))
    bad, exhausted = _bad_combination(groups, charges, limit, mine)
    where: ConfigPath = ("queueing", "quota", node_set.name) if node_set.name in q.quota else ("queueing",)
    index = config.node_sets.index(node_set)
    cq = f"ClusterQueue {q.cluster_queue}"
    at = f"spec.resourceGroups[0].flavors[{index}]"
    if exhausted:
        yield warning(
            cq,
            at,
            f"node set {node_set.name!r} has more combinations of queued runs than the preflight looks at ({SUBSET_BUDGET}): it did "
            "not check that every combination its quota admits fits its nodes",
            "run fewer workloads on the set, or state a quota that admits fewer at once (queueing.quota)",
            config=where,
        )
        return
    if bad is None:
        return
    stated = bool(node_set.allocatable_cpu or node_set.allocatable_memory or node_set.node_policies)
    names = " and ".join(f"{runs[i][0].instance} ({groups[i].pods} x {_shown(groups[i].need, stated)})" for i in bad)
    asked = "; ".join(
        f"{quantity_text(sum((charges[i][r] for i in bad), Decimal(0)))} of the {quota[r]} {r}"
        for r in limit
        if r in (GPU, "pods") and any(charges[i][r] for i in bad)
    )
    offer = next(iter(mine[0].values()))
    timeout = (
        f"until Kueue evicts it at the waitForPodsReady timeout ({q.pods_ready.timeout_minutes} minutes) and admits it again; "
        "which run loses varies"
        if q.pods_ready.enabled
        else "for ever: waitForPodsReady is off (queueing.pods_ready), so Kueue never evicts it"
    )
    fixes = []
    largest = max((charges[i].get(GPU, Decimal(0)) for i in range(len(runs))), default=Decimal(0))
    candidates = _gpu_sums(charges, limit) if GPU in limit else set()
    for value in sorted((v for v in candidates if largest <= v < limit[GPU]), reverse=True)[:16]:
        if _bad_combination(groups, charges, {**limit, GPU: value}, mine) == (None, False):
            fixes.append(f"lower queueing.quota[{node_set.name}][{GPU}] to {quantity_text(value)}")
            break
    if "pods" not in limit or limit["pods"] > node_set.size:
        per_node = {**limit, "pods": Decimal(node_set.size)}
        with_pods = _charges(runs, list(per_node))
        if _bad_combination(groups, with_pods, per_node, mine) == (None, False):
            fixes.append(
                f"set queueing.quota[{node_set.name}][pods] to {node_set.size} (Kueue then admits at most as many pods as "
                f"{node_set.name} has nodes)"
            )
    fixes.append("stop one of them (state: stopped)")
    yield error(
        cq,
        at,
        f"Kueue may admit {names} at once: they fit the quota of node set {node_set.name} ({asked}), but its nodes "
        f"({node_set.size} x {_shown(offer, stated, node=True)}) cannot hold their pods at once (one node for each pod of a multi-node "
        f"workload). Kueue admits by quota, not by node: the run admitted last cannot start, and holds its quota and its "
        f"placed pods' GPUs {timeout}",
        ", or ".join(fixes)
        + "; where the cluster's Kueue runs Topology Aware Scheduling and each pod of a multi-node run takes more than half a "
        "node, queueing.topology_aware: true lets Kueue check the nodes itself",
        config=where,
    )


def _vf_demand(config: Any) -> dict[str, int]:
    """The VFs one RDMA pod takes of each SR-IOV resource: one per attachment naming it (components/training.py)."""
    out: dict[str, int] = {}
    for a in config.fabric.attachments if config.fabric else []:
        out[a.resource] = out.get(a.resource, 0) + 1
    return out


def _vf_sets(node_set: Any, per_pod: dict[str, int]) -> int:
    """How many RDMA pods a node of the set has VFs for, where its node_policies state them (the scarcest resource
    decides); UNBOUNDED where they state none of the fabric's resources (the cluster admin's VFs: not known)."""
    offered = node_set.vfs_per_node
    known = [offered[r] // n for r, n in per_pod.items() if r in offered]
    return min(known) if known else UNBOUNDED


def _pod_vfs(pod: PodView, per_pod: dict[str, int]) -> int:
    """VF sets one pod takes: 1 for an RDMA pod (one VF of each attachment), 0 for a pod that requests none."""
    requests = _pod_requests(pod)
    return max((int(-(-requests[r] // n)) for r, n in per_pod.items() if requests.get(r)), default=0)


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
                if w.state == "stopped" and resource in (per_pod := {**config.pod_requests(w), "pods": "1"})
                and (need := quantity_value(per_pod[resource]) * w.nodes) > quota
            ]  # fmt: skip
            if short:
                needs = ", ".join(f"{w.name} ({w.nodes} x {({**config.pod_requests(w), 'pods': '1'})[resource]})" for w, _ in short)
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


def _shown(amounts: Free, stated: bool, node: bool = False) -> str:
    """`4 GPUs`, or `4 GPUs, 32 CPUs, 256Gi` where a node set states CPU and memory (an unstated one is left out), and
    the VFs where a set's node policies state them: a node's `VFs for 2 RDMA pods`, an RDMA pod's `1 VF per attachment`."""
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
