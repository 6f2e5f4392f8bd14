"""Queueing (docs/shared-clusters.md): the ResourceFlavors and quotas are ones Kueue accepts and charges right, and no
edit is one Kueue's webhooks refuse. What the queue admits at once is the capacity rule's (scheduling.py)."""

from collections.abc import Iterator
from functools import partial
from typing import Any

from config.cluster import KUEUE_MAX_LABELS
from config.kube import PRIORITY_CLASS, QUEUE_NAME
from policy.core import Finding, Stack, error, rule


@rule("queue-flavors", "each node set's ResourceFlavor is one Kueue accepts and charges right, with a quota for every resource")
def queue_flavors(stack: Stack) -> Iterator[Finding]:
    c, q = stack.config, stack.config.queueing
    if q is None:
        return
    seen: dict[tuple[tuple[str, str], ...], str] = {}
    flavor_error = partial(error, f"ClusterQueue {q.cluster_queue}", "spec.resourceGroups[0].flavors")
    for i, ns in enumerate(c.node_sets):
        labels, told = c.flavor_labels(ns), tuple(sorted(c.flavor_labels(ns).items()))
        for key, value in ns.labels.items():
            if c.gpu_node_selector.get(key, value) != value:
                yield flavor_error(
                    f"{key}={value} contradicts gpu_node_selector {key}={c.gpu_node_selector[key]}: no node would match both",
                    "label the set with what its nodes carry, or change gpu_node_selector",
                    config=("node_sets", i, "labels", key),
                )
        if len(labels) > KUEUE_MAX_LABELS:
            yield flavor_error(
                f"the ResourceFlavor of {ns.name!r} would name {len(labels)} node labels (gpu_node_selector and the set's labels): "
                f"Kueue takes at most {KUEUE_MAX_LABELS}",
                "Name fewer",
                config=("node_sets", i, "labels"),
            )
        if q.topology_aware and not labels:
            yield flavor_error(
                f"with queueing.topology_aware the ResourceFlavor of {ns.name!r} names a Topology, and Kueue's CRD then needs at "
                "least one node label on it (its nodes are the ones Topology Aware Scheduling counts)",
                "give the set labels its nodes carry (`oc get nodes --show-labels`), or state gpu_node_selector",
                config=("node_sets", i, "labels"),
            )
        if len(c.node_sets) > 1 and (not ns.labels or told in seen):
            yield flavor_error(
                "on a queued cluster each node set's ResourceFlavor must tell its nodes apart by label"
                + (f" (the same as node set {seen[told]!r})" if told in seen else "")
                + ": Kueue charges a workload to the first flavor whose labels its pods match, and then adds them to the pods' "
                f"node selector, so a run on {ns.name!r} could be charged to (and pinned to) another set",
                f"Give node set {ns.name!r} labels its nodes carry and no other set's do",
                config=("node_sets", i, "labels"),
            )
        seen.setdefault(told, ns.name)
        if missing := c.unstated_quota(ns):  # all in one finding: one run of `check` says all the user must add
            fields, resources = " and ".join(f"allocatable_{r}" for r in missing), " and ".join(missing)
            yield flavor_error(
                f"node set {ns.name!r} states no {fields}, so the ClusterQueue has no {resources} quota for it: Kueue admits a "
                f"workload only against a quota for every resource its pods request ({resources} too)",
                f"State {fields} on node_sets[{ns.name}] (the nodes' Allocatable), or "
                + " and ".join(f"queueing.quota[{ns.name}][{r}]" for r in missing)
                + " (what the stack may use of the set)",
                config=("queueing", "quota", ns.name) if ns.name in q.quota else ("queueing", "quota"),
            )


@rule("queue-edits", "no edit of an admitted workload is one Kueue's webhooks refuse (against the committed render)")
def queue_edits(stack: Stack) -> Iterator[Finding]:
    before = (stack.previous or {}).get("workloads") or {}
    q = stack.config.queueing
    moved: list[str] = []  # the workloads whose queue this change moves: one cause (the queue), one finding
    stuck = False  # one of them a StatefulSet losing its queue, which Kueue refuses even when stopped
    stopping = False  # one of them stopped by this edit too, and running on the cluster until that is deployed
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
            # Running in the committed render while the file stops it: the stop is this edit's too, not yet deployed.
            moved.append(f"{what} ({'stopped' if not ran else 'running' if runs else 'running in the committed render'})")
            stopping = stopping or (ran and not runs)
            stuck = stuck or (not queue_now and w.kind == "statefulset")
            change = (queue_was, queue_now)
        if priority_was and not priority_now or priority_now and not priority_was and ran and queue_was:
            if priority_was:
                message = f"this change removes priority {priority_was!r} from {what}: Kueue refuses to remove a workload's priority"
                fix = "keep it, or name another of queueing.priority_classes"
            else:
                message = f"this change gives the running {what} priority {priority_now!r}: Kueue refuses to add one to a running workload"
                fix = "stop it first (state: stopped, `pulumi up`), then give it the priority"
            yield error(f"Workload {w.name}", f'metadata.labels["{PRIORITY_CLASS}"]', message, fix, config=(*path, "priority"))
    if moved:
        queue_was, queue_now = change
        if queue_was and queue_now:
            how = f"changes the queue from {queue_was!r} to {queue_now!r}"
        else:
            how = "takes the workloads out of their queue" if queue_was else f"puts the workloads in queue {queue_now!r}"
        fix = "stop them first (state: stopped, `pulumi up`), then change the queue"
        if stopping:
            fix = (
                "deploy the stop first, without the queue change (`pulumi up`, then `make render` and commit: the committed render "
                "is what `check` compares with), then change the queue"
            )
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
