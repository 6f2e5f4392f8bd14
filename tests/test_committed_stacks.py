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
from tests.helpers import container, env_of, pod_spec, rendered_stack

WORKLOAD_KINDS = ("StatefulSet", "Job")


def workloads(name: str) -> Iterator[dict[str, Any]]:
    return (o for o in rendered_stack(name).objects() if o["kind"] in WORKLOAD_KINDS)


def of_kind(name: str, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendered_stack(name).objects() if o["kind"] == kind]


def ident(o: dict[str, Any]) -> str:
    ns = o["metadata"].get("namespace")
    return f"{o['kind']} {ns + '/' if ns else ''}{o['metadata']['name']}"


def fix(name: str, what: str) -> str:
    return f"clusters/{name}.py: {what} (`python -m stacks check {name}` shows every finding)"


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
    assert files, (
        f"clusters/{name}.py: Pulumi.{name}.yaml is missing: every stack module has its Pulumi stack file (README 'Add a cluster')"
    )
    tiers = {s.tier for s in files}
    needed = {tier_of(o, config) for o in objects(config) + patches(config)}
    uncovered = sorted(t for t in needed if t not in tiers and "all" not in tiers)
    assert not uncovered, (
        f"clusters/{name}.py declares {', '.join(uncovered)}-tier objects, but its stack files "
        f"({', '.join(s.path.name for s in files)}) deploy only the {', '.join(sorted(tiers))} tier: "
        "add a stack file for each (gpu-training:tier)"
    )
    for s in files:
        assert s.context, f"{s.path.name} (stack {name}): set kubernetes:context (the program never uses the current context)"
        assert "kubernetes" in s.disabled_default_providers, (
            f"{s.path.name} (stack {name}): set pulumi:disable-default-providers: [kubernetes]"
        )


# --- Barcelona: RoCE v2 through SR-IOV (seeds 000-003) --------------------------------------------------

BARCELONA_PORTS = ("eno5np0", "eno6np0", "eno7np0", "eno8np0")  # seed 003: one SR-IOV network and VF resource per port


def barcelona_networks_for(namespace: str) -> dict[str, str]:
    """The networks a pod in `namespace` can attach (`ns/name`), each with the VF resource its NAD names, in whichever way
    the stack provides them (fabric.nad_mode): a NAD copy in the project, a SriovNetwork the operator makes the project's
    NAD from, or the operator's own NAD in the source namespace (read from the cluster, not declared)."""
    found = {
        f"{n['metadata']['namespace']}/{n['metadata']['name']}": n["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"]
        for n in of_kind("barcelona", "NetworkAttachmentDefinition")
        if n["metadata"]["namespace"] == namespace
    }
    found |= {
        f"{n['spec']['networkNamespace']}/{n['metadata']['name']}": f"openshift.io/{n['spec']['resourceName']}"
        for n in of_kind("barcelona", "SriovNetwork")
        if n["spec"].get("networkNamespace") == namespace
    }
    fabric = stacks.load("barcelona").fabric
    if fabric is not None and fabric.nad_mode == "reference":
        found |= {f"{fabric.nad_source_namespace}/{a.network}": a.resource for a in fabric.attachments}
    return found


def test_barcelona_rdma_pods_attach_the_four_sriov_networks_and_request_each_vf() -> None:
    for o in workloads("barcelona"):
        if env_of(o)["LAUNCHER_MODE"] != "rdma":
            continue
        ns = o["metadata"]["namespace"]
        refs = o["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].split(",")
        available = barcelona_networks_for(ns)
        wanted = [f"openshift.io/{port}rdma" for port in BARCELONA_PORTS]
        attached = [available.get(ref.rpartition("@")[0]) for ref in refs]
        interfaces = [ref.rpartition("@")[2] for ref in refs]
        assert attached == wanted and interfaces == [f"net{i}" for i in range(1, 5)], fix(
            "barcelona",
            f"{ident(o)}: expected one network per port, in order, each a NAD of the port's VFs {wanted} on net1..net4 "
            f"(seed 003, fabric.attachments), found {refs} (NADs of {[a or 'no NAD the stack provides' for a in attached]})",
        )
        limits = container(o)["resources"]["limits"]
        vfs = dict.fromkeys(wanted, 1)
        found = {k: limits.get(k) for k in vfs}
        assert found == vfs, fix("barcelona", f"{ident(o)}: expected one VF of each port {vfs} (seed 003), found {found}")


def test_barcelona_nad_copies_carry_the_real_sriov_config() -> None:
    for nad in of_kind("barcelona", "NetworkAttachmentDefinition"):
        cni = json.loads(nad["spec"]["config"])
        found = (cni.get("type"), cni.get("mtu"), cni.get("ipam", {}).get("type"))
        assert found == ("sriov", 9000, "whereabouts"), fix(
            "barcelona",
            f"{ident(nad)}: expected type sriov, mtu 9000, ipam whereabouts (cni_config: CLUSTER-FACTS 'Real NAD configuration'), "
            f"found {found}",
        )
        owner = "sriovnetwork.openshift.io/owner-ref"
        assert owner not in nad["metadata"].get("annotations", {}), fix(
            "barcelona", f"{ident(nad)}: a copy carries no {owner} (the operator would delete it with its SriovNetwork)"
        )


def test_barcelona_scc_is_least_privilege() -> None:
    sccs = {o["metadata"]["name"]: o for o in of_kind("barcelona", "SecurityContextConstraints")}
    assert "nccl-rdma-scc" in sccs, fix("barcelona", f"expected the SCC nccl-rdma-scc (seed 002 named it), found {sorted(sccs) or 'none'}")
    scc = sccs["nccl-rdma-scc"]
    granted = [k for k in ("allowPrivilegedContainer", "allowHostIPC", "allowHostNetwork", "allowHostDirVolumePlugin") if scc[k]]
    assert not granted, fix("barcelona", f"SCC nccl-rdma-scc: expected none of {granted} (least privilege, KNOWLEDGE.md)")
    caps = (scc["requiredDropCapabilities"], sorted(scc["allowedCapabilities"]))
    assert caps[0] == ["ALL"] and set(caps[1]) <= {"IPC_LOCK", "SYS_RESOURCE"}, fix(
        "barcelona",
        f"SCC nccl-rdma-scc: expected drop ALL and at most IPC_LOCK, SYS_RESOURCE (seed 002), found drop {caps[0]}, allow {caps[1]}",
    )


@pytest.mark.parametrize("name", ["barcelona", "cairo"])
def test_gpu_pods_tolerate_nvidia_gpu_and_select_gpu_nodes(name: str) -> None:
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    for o in workloads(name):
        spec = pod_spec(o)
        found = spec.get("tolerations", [])
        assert toleration in found, fix(name, f"{ident(o)}: expected the toleration {toleration} (gpu_tolerations), found {found}")
        selected = spec.get("nodeSelector", {})
        assert selected.get("nvidia.com/gpu.present") == "true", fix(
            name,
            f"{ident(o)}: expected nodeSelector nvidia.com/gpu.present=true (gpu_node_selector, CLUSTER-FACTS 'Scheduling'), "
            f"found {selected}",
        )


# --- Cairo: InfiniBand without SR-IOV, RWX on nfs-csi (seed 004) --------------------------------------------


def test_cairo_rdma_pods_pin_the_four_400g_ports_in_exact_form() -> None:
    hca = "=mlx5_2,mlx5_3,mlx5_4,mlx5_5"
    for o in workloads("cairo"):
        env = env_of(o)
        if env["LAUNCHER_MODE"] == "rdma":
            assert env.get("NCCL_IB_HCA") == hca, fix(
                "cairo", f"{ident(o)}: expected NCCL_IB_HCA={hca} (seed 004's ACTIVE 400 Gb/s ports), found {env.get('NCCL_IB_HCA')}"
            )
            assert "NCCL_IB_GID_INDEX" not in env, fix(
                "cairo", f"{ident(o)}: InfiniBand uses no GID index (seed 004), found NCCL_IB_GID_INDEX={env['NCCL_IB_GID_INDEX']}"
            )
        else:
            non_root = container(o)["securityContext"].get("runAsNonRoot")
            assert non_root is True, fix(
                "cairo", f"{ident(o)} runs TCP: expected runAsNonRoot (only RDMA pods are privileged), found {non_root}"
            )


def test_cairo_fixes_the_nfs_server_claim_before_its_nfs_claims() -> None:
    r = rendered_stack("cairo")
    root = ("nfs", "nfs-server-root")
    fixes = {(x.object["metadata"]["namespace"], x.object["metadata"]["name"]): x for x in r.resources if x.is_patch}
    assert root in fixes, fix("cairo", f"expected a pvc_fixes patch of nfs/nfs-server-root (seed 004), found {sorted(fixes) or 'none'}")
    spec = fixes[root].object["spec"]
    assert spec == {"storageClassName": "ocs-external-storagecluster-ceph-rbd"}, fix(
        "cairo", f"pvc_fixes nfs/nfs-server-root: expected storageClassName ocs-external-storagecluster-ceph-rbd (seed 004), found {spec}"
    )
    nfs_claims = [
        x for x in r.resources if x.type.endswith(":PersistentVolumeClaim") and x.inputs["spec"].get("storageClassName") == "nfs-csi"
    ]
    assert nfs_claims, fix("cairo", "expected RWX claims on nfs-csi (seed 004's ml-dev-workspace, ml-datasets), found none")
    for claim in nfs_claims:
        where = f"PersistentVolumeClaim {claim.inputs['metadata'].get('namespace')}/{claim.inputs['metadata']['name']}"
        modes = claim.inputs["spec"]["accessModes"]
        assert modes == ["ReadWriteMany"], fix("cairo", f"{where} on nfs-csi: expected ReadWriteMany (seed 004), found {modes}")
        after = claim.options["depends_on"]
        assert any(d.endswith("PersistentVolumeClaimPatch::nfs/nfs-server-root") for d in after), fix(
            "cairo", f"{where} on nfs-csi: expected it to wait for the nfs/nfs-server-root fix (pvc_fixes), found depends_on {after}"
        )


# --- NERC: TCP only (seed 000) ------------------------------------------------------------------------------


def test_nerc_runs_tcp_only_without_privilege() -> None:
    privileged = [
        ident(o)
        for o in rendered_stack("nerc").objects()
        if o["kind"] in ("NetworkAttachmentDefinition", "SecurityContextConstraints", "RoleBinding")
    ]
    assert not privileged, fix("nerc", f"NERC has no RDMA (seed 000): expected no NADs, no SCC, no grant, found {privileged}")
    for o in workloads("nerc"):
        env, security = env_of(o), container(o)["securityContext"]
        scc = o["spec"]["template"]["metadata"]["annotations"].get("openshift.io/required-scc")
        found = (env.get("NCCL_IB_DISABLE"), security.get("runAsNonRoot"), scc)
        assert found == ("1", True, "restricted-v2"), fix(
            "nerc", f"{ident(o)}: expected NCCL_IB_DISABLE=1, runAsNonRoot, required SCC restricted-v2 (seed 000: TCP only), found {found}"
        )


def test_nerc_gpu_pods_tolerate_the_h100_taint() -> None:
    taint = {"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "NVIDIA-H100-80GB-HBM3", "effect": "NoSchedule"}
    for o in workloads("nerc"):
        found = pod_spec(o).get("tolerations", [])
        assert taint in found, fix(
            "nerc",
            f"{ident(o)}: expected the toleration {taint} (gpu_tolerations: CLUSTER-FACTS 'Scheduling', NERC's GPU taint), found {found}",
        )
