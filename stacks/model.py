"""What a cluster IS: the typed, validated configuration of one stack.

Everything the seed documents set up by hand is a field here. Every field is documented (the
docstrings become the descriptions of `python -m stacks schema`), every name that lands on the
cluster is checked as a Kubernetes name, every size as a quantity. This module is the ground floor:
it imports nothing of the project above it.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

# --- value types ------------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CAPABILITY = re.compile(r"^[A-Z][A-Z_]*$")


def _label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes name: use lowercase letters, digits and '-', "
            "start and end with a letter or digit, at most 63 characters"
        )
    return value


def _subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes object name: use lowercase letters, digits, '-' "
            "and '.', start and end with a letter or digit, at most 253 characters"
        )
    return value


def _quantity(value: str) -> str:
    if not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (for example 100Gi, 500Mi, 64, 500m)")
    return value


def _positive(value: str) -> str:
    # A size or an amount of CPU or memory of zero is a typo; the API server rejects a zero claim.
    if float(re.sub(r"[A-Za-z]+$", "", value)) <= 0:
        raise ValueError(f"{value!r} must be greater than zero")
    return value


def _resource(value: str) -> str:
    if not _RESOURCE.match(value):
        raise ValueError(f"{value!r} is not an extended resource name like openshift.io/eno5np0rdma")
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(f"{value!r} is not a valid environment variable name")
    return value


def _capability(value: str) -> str:
    if not _CAPABILITY.match(value) or value.startswith("CAP_"):
        raise ValueError(f"{value!r} is not a capability name as Kubernetes spells it (IPC_LOCK, not cap_ipc_lock)")
    return value


K8sName = Annotated[str, AfterValidator(_label)]
"""A DNS-1123 label: names of namespaces, workloads, service accounts, PVCs, NADs."""
ObjectName = Annotated[str, AfterValidator(_subdomain)]
"""A DNS-1123 subdomain: names of cluster-scoped objects such as SCCs and storage classes."""
Quantity = Annotated[str, AfterValidator(_quantity)]
Size = Annotated[str, AfterValidator(_quantity), AfterValidator(_positive)]
"""A quantity greater than zero: volume sizes, CPU, memory."""
ResourceName = Annotated[str, AfterValidator(_resource)]
EnvName = Annotated[str, AfterValidator(_env_name)]
Capability = Annotated[str, AfterValidator(_capability)]

Transport = Literal["rdma", "tcp"]
LinkLayer = Literal["roce-v2", "infiniband"]
GdrLevel = Literal["LOC", "PIX", "PXB", "PHB", "SYS"]
MemlockStrategy = Literal["node-limit", "root-ipc-lock", "root-sys-resource", "privileged", "none"]
WorkloadKind = Literal["statefulset", "job", "pod"]
AccessMode = Literal["ReadWriteMany", "ReadWriteOnce"]
BandwidthTool = Literal["auto", "torch", "nccl-tests"]

# The capabilities each memlock strategy adds to the container (KNOWLEDGE.md's table). IPC_LOCK
# in the *effective* set lets a root process pin memory past RLIMIT_MEMLOCK; SYS_RESOURCE is only
# needed to raise the limit itself (`ulimit -l unlimited`), which IPC_LOCK alone cannot do.
STRATEGY_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "node-limit": (),
    "root-ipc-lock": ("IPC_LOCK",),
    "root-sys-resource": ("IPC_LOCK", "SYS_RESOURCE"),
    "privileged": (),
    "none": (),
}
# NCCL settings that only mean something over RDMA; a TCP variant does not inherit them.
RDMA_ONLY_NCCL = ("NCCL_IB_", "NCCL_SOCKET_IFNAME", "NCCL_NET_GDR_LEVEL")
# Added capabilities are effective only for uid 0 (CRI-O and containerd set no ambient set).
STRATEGY_RUNS_AS_ROOT = {"root-ipc-lock", "root-sys-resource"}


class Strict(BaseModel):
    """Unknown fields are errors, values are immutable, docstrings are the field documentation."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# --- hardware and fabric ----------------------------------------------------------------------


class Node(Strict):
    """A GPU node known by name."""

    name: str
    """The node's name as `oc get nodes` shows it (kubernetes.io/hostname)."""
    gpus: int = Field(gt=0)
    """GPUs the node offers as nvidia.com/gpu."""


class SriovAttachment(Strict):
    """One SR-IOV network a pod attaches, in the order the pod lists it."""

    network: K8sName
    """Name of the NetworkAttachmentDefinition, e.g. eno5np0-network."""
    resource: ResourceName
    """The SR-IOV device plugin resource the NAD is annotated with (k8s.v1.cni.cncf.io/resourceName)."""
    interface: str = Field(pattern=r"^net[0-9]+$")
    """Interface name inside the pod: net1, net2, ... in attachment order."""
    device: str | None = None
    """RDMA device behind the attachment according to the seeds (documentation only; the launcher
    detects the live devices in the pod)."""
    cni_config: str | None = None
    """The CNI config (a JSON string) of the source NAD. On a cluster the live object is read and
    copied; the offline renderer answers that read with this value."""


class DeviceObservation(Strict):
    """What one seed document saw of a cluster's RDMA devices. Seeds contradict each other; all
    observations are kept as data and the fabric says which list the stack uses."""

    source: str
    """Which seed document, and where in it."""
    devices: list[str]
    """The devices named there."""
    note: str = ""
    """What the observation means, and what was wrong with it if anything."""


class RdmaFabric(Strict):
    """The high-speed network of a cluster's GPU nodes."""

    link_layer: LinkLayer
    """roce-v2 (Ethernet) or infiniband."""
    nic: str
    """Adapter model, for the record."""
    link_gbps: int = Field(gt=0)
    """Line rate of one port in Gb/s."""
    devices: list[str] = Field(min_length=1)
    """RDMA devices (ports) the stack treats as live on every GPU node: the list static checks use."""
    device_observations: list[DeviceObservation] = []
    """Every device list the seeds report, including the ones the stack does not use, and why."""
    attachments: list[SriovAttachment] = []
    """SR-IOV attachments in interface order. Empty where RDMA devices reach the pod another way."""
    nad_source_namespace: K8sName = "default"
    """Where the SR-IOV operator creates the NADs."""
    nad_mode: Literal["copy", "reference"] = "copy"
    """copy: a NAD per user namespace, copied from the source at deploy time (the seeds' way);
    reference: pods name `default/NAME` and no copies are made (OpenShift allows NADs of `default`)."""
    device_access: Literal["sriov", "privileged"] = "sriov"
    """How /dev/infiniband reaches the container: SR-IOV device plugin resources, or a privileged
    container that sees the host's devices."""
    static_hca: bool = False
    """Pin NCCL_IB_HCA to `devices` in the rendered environment. Off: the launcher detects the ACTIVE
    ports in the pod, which is right on nodes whose device names differ."""
    gid_index: int | None = None
    """Pin NCCL_IB_GID_INDEX. None: the launcher picks the RoCE v2 IPv4 index per port (and NCCL 2.21.5+
    does so itself). InfiniBand needs none."""
    gdr_level: GdrLevel = "SYS"
    """NCCL_NET_GDR_LEVEL (the seeds' legacy value 5 is SYS)."""

    @model_validator(mode="after")
    def _interfaces_in_order(self) -> RdmaFabric:
        expected = [f"net{i}" for i in range(1, len(self.attachments) + 1)]
        got = [a.interface for a in self.attachments]
        if got != expected:
            raise ValueError(f"attachments must name interfaces {expected} in order (Multus numbers them that way), got {got}")
        if self.device_access == "sriov" and not self.attachments:
            raise ValueError("device_access 'sriov' needs at least one attachment")
        return self

    def port_count(self) -> int:
        """Ports a pod uses: one per attachment, or every live device where there are none."""
        return len(self.attachments) or len(self.devices)


# --- storage ----------------------------------------------------------------------------------


class StorageClass(Strict):
    """A storage class known to exist on the cluster, and what it provides."""

    name: ObjectName
    """The StorageClass name on the cluster."""
    access_modes: list[AccessMode] = Field(min_length=1)
    """Access modes it provides for filesystem volumes."""
    note: str = ""
    """Where the seeds say so."""


class Volume(Strict):
    """A data volume (workspace, datasets). Never deleted by `pulumi destroy` or a rename."""

    name: K8sName
    """PVC name (for per-pod volumes: the volumeClaimTemplate name; pods get NAME-POD)."""
    namespace: K8sName
    """Namespace of the PVC."""
    mount_path: str = Field(pattern=r"^/")
    """Where workloads mount it."""
    size: Size
    """Requested size."""
    storage_class: ObjectName | None = None
    """Storage class. None leaves it to the cluster default, which the preflight flags."""
    shared: bool = True
    """True: one ReadWriteMany PVC every pod mounts. False: per-pod ReadWriteOnce claims
    (StatefulSet volumeClaimTemplates), for clusters without an RWX class."""


class PvcStorageClassFix(Strict):
    """A patch of an existing PVC that has no storage class (Cairo's NFS server root volume)."""

    namespace: K8sName
    """Namespace of the existing PVC."""
    pvc: K8sName
    """Name of the existing PVC."""
    storage_class: ObjectName
    """The storage class to set (must be in storage_classes)."""
    reason: str
    """Why, for the record and the preview."""


# --- security ---------------------------------------------------------------------------------


class ServiceAccount(Strict):
    """A service account the training pods run as."""

    name: K8sName
    """Service account name."""
    namespace: K8sName
    """Its namespace (one of namespaces)."""


class Security(Strict):
    """The SCC the training pods run under, and who may use it."""

    scc: ObjectName
    """SCC name. Pods pin it with the annotation openshift.io/required-scc."""
    create: bool
    """True: the program creates the SCC (least privilege, capabilities from the workloads' memlock
    strategies). False: an SCC that exists on the cluster is referenced."""
    existing_allowed_capabilities: list[Capability] | None = None
    """For an existing SCC: the capabilities it allows (None: every capability, as `privileged`)."""
    existing_allows_privileged: bool = False
    """For an existing SCC: whether it allows privileged containers."""
    existing_allows_root: bool = True
    """For an existing SCC: whether its runAsUser strategy admits uid 0 (RunAsAny)."""
    broad_grant_reason: str | None = None
    """Required when the SCC allows privileged containers: why the stack accepts it. Printed."""
    grant: bool = True
    """Bind the SCC's `use` ClusterRole to the service accounts (as `oc adm policy add-scc-to-user`).
    False for SCCs every authenticated user may use already (restricted-v2)."""
    service_accounts: list[ServiceAccount] = []
    """Service accounts the program creates and grants the SCC to."""

    @model_validator(mode="after")
    def _reason_for_broad_grants(self) -> Security:
        if not self.create and self.existing_allows_privileged and not self.broad_grant_reason:
            raise ValueError(
                f"SCC {self.scc!r} allows privileged containers: set broad_grant_reason to say why this stack accepts it"
            )
        return self


# --- workloads --------------------------------------------------------------------------------


class Mount(Strict):
    """A volume a workload mounts."""

    volume: K8sName
    """Name of a Volume of the stack in the workload's namespace."""
    mount_path: str | None = Field(default=None, pattern=r"^/")
    """Overrides the volume's mount path."""


class TcpVariant(Strict):
    """A TCP copy of an RDMA workload: same definition, no SR-IOV networks, no pinning."""

    name: K8sName
    """Name of the TCP copy (its own object and pod names)."""
    image: str | None = None
    """Another image, e.g. a newer PyTorch."""


class Workload(Strict):
    """One training or development deployment."""

    name: K8sName
    """Object name; pods are NAME-0, NAME-1, ..."""
    namespace: K8sName
    """Namespace it runs in (one of namespaces)."""
    user: str
    """Who runs it."""
    source: str = ""
    """The seed manifest it replaces."""
    kind: WorkloadKind = "statefulset"
    """statefulset: multi-node, restarts forever; job: multi-node, runs to completion; pod: one node."""
    image: str
    """Container image; it needs python3 (the launcher) and, for torchrun, PyTorch."""
    service_account: K8sName
    """Service account of the pods (listed in security.service_accounts, same namespace)."""
    nodes: int = Field(default=1, gt=0)
    """Pods, one per node."""
    gpus_per_node: int = Field(gt=0)
    """GPUs each pod requests (and processes torchrun starts per pod)."""
    transport: Transport
    """rdma: NCCL over the cluster's fabric; tcp: NCCL over sockets (NCCL_IB_DISABLE=1)."""
    memlock: MemlockStrategy | None = None
    """How the pod gets to pin memory (KNOWLEDGE.md). None: the cluster default for the transport."""
    privileged_reason: str | None = None
    """Required with memlock 'privileged': why this workload needs a privileged container."""
    tcp_fallback: bool = False
    """In RDMA mode with no ACTIVE port, start over TCP (loudly) instead of failing."""
    cpu: Size = "32"
    """CPU request and limit of each pod."""
    memory: Size = "256Gi"
    """Memory request and limit of each pod (the launcher's mlock proof buffer counts against it)."""
    shm_size: Size = "32Gi"
    """Size of /dev/shm (a memory emptyDir; counts against the memory limit)."""
    mounts: list[Mount] = []
    """Volumes of the stack every pod mounts."""
    run: Literal["torchrun", "command"] = "command"
    """torchrun: the launcher execs torchrun with the rendezvous settings and `args`;
    command: it execs `args` as given (interactive pods: sleep infinity)."""
    args: list[str] = ["sleep", "infinity"]
    """The torchrun script and its arguments, or the whole command (see run)."""
    master_port: int = Field(default=29500, ge=1, le=65535)
    """Rendezvous port on pod 0 (the headless Service exposes it)."""
    env: dict[EnvName, str] = {}
    """Explicit environment (NCCL_* here wins over detection)."""
    node_names: list[str] = []
    """Pin pods to these nodes (by hostname)."""
    backoff_limit: int = Field(default=0, ge=0)
    """Jobs: retries of a failed pod before the Job fails."""
    ttl_seconds_after_finished: int | None = Field(default=86400, ge=0)
    """Jobs: the cluster deletes the finished Job and its pods after this many seconds (None keeps
    them). A `pulumi refresh` after that sees the Job gone, and the next `pulumi up` runs it again."""
    tcp_variants: list[TcpVariant] = []
    """TCP copies derived from this definition."""

    @model_validator(mode="after")
    def _shape(self) -> Workload:
        if self.kind == "pod" and self.nodes != 1:
            raise ValueError("a pod workload runs on one node: set nodes to 1, or use kind statefulset or job")
        if self.memlock == "privileged" and not self.privileged_reason:
            raise ValueError("memlock 'privileged' needs privileged_reason (it is printed)")
        if self.tcp_variants and self.transport != "rdma":
            raise ValueError("tcp_variants derive from an RDMA workload; this one is already TCP")
        return self


# Where a pod finds components/launcher/bandwidth.py: the launcher ConfigMap, which carries every
# module of components/launcher/, is mounted at /opt/launcher (components/training.py LAUNCHER_DIR).
BANDWIDTH_BENCH = "/opt/launcher/bandwidth.py"


class BandwidthCheck(Strict):
    """An all-reduce benchmark that proves the fabric: an Indexed Job with exactly the pods of a
    training workload of the same transport (networks, SR-IOV resources, SCC, memlock strategy,
    launcher), which fails, and so fails `pulumi up`, when the bus bandwidth at the largest message
    size is below `min_fraction` of the line rate or when NCCL used sockets in RDMA mode.

    Its pods take whole nodes (every GPU they name): while training pods hold the GPUs, the check
    waits Pending until `timeout_minutes` runs out. Read a saved log with
    `python -m stacks bandwidth-report LOG --stack STACK --check NAME`."""

    name: K8sName
    """Job name; its pods are NAME-0, NAME-1, ... behind the headless Service NAME-headless."""
    namespace: K8sName
    """Namespace it runs in (one of namespaces)."""
    service_account: K8sName
    """Service account of the pods (listed in security.service_accounts, same namespace)."""
    image: str
    """A PyTorch image (tool torch) or one with nccl-tests' all_reduce_perf on PATH (tool nccl-tests)."""
    nodes: int = Field(default=2, gt=0)
    """Pods, one per node. Two or more measure the fabric between nodes. One node measures its own
    NICs: the check then disables NCCL's NVLink/PCIe (P2P) and shared-memory transports
    (NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1), so that every hop goes through the network."""
    gpus_per_node: int = Field(gt=0)
    """GPUs each pod requests; one benchmark process per GPU."""
    transport: Transport
    """rdma: fail unless NCCL used InfiniBand/RoCE (never sockets). tcp: fail if NCCL used IB."""
    tool: BandwidthTool = "auto"
    """torch: a torch.distributed all_reduce loop started by torchrun on every node (the launcher's
    bandwidth.py; its table has the nccl-tests format). nccl-tests: all_reduce_perf in one process
    over the node's GPUs; it needs `nodes: 1`, because all_reduce_perf spans hosts only under MPI
    (mpirun), which this program does not deploy. auto: nccl-tests on one node where the image has
    all_reduce_perf, torch otherwise."""
    min_fraction: float = Field(default=0.8, gt=0, le=1)
    """Pass when the bus bandwidth at the largest message size is at least this fraction of the line rate."""
    line_rate_gbps: float | None = Field(default=None, gt=0)
    """The line rate in Gb/s the bus bandwidth is held against. None: from the fabric for rdma (see
    ClusterConfig.bandwidth_line_rate_gbps); for tcp the seeds give no line rate, so a tcp check
    without this value reports the bandwidth without a threshold (it fails only on errors)."""
    min_bytes: int = Field(default=1024 * 1024, ge=4)
    """Smallest message in bytes (all_reduce_perf -b); sizes double up to max_bytes."""
    max_bytes: int = Field(default=1024 * 1024 * 1024, ge=4)
    """Largest message in bytes (all_reduce_perf -e): its bus bandwidth decides the verdict, so make
    it large enough to leave the latency-bound range (hundreds of MiB and up)."""
    iterations: int = Field(default=20, gt=0)
    """Timed all-reduces per message size (all_reduce_perf -n)."""
    warmup_iterations: int = Field(default=5, ge=0)
    """Untimed all-reduces before them (all_reduce_perf -w)."""
    memlock: MemlockStrategy | None = None
    """How the pods get to pin memory, as a workload's: None takes the cluster default for the transport."""
    privileged_reason: str | None = None
    """Required with memlock 'privileged': why the check needs a privileged container."""
    node_names: list[str] = []
    """Pin the pods to these nodes (by hostname), e.g. to test a particular pair."""
    env: dict[EnvName, str] = {}
    """Extra environment (NCCL_* here wins over the rendered values)."""
    cpu: Size = "16"
    """CPU request and limit of each pod."""
    memory: Size = "64Gi"
    """Memory request and limit of each pod."""
    shm_size: Size = "16Gi"
    """Size of /dev/shm (a memory emptyDir; counts against the memory limit)."""
    master_port: int = Field(default=29500, ge=1, le=65535)
    """Rendezvous port on pod 0 (the headless Service exposes it)."""
    timeout_minutes: int = Field(default=30, gt=0)
    """How long `pulumi up` waits for the Job to complete (pulumi-kubernetes' default is 10 minutes);
    time spent Pending for free GPUs counts."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Delete the finished Job and its pods after this many seconds. None keeps them, so that
    `oc logs job/NAME` still has the log to read."""

    @model_validator(mode="after")
    def _shape(self) -> BandwidthCheck:
        if self.min_bytes > self.max_bytes:
            raise ValueError(f"min_bytes ({self.min_bytes}) is larger than max_bytes ({self.max_bytes})")
        if self.tool == "nccl-tests" and self.nodes != 1:
            raise ValueError(
                "tool 'nccl-tests' runs all_reduce_perf on one node (it spans hosts only under mpirun, which this "
                "program does not deploy): set nodes to 1, or use tool 'torch' (or 'auto') across nodes"
            )
        if self.memlock == "privileged" and not self.privileged_reason:
            raise ValueError("memlock 'privileged' needs privileged_reason (it is printed)")
        return self


class Defaults(Strict):
    """Cluster-wide defaults of workloads that do not set their own."""

    memlock_rdma: MemlockStrategy = "root-ipc-lock"
    """Memlock strategy of RDMA workloads that do not name one."""
    memlock_tcp: MemlockStrategy = "none"
    """Memlock strategy of TCP workloads that do not name one."""
    tcp_socket_ifname: str = "^lo,docker0"
    """NCCL_SOCKET_IFNAME for TCP workloads (the seeds' value)."""
    pin_bytes: int = Field(default=256 * 1024 * 1024, gt=8 * 1024 * 1024)
    """Size of the buffer the launcher pins to prove memory locking works (must exceed 8 MiB)."""


class ClusterConfig(Strict):
    """One OpenShift cluster: one Pulumi stack."""

    name: K8sName
    """Stack name."""
    description: str
    """What the cluster is, in a sentence."""
    api_host: str | None = None
    """API server host, where the seeds give it."""
    openshift_version: str = "4.17"
    """OpenShift version, for the record."""
    gpu_model: str
    """GPU model of the GPU nodes, for the record."""
    gpus_per_node: int = Field(gt=0)
    """GPUs per GPU node (nvidia.com/gpu); where nodes are listed, their own counts are used."""
    nodes: list[Node] = []
    """GPU nodes known by name."""
    fabric: RdmaFabric | None = None
    """None: no RDMA (TCP only)."""
    storage_classes: list[StorageClass] = []
    """Storage classes known to exist."""
    namespaces: list[K8sName] = Field(min_length=1)
    """User namespaces (OpenShift projects) the stack deploys into. They exist already: creating a
    project is the users' or admins' business, not this program's."""
    security: Security
    """The SCC the training pods run under and who may use it."""
    defaults: Defaults = Defaults()
    """Defaults of workloads that do not set their own."""
    volumes: list[Volume] = []
    """Data volumes (PVCs) the workloads mount."""
    pvc_fixes: list[PvcStorageClassFix] = []
    """Storage classes to set on PVCs that exist already without one."""
    workloads: list[Workload] = []
    """Training and development deployments."""
    bandwidth_checks: list[BandwidthCheck] = []
    """All-reduce benchmarks run as Jobs by `pulumi up`, which fails when one of them fails."""
    notes: list[str] = []
    """Contradictions between the seeds and the choices the stack makes about them."""

    @model_validator(mode="after")
    def _references(self) -> ClusterConfig:
        # Messages start with the path of the offending field: this check sees the whole config, so
        # pydantic cannot locate the error by itself (stacks._describe prints it as given).
        ns = set(self.namespaces)
        seen: dict[tuple[str, str, str], str] = {}

        def unique(kind: str, namespace: str, name: str, path: str) -> None:
            first = seen.setdefault((kind, namespace, name), path)
            if first != path:
                raise ValueError(f"{path}: duplicate {kind} name {name!r} in namespace {namespace!r} (also {first}): names must be unique")

        for i, sa in enumerate(self.security.service_accounts):
            path = f"security.service_accounts.{i}"
            if sa.namespace not in ns:
                raise ValueError(
                    f"{path}.namespace: service account {sa.name!r} is in namespace {sa.namespace!r}, which is not in namespaces"
                )
            unique("service account", sa.namespace, sa.name, f"{path}.name")
        volumes = {}
        for i, v in enumerate(self.volumes):
            if v.namespace not in ns:
                raise ValueError(f"volumes.{i}.namespace: volume {v.name!r} is in namespace {v.namespace!r}, which is not in namespaces")
            unique("volume", v.namespace, v.name, f"volumes.{i}.name")
            volumes[(v.namespace, v.name)] = v
        accounts = {(sa.namespace, sa.name) for sa in self.security.service_accounts}
        # all_workloads() lists each workload followed by its TCP variants: the same order as these paths.
        paths: list[str] = []
        for i, w in enumerate(self.workloads):
            paths += [f"workloads.{i}"] + [f"workloads.{i}.tcp_variants.{j}" for j in range(len(w.tcp_variants))]
        def pod_refs(what: str, source: str, path: str, name: str, namespace: str, account: str, transport: str) -> None:
            """What every pod-running entry (workload, TCP variant, bandwidth check) must reference."""
            if namespace not in ns:
                raise ValueError(f"{source}.namespace: {what} {name!r} is in namespace {namespace!r}, which is not in namespaces")
            # A check's Job and Service are named as a workload's would be: one name space for both.
            unique("workload", namespace, name, f"{path}.name")
            if (namespace, account) not in accounts:
                raise ValueError(
                    f"{source}.service_account: {what} {name!r} uses service account {account!r}, which "
                    f"security.service_accounts does not list in namespace {namespace!r}"
                )
            if transport == "rdma" and self.fabric is None:
                raise ValueError(
                    f"{source}.transport: {what} {name!r} uses rdma, but the cluster has no fabric (set fabric, or transport: tcp)"
                )

        for path, w in zip(paths, self.all_workloads(), strict=True):
            source = path.rsplit(".tcp_variants.", 1)[0]  # a variant inherits these fields from its source
            pod_refs("workload", source, path, w.name, w.namespace, w.service_account, w.transport)
            for k, m in enumerate(w.mounts):
                if (w.namespace, m.volume) not in volumes:
                    raise ValueError(
                        f"{source}.mounts.{k}.volume: workload {w.name!r} mounts volume {m.volume!r}, "
                        f"which is not a volume in {w.namespace!r}"
                    )
        for i, c in enumerate(self.bandwidth_checks):
            path = f"bandwidth_checks.{i}"
            pod_refs("bandwidth check", path, path, c.name, c.namespace, c.service_account, c.transport)
        return self

    # Derived views. Kept as methods so the stored config stays exactly what was written.

    def all_workloads(self) -> list[Workload]:
        """The workloads with their TCP variants expanded (a variant follows its source)."""
        out: list[Workload] = []
        for w in self.workloads:
            out.append(w)
            for v in w.tcp_variants:
                out.append(
                    w.model_copy(
                        update={
                            "name": v.name,
                            "image": v.image or w.image,
                            "transport": "tcp",
                            "memlock": None,
                            "privileged_reason": None,
                            "tcp_fallback": False,
                            # RDMA-only NCCL settings name devices and interfaces a TCP pod lacks.
                            "env": {k: val for k, val in w.env.items() if not k.startswith(RDMA_ONLY_NCCL)},
                            "tcp_variants": [],
                            "source": f"{w.source} (TCP variant of {w.name})".strip(),
                        }
                    )
                )
        return out

    def bandwidth_line_rate_gbps(self, check: BandwidthCheck) -> float | None:
        """The line rate in Gb/s a check's bus bandwidth (nccl-tests' busbw) is held against.

        Across nodes a ring all-reduce moves 2(n-1)/n of the message through each node's NICs, the
        same factor busbw multiplies by, so busbw approaches the node's NIC bandwidth: the ports the
        check's GPUs drive (a GPU drives the port next to it, so at most one port per GPU) times
        link_gbps. Barcelona: 4 x 400 Gb/s = 1600 Gb/s = 200 GB/s. On one node with P2P and SHM
        disabled every ring hop goes out through a NIC, so busbw approaches one GPU's share of them.
        None for tcp unless the check names a rate: the seeds give no Ethernet line rate."""
        if check.line_rate_gbps is not None:
            return check.line_rate_gbps
        if check.transport != "rdma" or self.fabric is None:
            return None
        node = float(min(self.fabric.port_count(), check.gpus_per_node) * self.fabric.link_gbps)
        return node if check.nodes > 1 else node / check.gpus_per_node

    def bandwidth_workload(self, check: BandwidthCheck) -> Workload:
        """The check as a workload: an Indexed Job whose pods are built like every training pod, so
        the measured network setup is exactly the training one. The launcher execs bandwidth.py's
        `check`, which starts the benchmark (torchrun or all_reduce_perf), reads its output and NCCL's
        INFO lines, prints the verdict and exits 1 on failure."""
        rate = self.bandwidth_line_rate_gbps(check)
        args = [
            "python3", BANDWIDTH_BENCH, "check",
            "--tool", check.tool,
            "--mode", check.transport,
            "--min-bytes", str(check.min_bytes),
            "--max-bytes", str(check.max_bytes),
            "--iters", str(check.iterations),
            "--warmup", str(check.warmup_iterations),
            "--min-fraction", f"{check.min_fraction:g}",
        ]  # fmt: skip
        if rate is not None:
            args += ["--line-rate-gbps", f"{rate:g}"]
        # INIT and NET are the subsystems that say which network NCCL chose and how each channel connects.
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
        if check.nodes == 1:
            env.update(NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1")
        env.update(check.env)
        return Workload(
            name=check.name,
            namespace=check.namespace,
            user="bandwidth check",
            source=f"bandwidth check {check.name}",
            kind="job",
            image=check.image,
            service_account=check.service_account,
            nodes=check.nodes,
            gpus_per_node=check.gpus_per_node,
            transport=check.transport,
            memlock=check.memlock,
            privileged_reason=check.privileged_reason,
            cpu=check.cpu,
            memory=check.memory,
            shm_size=check.shm_size,
            run="command",
            args=args,
            master_port=check.master_port,
            env=env,
            node_names=check.node_names,
            backoff_limit=0,  # a failed measurement is the answer, not something to retry
            ttl_seconds_after_finished=check.ttl_seconds_after_finished,
        )

    def memlock_of(self, w: Workload) -> str:
        if w.memlock is not None:
            return w.memlock
        return self.defaults.memlock_rdma if w.transport == "rdma" else self.defaults.memlock_tcp

    def volume(self, namespace: str, name: str) -> Volume:
        return next(v for v in self.volumes if v.namespace == namespace and v.name == name)

    def storage_class(self, name: str | None) -> StorageClass | None:
        return next((s for s in self.storage_classes if s.name == name), None)
