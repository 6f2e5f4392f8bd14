"""The SR-IOV networks RDMA pods attach: NAD copies per user namespace, or references to `default`.

The copy is the seeds' `oc get ... | sed ... | oc apply` done declaratively: the source NAD is read
live from the cluster at deploy time (so the CNI config the SR-IOV operator wrote is what gets
copied), the server-set metadata is dropped, and the resourceName annotation, which ties the
network to the SR-IOV device plugin resource the pod must request, is kept.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.kube import (
    MANAGED_BY,
    NAD_API,
    NAD_KIND,
    RESOURCE_NAME,
    SRIOV_OWNER_REF,
    KubernetesObject,
    NetworkAttachmentDefinitionSource,
)
from stacks.model import ClusterConfig

# Metadata the API server (or the operator that owns the source) sets; a copy must not carry it.
SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink", "ownerReferences")
DROPPED_ANNOTATIONS = (SRIOV_OWNER_REF, "kubectl.kubernetes.io/last-applied-configuration")


def copied_metadata(source: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The source NAD's metadata as a copy in `namespace` must carry it."""
    annotations = {k: v for k, v in (source.get("annotations") or {}).items() if k not in DROPPED_ANNOTATIONS}
    labels = {**(source.get("labels") or {}), **MANAGED_BY}
    meta = {k: v for k, v in source.items() if k not in SERVER_SET and k not in ("annotations", "labels", "namespace")}
    return {**meta, "namespace": namespace, "annotations": annotations, "labels": labels}


def configured_source(config: ClusterConfig, network: str) -> dict[str, Any]:
    """The source NAD as the stack config describes it: what the offline renderer and the preflight
    use in place of the live read."""
    assert config.fabric is not None
    att = next(a for a in config.fabric.attachments if a.network == network)
    return {
        "metadata": {"name": att.network, "namespace": config.fabric.nad_source_namespace, "annotations": {RESOURCE_NAME: att.resource}},
        "spec": {"config": att.cni_config or "{}"},
    }


def nad_copy(source: dict[str, Any], namespace: str) -> dict[str, Any]:
    metadata = copied_metadata(source["metadata"], namespace)
    return {"apiVersion": NAD_API, "kind": NAD_KIND, "metadata": metadata, "spec": {"config": source["spec"]["config"]}}


def network_objects(config: ClusterConfig) -> list[dict[str, Any]]:
    """The NAD copies, from the configured sources (the component copies the live ones)."""
    assert config.fabric is not None or not copy_namespaces(config)
    return [
        nad_copy(configured_source(config, a.network), ns)
        for a in (config.fabric.attachments if config.fabric else [])
        for ns in copy_namespaces(config)
    ]


def copy_namespaces(config: ClusterConfig) -> list[str]:
    """Namespaces that get copies: every user namespace of an SR-IOV cluster in copy mode."""
    fabric = config.fabric
    if fabric is None or fabric.device_access != "sriov" or fabric.nad_mode != "copy":
        return []
    return list(config.namespaces)


def attachment_ref(config: ClusterConfig, namespace: str, network: str, interface: str) -> str:
    """How a pod in `namespace` names a network in its networks annotation (`name@ifname`)."""
    assert config.fabric is not None
    ns = namespace if config.fabric.nad_mode == "copy" else config.fabric.nad_source_namespace
    return f"{ns}/{network}@{interface}"


class RdmaNetworks(pulumi.ComponentResource):
    """Reads each SR-IOV NAD once and copies it into every user namespace (or only references it)."""

    network_names: pulumi.Output[list[str]]

    def __init__(self, name: str, config: ClusterConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-training:index:RdmaNetworks", name, None, opts)
        fabric = config.fabric
        names: list[str] = []
        targets = copy_namespaces(config)
        if fabric is not None and targets:
            for att in fabric.attachments:
                source = NetworkAttachmentDefinitionSource(
                    f"{fabric.nad_source_namespace}/{att.network}", fabric.nad_source_namespace, att.network,
                    pulumi.ResourceOptions(parent=self),
                )
                for ns in targets:
                    copy = pulumi.Output.all(source.metadata, source.spec).apply(
                        lambda ms, ns=ns: nad_copy({"metadata": ms[0], "spec": ms[1]}, ns)  # type: ignore[misc]  # default-bound ns
                    )
                    KubernetesObject(
                        {"apiVersion": NAD_API, "kind": NAD_KIND, "metadata": copy["metadata"], "spec": copy["spec"]},
                        pulumi.ResourceOptions(parent=self),
                        name=f"{ns}/{att.network}",
                    )

                    names.append(f"{ns}/{att.network}")
        elif fabric is not None:
            names = [f"{fabric.nad_source_namespace}/{a.network}" for a in fabric.attachments]
        self.network_names = pulumi.Output.from_input(names)
        self.register_outputs({"network_names": self.network_names})
