"""The whole stack: config -> components -> resources, and the stack outputs.

`build` is all `__main__.py` runs under `pulumi up`, and all the offline renderer runs under
Pulumi's mock runtime, so both see the same program.
"""

from __future__ import annotations

from typing import Any

from components.bandwidth import BandwidthCheck, bandwidth_objects, check_outputs
from components.networks import RdmaNetworks, copy_namespaces, network_objects
from components.security import ClusterSecurity, security_objects
from components.storage import SharedStorage, patch_objects, standalone_claims, storage_objects
from components.training import LauncherScripts, TrainingWorkload, launcher_objects, workload_objects, workload_outputs
from stacks.model import ClusterConfig


def stack_outputs(config: ClusterConfig) -> dict[str, Any]:
    """The outputs, computed from the config alone (they do not wait on the cluster)."""
    fabric = config.fabric
    if fabric is None:
        nads: list[str] = []
    elif copy_namespaces(config):
        nads = [f"{ns}/{a.network}" for a in fabric.attachments for ns in copy_namespaces(config)]
    else:
        nads = [f"{fabric.nad_source_namespace}/{a.network}" for a in fabric.attachments]
    return {
        "schema_version": "1",  # of schemas/outputs.v1.json (render/outputs.py); bump with incompatible changes
        "cluster": config.name,
        "namespaces": list(config.namespaces),
        "scc": config.security.scc,
        "scc_created": config.security.create,
        "service_accounts": [f"{sa.namespace}/{sa.name}" for sa in config.security.service_accounts],
        "network_attachments": sorted(nads),
        "pvcs": sorted(f"{v.namespace}/{claim}" for claim, v in standalone_claims(config)),
        "workloads": {w.name: workload_outputs(config, w) for w in config.all_workloads()},
        "bandwidth_checks": {c.name: check_outputs(config, c) for c in config.bandwidth_checks},
    }


def pod_namespaces(config: ClusterConfig) -> list[str]:
    """Namespaces where this program runs pods (each needs the launcher ConfigMap)."""
    return [w.namespace for w in config.all_workloads()] + [c.namespace for c in config.bandwidth_checks]


def objects(config: ClusterConfig) -> list[dict[str, Any]]:
    """Every object the stack declares, as plain data, built by the same functions the components
    use (NAD copies from the configured sources, where `pulumi up` copies the live ones). The
    preflight reads these inside `pulumi preview`; the tests hold them equal to the rendering."""
    objs = security_objects(config) + network_objects(config) + storage_objects(config)
    objs += launcher_objects(pod_namespaces(config))
    for w in config.all_workloads():
        objs += workload_objects(config, w)
    for c in config.bandwidth_checks:
        objs += bandwidth_objects(config, c)
    return objs


def patches(config: ClusterConfig) -> list[dict[str, Any]]:
    """Server-side apply patches of objects that exist on the cluster already."""
    return patch_objects(config)


def build(config: ClusterConfig) -> dict[str, Any]:
    """Declare every resource of the stack; returns the stack outputs."""
    security = ClusterSecurity("security", config)
    networks = RdmaNetworks("networks", config)
    storage = SharedStorage("storage", config)
    launcher = LauncherScripts("launcher", pod_namespaces(config))
    # Pods need their service account, SCC grant, networks, claims and launcher before they can start.
    after = [security, networks, storage, launcher]
    for w in config.all_workloads():
        TrainingWorkload(config, w, after)
    # Each check is a Job `pulumi up` waits for; the update fails when a check fails.
    for c in config.bandwidth_checks:
        BandwidthCheck(config, c, after)
    return stack_outputs(config)
