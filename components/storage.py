"""Data volumes: RWX PVCs shared by all pods of a namespace (protected and retained: components/resources.py), and
patches of existing PVCs. Per-pod claims are StatefulSet volumeClaimTemplates; existing claims are only mounted."""

from typing import Any

from components.kube import REASON, Sourced, managed
from config.cluster import PvcStorageClassFix, Volume
from config.stack import ClusterConfig


def claim_spec(volume: Volume) -> dict[str, Any]:
    mode = "ReadWriteMany" if volume.shared else "ReadWriteOnce"
    spec: dict[str, Any] = {"accessModes": [mode], "resources": {"requests": {"storage": volume.size}}}
    if volume.storage_class is not None:
        spec["storageClassName"] = volume.storage_class
    return spec


def fix_patch(fix: PvcStorageClassFix) -> dict[str, Any]:
    """A server-side apply patch of the existing claim: only storageClassName (and a note) are ours."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": fix.pvc, "namespace": fix.namespace, "annotations": {REASON: fix.reason}},
        "spec": {"storageClassName": fix.storage_class},
    }


def storage_objects(config: ClusterConfig) -> list[Sourced]:
    return [
        (("volumes", i), managed("v1", "PersistentVolumeClaim", v.name, v.namespace, spec=claim_spec(v)))
        for i, v in enumerate(config.volumes)
        if v.shared and not v.existing
    ]


def patch_objects(config: ClusterConfig) -> list[Sourced]:
    return [(("pvc_fixes", i), fix_patch(f)) for i, f in enumerate(config.pvc_fixes)]
