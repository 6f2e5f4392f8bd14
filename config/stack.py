"""What a cluster IS: the typed, validated configuration of one stack (ClusterConfig), and the checks across its
fields, each a named function by concern (bounds, namespaces, declared objects, pods, mounts, the exec and object
budget, derived names).

Every field is documented (the docstrings become the descriptions of `python -m stacks schema`), every name that
lands on the cluster is checked against the API server's own rules, including the names the program derives from it
(`NAME-headless`, `NAME-rN-INDEX`, ...), every size as a quantity and every count within int32 and within bounds that
keep the program's own work small. Errors name the object and the field (`workloads[h-kim].nodes`), whether the
config comes from a stack module or a YAML file: see config/errors.py.
"""

from __future__ import annotations

import json
from typing import ClassVar, NamedTuple

from pydantic import Field, PrivateAttr, model_validator

from config.cluster import (
    KUEUE_MAX_LABELS,
    ExistingObjects,
    ImageBuild,
    NodeLabels,
    NodeLevel,
    NodeSet,
    PvcStorageClassFix,
    Queueing,
    RdmaFabric,
    ScriptConfigMap,
    Security,
    StorageClass,
    Toleration,
    Volume,
)
from config.errors import FieldError, Problems, Strict, located, named_path
from config.kube import GPU, KUBELET_MAX_PODS, node_policy_name, operator_network_name
from config.openshift import LAUNCHER_FILES, PLATFORM_NAMESPACES, platform_namespace
from config.values import (
    EXEC_MARGIN,
    EXEC_TOTAL_MAX,
    GIB,
    LAUNCHER_DIR,
    MAX_ACCEPTED_WARNINGS,
    MAX_BANDWIDTH_CHECKS,
    MAX_CLUSTER_NODES,
    MAX_ENV,
    MAX_HAND_MADE,
    MAX_IMAGES,
    MAX_NAMED_NODES,
    MAX_NAMESPACES,
    MAX_NODE_SETS,
    MAX_NOTES,
    MAX_POD_TEMPLATES,
    MAX_PVC_FIXES,
    MAX_SCRIPTS,
    MAX_SELECTOR,
    MAX_STORAGE_CLASSES,
    MAX_TOLERATIONS,
    MAX_VOLUMES,
    MAX_WORKLOADS,
    MIB,
    OBJECT_MAX,
    POD_TEMPLATE_BASE,
    RDMA_ONLY_NCCL,
    STRATEGY_NEEDS_SCC,
    STRATEGY_RUNS_AS_ROOT,
    EnvName,
    K8sName,
    MemlockStrategy,
    Reason,
    kubelet_escape,
    quantity_text,
    quantity_value,
    system_path_problem,
)
from config.workloads import BANDWIDTH_BENCH, BandwidthCheck, Workload, check_name_lengths


class Defaults(Strict):
    """Cluster-wide defaults of workloads that do not set their own."""

    memlock_rdma: MemlockStrategy = "root-ipc-lock"
    """Memlock strategy of RDMA workloads that do not name one."""
    memlock_tcp: MemlockStrategy = "none"
    """Memlock strategy of TCP workloads that do not name one."""
    tcp_socket_ifname: str = Field(default="^lo,docker0", min_length=1, max_length=256)
    """NCCL_SOCKET_IFNAME for TCP workloads (the seeds' value)."""
    pin_bytes: int = Field(strict=True, default=256 * MIB, gt=8 * MIB, le=16 * GIB)
    """Size of the buffer the launcher pins to prove memory locking works (must exceed 8 MiB, and stay
    below every RDMA pod's memory limit with room for the process itself)."""
    nccl_env_rdma: dict[EnvName, str] = Field(default={}, max_length=MAX_ENV)
    """NCCL tuning of every RDMA pod (NCCL_IB_TIMEOUT, NCCL_MIN_NCHANNELS, ...); a workload's env wins."""
    nccl_env_tcp: dict[EnvName, str] = Field(default={}, max_length=MAX_ENV)
    """NCCL tuning of every TCP pod (NCCL_P2P_LEVEL, ...); a workload's env wins."""


class HandMade(Strict):
    """An object that exists on the cluster because someone made it by hand (the seeds' `oc create`, `oc adm
    policy`, `oc apply`), which the stack now declares: `python -m stacks import-plan` adopts it instead of
    letting `pulumi up` fail on AlreadyExists."""

    kind: str = Field(pattern=r"^[A-Z][A-Za-z]+$")
    """Its kind, e.g. ServiceAccount, RoleBinding, SecurityContextConstraints."""
    name: str = Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$")
    """Its name (RoleBindings made by `oc adm policy` are named system:openshift:scc:SCC)."""
    namespace: K8sName | None = None
    """Its namespace (none for cluster-scoped objects)."""
    source: Reason
    """Who made it, and where that is recorded."""


class AcceptedWarning(Strict):
    """A preflight warning this stack accepts knowingly. `python -m stacks check` counts it (`-v` prints it with the
    reason); an acceptance that matches no finding is reported, so they do not go stale."""

    rule: str = Field(min_length=1, max_length=64)
    """The rule id (python -m stacks check prints it)."""
    object: str = Field(min_length=1, max_length=512)
    """The object as the finding names it (`StatefulSet nccl-test/h-kim`); `*` matches any run of characters."""
    value: str | None = Field(default=None, min_length=1, max_length=1024)
    """The value it accepts, for a warning about one (an `image` warning's image, written whole): required there, and
    matched exactly, so a changed value (a new tag, a copied module's new image) is warned about again, and this entry
    is reported as no longer matching. The check's `accepted-warnings` finding names the value to write."""
    reason: Reason
    """Why the stack accepts it."""


class ClusterConfig(Strict):
    """One OpenShift cluster: one Pulumi stack (or two, when its platform and project parts are run by
    different people; see docs/deploy.md "Pulumi stacks, tiers and rights")."""

    WHOLE_CONFIG: ClassVar[bool] = True  # Strict.WHOLE_CONFIG
    name: K8sName
    """Stack name: the module clusters/NAME.py and the Pulumi stack NAME."""
    description: str
    """What the cluster is, in a sentence."""
    api_host: str | None = None
    """API server host, where known."""
    openshift_version: str = "4.17"
    """OpenShift version, for the record."""
    gpu_model: str
    """GPU model of the GPU nodes, for the record."""
    node_sets: list[NodeSet] = Field(min_length=1, max_length=MAX_NODE_SETS)
    """The GPU nodes the stack counts on. Every running pod of the stack must fit on them at once. At most 4096 nodes
    in all (MAX_CLUSTER_NODES)."""
    gpu_tolerations: list[Toleration] = Field(default=[], max_length=MAX_TOLERATIONS)
    """Taints of the GPU nodes that every GPU pod of this cluster tolerates."""
    gpu_node_selector: NodeLabels = Field(default={}, max_length=MAX_SELECTOR)
    """Node labels every GPU pod requires (e.g. nvidia.com/gpu.present: "true")."""
    fabric: RdmaFabric | None = None
    """None: no RDMA (TCP only)."""
    storage_classes: list[StorageClass] = Field(default=[], max_length=MAX_STORAGE_CLASSES)
    """Storage classes known to exist."""
    namespaces: list[K8sName] = Field(min_length=1, max_length=MAX_NAMESPACES)
    """User namespaces (OpenShift projects) the stack deploys into. They exist already: creating a
    project is the users' or admins' business, not this program's (preview reads each one)."""
    security: Security = Security()
    """The SCCs the training pods run under and who may use them."""
    defaults: Defaults = Defaults()
    """Defaults of workloads that do not set their own."""
    volumes: list[Volume] = Field(default=[], max_length=MAX_VOLUMES)
    """Data volumes (PVCs) the workloads mount."""
    pvc_fixes: list[PvcStorageClassFix] = Field(default=[], max_length=MAX_PVC_FIXES)
    """Storage classes to set on PVCs that exist already without one."""
    existing: ExistingObjects = ExistingObjects()
    """Objects workloads use that their owners made (preview checks they exist)."""
    scripts: list[ScriptConfigMap] = Field(default=[], max_length=MAX_SCRIPTS)
    """ConfigMaps of scripts the stack ships."""
    images: list[ImageBuild] = Field(default=[], max_length=MAX_IMAGES)
    """Images the stack builds on the cluster (ImageStream + BuildConfig)."""
    node_level: NodeLevel = NodeLevel()
    """MachineConfigs for the GPU pool (cluster-admin; off by default; each reboots the pool's nodes)."""
    queueing: Queueing | None = None
    """Gang admission through Kueue, for a shared cluster (docs/shared-clusters.md). None (the default): no queue, the
    workloads start when `pulumi up` declares them and the preflight counts them against the node sets."""
    workloads: list[Workload] = Field(default=[], max_length=MAX_WORKLOADS)
    """Training and development deployments: at most 200, and at most 256 pod templates with their TCP variants and
    the bandwidth checks (MAX_POD_TEMPLATES)."""
    bandwidth_checks: list[BandwidthCheck] = Field(default=[], max_length=MAX_BANDWIDTH_CHECKS)
    """All-reduce benchmarks that gate the rollout of the workloads of their transport."""
    hand_made: list[HandMade] = Field(default=[], max_length=MAX_HAND_MADE)
    """Objects made by hand that the stack declares: candidates for `python -m stacks import-plan`."""
    accepted_warnings: list[AcceptedWarning] = Field(default=[], max_length=MAX_ACCEPTED_WARNINGS)
    """Preflight warnings this stack accepts, each with its reason."""
    notes: list[str] = Field(default=[], max_length=MAX_NOTES)
    """Contradictions between the sources and the choices the stack makes about them."""
    _volume_index: dict[tuple[str, str], Volume] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _references(self) -> ClusterConfig:
        _references(self)
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
                            "state": v.state,
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

    def located_workloads(self) -> list[tuple[tuple[str | int, ...], Workload]]:
        """all_workloads() with the config path of each: `("workloads", i)`, a variant `("workloads", i, "tcp_variants", j)`."""
        paths = [
            p
            for i, w in enumerate(self.workloads)
            for p in [("workloads", i), *(("workloads", i, "tcp_variants", j) for j in range(len(w.tcp_variants)))]
        ]
        return list(zip(paths, self.all_workloads(), strict=True))

    def running_workloads(self) -> list[Workload]:
        return [w for w in self.all_workloads() if w.state == "running"]

    def enabled_checks(self) -> list[BandwidthCheck]:
        return [c for c in self.bandwidth_checks if c.enabled]

    def pod_requests(self, w: Workload | BandwidthCheck) -> dict[str, str]:
        """What each pod of a workload or a bandwidth check requests (components/training.py writes its container's
        requests from this; Kueue charges a pod so): cpu, memory, its GPUs, and one VF of each SR-IOV attachment for an
        RDMA pod (else it stays Pending)."""
        out = {"cpu": w.cpu, "memory": w.memory, GPU: str(w.gpus_per_node)}
        if w.transport == "rdma" and self.fabric is not None:
            out.update({a.resource: "1" for a in self.fabric.attachments})
        return out

    def pod_specs(self) -> list[Workload | BandwidthCheck]:
        """Everything that runs pods: workloads (any state: a stopped one may be started by a researcher
        without a cluster admin, so its grant and networks exist already) and enabled bandwidth checks."""
        return [*self.all_workloads(), *self.enabled_checks()]

    def node_set(self, name: str | None) -> NodeSet:
        """A node set by name (None: the first)."""
        if name is None:
            return self.node_sets[0]
        return next(s for s in self.node_sets if s.name == name)

    def bandwidth_line_rate_gbps(self, check: BandwidthCheck) -> float | None:
        """The line rate in Gb/s a check's bus bandwidth (nccl-tests' busbw) is held against.

        Across nodes a ring all-reduce moves 2(n-1)/n of the message through each node's NICs, the
        same factor busbw multiplies by, so busbw approaches the node's NIC bandwidth: the ports the
        check's GPUs drive (a GPU drives the port next to it, so at most one port per GPU) times
        link_gbps. Barcelona: 4 x 400 Gb/s = 1600 Gb/s = 200 GB/s. On one node with P2P and SHM
        disabled every ring hop goes out through a NIC, so busbw approaches one GPU's share of them.
        None for tcp unless the check names a rate: the sources give no Ethernet line rate."""
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
        # model_construct: the check was validated already (its Job is named by components/bandwidth.py).
        return Workload.model_construct(
            **{
                **{k: f.default for k, f in Workload.model_fields.items() if not f.is_required()},
                "name": check.name,
                "namespace": check.namespace,
                "user": "bandwidth check",
                "source": f"bandwidth check {check.name}",
                "kind": "job",
                "state": "running",
                "image": check.image,
                "service_account": check.service_account,
                "nodes": check.nodes,
                "gpus_per_node": check.gpus_per_node,
                "node_set": check.node_set,
                "transport": check.transport,
                "memlock": check.memlock,
                "privileged_reason": check.privileged_reason,
                "cpu": check.cpu,
                "memory": check.memory,
                "shm_size": check.shm_size,
                "run": "command",
                "args": args,
                "master_port": check.master_port,
                "env": env,
                "backoff_limit": 0,  # a failed measurement is the answer, not something to retry
            }
        )

    def memlock_of(self, w: Workload | BandwidthCheck) -> str:
        if w.memlock is not None:
            return w.memlock
        return self.defaults.memlock_rdma if w.transport == "rdma" else self.defaults.memlock_tcp

    def scc_of(self, w: Workload | BandwidthCheck) -> str:
        """The SCC a pod runs under: the stack's `scc` when its strategy needs root or privilege,
        the unprivileged one (restricted-v2) otherwise."""
        if self.memlock_of(w) in STRATEGY_NEEDS_SCC and self.security.scc:
            return self.security.scc
        return self.security.unprivileged_scc

    def volume(self, namespace: str, name: str) -> Volume:
        # Indexed once per config (it is immutable): every mount of every pod template looks its volume up, so a search
        # of the list each time was mounts x volumes. A missing volume is a KeyError, as it was a StopIteration.
        if self._volume_index is None:
            index: dict[tuple[str, str], Volume] = {}
            for v in self.volumes:
                index.setdefault((v.namespace, v.name), v)  # the first, as the search found (duplicates are refused)
            self._volume_index = index
        return self._volume_index[(namespace, name)]

    def storage_class(self, name: str | None) -> StorageClass | None:
        return next((s for s in self.storage_classes if s.name == name), None)

    def flavor_labels(self, node_set: NodeSet) -> dict[str, str]:
        """The node labels a queued cluster's ResourceFlavor of `node_set` names: the stack's GPU node selector and the
        set's own labels (its pods select both)."""
        return {**self.gpu_node_selector, **node_set.labels}

    def queue_quota(self) -> dict[str, dict[str, str]]:
        """node set -> resource -> the nominal quota of its ResourceFlavor in the ClusterQueue (a quantity), on a queued
        cluster: what queueing.quota states, else the set's total. Every set covers the same resources in the same order
        (Kueue requires it of a resource group): cpu, memory, the GPUs, the SR-IOV resources, then any other stated.
        The config's checks (`_queueing`) made sure every default here is known."""
        q = self.queueing
        if q is None:
            return {}
        sriov = [a.resource for a in self.fabric.attachments] if self.fabric else []
        stated = sorted({r for per_set in q.quota.values() for r in per_set} - {"cpu", "memory", GPU, *sriov})
        out: dict[str, dict[str, str]] = {}
        for ns in self.node_sets:
            per_node: dict[str, str | None] = {
                "cpu": ns.allocatable_cpu,
                "memory": ns.allocatable_memory,
                GPU: str(ns.gpus_per_node),
                "pods": str(KUBELET_MAX_PODS),  # where a set states `pods`, the others may run as many as their nodes take
            }
            # A pod takes at least one GPU and one VF of each attachment: the GPUs bound the VFs a node can use first.
            per_node.update({r: str(ns.gpus_per_node) for r in sriov})
            own = q.quota.get(ns.name, {})
            out[ns.name] = {r: own.get(r) or _times(per_node.get(r) or "0", ns.size) for r in ["cpu", "memory", GPU, *sriov, *stated]}
        return out


def _times(quantity: str, n: int) -> str:
    """`n` times a quantity, written as a Kubernetes quantity: `4 x 63500m` is `254`, `4 x 256Gi` is `1Ti`."""
    return quantity_text(quantity_value(quantity) * n)


def _bounds(c: ClusterConfig) -> None:
    """The stack-wide bounds (MAX_CLUSTER_NODES, MAX_POD_TEMPLATES), checked before anything that grows with them. The
    error names the entry that crosses the bound, where the stack file writes it."""
    total = named = 0
    for i, s in enumerate(c.node_sets):
        total += s.size
        named += len(s.nodes)
        if named > MAX_NAMED_NODES:
            raise FieldError(
                ("node_sets", i, "nodes"),
                f"the node sets name {named} nodes up to {s.name!r}: at most {MAX_NAMED_NODES} in all (every pod template carries "
                "the names), the bound that keeps `python -m stacks check` fast. Give a larger set of interchangeable nodes as "
                "a count instead of names",
            )
        if total > MAX_CLUSTER_NODES:
            raise FieldError(
                ("node_sets", i, "nodes" if s.nodes else "count"),
                f"the node sets count {total} GPU nodes up to {s.name!r}: at most {MAX_CLUSTER_NODES} in all, the bound that keeps "
                "`python -m stacks check` fast. Count only the nodes this stack's pods may use",
            )
    templates: list[tuple[str | int, ...]] = []
    for i, w in enumerate(c.workloads):
        templates += [("workloads", i, "name"), *(("workloads", i, "tcp_variants", j, "name") for j in range(len(w.tcp_variants)))]
    templates += [("bandwidth_checks", i, "name") for i in range(len(c.bandwidth_checks))]
    if len(templates) > MAX_POD_TEMPLATES:
        raise FieldError(
            templates[MAX_POD_TEMPLATES],
            f"the stack declares {len(templates)} pod templates (workloads, their TCP variants and bandwidth checks, running or not): "
            f"at most {MAX_POD_TEMPLATES}, the bound that keeps `python -m stacks check` fast, and this is the first past it. Remove the "
            "TCP variants and workloads nobody runs any more, or split the stack",
        )


FieldPath = tuple[str | int, ...]  # a field of the config: ("workloads", 0, "nodes")


class _Checks:
    """What the checks across the config share: the config, the errors collected so far (each entry is checked, and the
    errors of all come together), and the names each namespace holds already."""

    def __init__(self, c: ClusterConfig) -> None:
        self.c = c
        self.problems = Problems()
        self.namespaces = set(c.namespaces)
        self.node_sets = {s.name for s in c.node_sets}
        self.nad_source = c.fabric.nad_source_namespace if c.fabric else None
        self.seen: dict[tuple[str, str, str], FieldPath] = {}

    def unique(self, kind: str, namespace: str, name: str, path: FieldPath) -> None:
        first = self.seen.setdefault((kind, namespace, name), path)
        if first != path:
            raise FieldError(
                path,
                f"duplicate {kind} name {name!r} in namespace {namespace!r} (also {named_path(first, self.c)}): names must be unique",
            )

    def untouchable(self, path: FieldPath, namespace: str) -> None:
        """A namespace no stack may touch: one error at the entry that names it."""
        if platform_namespace(namespace):
            raise FieldError(
                path,
                f"{namespace!r} is a namespace of the platform ({', '.join(PLATFORM_NAMESPACES)}): what a stack declares there it "
                "owns, and its `pulumi destroy` deletes it from under the cluster (an import would adopt the platform's own "
                "objects). Use the users' own projects",
            )
        if namespace == self.nad_source:
            raise FieldError(
                path,
                f"{namespace!r} holds the SR-IOV operator's NADs (fabric.nad_source_namespace): a NAD copy there would adopt the "
                "operator's own NAD, and `pulumi destroy` would delete it. Use the users' own projects",
            )

    def in_namespaces(self, path: FieldPath, what: str, namespace: str) -> None:
        if namespace not in self.namespaces:
            self.untouchable(path, namespace)  # the entry's own error, not "add it to namespaces"
            raise FieldError(path, f"{what} is in namespace {namespace!r}, which is not in namespaces")


class _Declared(NamedTuple):
    """What the stack declares that its pods reference, by (namespace, name)."""

    volumes: dict[tuple[str, str], Volume]
    config_maps: set[tuple[str, str]]  # the stack's scripts and the existing ones
    secrets: set[tuple[str, str]]
    accounts: set[tuple[str, str]]


def _references(c: ClusterConfig) -> None:
    """Checks across the whole config, by concern in the functions below. Each error carries the path of the offending
    field; every entry is checked, and the errors of all come together (FieldErrors), so a config with three bad
    namespaces hears of three."""
    _bounds(c)  # alone: past a bound, the checks below would be the slow part
    k = _Checks(c)
    _namespaces(k)
    _node_sets(k)
    _sriov_operator(k)
    declared = _declared(k)
    # all_workloads() lists each workload followed by its TCP variants: the same order as these paths.
    paths: list[tuple[FieldPath, FieldPath]] = []
    for i, w in enumerate(c.workloads):
        paths.append((("workloads", i), ("workloads", i)))
        paths += [(("workloads", i), ("workloads", i, "tcp_variants", j)) for j in range(len(w.tcp_variants))]
    for (src, path), w in zip(paths, c.all_workloads(), strict=True):
        with k.problems.collect():
            _pod_refs(k, declared, "workload", src, path, w)
            _workload(k, declared, src, path, w)
    for i, chk in enumerate(c.bandwidth_checks):
        with k.problems.collect():
            path = ("bandwidth_checks", i)
            _pod_refs(k, declared, "bandwidth check", path, path, chk)
    for i, h in enumerate(c.hand_made):
        with k.problems.collect():
            if h.namespace and h.namespace not in k.namespaces:  # one of namespaces: that entry's error says it
                k.untouchable(("hand_made", i, "namespace"), h.namespace)
    with k.problems.collect():
        _derived_names(c, paths)
    _queueing(k)
    k.problems.raise_all()


def _namespaces(k: _Checks) -> None:
    """Each namespace listed once, and none of the platform's."""
    with k.problems.collect():
        if len(k.namespaces) != len(k.c.namespaces):
            raise FieldError(("namespaces",), "a namespace is listed twice (its objects would be declared twice)")
    for i, name in enumerate(k.c.namespaces):
        with k.problems.collect():
            k.untouchable(("namespaces", i), name)


def _node_sets(k: _Checks) -> None:
    """Node sets the scheduler can tell apart: distinct names, no node in two, at most one set counted."""
    c = k.c
    with k.problems.collect():
        if len(k.node_sets) != len(c.node_sets):
            raise FieldError(("node_sets",), "two node sets share a name")
    all_nodes = [n for s in c.node_sets for n in s.nodes]
    with k.problems.collect():
        if len(set(all_nodes)) != len(all_nodes):
            raise FieldError(("node_sets",), "a node is in two node sets")
    with k.problems.collect():
        if sum(1 for s in c.node_sets if not s.nodes) > 1:
            raise FieldError(("node_sets",), "at most one node set of unnamed nodes (count): the scheduler cannot tell two apart")


def _sriov_operator(k: _Checks) -> None:
    """What the platform tier declares in the SR-IOV operator's namespace: never one of the stack's projects (there the
    project tier would own it), and node policies only for the attachments' resources on an SR-IOV fabric."""
    c, fabric = k.c, k.c.fabric
    operator = fabric is not None and (fabric.nad_mode == "operator" or any(s.node_policies for s in c.node_sets))
    if fabric is not None and operator and fabric.operator_namespace in k.namespaces:
        with k.problems.collect():
            raise FieldError(
                ("fabric", "operator_namespace"),
                f"{fabric.operator_namespace!r} is one of the stack's namespaces: the SR-IOV operator's namespace holds the "
                "cluster admin's networks and policies, not a project's objects. Name the operator's namespace "
                "(`oc get sriovnetworks -A`), or take it out of namespaces",
            )
    resources = {a.resource for a in fabric.attachments} if fabric else set()
    for i, node_set in enumerate(c.node_sets):
        for j, policy in enumerate(node_set.node_policies):
            with k.problems.collect():
                if fabric is None or fabric.device_access != "sriov":
                    raise FieldError(
                        ("node_sets", i, "node_policies"),
                        "node policies make SR-IOV VFs: they need a fabric with device_access 'sriov' and its attachments",
                    )
                if policy.resource not in resources:
                    raise FieldError(
                        ("node_sets", i, "node_policies", j, "resource"),
                        f"{policy.resource} is no attachment's resource ({', '.join(sorted(resources))}): no pod would use these VFs",
                    )


def _declared(k: _Checks) -> _Declared:
    """The objects the stack makes or relies on besides its pods (service accounts, volumes, claims to fix, scripts,
    images, existing objects): each in one of the stack's namespaces, each name once, none both made and existing."""
    c = k.c
    for i, sa in enumerate(c.security.service_accounts):
        with k.problems.collect():
            k.in_namespaces(("security", "service_accounts", i, "namespace"), f"service account {sa.name!r}", sa.namespace)
            k.unique("service account", sa.namespace, sa.name, ("security", "service_accounts", i, "name"))
    volumes: dict[tuple[str, str], Volume] = {}
    for i, v in enumerate(c.volumes):
        volumes.setdefault((v.namespace, v.name), v)  # known to its workloads even when wrong itself: one error per cause
        with k.problems.collect():
            k.in_namespaces(("volumes", i, "namespace"), f"volume {v.name!r}", v.namespace)
            k.unique("volume", v.namespace, v.name, ("volumes", i, "name"))
    classes = {s.name for s in c.storage_classes}
    for i, f in enumerate(c.pvc_fixes):
        with k.problems.collect():
            k.untouchable(("pvc_fixes", i, "namespace"), f.namespace)
        with k.problems.collect():
            for cls in f.serves_storage_classes:
                if cls not in classes:
                    raise FieldError(("pvc_fixes", i, "serves_storage_classes"), f"storage class {cls!r} is not in storage_classes")
    script_maps = set()
    for i, s in enumerate(c.scripts):
        script_maps.add((s.namespace, s.name))
        with k.problems.collect():
            k.in_namespaces(("scripts", i, "namespace"), f"ConfigMap {s.name!r}", s.namespace)
            k.unique("ConfigMap", s.namespace, s.name, ("scripts", i, "name"))
            if s.name == "gpu-training-launcher":
                raise FieldError(("scripts", i, "name"), "gpu-training-launcher is the program's own ConfigMap")
            total = sum(len(key) + len(t.encode("utf-8", "surrogatepass")) for key, t in s.files.items())
            if total > 1000 * 1024:
                raise FieldError(
                    ("scripts", i, "files"),
                    f"{total} bytes of keys and files: the API server refuses a ConfigMap over 1 MiB of data (and etcd a request over "
                    "1.5 MiB). Split the files over several entries of scripts, or put large files on a volume",
                )
    for i, b in enumerate(c.images):
        with k.problems.collect():
            k.in_namespaces(("images", i, "namespace"), f"image {b.name!r}", b.namespace)
            k.unique("image", b.namespace, b.name, ("images", i, "name"))
    existing = c.existing
    for field, what in (("secrets", "Secret"), ("config_maps", "ConfigMap"), ("image_streams", "image stream")):
        for i, o in enumerate(getattr(existing, field)):
            with k.problems.collect():
                k.in_namespaces(("existing", field, i, "namespace"), f"{what} {o.name!r}", o.namespace)
                k.unique(f"existing {what}", o.namespace, o.name, ("existing", field, i, "name"))
    built = {(b.namespace, b.name) for b in c.images}
    for field, what, made, by in (
        ("config_maps", "ConfigMap", script_maps, "scripts"),
        ("image_streams", "ImageStream", built, "images"),
    ):
        for i, o in enumerate(getattr(existing, field)):
            with k.problems.collect():
                if (o.namespace, o.name) in made or (field == "config_maps" and o.name == "gpu-training-launcher"):
                    owner = f"{by}[{o.name}]" if o.name != "gpu-training-launcher" else "the program (the launcher's ConfigMap)"
                    raise FieldError(
                        ("existing", field, i, "name"),
                        f"{what} {o.namespace}/{o.name} is created by this stack ({owner}) and listed as existing (made by its owner): "
                        "both cannot be true. Drop it from existing if the stack makes it, or rename the stack's own",
                    )
    return _Declared(
        volumes=volumes,
        config_maps=script_maps | {(o.namespace, o.name) for o in existing.config_maps},
        secrets={(o.namespace, o.name) for o in existing.secrets},
        accounts={(sa.namespace, sa.name) for sa in c.security.service_accounts},
    )


def _pod_refs(k: _Checks, declared: _Declared, what: str, src: FieldPath, path: FieldPath, w: Workload | BandwidthCheck) -> None:
    """What every pod-running entry (workload, TCP variant, bandwidth check) must reference: each independent fact
    reported on its own; the checks that build on the node set stop at the first."""
    c = k.c
    # Outside a collect: an entry in a namespace the stack does not have is not checked further (what it mounts and
    # uses would all be "not in its namespace": one cause, one error).
    k.in_namespaces(src + ("namespace",), f"{what} {w.name!r}", w.namespace)
    with k.problems.collect():
        # A check's Job and Service are named as a workload's would be: one name space for both.
        k.unique("workload", w.namespace, w.name, path + ("name",))
    with k.problems.collect():
        if (w.namespace, w.service_account) not in declared.accounts:
            raise FieldError(
                src + ("service_account",),
                f"{what} {w.name!r} uses service account {w.service_account!r}, which security.service_accounts does not list in "
                f"namespace {w.namespace!r}",
            )
    with k.problems.collect():
        if w.transport == "rdma" and c.fabric is None:
            raise FieldError(
                src + ("transport",), f"{what} {w.name!r} uses rdma, but the cluster has no fabric (set fabric, or transport: tcp)"
            )
    if w.node_set is not None and w.node_set not in k.node_sets:
        raise FieldError(src + ("node_set",), f"node set {w.node_set!r} is not in node_sets ({', '.join(sorted(k.node_sets))})")
    node_set = c.node_set(w.node_set)
    if w.gpus_per_node > node_set.gpus_per_node:
        raise FieldError(
            src + ("gpus_per_node",),
            f"{w.gpus_per_node} GPUs per pod, but the nodes of {node_set.name!r} have {node_set.gpus_per_node}: the pods never "
            "schedule. Spread the training over more nodes",
        )
    if w.nodes > node_set.size:
        raise FieldError(src + ("nodes",), f"{w.nodes} pods, one per node, but node set {node_set.name!r} has {node_set.size} node(s)")
    _fits_nodes(c, w, src, node_set)
    strategy = c.memlock_of(w)
    if strategy in STRATEGY_NEEDS_SCC and c.security.scc is None:
        raise FieldError(
            src + ("memlock",),
            f"memlock {strategy!r} needs an SCC that admits root with capabilities (or privileged containers): "
            "set security.scc (create: true makes a least-privilege one), or use memlock node-limit",
        )
    if strategy == "privileged" and not w.privileged_reason:
        raise FieldError(src + ("privileged_reason",), "memlock 'privileged' needs privileged_reason (it is printed)")
    if strategy in STRATEGY_RUNS_AS_ROOT or strategy == "privileged" or w.transport == "rdma":
        limit = quantity_value(w.mem_limit if isinstance(w, Workload) else w.memory)
        if w.transport == "rdma" and c.defaults.pin_bytes + 512 * MIB > limit:
            raise FieldError(
                ("defaults", "pin_bytes"),
                f"the launcher pins {c.defaults.pin_bytes} bytes to prove memory locking, but {what} {w.name!r} may use "
                f"{limit} bytes in all: it would be OOM-killed at start. Lower pin_bytes or raise the memory limit "
                "(leave 512Mi for the process)",
            )


def _workload(k: _Checks, declared: _Declared, src: FieldPath, path: FieldPath, w: Workload) -> None:
    """What a workload (or TCP variant, `path` != `src`) mounts, serves and reads exists in its namespace and works
    for its kind and size; its first error stops it."""
    c = k.c
    if path != src:  # a variant carries its own name: its derived names must fit too
        check_name_lengths(w.name, w.kind, w.nodes, w.run_number, path + ("name",))
    for i, m in enumerate(w.mounts):
        mounted = declared.volumes.get((w.namespace, m.volume))
        if mounted is None:
            raise FieldError(
                src + ("mounts", i, "volume"),
                f"workload {w.name!r} mounts volume {m.volume!r}, which is not a volume in {w.namespace!r}",
            )
        if not mounted.shared and w.kind == "job" and not mounted.existing:
            raise FieldError(
                src + ("mounts", i, "volume"),
                f"volume {mounted.name!r} is per-pod (shared: false), which only a StatefulSet can make (volumeClaimTemplates): "
                "a Job would mount a claim nobody creates. Use a shared volume",
            )
        if mounted.existing and not mounted.shared and w.nodes > 1:
            raise FieldError(
                src + ("mounts", i, "volume"),
                f"existing claim {mounted.name!r} is not shared (ReadWriteOnce) but {w.nodes} pods mount it: all but one "
                "would stay ContainerCreating. Set shared: true if the claim is ReadWriteMany",
            )
    paths_in_pod = [m.mount_path or declared.volumes[(w.namespace, m.volume)].mount_path for m in w.mounts]
    paths_in_pod += [script.mount_path for script in w.scripts]
    if len(set(paths_in_pod)) != len(paths_in_pod):
        raise FieldError(src + ("mounts",), f"two mounts of workload {w.name!r} share a mount path")
    if path == src:  # a variant mounts what its source mounts
        _mount_targets(c, w, src)
    _exec_and_object_budget(c, w, src)
    for i, port in enumerate(w.ports):
        # The router names a Route without a host ROUTE-NAMESPACE.DOMAIN: that first label is at most 63 characters.
        if port.route and len(f"{w.name}-{port.name}-{w.namespace}") > 63:
            raise FieldError(
                src + ("ports", i, "name"),
                f"the Route {w.name}-{port.name} in {w.namespace!r} would get the host "
                f"{w.name}-{port.name}-{w.namespace}.<domain>, whose first label exceeds 63 characters: the router does not "
                "admit it. Shorten the workload or port name",
            )
    for i, mount in enumerate(w.scripts):
        if (w.namespace, mount.config_map) not in declared.config_maps:
            raise FieldError(
                src + ("scripts", i, "config_map"),
                f"ConfigMap {mount.config_map!r} is neither in scripts nor in existing.config_maps (namespace {w.namespace!r})",
            )
    for key, ref in w.secret_env.items():
        if (w.namespace, ref.secret) not in declared.secrets:
            raise FieldError(
                src + ("secret_env", key),
                f"Secret {ref.secret!r} is not declared in existing.secrets for namespace {w.namespace!r}: preview could not check "
                "it exists, and the pod would fail with CreateContainerConfigError",
            )
    for j, variant in enumerate(w.tcp_variants):
        if variant.state == "running" and w.state == "running" and not variant.alongside:
            raise FieldError(
                src + ("tcp_variants", j, "state"),
                f"TCP variant {variant.name!r} and its source {w.name!r} would both run: they are alternatives. Stop one, or set "
                "alongside: true to run both at once",
            )


def _fits_nodes(c: ClusterConfig, w: Workload | BandwidthCheck, src: tuple[str | int, ...], node_set: NodeSet) -> None:
    """A pod's requests fit one node of its set (where the stack knows the node's allocatable CPU and memory), and
    its node selector agrees with the set's pins and with the stack's GPU node selector."""
    for field, have in (("cpu", node_set.allocatable_cpu), ("memory", node_set.allocatable_memory)):
        want = getattr(w, field)
        if have is not None and quantity_value(want) > quantity_value(have):
            raise FieldError(
                src + (field,),
                f"each pod requests {field} {want}, but the nodes of {node_set.name!r} offer {have} (allocatable_{field}): the pods "
                f"stay Pending ('Insufficient {field}'). Request at most {have}",
            )
    own: dict[str, str] = getattr(w, "node_selector", {}) or {}
    for key, value in own.items():
        if key in c.gpu_node_selector and c.gpu_node_selector[key] != value:
            raise FieldError(
                src + ("node_selector", key),
                f"{key}={value} contradicts the stack's gpu_node_selector {key}={c.gpu_node_selector[key]}: the workload's value "
                "replaces it, so the pods leave the GPU nodes the stack counts on. Remove it, or change gpu_node_selector",
            )
    host_key = "kubernetes.io/hostname"
    host = {**c.gpu_node_selector, **own}.get(host_key)
    if host is None:
        return
    where = src + ("node_selector", host_key) if host_key in own else ("gpu_node_selector", host_key)
    named = {n for s in c.node_sets for n in s.nodes}
    if node_set.nodes and host not in node_set.nodes:
        problem = f"pins the pods to {host}, which is not a node of their node set {node_set.name!r} ({', '.join(node_set.nodes)})"
    elif not node_set.nodes and host in named:
        problem = f"pins the pods to {host}, a named node of another set, while the pods of {node_set.name!r} avoid named nodes"
    elif w.nodes > 1:
        problem = f"pins all {w.nodes} pods to {host}, but the pods of a workload take one node each"
    else:
        return
    raise FieldError(
        where, f"{host_key}: {problem}: they never schedule. Choose the nodes with node_set (and the set's nodes), not node_selector"
    )


def _mount_targets(c: ClusterConfig, w: Workload, src: tuple[str | int, ...]) -> None:
    """Every mount point can be made and every file the launcher writes can be written: no read-only mount is a
    parent of another mount (the runtime cannot make a mount point inside it), /tmp stays writable, and the
    DeepSpeed hostfile is a writable file of its own."""
    mounts: list[tuple[str, bool, tuple[str | int, ...], str]] = [
        (LAUNCHER_DIR, True, (), "the launcher's own mount"),
        ("/dev/shm", False, (), "the program's /dev/shm"),
    ]
    for k, m in enumerate(w.mounts):
        v = c.volume(w.namespace, m.volume)
        where = src + ("mounts", k, "mount_path" if m.mount_path else "volume")
        mounts.append((m.mount_path or v.mount_path, m.read_only, where, f"volume {m.volume!r}"))
    for k, sm in enumerate(w.scripts):
        mounts.append((sm.mount_path, True, src + ("scripts", k, "mount_path"), f"ConfigMap {sm.config_map!r} (always read-only)"))
    for path, read_only, where, what in mounts:
        if not where or not read_only:
            continue
        if path == "/tmp" or "/tmp".startswith(path.rstrip("/") + "/"):
            raise FieldError(
                where,
                f"{what} is mounted read-only at {path}, but the launcher writes {', '.join(LAUNCHER_FILES)} at start: it "
                "could not. Mount it elsewhere, or read-write",
            )
        inside = [(p, wh) for p, _, _, wh in mounts if p != path and p.startswith(path.rstrip("/") + "/")]
        if inside:
            other, other_what = inside[0]
            raise FieldError(
                where,
                f"{what} is mounted read-only at {path}, a parent of {other} ({other_what}): the runtime cannot make that mount "
                "point inside a read-only mount, so the container is never created. Mount one of them elsewhere",
            )
    hostfile = w.deepspeed_hostfile
    if hostfile is None:
        return
    where = src + ("deepspeed_hostfile",)
    if hostfile in LAUNCHER_FILES:
        raise FieldError(
            where, f"{hostfile} is a file the launcher itself writes at start: the two would overwrite each other. Choose another path"
        )
    if problem := system_path_problem(hostfile):
        raise FieldError(where, f"the hostfile cannot be written there: {problem}")
    for path, read_only, _, what in mounts:
        if hostfile == path:
            raise FieldError(where, f"{hostfile} is where {what} is mounted (a directory), not a file. Name a file inside it")
        if read_only and hostfile.startswith(path.rstrip("/") + "/"):
            raise FieldError(
                where, f"{hostfile} is inside {path}, where {what} is mounted read-only: the launcher cannot write it and the pod stops"
            )


def _exec_and_object_budget(c: ClusterConfig, w: Workload, src: tuple[str | int, ...]) -> None:
    """The environment and the arguments fit exec(2) (the launcher execs the command with them) and the pod
    template fits the API server's request limit."""
    env = {**(c.defaults.nccl_env_rdma if w.transport == "rdma" else c.defaults.nccl_env_tcp), **w.env}
    args_json = json.dumps(w.args)
    hosts = w.nodes * (2 * len(w.name) + len(w.namespace) + 64) if w.deepspeed_hostfile else 0  # LAUNCHER_HOSTS
    pointer = 8
    env_bytes = sum(len(f"{k}={v}".encode("utf-8", "surrogatepass")) + 1 + pointer for k, v in env.items())
    env_bytes += sum(len(k) + 2 + pointer for k in w.secret_env)  # and the Secret's value, which the config does not know
    args_bytes = len(args_json) + len("LAUNCHER_ARGS=") + 1 + sum(len(a.encode("utf-8", "surrogatepass")) + 1 + pointer for a in w.args)
    blame = ("args",) if args_bytes > env_bytes else ("env",)
    total = env_bytes + args_bytes + hosts + EXEC_MARGIN
    if total > EXEC_TOTAL_MAX:
        raise FieldError(
            src + blame,
            f"the environment and arguments of {w.name!r} take about {total} bytes with the program's own (and {EXEC_MARGIN} "
            f"left for the image's): over the kernel's {EXEC_TOTAL_MAX} (ARG_MAX), so exec fails with 'Argument list too long'. "
            "Put long values in a script or a file on a volume and pass its path",
        )

    # The env entries as the pod template holds them, measured in one piece (a separator more per entry than each alone:
    # still an upper bound), so the check stays one encoding per workload however many variables it has.
    entries = [{"name": k, "value": kubelet_escape(v)} for k, v in [*env.items(), ("LAUNCHER_ARGS", args_json)]]
    size = POD_TEMPLATE_BASE + hosts + len(json.dumps(entries, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > OBJECT_MAX:
        raise FieldError(
            src + blame,
            f"the pod template of {w.name!r} takes about {size} bytes (its environment, each $ rendered as $$, and its arguments): "
            f"the API server refuses an object over {OBJECT_MAX} bytes (etcd's request limit). Put long values in a script "
            "or a file on a volume and pass its path",
        )


def _derived_names(c: ClusterConfig, paths: list[tuple[tuple[str | int, ...], tuple[str | int, ...]]]) -> None:
    """The names the program derives never meet: Services NAME-headless and NAME-dev, Routes NAME-PORT (and their
    hosts ROUTE-NAMESPACE.<domain>, which the router gives across namespaces), claims (shared ones, existing ones,
    and a StatefulSet's per-pod VOLUME-WORKLOAD-ORDINAL). Two entries that make one object would be one object with
    two owners (`pulumi up` stops on a duplicate URN; the router admits one Route; two StatefulSets share a claim)."""
    owners: dict[tuple[str, str, str], tuple[tuple[str | int, ...], str]] = {}

    def own(kind: str, namespace: str, name: str, where: tuple[str | int, ...], what: str) -> None:
        first = owners.setdefault((kind, namespace, name), (where, what))
        if first != (where, what):
            place = f" in namespace {namespace!r}" if namespace else ""
            raise FieldError(
                where,
                f"{what} makes {kind} {name!r}{place}, and so does {first[1]} ({located(first[0], c)}): one object with two owners. "
                "Rename one of them",
            )

    for i, v in enumerate(c.volumes):
        if v.shared or v.existing:
            own("claim", v.namespace, v.name, ("volumes", i, "name"), f"volume {v.name!r}")
    fabric = c.fabric
    if fabric is not None and fabric.nad_mode == "operator":
        rdma = sorted({w.namespace for w in c.pod_specs() if w.transport == "rdma"})
        for i, a in enumerate(fabric.attachments):
            for ns in rdma:
                name = operator_network_name(ns, a.network)
                own(
                    "SriovNetwork",
                    fabric.operator_namespace,
                    name,
                    ("fabric", "attachments", i, "network"),
                    f"network {a.network!r} in {ns}",
                )
    for i, node_set in enumerate(c.node_sets):
        for j, policy in enumerate(node_set.node_policies):
            for node in node_set.nodes:
                name = node_policy_name(node_set.name, policy.resource, node)
                where: FieldPath = ("node_sets", i, "node_policies", j)
                own("SriovNetworkNodePolicy", fabric.operator_namespace if fabric else "", name, where, f"the policy of {node}")
    for (src, path), w in zip(paths, c.all_workloads(), strict=True):
        label = f"workload {w.name!r}"
        own("Service", w.namespace, f"{w.name}-headless", path + ("name",), label)
        routed = [(k, p) for k, p in enumerate(w.ports) if p.route]
        if routed:
            own("Service", w.namespace, f"{w.name}-dev", path + ("name",), label)
        for k, port in routed:
            where = src + ("ports", k, "name") if path == src else path + ("name",)
            what = f"port {port.name!r} of {label}"
            own("Route", w.namespace, f"{w.name}-{port.name}", where, what)
            own("Route host", "", f"{w.name}-{port.name}-{w.namespace}", where, f"{what} (namespace {w.namespace})")
        if w.kind != "statefulset":
            continue
        for k, m in enumerate(w.mounts):
            v = c.volume(w.namespace, m.volume)
            if v.shared or v.existing:
                continue
            where = src + ("mounts", k, "volume") if path == src else path + ("name",)
            for r in range(w.nodes):
                own("claim", w.namespace, f"{v.name}-{w.name}-{r}", where, f"the per-pod claim of {label} on volume {v.name!r}")
    for i, chk in enumerate(c.bandwidth_checks):
        own("Service", chk.namespace, f"{chk.name}-headless", ("bandwidth_checks", i, "name"), f"bandwidth check {chk.name!r}")
    patched: dict[tuple[str, str], int] = {}
    for i, f in enumerate(c.pvc_fixes):
        where = ("pvc_fixes", i, "pvc")
        if (f.namespace, f.pvc) in patched:
            first = patched[(f.namespace, f.pvc)]
            raise FieldError(where, f"claim {f.namespace}/{f.pvc} is patched twice (also pvc_fixes[{first}]): keep one of the two")
        patched[(f.namespace, f.pvc)] = i
        owner = owners.get(("claim", f.namespace, f.pvc))
        volume = next((v for v in c.volumes if v.namespace == f.namespace and v.name == f.pvc), None)
        if owner is not None and not (volume is not None and volume.existing and owner[1] == f"volume {volume.name!r}"):
            raise FieldError(
                where,
                f"claim {f.namespace}/{f.pvc} is created by this stack ({owner[1]}, {located(owner[0], c)}): a pvc_fixes patch is for a "
                "claim that exists without a storage class. Set the volume's storage_class instead, and drop the patch",
            )


def _queueing(k: _Checks) -> None:
    """A queued cluster's Kueue objects are ones Kueue accepts and charges right: each node set's ResourceFlavor tells
    its nodes apart (Kueue picks a flavor by its node labels, then adds them to the pods' node selector), every quota
    has a value for every resource the pods request (Kueue leaves a workload that requests one it does not cover waiting
    for ever), and each workload's priority is a class the stack declares. Without queueing, no workload names one."""
    c = k.c
    q = c.queueing
    for i, w in enumerate(c.workloads):
        with k.problems.collect():
            if w.priority is None:
                continue
            if q is None:
                raise FieldError(
                    ("workloads", i, "priority"),
                    f"workload {w.name!r} names priority {w.priority!r}, but the cluster has no queueing: a priority is Kueue's "
                    "(a WorkloadPriorityClass). Remove it, or turn queueing on",
                )
            if w.priority not in q.priority_classes:
                known = ", ".join(sorted(q.priority_classes)) or "none"
                raise FieldError(
                    ("workloads", i, "priority"),
                    f"priority {w.priority!r} is not one of queueing.priority_classes ({known}): Kueue would leave the workload "
                    "unadmitted. Add it there, or name one of them",
                )
    if q is None:
        return
    for name in q.quota:
        with k.problems.collect():
            if name not in k.node_sets:
                raise FieldError(("queueing", "quota", name), f"{name!r} is not a node set: the quota is per node set (node_sets[].name)")
    seen: dict[tuple[tuple[str, str], ...], str] = {}
    for i, ns in enumerate(c.node_sets):
        with k.problems.collect():
            labels = c.flavor_labels(ns)
            for key, value in ns.labels.items():
                if c.gpu_node_selector.get(key, value) != value:
                    raise FieldError(
                        ("node_sets", i, "labels", key),
                        f"{key}={value} contradicts gpu_node_selector {key}={c.gpu_node_selector[key]}: no node would match both",
                    )
            if len(labels) > KUEUE_MAX_LABELS:
                raise FieldError(
                    ("node_sets", i, "labels"),
                    f"the ResourceFlavor of {ns.name!r} would name {len(labels)} node labels (gpu_node_selector and the set's labels): "
                    f"Kueue takes at most {KUEUE_MAX_LABELS}. Name fewer",
                )
            if q.topology_aware and not labels:
                raise FieldError(
                    ("node_sets", i, "labels"),
                    f"with queueing.topology_aware the ResourceFlavor of {ns.name!r} names a Topology, and Kueue's CRD then needs at "
                    "least one node label on it (its nodes are the ones Topology Aware Scheduling counts): give the set labels its "
                    "nodes carry (`oc get nodes --show-labels`), or state gpu_node_selector",
                )
            if len(c.node_sets) > 1:
                told = tuple(sorted(labels.items()))
                if not ns.labels or told in seen:
                    other = f" (the same as node set {seen[told]!r})" if told in seen else ""
                    raise FieldError(
                        ("node_sets", i, "labels"),
                        f"on a queued cluster each node set's ResourceFlavor must tell its nodes apart by label{other}: Kueue "
                        f"charges a workload to the first flavor whose labels its pods match, and then adds them to the pods' node "
                        f"selector, so a run on {ns.name!r} could be charged to (and pinned to) another set. Give node set "
                        f"{ns.name!r} labels its nodes carry and no other set's do",
                    )
                seen[told] = ns.name
        # Every resource the set lacks a quota for in one error: one run of `check` says all the user must add.
        missing = [
            (resource, field)
            for resource, field in (("cpu", "allocatable_cpu"), ("memory", "allocatable_memory"))
            if getattr(ns, field) is None and resource not in q.quota.get(ns.name, {})
        ]
        with k.problems.collect():
            if missing:
                resources = " and ".join(r for r, _ in missing)
                fields = " and ".join(f for _, f in missing)
                stated = " and ".join(f"queueing.quota[{ns.name}][{r}]" for r, _ in missing)
                raise FieldError(
                    ("queueing", "quota", ns.name) if ns.name in q.quota else ("queueing", "quota"),
                    f"node set {ns.name!r} states no {fields}, so the ClusterQueue has no {resources} quota for it: Kueue admits "
                    f"a workload only against a quota for every resource its pods request ({resources} too). State {fields} on "
                    f"node_sets[{ns.name}] (the nodes' Allocatable), or {stated} (what the stack may use of the set)",
                )
