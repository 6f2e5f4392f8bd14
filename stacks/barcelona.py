"""Barcelona: H100 x4 per node, ConnectX-7, RoCE v2 through SR-IOV (seeds 000, 001, 002, 003)."""

from typing import Any

from stacks.model import (
    BandwidthCheck,
    ClusterConfig,
    Defaults,
    DeviceObservation,
    Mount,
    RdmaFabric,
    Security,
    ServiceAccount,
    SriovAttachment,
    TcpVariant,
    Volume,
    Workload,
)

NS = "nccl-test"
# Seed 002 debugged h-kim in this project and wrote it into the SCC's users list.
DEBUG_NS = "b-efficient-memory-offloading-765cab"
H_KIM_IMAGE = "image-registry.openshift-image-registry.svc:5000/nccl-test/h-kim:latest"


def _sriov_config(iface: str, subnet: int) -> str:
    # The SR-IOV operator writes this config; the seeds never show it. Reconstructed from seed
    # 003's addresses (net1 10.0.103.x .. net4 10.0.106.x, mtu 9000). On the cluster the live NAD
    # is read and copied, so this only stands in for that read in the offline render.
    return (  # %-formatting: the template is JSON, full of braces an f-string would need doubled
        '{"cniVersion":"1.0.0","name":"%s-network","type":"sriov","vlan":0,"spoofchk":"off",'  # noqa: UP031
        '"trust":"on","logLevel":"info","ipam":{"type":"whereabouts","range":"10.0.%d.0/24"}}' % (iface, subnet)
    )


def _two_node_rdma(name: str, user: str, source: str, **shape: Any) -> Workload:
    """The seeds' multi-node RDMA shape: h-kim's image and service account, 2 nodes x 4 GPUs."""
    fields: dict[str, Any] = dict(
        name=name, namespace=NS, user=user, source=source, kind="statefulset", image=H_KIM_IMAGE,
        service_account="h-kim-sa", nodes=2, gpus_per_node=4, transport="rdma",
    )
    return Workload(**{**fields, **shape})


_PORTS = [("eno5np0", "mlx5_6", 103), ("eno6np0", "mlx5_7", 104), ("eno7np0", "mlx5_10", 105), ("eno8np0", "mlx5_11", 106)]

CONFIG = ClusterConfig(
    name="barcelona",
    description="Barcelona: GPU nodes with 4 H100 and ConnectX-7 RoCE v2 over SR-IOV; custom least-privilege SCC",
    api_host=None,  # no seed names it; the kubeconfig context in Pulumi.barcelona.yaml selects the cluster
    gpu_model="NVIDIA H100 80GB HBM3",
    gpus_per_node=4,
    fabric=RdmaFabric(
        link_layer="roce-v2",
        nic="ConnectX-7",
        link_gbps=400,
        devices=["mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"],
        device_observations=[
            DeviceObservation(
                source="seed 002, 'IB Devices Detected' (ibv state in the pod)",
                devices=["mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"],
                note="The ports seen PORT_ACTIVE with link layer Ethernet (RoCE). The stack uses this list.",
            ),
            DeviceObservation(
                source="seed 002 'NCCL Settings' and seed 003 'Architecture' (NCCL_IB_HCA)",
                devices=["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"],
                note="The HCA list the deploy script exported and called 'perfect'. mlx5_10 and mlx5_11 were "
                "not among the ACTIVE ports, and NCCL_IB_HCA entries are prefix matches (mlx5_1 would also "
                "select mlx5_10..19). The launcher detects the live ports instead of pinning either list.",
            ),
        ],
        attachments=[
            SriovAttachment(
                network=f"{iface}-network",
                resource=f"openshift.io/{iface}rdma",
                interface=f"net{i}",
                device=dev,
                cni_config=_sriov_config(iface, subnet),
            )
            for i, (iface, dev, subnet) in enumerate(_PORTS, start=1)
        ],
        nad_source_namespace="default",
        nad_mode="copy",
        device_access="sriov",
        static_hca=False,
        gid_index=None,  # seeds pinned 3; inside pods it can be 4..7, so the launcher reads the GID table
        gdr_level="SYS",  # the seeds' NCCL_NET_GDR_LEVEL=5
    ),
    storage_classes=[],  # no seed names one: per-pod claims on the cluster default (flagged by the preflight)
    namespaces=[NS, DEBUG_NS],
    security=Security(
        scc="nccl-rdma-scc",
        create=True,
        service_accounts=[
            ServiceAccount(name="h-kim-sa", namespace=NS),
            ServiceAccount(name="ml-dev-sa", namespace=NS),
            ServiceAccount(name="h-kim-sa", namespace=DEBUG_NS),
        ],
    ),
    # root + IPC_LOCK pins memory without raising the limit (KNOWLEDGE.md 1): the seeds' final
    # setup added SYS_RESOURCE for `ulimit -l unlimited`, which this strategy does not need.
    defaults=Defaults(memlock_rdma="root-ipc-lock", memlock_tcp="none"),
    volumes=[
        # No RWX class is known on Barcelona: each pod gets its own workspace claim (seed 004's
        # "volumeClaimTemplates (Previous)"). Size not in the seeds: Cairo's workspace size.
        Volume(name="workspace", namespace=NS, mount_path="/workspace", size="100Gi", shared=False),
    ],
    workloads=[
        _two_node_rdma(
            "h-kim",
            "h-kim",
            "seed 000: deployments/h-kim/generated/statefulset-h-kim.yaml; seed 003",
            mounts=[Mount(volume="workspace")],
            # seed 003's `deploy-h-kim.sh --mode tcp`, derived rather than written twice
            tcp_variants=[TcpVariant(name="h-kim-tcp")],
        ),
        _two_node_rdma(
            "h-kim-torchtitan",
            "h-kim",
            "seed 000: deployments/h-kim/generated/job-h-kim-torchtitan.yaml",
            kind="job",
            run="torchrun",
            # The job's command is not in the seeds: torchtitan's LLaMA 3 8B config (seed 003's model).
            args=["-m", "torchtitan.train", "--job.config_file", "/opt/torchtitan/torchtitan/models/llama3/train_configs/llama3_8b.toml"],
        ),
        _two_node_rdma(
            "yunshi",
            "yunshi",
            "seed 000: deployments/yunshi/generated/statefulset-yunshi.yaml (uses h-kim-sa)",
            mounts=[Mount(volume="workspace")],
        ),
        _two_node_rdma(
            "yunshi-large-zero-shot",
            "yunshi",
            "seed 000: deployments/yunshi/generated/large_zero_shot_rdma.yaml (uses h-kim-sa)",
            kind="job",
            run="torchrun",
            args=["/opt/app/large_zero_shot.py"],  # script path not in the seeds
        ),
        Workload(
            name="deepti-barcelona",
            namespace=NS,
            user="deepti",
            source="seed 000: deployments/deepti/generated/pod-deepti-barcelona.yaml (uses ml-dev-sa)",
            kind="pod",
            image="pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
            service_account="ml-dev-sa",
            nodes=1,
            gpus_per_node=4,
            transport="rdma",
            # seed 000: the PyTorch 2.8 and 2.9 variants run with NCCL_IB_DISABLE=1
            tcp_variants=[
                TcpVariant(name="deepti-barcelona-pytorch28", image="pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"),
                TcpVariant(name="deepti-barcelona-pytorch29", image="pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime"),
            ],
        ),
    ],
    bandwidth_checks=[
        # Seed 004 left "verify NCCL communication bandwidth" as a next step; seed 003 claims ~200 GB/s.
        # Two nodes as h-kim's training pods (same SA, image, networks): passes at 0.8 x 4 x 400 Gb/s
        # = 160 GB/s bus bandwidth. It needs both nodes free of training pods to start.
        BandwidthCheck(
            name="rdma-bandwidth",
            namespace=NS,
            service_account="h-kim-sa",
            image=H_KIM_IMAGE,
            nodes=2,
            gpus_per_node=4,
            transport="rdma",
            tool="torch",
            min_fraction=0.8,
        ),
    ],
    notes=[
        "RDMA devices: seed 002 saw mlx5_6..mlx5_9 ACTIVE while seeds 002/003 exported NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11. "
        "Both are kept in fabric.device_observations; static checks use mlx5_6..mlx5_9 and pods detect live ports at start.",
        "GID index: seeds pinned NCCL_IB_GID_INDEX=3. It is only the usual layout; the launcher reads the RoCE v2 IPv4 entry per port.",
        "Memlock: seed 000 added SYS_RESOURCE and `ulimit -l unlimited`; seed 001 claimed prlimit works with IPC_LOCK alone. "
        "Neither is needed: root with effective IPC_LOCK pins past the limit. The SCC allows IPC_LOCK only.",
        "SCC: seed 002's nccl-rdma-scc allowed host IPC, host network, hostPath and privilege escalation, and listed only some "
        "required keys. The stack's SCC allows none of those and carries every key the schema requires.",
        "Images of the deepti pods and the yunshi/torchtitan commands are not in the seeds: the values here are placeholders to set.",
    ],
)
