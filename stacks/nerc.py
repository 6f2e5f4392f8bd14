"""NERC: TCP only (NCCL_IB_DISABLE=1), single pods for deepti (seed 000)."""

from stacks.model import ClusterConfig, Defaults, Mount, Security, ServiceAccount, Volume, Workload

NS = "nccl-test"  # no seed names the NERC project; the same project name as on the other clusters
WS = [Mount(volume="workspace")]


def _deepti_pod(name: str, image: str, gpus: int, source: str, mounts: list[Mount]) -> Workload:
    return Workload(
        name=name,
        namespace=NS,
        user="deepti",
        source=source,
        kind="pod",
        image=image,
        service_account="ml-dev-sa",
        nodes=1,
        gpus_per_node=gpus,
        transport="tcp",
        mounts=mounts,
    )


CONFIG = ClusterConfig(
    name="nerc",
    description="NERC: GPU nodes with 4 H100, no RDMA: TCP only under the default restricted-v2 SCC",
    api_host=None,
    gpu_model="NVIDIA H100 80GB HBM3",
    gpus_per_node=4,
    fabric=None,
    storage_classes=[],
    namespaces=[NS],
    security=Security(
        scc="restricted-v2",
        create=False,
        existing_allowed_capabilities=["NET_BIND_SERVICE"],
        existing_allows_privileged=False,
        existing_allows_root=False,
        grant=False,  # every authenticated user may use restricted-v2 already
        service_accounts=[ServiceAccount(name="ml-dev-sa", namespace=NS)],
    ),
    defaults=Defaults(memlock_rdma="node-limit", memlock_tcp="none"),
    volumes=[
        # No RWX class is known on NERC: each pod gets its own claim (workspace-POD) on the cluster default class.
        Volume(name="workspace", namespace=NS, mount_path="/workspace", size="100Gi", shared=False),
    ],
    workloads=[
        _deepti_pod("deepti-nerc", "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", 4, "seed 000: pod-deepti-nerc.yaml", WS),
        _deepti_pod(
            "deepti-nerc-pytorch29", "pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime", 4, "seed 000: pod-deepti-nerc-pytorch29.yaml", WS
        ),
        _deepti_pod(
            "deepti-nerc-pytorch29-test",
            "pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime",
            4,
            "seed 000: pod-deepti-nerc-pytorch29-test.yaml",
            WS,
        ),
        _deepti_pod("debug-deepti-nerc", "pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime", 1, "seed 000: pod-debug-deepti-nerc.yaml", []),
    ],
    notes=[
        "NERC pods run with NCCL_IB_DISABLE=1 (seed 000). No namespace, storage class or image is named in the seeds: "
        "the values here are placeholders to set.",
    ],
)
