"""Kubernetes types pulumi_kubernetes has no class for, and names shared by the components."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_kubernetes import _utilities

SCC_API = "security.openshift.io/v1"
NAD_API = "k8s.cni.cncf.io/v1"
NAD_KIND = "NetworkAttachmentDefinition"
NAD_TOKEN = f"kubernetes:{NAD_API}:{NAD_KIND}"

REQUIRED_SCC = "openshift.io/required-scc"
NETWORKS = "k8s.v1.cni.cncf.io/networks"
RESOURCE_NAME = "k8s.v1.cni.cncf.io/resourceName"
# Set by the SR-IOV operator on the NADs it owns; a copy must not claim that owner.
SRIOV_OWNER_REF = "sriovnetwork.openshift.io/owner-ref"

MANAGED_BY = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": "gpu-training"}


def _with_version(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    # The SDK's own classes pin the provider plugin version this way; do the same so the engine
    # picks the kubernetes provider that matches pulumi_kubernetes.
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_utilities.get_version()))


class SecurityContextConstraints(pulumi.CustomResource):
    """An OpenShift SCC. Its fields sit at the top level of the object (no `spec`), which
    `apiextensions.CustomResource` cannot express in Python, so the whole object is the props."""

    def __init__(self, resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"kubernetes:{SCC_API}:SecurityContextConstraints", resource_name, obj, _with_version(opts))


class NetworkAttachmentDefinitionSource(pulumi.CustomResource):
    """A live NAD read from the cluster (`pulumi up` reads it at deploy time; `opts.id` is NS/NAME).

    `apiextensions.CustomResource.get` drops `spec` in Python; declaring the outputs here keeps it."""

    metadata: pulumi.Output[dict[str, Any]]
    spec: pulumi.Output[dict[str, Any]]

    def __init__(self, resource_name: str, namespace: str, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {"apiVersion": NAD_API, "kind": NAD_KIND, "metadata": None, "spec": None}
        read = pulumi.ResourceOptions(id=f"{namespace}/{name}")
        super().__init__(NAD_TOKEN, resource_name, props, _with_version(pulumi.ResourceOptions.merge(opts, read)))
