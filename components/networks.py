"""The SR-IOV networks RDMA pods attach: NAD copies per user namespace, references to `default`, or SriovNetworks
from which the SR-IOV operator makes the NADs (fabric.nad_mode copy, reference, operator; docs/networks.md).

The copy is the seeds' `oc get ... | sed ... | oc apply` done declaratively: a NAD with the source's
CNI config and its resourceName annotation (which ties the network to the SR-IOV device plugin
resource the pod must request), without the server-set metadata and the operator's owner-ref. The
config comes from the stack (fabric.attachments[].cni_config), so the project tier can make the
copies with project rights alone; the platform tier reads the live sources in `default` and fails
its preview when the operator's config differs from the stack's (components/prerequisites.py).

In operator mode the platform tier declares, per attachment and namespace that runs RDMA pods, a SriovNetwork in the
operator's namespace whose networkNamespace is that project; the operator (api/v1/helper.go RenderNetAttDef) makes the
NAD there, named after the SriovNetwork, annotated with openshift.io/<resourceName>, its CNI config rendered from the
spec: the fields below are the attachment's cni_config in the spec's terms, so the pods see the network a copy gave
them. The operator keeps that NAD (it rewrites a changed one, and makes it again when deleted).
"""

from __future__ import annotations

import json
from typing import Any

from components.kube import MANAGED_BY, NAD_API, NAD_KIND, Sourced
from config.cluster import SriovAttachment
from config.kube import RESOURCE_NAME, operator_network_name
from config.openshift import SRIOV_API, SRIOV_NETWORK_FIELDS, SRIOV_RESOURCE_PREFIX
from config.stack import ClusterConfig
from config.values import MAX_CNI_DEPTH, bounded_json


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


def operator_namespaces(config: ClusterConfig) -> list[str]:
    """Namespaces the operator makes NADs in: those running RDMA pods, in operator mode."""
    fabric = config.fabric
    if fabric is None or fabric.device_access != "sriov" or fabric.nad_mode != "operator":
        return []
    return rdma_namespaces(config)


def sriov_network_spec(att: SriovAttachment, namespace: str) -> dict[str, Any]:
    """The SriovNetwork spec whose NAD carries the attachment's CNI config (config.cluster.operator_config_problem
    holds that every key of it is one the operator renders)."""
    cni = bounded_json(att.cni_config or "{}", MAX_CNI_DEPTH)
    spec: dict[str, Any] = {"networkNamespace": namespace, "resourceName": att.resource.removeprefix(SRIOV_RESOURCE_PREFIX)}
    spec |= {field: cni[key] for key, (field, _) in SRIOV_NETWORK_FIELDS.items() if key in cni}
    # The spec holds these as JSON text; compact, as the operator strips every blank from ipam anyway.
    spec |= {key: json.dumps(cni[key], separators=(",", ":")) for key in ("ipam", "capabilities") if key in cni}
    return spec


def sriov_network(config: ClusterConfig, att: SriovAttachment, namespace: str) -> dict[str, Any]:
    assert config.fabric is not None
    return {
        "apiVersion": SRIOV_API,
        "kind": "SriovNetwork",
        "metadata": {
            "name": operator_network_name(namespace, att.network),
            "namespace": config.fabric.operator_namespace,
            "labels": dict(MANAGED_BY),
        },
        "spec": sriov_network_spec(att, namespace),
    }


def network_objects(config: ClusterConfig) -> list[Sourced]:
    """The NAD copies, or the SriovNetworks the operator makes the NADs from."""
    fabric = config.fabric
    attachments = list(enumerate(fabric.attachments if fabric else []))
    # Each walks every pod spec once, and the attachments are up to 32.
    copies, served = copy_namespaces(config), operator_namespaces(config)
    return [(("fabric", "attachments", k), nad_copy(config, a.network, ns)) for k, a in attachments for ns in copies] + [
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
