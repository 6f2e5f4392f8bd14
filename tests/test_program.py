"""What `pulumi up` would create for each stack: the seeds' objects, with the seeds' settings."""

from __future__ import annotations

import json

import stacks
from components.program import objects, patches
from conftest import container, env_of, find, rendered_stack
from render.engine import run
from render.writer import canonical

BARCELONA_PORTS = ["eno5np0", "eno6np0", "eno7np0", "eno8np0"]
SERVER_SET = {"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"}


def test_barcelona_copies_the_four_sriov_nads_into_every_user_namespace():
    r = rendered_stack("barcelona")
    for ns in stacks.load("barcelona").namespaces:
        for port in BARCELONA_PORTS:
            nad = find(r, "NetworkAttachmentDefinition", f"{port}-network", ns)
            meta = nad["metadata"]
            assert meta["annotations"] == {"k8s.v1.cni.cncf.io/resourceName": f"openshift.io/{port}rdma"}
            assert not SERVER_SET & meta.keys(), "server-set metadata must not be copied"
            assert json.loads(nad["spec"]["config"])["type"] == "sriov"  # a JSON string, per the CRD


def test_nad_copies_come_from_a_live_read_of_the_default_namespace():
    r = rendered_stack("barcelona")
    assert sorted(rec.inputs["metadata"]["name"] for rec in r.reads) == [f"{p}-network" for p in BARCELONA_PORTS]
    # the read answer carries the operator's owner-ref; the copies must drop it
    assert all("sriovnetwork.openshift.io/owner-ref" in rec.inputs["metadata"]["annotations"] for rec in r.reads)


def test_barcelona_statefulset_attaches_net1_to_net4_and_requests_each_vf():
    sts = find(rendered_stack("barcelona"), "StatefulSet", "h-kim", "nccl-test")
    tpl = sts["spec"]["template"]
    nets = tpl["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].split(",")
    assert nets == [f"nccl-test/{p}-network@net{i}" for i, p in enumerate(BARCELONA_PORTS, start=1)]
    res = container(sts)["resources"]
    for p in BARCELONA_PORTS:
        assert res["requests"][f"openshift.io/{p}rdma"] == 1
        assert res["limits"][f"openshift.io/{p}rdma"] == 1
    assert res["limits"]["nvidia.com/gpu"] == 4
    assert sts["spec"]["replicas"] == 2 and sts["spec"]["podManagementPolicy"] == "Parallel"
    assert tpl["metadata"]["annotations"]["openshift.io/required-scc"] == "nccl-rdma-scc"


def test_rdma_pod_runs_as_root_with_ipc_lock_only():
    sts = find(rendered_stack("barcelona"), "StatefulSet", "h-kim", "nccl-test")
    sc = container(sts)["securityContext"]
    assert sc["capabilities"] == {"add": ["IPC_LOCK"]}
    assert sc["runAsUser"] == 0  # added capabilities are effective only for uid 0
    assert "privileged" not in sc


def test_pods_start_through_the_launcher_with_the_rendezvous_settings():
    sts = find(rendered_stack("barcelona"), "StatefulSet", "h-kim", "nccl-test")
    c = container(sts)
    assert c["command"] == ["python3", "/opt/launcher/launcher.py"]
    env = env_of(sts)
    assert env["MASTER_ADDR"] == "h-kim-0.h-kim-headless.nccl-test.svc.cluster.local"
    assert env["LAUNCHER_NNODES"] == "2" and env["LAUNCHER_GPUS_PER_NODE"] == "4"
    assert env["LAUNCHER_RDMA_INTERFACES"] == "net1,net2,net3,net4"
    assert env["NCCL_IB_DISABLE"] == "0" and env["NCCL_NET_GDR_LEVEL"] == "SYS"
    # the devices are detected in the pod, not pinned to the seeds' wrong list
    assert "NCCL_IB_HCA" not in env
    pod_name = next(e for e in c["env"] if e["name"] == "POD_NAME")
    assert pod_name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    shm = next(v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"


def test_launcher_configmap_holds_the_tested_file():
    from components.launcher import LAUNCHER_PATH

    r = rendered_stack("barcelona")
    cm = find(r, "ConfigMap", "gpu-training-launcher", "nccl-test")
    assert cm["data"]["launcher.py"] == LAUNCHER_PATH.read_text()
    # one per namespace that runs pods, and every pod mounts it
    assert len([o for o in r.objects() if o["kind"] == "ConfigMap"]) == 1
    sts = find(r, "StatefulSet", "h-kim", "nccl-test")
    (vol,) = [v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "launcher"]
    assert vol["configMap"]["name"] == "gpu-training-launcher"


def test_headless_service_publishes_not_ready_addresses():
    svc = find(rendered_stack("barcelona"), "Service", "h-kim-headless", "nccl-test")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {"app.kubernetes.io/instance": "h-kim"}


def test_barcelona_without_rwx_gets_per_pod_workspaces_that_outlive_the_statefulset():
    sts = find(rendered_stack("barcelona"), "StatefulSet", "h-kim", "nccl-test")
    (tpl,) = sts["spec"]["volumeClaimTemplates"]
    assert tpl["metadata"]["name"] == "workspace"
    assert tpl["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}


def test_tcp_variant_is_derived_without_rdma():
    r = rendered_stack("barcelona")
    tcp = find(r, "StatefulSet", "h-kim-tcp", "nccl-test")
    env = env_of(tcp)
    assert env["NCCL_IB_DISABLE"] == "1" and env["LAUNCHER_MODE"] == "tcp"
    assert "k8s.v1.cni.cncf.io/networks" not in tcp["spec"]["template"]["metadata"]["annotations"]
    res = container(tcp)["resources"]["requests"]
    assert not [k for k in res if k.startswith("openshift.io/")]
    assert "capabilities" not in container(tcp)["securityContext"]
    rdma = find(r, "StatefulSet", "h-kim", "nccl-test")
    assert container(tcp)["image"] == container(rdma)["image"]


def test_cairo_rwx_claims_and_nfs_fix():
    r = rendered_stack("cairo")
    ws = find(r, "PersistentVolumeClaim", "ml-dev-workspace", "nccl-test")
    ds = find(r, "PersistentVolumeClaim", "ml-datasets", "nccl-test")
    for pvc, size in ((ws, "100Gi"), (ds, "500Gi")):
        want = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}, "storageClassName": "nfs-csi"}
        assert pvc["spec"] == want
    (patch,) = [rec for rec in r.resources if rec.is_patch]
    assert patch.type == "kubernetes:core/v1:PersistentVolumeClaimPatch"
    assert patch.object["metadata"]["namespace"] == "nfs" and patch.object["metadata"]["name"] == "nfs-server-root"
    assert patch.object["spec"] == {"storageClassName": "ocs-external-storagecluster-ceph-rbd"}


def test_cairo_references_the_existing_privileged_scc_and_grants_it_like_oc_adm_policy():
    r = rendered_stack("cairo")
    assert not [o for o in r.objects() if o["kind"] in ("SecurityContextConstraints", "ClusterRole")]
    rb = find(r, "RoleBinding", "system:openshift:scc:privileged", "nccl-test")
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:openshift:scc:privileged"}
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "ml-dev-sa", "namespace": "nccl-test"}]
    sts = find(r, "StatefulSet", "ml-dev-rdma", "nccl-test")
    assert env_of(sts)["NCCL_IB_HCA"] == "=mlx5_2,mlx5_3,mlx5_4,mlx5_5"
    assert "NCCL_IB_GID_INDEX" not in env_of(sts)  # InfiniBand uses no GID index
    affinity = sts["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        "moc-r4pcc02u15",
        "moc-r4pcc02u16",
    ]


def test_nerc_is_tcp_only_with_no_capabilities():
    r = rendered_stack("nerc")
    pods = [o for o in r.objects() if o["kind"] == "Pod"]
    assert len(pods) == 4
    for pod in pods:
        assert env_of(pod)["NCCL_IB_DISABLE"] == "1"
        assert "capabilities" not in container(pod)["securityContext"]
        assert pod["metadata"]["annotations"] == {"openshift.io/required-scc": "restricted-v2"}
    assert not [o for o in r.objects() if o["kind"] in ("NetworkAttachmentDefinition", "RoleBinding", "SecurityContextConstraints")]


def test_indexed_job_uses_the_headless_service_as_subdomain():
    job = find(rendered_stack("barcelona"), "Job", "h-kim-torchtitan", "nccl-test")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 2
    assert spec["template"]["spec"]["subdomain"] == "h-kim-torchtitan-headless"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert env_of(job)["MASTER_ADDR"] == "h-kim-torchtitan-0.h-kim-torchtitan-headless.nccl-test.svc.cluster.local"
    assert env_of(job)["LAUNCHER_RUN"] == "torchrun"


def test_data_volumes_are_protected_and_retained_on_delete(stack_rendering):
    claims = [rec for rec in stack_rendering.resources if rec.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    per_pod = [o for o in stack_rendering.objects() if o["kind"] == "StatefulSet" and o["spec"].get("volumeClaimTemplates")]
    assert claims or per_pod, "every stack has data volumes"
    for rec in claims:
        assert rec.options["protect"] and rec.options["retain_on_delete"], rec.name
    for sts in per_pod:  # Kubernetes keeps these; the retention policy says so explicitly
        assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"


def test_workloads_wait_for_their_grant_networks_and_claims(stack_rendering):
    main_kinds = ("kubernetes:apps/v1:StatefulSet", "kubernetes:batch/v1:Job", "kubernetes:core/v1:Pod")
    for rec in stack_rendering.resources:
        if rec.type in main_kinds:
            assert rec.options["delete_before_replace"], rec.name
            deps = " ".join(rec.options["depends_on"])
            for needed in ("ConfigMap", "ServiceAccount"):
                assert needed in deps, (rec.name, needed)


def test_objects_equal_the_rendering(stack_rendering):
    """The plain objects the preflight reads inside `pulumi preview` are what the program declares."""
    config = stack_rendering.config

    def key(o):
        return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])

    rendered = sorted((canonical(r.object, True) for r in stack_rendering.resources if not r.is_patch), key=key)
    planned = sorted((canonical(o, True) for o in objects(config)), key=key)
    assert rendered == planned
    assert [canonical(r.object, True) for r in stack_rendering.resources if r.is_patch] == [canonical(p, True) for p in patches(config)]


def test_outputs_describe_each_workload(stack_rendering):
    out = stack_rendering.outputs
    config = stack_rendering.config
    assert out["namespaces"] == config.namespaces and out["scc"] == config.security.scc
    assert set(out["workloads"]) == {w.name for w in config.all_workloads()}
    for w in config.all_workloads():
        o = out["workloads"][w.name]
        assert o["replicas"] == w.nodes and o["world_size"] == w.nodes * w.gpus_per_node and o["mode"] == w.transport
        assert o["nccl_env"]["NCCL_IB_DISABLE"] == ("0" if w.transport == "rdma" else "1")


def test_barcelona_outputs_name_the_nads_and_master_addr():
    out = rendered_stack("barcelona").outputs
    assert "nccl-test/eno5np0-network" in out["network_attachments"]
    assert out["workloads"]["h-kim"]["master_addr"] == "h-kim-0.h-kim-headless.nccl-test.svc.cluster.local"
    assert out["workloads"]["h-kim"]["headless_service"] == "h-kim-headless.nccl-test.svc.cluster.local"


def test_rendering_is_deterministic(tmp_path):
    from render.writer import write

    config = stacks.load("barcelona")
    a = write(run(config), tmp_path / "a")
    b = write(run(config), tmp_path / "b")
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert "replicas: 2\n" in (a / "nccl-test" / "statefulset-h-kim.yaml").read_text()  # ints, not 2.0


def test_tcp_variant_drops_rdma_only_nccl_settings_but_keeps_the_rest():
    config = stacks.load("barcelona")
    data = config.model_dump()
    (h_kim,) = [w for w in data["workloads"] if w["name"] == "h-kim"]
    h_kim["env"] = {"NCCL_IB_HCA": "=mlx5_6", "NCCL_SOCKET_IFNAME": "net1", "NCCL_DEBUG": "INFO", "HF_HOME": "/workspace/hf"}
    variant = next(w for w in stacks.validate(data, "test").all_workloads() if w.name == "h-kim-tcp")
    assert variant.env == {"NCCL_DEBUG": "INFO", "HF_HOME": "/workspace/hf"}
