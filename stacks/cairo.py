"""Cairo: 2 nodes x 4 H100, InfiniBand mlx5_2..mlx5_5 at 400 Gb/s, RWX on nfs-csi (seed 004)."""

from stacks.model import (
    BandwidthCheck,
    ClusterConfig,
    Defaults,
    DeviceObservation,
    Mount,
    Node,
    PvcStorageClassFix,
    RdmaFabric,
    Security,
    ServiceAccount,
    StorageClass,
    TcpVariant,
    Volume,
    Workload,
)

NS = "nccl-test"
NODES = ["moc-r4pcc02u15", "moc-r4pcc02u16"]
IMAGE = "image-registry.openshift-image-registry.svc:5000/nccl-test/ml-dev:latest"  # not in the seeds
PRIVILEGED_RDMA = "no RDMA device plugin on Cairo: /dev/infiniband is visible only to a privileged container"

CONFIG = ClusterConfig(
    name="cairo",
    description="Cairo: 2 nodes with 4 H100 and InfiniBand (no SR-IOV); RWX on nfs-csi; the existing privileged SCC",
    api_host="api.cairo.test.nerc.mghpcc.org",
    gpu_model="NVIDIA H100 80GB HBM3",
    gpus_per_node=4,
    nodes=[Node(name=n, gpus=4) for n in NODES],
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
            "container, and the cluster admin granted the existing privileged SCC to ml-dev-sa. Replace it with a "
            "custom SCC once Cairo gets an RDMA device plugin."
        ),
        service_accounts=[ServiceAccount(name="ml-dev-sa", namespace=NS)],
    ),
    defaults=Defaults(memlock_rdma="privileged", memlock_tcp="none"),
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
        )
    ],
    workloads=[
        Workload(
            name="ml-dev-rdma",
            namespace=NS,
            user="ml-dev",
            source="seed 004: make deploy-multi-node-rdma",
            kind="statefulset",
            image=IMAGE,
            service_account="ml-dev-sa",
            nodes=2,
            gpus_per_node=4,
            transport="rdma",
            memlock="privileged",
            privileged_reason=PRIVILEGED_RDMA,
            node_names=NODES,
            mounts=[Mount(volume="ml-dev-workspace"), Mount(volume="ml-datasets")],
            tcp_variants=[TcpVariant(name="ml-dev-tcp")],  # seed 004: make deploy-multi-node-tcp
        ),
    ],
    bandwidth_checks=[
        # Seed 004 listed "verify NCCL communication bandwidth" as its next step and never ran it. Both
        # nodes, as ml-dev-rdma's pods: passes at 0.8 x 4 x 400 Gb/s = 160 GB/s bus bandwidth. The
        # StatefulSets hold every GPU of both nodes, so the check starts once they are scaled down.
        BandwidthCheck(
            name="rdma-bandwidth",
            namespace=NS,
            service_account="ml-dev-sa",
            image=IMAGE,
            nodes=2,
            gpus_per_node=4,
            transport="rdma",
            tool="torch",
            memlock="privileged",
            privileged_reason=PRIVILEGED_RDMA,
            node_names=NODES,
        ),
    ],
    notes=[
        "Seed 004 reports 'IPC_LOCK enabled' with CapPrm 00000000000045fb: that is CRI-O's default set plus IPC_LOCK for a "
        "root container, not a privileged container. Without SR-IOV or privileged, /dev/infiniband is not in the pod and "
        "NCCL falls back to sockets, which the seed never measured; the RDMA workload is therefore privileged.",
        "Seed 004 set NCCL_IB_GID_INDEX=3 on InfiniBand, where it has no effect; the stack does not set it.",
        "Seed 004 saw 5 ACTIVE InfiniBand devices but used 4: NCCL_IB_HCA is pinned to mlx5_2..mlx5_5 in exact-match form.",
        "The workloads' image is not in the seeds: the value here is a placeholder to set.",
    ],
)
