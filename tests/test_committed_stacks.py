"""The committed stacks: no preflight error, and the facts of each cluster (seeds, CLUSTER-FACTS.md,
KNOWLEDGE.md) hold for whatever workloads a stack runs. These tests never name a workload: adding a user,
switching a transport or stopping a workload keeps them green. A failure says which file to change; when
a fact about a cluster itself moves (a new fabric, a renamed network), change the stack and the fact below
together.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import policy
import stacks
from components.program import objects, patches
from conftest import container, env_of, pod_spec, rendered_stack

WORKLOAD_KINDS = ("StatefulSet", "Job")


def workloads(name: str) -> Iterator[dict[str, Any]]:
    return (o for o in rendered_stack(name).objects() if o["kind"] in WORKLOAD_KINDS)


def fix(name: str, what: str) -> str:
    return f"stacks/{name}.py: {what} (`python -m stacks check {name}` shows every finding)"


# --- every stack --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", stacks.names())
def test_no_preflight_error(name: str) -> None:
    config = stacks.load(name)
    errors = policy.errors(policy.check(config, objects(config), patches(config)))
    assert errors == [], fix(name, "the preflight finds errors:\n" + "\n".join(f.line() for f in errors))


@pytest.mark.parametrize("name", stacks.names())
def test_every_tier_of_the_stack_has_a_pulumi_stack_file_that_deploys_it(name: str) -> None:
    from components.tiers import tier_of

    config = stacks.load(name)
    files = [s for s in stacks.pulumi_stacks() if s.cluster == name]
    assert files, f"Pulumi.{name}.yaml is missing: every stack module has its Pulumi stack file (README 'Add a cluster')"
    tiers = {s.tier for s in files}
    needed = {tier_of(o, config) for o in objects(config) + patches(config)}
    uncovered = sorted(t for t in needed if t not in tiers and "all" not in tiers)
    assert not uncovered, f"stack {name} declares {', '.join(uncovered)}-tier objects but no Pulumi.{name}*.yaml deploys that tier"
    for s in files:
        assert s.context, f"{s.path.name}: set kubernetes:context (the program never uses the current context)"
        assert "kubernetes" in s.disabled_default_providers, f"{s.path.name}: set pulumi:disable-default-providers: [kubernetes]"


# --- Barcelona: RoCE v2 through SR-IOV (seeds 000-003) --------------------------------------------------

BARCELONA_NETWORKS = [f"{p}-network" for p in ("eno5np0", "eno6np0", "eno7np0", "eno8np0")]


def test_barcelona_rdma_pods_attach_the_four_sriov_networks_and_request_each_vf() -> None:
    for o in workloads("barcelona"):
        if env_of(o)["LAUNCHER_MODE"] != "rdma":
            continue
        ns = o["metadata"]["namespace"]
        nets = o["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].split(",")
        assert nets == [f"{ns}/{n}@net{i}" for i, n in enumerate(BARCELONA_NETWORKS, 1)], fix("barcelona", "fabric.attachments (seed 003)")
        limits = container(o)["resources"]["limits"]
        assert all(limits.get(f"openshift.io/{n.split('-')[0]}rdma") == 1 for n in BARCELONA_NETWORKS), fix("barcelona", "seed 003's VFs")
        # the pod's own namespace holds the copies it attaches
        copies = {
            x["metadata"]["name"]
            for x in rendered_stack("barcelona").objects()
            if x["kind"] == "NetworkAttachmentDefinition" and x["metadata"]["namespace"] == ns
        }
        assert copies >= set(BARCELONA_NETWORKS), fix("barcelona", f"fabric.attachments: copies in {ns}")


def test_barcelona_nad_copies_carry_the_real_sriov_config() -> None:
    for nad in (o for o in rendered_stack("barcelona").objects() if o["kind"] == "NetworkAttachmentDefinition"):
        cni = json.loads(nad["spec"]["config"])
        assert cni["type"] == "sriov" and cni["mtu"] == 9000 and cni["ipam"]["type"] == "whereabouts", fix(
            "barcelona", "cni_config: CLUSTER-FACTS 'Real NAD configuration'"
        )
        assert "sriovnetwork.openshift.io/owner-ref" not in nad["metadata"].get("annotations", {})


def test_barcelona_scc_is_least_privilege() -> None:
    (scc,) = [o for o in rendered_stack("barcelona").objects() if o["kind"] == "SecurityContextConstraints"]
    assert scc["metadata"]["name"] == "nccl-rdma-scc", fix("barcelona", "seed 002 named the SCC nccl-rdma-scc")
    assert not (scc["allowPrivilegedContainer"] or scc["allowHostIPC"] or scc["allowHostNetwork"] or scc["allowHostDirVolumePlugin"])
    assert scc["requiredDropCapabilities"] == ["ALL"] and set(scc["allowedCapabilities"]) <= {"IPC_LOCK", "SYS_RESOURCE"}


@pytest.mark.parametrize("name", ["barcelona", "cairo"])
def test_gpu_pods_tolerate_nvidia_gpu_and_select_gpu_nodes(name: str) -> None:
    for o in workloads(name):
        spec = pod_spec(o)
        toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        assert toleration in spec.get("tolerations", []), fix(name, "gpu_tolerations")
        selected = spec.get("nodeSelector", {}).get("nvidia.com/gpu.present")
        assert selected == "true", fix(name, "gpu_node_selector (CLUSTER-FACTS 'Scheduling')")


# --- Cairo: InfiniBand without SR-IOV, RWX on nfs-csi (seed 004) --------------------------------------------


def test_cairo_rdma_pods_pin_the_four_400g_ports_in_exact_form() -> None:
    for o in workloads("cairo"):
        env = env_of(o)
        if env["LAUNCHER_MODE"] == "rdma":
            assert env["NCCL_IB_HCA"] == "=mlx5_2,mlx5_3,mlx5_4,mlx5_5", fix("cairo", "seed 004's ACTIVE 400 Gb/s ports")
            assert "NCCL_IB_GID_INDEX" not in env  # InfiniBand uses no GID index
        else:
            assert container(o)["securityContext"]["runAsNonRoot"] is True  # only RDMA pods are privileged


def test_cairo_fixes_the_nfs_server_claim_before_its_nfs_claims() -> None:
    r = rendered_stack("cairo")
    (patch,) = [x for x in r.resources if x.is_patch]
    assert (patch.object["metadata"]["namespace"], patch.object["metadata"]["name"]) == ("nfs", "nfs-server-root"), fix(
        "cairo", "pvc_fixes"
    )
    assert patch.object["spec"] == {"storageClassName": "ocs-external-storagecluster-ceph-rbd"}
    nfs_claims = [
        x for x in r.resources if x.type.endswith(":PersistentVolumeClaim") and x.inputs["spec"].get("storageClassName") == "nfs-csi"
    ]
    assert nfs_claims, fix("cairo", "seed 004's RWX claims on nfs-csi")
    for claim in nfs_claims:
        assert claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
        assert any(d.endswith("PersistentVolumeClaimPatch::nfs/nfs-server-root") for d in claim.options["depends_on"])


# --- NERC: TCP only (seed 000) ------------------------------------------------------------------------------


def test_nerc_runs_tcp_only_without_privilege() -> None:
    objs = list(rendered_stack("nerc").objects())
    assert not [o for o in objs if o["kind"] in ("NetworkAttachmentDefinition", "SecurityContextConstraints", "RoleBinding")], fix(
        "nerc", "NERC has no RDMA: no NADs, no SCC, no grant"
    )
    for o in workloads("nerc"):
        assert env_of(o)["NCCL_IB_DISABLE"] == "1"
        assert container(o)["securityContext"]["runAsNonRoot"] is True
        assert o["spec"]["template"]["metadata"]["annotations"]["openshift.io/required-scc"] == "restricted-v2"


def test_nerc_gpu_pods_tolerate_the_h100_taint() -> None:
    taint = {"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "NVIDIA-H100-80GB-HBM3", "effect": "NoSchedule"}
    for o in workloads("nerc"):
        assert taint in pod_spec(o).get("tolerations", []), fix("nerc", "gpu_tolerations: CLUSTER-FACTS 'Scheduling' (NERC's GPU taint)")
