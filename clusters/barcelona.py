"""The barcelona cluster's config, the file you edit: README "Edit a stack"; every field in `python -m stacks schema`.

Barcelona: H100 x4 per node, ConnectX-7, RoCE v2 through SR-IOV (seeds 000-003; CLUSTER-FACTS.md for
what the seeds leave out: nodes, namespaces, images, commands, storage classes, the NADs' config).

Runs at once: h-kim's 2-node RDMA StatefulSet and deepti's 1-node pod on the three nairr nodes, yunshi's
2-node run on his own two nodes (5 nodes, 20 GPUs: all of them). Everything else is defined, stopped.
"""

from pathlib import Path

from config import (
    AcceptedWarning,
    BandwidthCheck,
    ClusterConfig,
    Defaults,
    DeviceObservation,
    ExistingObjects,
    HandMade,
    ImageBuild,
    Mount,
    NamespacedName,
    NodeSet,
    RdmaFabric,
    ScriptConfigMap,
    ScriptMount,
    SecretKeyRef,
    Security,
    ServiceAccount,
    SriovAttachment,
    StorageClass,
    TcpVariant,
    Toleration,
    Volume,
    Workload,
)

FACTS = "CLUSTER-FACTS.md"
NS = "nccl-test"  # seeds 000/001: h-kim's first project; deepti's pods and the image builds live here
H_KIM_NS = "b-efficient-memory-offloading-765cab"  # seed 002; ml-dev-env commit e70c16f "correct namespace"
YUNSHI_NS = "b-ts-data-agent-0a0cee"  # statefulset-yunshi.yaml names its NADs there
RBD = "ocs-external-storagecluster-ceph-rbd"

H_KIM_IMAGE = ImageBuild(
    name="h-kim",
    namespace=NS,
    tag="latest",
    source=f"seed 001 and {FACTS}: BuildConfig h-kim in nccl-test, FROM nvcr.io/nvidia/pytorch:26.01-py3 with rdma-core, "
    "libibverbs, infiniband-diags and torchtitan",
    dockerfile="""FROM nvcr.io/nvidia/pytorch:26.01-py3
# RDMA userspace: NCCL's IB transport needs libibverbs and the mlx5 provider from rdma-core.
RUN apt-get update \\
 && apt-get install -y --no-install-recommends rdma-core libibverbs1 ibverbs-providers ibverbs-utils infiniband-diags \\
 && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir torchtitan
""",
)


def _nad_config(port: str, subnet: int, route: int) -> str:
    # CLUSTER-FACTS "Real NAD configuration": type sriov, mtu 9000, vlan 0, spoofchk off, trust on, vlanQoS 0,
    # link_state enable, whereabouts 10.0.10X.0/24 with a route to 192.168.7X.0/24. The platform preview reads
    # the live NAD and fails if the operator's config differs (then copy it from `oc get net-attach-def`).
    return (
        '{"cniVersion":"1.0.0","name":"%s-network","type":"sriov","vlan":0,"vlanQoS":0,"spoofchk":"off","trust":"on",'  # noqa: UP031
        '"link_state":"enable","mtu":9000,"ipam":{"type":"whereabouts","range":"10.0.%d.0/24",'
        '"routes":[{"dst":"192.168.%d.0/24"}]}}' % (port, subnet, route)
    )


_PORTS = [("eno5np0", "mlx5_6", 103, 77), ("eno6np0", "mlx5_7", 104, 78), ("eno7np0", "mlx5_10", 105, 79), ("eno8np0", "mlx5_11", 106, 80)]

# deepti's pods (pod-deepti-barcelona*.yaml): her script from the ConfigMap deepti-script, her caches on the
# workspace, requests 4 CPU / 8Gi and limits 8 CPU / 10Gi.
DEEPTI_ENV = {
    "HF_HOME": "/workspace/.cache/huggingface",
    "TRANSFORMERS_CACHE": "/workspace/.cache/transformers",
    "TRITON_CACHE_DIR": "/workspace/.triton",
    "NCCL_DEBUG": "INFO",
    "NCCL_P2P_LEVEL": "NVL",
}

CONFIG = ClusterConfig(
    name="barcelona",
    description="Barcelona: GPU nodes with 4 H100 and ConnectX-7 RoCE v2 over SR-IOV; custom least-privilege SCC",
    api_host="api.barcelona.nerc.mghpcc.org",  # CLUSTER-FACTS: clusters/barcelona.yaml names barcelona.nerc.mghpcc.org
    gpu_model="NVIDIA H100 80GB HBM3",
    node_sets=[
        NodeSet(
            name="nairr",
            nodes=["moc-r4pcc02u17-nairr", "moc-r4pcc02u18-nairr", "moc-r4pcc02u25-nairr"],
            gpus_per_node=4,
            source=f"{FACTS}: clusters/barcelona.yaml, as of 2026-07-11",
        ),
        NodeSet(
            name="yunshi",
            nodes=["moc-r4pcc02u15-yunshi", "moc-r4pcc02u16-yunshi"],
            gpus_per_node=4,
            source=f"{FACTS}: clusters/barcelona.yaml; yunshi's StatefulSet pins these two",
        ),
    ],
    # CLUSTER-FACTS "Scheduling": Barcelona's templates tolerate nvidia.com/gpu and select nvidia.com/gpu.present=true.
    gpu_tolerations=[Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
    gpu_node_selector={"nvidia.com/gpu.present": "true"},
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
                source="seed 002 'NCCL Settings' and seed 003 'Architecture' (NCCL_IB_HCA); baked into the images (CLUSTER-FACTS)",
                devices=["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"],
                note="The HCA list the deploy script exported and called 'perfect'. mlx5_10 and mlx5_11 were "
                "not among the ACTIVE ports, and NCCL_IB_HCA entries are prefix matches (mlx5_1 would also "
                "select mlx5_10..19). The launcher uses the devices behind the pod's net1..net4 and overrides the image's list.",
            ),
        ],
        attachments=[
            SriovAttachment(
                network=f"{port}-network",
                resource=f"openshift.io/{port}rdma",
                interface=f"net{i}",
                device=dev,
                cni_config=_nad_config(port, subnet, route),
            )
            for i, (port, dev, subnet, route) in enumerate(_PORTS, start=1)
        ],
        nad_source_namespace="default",
        nad_mode="copy",
        device_access="sriov",
        static_hca=False,
        gid_index=None,  # seeds pinned 3; inside pods it can be 4..7, so the launcher reads the GID table
        gdr_level="SYS",  # the seeds' NCCL_NET_GDR_LEVEL=5
    ),
    storage_classes=[
        StorageClass(name=RBD, access_modes=["ReadWriteOnce"], note=f"{FACTS}: every h-kim claim template uses it"),
        # ocs-external-storagecluster-cephfs is named in clusters/barcelona.yaml but not confirmed: not counted on.
    ],
    namespaces=[NS, H_KIM_NS, YUNSHI_NS],
    security=Security(
        scc="nccl-rdma-scc",
        create=True,
        service_accounts=[
            ServiceAccount(name="h-kim-sa", namespace=NS),
            ServiceAccount(name="ml-dev-sa", namespace=NS),
            ServiceAccount(name="h-kim-sa", namespace=H_KIM_NS),
            ServiceAccount(name="h-kim-sa", namespace=YUNSHI_NS),  # yunshi's pods run as h-kim-sa in his project
        ],
    ),
    # root + IPC_LOCK pins memory without raising the limit (KNOWLEDGE.md 1): the seeds' final
    # setup added SYS_RESOURCE for `ulimit -l unlimited`, which this strategy does not need.
    defaults=Defaults(
        memlock_rdma="root-ipc-lock",
        memlock_tcp="none",
        # CLUSTER-FACTS "NCCL tuning the clusters used": clusters/barcelona.yaml.
        nccl_env_rdma={"NCCL_IB_TIMEOUT": "22", "NCCL_MIN_NCHANNELS": "4", "NCCL_CROSS_NIC": "0", "NCCL_DEBUG": "INFO"},
        nccl_env_tcp={"NCCL_P2P_LEVEL": "NVL", "NCCL_DEBUG": "INFO"},
    ),
    volumes=[
        # No RWX class is confirmed on Barcelona: per-pod workspaces on ceph-rbd (seed 004's volumeClaimTemplates).
        Volume(name="workspace", namespace=H_KIM_NS, mount_path="/workspace", size="100Gi", storage_class=RBD, shared=False),
        Volume(name="workspace", namespace=NS, mount_path="/workspace", size="100Gi", storage_class=RBD, shared=False),
        # yunshi's data (CLUSTER-FACTS): his claim tsfm at /mnt/tsfm, mounted by both of his pods.
        Volume(name="tsfm", namespace=YUNSHI_NS, mount_path="/mnt/tsfm", existing=True, shared=True),
    ],
    existing=ExistingObjects(
        secrets=[NamespacedName(namespace=YUNSHI_NS, name="hf-secret")],
        config_maps=[NamespacedName(namespace=NS, name="deepti-script")],  # made from her deepti.py
        image_streams=[NamespacedName(namespace=NS, name="ml-dev-env")],  # built by the ml-dev-env project
    ),
    scripts=[
        ScriptConfigMap(
            name="h-kim-training-script",
            namespace=NS,
            files={"train.sh": (Path(__file__).parent / "files" / "h-kim-torchtitan.sh").read_text(encoding="utf-8")},
            source=f"{FACTS}: deployments/archived/h-kim/generated/job-h-kim-torchtitan.yaml",
        )
    ],
    images=[H_KIM_IMAGE],
    workloads=[
        Workload(
            name="h-kim",
            namespace=H_KIM_NS,
            user="h-kim",
            source="seeds 000/003: statefulset-h-kim.yaml; the image and project of ml-dev-env commits c0394e2/e70c16f",
            kind="statefulset",
            image="quay.io/jschless/ml-dev-env:h-kim",
            service_account="h-kim-sa",
            nodes=2,
            gpus_per_node=4,
            node_set="nairr",
            transport="rdma",  # seed 003's `deploy-h-kim.sh --mode tcp` is this workload with transport="tcp"
            mounts=[Mount(volume="workspace")],
        ),
        Workload(
            name="h-kim-torchtitan",
            namespace=NS,
            user="h-kim",
            source=f"seed 000: job-h-kim-torchtitan.yaml; {FACTS}: its script and command",
            kind="job",
            state="stopped",  # it needs two nairr nodes, which h-kim and deepti-barcelona hold
            image=H_KIM_IMAGE.reference,
            service_account="h-kim-sa",
            nodes=2,
            gpus_per_node=4,
            node_set="nairr",
            transport="rdma",
            scripts=[ScriptMount(config_map="h-kim-training-script", mount_path="/scripts")],
            run="command",
            args=["bash", "/scripts/train.sh"],
        ),
        Workload(
            name="tsfm-node",
            namespace=YUNSHI_NS,
            user="yunshi",
            source=f"seed 000: statefulset-yunshi.yaml; {FACTS}: StatefulSet tsfm-node, its image, claim, pins and command",
            kind="statefulset",
            image="nvcr.io/nvidia/pytorch:25.12-py3",
            service_account="h-kim-sa",
            nodes=2,
            gpus_per_node=4,
            node_set="yunshi",
            transport="rdma",
            memory="1000Gi",
            mounts=[Mount(volume="tsfm")],
            run="torchrun",
            # The script's own arguments are not in the facts; it reads its data under /mnt/tsfm/data/.
            args=["/mnt/tsfm/hybrid_tsfm/pretrain_hybrid.py"],
            working_dir="/mnt/tsfm/hybrid_tsfm",
            env={"PROJECT_ROOT": "/mnt/tsfm/hybrid_tsfm"},
        ),
        Workload(
            name="large-zero-shot",
            namespace=YUNSHI_NS,
            user="yunshi",
            source=f"seed 000: large_zero_shot_rdma.yaml; {FACTS}: image 25.06, 1300Gi, HF_TOKEN from hf-secret",
            kind="job",
            state="stopped",  # an alternative to tsfm-node on the same two nodes (it was the same StatefulSet name)
            image="nvcr.io/nvidia/pytorch:25.06-py3",
            service_account="h-kim-sa",
            nodes=2,
            gpus_per_node=4,
            node_set="yunshi",
            transport="rdma",
            memory="1300Gi",
            mounts=[Mount(volume="tsfm")],
            run="torchrun",
            # Its command is not in the facts: the project's training script; set args before starting it.
            args=["/mnt/tsfm/hybrid_tsfm/pretrain_hybrid.py"],
            working_dir="/mnt/tsfm/hybrid_tsfm",
            env={"PROJECT_ROOT": "/mnt/tsfm/hybrid_tsfm"},
            secret_env={"HF_TOKEN": SecretKeyRef(secret="hf-secret", key="HF_TOKEN")},
        ),
        Workload(
            name="deepti-barcelona",
            namespace=NS,
            user="deepti",
            source=f"seed 000: pod-deepti-barcelona.yaml (ml-dev-sa); {FACTS}: image, script, env and resources",
            kind="statefulset",  # a one-replica StatefulSet: it survives a crash or a node reboot, unlike the seed's Pod
            image=f"image-registry.openshift-image-registry.svc:5000/{NS}/ml-dev-env:pytorch-2.9-numpy2",
            service_account="ml-dev-sa",
            nodes=1,
            gpus_per_node=4,
            node_set="nairr",
            transport="rdma",
            cpu="4",
            cpu_limit="8",
            memory="8Gi",
            memory_limit="10Gi",
            shm_size="4Gi",
            mounts=[Mount(volume="workspace")],
            # The ConfigMap deepti-script (her deepti.py) was copied to /workspace and run there; it runs in place.
            scripts=[ScriptMount(config_map="deepti-script", mount_path="/scripts")],
            run="command",
            args=["python", "/scripts/deepti.py"],
            working_dir="/workspace",
            env=DEEPTI_ENV,
            # seed 000: the PyTorch 2.8 and 2.9 variants ran with NCCL_IB_DISABLE=1 (CLUSTER-FACTS: their images)
            tcp_variants=[
                TcpVariant(name="deepti-barcelona-pytorch28", image="quay.io/jschless/ml-dev-env:pytorch-2.8"),
                TcpVariant(name="deepti-barcelona-pytorch29", image="quay.io/jschless/ml-dev-env:pytorch-2.9-numpy2"),
            ],
        ),
    ],
    bandwidth_checks=[
        # Seed 004 left "verify NCCL communication bandwidth" as a next step; seed 003 claims ~200 GB/s.
        # Two nairr nodes, h-kim's image and service account: passes at 0.8 x 4 x 400 Gb/s = 160 GB/s.
        BandwidthCheck(
            name="rdma-bandwidth",
            namespace=NS,
            enabled=False,  # needs two free nairr nodes: stop h-kim (or deepti-barcelona and h-kim) to enable it
            service_account="h-kim-sa",
            image=H_KIM_IMAGE.reference,
            nodes=2,
            gpus_per_node=4,
            node_set="nairr",
            transport="rdma",
            tool="torch",
            min_fraction=0.8,
        ),
    ],
    # What the seeds made by hand, adopted with `python -m stacks import-plan` (docs/adoption.md).
    hand_made=[
        HandMade(kind="SecurityContextConstraints", name="nccl-rdma-scc", source="seed 002: oc apply -f nccl-rdma-scc.yaml"),
        HandMade(kind="ClusterRole", name="system:openshift:scc:nccl-rdma-scc", source="seeds 000/002: oc adm policy add-scc-to-user"),
        *[
            HandMade(
                kind="RoleBinding",
                name="system:openshift:scc:nccl-rdma-scc",
                namespace=ns,
                source=f"seeds 000/002: oc adm policy add-scc-to-user -n {ns}",
            )
            for ns in (NS, H_KIM_NS)
        ],
        HandMade(kind="ServiceAccount", name="h-kim-sa", namespace=NS, source="seed 003 step 1: oc create serviceaccount"),
        HandMade(kind="ServiceAccount", name="ml-dev-sa", namespace=NS, source="seed 000: the deepti pods' service account"),
        HandMade(kind="ServiceAccount", name="h-kim-sa", namespace=H_KIM_NS, source="seed 002: oc adm policy -z h-kim-sa -n " + H_KIM_NS),
        HandMade(kind="ServiceAccount", name="h-kim-sa", namespace=YUNSHI_NS, source=f"{FACTS}: yunshi's pods run as h-kim-sa"),
        *[
            HandMade(
                kind="NetworkAttachmentDefinition", name=f"{port}-network", namespace=ns, source=f"seed 003 step 2 (the sed copy); {FACTS}"
            )
            for ns in (NS, H_KIM_NS, YUNSHI_NS)
            for port, _, _, _ in _PORTS
        ],
    ],
    # The image rule warns on every image not pinned by digest; the sources give tags only. Each entry accepts one image
    # (value): a new tag warns again. Pin each one (IMAGE@sha256:..., `skopeo inspect docker://IMAGE`) when its digest
    # is read, and drop its entry here.
    accepted_warnings=[
        AcceptedWarning(
            rule="image",
            object=f"StatefulSet {H_KIM_NS}/h-kim",
            value="quay.io/jschless/ml-dev-env:h-kim",
            reason="ml-dev-env commit c0394e2 records the tag only, no digest",
        ),
        AcceptedWarning(
            rule="image",
            object=f"StatefulSet {YUNSHI_NS}/tsfm-node",
            value="nvcr.io/nvidia/pytorch:25.12-py3",
            reason=f"statefulset-yunshi.yaml ({FACTS}) names the NGC tag only, no digest",
        ),
        AcceptedWarning(
            rule="image",
            object=f"StatefulSet {NS}/deepti-barcelona",
            value=f"image-registry.openshift-image-registry.svc:5000/{NS}/ml-dev-env:pytorch-2.9-numpy2",
            reason=f"deepti's pods run tags of ml-dev-env (the ImageStream another project builds); {FACTS} records no digests",
        ),
        AcceptedWarning(
            rule="image",
            object=f"StatefulSet {NS}/deepti-barcelona-pytorch28",
            value="quay.io/jschless/ml-dev-env:pytorch-2.8",
            reason=f"a quay.io copy of ml-dev-env deepti ran; {FACTS} records no digests",
        ),
        AcceptedWarning(
            rule="image",
            object=f"StatefulSet {NS}/deepti-barcelona-pytorch29",
            value="quay.io/jschless/ml-dev-env:pytorch-2.9-numpy2",
            reason=f"a quay.io copy of ml-dev-env deepti ran; {FACTS} records no digests",
        ),
    ],
    notes=[
        "RDMA devices: seed 002 saw mlx5_6..mlx5_9 ACTIVE while seeds 002/003 (and the images) set NCCL_IB_HCA=mlx5_6,mlx5_7,"
        "mlx5_10,mlx5_11. Both are kept in fabric.device_observations; the launcher exports the devices behind net1..net4.",
        "GID index: seeds pinned NCCL_IB_GID_INDEX=3. It is only the usual layout; the launcher reads the RoCE v2 IPv4 entry per port.",
        "Memlock: seed 000 added SYS_RESOURCE and `ulimit -l unlimited`; seed 001 claimed prlimit works with IPC_LOCK alone. "
        "Neither is needed: root with effective IPC_LOCK pins past the limit. The SCC allows IPC_LOCK only and drops everything else.",
        "SCC: seed 002's nccl-rdma-scc allowed host IPC, host network, hostPath and privilege escalation, and listed only some "
        "required keys. The stack's SCC allows none of those; adopting the live one narrows it (python -m stacks adopt-diff).",
        "h-kim: seeds 000/001 ran in nccl-test; seed 002 and ml-dev-env commit e70c16f ('correct namespace') moved it to "
        "b-efficient-memory-offloading-765cab, with the image quay.io/jschless/ml-dev-env:h-kim (commit c0394e2). Its nodes at "
        "c0394e2 (moc-r4pcc04u23/u25-nairr) are not in the node list of 2026-07-11, so it is not pinned to them.",
        "h-kim-torchtitan was a StatefulSet in the predecessor project; a StatefulSet restarts a finished training forever, so "
        "it is a Job here (raise run_number to run it again).",
        "yunshi: the StatefulSet is tsfm-node (its real name); large_zero_shot_rdma.yaml used the same name, so the two are "
        "alternatives on his two nodes; large-zero-shot's own command is not in the facts.",
        "deepti: her Pod becomes a one-replica StatefulSet with a per-pod workspace (workspace-deepti-barcelona-0).",
    ],
)
