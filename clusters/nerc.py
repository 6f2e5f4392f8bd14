"""The nerc cluster's config, the file you edit: README "Edit a stack"; every field in `python -m stacks schema`.

NERC: TCP only (NCCL_IB_DISABLE=1), deepti's pods (seed 000; CLUSTER-FACTS.md for her project, image, script,
resources, the GPU taint and the storage classes).

Runs at once: deepti-nerc on the one H100 node the stack counts on. Her other pods are defined, stopped.
"""

from config import (
    AcceptedWarning,
    ClusterConfig,
    ContainerPort,
    ExistingObjects,
    Mount,
    NamespacedName,
    NodeSet,
    ScriptMount,
    Security,
    ServiceAccount,
    StorageClass,
    Toleration,
    Volume,
    Workload,
)

FACTS = "CLUSTER-FACTS.md"
# Two projects appear for deepti on NERC: her pods ran in this one (pod-deepti-nerc*.yaml); coops-767192 is where
# the cluster config and deploy script point. The pods' project is where her work really ran.
NS = "mllm-interpretation-and-failure-investigation-c8fa7f"
IMAGE = "quay.io/jschless/ml-dev-env:pytorch-2.9-numpy2"  # all four NERC pods (CLUSTER-FACTS "Images")


def _deepti(name: str, source: str, state: str = "stopped", **fields: object) -> Workload:
    """deepti's pods: her script from the ConfigMap deepti-script, requests 4 CPU / 8Gi, limits 8 CPU / 10Gi, 4 GPUs."""
    base: dict[str, object] = dict(
        name=name,
        namespace=NS,
        user="deepti",
        source=source,
        kind="statefulset",  # a one-replica StatefulSet: it survives a crash or a node reboot, unlike the seed's Pod
        state=state,
        image=IMAGE,
        service_account="ml-dev-sa",
        nodes=1,
        gpus_per_node=4,
        transport="tcp",
        cpu="4",
        cpu_limit="8",
        memory="8Gi",
        memory_limit="10Gi",
        shm_size="4Gi",
        mounts=[Mount(volume="workspace")],
        scripts=[ScriptMount(config_map="deepti-script", mount_path="/scripts")],
        run="command",
        args=["python", "/scripts/deepti.py"],
        working_dir="/workspace",
        env={
            "HF_HOME": "/workspace/.cache/huggingface",
            "TRANSFORMERS_CACHE": "/workspace/.cache/transformers",
            "TRITON_CACHE_DIR": "/workspace/.triton",
            "NCCL_DEBUG": "INFO",
            "NCCL_P2P_LEVEL": "NVL",
        },
    )
    return Workload(**{**base, **fields})  # type: ignore[arg-type]


CONFIG = ClusterConfig(
    name="nerc",
    description="NERC: GPU nodes with 4 H100, no RDMA: TCP only under the default restricted-v2 SCC",
    api_host="api.shift.nerc.mghpcc.org",  # CLUSTER-FACTS: clusters/nerc-production.yaml
    gpu_model="NVIDIA H100 80GB HBM3",
    node_sets=[
        NodeSet(
            name="h100",
            count=1,
            gpus_per_node=4,
            source="NERC is a shared production cluster whose GPU nodes the facts do not name: the stack counts on one H100 "
            "node for deepti's project. Raise count when the project may use more at once.",
        )
    ],
    # CLUSTER-FACTS "Scheduling": every NERC pod tolerates this taint; without it they stay Pending.
    gpu_tolerations=[Toleration(key="nvidia.com/gpu.product", operator="Equal", value="NVIDIA-H100-80GB-HBM3", effect="NoSchedule")],
    fabric=None,
    storage_classes=[
        StorageClass(name="nfs-csi", access_modes=["ReadWriteMany", "ReadWriteOnce"], note=f"{FACTS}: clusters/nerc-production.yaml"),
        StorageClass(
            name="ocs-external-storagecluster-ceph-rbd", access_modes=["ReadWriteOnce"], note=f"{FACTS}: clusters/nerc-production.yaml"
        ),
    ],
    namespaces=[NS],
    security=Security(service_accounts=[ServiceAccount(name="ml-dev-sa", namespace=NS)]),  # every pod runs restricted-v2
    volumes=[
        # One RWX workspace for deepti's pods on nfs-csi (her Hugging Face and Triton caches live there).
        Volume(name="workspace", namespace=NS, mount_path="/workspace", size="100Gi", storage_class="nfs-csi"),
    ],
    existing=ExistingObjects(config_maps=[NamespacedName(namespace=NS, name="deepti-script")]),  # made from her deepti.py
    workloads=[
        _deepti("deepti-nerc", "seed 000: pod-deepti-nerc.yaml", state="running"),
        _deepti("deepti-nerc-pytorch29", "seed 000: pod-deepti-nerc-pytorch29.yaml"),
        _deepti("deepti-nerc-pytorch29-test", "seed 000: pod-deepti-nerc-pytorch29-test.yaml"),
        _deepti(
            "deepti-debug",
            f"seed 000: pod-debug-deepti-nerc.yaml; {FACTS}: 4 GPUs, debugpy on 5678",
            args=["python", "-m", "debugpy", "--listen", "0.0.0.0:5678", "--wait-for-client", "/scripts/deepti.py"],
            ports=[ContainerPort(name="debugpy", port=5678)],  # oc port-forward deepti-debug-0 5678
        ),
    ],
    accepted_warnings=[
        # The image rule warns on every image not pinned by digest; this entry accepts IMAGE only (value): another
        # image warns again. Pin it (IMAGE@sha256:..., `skopeo inspect docker://IMAGE`) once its digest is read, and
        # drop this entry.
        AcceptedWarning(
            rule="image",
            object=f"StatefulSet {NS}/deepti-*",
            value=IMAGE,
            reason=f"deepti's pods ran this tag ({FACTS} 'Images'); no digest is recorded",
        ),
    ],
    notes=[
        "NERC pods run with NCCL_IB_DISABLE=1 (seed 000) and non-root under restricted-v2: TCP needs no privilege.",
        "Project: CLUSTER-FACTS names mllm-interpretation-and-failure-investigation-c8fa7f (where the pods ran) and "
        "coops-767192 (the cluster config and deploy script); the stack deploys where the work ran.",
        "The seeds' pods are one-replica StatefulSets here: a bare Pod stays Failed after a crash or a node reboot.",
        "The debug pod is deepti-debug (its name in the predecessor project), with 4 GPUs and debugpy, not 1 GPU.",
    ],
)
