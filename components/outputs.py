"""The typed stack outputs (`pulumi stack output --json`): one source of the JSON Schema (`python -m stacks
outputs-schema`, schemas/outputs.v2.json) and of the values (`StackOutputs.of`), validated as they are made.
Removing, renaming or changing the meaning of a field is a new version (outputs.v3.json); adding one is not."""

import json
import sys
from typing import Annotated, Any, Literal, Self, cast

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.json_schema import GenerateJsonSchema

from components.bandwidth import check_workload, job_name
from components.kube import logical_name
from components.networks import copy_namespaces, operator_namespaces
from components.storage import storage_objects
from components.training import Names, nccl_env, per_pod_claims
from config.kube import operator_network_name
from config.schema import described, field_docs
from config.stack import ClusterConfig
from config.values import MemlockStrategy, State, Transport, WorkloadKind
from config.workloads import BandwidthCheck, Workload

SCHEMA_VERSION: Literal["2"] = "2"
SCHEMA_ID = f"urn:gpu-training:schema:outputs:v{SCHEMA_VERSION}"
SCHEMA_FILE = f"schemas/outputs.v{SCHEMA_VERSION}.json"

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
Name = Annotated[str, StringConstraints(pattern=f"^{_LABEL}$")]
NamespacedName = Annotated[str, StringConstraints(pattern=f"^{_LABEL}/{_LABEL}$")]
Tier = Literal["all", "platform", "project"]


def _keys(pattern: str) -> dict[str, Any]:
    # pydantic's patternProperties would let a key that does not match through unchecked; propertyNames rejects it.
    return {"propertyNames": {"pattern": pattern}}


class _Outputs(BaseModel):
    # The docstrings are read only for the schema (config/schema.py): use_attribute_docstrings parses on every import.
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkloadOutputs(_Outputs):
    """One training workload: where its pods are and how they rendezvous."""

    namespace: Name
    """Namespace of the workload's objects and pods."""
    kind: WorkloadKind
    """The Kubernetes object that runs the pods: statefulset, or job (an Indexed Job)."""
    object: Name
    """Name of that StatefulSet or Job (a Job's carries its run number: NAME-rN)."""
    state: State
    """running, or stopped (a StatefulSet at 0 replicas; a stopped Job is not on the cluster at all)."""
    mode: Transport
    """Transport NCCL uses between nodes: rdma (InfiniBand or RoCE v2) or tcp."""
    replicas: int = Field(ge=1)
    """Pods when running, one per node (NNODES of torchrun)."""
    gpus_per_node: int = Field(ge=1)
    """GPUs each pod requests; torchrun starts this many processes per pod (NPROC_PER_NODE)."""
    world_size: int = Field(ge=1)
    """Training processes in total: replicas x gpus_per_node."""
    node_set: Name
    """The node set (of the stack's node_sets) the pods run on."""
    headless_service: str
    """DNS name of the headless Service the pods resolve each other by."""
    master_addr: str
    """MASTER_ADDR: DNS name of rank 0's pod (127.0.0.1 for a single pod)."""
    master_port: int = Field(ge=1, le=65535)
    """MASTER_PORT: torchrun's rendezvous port on rank 0."""
    memlock_strategy: MemlockStrategy
    """How the pods are allowed to pin memory for RDMA (see KNOWLEDGE.md): node-limit, root-ipc-lock,
    root-sys-resource, privileged, or none."""
    scc: str
    """The SecurityContextConstraints the pods pin (openshift.io/required-scc)."""
    nccl_env: dict[str, str] = Field(json_schema_extra=_keys(r"^NCCL_[A-Z0-9_]+$"))
    """The NCCL_* variables the program sets on the pods. The in-pod launcher adds what it detects
    (NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME) where these do not pin a value, and overrides
    NCCL settings the image bakes in when they are wrong for the pod."""
    pods: list[str]
    """Pod names (hostnames for a Job) in rank order."""
    per_pod_claims: list[NamespacedName]
    """The claims the StatefulSet makes for its pods, as NAMESPACE/NAME (they outlive it)."""
    routes: dict[str, Name] = Field(json_schema_extra=_keys(f"^{_LABEL}$"))
    """Developer tools exposed through Routes: port name -> Route name (`oc get route NAME` shows the host)."""
    queue: Name | None = Field(default=None, exclude_if=lambda v: v is None)
    """On a queued cluster: the LocalQueue (in its namespace) Kueue admits it through. Absent without queueing."""
    priority: Name | None = Field(default=None, exclude_if=lambda v: v is None)
    """On a queued cluster: its WorkloadPriorityClass, where it names one. Absent otherwise."""

    @classmethod
    def of(cls, config: ClusterConfig, w: Workload) -> Self:
        names = Names(w)
        return cls(
            **{k: getattr(w, k) for k in ("namespace", "kind", "state", "gpus_per_node", "master_port")},
            object=names.object,
            mode=w.transport,
            replicas=w.nodes,
            world_size=w.nodes * w.gpus_per_node,
            node_set=config.node_set(w.node_set).name,
            headless_service=names.headless_dns,
            master_addr=names.master_addr,
            memlock_strategy=config.memlock_of(w),
            scc=config.scc_of(w),
            nccl_env=nccl_env(config, w),
            pods=[names.pod(r) for r in range(w.nodes)],
            per_pod_claims=per_pod_claims(config, w),
            routes={p.name: names.route(p.name) for p in w.ports if p.route},
            queue=config.queueing.local_queue if config.queueing else None,
            priority=w.priority if config.queueing else None,
        )


class BandwidthCheckOutputs(_Outputs):
    """One enabled all-reduce bandwidth check (an Indexed Job that gates the rollout of its transport's workloads)."""

    namespace: Name
    """Namespace the check's Job runs in."""
    job: Name
    """Name of the Job (NAME-DIGEST: a new Job when the fabric or the check changes); its pods are JOB-0, JOB-1, ..."""
    mode: Transport
    """Transport the check proves: rdma (fails if NCCL fell back to sockets) or tcp."""
    tool: Literal["auto", "torch", "nccl-tests"]
    """Benchmark: torch (torch.distributed all_reduce under torchrun), nccl-tests (all_reduce_perf on one node), or auto."""
    nodes: int = Field(ge=1)
    """Pods, one per node."""
    gpus_per_node: int = Field(ge=1)
    """GPUs each pod uses; one benchmark process per GPU."""
    memlock_strategy: MemlockStrategy
    """How the check's pods are allowed to pin memory (as a workload's memlock_strategy)."""
    scc: str
    """The SecurityContextConstraints the check's pods pin (openshift.io/required-scc)."""
    pods: list[str]
    """Pod names in rank order."""
    line_rate_gbps: float | None
    """Line rate in Gb/s the bus bandwidth is held against; null when none is known (the check only reports)."""
    min_fraction: float = Field(gt=0, le=1)
    """The check passes when the bus bandwidth reaches this fraction of the line rate."""
    min_busbw_gbytes_per_s: float | None
    """The least bus bandwidth that passes, in GB/s (nccl-tests' unit, 1e9 bytes/s); null when the check only reports."""
    deadline_minutes: int = Field(ge=1)
    """The Job's activeDeadlineSeconds, in minutes (Pending time counts)."""
    report: str
    """A shell command that reads the check's log and prints its verdict."""

    @classmethod
    def of(cls, config: ClusterConfig, check: BandwidthCheck) -> Self:
        from components.launcher.bandwidth import threshold_gbytes  # the in-pod module: loaded only when a check is on

        rate = config.bandwidth_line_rate_gbps(check)
        name = job_name(config, check)
        names = Names(check_workload(config, check), name)
        return cls(
            **{k: getattr(check, k) for k in ("namespace", "tool", "nodes", "gpus_per_node", "min_fraction", "deadline_minutes")},
            job=name,
            mode=check.transport,
            memlock_strategy=config.memlock_of(check),
            scc=config.scc_of(check),
            pods=[names.pod(r) for r in range(check.nodes)],
            line_rate_gbps=rate,
            min_busbw_gbytes_per_s=None if rate is None else round(threshold_gbytes(rate, check.min_fraction), 3),
            report=f"oc logs -n {check.namespace} job/{name} | python -m stacks bandwidth-report - "
            f"--stack {config.name} --check {check.name}",
        )


class NodeSetOutputs(_Outputs):
    """GPU nodes the stack counts on."""

    nodes: list[str]
    """Their names, when the stack names them (pods are pinned to them)."""
    size: int = Field(ge=1)
    """How many nodes."""
    gpus_per_node: int = Field(ge=1)
    """GPUs each offers."""


class StackOutputs(_Outputs):
    """The outputs of one cluster stack (`pulumi stack output --json`, or rendered/STACK/outputs.json)."""

    schema_version: Literal["2"]
    """Version of this schema; a consumer checks it before reading anything else."""
    cluster: Name
    """The cluster the stack deploys (its module clusters/CLUSTER.py)."""
    tier: Tier
    """Which part the Pulumi stack deploys: all, platform (cluster-admin objects) or project (the researchers')."""
    namespaces: list[Name]
    """User namespaces the stack deploys into."""
    scc: str | None = None
    """SecurityContextConstraints of the pods that need root capabilities or privileged containers. Absent when none does:
    Pulumi does not export a top-level null, so `pulumi stack output --json` has no such key."""
    scc_created: bool
    """True when this stack creates that SCC; false when it uses one that exists on the cluster."""
    unprivileged_scc: str
    """The SCC of every other pod (restricted-v2)."""
    service_accounts: list[NamespacedName]
    """Service accounts the stack created, as NAMESPACE/NAME."""
    network_attachments: list[NamespacedName]
    """NetworkAttachmentDefinitions the RDMA pods attach, as NAMESPACE/NAME (copies, references, or the SR-IOV operator's in
    nad_mode operator). Empty without RDMA."""
    pvcs: list[NamespacedName]
    """Shared PersistentVolumeClaims the stack created, as NAMESPACE/NAME (per-pod claims are under each workload)."""
    node_sets: dict[str, NodeSetOutputs] = Field(json_schema_extra=_keys(f"^{_LABEL}$"))
    """The GPU nodes the stack counts on, by node set name."""
    workloads: dict[str, WorkloadOutputs] = Field(json_schema_extra=_keys(f"^{_LABEL}$"))
    """Every workload (TCP variants included, stopped ones too), by name."""
    bandwidth_checks: dict[str, BandwidthCheckOutputs] = Field(default={}, json_schema_extra=_keys(f"^{_LABEL}$"))
    """Every enabled bandwidth check of the stack, by check name."""

    @classmethod
    def of(cls, config: ClusterConfig, tier: str = "all") -> Self:
        """The outputs of a run of `tier`, computed from the config alone (they do not wait on the cluster)."""
        fabric = config.fabric
        if fabric is None:
            nads: list[str] = []
        elif copies := copy_namespaces(config):
            nads = [f"{ns}/{a.network}" for a in fabric.attachments for ns in copies]
        elif served := operator_namespaces(config):
            nads = [f"{ns}/{operator_network_name(ns, a.network)}" for a in fabric.attachments for ns in served]
        else:
            nads = [f"{fabric.nad_source_namespace}/{a.network}" for a in fabric.attachments]
        return cls(
            schema_version=SCHEMA_VERSION,
            cluster=config.name,
            tier=cast(Tier, tier),
            namespaces=list(config.namespaces),
            scc=config.security.scc,
            scc_created=config.security.create,
            unprivileged_scc=config.security.unprivileged_scc,
            service_accounts=[f"{sa.namespace}/{sa.name}" for sa in config.security.service_accounts],
            network_attachments=sorted(nads),
            pvcs=sorted(logical_name(o) for _, o in storage_objects(config)),
            node_sets={s.name: NodeSetOutputs(nodes=list(s.nodes), size=s.size, gpus_per_node=s.gpus_per_node) for s in config.node_sets},
            workloads={w.name: WorkloadOutputs.of(config, w) for w in config.all_workloads()},
            bandwidth_checks={c.name: BandwidthCheckOutputs.of(config, c) for c in config.enabled_checks()},
        )


def stack_outputs(config: ClusterConfig, tier: str = "all") -> dict[str, Any]:
    """A top-level None (`scc`) stays in: the SDK drops such an export."""
    return StackOutputs.of(config, tier).model_dump(mode="json")


class NoFieldTitles(GenerateJsonSchema):
    """No titles derived from field names ("Gpus Per Node"): the descriptions say more."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def one_line(node: Any) -> Any:
    """Descriptions as one line in the published file."""
    if isinstance(node, dict):
        return {k: " ".join(v.split()) if k == "description" and isinstance(v, str) else one_line(v) for k, v in node.items()}
    return [one_line(v) for v in node] if isinstance(node, list) else node


def schema() -> dict[str, Any]:
    body = described(StackOutputs.model_json_schema(schema_generator=NoFieldTitles), "StackOutputs", field_docs((sys.modules[__name__],)))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **one_line(body)}


def schema_json() -> str:  # the exact text of SCHEMA_FILE
    return json.dumps(schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
