"""The SR-IOV networks RDMA pods attach (fabric.nad_mode, docs/networks.md): NAD copies per namespace (copy: the
stack's cni_config and resourceName, not the operator's owner-ref, so project rights make it), the sources in `default`
(reference), or SriovNetworks the operator makes the NADs from (operator: cni_config in its terms, helper.go)."""

import json
from typing import Any

from components.kube import MANAGED_BY, NAD_API, NAD_KIND, Sourced, managed
from config.cluster import SriovAttachment
from config.kube import RESOURCE_NAME, operator_network_name
from config.openshift import SRIOV_API, SRIOV_NETWORK_FIELDS, SRIOV_RESOURCE_PREFIX
from config.stack import ClusterConfig
from config.values import MAX_CNI_DEPTH, bounded_json


def _served(config: ClusterConfig, mode: str) -> list[str]:
    fabric = config.fabric
    return config.rdma_namespaces() if fabric is not None and fabric.device_access == "sriov" and fabric.nad_mode == mode else []


def copy_namespaces(config: ClusterConfig) -> list[str]:
    return _served(config, "copy")


def nad_copy(att: SriovAttachment, namespace: str) -> dict[str, Any]:
    # The annotation before the labels: the order `drift` reports their changes in.
    meta = {"name": att.network, "namespace": namespace, "annotations": {RESOURCE_NAME: att.resource}, "labels": dict(MANAGED_BY)}
    return {"apiVersion": NAD_API, "kind": NAD_KIND, "metadata": meta, "spec": {"config": att.cni_config or "{}"}}


def operator_namespaces(config: ClusterConfig) -> list[str]:
    return _served(config, "operator")


def sriov_network(config: ClusterConfig, att: SriovAttachment, namespace: str) -> dict[str, Any]:
    """The SriovNetwork whose NAD carries the attachment's CNI config (config.cluster checks the operator renders it)."""
    assert config.fabric is not None
    cni = bounded_json(att.cni_config or "{}", MAX_CNI_DEPTH)
    spec: dict[str, Any] = {"networkNamespace": namespace, "resourceName": att.resource.removeprefix(SRIOV_RESOURCE_PREFIX)}
    spec |= {field: cni[key] for key, (field, _) in SRIOV_NETWORK_FIELDS.items() if key in cni}
    # The spec holds these as JSON text; compact, as the operator strips every blank from ipam anyway.
    spec |= {key: json.dumps(cni[key], separators=(",", ":")) for key in ("ipam", "capabilities") if key in cni}
    return managed(SRIOV_API, "SriovNetwork", operator_network_name(namespace, att.network), config.fabric.operator_namespace, spec=spec)


def network_objects(config: ClusterConfig) -> list[Sourced]:
    fabric = config.fabric
    attachments = list(enumerate(fabric.attachments if fabric else []))
    copies, served = copy_namespaces(config), operator_namespaces(config)
    return [(("fabric", "attachments", k), nad_copy(a, ns)) for k, a in attachments for ns in copies] + [
        (("fabric", "attachments", k), sriov_network(config, a, ns)) for k, a in attachments for ns in served
    ]


def attachment_ref(config: ClusterConfig, namespace: str, network: str, interface: str) -> str:
    """How a pod in `namespace` names a network in its networks annotation (`ns/name@ifname`)."""
    assert config.fabric is not None
    mode = config.fabric.nad_mode
    if mode == "operator":
        return f"{namespace}/{operator_network_name(namespace, network)}@{interface}"
    ns = namespace if mode == "copy" else config.fabric.nad_source_namespace
    return f"{ns}/{network}@{interface}"
