"""What reboots the GPU nodes, off by default: MachineConfigs for the pool (docs/stacks.md: a CRI-O memlock drop-in for
the node-limit strategy, as CRI-O applies only `default_ulimits`, and IOMMU passthrough for GPUDirect RDMA), and one
SriovNetworkNodePolicy per node_sets[].node_policies entry and node, selected by hostname, making RDMA VFs of the
fabric's link type (each drains and reboots its node when applied, changed or deleted: node_reboot_reason)."""

import base64
from typing import Any

from components.kube import MANAGED_BY, REASON, Sourced, managed
from config.cluster import NodeSet, SriovNodePolicy
from config.kube import HOSTNAME, node_policy_name
from config.openshift import SRIOV_API, SRIOV_RESOURCE_PREFIX
from config.stack import ClusterConfig

IGNITION_VERSION = "3.2.0"  # accepted by every OpenShift 4.x this program targets
CRIO_MEMLOCK_PATH = "/etc/crio/crio.conf.d/99-memlock"
CRIO_MEMLOCK = '[crio.runtime]\ndefault_ulimits = ["memlock=-1:-1"]\n'


def _machine_config(name: str, role: str, spec: dict[str, Any], reason: str) -> dict[str, Any]:
    labels = {**MANAGED_BY, "machineconfiguration.openshift.io/role": role}
    annotations = {REASON: reason} if reason else {}
    return managed("machineconfiguration.openshift.io/v1", "MachineConfig", name, labels=labels, annotations=annotations, spec=spec)


def node_objects(config: ClusterConfig) -> list[Sourced]:
    nl = config.node_level
    objs: list[Sourced] = []
    if nl.crio_memlock_unlimited:
        source = "data:text/plain;charset=utf-8;base64," + base64.b64encode(CRIO_MEMLOCK.encode()).decode()
        file = {"path": CRIO_MEMLOCK_PATH, "mode": 0o644, "overwrite": True, "contents": {"source": source}}
        spec: dict[str, Any] = {"config": {"ignition": {"version": IGNITION_VERSION}, "storage": {"files": [file]}}}
        objs.append((("node_level", "crio_memlock_unlimited"), _machine_config(f"99-{nl.pool}-crio-memlock", nl.pool, spec, nl.reason)))
    if nl.iommu_passthrough:
        spec = {"config": {"ignition": {"version": IGNITION_VERSION}}, "kernelArguments": ["iommu=pt"]}
        objs.append((("node_level", "iommu_passthrough"), _machine_config(f"99-{nl.pool}-iommu-passthrough", nl.pool, spec, nl.reason)))
    return objs


def node_policy(config: ClusterConfig, node_set: NodeSet, policy: SriovNodePolicy, node: str) -> dict[str, Any]:
    assert config.fabric is not None
    nics = {k: v for k, v in (("vendor", policy.vendor), ("deviceID", policy.device_id), ("pfNames", list(policy.pf_names))) if v}
    spec: dict[str, Any] = {
        "resourceName": policy.resource.removeprefix(SRIOV_RESOURCE_PREFIX),
        "nodeSelector": {HOSTNAME: node},
        "numVfs": policy.num_vfs,
        "nicSelector": nics,
        "deviceType": "netdevice",
        "isRdma": True,
        "linkType": config.fabric.link_type(),
    }
    if policy.mtu is not None:
        spec["mtu"] = policy.mtu
    name = node_policy_name(node_set.name, policy.resource, node)
    reason = {REASON: node_set.node_reboot_reason or ""}
    return managed(SRIOV_API, "SriovNetworkNodePolicy", name, config.fabric.operator_namespace, annotations=reason, spec=spec)


def node_policy_objects(config: ClusterConfig) -> list[Sourced]:
    return [
        (("node_sets", i, "node_policies", j), node_policy(config, s, p, node))
        for i, s in enumerate(config.node_sets)
        for j, p in enumerate(s.node_policies)
        for node in s.nodes
    ]
