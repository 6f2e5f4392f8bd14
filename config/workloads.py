"""What runs in the pods: a Workload (a StatefulSet or Job) with its TCP variants, mounts and ports, and a BandwidthCheck.
Each checks what it sees alone; what it names elsewhere in the config: config/stack.py; whether it fits: policy/rules."""

import json
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import Field, field_validator, model_validator

from config import values
from config.cluster import NodeLabels, Toleration
from config.errors import FieldError, FieldPath, Strict
from config.openshift import DEBUGGER_PORT_NAMES, DEBUGGER_PORTS
from config.values import Cpu, EnvName, ImageRef, K8sName, Memory, MountPath, Port, Reason, Transport, WorkloadName


class RunsPods(Strict):
    """What a workload and a bandwidth check both are: pods of a transport, with an environment the launcher execs with."""

    if TYPE_CHECKING:
        transport: Transport

    @property
    def uses_rdma(self) -> bool:
        """Whether the pods use the RDMA fabric (transport rdma): SR-IOV networks and VFs, the RDMA memlock default."""
        return self.transport == "rdma"

    @field_validator("env", "secret_env", check_fields=False)  # a check has no secret_env
    @classmethod
    def _not_the_launchers(cls, value: dict[str, Any]) -> dict[str, Any]:
        for k, v in value.items():
            if k.startswith(values.RESERVED_ENV_PREFIX) or k in values.RESERVED_ENV:
                raise FieldError(
                    (k,),
                    f"{k} is set by the program for the launcher (its contract: LAUNCHER_*, {', '.join(sorted(values.RESERVED_ENV))}): "
                    "change the workload's fields instead",
                )
            if isinstance(v, str) and ("\x00" in v or len(v) > 65536):
                raise FieldError((k,), f"the value of {k} holds a NUL byte or is longer than 65536 characters")
            if k == "PYTHONHOME":
                raise FieldError(
                    (k,),
                    "PYTHONHOME replaces the image's Python installation for the Python the launcher execs (torchrun, the "
                    "command): it stops at start with 'Fatal Python error: init_fs_encoding'. Remove it; to use another "
                    "interpreter, name it in args (e.g. /opt/conda/bin/python)",
                )
            if isinstance(v, str) and (m := values.SHELL_PATH.search(v)):
                name = m.group(1) or m.group(2)
                raise FieldError(
                    (k,),
                    f"the value of {k} holds {m.group(0)}, which Kubernetes never expands (nor does it see the image's {name}): "
                    f"the process would get the text {m.group(0)}. Write the whole value (`oc run --rm -it --image IMAGE -- "
                    f"printenv {name}` shows the image's), or extend it in a shell command "
                    f'(run: command, args: ["bash", "-c", "export {name}=...:${name}; exec ..."])',
                )
            if isinstance(v, str) and (size := len(f"{k}={v}".encode("utf-8", "surrogatepass")) + 1) > values.EXEC_STRING_MAX:
                raise FieldError(
                    (k,),
                    f"{k}=... is {size} bytes: the kernel passes at most {values.EXEC_STRING_MAX} bytes per environment string "
                    "(MAX_ARG_STRLEN), so exec fails with 'Argument list too long'. Put the text in a file (scripts) and pass its path",
                )
        return value


class Mount(Strict):
    """A volume a workload mounts."""

    volume: K8sName
    """Name of a Volume of the stack in the workload's namespace."""
    mount_path: MountPath | None = None
    """Overrides the volume's mount path."""
    read_only: bool = False
    """Mount it read-only."""


class ScriptMount(Strict):
    """A ConfigMap of scripts a workload mounts (one of `scripts`, or an existing one)."""

    config_map: K8sName
    """ConfigMap name."""
    mount_path: MountPath = "/scripts"
    """Where its files appear."""


class SecretKeyRef(Strict):
    """One key of a Secret (declared in existing.secrets): its value never enters the config."""

    secret: K8sName
    """Secret name, in the workload's namespace."""
    key: values.FileKey
    """Key in the Secret."""


class ContainerPort(Strict):
    """A port the training container serves (developer tools)."""

    name: values.PortName
    """Port name (at most 15 characters), e.g. code-server, jupyter, tensorboard, debugpy."""
    port: Port
    """Container port."""
    route: bool = False
    """Expose it outside the cluster: an OpenShift Route (edge TLS) to rank 0's pod. Off: `oc port-forward` only."""
    route_reason: Reason | None = None
    """Required to route a debugger's port (named debugpy, or port 5678): why it is exposed outside the cluster, where
    whoever reaches it runs any code in the pod. Printed with every check."""

    @model_validator(mode="after")
    def _reason_of_a_routed_debugger(self) -> Self:
        if self.route_reason is not None and not (self.route and (self.name in DEBUGGER_PORT_NAMES or self.port in DEBUGGER_PORTS)):
            raise FieldError(
                ("route_reason",),
                "route_reason says why a debugger's port (debugpy, 5678) is routed; this port is "
                + ("not routed (route: false)" if not self.route else "not a debugger's")
                + ": remove it",
            )
        return self


class TcpVariant(Strict):
    """A TCP copy of an RDMA workload under another name: an alternative, never beside its source unless `alongside`."""

    COLLECTION: ClassVar[str] = "tcp_variants"
    name: WorkloadName
    """Name of the TCP copy (its own object and pod names)."""
    image: ImageRef | None = None
    """Another image, e.g. a newer PyTorch."""
    state: values.State = "stopped"
    """running or stopped (default: stopped)."""
    alongside: bool = False
    """Allow it to run while its source runs (two deployments at once)."""


class Workload(RunsPods):
    """One training or development deployment."""

    COLLECTION: ClassVar[str] = "workloads"
    name: WorkloadName
    """Object name; pods are NAME-0, NAME-1, ... (a Job's pods NAME-rRUN-INDEX)."""
    namespace: K8sName
    """Namespace it runs in (one of namespaces)."""
    user: str
    """Who runs it."""
    source: str = ""
    """The seed manifest or fact it comes from."""
    kind: values.WorkloadKind = "statefulset"
    """statefulset: long-lived, restarts and survives node reboots. job: runs to completion once per run_number."""
    state: values.State = "running"
    """running, or stopped: a StatefulSet at 0 replicas (its claims and Services stay); a Job not declared
    (stopping a running Job ends its run; starting it creates it from the config of that moment)."""
    run_number: int = Field(strict=True, default=1, ge=1, le=999_999)
    """Jobs: the run. The Job is named NAME-rRUN_NUMBER: raise it to run the training again (a new Job).
    Nothing else re-runs it: an existing Job never takes a change of its template (it waits for the next run)."""
    image: ImageRef
    """Container image; it needs python3 (the launcher) and, for torchrun, PyTorch."""
    service_account: K8sName
    """Service account of the pods (listed in security.service_accounts, same namespace)."""
    service_account_token: bool = False
    """Mount the service account's API token in the pods (off: training pods never call the API)."""
    nodes: int = Field(strict=True, default=1, ge=1, le=values.MAX_NODES)
    """Pods, one per node."""
    gpus_per_node: int = Field(strict=True, ge=1, le=values.MAX_GPUS)
    """GPUs each pod requests (and processes torchrun starts per pod)."""
    node_set: K8sName | None = None
    """Which node set the pods run on (None: the first of node_sets)."""
    tolerations: list[Toleration] = Field(default=[], max_length=values.MAX_TOLERATIONS)
    """Taints tolerated besides the stack's gpu_tolerations."""
    node_selector: NodeLabels = Field(default={}, max_length=values.MAX_SELECTOR)
    """Node labels required besides the stack's gpu_node_selector."""
    transport: Transport
    """rdma: NCCL over the cluster's fabric; tcp: NCCL over sockets (NCCL_IB_DISABLE=1). Switching it updates the same workload."""
    memlock: values.MemlockStrategy | None = None
    """How an RDMA pod gets to pin memory (KNOWLEDGE.md). None: the stack default for the transport."""
    privileged_reason: Reason | None = None
    """Required when the memlock strategy is privileged: why this workload needs a privileged container."""
    tcp_fallback: bool = False
    """In RDMA mode with no ACTIVE port, start over TCP (loudly) instead of failing."""
    launcher_strict: bool = False
    """Stop the pod when an NCCL setting inherited from the image would break NCCL (a wrong device, interface or
    GID index), instead of overriding it. Harmless ones (RDMA-only settings in TCP mode) are overridden either way."""
    cpu: Cpu = "32"
    """CPU request of each pod."""
    cpu_limit: Cpu | None = None
    """CPU limit (None: the request)."""
    memory: Memory = "256Gi"
    """Memory request of each pod."""
    memory_limit: Memory | None = None
    """Memory limit (None: the request). The launcher's pinning proof and /dev/shm count against it."""
    shm_size: values.ShmSize = "32Gi"
    """Size of /dev/shm (a memory emptyDir; counts against the memory limit)."""
    mounts: list[Mount] = Field(default=[], max_length=values.MAX_MOUNTS)
    """Volumes of the stack every pod mounts."""
    scripts: list[ScriptMount] = Field(default=[], max_length=values.MAX_SCRIPT_MOUNTS)
    """ConfigMaps of scripts every pod mounts."""
    ports: list[ContainerPort] = Field(default=[], max_length=values.MAX_PORTS)
    """Ports besides the rendezvous port (code-server, Jupyter, TensorBoard, debugpy); at most 16 (MAX_PORTS)."""
    run: Literal["torchrun", "command"] = "command"
    """torchrun: the launcher execs torchrun with the rendezvous settings and `args`; command: `args` as given."""
    args: list[str] = Field(default=["sleep", "infinity"], min_length=1, max_length=values.MAX_ARGS)
    """The torchrun script and its arguments, or the whole command (see run)."""
    working_dir: MountPath | None = None
    """Working directory of the command."""
    master_port: Port = 29500
    """Rendezvous port on pod 0 (the headless Service exposes it)."""
    env: dict[EnvName, str] = Field(default={}, max_length=values.MAX_ENV)
    """Explicit environment (NCCL_* here wins over the stack's and over detection)."""
    secret_env: dict[EnvName, SecretKeyRef] = Field(default={}, max_length=values.MAX_SECRET_ENV)
    """Environment from Secrets (declared in existing.secrets), e.g. HF_TOKEN from hf-secret."""
    deepspeed_hostfile: MountPath | None = None
    """Write a DeepSpeed hostfile here at start (one line `POD.SERVICE slots=GPUS` per pod)."""
    backoff_limit: int = Field(strict=True, default=0, ge=0, le=100)
    """Jobs: retries of a failed pod before the Job fails."""
    priority: K8sName | None = None
    """On a queued cluster: the WorkloadPriorityClass (one of queueing.priority_classes) Kueue admits it by. Kueue refuses
    to add one to a running workload, or to remove one."""
    tcp_variants: list[TcpVariant] = Field(default=[], max_length=values.MAX_TCP_VARIANTS)
    """TCP copies derived from this definition (alternatives, stopped unless they say otherwise); at most 8 (MAX_TCP_VARIANTS)."""

    @field_validator("kind", mode="before")
    @classmethod
    def _no_bare_pods(cls, value: Any) -> Any:
        if value == "pod":
            raise ValueError(
                "kind 'pod' is gone: a bare Pod stays Failed after one crash or node reboot and almost any edit replaces it. "
                "Use kind statefulset with nodes 1 (it restarts, survives reboots and rolls on change)"
            )
        return value

    @field_validator("args")
    @classmethod
    def _args_text(cls, value: list[str]) -> list[str]:
        if any("\x00" in a or len(a) > 16384 for a in value):
            raise ValueError("an argument holds a NUL byte or is longer than 16384 characters")
        return value

    @model_validator(mode="after")
    def _dollars(self) -> Self:
        """`$(NAME)` of a pod variable is ambiguous (see kubelet_escape): refused, in env values and in args."""
        own = [*self.env, *self.secret_env]
        texts: list[tuple[FieldPath, str, str]] = [(("env", k), v, f"the value of {k}") for k, v in self.env.items()]
        texts += [(("args", i), a, "an argument") for i, a in enumerate(self.args)]
        for at, text, where in texts:
            if problem := values.dollar_problem(text, own, where):
                raise FieldError(at, problem)
        if (launcher_args := len("LAUNCHER_ARGS=" + json.dumps(self.args)) + 1) > values.EXEC_STRING_MAX:
            raise FieldError(
                ("args",),
                f"the arguments take {launcher_args} bytes as the launcher's LAUNCHER_ARGS (JSON): the kernel passes at most "
                f"{values.EXEC_STRING_MAX} bytes per environment string (MAX_ARG_STRLEN), so the pod fails with 'Argument list too "
                "long'. Put long text in a script (scripts) and pass its path",
            )
        return self

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.tcp_variants and not self.uses_rdma:
            raise FieldError(("tcp_variants",), "tcp_variants derive from an RDMA workload; this one is already TCP")
        if both := set(self.env) & set(self.secret_env):
            raise FieldError(("secret_env",), f"{', '.join(sorted(both))} set in env and in secret_env: keep one")
        check_name_lengths(self.name, self.kind, self.nodes, self.run_number, ("name",))
        # No mount takes the program's own paths, and nothing is mounted twice (one path twice: the stack-wide check).
        placed = [(("mounts", k, "mount_path"), m.mount_path) for k, m in enumerate(self.mounts) if m.mount_path]
        placed += [(("scripts", k, "mount_path"), s.mount_path) for k, s in enumerate(self.scripts)]
        if own := next((p for _, p in placed if p in values.RESERVED_PATHS or p.startswith(values.LAUNCHER_DIR + "/")), None):
            raise FieldError(("mounts",), f"{own} is the program's own mount (/dev/shm, {values.LAUNCHER_DIR}): choose another path")
        for at, p in placed:
            if problem := values.system_path_problem(p):
                raise FieldError(at, problem)
        # The program's own port and master_port count as taken.
        port_names = [p.name for p in self.ports] + ["rendezvous"]
        for field, taken, message in (
            ("mounts", [m.volume for m in self.mounts], "a volume is mounted twice"),
            ("scripts", [s.config_map for s in self.scripts], "a ConfigMap is mounted twice"),
            ("ports", port_names, "port names must be unique and not 'rendezvous' (the program's own port)"),
            ("ports", [p.port for p in self.ports] + [self.master_port], "a port number is used twice (master_port counts)"),
        ):
            if len(set(taken)) != len(taken):
                raise FieldError((field,), message)
        for field, limit, request in (("cpu_limit", self.cpu_limit, self.cpu), ("memory_limit", self.memory_limit, self.memory)):
            if limit is not None and values.quantity_value(limit) < values.quantity_value(request):
                raise FieldError((field,), f"{field} {limit} is below the request {request}: the API server rejects it")
        return self

    @property
    def mem_limit(self) -> str:
        return self.memory_limit or self.memory

    @property
    def cpu_limit_value(self) -> str:
        return self.cpu_limit or self.cpu

    @property
    def object_name(self) -> str:
        """The StatefulSet's or Job's name: a Job carries its run number."""
        return f"{self.name}-r{self.run_number}" if self.kind == "job" else self.name


def check_name_lengths(name: str, kind: str, nodes: int, run_number: int, where: tuple[str | int, ...]) -> None:
    """The names the program derives from a workload's name stay within the API server's limits."""
    if len(name) > 63 - len("-headless"):
        raise FieldError(where, f"{name!r} is too long: its Service {name}-headless would exceed 63 characters (use at most 54)")
    if kind == "statefulset" and len(name) > 52:
        # The controller labels each pod with controller-revision-hash NAME-<10 characters>, a label value of at most 63.
        raise FieldError(where, f"{name!r} is too long for a StatefulSet: at most 52 characters, or its pods are never created")
    if kind == "job" and len(hostname := f"{name}-r{run_number}-{nodes - 1}") > 63:
        raise FieldError(where, f"{name!r} is too long: the Job's pod hostname {hostname} would exceed 63 characters")


# Characters of the digest in a check's Job name (components/bandwidth.py).
CHECK_DIGEST = 6


class BandwidthCheck(RunsPods):
    """An all-reduce benchmark that gates the rollout (docs/bandwidth.md): an Indexed Job with the pods of a training
    workload of its transport, run before those workloads; it stops `pulumi up` when the bus bandwidth at the largest
    message size is below `min_fraction` of the line rate, or when NCCL used sockets in RDMA mode."""

    COLLECTION: ClassVar[str] = "bandwidth_checks"
    name: WorkloadName
    """Name of the check; its Job is NAME-<digest of the fabric and the check>, its pods NAME-<digest>-INDEX."""
    namespace: K8sName
    """Namespace it runs in (one of namespaces)."""
    enabled: bool = True
    """Deploy and run it. Off: nothing of it is deployed, and nothing waits for it."""
    run_number: int = Field(strict=True, default=1, ge=1, le=999_999)
    """Raise it to run the check again with nothing else changed."""
    service_account: K8sName
    """Service account of the pods (listed in security.service_accounts, same namespace)."""
    image: ImageRef
    """A PyTorch image (tool torch) or one with nccl-tests' all_reduce_perf on PATH (tool nccl-tests)."""
    nodes: int = Field(strict=True, default=2, ge=1, le=values.MAX_NODES)
    """Pods, one per node. Two or more measure the fabric between nodes; one measures its own NICs (NCCL_P2P_DISABLE=1,
    NCCL_SHM_DISABLE=1: every hop goes through the network)."""
    gpus_per_node: int = Field(strict=True, ge=1, le=values.MAX_GPUS)
    """GPUs each pod requests; one benchmark process per GPU."""
    node_set: K8sName | None = None
    """Which node set it runs on (None: the first of node_sets)."""
    transport: Transport
    """rdma: fail unless NCCL used InfiniBand/RoCE (never sockets). tcp: fail if NCCL used IB."""
    tool: values.BandwidthTool = "auto"
    """torch: a torch.distributed all_reduce loop under torchrun on every node. nccl-tests: all_reduce_perf on one node
    (`nodes: 1`: it spans hosts only under mpirun). auto: nccl-tests on one node where the image has it, else torch."""
    min_fraction: float = Field(default=0.8, gt=0, le=1)
    """Pass when the bus bandwidth at the largest message size is at least this fraction of the line rate."""
    line_rate_gbps: float | None = Field(default=None, gt=0, le=1_000_000)
    """The line rate in Gb/s the bus bandwidth is held against. None: the fabric's for rdma; none (no threshold) for tcp."""
    min_bytes: int = Field(strict=True, default=1024 * 1024, ge=4, le=64 * values.GIB)
    """Smallest message in bytes (all_reduce_perf -b); sizes double up to max_bytes."""
    max_bytes: int = Field(strict=True, default=1024 * 1024 * 1024, ge=4, le=64 * values.GIB)
    """Largest message in bytes (all_reduce_perf -e): its bus bandwidth decides the verdict, so make
    it large enough to leave the latency-bound range (hundreds of MiB and up)."""
    iterations: int = Field(strict=True, default=20, ge=1, le=100_000)
    """Timed all-reduces per message size (all_reduce_perf -n)."""
    warmup_iterations: int = Field(strict=True, default=5, ge=0, le=100_000)
    """Untimed all-reduces before them (all_reduce_perf -w)."""
    memlock: values.MemlockStrategy | None = None
    """How the pods get to pin memory, as a workload's: None takes the cluster default for the transport."""
    privileged_reason: Reason | None = None
    """Required when the memlock strategy is privileged: why the check needs a privileged container."""
    env: dict[EnvName, str] = Field(default={}, max_length=values.MAX_ENV)
    """Extra environment (NCCL_* here wins over the rendered values)."""
    cpu: Cpu = "16"
    """CPU request and limit of each pod."""
    memory: Memory = "64Gi"
    """Memory request and limit of each pod."""
    shm_size: values.ShmSize = "16Gi"
    """Size of /dev/shm (a memory emptyDir; counts against the memory limit)."""
    master_port: Port = 29500
    """Rendezvous port on pod 0 (the headless Service exposes it)."""
    deadline_minutes: int = Field(strict=True, default=30, ge=1, le=values.MAX_DEADLINE_MINUTES)
    """activeDeadlineSeconds of the Job (Pending time counts); `pulumi up` waits a little longer for the verdict."""

    @model_validator(mode="after")
    def _shape(self) -> Self:
        for k, v in self.env.items():
            if problem := values.dollar_problem(v, self.env, f"the value of {k}"):
                raise FieldError(("env", k), problem)
        if self.min_bytes > self.max_bytes:
            raise FieldError(("min_bytes",), f"min_bytes ({self.min_bytes}) is larger than max_bytes ({self.max_bytes})")
        if self.tool == "nccl-tests" and self.nodes != 1:
            raise FieldError(
                ("tool",),
                "tool 'nccl-tests' runs all_reduce_perf on one node (it spans hosts only under mpirun, which this "
                "program does not deploy): set nodes to 1, or use tool 'torch' (or 'auto') across nodes",
            )
        if len(f"{self.name}-{'x' * CHECK_DIGEST}-{self.nodes - 1}") > 63:  # longer than NAME-headless: it bounds that too
            raise FieldError(
                ("name",), f"{self.name!r} is too long: the check's pod hostnames (NAME-DIGEST-INDEX) would exceed 63 characters"
            )
        return self
