"""SR-IOV node policies for cluster admins: the VFs the SR-IOV network operator makes on a node set's PFs
(node_sets[].node_policies), one SriovNetworkNodePolicy per policy and node.

Each selects its one node by kubernetes.io/hostname: a node selector is a map of exact labels, so one object cannot
name a set of nodes, and a label the stack would have to put on the nodes is not the stack's to put. A policy makes
VFs with RDMA (isRdma, deviceType netdevice: the webhook's rule for RoCE on bare metal) of the fabric's link type,
offered by the device plugin as the attachment's resource (resourceName without the operator's prefix).

Applying a policy, changing it or deleting it makes the operator's config daemon drain and reboot the node (one node
at a time across the cluster, by default): the config requires node_reboot_reason, and the preflight prints it.
"""

from __future__ import annotations

from typing import Any

from components.kube import MANAGED_BY, Sourced
from config.cluster import NodeSet, SriovNodePolicy
from config.kube import HOSTNAME, node_policy_name
from config.openshift import SRIOV_API, SRIOV_RESOURCE_PREFIX
from config.stack import ClusterConfig

REASON = "gpu-training/reason"


def node_policy(config: ClusterConfig, node_set: NodeSet, policy: SriovNodePolicy, node: str) -> dict[str, Any]:
    assert config.fabric is not None  # config.stack holds that node policies come with a fabric
    nics: dict[str, Any] = {}
    if policy.vendor:
        nics["vendor"] = policy.vendor
    if policy.device_id:
        nics["deviceID"] = policy.device_id
    if policy.pf_names:
        nics["pfNames"] = list(policy.pf_names)
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
    return {
        "apiVersion": SRIOV_API,
        "kind": "SriovNetworkNodePolicy",
        "metadata": {
            "name": node_policy_name(node_set.name, policy.resource, node),
            "namespace": config.fabric.operator_namespace,
            "labels": dict(MANAGED_BY),
            "annotations": {REASON: node_set.node_reboot_reason or ""},
        },
        "spec": spec,
    }


def node_policy_objects(config: ClusterConfig) -> list[Sourced]:
    return [
        (("node_sets", i, "node_policies", j), node_policy(config, s, p, node))
        for i, s in enumerate(config.node_sets)
        for j, p in enumerate(s.node_policies)
        for node in s.nodes
    ]
