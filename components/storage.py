"""Data volumes: RWX PVCs shared by all pods of a namespace, per-pod claims, and PVC fixes.

Datasets and workspaces outlive every deployment: each PVC is `protect`ed (a `pulumi destroy`, or a
rename that would replace it, stops with an error instead of deleting data) and `retain_on_delete`
(should protection be lifted, Pulumi forgets the claim but leaves it on the cluster).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kube import MANAGED_BY
from stacks.model import ClusterConfig, Volume

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


class SharedStorage(pulumi.ComponentResource):
    """The stack's PVCs (protected) and patches of existing PVCs."""

    claim_names: pulumi.Output[list[str]]

    def __init__(self, name: str, config: ClusterConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-training:index:SharedStorage", name, None, opts)
        names = []
        for claim, volume in standalone_claims(config):
            k8s.core.v1.PersistentVolumeClaim(
                f"{volume.namespace}/{claim}",
                metadata={"name": claim, "namespace": volume.namespace, "labels": dict(MANAGED_BY)},
                spec=claim_spec(volume),
                opts=pulumi.ResourceOptions.merge(KEEP_DATA, pulumi.ResourceOptions(parent=self)),
            )
            names.append(f"{volume.namespace}/{claim}")
        for fix in config.pvc_fixes:
            # A server-side apply patch of the existing claim: only storageClassName is ours.
            # Kubernetes accepts setting it on a claim that has none and is not yet bound.
            k8s.core.v1.PersistentVolumeClaimPatch(
                f"{fix.namespace}/{fix.pvc}-storage-class",
                metadata={"name": fix.pvc, "namespace": fix.namespace, "annotations": {"gpu-training/reason": fix.reason}},
                spec={"storageClassName": fix.storage_class},
                opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
            )
        self.claim_names = pulumi.Output.from_input(names)
        self.register_outputs({"claim_names": self.claim_names})
