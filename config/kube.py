"""The Kubernetes names the config, the program and the preflight share: annotation and label keys, extended
resource names, and the types that name a config entry and a rendered object between them.

components/ writes these names into the objects and policy/ reads them back; the two sit side by side and import
neither each other, so each name is defined here, once, below both. A name only one side uses stays on that side
(the await annotations in components/lifecycle.py, the label sets of components/kube.py).
"""

from __future__ import annotations

import hashlib
import re

ConfigPath = tuple[str | int, ...]
"""A path into the stack's config (`("volumes", 0, "storage_class")`): where an object or a finding comes from."""
ObjectKey = tuple[str, str, str, bool]
"""(kind, namespace or "", name, is a patch): an object as the preflight's `sources` name it (components.program.sources)."""

REQUIRED_SCC = "openshift.io/required-scc"
"""Pod annotation: the SCC admission must run the pod under (or reject it), instead of picking one."""
NETWORKS = "k8s.v1.cni.cncf.io/networks"
"""Pod annotation: the NetworkAttachmentDefinitions Multus attaches to the pod."""
RESOURCE_NAME = "k8s.v1.cni.cncf.io/resourceName"
"""NetworkAttachmentDefinition annotation: the SR-IOV device plugin resource a pod attaching it must request."""
INSTANCE = "app.kubernetes.io/instance"
"""Pod label: the workload (or bandwidth check) the pod belongs to."""
HOSTNAME = "kubernetes.io/hostname"
"""Node label: the node's name, which node pins (node affinity) and one-pod-per-node (anti-affinity) select on."""
SCC_USE_ROLE_PREFIX = "system:openshift:scc:"
"""The ClusterRole that lets a service account use SCC NAME is `system:openshift:scc:NAME` (`oc adm policy add-scc-to-user`)."""

GPU = "nvidia.com/gpu"
"""The extended resource the NVIDIA device plugin offers a node's GPUs as."""

QUEUE_NAME = "kueue.x-k8s.io/queue-name"
"""Label on a StatefulSet or Job: the LocalQueue (in its namespace) Kueue admits it through."""
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
"""Label on a StatefulSet or Job: the WorkloadPriorityClass Kueue admits it by."""
KUEUE_API = "kueue.x-k8s.io/v1beta2"
"""Kueue's API version: v1beta2, the storage version of Kueue 0.17's CRDs (v1beta1 is served, deprecated)."""
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"
"""Pod template annotation ("true"): Kueue's Topology Aware Scheduling places the pod set on any nodes of its flavor's
Topology where each pod fits (queueing.topology_aware)."""
KUBELET_MAX_PODS = 110
"""The kubelet's default maxPods: the pods a node takes, where nothing says otherwise."""

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAME_DIGEST = 8


def derived_name(*parts: str) -> str:
    """A DNS-1123 label (at most 63 characters) made of `parts`, joined by `-`, lowercase, `_` as `-`: the parts as they
    are when they fit, else cut and ended by a digest of the whole, so a name is stable and two long ones stay apart."""
    whole = "-".join(parts)
    name = whole.lower().replace("_", "-")
    if len(name) <= 63 and _LABEL.match(name):
        return name
    cut = re.sub(r"[^-a-z0-9]", "-", name)[: 63 - NAME_DIGEST - 1].strip("-")
    return f"{cut}-{hashlib.sha256(whole.encode()).hexdigest()[:NAME_DIGEST]}"


def operator_network_name(namespace: str, network: str) -> str:
    """The SriovNetwork the platform tier declares for `network` in project `namespace` (fabric.nad_mode operator), and
    so the NAD the SR-IOV operator makes there: the operator names the NAD after the SriovNetwork (RenderNetAttDef),
    and all of them live in its one namespace, so each project's needs its own name."""
    return derived_name(namespace, network)


def node_policy_name(node_set: str, resource: str, node: str) -> str:
    """The SriovNetworkNodePolicy that makes `resource`'s VFs on one node of a node set (resource without its prefix)."""
    return derived_name(node_set, resource.rpartition("/")[2], node)
