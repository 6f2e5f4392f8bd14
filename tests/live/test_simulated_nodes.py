"""The simulated cluster's nodes (live/nodes.py), without a cluster: the SR-IOV VFs a GPU node offers come from the
stack's node policies where they name the resource (num_vfs per PF), so a VF shortage the config states shows on the
nodes kwok runs, as it would on the cluster; elsewhere one VF per GPU, as before."""

from __future__ import annotations

from typing import Any

import stacks
from live import nodes
from tests import fixtures


def policies(d: dict[str, Any], **per_port: int) -> dict[str, Any]:
    """The roce fixture's `spare` set (3 named nodes x 4 GPUs) with a node policy per port given: num_vfs on one PF."""
    d["node_sets"][1].update(
        node_reboot_reason="the tests' own nodes",
        node_policies=[
            {"resource": f"openshift.io/{port}rdma", "pf_names": [f"ens{port[-1]}f0"], "num_vfs": n} for port, n in per_port.items()
        ],
    )
    return d


def offered(d: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Each GPU node's SR-IOV resources (allocatable), by node name."""
    built = nodes.nodes(stacks.validate(d, "nodes"))
    return {n["metadata"]["name"]: {r: v for r, v in n["status"]["allocatable"].items() if r.startswith("openshift.io/")} for n in built}


def test_a_node_policys_vfs_are_the_nodes_and_one_per_gpu_elsewhere() -> None:
    seen = offered(policies(fixtures.data("roce"), port1=1))
    for name in ("node-e", "node-f", "node-g"):  # spare: port1 from its policy, port2 named by none: one per GPU
        assert seen[name] == {"openshift.io/port1rdma": "1", "openshift.io/port2rdma": "4"}
    for name in ("node-a", "node-b", "node-c", "node-d"):  # main: no policy
        assert seen[name] == {"openshift.io/port1rdma": "4", "openshift.io/port2rdma": "4"}


def test_num_vfs_counts_per_pf_named() -> None:
    d = policies(fixtures.data("roce"), port1=2, port2=3)
    d["node_sets"][1]["node_policies"][0]["pf_names"] = ["ens1f0", "ens1f1"]
    assert offered(d)["node-e"] == {"openshift.io/port1rdma": "4", "openshift.io/port2rdma": "3"}


def test_a_cluster_without_a_fabric_offers_no_vf() -> None:
    assert all(v == {} for v in offered(fixtures.data("tcp")).values())
