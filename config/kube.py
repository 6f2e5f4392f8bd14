"""The Kubernetes names components/ writes into the objects and policy/ reads back (annotation and label keys, resource
names, the names derived from a config entry), defined once below both."""

import hashlib
import re

ConfigPath = tuple[str | int, ...]  # a path into the stack's config (`("volumes", 0)`): where an object or a finding comes from
ObjectKey = tuple[str, str, str, bool]  # (kind, namespace or "", name, is a patch), as components.program.sources names it

REQUIRED_SCC = "openshift.io/required-scc"  # pod annotation: the SCC admission must run the pod under (or reject it)
NETWORKS = "k8s.v1.cni.cncf.io/networks"  # pod annotation: the NetworkAttachmentDefinitions Multus attaches
RESOURCE_NAME = "k8s.v1.cni.cncf.io/resourceName"  # NAD annotation: the SR-IOV device plugin resource its pods request
INSTANCE = "app.kubernetes.io/instance"  # pod label: the workload (or bandwidth check) the pod belongs to
HOSTNAME = "kubernetes.io/hostname"  # node label: the node's name, which pins and one-pod-per-node select on
SCC_USE_ROLE_PREFIX = "system:openshift:scc:"  # + NAME: the ClusterRole that lets a service account use SCC NAME
GPU = "nvidia.com/gpu"  # the extended resource the NVIDIA device plugin offers a node's GPUs as
QUEUE_NAME = "kueue.x-k8s.io/queue-name"  # label on a StatefulSet or Job: the LocalQueue Kueue admits it through
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"  # label on a StatefulSet or Job: its WorkloadPriorityClass
KUEUE_API = "kueue.x-k8s.io/v1beta2"  # the storage version of Kueue 0.17's CRDs (v1beta1 is served, deprecated)
# Pod template annotation ("true"): Kueue's Topology Aware Scheduling places the pod set on any nodes where each pod fits.
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"
KUBELET_MAX_PODS = 110  # the kubelet's default maxPods

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAME_DIGEST = 8


def derived_name(*parts: str) -> str:
    """A DNS-1123 label of `parts` joined by `-`; where too long, cut and ended by a digest of the whole (stable, apart)."""
    whole = "-".join(parts)
    name = whole.lower().replace("_", "-")
    if len(name) <= 63 and _LABEL.match(name):
        return name
    cut = re.sub(r"[^-a-z0-9]", "-", name)[: 63 - NAME_DIGEST - 1].strip("-")
    return f"{cut}-{hashlib.sha256(whole.encode()).hexdigest()[:NAME_DIGEST]}"


def operator_network_name(namespace: str, network: str) -> str:
    """The SriovNetwork (and its NAD) of `network` for project `namespace`: all live in the operator's one namespace."""
    return derived_name(namespace, network)


def node_policy_name(node_set: str, resource: str, node: str) -> str:
    """The SriovNetworkNodePolicy that makes `resource`'s VFs on one node of a node set (resource without its prefix)."""
    return derived_name(node_set, resource.rpartition("/")[2], node)
