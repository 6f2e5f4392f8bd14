"""One stack's validated configuration (ClusterConfig), the facts derived from it once (pod requests, memlock, SCC,
queue quota), and its checks of shape and references across fields. Whether it would work on the cluster: policy/rules."""

import difflib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any, ClassVar, Self

from pydantic import Field, model_validator

from config import cluster, provenance, values
from config.errors import FieldError, FieldPath, Strict, located, named_path, raise_all
from config.kube import GPU, KUBELET_MAX_PODS, node_policy_name, operator_network_name
from config.openshift import PLATFORM_NAMESPACES, SccNeeds, platform_namespace
from config.values import MAX_CLUSTER_NODES, MAX_NAMED_NODES, MAX_POD_TEMPLATES, EnvName, K8sName, MemlockStrategy, Reason
from config.workloads import BandwidthCheck, Workload, check_name_lengths


class Defaults(Strict):
    """Cluster-wide defaults of workloads that do not set their own."""

    memlock_rdma: MemlockStrategy = "root-ipc-lock"
    """Memlock strategy of RDMA workloads that do not name one."""
    memlock_tcp: MemlockStrategy = "none"
    """Memlock strategy of TCP workloads that do not name one."""
    tcp_socket_ifname: str = Field(default="^lo,docker0", min_length=1, max_length=256)
    """NCCL_SOCKET_IFNAME for TCP workloads (the seeds' value)."""
    pin_bytes: int = Field(strict=True, default=256 * values.MIB, gt=8 * values.MIB, le=16 * values.GIB)
    """Size of the buffer the launcher pins to prove memory locking works (must exceed 8 MiB, and stay
    below every RDMA pod's memory limit with room for the process itself)."""
    nccl_env_rdma: dict[EnvName, str] = Field(default={}, max_length=values.MAX_ENV)
    """NCCL tuning of every RDMA pod (NCCL_IB_TIMEOUT, NCCL_MIN_NCHANNELS, ...); a workload's env wins."""
    nccl_env_tcp: dict[EnvName, str] = Field(default={}, max_length=values.MAX_ENV)
    """NCCL tuning of every TCP pod (NCCL_P2P_LEVEL, ...); a workload's env wins."""


class HandMade(Strict):
    """An object someone made by hand (`oc create`, `oc adm policy`) that the stack now declares: `python -m stacks
    import-plan` adopts it instead of letting `pulumi up` fail on AlreadyExists."""

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
    """The value it accepts, for a warning about one (an `image` warning's image, written whole): required there and
    matched exactly, so a changed value is warned about again. The `accepted-warnings` finding names the value."""
    reason: Reason
    """Why the stack accepts it."""


_TCP_VARIANT: dict[str, Any] = {"transport": "tcp", "memlock": None, "privileged_reason": None, "tcp_fallback": False, "tcp_variants": []}


class ClusterConfig(Strict):
    """One OpenShift cluster: one Pulumi stack, or two (its platform and project tiers: docs/deploy.md)."""

    WHOLE_CONFIG: ClassVar[bool] = True
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
    node_sets: list[cluster.NodeSet] = Field(min_length=1, max_length=values.MAX_NODE_SETS)
    """The GPU nodes the stack counts on: every running pod must fit on them at once. At most 4096 (MAX_CLUSTER_NODES)."""
    gpu_tolerations: list[cluster.Toleration] = Field(default=[], max_length=values.MAX_TOLERATIONS)
    """Taints of the GPU nodes that every GPU pod of this cluster tolerates."""
    gpu_node_selector: cluster.NodeLabels = Field(default={}, max_length=values.MAX_SELECTOR)
    """Node labels every GPU pod requires (e.g. nvidia.com/gpu.present: "true")."""
    fabric: cluster.RdmaFabric | None = None
    """None: no RDMA (TCP only)."""
    storage_classes: list[cluster.StorageClass] = Field(default=[], max_length=values.MAX_STORAGE_CLASSES)
    """Storage classes known to exist."""
    namespaces: list[K8sName] = Field(min_length=1, max_length=values.MAX_NAMESPACES)
    """User namespaces (OpenShift projects) the stack deploys into. They exist already: creating a
    project is the users' or admins' business, not this program's (preview reads each one)."""
    security: cluster.Security = cluster.Security()
    """The SCCs the training pods run under and who may use them."""
    defaults: Defaults = Defaults()
    """Defaults of workloads that do not set their own."""
    volumes: list[cluster.Volume] = Field(default=[], max_length=values.MAX_VOLUMES)
    """Data volumes (PVCs) the workloads mount."""
    pvc_fixes: list[cluster.PvcStorageClassFix] = Field(default=[], max_length=values.MAX_PVC_FIXES)
    """Storage classes to set on PVCs that exist already without one."""
    existing: cluster.ExistingObjects = cluster.ExistingObjects()
    """Objects workloads use that their owners made (preview checks they exist)."""
    scripts: list[cluster.ScriptConfigMap] = Field(default=[], max_length=values.MAX_SCRIPTS)
    """ConfigMaps of scripts the stack ships."""
    images: list[cluster.ImageBuild] = Field(default=[], max_length=values.MAX_IMAGES)
    """Images the stack builds on the cluster (ImageStream + BuildConfig)."""
    node_level: cluster.NodeLevel = cluster.NodeLevel()
    """MachineConfigs for the GPU pool (cluster-admin; off by default; each reboots the pool's nodes)."""
    queueing: cluster.Queueing | None = None
    """Gang admission through Kueue, for a shared cluster (docs/shared-clusters.md). None (the default): no queue, the
    workloads start when `pulumi up` declares them and the preflight counts them against the node sets."""
    workloads: list[Workload] = Field(default=[], max_length=values.MAX_WORKLOADS)
    """Training and development deployments: at most 200, and 256 pod templates with checks (MAX_POD_TEMPLATES)."""
    bandwidth_checks: list[BandwidthCheck] = Field(default=[], max_length=values.MAX_BANDWIDTH_CHECKS)
    """All-reduce benchmarks that gate the rollout of the workloads of their transport."""
    hand_made: list[HandMade] = Field(default=[], max_length=values.MAX_HAND_MADE)
    """Objects made by hand that the stack declares: candidates for `python -m stacks import-plan`."""
    accepted_warnings: list[AcceptedWarning] = Field(default=[], max_length=values.MAX_ACCEPTED_WARNINGS)
    """Preflight warnings this stack accepts, each with its reason."""
    notes: list[str] = Field(default=[], max_length=values.MAX_NOTES)
    """Contradictions between the sources and the choices the stack makes about them."""

    @model_validator(mode="after")
    def _references(self) -> Self:
        """Checks across the whole config, by concern: every entry is checked, and the errors of all come together."""
        _bounds(self)  # alone: past a bound, the checks below would be the slow part
        k = _Checks(self)
        _namespaces(k)
        _node_sets(k)
        _sriov_operator(k)
        _declared(k)
        for path, w in self.located_workloads():  # a TCP variant's fields are written in its source's entry (path[:2])
            with k.collect():
                _pod_refs(k, "workload", path[:2], path, w)
                _workload(k, path[:2], path, w)
        for i, chk in enumerate(self.bandwidth_checks):
            with k.collect():
                _pod_refs(k, "bandwidth check", ("bandwidth_checks", i), ("bandwidth_checks", i), chk)
        for i, h in enumerate(self.hand_made):
            with k.collect():
                if h.namespace and h.namespace not in k.namespaces:  # one of namespaces: that entry's error says it
                    k.untouchable(("hand_made", i, "namespace"), h.namespace)
        with k.collect():
            _derived_names(self)
        _queueing(k)
        raise_all(_one_per_line(self, k.found))
        return self

    def all_workloads(self) -> list[Workload]:
        """The workloads with their TCP variants expanded (a variant follows its source)."""
        return [w for _, w in self.located_workloads()]

    def located_workloads(self) -> list[tuple[FieldPath, Workload]]:
        """all_workloads() with the config path of each: `("workloads", i)`, a variant `("workloads", i, "tcp_variants", j)`."""
        out: list[tuple[FieldPath, Workload]] = []
        for i, w in enumerate(self.workloads):
            out.append((("workloads", i), w))
            # RDMA-only NCCL settings name devices and interfaces a TCP pod lacks.
            env = {k: val for k, val in w.env.items() if not k.startswith(values.RDMA_ONLY_NCCL)}
            for j, v in enumerate(w.tcp_variants):
                source = f"{w.source} (TCP variant of {w.name})".strip()
                update = {"name": v.name, "image": v.image or w.image, "state": v.state, "env": env, "source": source}
                out.append((("workloads", i, "tcp_variants", j), w.model_copy(update=update | _TCP_VARIANT)))
        return out

    def enabled_checks(self) -> list[BandwidthCheck]:
        return [c for c in self.bandwidth_checks if c.enabled]

    def pod_requests(self, w: Workload | BandwidthCheck) -> dict[str, str]:
        """What each pod requests: cpu, memory, its GPUs, and one VF of each SR-IOV attachment for an RDMA pod."""
        vfs = {a.resource: "1" for a in self.fabric.attachments} if w.uses_rdma and self.fabric is not None else {}
        return {"cpu": w.cpu, "memory": w.memory, GPU: str(w.gpus_per_node), **vfs}

    def pod_specs(self) -> list[Workload | BandwidthCheck]:
        """Everything that runs pods: workloads (any state: a stopped one starts without an admin) and enabled checks."""
        return [*self.all_workloads(), *self.enabled_checks()]

    def rdma_namespaces(self) -> list[str]:
        """The namespaces that run RDMA pods (pod_specs): where the fabric's networks must be attached from."""
        return sorted({w.namespace for w in self.pod_specs() if w.uses_rdma})

    def node_set(self, name: str | None) -> cluster.NodeSet:
        return next(s for s in self.node_sets if name in (None, s.name))  # None: the first

    def bandwidth_line_rate_gbps(self, check: BandwidthCheck) -> float | None:
        """The Gb/s a check's busbw is held against: link_gbps times the ports its GPUs drive (one GPU's share on one node)."""
        if check.line_rate_gbps is not None:
            return check.line_rate_gbps
        if not check.uses_rdma or self.fabric is None:
            return None
        ports = len(self.fabric.attachments) or len(self.fabric.devices)  # one per attachment, else every live device
        node = float(min(ports, check.gpus_per_node) * self.fabric.link_gbps)
        return node if check.nodes > 1 else node / check.gpus_per_node

    def memlock_of(self, w: Workload | BandwidthCheck) -> MemlockStrategy:
        return w.memlock or (self.defaults.memlock_rdma if w.uses_rdma else self.defaults.memlock_tcp)

    def scc_of(self, w: Workload | BandwidthCheck) -> str:
        """The SCC a pod runs under: `scc` when its strategy needs root or privilege, else the unprivileged one."""
        return (self.memlock_of(w) in values.STRATEGY_NEEDS_SCC and self.security.scc) or self.security.unprivileged_scc

    def scc_needs(self, scc: str) -> SccNeeds:
        """What the pods that run under `scc` (pod_specs: the ones it is granted for) need of it."""
        return SccNeeds.of(self.memlock_of(w) for w in self.pod_specs() if self.scc_of(w) == scc)

    @cached_property
    def _volumes(self) -> dict[tuple[str, str], cluster.Volume]:
        # Not a private attribute (those count in a model's equality); of duplicates (refused) the first.
        return {(v.namespace, v.name): v for v in reversed(self.volumes)}

    def volume(self, namespace: str, name: str) -> cluster.Volume:
        return self._volumes[(namespace, name)]

    def flavor_labels(self, node_set: cluster.NodeSet) -> dict[str, str]:
        """The node labels the ResourceFlavor of `node_set` names: the GPU node selector and the set's own labels."""
        return {**self.gpu_node_selector, **node_set.labels}

    def queue_quota(self) -> dict[str, dict[str, str]]:
        """node set -> resource -> nominal quota: queueing.quota's, else the set's total; the same resources in every set (Kueue)."""
        if (q := self.queueing) is None:
            return {}
        sriov = [a.resource for a in self.fabric.attachments] if self.fabric else []
        stated = sorted({r for per_set in q.quota.values() for r in per_set} - {"cpu", "memory", GPU, *sriov})
        out: dict[str, dict[str, str]] = {}
        for ns in self.node_sets:
            # A pod takes at least a GPU and a VF of each attachment: the GPUs bound the VFs a node can use.
            per_node = {"cpu": ns.allocatable_cpu, "memory": ns.allocatable_memory, "pods": str(KUBELET_MAX_PODS)}
            per_node |= {r: str(ns.gpus_per_node) for r in [GPU, *sriov]}
            total = {r: values.quantity_text(values.quantity_value(v or "0") * ns.size) for r, v in per_node.items()}  # 4 x 256Gi: 1Ti
            out[ns.name] = {r: q.quota.get(ns.name, {}).get(r) or total.get(r, "0") for r in ["cpu", "memory", GPU, *sriov, *stated]}
        return out

    def unstated_quota(self, node_set: cluster.NodeSet) -> list[str]:
        """cpu and memory where neither `node_set` (allocatable_*) nor queueing.quota states a quota for them."""
        own = self.queueing.quota.get(node_set.name, {}) if self.queueing else {}
        return [r for r in ("cpu", "memory") if getattr(node_set, f"allocatable_{r}") is None and r not in own]


def _bounds(c: ClusterConfig) -> None:
    """The stack-wide bounds, checked before anything that grows with them, at the entry that crosses the bound."""
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
    templates: list[FieldPath] = []
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


EXISTING = (("secrets", "Secret"), ("config_maps", "ConfigMap"), ("image_streams", "image stream"))
SHOWN = 5  # how many declared names a reference error lists (closest first)


def closest(name: str, known: Iterable[str]) -> str:
    """The names `known` as a reference error lists them: the SHOWN closest to `name` first, the rest counted."""
    names = sorted(set(known), key=lambda k: (-difflib.SequenceMatcher(None, name, k).ratio(), k))
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more if names else "none"


class _Checks:
    """What the checks across the config share: the errors so far, the names taken, what pods may reference (`declared`)."""

    def __init__(self, c: ClusterConfig) -> None:
        self.found: list[FieldError] = []
        self.c = c
        self.namespaces = set(c.namespaces)
        self.node_sets = {s.name for s in c.node_sets}
        self.seen: dict[tuple[str, str, str], FieldPath] = {}
        self.declared: dict[str, dict[tuple[str, str], FieldPath]] = {"volume": {}, "service account": {}, "ConfigMap": {}, "Secret": {}}

    @contextmanager
    def collect(self) -> Iterator[None]:
        """Each entry is checked whatever another's errors: its FieldError is kept, one per path."""
        try:
            yield
        except FieldError as err:
            self.add(err.path, err.message)
        except (KeyError, StopIteration, ValueError):
            if not self.found:
                raise  # not a consequence of an error already reported: a defect, shown as one

    def add(self, path: FieldPath, message: str) -> None:
        if all(e.path != path for e in self.found):  # a TCP variant failing as its source does: one cause, one error
            self.found.append(FieldError(path, message))

    def unique(self, kind: str, namespace: str, name: str, path: FieldPath) -> None:
        if (first := self.seen.setdefault((kind, namespace, name), path)) != path:
            self.add(
                path, f"duplicate {kind} name {name!r} in namespace {namespace!r} (also {named_path(first, self.c)}): names must be unique"
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
        if self.c.fabric is not None and namespace == self.c.fabric.nad_source_namespace:
            raise FieldError(
                path,
                f"{namespace!r} holds the SR-IOV operator's NADs (fabric.nad_source_namespace): a NAD copy there would adopt the "
                "operator's own NAD, and `pulumi destroy` would delete it. Use the users' own projects",
            )

    def in_namespaces(self, path: FieldPath, what: str, namespace: str) -> None:
        if namespace not in self.namespaces:
            self.untouchable(path, namespace)  # the entry's own error, not "add it to namespaces"
            raise FieldError(
                path, f"{what} is in namespace {namespace!r}, which is not in namespaces ({closest(namespace, self.c.namespaces)})"
            )

    def missing(self, kind: str, namespace: str, name: str) -> str:
        """Of a `kind` a pod names that its namespace lacks: where it is declared instead, and what its namespace holds."""
        declared = self.declared[kind]
        there = closest(name, (n for ns, n in declared if ns == namespace))
        if elsewhere := [f"{ns!r} ({named_path(path, self.c)})" for (ns, n), path in declared.items() if n == name][:SHOWN]:
            return (
                f": it is declared in namespace {' and '.join(elsewhere)}, and a pod uses only what its own namespace holds. "
                f"Declare it in {namespace!r} too, or name one declared there ({there})"
            )
        return f" ({kind}s declared there: {there})"


def _one_per_line(c: ClusterConfig, found: list[FieldError]) -> list[FieldError]:
    """One error per line to change: a field one line (a helper) writes for several entries, naming the entries it fills."""
    groups: dict[Any, list[FieldError]] = {}  # by line and field; an error of no known line is its own group
    for n, err in enumerate(found):
        line = provenance.origin(c, err.path)
        groups.setdefault(n if line is None else (line, tuple(p for p in err.path if isinstance(p, str))), []).append(err)
    out = []
    for err, *same in groups.values():
        entries = [located(e.path[:2], c) for e in same]
        more = f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else ""
        out.append(FieldError(err.path, f"{err.message} (the same line fills it for {', '.join(entries[:SHOWN])}{more})") if same else err)
    return out


def _namespaces(k: _Checks) -> None:
    """Each namespace listed once, and none of the platform's."""
    if len(k.namespaces) != len(k.c.namespaces):
        k.add(("namespaces",), "a namespace is listed twice (its objects would be declared twice)")
    for i, name in enumerate(k.c.namespaces):
        with k.collect():
            k.untouchable(("namespaces", i), name)


def _node_sets(k: _Checks) -> None:
    """Node sets the scheduler can tell apart: distinct names, no node in two, at most one set counted."""
    c = k.c
    all_nodes = [n for s in c.node_sets for n in s.nodes]
    if len(k.node_sets) != len(c.node_sets):  # one error at node_sets: the first of these
        k.add(("node_sets",), "two node sets share a name")
    elif len(set(all_nodes)) != len(all_nodes):
        k.add(("node_sets",), "a node is in two node sets")
    elif sum(1 for s in c.node_sets if not s.nodes) > 1:
        k.add(("node_sets",), "at most one node set of unnamed nodes (count): the scheduler cannot tell two apart")


def _sriov_operator(k: _Checks) -> None:
    """The operator's namespace is none of the stack's projects; node policies only for attachments on an SR-IOV fabric."""
    c, fabric = k.c, k.c.fabric
    operator = fabric is not None and (fabric.nad_mode == "operator" or any(s.node_policies for s in c.node_sets))
    if fabric is not None and operator and fabric.operator_namespace in k.namespaces:
        k.add(
            ("fabric", "operator_namespace"),
            f"{fabric.operator_namespace!r} is one of the stack's namespaces: the SR-IOV operator's namespace holds the "
            "cluster admin's networks and policies, not a project's objects. Name the operator's namespace "
            "(`oc get sriovnetworks -A`), or take it out of namespaces",
        )
    resources = {a.resource for a in fabric.attachments} if fabric else set()
    for i, node_set in enumerate(c.node_sets):
        for j, policy in enumerate(node_set.node_policies):
            if fabric is None or fabric.device_access != "sriov":
                message = "node policies make SR-IOV VFs: they need a fabric with device_access 'sriov' and its attachments"
                k.add(("node_sets", i, "node_policies"), message)
            elif policy.resource not in resources:
                message = f"{policy.resource} is no attachment's resource ({', '.join(sorted(resources))}): no pod would use these VFs"
                k.add(("node_sets", i, "node_policies", j, "resource"), message)


def _declared(k: _Checks) -> None:
    """The objects besides pods: each in one of the namespaces, each name once, none both made and existing."""
    c, existing = k.c, k.c.existing
    entries: list[tuple[FieldPath, str, str, list[Any]]] = [
        (("security", "service_accounts"), "service account", "service account", c.security.service_accounts),
        (("volumes",), "volume", "volume", c.volumes),
        (("scripts",), "ConfigMap", "ConfigMap", c.scripts),
        (("images",), "image", "image", c.images),
        *((("existing", f), what, f"existing {what}", getattr(existing, f)) for f, what in EXISTING),
    ]
    for field, what, kind, objects in entries:
        for i, o in enumerate(objects):
            if what in k.declared:
                k.declared[what].setdefault((o.namespace, o.name), (*field, i))
            with k.collect():
                k.in_namespaces((*field, i, "namespace"), f"{what} {o.name!r}", o.namespace)
                k.unique(kind, o.namespace, o.name, (*field, i, "name"))
    for i, s in enumerate(c.scripts):
        if s.name == "gpu-training-launcher":
            k.add(("scripts", i, "name"), "gpu-training-launcher is the program's own ConfigMap")
    classes = {s.name for s in c.storage_classes}
    patched: dict[tuple[str, str], int] = {}
    for i, f in enumerate(c.pvc_fixes):
        with k.collect():
            k.untouchable(("pvc_fixes", i, "namespace"), f.namespace)
        if unknown := [cls for cls in f.serves_storage_classes if cls not in classes]:
            k.add(("pvc_fixes", i, "serves_storage_classes"), f"storage class {unknown[0]!r} is not in storage_classes")
        if (first := patched.setdefault((f.namespace, f.pvc), i)) != i:
            message = f"claim {f.namespace}/{f.pvc} is patched twice (also pvc_fixes[{first}]): keep one of the two"
            k.add(("pvc_fixes", i, "pvc"), message)
    for listed, what, by in (("config_maps", "ConfigMap", "scripts"), ("image_streams", "ImageStream", "images")):
        made = {(m.namespace, m.name) for m in getattr(c, by)}
        for i, o in enumerate(getattr(existing, listed)):
            if (o.namespace, o.name) in made or (listed == "config_maps" and o.name == "gpu-training-launcher"):
                owner = f"{by}[{o.name}]" if o.name != "gpu-training-launcher" else "the program (the launcher's ConfigMap)"
                k.add(
                    ("existing", listed, i, "name"),
                    f"{what} {o.namespace}/{o.name} is created by this stack ({owner}) and listed as existing (made by its owner): "
                    "both cannot be true. Drop it from existing if the stack makes it, or rename the stack's own",
                )


def _pod_refs(k: _Checks, what: str, src: FieldPath, path: FieldPath, w: Workload | BandwidthCheck) -> None:
    """What a workload, TCP variant or check names exists: namespace, service account, node set, fabric, SCC."""
    c = k.c
    # Outside a collect: an entry in a namespace the stack lacks is not checked further (one cause, one error).
    k.in_namespaces(src + ("namespace",), f"{what} {w.name!r}", w.namespace)
    # A check's Job and Service are named as a workload's would be: one name space for both.
    k.unique("workload", w.namespace, w.name, path + ("name",))
    if (w.namespace, w.service_account) not in k.declared["service account"]:
        k.add(
            src + ("service_account",),
            f"{what} {w.name!r} uses service account {w.service_account!r}, which security.service_accounts does not list in "
            f"namespace {w.namespace!r}" + k.missing("service account", w.namespace, w.service_account),
        )
    if w.node_set is not None and w.node_set not in k.node_sets:
        k.add(src + ("node_set",), f"node set {w.node_set!r} is not in node_sets ({closest(w.node_set, k.node_sets)})")
    if w.uses_rdma and c.fabric is None:  # the cause of what its memlock strategy and SCC would lack: not checked then
        k.add(
            src + ("transport",),
            f"{what} {w.name!r} uses transport rdma, but the cluster has no fabric (fabric is None: TCP only), so its pods "
            "would get no RDMA device. Use transport tcp, or describe the cluster's RDMA fabric in fabric (docs/networks.md)",
        )
    elif (strategy := c.memlock_of(w)) in values.STRATEGY_NEEDS_SCC and c.security.scc is None:
        k.add(
            src + ("memlock",),
            f"memlock {strategy!r} needs an SCC that admits root with capabilities (or privileged containers): "
            "set security.scc (create: true makes a least-privilege one), or use memlock node-limit",
        )


def _workload(k: _Checks, src: FieldPath, path: FieldPath, w: Workload) -> None:
    """What a workload (or TCP variant) mounts, reads and runs beside exists in its namespace and suits its kind."""
    if path != src:  # a variant carries its own name: its derived names must fit too
        check_name_lengths(w.name, w.kind, w.nodes, w.run_number, path + ("name",))
    for i, m in enumerate(w.mounts):
        if (mounted := k.c._volumes.get((w.namespace, m.volume))) is None:
            raise FieldError(
                src + ("mounts", i, "volume"),
                f"workload {w.name!r} mounts volume {m.volume!r}, which is not a volume in {w.namespace!r}"
                + k.missing("volume", w.namespace, m.volume),
            )
        if not mounted.shared and w.kind == "job" and not mounted.existing:
            raise FieldError(
                src + ("mounts", i, "volume"),
                f"volume {mounted.name!r} is per-pod (shared: false), which only a StatefulSet can make (volumeClaimTemplates): "
                "a Job would mount a claim nobody creates. Use a shared volume",
            )
    paths = [m.mount_path or k.c.volume(w.namespace, m.volume).mount_path for m in w.mounts] + [s.mount_path for s in w.scripts]
    if len(set(paths)) != len(paths):
        raise FieldError(src + ("mounts",), f"two mounts of workload {w.name!r} share a mount path")
    for i, mount in enumerate(w.scripts):
        if (w.namespace, mount.config_map) not in k.declared["ConfigMap"]:
            raise FieldError(
                src + ("scripts", i, "config_map"),
                f"ConfigMap {mount.config_map!r} is neither in scripts nor in existing.config_maps in namespace {w.namespace!r}"
                + k.missing("ConfigMap", w.namespace, mount.config_map),
            )
    for key, ref in w.secret_env.items():
        if (w.namespace, ref.secret) not in k.declared["Secret"]:
            raise FieldError(
                src + ("secret_env", key),
                f"Secret {ref.secret!r} is not declared in existing.secrets for namespace {w.namespace!r}, so preview cannot check "
                "it exists and the pod would fail with CreateContainerConfigError" + k.missing("Secret", w.namespace, ref.secret),
            )
    for j, variant in enumerate(w.tcp_variants):
        if variant.state == "running" and w.state == "running" and not variant.alongside:
            raise FieldError(
                src + ("tcp_variants", j, "state"),
                f"TCP variant {variant.name!r} and its source {w.name!r} would both run: they are alternatives. Stop one, or set "
                "alongside: true to run both at once",
            )


def _derived_names(c: ClusterConfig) -> None:
    """No two entries derive one object (a duplicate URN); names that meet only on the cluster: rule derived-names."""
    owners: dict[tuple[str, str, str], tuple[FieldPath, str]] = {}

    def own(kind: str, namespace: str, name: str, where: FieldPath, what: str) -> None:
        if (first := owners.setdefault((kind, namespace, name), (where, what))) != (where, what):
            raise FieldError(
                where,
                f"{what} makes {kind} {name!r}{f' in namespace {namespace!r}' if namespace else ''}, and so does {first[1]} "
                f"({located(first[0], c)}): one object with two owners. Rename one of them",
            )

    fabric = c.fabric
    operator = fabric.operator_namespace if fabric else ""
    for i, a in enumerate(fabric.attachments if fabric is not None and fabric.nad_mode == "operator" else []):
        for ns in c.rdma_namespaces():
            where: FieldPath = ("fabric", "attachments", i, "network")
            own("SriovNetwork", operator, operator_network_name(ns, a.network), where, f"network {a.network!r} in {ns}")
    for i, node_set in enumerate(c.node_sets):
        for j, policy in enumerate(node_set.node_policies):
            for node in node_set.nodes:
                name = node_policy_name(node_set.name, policy.resource, node)
                own("SriovNetworkNodePolicy", operator, name, ("node_sets", i, "node_policies", j), f"the policy of {node}")
    for path, w in c.located_workloads():
        label = f"workload {w.name!r}"
        own("Service", w.namespace, f"{w.name}-headless", (*path, "name"), label)
        if routed := [(k, p) for k, p in enumerate(w.ports) if p.route]:
            own("Service", w.namespace, f"{w.name}-dev", (*path, "name"), label)
        for k, port in routed:
            where = (*path, "ports", k, "name") if len(path) == 2 else (*path, "name")  # a variant's ports are its source's
            own("Route", w.namespace, f"{w.name}-{port.name}", where, f"port {port.name!r} of {label}")
    for i, chk in enumerate(c.bandwidth_checks):
        own("Service", chk.namespace, f"{chk.name}-headless", ("bandwidth_checks", i, "name"), f"bandwidth check {chk.name!r}")


def _queueing(k: _Checks) -> None:
    """What queueing names exists (priorities, node sets, requested resources); whether Kueue takes it: rule queue-flavors."""
    c, q = k.c, k.c.queueing
    for i, w in enumerate(c.workloads):
        if w.priority is None:
            continue
        if q is None:
            k.add(
                ("workloads", i, "priority"),
                f"workload {w.name!r} names priority {w.priority!r}, but the cluster has no queueing: a priority is Kueue's "
                "(a WorkloadPriorityClass). Remove it, or turn queueing on",
            )
        elif w.priority not in q.priority_classes:
            known = ", ".join(sorted(q.priority_classes)) or "none"
            k.add(
                ("workloads", i, "priority"),
                f"priority {w.priority!r} is not one of queueing.priority_classes ({known}): Kueue would leave the workload "
                "unadmitted. Add it there, or name one of them",
            )
    requested = ["cpu", "memory", GPU, "pods", *dict.fromkeys(a.resource for a in (c.fabric.attachments if c.fabric else []))]
    for name, per_set in q.quota.items() if q else ():
        if name not in k.node_sets:
            k.add(
                ("queueing", "quota", name),
                f"{name!r} is not a node set: the quota is per node set (node_sets[].name: {', '.join(s.name for s in c.node_sets)})",
            )
        for resource in per_set:
            if resource not in requested:
                k.add(
                    ("queueing", "quota", name, resource),
                    f"{resource!r} is no resource the stack's pods request: its quota would limit nothing, and the resource "
                    f"meant would get the set's total. A quota names one of {', '.join(requested)} (pods: Kueue counts them)",
                )
