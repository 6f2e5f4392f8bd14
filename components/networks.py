"""The SR-IOV networks RDMA pods attach: NAD copies per user namespace, or references to `default`.

The copy is the seeds' `oc get ... | sed ... | oc apply` done declaratively: a NAD with the source's
CNI config and its resourceName annotation (which ties the network to the SR-IOV device plugin
resource the pod must request), without the server-set metadata and the operator's owner-ref. The
config comes from the stack (fabric.attachments[].cni_config), so the project tier can make the
copies with project rights alone; the platform tier reads the live sources in `default` and fails
its preview when the operator's config differs from the stack's (components/prerequisites.py).
"""

from __future__ import annotations

from typing import Any

from components.kube import MANAGED_BY, NAD_API, NAD_KIND, ObjectGroup, Sourced
from config.kube import RESOURCE_NAME
from config.stack import ClusterConfig


def rdma_namespaces(config: ClusterConfig) -> list[str]:
    """Namespaces that run RDMA pods (workloads in any state, enabled checks)."""
    return sorted({w.namespace for w in config.pod_specs() if w.transport == "rdma"})


def copy_namespaces(config: ClusterConfig) -> list[str]:
    """Namespaces that get copies: those running RDMA pods, on an SR-IOV cluster in copy mode."""
    fabric = config.fabric
    if fabric is None or fabric.device_access != "sriov" or fabric.nad_mode != "copy":
        return []
    return rdma_namespaces(config)


def nad_copy(config: ClusterConfig, network: str, namespace: str) -> dict[str, Any]:
    assert config.fabric is not None
    att = next(a for a in config.fabric.attachments if a.network == network)
    return {
        "apiVersion": NAD_API,
        "kind": NAD_KIND,
        "metadata": {
            "name": att.network,
            "namespace": namespace,
            "annotations": {RESOURCE_NAME: att.resource},
            "labels": dict(MANAGED_BY),
        },
        "spec": {"config": att.cni_config or "{}"},
    }


def network_objects(config: ClusterConfig) -> list[Sourced]:
    """The NAD copies."""
    fabric = config.fabric
    namespaces = copy_namespaces(config)  # once: it walks every pod spec, and the attachments are up to 32
    return [
        (("fabric", "attachments", k), nad_copy(config, a.network, ns))
        for k, a in enumerate(fabric.attachments if fabric else [])
        for ns in namespaces
    ]


def attachment_ref(config: ClusterConfig, namespace: str, network: str, interface: str) -> str:
    """How a pod in `namespace` names a network in its networks annotation (`ns/name@ifname`)."""
    assert config.fabric is not None
    ns = namespace if config.fabric.nad_mode == "copy" else config.fabric.nad_source_namespace
    return f"{ns}/{network}@{interface}"


class RdmaNetworks(ObjectGroup):
    """The NAD copies of the SR-IOV networks in every namespace that runs RDMA pods."""

    TYPE = "gpu-training:index:RdmaNetworks"
