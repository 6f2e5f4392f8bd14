"""The whole stack as data: every object a run declares, with its component and config entry (`layout`).
`components.resources.build` declares exactly this; `check`, the import plan, `drift` and `status` read it without Pulumi."""

from collections.abc import Callable
from typing import Any

from components.bandwidth import bandwidth_objects
from components.images import image_objects
from components.kube import Declared, Sourced
from components.lifecycle import owned
from components.networks import network_objects
from components.nodes import node_objects, node_policy_objects
from components.queueing import namespace_patches, queue_objects
from components.security import security_objects
from components.storage import patch_objects, storage_objects
from components.tiers import keep_for
from components.training import script_objects, workload_objects
from config.kube import ConfigPath, ObjectKey
from config.stack import ClusterConfig

# The components' Pulumi types: part of the URN of every object declared under them. Never rename one.
SECURITY = "gpu-training:index:ClusterSecurity"
NETWORKS = "gpu-training:index:RdmaNetworks"
STORAGE = "gpu-training:index:SharedStorage"
SCRIPTS = "gpu-training:index:PodScripts"
IMAGES = "gpu-training:index:ImageBuilds"
NODES = "gpu-training:index:NodeConfiguration"
QUEUEING = "gpu-training:index:Queueing"
SRIOV = "gpu-training:index:SriovNodePolicies"
PREREQUISITES = "gpu-training:index:Prerequisites"
TRAINING_WORKLOAD = "gpu-training:index:TrainingWorkload"
BANDWIDTH_CHECK = "gpu-training:index:BandwidthCheck"

Objects = Callable[[ClusterConfig], list[Sourced]]
# The stack-wide components: (name, type, its objects, its patches), in declaration order.
PARTS: list[tuple[str, str, Objects, Objects | None]] = [
    ("security", SECURITY, security_objects, None),
    ("networks", NETWORKS, network_objects, None),
    ("storage", STORAGE, storage_objects, patch_objects),
    ("scripts", SCRIPTS, script_objects, None),
    ("images", IMAGES, image_objects, None),
    ("nodes", NODES, node_objects, None),
    ("queueing", QUEUEING, queue_objects, namespace_patches),
    ("sriov", SRIOV, node_policy_objects, None),
]


def layout(config: ClusterConfig, tier: str = "all") -> list[Declared]:
    """Every object a run of `tier` declares, with its parent component and the config entry it comes from."""
    keep = keep_for(config, tier)
    out: list[Declared] = []
    adopted = {(h.kind, h.namespace or "", h.name) for h in config.hand_made}

    def created(obj: dict[str, Any], patch: bool) -> dict[str, Any]:  # lifecycle.owned says which and why
        meta = obj["metadata"]
        return obj if patch or (obj["kind"], meta.get("namespace") or "", meta["name"]) in adopted else owned(obj)

    for name, typ, objects_of, patches_of in PARTS:
        both = [(s, False) for s in objects_of(config)] + [(s, True) for s in (patches_of(config) if patches_of else [])]
        out += [Declared(typ, name, created(o, patch), patch, source) for (source, o), patch in both if keep(o)]
    for i, c in enumerate(config.bandwidth_checks):
        if c.enabled:
            name = f"{c.namespace}/{c.name}"
            objs = [created(o, False) for o in bandwidth_objects(config, c) if keep(o)]
            out += [Declared(BANDWIDTH_CHECK, name, o, source=("bandwidth_checks", i)) for o in objs]
    for source, w in config.located_workloads():
        name = f"{w.namespace}/{w.name}"
        out += [Declared(TRAINING_WORKLOAD, name, created(o, False), source=source) for o in workload_objects(config, w) if keep(o)]
    return out


def sources(declared: list[Declared]) -> dict[ObjectKey, ConfigPath]:
    return {
        (d.object["kind"], d.object["metadata"].get("namespace") or "", d.object["metadata"]["name"], d.patch): d.source for d in declared
    }


def objects(config: ClusterConfig, tier: str = "all") -> list[dict[str, Any]]:
    return [d.object for d in layout(config, tier) if not d.patch]


def patches(config: ClusterConfig, tier: str = "all") -> list[dict[str, Any]]:
    return [d.object for d in layout(config, tier) if d.patch]
