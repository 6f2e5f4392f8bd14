"""Configs the tests own: three small clusters that cover what the program does, independent of what the
committed stacks (clusters/*.py) hold today. A program test builds one, edits the plain data the way a
user edits a YAML file, and validates it like one (`config(edit)`), so a user who changes a committed
stack never has to change a program test.

- roce: RoCE v2 over SR-IOV, an SCC the stack creates, named nodes in two sets, an RDMA StatefulSet with
  per-pod claims, a TCP variant, a Job, a shared RWX volume, a script, an image build, an existing
  Secret, developer ports with Routes, and an enabled bandwidth check that fits beside the running pods.
- infiniband: no SR-IOV, the existing privileged SCC, an NFS root claim to fix.
- tcp: no fabric, unnamed nodes behind a taint, everything under restricted-v2.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any

import stacks
from config import ClusterConfig

Data = dict[str, Any]

RBD = "ceph-rbd"
RWX = "cephfs"
# Images the fixtures pull are pinned by digest (the image rule warns on a bare tag); the digests are made up.
PYTORCH = "nvcr.io/nvidia/pytorch:25.08-py3@sha256:" + hashlib.sha256(b"nvcr.io/nvidia/pytorch:25.08-py3").hexdigest()
EXAMPLE = "quay.io/example/pytorch:2.9@sha256:" + hashlib.sha256(b"quay.io/example/pytorch:2.9").hexdigest()


def _attachment(i: int) -> Data:
    return {
        "network": f"port{i}-network",
        "resource": f"openshift.io/port{i}rdma",
        "interface": f"net{i}",
        "cni_config": json.dumps(
            {"name": f"port{i}-network", "type": "sriov", "ipam": {"type": "whereabouts", "range": f"10.1.{i}.0/24"}},
            separators=(",", ":"),
        ),
    }


def roce() -> Data:
    return {
        "name": "roce",
        "description": "a RoCE cluster the tests own",
        "gpu_model": "H100",
        "node_sets": [
            {"name": "main", "nodes": ["node-a", "node-b", "node-c", "node-d"], "gpus_per_node": 4},
            {"name": "spare", "nodes": ["node-e", "node-f", "node-g"], "gpus_per_node": 4},
        ],
        "gpu_tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "gpu_node_selector": {"nvidia.com/gpu.present": "true"},
        "fabric": {
            "link_layer": "roce-v2",
            "nic": "ConnectX-7",
            "link_gbps": 400,
            "devices": ["mlx5_0", "mlx5_1"],
            "attachments": [_attachment(1), _attachment(2)],
        },
        "storage_classes": [
            {"name": RBD, "access_modes": ["ReadWriteOnce"]},
            {"name": RWX, "access_modes": ["ReadWriteMany", "ReadWriteOnce"]},
        ],
        "namespaces": ["team-a", "team-b"],
        "security": {
            "scc": "gpu-rdma",
            "create": True,
            "service_accounts": [{"name": "trainer", "namespace": "team-a"}, {"name": "trainer", "namespace": "team-b"}],
        },
        "defaults": {"nccl_env_rdma": {"NCCL_IB_TIMEOUT": "22"}},
        "volumes": [
            {"name": "workspace", "namespace": "team-a", "mount_path": "/workspace", "size": "10Gi", "storage_class": RBD, "shared": False},
            {"name": "datasets", "namespace": "team-a", "mount_path": "/datasets", "size": "50Gi", "storage_class": RWX},
        ],
        "existing": {"secrets": [{"namespace": "team-a", "name": "hf-secret"}]},
        "scripts": [{"name": "train-script", "namespace": "team-a", "files": {"train.sh": '#!/bin/bash\nexec torchrun "$@"\n'}}],
        "images": [
            {
                "name": "trainer",
                "namespace": "team-a",
                "dockerfile": "FROM nvcr.io/nvidia/pytorch:25.08-py3\nRUN apt-get install -y rdma-core libibverbs1\n",
            }
        ],
        "workloads": _roce_workloads(),
        "bandwidth_checks": [
            {
                "name": "fabric",
                "namespace": "team-a",
                "service_account": "trainer",
                "image": "image-registry.openshift-image-registry.svc:5000/team-a/trainer:latest",
                "nodes": 2,
                "gpus_per_node": 4,
                "transport": "rdma",
                "tool": "torch",
            }
        ],
    }


def _roce_workloads() -> list[Data]:
    """The RoCE fixture's workloads: an RDMA StatefulSet with a TCP variant, an RDMA Job, and a small TCP one."""
    return [
        {
            "name": "dev",
            "namespace": "team-a",
            "user": "ada",
            "kind": "statefulset",
            "image": "image-registry.openshift-image-registry.svc:5000/team-a/trainer:latest",
            "service_account": "trainer",
            "nodes": 2,
            "gpus_per_node": 4,
            "transport": "rdma",
            "memory": "64Gi",
            "mounts": [{"volume": "workspace"}, {"volume": "datasets"}],
            "ports": [{"name": "jupyter", "port": 8888, "route": True}, {"name": "debugpy", "port": 5678}],
            "deepspeed_hostfile": "/workspace/.deepspeed/hostfile",
            "tcp_variants": [{"name": "dev-tcp"}],
        },
        {
            "name": "train",
            "namespace": "team-a",
            "user": "ada",
            "kind": "job",
            "node_set": "spare",
            "image": "image-registry.openshift-image-registry.svc:5000/team-a/trainer:latest",
            "service_account": "trainer",
            "nodes": 2,
            "gpus_per_node": 4,
            "transport": "rdma",
            "memory": "64Gi",
            "mounts": [{"volume": "datasets"}],
            "scripts": [{"config_map": "train-script"}],
            "run": "command",
            "args": ["bash", "/scripts/train.sh", "train.py"],
            "secret_env": {"HF_TOKEN": {"secret": "hf-secret", "key": "token"}},
        },
        {
            "name": "solo",
            "namespace": "team-b",
            "user": "bob",
            "image": PYTORCH,
            "service_account": "trainer",
            "nodes": 1,
            "gpus_per_node": 2,
            "node_set": "spare",
            "transport": "tcp",
            "cpu": "4",
            "memory": "16Gi",
            "shm_size": "4Gi",
        },
    ]


def infiniband() -> Data:
    return {
        "name": "ib",
        "description": "an InfiniBand cluster without SR-IOV the tests own",
        "gpu_model": "H100",
        "node_sets": [{"name": "pair", "nodes": ["ib-1", "ib-2"], "gpus_per_node": 4}],
        "fabric": {
            "link_layer": "infiniband",
            "nic": "MT4129",
            "link_gbps": 400,
            "devices": ["mlx5_2", "mlx5_3"],
            "device_access": "privileged",
            "static_hca": True,
        },
        "storage_classes": [
            {"name": "nfs-csi", "access_modes": ["ReadWriteMany", "ReadWriteOnce"]},
            {"name": RBD, "access_modes": ["ReadWriteOnce"]},
        ],
        "namespaces": ["lab"],
        "security": {
            "scc": "privileged",
            "existing_allowed_capabilities": None,
            "existing_allows_privileged": True,
            "broad_grant_reason": "no RDMA device plugin: /dev/infiniband reaches privileged containers only",
            "service_accounts": [{"name": "runner", "namespace": "lab"}],
        },
        "defaults": {"memlock_rdma": "privileged"},
        "volumes": [{"name": "shared", "namespace": "lab", "mount_path": "/workspace", "size": "100Gi", "storage_class": "nfs-csi"}],
        "pvc_fixes": [
            {
                "namespace": "nfs",
                "pvc": "nfs-server-root",
                "storage_class": RBD,
                "reason": "the NFS server's root claim has no class",
                "serves_storage_classes": ["nfs-csi"],
            }
        ],  # fmt: skip
        "workloads": [
            {
                "name": "env",
                "namespace": "lab",
                "user": "cy",
                "image": PYTORCH,
                "service_account": "runner",
                "nodes": 2,
                "gpus_per_node": 4,
                "transport": "rdma",
                "privileged_reason": "no device plugin",
                "mounts": [{"volume": "shared"}],
            }
        ],
        "accepted_warnings": [
            {"rule": "privileged-scc", "object": "SecurityContextConstraints privileged", "reason": "no device plugin"},
            {"rule": "privileged-container", "object": "StatefulSet lab/*", "reason": "no device plugin"},
        ],
    }


def tcp() -> Data:
    return {
        "name": "tcp",
        "description": "a TCP-only cluster the tests own",
        "gpu_model": "H100",
        "node_sets": [{"name": "pool", "count": 2, "gpus_per_node": 4}],
        "gpu_tolerations": [{"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "H100", "effect": "NoSchedule"}],
        "namespaces": ["proj"],
        "security": {"service_accounts": [{"name": "sa", "namespace": "proj"}]},
        "workloads": [
            {
                "name": "one",
                "namespace": "proj",
                "user": "di",
                "image": EXAMPLE,
                "service_account": "sa",
                "gpus_per_node": 4,
                "transport": "tcp",
                "cpu": "4",
                "cpu_limit": "8",
                "memory": "8Gi",
                "memory_limit": "10Gi",
                "shm_size": "2Gi",
            },
            {
                "name": "two",
                "namespace": "proj",
                "user": "di",
                "state": "stopped",
                "image": EXAMPLE,
                "service_account": "sa",
                "gpus_per_node": 4,
                "transport": "tcp",
                "memory": "8Gi",
                "shm_size": "2Gi",
            },
        ],
    }


FIXTURES: dict[str, Callable[[], Data]] = {"roce": roce, "ib": infiniband, "tcp": tcp}


def config(name: str, *edits: Callable[[Data], Any] | None) -> ClusterConfig:
    """A fixture, with edits of its plain data applied in order, validated as a user's YAML file would be."""
    data = copy.deepcopy(FIXTURES[name]())
    for edit in edits:
        if edit is not None:
            edit(data)
    return stacks.validate(data, f"fixture {name}")


def data(name: str, *edits: Callable[[Data], Any]) -> Data:
    """A fixture's plain data, a copy of its own, with edits applied in order."""
    d = copy.deepcopy(FIXTURES[name]())
    for edit in edits:
        edit(d)
    return d


def workload(d: Data, name: str) -> Data:
    return next(w for w in d["workloads"] if w["name"] == name)


# --- edits of the fixtures' data, as a user edits a stack file ----------------------------------------------------------

Edit = Callable[[Data], Any]


def both(*edits: Edit) -> Edit:
    """The edits, one after the other."""
    return lambda d: _apply(edits, d)  # a lambda: pytest names an unnamed parameter by it (`[case-<lambda>]`)


def _apply(edits: tuple[Edit, ...], d: Data) -> None:
    for e in edits:
        e(d)


def W(name: str, /, **fields: Any) -> Edit:  # noqa: N802 (reads like the fixture's workload)
    """The workload `name` with `fields` set."""
    return lambda d: workload(d, name).update(fields)


def env(name: str, values: dict[str, str]) -> Edit:
    return lambda d: workload(d, name).setdefault("env", {}).update(values)


def mount(name: str, index: int, /, **fields: Any) -> Edit:
    return lambda d: workload(d, name)["mounts"][index].update(fields)


def port(name: str, index: int, /, **fields: Any) -> Edit:
    return lambda d: workload(d, name)["ports"][index].update(fields)


def add_port(name: str, /, **fields: Any) -> Edit:
    return lambda d: workload(d, name).setdefault("ports", []).append(fields)


def add_workload(base: str, /, **fields: Any) -> Edit:
    """Another workload: a copy of `base` with `fields` (stopped unless it says otherwise, so it needs no nodes)."""

    def edit(d: Data) -> None:
        copied = json.loads(json.dumps(workload(d, base)))
        copied.pop("tcp_variants", None)
        copied.update({"state": "stopped", **fields})
        d["workloads"].append(copied)

    return edit


def add_volume(**fields: Any) -> Edit:
    return lambda d: d["volumes"].append({"namespace": "team-a", "size": "1Gi", "storage_class": RWX, **fields})


def pvc_fix(pvc: str, namespace: str = "team-a") -> Edit:
    fix = {"namespace": namespace, "pvc": pvc, "storage_class": RBD, "reason": "a test"}
    return lambda d: d.setdefault("pvc_fixes", []).append(dict(fix))


def add_namespace(ns: str) -> Edit:
    """One more entry in `namespaces`, and nothing else."""
    return lambda d: d["namespaces"].append(ns)


def add_project(ns: str) -> Edit:
    """One more project the stack deploys into: its namespace, and a service account `trainer` there."""

    def edit(d: Data) -> None:
        d["namespaces"].append(ns)
        d["security"]["service_accounts"].append({"name": "trainer", "namespace": ns})

    return edit


def script_file(key: str) -> Edit:
    return lambda d: d["scripts"][0]["files"].update({key: "echo hi\n"})


def secret_key(key: str) -> Edit:
    return lambda d: workload(d, "train")["secret_env"]["HF_TOKEN"].update(key=key)


def node_set(index: int, /, **fields: Any) -> Edit:
    return lambda d: d["node_sets"][index].update(fields)


def check_of(name: str, /, **fields: Any) -> Edit:
    return lambda d: next(c for c in d["bandwidth_checks"] if c["name"] == name).update(fields)


def sec(**fields: Any) -> Edit:
    return lambda d: d["security"].update(fields)


def existing(scc: str, **fields: Any) -> Edit:
    """The stack's SCC is `scc`, which exists on the cluster, described by `fields` (security.existing_*)."""
    return sec(scc=scc, create=False, **fields)


def toleration(key: str, **fields: Any) -> Data:
    return {"key": key, "operator": "Exists", **fields}


# --- queueing (docs/shared-clusters.md) ------------------------------------------------------------------------------


def queued(d: Data, **queueing: Any) -> Data:
    """The fixture queued: a ClusterQueue `gpu`, each node set labelled `gpu-pool: NAME` and stating its CPU and memory."""
    d["queueing"] = {"cluster_queue": "gpu", **queueing}
    for s in d["node_sets"]:
        s.update(allocatable_cpu="64", allocatable_memory="512Gi", labels={"gpu-pool": s["name"]})
    return d


def queued_config(name: str, edit: Edit | None = None, **queueing: Any) -> ClusterConfig:
    """The fixture queued (`queueing` added to its settings), then edited."""
    return config(name, lambda d: queued(d, **queueing), edit)


# --- operator-native SR-IOV networks (docs/networks.md) ------------------------------------------------------------------

OPERATOR_NS = "openshift-sriov-network-operator"
# The CNI config Barcelona's NADs carry (CLUSTER-FACTS "Real NAD configuration"), for the test-owned ports.
OPERATOR_CNI = {
    "cniVersion": "1.0.0",
    "type": "sriov",
    "vlan": 0,
    "vlanQoS": 0,
    "spoofchk": "off",
    "trust": "on",
    "link_state": "enable",
    "mtu": 9000,
}
REASON = "the RDMA VFs of the main nodes, applied in a maintenance window"


def operator_mode(d: Data) -> None:
    """roce's attachments made by the SR-IOV operator (fabric.nad_mode operator), each CNI config one it can render."""
    d["fabric"]["nad_mode"] = "operator"
    for i, a in enumerate(d["fabric"]["attachments"], start=1):
        cni = {
            **OPERATOR_CNI,
            "name": a["network"],
            "ipam": {"type": "whereabouts", "range": f"10.1.{i}.0/24", "routes": [{"dst": f"192.168.{i}.0/24"}]},
        }
        a["cni_config"] = json.dumps(cni, separators=(",", ":"))


def with_policies(d: Data, num_vfs: int = 4, mtu: int | None = 9000) -> None:
    """Operator mode, and node policies on roce's main nodes: one per attachment's resource."""
    operator_mode(d)
    d["node_sets"][0]["node_policies"] = [
        {"resource": f"openshift.io/port{i}rdma", "pf_names": [f"eno{4 + i}np0"], "num_vfs": num_vfs, **({"mtu": mtu} if mtu else {})}
        for i in (1, 2)
    ]
    d["node_sets"][0]["node_reboot_reason"] = REASON


# The control plane's node-role labels (and the taints of the same keys).
MASTER = "node-role.kubernetes.io/master"
CONTROL = "node-role.kubernetes.io/control-plane"
ARBITER = "node-role.kubernetes.io/arbiter"
