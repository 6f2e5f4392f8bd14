"""The whole stack as data: config -> each concern's objects -> `layout`, every object a run declares with the component
it is declared under and the config entry it comes from.

`components.resources.build` declares exactly this layout under `pulumi up` (`__main__.py`) and under Pulumi's mock
runtime (tools/render.py); `check`, the import plan, `drift` and `status` read it without Pulumi.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from components.bandwidth import bandwidth_objects
from components.images import image_objects
from components.kube import Declared, Sourced
from components.lifecycle import owned
from components.networks import network_objects
from components.nodes import node_objects
from components.queueing import namespace_patches, queue_objects
from components.security import security_objects
from components.sriov import node_policy_objects
from components.storage import patch_objects, storage_objects
from components.tiers import keep_for
from components.training import script_objects, workload_objects
from config.kube import ConfigPath, ObjectKey
from config.stack import ClusterConfig

# The components' Pulumi types (their classes are in components/resources.py). A type is part of the URN of every
# object declared under the component: renaming one would replace each of them. Never rename one.
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

Builder = Callable[[ClusterConfig], list[tuple[Sourced, bool]]]


def _plain(objects_of: Callable[[ClusterConfig], list[Sourced]]) -> Builder:
    return lambda config: [(o, False) for o in objects_of(config)]


# The stack-wide components: (name, type, its objects as ((config entry, object), is a patch)), in declaration order.
# `build` makes each as component(name, config, the objects of the tier it declares, opts).
PARTS: list[tuple[str, str, Builder]] = [
    ("security", SECURITY, _plain(security_objects)),
    ("networks", NETWORKS, _plain(network_objects)),
    ("storage", STORAGE, lambda c: [(o, False) for o in storage_objects(c)] + [(p, True) for p in patch_objects(c)]),
    ("scripts", SCRIPTS, _plain(script_objects)),
    ("images", IMAGES, _plain(image_objects)),
    ("nodes", NODES, _plain(node_objects)),
    ("queueing", QUEUEING, lambda c: [(o, False) for o in queue_objects(c)] + [(p, True) for p in namespace_patches(c)]),
    ("sriov", SRIOV, _plain(node_policy_objects)),
]


def layout(config: ClusterConfig, tier: str = "all") -> list[Declared]:
    """Every object a run of `tier` declares, with its parent component and the config entry it comes from: what
    `build` registers, as data (the import plan reads it; a test holds it equal to the registrations under mocks;
    the preflight names the entry of each object it finds wrong, `sources`)."""
    keep = keep_for(config, tier)
    out: list[Declared] = []
    adopted = {(h.kind, h.namespace or "", h.name) for h in config.hand_made}

    def created(obj: dict[str, Any], patch: bool) -> dict[str, Any]:  # lifecycle.owned says which and why
        meta = obj["metadata"]
        return obj if patch or (obj["kind"], meta.get("namespace") or "", meta["name"]) in adopted else owned(obj)

    for name, typ, objects_of in PARTS:
        out += [Declared(typ, name, created(o, patch), patch, source) for (source, o), patch in objects_of(config) if keep(o)]
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
    """The config entry of each declared object (policy.check's `sources`)."""
    out: dict[ObjectKey, ConfigPath] = {}
    for d in declared:
        meta = d.object.get("metadata") or {}
        out[(str(d.object.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")), d.patch)] = d.source
    return out


def objects(config: ClusterConfig, tier: str = "all") -> list[dict[str, Any]]:
    """Every object the stack (or one tier of it) declares, as plain data, built by the same
    functions the components use. The preflight reads these inside `pulumi preview`; the tests hold
    them equal to the rendering."""
    return [d.object for d in layout(config, tier) if not d.patch]


def patches(config: ClusterConfig, tier: str = "all") -> list[dict[str, Any]]:
    """Server-side apply patches of objects that exist on the cluster already."""
    return [d.object for d in layout(config, tier) if d.patch]
