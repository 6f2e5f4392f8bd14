"""Kubernetes types pulumi_kubernetes has no class for, and names shared by the components."""

from __future__ import annotations

import re
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


# The typed pulumi_kubernetes class for each kind this program renders. The object dicts the
# components build are the single source; `declare` only hands them to the matching class.
def _classes() -> dict[str, Any]:
    import pulumi_kubernetes as k8s

    return {
        "v1/ConfigMap": k8s.core.v1.ConfigMap,
        "v1/PersistentVolumeClaim": k8s.core.v1.PersistentVolumeClaim,
        "v1/Pod": k8s.core.v1.Pod,
        "v1/Service": k8s.core.v1.Service,
        "v1/ServiceAccount": k8s.core.v1.ServiceAccount,
        "apps/v1/StatefulSet": k8s.apps.v1.StatefulSet,
        "batch/v1/Job": k8s.batch.v1.Job,
        "rbac.authorization.k8s.io/v1/ClusterRole": k8s.rbac.v1.ClusterRole,
        "rbac.authorization.k8s.io/v1/RoleBinding": k8s.rbac.v1.RoleBinding,
        "patch:v1/PersistentVolumeClaim": k8s.core.v1.PersistentVolumeClaimPatch,
    }


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def logical_name(obj: dict[str, Any]) -> str:
    """The Pulumi resource name: NAMESPACE/NAME, or NAME for cluster-scoped objects."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def declare(obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None, patch: bool = False) -> pulumi.CustomResource:
    """Register one object (or, with `patch`, a server-side apply patch of an existing one)."""
    if obj["kind"] == "SecurityContextConstraints":
        return SecurityContextConstraints(logical_name(obj), obj, opts)
    key = ("patch:" if patch else "") + f"{obj['apiVersion']}/{obj['kind']}"
    cls = _classes()[key]
    kwargs = {_CAMEL.sub("_", k).lower(): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return cls(logical_name(obj), opts=opts, **kwargs)  # type: ignore[no-any-return]
