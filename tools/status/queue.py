"""Where a queued workload is in Kueue, and why it waits, from its Kueue Workload (Kueue v0.17.0's conditions and
messages), in the stack file's words: a flavor is a node set, the shortfall per resource."""

import re
from typing import Any

from components.queueing import flavor_name
from config.cluster import Queueing
from config.kube import GPU
from config.stack import ClusterConfig
from tools.status.cluster import Cluster, admission, admitted_by, amount, bounded, condition, count, cut, holds, meta, namespace_of
from tools.status.reasons import Subject

# Kueue v0.17.0 can leave a stopped StatefulSet's Workload admitted with no owner, holding its quota (live/kueue.py).
KUEUE_12232 = "a Kueue bug, kubernetes-sigs/kueue#12232, fixed after v0.17.0"

# Kueue's reasons a pod set gets no flavor (pkg/scheduler/flavorassigner/flavorassigner.go, v0.17), one per flavor.
UNUSED = r"insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed"
TOO_BIG = (
    r"insufficient quota for (\S+) in flavor (\S+), previously considered podsets requests \(\S+\) \+ current podset request "
    r"\((\S+)\) > maximum capacity \((\S+)\)"
)
UNCOVERED = r"resource (\S+) unavailable in ClusterQueue"
# Topology Aware Scheduling's refusal (pkg/cache/scheduler/tas_flavor_snapshot.go notFitMessage, formatReasons).
TOPOLOGY = (
    r'topology "([^"]+)" (?:doesn\'t allow to fit any of (\d{1,9})|allows to fit only (\d{1,9}) out of (\d{1,9})) (?:pod|slice)\(s\)'
    r"(?:\. Total nodes: (\d{1,9}); excluded: ([^;]*))?"
)
EXCLUDED = r'(resource|taint) "([^"]+)": (\d{1,9})|(nodeSelector|affinity|topologyDomain): (\d{1,9})'
EXCLUSIONS = {  # the nodes of each kind EXCLUDED counts, in the stack's words
    "resource": "{n} without the {name} one pod requests free",
    "taint": "{n} with the taint {name}, which the pods do not tolerate (gpu_tolerations)",
    "nodeSelector": "{n} without the labels the pods select (gpu_node_selector, node_sets[].labels)",
    "affinity": "{n} outside the pods' node pins (node_sets[].nodes)",
}


def _topology_reason(config: ClusterConfig, match: re.Match[str]) -> str:
    fit, want = int(match.group(3) or 0), int(match.group(2) or match.group(4))
    sets = " or ".join(ns.name for ns in config.node_sets)
    found = re.findall(EXCLUDED, match.group(6) or "")
    why = [EXCLUSIONS[kind or other].format(n=n or m, name=name) for kind, name, n, other, m in found if (kind or other) in EXCLUSIONS]
    nodes = f" ({match.group(5)} nodes: {', '.join(why)})" if match.group(5) and why else ""
    # Kueue v0.17.0 looks again when a run of its queue ends or leaves or a node changes, not when another pod leaves.
    return (
        f"Kueue's Topology Aware Scheduling finds room for {fit} of its {want} pods on the nodes of {sets}{nodes}; it counts "
        "every pod on them, other projects' too: it is admitted once they have room for all of them, when Kueue looks again "
        "(a run of its queue ending or leaving, a change of the nodes) (queueing.topology_aware)"
    )


def queue_reason(config: ClusterConfig, message: str) -> str:
    message = bounded(message)
    sets = {flavor_name(config, ns): ns.name for ns in config.node_sets}
    said: list[str] = []
    for resource, flavor, more in re.findall(UNUSED, message):
        where = f" on node set {sets[flavor]}" if flavor in sets and len(sets) > 1 else ""
        said.append(f"needs {more} more {resource} than the queue has free{where}")
    for resource, flavor, want, cap in re.findall(TOO_BIG, message):
        said.append(
            f"asks for {want} {resource}, more than node set {sets.get(flavor, flavor)} holds in the queue ({cap}): it can never be "
            "admitted (`python -m stacks check` says so: capacity)"
        )
    said += [f"requests {r}, which the queue does not cover (queueing.quota)" for r in re.findall(UNCOVERED, message)]
    said += [_topology_reason(config, m) for m in re.finditer(TOPOLOGY, message)]
    return "; ".join(dict.fromkeys(said)) if said else f"Kueue says: {cut(message)}"


def stranded_reason(wl: dict[str, Any], what: str, effect: str, cluster: Cluster) -> str:
    """What a Workload left holding quota with no owner holds, and the command that frees it."""
    name, namespace = str(meta(wl).get("name")), namespace_of(wl)
    assignments = admission(wl).get("podSetAssignments")
    usage = [a.get("resourceUsage") or {} for a in (assignments if isinstance(assignments, list) else []) if isinstance(a, dict)]
    gpus = sum(amount(u.get(GPU, 0)) for u in usage if isinstance(u, dict))
    queue = admitted_by(wl)
    # What the cluster wrote is shown only as a count a queue can hold (not inf from "9" * 400, not a negative).
    held = (f"{count(gpus)} {GPU}" if 0 < gpus < 10**6 else "quota") + (f" of queue {queue}" if queue else "")
    return (
        f"{what} {name} in {namespace} still holds {held} with no owner left ({KUEUE_12232}): nothing frees it and {effect}; "
        f"a user allowed to delete Kueue Workloads there frees it: "
        + cluster.oc("delete", "workloads.kueue.x-k8s.io", name, "-n", namespace)
    )


def queue_place(config: ClusterConfig, q: Queueing, s: Subject, cluster: Cluster) -> tuple[dict[str, Any], str]:
    """A queued workload's QueueStatus fields (admission, position, workload), and why it waits or what admission means."""
    w = s.workload
    if (wl := cluster.kueue_workload(s.kind, w.namespace, s.object, meta(cluster.get(s.kind, w.namespace, s.object)).get("uid"))) is None:
        return {"admission": "unknown", "position": None, "workload": None}, (
            f"Kueue made no Workload for its {s.kind}: Kueue is not installed, or does not manage namespace {w.namespace} "
            f"(the Red Hat build manages namespaces labelled kueue.openshift.io/managed=true: queueing.managed_namespace_label)"
        )
    name = str(meta(wl).get("name"))
    admitted = {"admission": "admitted", "position": None, "workload": name}
    if holds(wl, "Admitted") or holds(wl, "Finished"):  # Finished: a Job's run ended, and its Job says how
        if q.pods_ready.enabled and not holds(wl, "Finished") and not holds(wl, "PodsReady"):
            return admitted, (
                f"admitted by queue {q.cluster_queue}; Kueue evicts it and queues it again if its pods are not all Ready within "
                f"{q.pods_ready.timeout_minutes} minutes (waitForPodsReady)"
            )
        return admitted, ""
    reserved, evicted = condition(wl, "QuotaReserved"), condition(wl, "Evicted")
    said = [queue_reason(config, str(reserved["message"]))] if reserved.get("message") else []
    if evicted.get("status") == "True" and evicted.get("reason") == "PodsReadyTimeout":
        said = [
            f"evicted: its pods were not all Ready within {q.pods_ready.timeout_minutes} minutes (waitForPodsReady), so Kueue "
            "released its quota and queued it again" + "".join(f"; {why}" for why in said)
        ]
    # A stopped run's Workload Kueue left holding this queue's quota (KUEUE_12232) is often why: named with its command.
    namespaces = sorted({p.namespace for p in config.pod_specs()})
    left = [wl for ns in namespaces for wl in cluster.stranded(ns) if admitted_by(wl) == q.cluster_queue]
    said += [stranded_reason(wl, "Kueue Workload", "it counts against the queue", cluster) for wl in left]
    position = cluster.positions.get((w.namespace, name))
    at = f" (position {position})" if position is not None else ""
    waiting = {"admission": "waiting", "position": position, "workload": name}
    return waiting, f"waiting in queue {q.cluster_queue}{at}" + (": " + "; ".join(said) if said else "")


def broken_admission(q: Queueing, unplaced: int, wanted: int) -> str:
    """A run Kueue admitted (by quota, or the nodes it counts) whose pods the scheduler cannot all place."""
    cause = (
        "the nodes changed since Kueue's Topology Aware Scheduling counted them"
        if q.topology_aware
        else "Kueue admits by quota, not by node: `python -m stacks check` names the runs the quota admits together that "
        "the nodes cannot hold"
    )
    then = (
        f"Kueue evicts it at the waitForPodsReady timeout ({q.pods_ready.timeout_minutes} minutes after its admission), releases "
        "its quota and queues it again; until then it holds its quota and its placed pods' GPUs"
        if q.pods_ready.enabled
        else "waitForPodsReady is off (queueing.pods_ready), so Kueue never evicts it: it holds its quota and its placed pods' "
        "GPUs until it is stopped (state: stopped)"
    )
    return (
        f"broken: admitted by queue {q.cluster_queue}, but {unplaced} of its {wanted} pods cannot be placed, so it cannot start "
        f"({cause}); {then}"
    )
