"""Data volumes: RWX PVCs shared by all pods of a namespace, per-pod claims, and PVC fixes.

Datasets and workspaces outlive every deployment: each PVC is `protect`ed (a `pulumi destroy`, or a
rename that would replace it, stops with an error instead of deleting data) and `retain_on_delete`
(should protection be lifted, Pulumi forgets the claim but leaves it on the cluster).
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.kube import MANAGED_BY, declare, logical_name
from stacks.model import ClusterConfig, PvcStorageClassFix, Volume

KEEP_DATA = pulumi.ResourceOptions(protect=True, retain_on_delete=True)


def access_mode(volume: Volume) -> str:
    return "ReadWriteMany" if volume.shared else "ReadWriteOnce"


def claim_spec(volume: Volume) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": [access_mode(volume)], "resources": {"requests": {"storage": volume.size}}}
    if volume.storage_class is not None:
        spec["storageClassName"] = volume.storage_class
    return spec


def per_pod_claim_name(volume: Volume, pod: str) -> str:
    """The name Kubernetes gives a StatefulSet's per-pod claim; single pods use the same scheme."""
    return f"{volume.name}-{pod}"


def standalone_claims(config: ClusterConfig) -> list[tuple[str, Volume]]:
    """(claim name, volume) of every PVC this component creates: each shared volume once, and a
    per-pod claim for single-pod workloads (StatefulSets make theirs from volumeClaimTemplates)."""
    claims = [(v.name, v) for v in config.volumes if v.shared]
    for w in config.all_workloads():
        if w.kind == "pod":
            for m in w.mounts:
                v = config.volume(w.namespace, m.volume)
                if not v.shared:
                    claims.append((per_pod_claim_name(v, w.name), v))
    return claims


def claim_object(name: str, volume: Volume) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": volume.namespace, "labels": dict(MANAGED_BY)},
        "spec": claim_spec(volume),
    }


def fix_patch(fix: PvcStorageClassFix) -> dict[str, Any]:
    """A server-side apply patch of the existing claim: only storageClassName (and a note) are ours.
    Kubernetes accepts setting the class on a claim that has none and is not bound yet."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": fix.pvc, "namespace": fix.namespace, "annotations": {"gpu-training/reason": fix.reason}},
        "spec": {"storageClassName": fix.storage_class},
    }


def storage_objects(config: ClusterConfig) -> list[dict[str, Any]]:
    return [claim_object(name, v) for name, v in standalone_claims(config)]


def patch_objects(config: ClusterConfig) -> list[dict[str, Any]]:
    return [fix_patch(f) for f in config.pvc_fixes]


class SharedStorage(pulumi.ComponentResource):
    """The stack's PVCs (protected) and patches of existing PVCs."""

    claim_names: pulumi.Output[list[str]]

    def __init__(self, name: str, config: ClusterConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-training:index:SharedStorage", name, None, opts)
        names = []
        for obj in storage_objects(config):
            declare(obj, pulumi.ResourceOptions.merge(KEEP_DATA, pulumi.ResourceOptions(parent=self)))
            names.append(logical_name(obj))
        for obj in patch_objects(config):
            # Removing the patch from the stack must leave the NFS server's claim alone.
            declare(obj, pulumi.ResourceOptions(parent=self, retain_on_delete=True), patch=True)
        self.claim_names = pulumi.Output.from_input(names)
        self.register_outputs({"claim_names": self.claim_names})
