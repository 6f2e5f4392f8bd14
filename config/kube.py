"""The Kubernetes names the config, the program and the preflight share: annotation and label keys, extended
resource names, and the types that name a config entry and a rendered object between them.

components/ writes these names into the objects and policy/ reads them back; the two sit side by side and import
neither each other, so each name is defined here, once, below both. A name only one side uses stays on that side
(the await annotations in components/lifecycle.py, the label sets of components/kube.py).
"""

from __future__ import annotations

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
