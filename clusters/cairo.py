"""The cairo cluster's config, the file you edit: README "Edit a stack"; every field in `python -m stacks schema`.

Cairo: 2 nodes x 4 H100, InfiniBand mlx5_2..mlx5_5 at 400 Gb/s, RWX on nfs-csi (seed 004; CLUSTER-FACTS.md for
the ml-dev-env image, ports, Routes and hostfile).

CLUSTER-FACTS.md: ml-dev-env commit 9466baf "Remove Cairo cluster references (cluster dismantled)"; its two hosts
reappear as Barcelona's -yunshi nodes. The stack stays as the record of seed 004's setup, and for the day the
cluster (or one like it) is back.

Runs at once: the ml-dev-env StatefulSet on both nodes (8 GPUs: all of them).
"""

from pathlib import Path

from config import (
    AcceptedWarning,
    BandwidthCheck,
    ClusterConfig,
    ContainerPort,
    Defaults,
    DeviceObservation,
    HandMade,
    ImageBuild,
    Mount,
    NodeSet,
    PvcStorageClassFix,
    RdmaFabric,
    ScriptConfigMap,
    ScriptMount,
    Security,
    ServiceAccount,
    StorageClass,
    Toleration,
    Volume,
    Workload,
)

FACTS = "CLUSTER-FACTS.md"
NS = "nccl-test"
NODES = ["moc-r4pcc02u15", "moc-r4pcc02u16"]
PRIVILEGED_RDMA = "no RDMA device plugin on Cairo: /dev/infiniband is visible only to a privileged container"

ML_DEV_IMAGE = ImageBuild(
    name="ml-dev-env",
    namespace=NS,
    tag="latest",
    source=f"{FACTS}: k8s/imagestream.yaml and k8s/buildconfig.yaml (ImageStream ml-dev-env, FROM nvcr.io/nvidia/pytorch:25.08-py3). "
    "The original also baked NCCL_IB_HCA/GID/SOCKET_IFNAME with ENV; this one bakes no NCCL setting (the launcher sets them).",
    dockerfile="""FROM nvcr.io/nvidia/pytorch:25.08-py3
# RDMA userspace for NCCL's IB transport, and the tools the workspace pods offer.
RUN apt-get update \\
 && apt-get install -y --no-install-recommends rdma-core libibverbs1 ibverbs-providers ibverbs-utils infiniband-diags curl \\
 && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir deepspeed jupyterlab tensorboard debugpy
RUN curl -fsSL https://code-server.dev/install.sh | sh
""",
)

CONFIG = ClusterConfig(
    name="cairo",
    description="Cairo: 2 nodes with 4 H100 and InfiniBand (no SR-IOV); RWX on nfs-csi; the existing privileged SCC",
    api_host="api.cairo.test.nerc.mghpcc.org",
    gpu_model="NVIDIA H100 80GB HBM3",
    node_sets=[NodeSet(name="cairo", nodes=NODES, gpus_per_node=4, source="seed 004: Nodes moc-r4pcc02u15, moc-r4pcc02u16")],
    # CLUSTER-FACTS "Scheduling": the Cairo templates tolerate nvidia.com/gpu and select nvidia.com/gpu.present=true.
    gpu_tolerations=[Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
    gpu_node_selector={"nvidia.com/gpu.present": "true"},
    fabric=RdmaFabric(
        link_layer="infiniband",
        nic="MT4129 (ConnectX-7)",
        link_gbps=400,
        devices=["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"],
        device_observations=[
            DeviceObservation(
                source="seed 004, 'Multi-Node RDMA with RWX' (NCCL_IB_HCA) and 'Hardware Verified'",
                devices=["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"],
                note="400 Gb/s, Active. The stack uses this list.",
            ),
            DeviceObservation(
                source="seed 004, '5 Active InfiniBand devices detected'",
                devices=["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "(a fifth, unnamed)"],
                note="A fifth ACTIVE device exists on the nodes; the seed does not name it and NCCL_IB_HCA excluded it.",
            ),
        ],
        attachments=[],  # no SR-IOV on Cairo (seed 004: "Configure SR-IOV if available")
        device_access="privileged",
        static_hca=True,  # seed 004 pinned the four 400 Gb/s ports; the exact form keeps the fifth out
        gid_index=None,  # seed 004 set 3; InfiniBand uses no GID index
        gdr_level="SYS",
    ),
    storage_classes=[
        StorageClass(
            name="nfs-csi", access_modes=["ReadWriteMany", "ReadWriteOnce"], note="seed 004: RWX filesystem via the NFS CSI driver"
        ),
        StorageClass(
            name="ocs-external-storagecluster-ceph-rbd",
            access_modes=["ReadWriteOnce"],
            note="seed 004: RWO filesystem (RWX only as block devices)",
        ),
    ],
    namespaces=[NS],
    security=Security(
        scc="privileged",
        create=False,
        existing_allowed_capabilities=None,
        existing_allows_privileged=True,
        existing_allows_root=True,
        broad_grant_reason=(
            "seed 004: Cairo has no SR-IOV, so the host's /dev/infiniband reaches an RDMA pod only through a privileged "
            "container, and the cluster admin granted the existing privileged SCC to ml-dev-sa. Only the RDMA pods run under "
            "it (a TCP form runs under restricted-v2). Replace it with a custom SCC once Cairo gets an RDMA device plugin."
        ),
        service_accounts=[ServiceAccount(name="ml-dev-sa", namespace=NS)],
    ),
    defaults=Defaults(
        memlock_rdma="privileged",
        memlock_tcp="none",
        nccl_env_rdma={"NCCL_CROSS_NIC": "1"},  # CLUSTER-FACTS: Cairo's RDMA StatefulSet set it
    ),
    volumes=[
        Volume(name="ml-dev-workspace", namespace=NS, mount_path="/workspace", size="100Gi", storage_class="nfs-csi"),
        Volume(name="ml-datasets", namespace=NS, mount_path="/datasets", size="500Gi", storage_class="nfs-csi"),
    ],
    pvc_fixes=[
        PvcStorageClassFix(
            namespace="nfs",
            pvc="nfs-server-root",
            storage_class="ocs-external-storagecluster-ceph-rbd",
            reason="seed 004: the NFS server pod stayed Pending because its root PVC had no storage class",
            serves_storage_classes=["nfs-csi"],
        )
    ],
    scripts=[
        ScriptConfigMap(
            name="ml-dev-env-tools",
            namespace=NS,
            files={"start-tools.sh": (Path(__file__).parent / "files" / "ml-dev-env-tools.sh").read_text(encoding="utf-8")},
            source=f"{FACTS}: ml-dev-env's ports 8080 code-server, 8888 Jupyter, 6006 TensorBoard, 5678 debugpy",
        )
    ],
    images=[ML_DEV_IMAGE],
    workloads=[
        Workload(
            name="ml-dev-env",
            namespace=NS,
            user="ml-dev",
            source=f"seed 004: make deploy-multi-node-rdma / -tcp (the same StatefulSet); {FACTS}: its name, ports and hostfile",
            kind="statefulset",
            image=ML_DEV_IMAGE.reference,
            service_account="ml-dev-sa",
            nodes=2,
            gpus_per_node=4,
            transport="rdma",  # seed 004's TCP deployment is this workload with transport="tcp" (then not privileged)
            privileged_reason=PRIVILEGED_RDMA,
            mounts=[Mount(volume="ml-dev-workspace"), Mount(volume="ml-datasets")],
            scripts=[ScriptMount(config_map="ml-dev-env-tools", mount_path="/scripts")],
            run="command",
            args=["bash", "/scripts/start-tools.sh"],
            ports=[
                ContainerPort(name="code-server", port=8080, route=True),
                ContainerPort(name="jupyter", port=8888, route=True),
                ContainerPort(name="tensorboard", port=6006),  # no authentication of its own: oc port-forward ml-dev-env-0 6006
                ContainerPort(name="debugpy", port=5678),  # oc port-forward ml-dev-env-0 5678
            ],
            deepspeed_hostfile="/workspace/.deepspeed/hostfile",  # seed 004's next step: DeepSpeed training
        ),
    ],
    bandwidth_checks=[
        # Seed 004 listed "verify NCCL communication bandwidth" as its next step and never ran it. Both nodes:
        # passes at 0.8 x 4 x 400 Gb/s = 160 GB/s bus bandwidth.
        BandwidthCheck(
            name="rdma-bandwidth",
            namespace=NS,
            enabled=False,  # it needs both nodes: stop ml-dev-env to enable it
            service_account="ml-dev-sa",
            image=ML_DEV_IMAGE.reference,
            nodes=2,
            gpus_per_node=4,
            transport="rdma",
            tool="torch",
            memlock="privileged",
            privileged_reason=PRIVILEGED_RDMA,
        ),
    ],
    # What seed 004 made by hand, adopted with `python -m stacks import-plan` (docs/adoption.md).
    hand_made=[
        HandMade(kind="ServiceAccount", name="ml-dev-sa", namespace=NS, source="seed 004: oc create serviceaccount ml-dev-sa"),
        HandMade(
            kind="RoleBinding",
            name="system:openshift:scc:privileged",
            namespace=NS,
            source="seed 004: oc adm policy add-scc-to-user privileged",
        ),
        HandMade(kind="PersistentVolumeClaim", name="ml-dev-workspace", namespace=NS, source="seed 004: oc apply -f k8s/pvcs.yaml"),
        HandMade(kind="PersistentVolumeClaim", name="ml-datasets", namespace=NS, source="seed 004: oc apply -f k8s/pvcs.yaml"),
        HandMade(kind="ImageStream", name="ml-dev-env", namespace=NS, source=f"{FACTS}: k8s/imagestream.yaml"),
    ],
    accepted_warnings=[
        AcceptedWarning(
            rule="privileged-scc",
            object="SecurityContextConstraints privileged",
            reason="no SR-IOV device plugin on Cairo: /dev/infiniband reaches RDMA pods only in privileged containers (seed 004)",
        ),
        AcceptedWarning(
            rule="privileged-container",
            object="StatefulSet nccl-test/ml-dev-env",
            reason="its RDMA form needs the host's /dev/infiniband (privileged_reason); its TCP form runs under restricted-v2",
        ),
    ],
    notes=[
        "Seed 004 reports 'IPC_LOCK enabled' with CapPrm 00000000000045fb: that is CRI-O's default set plus IPC_LOCK for a "
        "root container, not a privileged container. Without SR-IOV or privileged, /dev/infiniband is not in the pod and "
        "NCCL falls back to sockets, which the seed never measured; the RDMA workload is therefore privileged.",
        "Seed 004 set NCCL_IB_GID_INDEX=3 on InfiniBand, where it has no effect; the stack does not set it.",
        "Seed 004 saw 5 ACTIVE InfiniBand devices but used 4: NCCL_IB_HCA is pinned to mlx5_2..mlx5_5 in exact-match form.",
        "ml-dev-rdma and ml-dev-tcp were one StatefulSet, ml-dev-env, deployed in one mode or the other: one workload whose "
        "transport is switched.",
        "The cluster was dismantled (ml-dev-env commit 9466baf); its hosts are now Barcelona's -yunshi nodes.",
    ],
)
