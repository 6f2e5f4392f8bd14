"""What every concern's objects share: the record of one declared object (`Declared`), its provider type token and Pulumi
name, and the API and label names only the components use (those the preflight reads too are in config/kube.py)."""

import functools
import importlib.metadata
from dataclasses import dataclass
from typing import Any

from config.kube import ConfigPath

PROVIDER_TOKEN = "pulumi:providers:kubernetes"
SCC_API = "security.openshift.io/v1"
NAD_API = "k8s.cni.cncf.io/v1"
NAD_KIND = "NetworkAttachmentDefinition"

# Set by the SR-IOV operator on the NADs it owns; a copy must not claim that owner.
SRIOV_OWNER_REF = "sriovnetwork.openshift.io/owner-ref"

Sourced = tuple[ConfigPath, dict[str, Any]]  # an object and the config entry it is rendered from


@dataclass(frozen=True)
class Declared:
    """One object a run declares, and the component it is declared under (its URN's parent)."""

    component_type: str
    component_name: str
    object: dict[str, Any]
    patch: bool = False  # a server-side apply patch of an object that exists (not created, never deleted)
    source: ConfigPath = ()  # the config entry it is rendered from (`("volumes", 0)`): the preflight names its line


MANAGED_BY = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": "gpu-training"}
REASON = "gpu-training/reason"  # the stack's reason for an object that reboots nodes or patches another's
Meta = dict[str, str] | None  # an object's labels or annotations


def managed(
    api: str, kind: str, name: str, namespace: str | None = None, *, labels: Meta = None, annotations: Meta = None, **fields: Any
) -> dict[str, Any]:
    """An object of this program: named, in `namespace` if given, with the MANAGED_BY labels (or `labels`), and `fields`."""
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {}), "labels": labels or dict(MANAGED_BY)}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": api, "kind": kind, "metadata": meta, **fields}


# The kinds this program declares or reads that have no namespace (a platform-tier object; a read id without `/`).
CLUSTER_SCOPED_KINDS = frozenset(
    "SecurityContextConstraints ClusterRole ClusterRoleBinding MachineConfig Namespace StorageClass ResourceFlavor ClusterQueue "
    "WorkloadPriorityClass Topology".split()
)


@functools.cache
def provider_version() -> str:
    """The provider plugin the pinned pulumi_kubernetes speaks to (X.Y.Z: PEP 440 and semver agree), without the SDK."""
    return importlib.metadata.version("pulumi-kubernetes")


def token(obj: dict[str, Any], patch: bool = False) -> str:
    """The provider's type token (kubernetes:apps/v1:StatefulSet); a server-side apply patch's kind ends in Patch."""
    api = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return f"kubernetes:{api}:{obj['kind']}{'Patch' if patch else ''}"


def logical_name(obj: dict[str, Any]) -> str:
    """The Pulumi resource name: NAMESPACE/NAME, or NAME (the same string as the provider's import id)."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])
