"""Gang admission through Kueue (config `queueing`, docs/shared-clusters.md): a ResourceFlavor per node set, one
ClusterQueue open to the stack's namespaces only, the priority classes, the namespace label the Red Hat build manages
by, a one-level Topology when `topology_aware`, and a LocalQueue per namespace (kueue.x-k8s.io/v1beta2, Kueue 0.16+)."""

import hashlib
import json
from typing import Any

from components.kube import Sourced, managed
from components.training import toleration
from config.cluster import NodeSet, Queueing
from config.kube import HOSTNAME, KUEUE_API, NAME_DIGEST
from config.stack import ClusterConfig

MANAGED_NAMESPACE = "kueue.openshift.io/managed"  # the Red Hat build manages workloads only in namespaces with it
LOCAL_QUEUE = "LocalQueue"
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # the API server's own label on every namespace: its name


def topology_name(config: ClusterConfig) -> str:
    """Cluster-scoped, like the flavors that name it: the stack's name keeps two stacks' apart."""
    return f"{config.name}-nodes"


def _flavor_spec(config: ClusterConfig, node_set: NodeSet) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if labels := config.flavor_labels(node_set):
        spec["nodeLabels"] = labels
    if config.gpu_tolerations:
        # Topology Aware Scheduling checks the nodes' taints against the flavor's tolerations too, not a webhook's.
        spec["tolerations"] = [toleration(t) for t in config.gpu_tolerations]
    if config.queueing is not None and config.queueing.topology_aware:
        spec["topologyName"] = topology_name(config)
    return spec


def flavor_name(config: ClusterConfig, node_set: NodeSet) -> str:
    """With a Topology, Kueue's CRD makes the flavor's spec immutable: its name ends with a digest of it, so an edit
    is a new flavor the ClusterQueue moves to."""
    base = f"{config.name}-{node_set.name}"
    spec = _flavor_spec(config, node_set)
    if "topologyName" not in spec:
        return base
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:NAME_DIGEST]
    return f"{base}-{digest}"


def flavor(config: ClusterConfig, node_set: NodeSet) -> dict[str, Any]:
    spec = _flavor_spec(config, node_set)
    return managed(KUEUE_API, "ResourceFlavor", flavor_name(config, node_set)) | ({"spec": spec} if spec else {})


def cluster_queue(config: ClusterConfig, q: Queueing) -> dict[str, Any]:
    """One resource group: every node set's flavor covers the same resources, in the same order (Kueue requires it)."""
    quota = config.queue_quota()
    covered = list(next(iter(quota.values())))
    flavors = [
        {"name": flavor_name(config, s), "resources": [{"name": r, "nominalQuota": quota[s.name][r]} for r in covered]}
        for s in config.node_sets
    ]
    spec = {
        # Only the stack's own projects may submit to it: another tenant's LocalQueue pointing here stays inactive.
        "namespaceSelector": {"matchExpressions": [{"key": NAMESPACE_NAME, "operator": "In", "values": sorted(config.namespaces)}]},
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
    }
    return managed(KUEUE_API, "ClusterQueue", q.cluster_queue, spec=spec)


def topology(config: ClusterConfig) -> dict[str, Any]:
    """One level, the node: Kueue then checks the pods' placement node by node (tas_flavor_snapshot.go)."""
    return managed(KUEUE_API, "Topology", topology_name(config), spec={"levels": [{"nodeLabel": HOSTNAME}]})


def queue_objects(config: ClusterConfig) -> list[Sourced]:
    q = config.queueing
    if q is None:
        return []
    out: list[Sourced] = [(("queueing", "topology_aware"), topology(config))] if q.topology_aware else []
    out += [(("node_sets", i), flavor(config, s)) for i, s in enumerate(config.node_sets)]
    out.append((("queueing", "cluster_queue"), cluster_queue(config, q)))
    out += [
        (("queueing", "priority_classes", name), managed(KUEUE_API, "WorkloadPriorityClass", name, value=value))
        for name, value in q.priority_classes.items()
    ]
    local = {"clusterQueue": q.cluster_queue}
    return out + [
        (("namespaces", i), managed(KUEUE_API, LOCAL_QUEUE, q.local_queue, ns, spec=local)) for i, ns in enumerate(config.namespaces)
    ]


def namespace_patches(config: ClusterConfig) -> list[Sourced]:
    q = config.queueing
    if q is None or not q.managed_namespace_label:
        return []
    patch = {"apiVersion": "v1", "kind": "Namespace"}
    return [
        (("queueing", "managed_namespace_label"), {**patch, "metadata": {"name": ns, "labels": {MANAGED_NAMESPACE: "true"}}})
        for ns in config.namespaces
    ]
