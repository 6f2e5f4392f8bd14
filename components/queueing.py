"""Gang admission through Kueue (config `queueing`, docs/shared-clusters.md): the queue a shared cluster's workloads
wait in, and the quota it admits them against.

- platform tier: a ResourceFlavor per node set (its node labels: the stack's GPU node selector and the set's own labels;
  the GPU nodes' tolerations), one ClusterQueue whose quota covers every resource the pods request (cpu, memory, the
  GPUs, the SR-IOV resources: `ClusterConfig.queue_quota`), open to the stack's namespaces only, the
  WorkloadPriorityClasses, and the label the Red Hat build of Kueue manages a namespace by
  (kueue.openshift.io/managed=true, a server-side apply patch of each project); with `queueing.topology_aware`, a
  Topology of one level (the node) that every flavor names, so that Kueue's Topology Aware Scheduling admits a run only
  where its pods fit the nodes (each pod set asks for it: components/training.py, the unconstrained-topology
  annotation);
- project tier: a LocalQueue in each of the stack's namespaces, pointing at the ClusterQueue.

The workloads name the LocalQueue themselves (components/training.py: the kueue.x-k8s.io/queue-name label on the
StatefulSet or Job, nowhere else: Kueue 0.17 labels the pods of a queued StatefulSet itself,
pkg/controller/jobs/statefulset/statefulset_pod_reconciler.go). A StatefulSet is one Kueue Workload with one pod set
of `replicas` pods, an Indexed Job one of `parallelism` pods: each is admitted whole or not at all.

Kueue's objects are v1beta2 (kueue.x-k8s.io), the storage version of Kueue 0.17's CRDs; the Red Hat build of Kueue
1.3 (Kueue 0.16) serves it too. Kueue's manager settings (waitForPodsReady, the integrations) are the platform admin's:
nothing here declares them (`queueing.pods_ready` records what the stack expects).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from components.kube import MANAGED_BY, Sourced
from components.training import toleration
from config.cluster import NodeSet
from config.kube import HOSTNAME, KUEUE_API, NAME_DIGEST
from config.stack import ClusterConfig

MANAGED_NAMESPACE = "kueue.openshift.io/managed"
"""Namespace label: the Red Hat build of Kueue manages workloads only in namespaces that carry it (value "true")."""
LOCAL_QUEUE = "LocalQueue"
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # the API server's own label on every namespace: its name


def topology_name(config: ClusterConfig) -> str:
    """The stack's Topology (cluster-scoped, like the flavors that name it): its name keeps two stacks' apart."""
    return f"{config.name}-nodes"


def _flavor_spec(config: ClusterConfig, node_set: NodeSet) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if labels := config.flavor_labels(node_set):
        spec["nodeLabels"] = labels
    if config.gpu_tolerations:
        # Topology Aware Scheduling checks the nodes' taints against the pods' tolerations and the flavor's: the GPU
        # tolerations are the pods' own too, and a toleration a webhook adds to the pods only it would not see.
        spec["tolerations"] = [toleration(t) for t in config.gpu_tolerations]
    if config.queueing is not None and config.queueing.topology_aware:
        spec["topologyName"] = topology_name(config)
    return spec


def flavor_name(config: ClusterConfig, node_set: NodeSet) -> str:
    """A ResourceFlavor is cluster-scoped: the stack's name keeps two stacks' sets of one name apart. With a Topology,
    Kueue's CRD makes the flavor's topologyName, nodeLabels and tolerations immutable (and the first impossible to
    remove), and Kueue keeps a flavor a ClusterQueue names from being deleted: so a topology-aware flavor's name ends
    with a digest of those three, and an edit of them is a new flavor the ClusterQueue moves to (the old one is deleted
    once nothing names it), not an update the API server refuses."""
    base = f"{config.name}-{node_set.name}"
    spec = _flavor_spec(config, node_set)
    if "topologyName" not in spec:
        return base
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:NAME_DIGEST]
    return f"{base}-{digest}"


def flavor(config: ClusterConfig, node_set: NodeSet) -> dict[str, Any]:
    spec = _flavor_spec(config, node_set)
    obj: dict[str, Any] = {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor_name(config, node_set), "labels": dict(MANAGED_BY)},
    }
    if spec:
        obj["spec"] = spec
    return obj


def cluster_queue(config: ClusterConfig) -> dict[str, Any]:
    """One resource group: every node set's flavor covers the same resources, in the same order (Kueue requires it)."""
    assert config.queueing is not None
    quota = config.queue_quota()
    covered = list(next(iter(quota.values())))
    flavors = [
        {"name": flavor_name(config, s), "resources": [{"name": r, "nominalQuota": quota[s.name][r]} for r in covered]}
        for s in config.node_sets
    ]
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": config.queueing.cluster_queue, "labels": dict(MANAGED_BY)},
        "spec": {
            # Only the stack's own projects may submit to it: another tenant's LocalQueue pointing here stays inactive.
            "namespaceSelector": {"matchExpressions": [{"key": NAMESPACE_NAME, "operator": "In", "values": sorted(config.namespaces)}]},
            "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        },
    }


def topology(config: ClusterConfig) -> dict[str, Any]:
    """One level, the node itself: Kueue's Topology Aware Scheduling then counts each node's free resources (its levels
    are node labels; kubernetes.io/hostname, the lowest, makes each node a domain of its own and lets Kueue check the
    pods' node selectors, affinity and taints node by node: kueue v0.17.0 tas_flavor_snapshot.go isLowestLevelNode)."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": topology_name(config), "labels": dict(MANAGED_BY)},
        "spec": {"levels": [{"nodeLabel": HOSTNAME}]},
    }


def queue_objects(config: ClusterConfig) -> list[Sourced]:
    """The Topology (topology-aware only), the flavors, the ClusterQueue, the priority classes and the LocalQueues;
    nothing without queueing."""
    q = config.queueing
    if q is None:
        return []
    out: list[Sourced] = [(("queueing", "topology_aware"), topology(config))] if q.topology_aware else []
    out += [(("node_sets", i), flavor(config, s)) for i, s in enumerate(config.node_sets)]
    out.append((("queueing", "cluster_queue"), cluster_queue(config)))
    for name, value in q.priority_classes.items():
        wpc = {
            "apiVersion": KUEUE_API,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name, "labels": dict(MANAGED_BY)},
            "value": value,
        }
        out.append((("queueing", "priority_classes", name), wpc))
    for i, ns in enumerate(config.namespaces):
        local = {
            "apiVersion": KUEUE_API,
            "kind": LOCAL_QUEUE,
            "metadata": {"name": q.local_queue, "namespace": ns, "labels": dict(MANAGED_BY)},
            "spec": {"clusterQueue": q.cluster_queue},
        }
        out.append((("namespaces", i), local))
    return out


def namespace_patches(config: ClusterConfig) -> list[Sourced]:
    """kueue.openshift.io/managed=true on each project (the Red Hat build's convention), unless the config says not to."""
    q = config.queueing
    if q is None or not q.managed_namespace_label:
        return []
    return [
        (
            ("queueing", "managed_namespace_label"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {MANAGED_NAMESPACE: "true"}}},
        )
        for ns in config.namespaces
    ]
