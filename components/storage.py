"""Data volumes: RWX PVCs shared by all pods of a namespace, and patches of existing PVCs.

Datasets and workspaces outlive every deployment: each PVC is `protect`ed (a `pulumi destroy`, or a
rename that would replace it, stops with an error instead of deleting data) and `retain_on_delete`
(should protection be lifted, Pulumi forgets the claim but leaves it on the cluster). Per-pod
claims come from StatefulSet volumeClaimTemplates (components/training.py) and are kept by their
retention policy. Existing claims (`existing: true`) are only mounted, never declared.

`pulumi up` waits for a claim to be Bound (the provider's fixed 5 minutes) on an Immediate class,
which proves the storage works; on a WaitForFirstConsumer class it does not wait. Claims of a class
served by a fixed claim (nfs-csi, served by the NFS server whose root claim the stack patches) are
declared after the patch.
"""

from __future__ import annotations

from typing import Any

from components.kube import MANAGED_BY, Sourced
from config.cluster import PvcStorageClassFix, Volume
from config.stack import ClusterConfig

REASON = "gpu-training/reason"


def access_mode(volume: Volume) -> str:
    return "ReadWriteMany" if volume.shared else "ReadWriteOnce"


def claim_spec(volume: Volume) -> dict[str, Any]:
    assert volume.size is not None
    spec: dict[str, Any] = {"accessModes": [access_mode(volume)], "resources": {"requests": {"storage": volume.size}}}
    if volume.storage_class is not None:
        spec["storageClassName"] = volume.storage_class
    return spec


def per_pod_claim_name(volume: Volume, statefulset: str, ordinal: int) -> str:
    """The name Kubernetes gives a StatefulSet's per-pod claim."""
    return f"{volume.name}-{statefulset}-{ordinal}"


def standalone_claims(config: ClusterConfig) -> list[Volume]:
    """The PVCs this component creates: each shared volume the stack owns."""
    return [v for v in config.volumes if v.shared and not v.existing]


def claim_object(volume: Volume) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": volume.name, "namespace": volume.namespace, "labels": dict(MANAGED_BY)},
        "spec": claim_spec(volume),
    }


def fix_patch(fix: PvcStorageClassFix) -> dict[str, Any]:
    """A server-side apply patch of the existing claim: only storageClassName (and a note) are ours.
    Kubernetes accepts setting the class only on a claim that has none and is not bound yet; the
    platform preview reads the claim and refuses any other state (components/prerequisites.py)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": fix.pvc, "namespace": fix.namespace, "annotations": {REASON: fix.reason}},
        "spec": {"storageClassName": fix.storage_class},
    }


def storage_objects(config: ClusterConfig) -> list[Sourced]:
    claims = {id(v) for v in standalone_claims(config)}
    return [(("volumes", i), claim_object(v)) for i, v in enumerate(config.volumes) if id(v) in claims]


def patch_objects(config: ClusterConfig) -> list[Sourced]:
    return [(("pvc_fixes", i), fix_patch(f)) for i, f in enumerate(config.pvc_fixes)]
