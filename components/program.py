"""The whole stack: config -> components -> resources; `build` returns the stack outputs (components/outputs.py).

`build` is all `__main__.py` runs under `pulumi up`, and all the offline renderer runs under
Pulumi's mock runtime, so both see the same program.

Every resource goes through one explicit kubernetes provider, named after the cluster, whose context
comes from the stack file (the stack files disable the default provider, so nothing can reach
whatever kubeconfig context happens to be current). `clusterIdentifier` is the cluster's name: a
kubeconfig that moves (a CI runner's temporary file, another user's path) never replaces the provider
and with it every object. `enableConfigMapMutable` updates the launcher and script ConfigMaps in
place instead of deleting them under the pods that mount them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
from pulumi_kubernetes import Provider
from pulumi_kubernetes.provider import KubeClientSettingsArgs

from components.bandwidth import BandwidthCheck, bandwidth_objects
from components.images import ImageBuilds, image_objects
from components.kube import Declared, Sourced
from components.lifecycle import owned
from components.networks import RdmaNetworks, network_objects
from components.nodes import NodeConfiguration, node_objects
from components.outputs import stack_outputs
from components.prerequisites import Prerequisites
from components.queueing import Queueing, namespace_patches, queue_objects
from components.security import ClusterSecurity, security_objects
from components.sriov import SriovNodePolicies, node_policy_objects
from components.storage import SharedStorage, patch_objects, storage_objects
from components.tiers import keep_for
from components.training import PodScripts, TrainingWorkload, script_objects, workload_objects
from config.kube import ConfigPath, ObjectKey
from config.stack import ClusterConfig

Builder = Callable[[ClusterConfig], list[tuple[Sourced, bool]]]


def _plain(objects_of: Callable[[ClusterConfig], list[Sourced]]) -> Builder:
    return lambda config: [(o, False) for o in objects_of(config)]


# The stack-wide components: (name, class, its objects as ((config entry, object), is a patch)), in declaration order.
# `build` makes each as component(name, config, the objects of the tier it declares, opts).
PARTS: list[tuple[str, Any, Builder]] = [
    ("security", ClusterSecurity, _plain(security_objects)),
    ("networks", RdmaNetworks, _plain(network_objects)),
    ("storage", SharedStorage, lambda c: [(o, False) for o in storage_objects(c)] + [(p, True) for p in patch_objects(c)]),
    ("scripts", PodScripts, _plain(script_objects)),
    ("images", ImageBuilds, _plain(image_objects)),
    ("nodes", NodeConfiguration, _plain(node_objects)),
    ("queueing", Queueing, lambda c: [(o, False) for o in queue_objects(c)] + [(p, True) for p in namespace_patches(c)]),
    ("sriov", SriovNodePolicies, _plain(node_policy_objects)),
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

    for name, component, objects_of in PARTS:
        out += [Declared(component.TYPE, name, created(o, patch), patch, source) for (source, o), patch in objects_of(config) if keep(o)]
    for i, c in enumerate(config.bandwidth_checks):
        if c.enabled:
            name = f"{c.namespace}/{c.name}"
            objs = [created(o, False) for o in bandwidth_objects(config, c) if keep(o)]
            out += [Declared(BandwidthCheck.TYPE, name, o, source=("bandwidth_checks", i)) for o in objs]
    for source, w in config.located_workloads():
        name = f"{w.namespace}/{w.name}"
        out += [Declared(TrainingWorkload.TYPE, name, created(o, False), source=source) for o in workload_objects(config, w) if keep(o)]
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


def build(
    config: ClusterConfig, tier: str = "all", context: str | None = None, adopt: bool = False, force: bool | None = None
) -> dict[str, Any]:
    """Declare every resource of the stack's tier (`layout`, each under its component); returns the stack
    outputs. `adopt` is the first run of docs/adoption.md ("The other first run"): create-or-take-over every object,
    forcing the program's fields over other field managers (kubernetes:upsertExistingObjects and
    kubernetes:enablePatchForce in the stack file, which only this explicit provider can honour: the
    default one is disabled). `force` alone (default: `adopt`) is the run after `pulumi import`."""
    # Every setting explicit: the SDK fills a setting left out from the environment (PULUMI_K8S_*, KUBECONFIG), so
    # an exported variable could take objects over without the stack file saying so, turn server-side apply off
    # under the claim patch, or make the provider differ between a laptop and the CI runner. An empty kubeconfig
    # is client-go's own loading ($KUBECONFIG, a list of files too, else ~/.kube/config); the context picks the cluster.
    # Every boolean and the client's limits too: the SDK fills an unset one from PULUMI_K8S_* (with
    # PULUMI_K8S_SKIP_UPDATE_UNREACHABLE=true every read passes against a dead cluster), and the provider prefers a
    # set value over its own environment. The client limits are the provider's documented defaults.
    provider = Provider(
        config.name,
        kubeconfig="",
        context=context,
        cluster_identifier=config.name,
        enable_server_side_apply=True,
        enable_config_map_mutable=True,
        enable_secret_mutable=False,
        upsert_existing_objects=adopt,
        enable_patch_force=adopt if force is None else force,
        delete_unreachable=False,
        skip_update_unreachable=False,
        suppress_deprecation_warnings=False,
        suppress_helm_hook_warnings=False,
        kube_client_settings=KubeClientSettingsArgs(burst=120, qps=50, timeout=32),
    )
    opts = pulumi.ResourceOptions(providers={"kubernetes": provider})
    parts: dict[tuple[str, str], list[Declared]] = {}
    for d in layout(config, tier):
        parts.setdefault((d.component_type, d.component_name), []).append(d)
    # Pods need the verdicts of the reads, and the service accounts, grants, networks, claims, scripts, images
    # and node configuration before they start; a component this tier declares nothing of is left out.
    prerequisites = Prerequisites("prerequisites", config, tier, opts)
    after: list[pulumi.Input[pulumi.Resource]] = [*prerequisites.verdicts]
    for name, component, _ in PARTS:
        if declared := parts.get((component.TYPE, name)):
            after.append(component(name, config, declared, opts))
    # Stopped workloads first: `up` waits until their pods are gone (components/lifecycle.py), so the nodes they held
    # are free before a bandwidth check starts. Gated by the check, a workload stopped in the same edit that enables
    # it would hold the check's nodes until the check's verdict, which could then never come (found live:
    # live/tests/test_scheduling.py). A stopped Job is not declared at all: Pulumi deletes it at the end of `up`, after
    # the check, which the capacity rule counts (docs/lifecycle.md).
    stopping: list[pulumi.Resource] = []
    workloads = [(w, parts.get((TrainingWorkload.TYPE, f"{w.namespace}/{w.name}"))) for w in config.all_workloads()]
    for w, declared in workloads:
        if declared and w.state == "stopped":
            stopping.append(TrainingWorkload(f"{w.namespace}/{w.name}", declared, after, opts))
    # An enabled bandwidth check runs next; the running workloads of its transport wait for its verdict.
    gates: dict[str, list[pulumi.Resource]] = {}
    for c in config.enabled_checks():
        if declared := parts.get((BandwidthCheck.TYPE, f"{c.namespace}/{c.name}")):
            gates.setdefault(c.transport, []).append(BandwidthCheck(c, declared, [*after, *stopping], opts))
    for w, declared in workloads:
        if declared and w.state != "stopped":
            TrainingWorkload(f"{w.namespace}/{w.name}", declared, [*after, *gates.get(w.transport, [])], opts)
    return stack_outputs(config, tier)
