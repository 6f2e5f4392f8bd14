"""What every concern's objects share: the record of one declared object (`Declared`), its provider type token and Pulumi
name, and the API and label names only the components use (those the preflight reads too are in config/kube.py). The
classes that send the objects to the provider are in components/resources.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.kube import ConfigPath

SCC_API = "security.openshift.io/v1"
NAD_API = "k8s.cni.cncf.io/v1"
NAD_KIND = "NetworkAttachmentDefinition"

# Set by the SR-IOV operator on the NADs it owns; a copy must not claim that owner.
SRIOV_OWNER_REF = "sriovnetwork.openshift.io/owner-ref"

Sourced = tuple[ConfigPath, dict[str, Any]]
"""An object and the config entry it is rendered from: what the stack-wide components' builders return."""


@dataclass(frozen=True)
class Declared:
    """One object a run declares, and the component it is declared under (its URN's parent)."""

    component_type: str
    component_name: str
    object: dict[str, Any]
    patch: bool = False
    """A server-side apply patch of an object that exists (not created, never deleted)."""
    source: ConfigPath = ()
    """The config entry it is rendered from (`("volumes", 0)`, `("workloads", 2, "tcp_variants", 0)`): the preflight names
    it, and the line that writes it, instead of the object (policy.check's `sources`)."""


MANAGED_BY = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": "gpu-training"}

# The kinds this program declares or reads that have no namespace (a platform-tier object; a read id without `/`).
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "SecurityContextConstraints",
        "ClusterRole",
        "ClusterRoleBinding",
        "MachineConfig",
        "Namespace",
        "StorageClass",
        "ResourceFlavor",
        "ClusterQueue",
        "WorkloadPriorityClass",
        "Topology",
    }  # fmt: skip
)


def token(obj: dict[str, Any], patch: bool = False) -> str:
    """The provider's type token for an object: kubernetes:apps/v1:StatefulSet, kubernetes:core/v1:...
    A patch of an existing object is the kind with the suffix Patch (server-side apply)."""
    api = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return f"kubernetes:{api}:{obj['kind']}{'Patch' if patch else ''}"


def logical_name(obj: dict[str, Any]) -> str:
    """The Pulumi resource name: NAMESPACE/NAME, or NAME for cluster-scoped objects (the same string
    as the provider's import id, so an import file can use one for the other)."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])
