"""How objects reach the kubernetes provider (one generic resource class, one generic read), and
the API and label names only the components use (those the preflight reads too are in config/kube.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
from pulumi_kubernetes import _utilities

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


def _with_version(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    # The SDK's own classes pin the provider plugin this way; do the same so the engine picks the
    # kubernetes provider that matches the pinned pulumi_kubernetes.
    return pulumi.ResourceOptions.merge(_utilities.get_resource_opts_defaults(), opts)


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


class KubernetesObject(pulumi.CustomResource):
    """Any Kubernetes object, registered with the kubernetes provider under its type token.

    The provider receives exactly what the typed pulumi_kubernetes classes would send (token and the
    object as inputs; they only add snake_case keyword arguments around it). Registering the object
    directly keeps one source for every kind, SCCs included (their fields sit at the top level,
    which `apiextensions.CustomResource` cannot express), and spares each `pulumi preview` the
    0.3 s it takes to import the typed classes' modules."""

    def __init__(self, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None, patch: bool = False) -> None:
        super().__init__(token(obj, patch), logical_name(obj), dict(obj), _with_version(opts))


def declare(obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None, patch: bool = False) -> pulumi.CustomResource:
    """Register one object (or, with `patch`, a server-side apply patch of an existing one)."""
    return KubernetesObject(obj, opts, patch)


class ObjectGroup(pulumi.ComponentResource):
    """A component whose objects need nothing of each other: each is declared under it, as it is. A
    subclass names the concern (its TYPE is part of every URN under it: never rename one)."""

    TYPE: ClassVar[str]

    def __init__(self, name: str, config: Any, declared: list[Declared], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        for d in declared:
            declare(d.object, pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


class LiveObject(pulumi.CustomResource):
    """An object the stack relies on but does not own, read from the cluster (`opts.id` is
    NAMESPACE/NAME or NAME). Reads run during `pulumi preview` too, and fail it when the object is
    missing: that is how preview learns what `up` would otherwise find out half-way.

    `apiextensions.CustomResource.get` drops `spec` in Python; declaring the fields to read as the
    resource's outputs keeps them (`getattr(obj, field)` is then an Output)."""

    def __init__(
        self,
        api_version: str,
        kind: str,
        object_id: str,
        fields: tuple[str, ...],
        opts: pulumi.ResourceOptions | None = None,
        name: str | None = None,
    ) -> None:
        typ = token({"apiVersion": api_version, "kind": kind})
        # Outputs only, no inputs: the provider's Read takes the kind from the type token and the namespace
        # and name from the id only when the read carries no apiVersion/kind (provider.go Read); with them it
        # would look in `default`. The SDKs' own reads send nothing either.
        props: dict[str, Any] = {f: None for f in fields}
        read = pulumi.ResourceOptions(id=object_id)
        super().__init__(typ, name or object_id, props, _with_version(pulumi.ResourceOptions.merge(opts, read)))
