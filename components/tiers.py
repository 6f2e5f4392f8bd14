"""Who may declare what: every object belongs to the platform tier (cluster-admin) or the project
tier (a researcher with admin in their project), and a Pulumi stack declares one tier or both.

- platform: cluster-scoped objects (SCC, ClusterRole, MachineConfig; a queued cluster's ResourceFlavors, ClusterQueue,
  Topology, WorkloadPriorityClasses and the label patches of its namespaces), RoleBindings to an SCC's use-role
  (binding it needs `bind` on the role, which project admins do not hold), the SR-IOV operator's SriovNetworks and
  SriovNetworkNodePolicies (in its namespace, wherever that is), and objects in namespaces outside the stack's
  projects (the NFS server's claim in `nfs`, the source NADs in `default`).
- project: everything in the stack's own namespaces: service accounts, NAD copies, PVCs, ConfigMaps,
  Services, Routes, NetworkPolicies, builds, workloads, a queued cluster's LocalQueues.

`gpu-training:tier` in a stack file selects: all (one person with both rights), platform, or project.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from components.kube import CLUSTER_SCOPED_KINDS
from config.kube import SCC_USE_ROLE_PREFIX
from config.openshift import SRIOV_OPERATOR_KINDS
from config.stack import ClusterConfig

Keep = Callable[[dict[str, Any]], bool]
"""Which objects a run of a tier declares."""

PLATFORM = "platform"
PROJECT = "project"

# kind -> the resource `oc auth can-i` names (plural.group).
RESOURCES = {
    "SecurityContextConstraints": "securitycontextconstraints.security.openshift.io",
    "ClusterRole": "clusterroles.rbac.authorization.k8s.io",
    "RoleBinding": "rolebindings.rbac.authorization.k8s.io",
    "MachineConfig": "machineconfigs.machineconfiguration.openshift.io",
    "ServiceAccount": "serviceaccounts",
    "NetworkAttachmentDefinition": "network-attachment-definitions.k8s.cni.cncf.io",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "Service": "services",
    "Namespace": "namespaces",
    "StatefulSet": "statefulsets.apps",
    "Job": "jobs.batch",
    "NetworkPolicy": "networkpolicies.networking.k8s.io",
    "Route": "routes.route.openshift.io",
    "BuildConfig": "buildconfigs.build.openshift.io",
    "ImageStream": "imagestreams.image.openshift.io",
    "StorageClass": "storageclasses.storage.k8s.io",
    "ResourceFlavor": "resourceflavors.kueue.x-k8s.io",
    "ClusterQueue": "clusterqueues.kueue.x-k8s.io",
    "WorkloadPriorityClass": "workloadpriorityclasses.kueue.x-k8s.io",
    "Topology": "topologies.kueue.x-k8s.io",
    "LocalQueue": "localqueues.kueue.x-k8s.io",
    "SriovNetwork": "sriovnetworks.sriovnetwork.openshift.io",
    "SriovNetworkNodePolicy": "sriovnetworknodepolicies.sriovnetwork.openshift.io",
}


def tier_of(obj: dict[str, Any], config: ClusterConfig) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    if obj["kind"] in CLUSTER_SCOPED_KINDS or obj["kind"] in SRIOV_OPERATOR_KINDS or not namespace:
        return PLATFORM
    if obj["kind"] == "RoleBinding" and str((obj.get("roleRef") or {}).get("name", "")).startswith(SCC_USE_ROLE_PREFIX):
        return PLATFORM
    if namespace not in config.namespaces:
        return PLATFORM
    return PROJECT


def keep_for(config: ClusterConfig, tier: str) -> Keep:
    """The filter a run of `tier` declares objects through."""
    if tier == "all":
        return lambda obj: True
    return lambda obj: tier_of(obj, config) == tier


def can_i(obj: dict[str, Any], patch: bool = False) -> list[str]:
    """The `oc auth can-i` lines that tell whether the current user may declare the object (quoted, ready to paste)."""
    meta = obj.get("metadata") or {}
    resource = RESOURCES.get(obj["kind"], obj["kind"].lower() + "s")
    ns = ["-n", meta["namespace"]] if meta.get("namespace") else []
    if patch:
        return [shlex.join(["oc", "auth", "can-i", "patch", f"{resource}/{meta['name']}", *ns])]
    lines = [shlex.join(["oc", "auth", "can-i", "create", resource, *ns])]
    if obj["kind"] == "BuildConfig" and (obj.get("spec") or {}).get("strategy", {}).get("type") == "Docker":
        # Admission checks that the builds may use the Docker strategy (system:build-strategy-docker).
        lines.append(shlex.join(["oc", "auth", "can-i", "create", "builds.build.openshift.io", "--subresource=docker", *ns]))
    role = str((obj.get("roleRef") or {}).get("name", ""))
    if obj["kind"] == "RoleBinding" and role.startswith(SCC_USE_ROLE_PREFIX):
        # Binding a role needs `bind` on it, or every permission it grants (here: `use` of the SCC).
        lines.append(shlex.join(["oc", "auth", "can-i", "bind", f"clusterroles.rbac.authorization.k8s.io/{role}", *ns]))
    return lines


def can_i_read(kind: str, object_id: str) -> str:
    """The `oc auth can-i` line for a read of an object the stack relies on (quoted, ready to paste)."""
    namespace, _, name = object_id.rpartition("/")
    if kind == "Namespace":
        # The API server authorizes `GET /api/v1/namespaces/NAME` inside namespace NAME (a project admin's RoleBinding
        # there allows it); `oc auth can-i` without -n asks about the cluster scope instead and answers no.
        namespace = name
    ns = ["-n", namespace] if namespace else []
    return shlex.join(["oc", "auth", "can-i", "get", f"{RESOURCES.get(kind, kind.lower() + 's')}/{name}", *ns])
