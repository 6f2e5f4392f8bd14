"""Why a run is not running, in the stack file's words (`python -m stacks status`).

`pulumi up` waits for a StatefulSet's pods to exist and for a Job to start, never for free GPUs, an image pull or
Ready (docs/lifecycle.md). What happens after is told by the cluster in its own words: a FailedScheduling message
counting nodes per reason, a FailedCreate event quoting the SCC admission or a quota, a container waiting in
ImagePullBackOff. This reads those objects (read only) and says, per workload of the stack, whether it runs, how many
of its pods are ready, and for what does not run the reason translated into the config entry that causes it:
`workloads[alice] (clusters/x.py:12): 1 of 2 pods pending: no node of nairr has 4 free GPUs (nairr: 3 nodes, 12 GPUs,
12 in use by h-kim, yunshi)`. Each enabled bandwidth check's last verdict follows.

Everything but `read_cluster` is a pure function of the config and the objects (plain dicts, as `oc get -o json`
prints them), so it is tested offline on synthetic objects. The scheduler's messages are the ones of
k8s.io/kubernetes pkg/scheduler (v1.34: `0/N nodes are available: 3 Insufficient nvidia.com/gpu, 1 node(s) had
untolerated taint(s), 2 node(s) didn't match Pod's node affinity/selector. preemption: ...`); earlier versions name
the taint (`node(s) had untolerated taint {KEY: VALUE}`), and both forms are read.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

import stacks
from components.bandwidth import job_name
from components.kube import MANAGED_BY
from components.outputs import _NoFieldTitles, _one_line
from components.queueing import flavor_name
from components.training import resources
from config import provenance
from config.errors import located
from config.stack import ClusterConfig
from config.text import escaped
from config.values import quantity_value
from config.workloads import BandwidthCheck, Workload
from tools import kubectl

SCHEMA_VERSION = "1"
SCHEMA_ID = f"urn:gpu-training:schema:status:v{SCHEMA_VERSION}"
SCHEMA_FILE = f"schemas/status.v{SCHEMA_VERSION}.json"

GPU = "nvidia.com/gpu"
KUEUE_GROUP = "kueue.x-k8s.io/"  # a Workload of Kueue's (apiVersion kueue.x-k8s.io/v1beta2, or v1beta1)
INSTANCE = "app.kubernetes.io/instance"  # the label every pod of a workload carries (components/training.py selector)
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"  # on a Kueue Workload: the uid of the StatefulSet or Job it stands for
KUEUE_JOB_NAME = "kueue.x-k8s.io/job-owner-name"  # and, as an annotation, its name
# Kueue v0.17.0 can leave a stopped StatefulSet's Workload admitted with no owner: at 0 replicas it takes the StatefulSet's
# owner reference off, and when the garbage collector has taken the deleted pods' references off first, nothing is left
# to collect the Workload, which holds its quota until someone deletes it (fixed after v0.17.0; live/kueue.py).
KUEUE_12232 = "a Kueue bug, kubernetes-sigs/kueue#12232, fixed after v0.17.0"
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")  # the Job controller's label on its pods (new, old)
# The container states of a pod that cannot pull its image (kubelet images/types.go).
IMAGE_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable")
# Scheduler reasons that say a node is not one the pod may use at all (a pin, a selector, a taint, a cordon); the
# others (resources, one pod per node) are about nodes it may use. Each node reports the first filter it fails.
PLACEMENT = ("untolerated taint", "didn't match Pod's node affinity/selector", "were unschedulable", "didn't match the requested node name")
MESSAGE_CHARS = 300  # a message quoted from the cluster is cut here: one line stays readable
MATCHED_CHARS = 4096
"""A message read from the cluster (the scheduler's, Kueue's, an admission's) is read within its first 4,096 characters:
the ones this reads are one sentence per cause (the scheduler counts nodes per reason; Kueue writes one clause per
flavor), and a container or a webhook may write megabytes. Every pattern below runs on that much at most, and each
is linear in it (no `.*` or lazy group that a repeated prefix makes scan the rest again)."""

WorkloadState = Literal["running", "pending", "stopped", "failed", "succeeded", "missing"]
CheckState = Literal["passed", "failed", "running", "pending", "missing"]


class _Status(BaseModel):
    # Unknown fields are errors (additionalProperties: false); docstrings are the descriptions (as the outputs schema).
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class WorkloadStatus(_Status):
    """One workload of the stack (TCP variants included), as the cluster runs it."""

    config: str
    """The config entry, as the stack file names it (`workloads[alice]`, `workloads[dev].tcp_variants[dev-tcp]`)."""
    location: str
    """Where the stack file writes it (`clusters/barcelona.py:120`); empty when not known."""
    namespace: str
    """Namespace of its pods."""
    kind: Literal["statefulset", "job"]
    """The object that runs its pods."""
    object: str
    """Name of that StatefulSet or Job (a Job's carries its run number)."""
    declared: Literal["running", "stopped"]
    """The state the stack declares."""
    state: WorkloadState
    """running (every pod ready), pending (pods wait: for a node, an image, their creation), failed (a pod crashes, a
    Job failed), succeeded (a Job completed), stopped (declared stopped), missing (declared running, its object is not on
    the cluster)."""
    ready: int = Field(ge=0)
    """Pods ready (a Job's: ready or succeeded)."""
    wanted: int = Field(ge=0)
    """Pods the stack declares running (0 when stopped)."""
    reasons: list[str]
    """Why it does not run, in the stack file's words, one entry per cause (with how many pods it holds)."""
    ok: bool
    """True when it is as declared: running with every pod ready, a Job running or succeeded, or stopped (and holding no
    quota of the queue)."""
    queue: QueueStatus | None = Field(default=None, exclude_if=lambda v: v is None)
    """On a queued cluster only: where it is in the queue (absent otherwise)."""


class QueueStatus(_Status):
    """A queued workload's place in Kueue (the stack's `queueing`), read from its Kueue Workload (kueue.x-k8s.io)."""

    local_queue: str
    """The LocalQueue it is submitted to (its kueue.x-k8s.io/queue-name)."""
    cluster_queue: str
    """The ClusterQueue that admits it."""
    admission: Literal["admitted", "waiting", "unknown"]
    """admitted (Kueue reserved its quota and let its pods schedule), waiting (in the queue), unknown (Kueue made no
    Workload for it: Kueue is not installed, or does not manage its namespace)."""
    position: int | None
    """Its place among the ClusterQueue's waiting workloads, 1 first (Kueue's visibility API, positionInClusterQueue + 1);
    null when not waiting, or when that API could not be read."""
    workload: str | None
    """Name of its Kueue Workload (`oc get workloads.kueue.x-k8s.io NAME -o yaml`); null when there is none."""


class CheckStatus(_Status):
    """One enabled bandwidth check: its Job's last verdict."""

    config: str
    """The config entry (`bandwidth_checks[fabric]`)."""
    location: str
    """Where the stack file writes it; empty when not known."""
    namespace: str
    """Namespace of its Job."""
    job: str
    """Name of its Job (NAME-DIGEST)."""
    state: CheckState
    """passed (the Job is Complete), failed (Failed), running (its pods run), pending (they wait), missing (no Job)."""
    verdict: str | None
    """The verdict line of the check's log (`bandwidth check: PASS (mode rdma)`), with its measurement and failures;
    null when the log was not read."""
    reasons: list[str]
    """Why it failed or does not run, in the stack file's words."""
    ok: bool
    """True when it passed or runs."""


class StackStatus(_Status):
    """What `python -m stacks status STACK --json` prints."""

    schema_version: Literal["1"]
    """Version of this schema; a consumer checks it before reading anything else."""
    stack: str
    """The Pulumi stack (its file names the cluster and the kube context)."""
    cluster: str
    """The cluster's config (clusters/CLUSTER.py)."""
    context: str | None
    """The kubeconfig context read; null: the current one (or a saved file was read)."""
    workloads: list[WorkloadStatus]
    """Every workload of the stack, in the order the stack file lists them."""
    checks: list[CheckStatus]
    """Every enabled bandwidth check."""
    unreadable: list[str]
    """What could not be read (nodes forbidden, a log), so the reasons say less."""
    ok: bool
    """True when everything the stack declares running runs: the exit status 0."""


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of StackStatus, with its id and version."""
    body = StackStatus.model_json_schema(schema_generator=_NoFieldTitles)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **_one_line(body)}


def schema_json() -> str:
    """The schema as the exact text of schemas/status.v1.json."""
    return json.dumps(schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- the objects read -----------------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = _meta(obj).get("labels")
    return labels if isinstance(labels, dict) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = _meta(obj).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def _bounded(message: Any) -> str:
    """A message from the cluster, as much of it as is ever matched or shown (MATCHED_CHARS)."""
    text = message if isinstance(message, str) else str(message or "")
    return text[:MATCHED_CHARS]


def _cut(text: Any) -> str:
    line = " ".join(_bounded(text).split())
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 3] + "..."


def _amount(value: Any) -> float:
    try:
        return float(quantity_value(str(value)))
    except (ValueError, TypeError, ArithmeticError):
        return 0.0


def _count(n: float) -> str:
    return str(int(n)) if n == int(n) else f"{n:g}"


@dataclass
class Cluster:
    """The objects read, indexed once (by kind and name, pods by the object that controls them, events by the object
    they are about), so the work grows with the objects, not with objects x workloads.

    Objects are told apart as their controllers tell them, never by a name or a label alone: a workload's pods are those
    its StatefulSet or Job controls (the controller ownerReference with the object's uid; a Job's controller-uid
    label), since a Helm release sets `app.kubernetes.io/instance` to its own name; its Kueue Workload is the one the
    current object owns (an old one of a replaced StatefulSet has another owner uid); an event is about the object
    with its uid (a pod of a StatefulSet keeps its name when it is replaced, and the old pod's events stay an hour)."""

    objects: list[dict[str, Any]]
    logs: Mapping[str, str] = field(default_factory=dict)
    """A check's log by `NAMESPACE/JOB`."""
    by_kind: dict[str, list[dict[str, Any]]] = field(init=False, default_factory=dict)
    _named: dict[tuple[str, str, str], dict[str, Any]] = field(init=False, default_factory=dict)
    _owned: dict[tuple[str, str, str], list[dict[str, Any]]] = field(init=False, default_factory=dict)
    _job_uid: dict[str, list[dict[str, Any]]] = field(init=False, default_factory=dict)
    _events: dict[tuple[str, str, str], list[dict[str, Any]]] = field(init=False, default_factory=dict)
    use: dict[tuple[str, str], tuple[dict[str, float], list[str]]] = field(init=False, default_factory=dict)
    """What the pods on a node set request, by (node set, resource): see `_use`."""
    views: dict[str, NodeSetView] = field(init=False, default_factory=dict)
    """Each node set as the cluster shows it: see `node_set_view`."""
    _kueue: dict[tuple[str, str, str], list[dict[str, Any]]] = field(init=False, default_factory=dict)
    positions: dict[tuple[str, str], int] = field(init=False, default_factory=dict)
    """A waiting Kueue Workload's place in its ClusterQueue (1 first), by (namespace, name)."""
    _ownerless: dict[str, list[dict[str, Any]]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        for o in self.objects:
            kind, meta = str(o.get("kind")), _meta(o)
            namespace = str(meta.get("namespace") or "")
            self.by_kind.setdefault(kind, []).append(o)
            self._named[(kind, namespace, str(meta.get("name")))] = o
            if kind == "Pod":
                owner = _controller(o)
                if owner is not None:
                    self._owned.setdefault((str(owner.get("kind")), namespace, str(owner.get("name"))), []).append(o)
                for key in JOB_UID_LABELS:
                    if _labels(o).get(key):
                        self._job_uid.setdefault(str(_labels(o)[key]), []).append(o)
                        break
            elif kind == "Workload" and str(o.get("apiVersion", "")).startswith(KUEUE_GROUP):
                for owner in meta.get("ownerReferences") or []:
                    self._kueue.setdefault((str(owner.get("kind")), namespace, str(owner.get("name"))), []).append(o)
                if not meta.get("ownerReferences"):
                    self._ownerless.setdefault(namespace, []).append(o)
            elif kind == "PendingWorkloadsSummary":  # Kueue's visibility API: a LocalQueue's waiting workloads, in order
                for item in o.get("items") or []:
                    m = _meta(item)
                    self.positions[(str(m.get("namespace")), str(m.get("name")))] = int(item.get("positionInClusterQueue") or 0) + 1
            elif kind == "Event":  # core/v1 `involvedObject`, or events.k8s.io/v1 `regarding`
                about = o.get("involvedObject") or o.get("regarding") or {}
                self._events.setdefault(
                    (str(about.get("kind")), str(about.get("namespace") or namespace), str(about.get("name"))), []
                ).append(o)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._named.get((kind, namespace, name))

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return self.by_kind.get("Node", [])

    def pods(self, kind: str, namespace: str, name: str, owner: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        """The pods the StatefulSet or Job `name` controls, as its controller claims them: its controller ownerReference
        with the object's uid (never a pod of a former object of that name), or a Job's controller-uid label; and the
        object's selector matches their labels. `owner` None (the object is not on the cluster): every pod whose
        controller is of that kind and name."""
        uid = str(_meta(owner).get("uid") or "") if owner is not None else ""
        found = [p for p in self._owned.get((kind, namespace, name), []) if _same_uid((_controller(p) or {}).get("uid"), uid)]
        if kind == "Job" and uid:
            seen = {id(p) for p in found}
            found += [
                p
                for p in self._job_uid.get(uid, [])
                if id(p) not in seen and str(_meta(p).get("namespace") or "") == namespace and _controller(p) is None
            ]
        wanted = ((owner or {}).get("spec") or {}).get("selector") or {}
        match = wanted.get("matchLabels") or {} if isinstance(wanted, dict) else {}
        return [p for p in found if all(_labels(p).get(k) == v for k, v in match.items())]

    def kueue_workload(self, kind: str, namespace: str, name: str, uid: str | None = None) -> dict[str, Any] | None:
        """The Kueue Workload the StatefulSet or Job owns (Kueue sets the owner reference; an old Workload of a former
        object of that name has another uid, and is not it)."""
        owned = [
            wl
            for wl in self._kueue.get((kind, namespace, name), [])
            if any(
                str(r.get("kind")) == kind and str(r.get("name")) == name and _same_uid(r.get("uid"), uid)
                for r in _meta(wl).get("ownerReferences") or []
            )
        ]
        return owned[-1] if owned else None

    def stranded(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's Kueue Workloads left holding quota with no owner (KUEUE_12232): one made for a StatefulSet
        (Kueue's job-uid label) that is now at 0 replicas or gone, with its quota still reserved, its run not finished and
        no deletion under way. Only an admin's delete frees it. One Kueue made for a running object, or that a user
        made by hand (no job-uid label), is never taken for one."""
        objects = {
            str(_meta(o).get("uid")): o
            for kind in ("StatefulSet", "Job")
            for o in self.by_kind.get(kind, [])
            if _meta(o).get("uid") and str(_meta(o).get("namespace") or "") == namespace
        }
        out = []
        for wl in self._ownerless.get(namespace, []):
            uid = str(_labels(wl).get(KUEUE_JOB_UID) or "")
            reserved, finished = _condition(wl, "QuotaReserved") or {}, _condition(wl, "Finished") or {}
            if not uid or _meta(wl).get("deletionTimestamp") or reserved.get("status") != "True" or finished.get("status") == "True":
                continue
            owner = objects.get(uid)
            spec = (owner or {}).get("spec")
            if owner is None or owner.get("kind") == "StatefulSet" and isinstance(spec, dict) and spec.get("replicas") == 0:
                out.append(wl)
        return out

    def events(self, kind: str, namespace: str, name: str, uid: str | None = None) -> list[dict[str, Any]]:
        """Events about an object (of its uid where both name one), newest last."""
        found = [e for e in self._events.get((kind, namespace, name), []) if _same_uid(_about(e).get("uid"), uid)]
        return sorted(found, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or _meta(e).get("creationTimestamp") or ""))


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference of the object's controller (controller: true; at most one), or None."""
    return next((r for r in _meta(obj).get("ownerReferences") or [] if r.get("controller") is True), None)


def _same_uid(one: Any, other: Any) -> bool:
    """Whether two uids may be of one object: equal, or one is not known (a file saved without them)."""
    return not one or not other or one == other


def _about(event: Mapping[str, Any]) -> Mapping[str, Any]:
    about = event.get("involvedObject") or event.get("regarding") or {}
    return about if isinstance(about, dict) else {}


def _event_message(e: Mapping[str, Any]) -> str:
    return str(e.get("message") or e.get("note") or "")


# --- where things are written ---------------------------------------------------------------------------------


def where(config: ClusterConfig, path: tuple[str | int, ...]) -> str:
    """`workloads[alice].image (clusters/x.py:12)`: the config path and the line that writes it."""
    line = provenance.shown(provenance.origin(config, path))
    return f"{located(path, config)} ({line})" if line else located(path, config)


@dataclass(frozen=True)
class Subject:
    """What runs pods: a workload or a check's, as a workload, with the config path that declares it."""

    path: tuple[str | int, ...]
    workload: Workload
    object: str


def _owners(config: ClusterConfig) -> dict[tuple[str, str], str]:
    """Who a pod belongs to, by (namespace, instance label of the object that controls it): the workload's user, or the
    check."""
    out = {(w.namespace, w.name): w.user for w in config.all_workloads()}
    out.update({(c.namespace, c.name): f"bandwidth check {c.name}" for c in config.enabled_checks()})
    return out


def _whose(pod: Mapping[str, Any], cluster: Cluster) -> str | None:
    """The instance label of the StatefulSet or Job of this program that controls the pod (the object on the cluster,
    of the uid the pod's controller reference names), or None: a pod's own labels say nothing of whose it is (a Helm
    release labels its pods with its own name)."""
    ref = _controller(pod)
    if ref is None or ref.get("kind") not in ("StatefulSet", "Job"):
        return None
    owner = cluster.get(str(ref.get("kind")), str(_meta(pod).get("namespace") or ""), str(ref.get("name")))
    if owner is None or not _same_uid(ref.get("uid"), _meta(owner).get("uid")):
        return None
    labels = _labels(owner)
    ours = all(labels.get(k) == v for k, v in MANAGED_BY.items())
    return str(labels.get(INSTANCE)) if ours and labels.get(INSTANCE) else None


def _active(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _requests(pod: Mapping[str, Any], resource: str) -> float:
    total = 0.0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("requests") or {}).get(resource, (res.get("limits") or {}).get(resource))
        total += _amount(value) if value is not None else 0.0
    return total


# --- the scheduler's message ----------------------------------------------------------------------------------


def scheduler_reasons(message: str) -> tuple[Counter[str], str]:
    """A FailedScheduling message as (nodes per reason, what a PreFilter plugin said instead): `0/6 nodes are available:
    3 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: ...` gives
    {"Insufficient nvidia.com/gpu": 3, ...}. What the PostFilter plugins said is left out: it follows the filters'
    sentence (k8s.io/kubernetes v1.34 pkg/scheduler/framework/types.go FitError.Error, "0/N nodes are available:
    <PreFilterMsg>. <FilterMsg>. <PostFilterMsg>"), and is no cause: `no new claims to deallocate, preemption: 0/12
    nodes are available: ...` (the DRA plugin's and the preemption's notes, joined by ", ")."""
    message = _bounded(message)
    head = re.match(r"\s*0/\d+ nodes are available:\s*", message)
    if head is None:
        return Counter(), _cut(message)
    body = re.split(r"\.(?:\s|$)", message[head.end() :], maxsplit=1)[0].strip()
    parts = re.split(r",\s+(?=\d+ )", body)
    reasons: Counter[str] = Counter()
    other = []
    for part in parts:
        m = re.fullmatch(r"(\d{1,9}) (.+)", part.strip())  # a count of nodes; thousands of digits are no count
        if m:
            reasons[m.group(2)] += int(m.group(1))
        elif part.strip():
            other.append(part.strip())
    return reasons, _cut("; ".join(other))


def _tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _taint(t: Mapping[str, Any]) -> str:
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key')}{value}:{t.get('effect')}"


@dataclass
class NodeSetView:
    """A node set as the cluster shows it: its nodes (where readable) and the pods on them."""

    name: str
    path: tuple[str | int, ...]
    size: int
    gpus_per_node: int
    names: list[str] | None
    """The set's nodes on the cluster (None: the nodes are not readable, and the set is counted, not named)."""
    nodes: dict[str, dict[str, Any]]
    """Node objects of the set, by name (empty when not readable)."""


def node_set_view(config: ClusterConfig, name: str | None, cluster: Cluster) -> NodeSetView:
    """A node set's view, built once per set (every pending pod of a set asks for it)."""
    node_set = config.node_set(name)
    if node_set.name not in cluster.views:
        cluster.views[node_set.name] = _view(config, node_set.name, cluster)
    return cluster.views[node_set.name]


def _view(config: ClusterConfig, name: str, cluster: Cluster) -> NodeSetView:
    node_set = config.node_set(name)
    index = config.node_sets.index(node_set)
    readable = {str(_meta(n).get("name")): n for n in cluster.nodes}
    if node_set.nodes:
        names: list[str] | None = list(node_set.nodes)
    elif readable:
        # An unnamed set is every GPU node no named set holds (components/training.py scheduling): the selector's nodes.
        named = {n for s in config.node_sets for n in s.nodes}
        names = [
            n
            for n, obj in sorted(readable.items())
            if n not in named and all(_labels(obj).get(k) == v for k, v in config.gpu_node_selector.items()) and _allocatable(obj, GPU)
        ]
    else:
        names = None
    nodes = {n: readable[n] for n in names or [] if n in readable}
    return NodeSetView(node_set.name, ("node_sets", index), node_set.size, node_set.gpus_per_node, names, nodes)


def _allocatable(node: Mapping[str, Any], resource: str) -> float:
    return _amount(((node.get("status") or {}).get("allocatable") or {}).get(resource, 0))


def _on_set(view: NodeSetView, config: ClusterConfig, pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The active pods bound to a node of the set. With the set's nodes unknown (unnamed, nodes unreadable): those on a
    node no named set holds."""
    named = {n for s in config.node_sets for n in s.nodes}
    mine = set(view.names or ())
    out = []
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if not node or not _active(p):
            continue
        if node in mine or (view.names is None and node not in named):
            out.append(p)
    return out


def _use(config: ClusterConfig, view: NodeSetView, cluster: Cluster, resource: str) -> tuple[dict[str, float], list[str]]:
    """How much of a resource the pods on the set's nodes request, per node, and whose they are (once per set and
    resource: every pending pod of a set asks the same)."""
    key = (view.name, resource)
    if key not in cluster.use:
        cluster.use[key] = _count_use(config, view, cluster, resource)
    return cluster.use[key]


def _count_use(config: ClusterConfig, view: NodeSetView, cluster: Cluster, resource: str) -> tuple[dict[str, float], list[str]]:
    owners = _owners(config)
    used: dict[str, float] = {}
    by: set[str] = set()
    for p in _on_set(view, config, cluster.by_kind.get("Pod", [])):
        amount = _requests(p, resource)
        if amount:
            node = str(p["spec"]["nodeName"])
            used[node] = used.get(node, 0.0) + amount
            ns = str(_meta(p).get("namespace"))
            instance = _whose(p, cluster)
            by.add(owners.get((ns, instance), f"pods of {ns}") if instance is not None else f"pods of {ns}")
    return used, sorted(by)


def _unseen(view: NodeSetView, used: Mapping[str, float], resource: str, need: float, taken: set[str]) -> str:
    """What the pods read do not explain: a node of the set that they leave room on, so pods of other namespaces (which
    a researcher cannot list) hold the rest. Empty when what was read explains the refusal, or when it cannot be told.
    A node in `taken` runs a pod of the workload already: one pod per node keeps its room from the others."""
    if view.nodes:
        room = any(_allocatable(n, resource) - used.get(name, 0.0) >= need for name, n in view.nodes.items() if name not in taken)
    elif resource == GPU and view.names:
        room = any(view.gpus_per_node - used.get(name, 0.0) >= need for name in view.names if name not in taken)
    else:
        return ""
    return "; the rest is held by pods outside the stack's namespaces" if room else ""


def _in_use(used: float, by: list[str]) -> str:
    return f"{_count(used)} in use by {', '.join(by)}" if by else "none in use by the pods of the stack's namespaces"


def _capacity(config: ClusterConfig, s: Subject, view: NodeSetView, cluster: Cluster, resource: str) -> str:
    """`no node of nairr has 4 free GPUs (nairr: 3 nodes, 12 GPUs, 12 in use by h-kim, yunshi)`, or of VFs, CPU, memory."""
    w = s.workload
    per_node, by = _use(config, view, cluster, resource)
    used = sum(per_node.values())
    need = _requests({"spec": {"containers": [{"resources": resources(config, w)}]}}, resource)
    # One pod per node (a multi-node workload): the nodes its placed pods run on have no room for its others.
    kind = "StatefulSet" if w.kind == "statefulset" else "Job"
    placed = cluster.pods(kind, w.namespace, s.object, cluster.get(kind, w.namespace, s.object)) if w.nodes > 1 else []
    taken = {str((p.get("spec") or {}).get("nodeName")) for p in placed if _active(p) and (p.get("spec") or {}).get("nodeName")}
    unseen = _unseen(view, per_node, resource, need, taken)
    readable = bool(view.nodes)
    size = len(view.nodes) if readable else view.size
    if resource == GPU:
        total = sum(_allocatable(n, GPU) for n in view.nodes.values()) if readable else view.size * view.gpus_per_node
        return (
            f"no node of {view.name} has {w.gpus_per_node} free GPUs ({view.name}: {size} nodes, {_count(total)} GPUs, "
            f"{_in_use(used, by)}{unseen}; {where(config, view.path)})"
        )
    attachment = next((i for i, a in enumerate(config.fabric.attachments) if a.resource == resource), None) if config.fabric else None
    if attachment is not None:  # an SR-IOV resource of the fabric: one VF per attachment
        what = f"{_count(need)} free VF{'s' if need != 1 else ''} of {resource}"
        entry = f"; {where(config, ('fabric', 'attachments', attachment))}"
        if readable:
            total = sum(_allocatable(n, resource) for n in view.nodes.values())
            return f"no node of {view.name} has {what} ({view.name}: {size} nodes, {_count(total)} VFs, {_in_use(used, by)}{unseen}{entry})"
        return f"no node of {view.name} has {what} ({_in_use(used, by)}; the nodes are not readable{entry})"
    field_name = {"cpu": "cpu", "memory": "memory"}.get(resource)
    entry = where(config, (*s.path, field_name)) if field_name and s.path[0] == "workloads" else where(config, s.path)
    amount = {"cpu": f"{_count(need)} free CPUs", "memory": f"{w.memory} of free memory"}.get(
        resource, f"{_count(need)} of {resource} free"
    )
    return f"no node of {view.name} has {amount} ({entry})"


def _placement(config: ClusterConfig, s: Subject, view: NodeSetView, cluster: Cluster, reasons: Counter[str]) -> list[str]:
    """Why no node of the set is one the pods may use: a named node the cluster lacks, a label the selector wants, a
    taint, a cordon. From the nodes where readable, else from the scheduler's counts and the config."""
    w = s.workload
    selector_labels = {**config.gpu_node_selector, **w.node_selector}
    tolerations = [t.model_dump(exclude_none=True) for t in [*config.gpu_tolerations, *w.tolerations]]
    tol_where = where(config, ("gpu_tolerations",))
    sel_where = where(config, ("gpu_node_selector",))
    if w.node_selector and s.path[0] == "workloads":
        sel_where += f", {where(config, (*s.path, 'node_selector'))}"
    out: list[str] = []
    if cluster.nodes and view.names is not None:
        absent = [n for n in view.names if n not in view.nodes]
        if absent:
            out.append(f"the cluster has no node {', '.join(absent)} of {view.name} ({where(config, view.path)})")
        for name, node in view.nodes.items():
            lacking = [f"{k}={v}" for k, v in selector_labels.items() if _labels(node).get(k) != v]
            taints = [
                _taint(t)
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, t)
            ]
            if (node.get("spec") or {}).get("unschedulable"):
                out.append(f"node {name} of {view.name} is cordoned (unschedulable)")
            if lacking:
                out.append(f"node {name} of {view.name} lacks the label {', '.join(lacking)} the pods select ({sel_where})")
            if taints:
                out.append(f"node {name} of {view.name} has the taint {', '.join(taints)}, which the pods do not tolerate ({tol_where})")
        if not view.names:
            out.append(f"no node carries the labels {_labels_text(selector_labels)} of the selector with GPUs ({sel_where})")
        if out:
            return out
    # The nodes are not readable (or show no cause): the scheduler's counts, and the entries that decide them.
    for reason, n in sorted(reasons.items()):
        if "untolerated taint" in reason:
            named = re.search(r"\{([^{}]*)\}", reason)
            taint = f" {{{named.group(1)}}}" if named else ""
            out.append(f"{n} node(s) have a taint{taint} the pods do not tolerate ({tol_where}; `oc describe node` names it)")
        elif "node affinity/selector" in reason:
            pins = (
                f"the nodes of {view.name} ({where(config, view.path)})"
                if config.node_set(w.node_set).nodes
                else f"the unnamed nodes of {view.name}"
            )
            out.append(f"{n} node(s) are not among {pins} or lack the labels {_labels_text(selector_labels)} ({sel_where})")
        elif "unschedulable" in reason:
            out.append(f"{n} node(s) are cordoned (unschedulable)")
        else:
            out.append(f"{n} {reason} (the scheduler)")
    out.append(
        "the nodes are not readable, so which node of the set fails is not known" if not cluster.nodes else "the nodes read show no cause"
    )
    return out


def _labels_text(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items()) or "(none)"


def unschedulable(config: ClusterConfig, s: Subject, message: str, cluster: Cluster) -> str:
    """A FailedScheduling message in the stack's words."""
    reasons, prefilter = scheduler_reasons(message)
    if not reasons:
        return f"the scheduler says: {prefilter}"
    view = node_set_view(config, s.workload.node_set, cluster)
    fitting = {r: n for r, n in reasons.items() if not any(p in r for p in PLACEMENT)}
    if not fitting:  # no node is one the pods may use
        return f"no node of {view.name} takes the pods: " + "; ".join(_placement(config, s, view, cluster, reasons))
    out = []
    for reason, n in sorted(fitting.items()):
        if reason.startswith("Insufficient "):
            out.append(_capacity(config, s, view, cluster, reason.removeprefix("Insufficient ")))
        elif "anti-affinity" in reason:
            out.append(f"{n} node(s) of {view.name} run a pod of it already (one pod per node)")
        else:
            out.append(f"{n} node(s): {reason} (the scheduler)")
    return "; ".join(dict.fromkeys(out))


# --- FailedCreate: the SCC admission, a quota -----------------------------------------------------------------


QUOTA_FIELDS = {"nvidia.com/gpu": "gpus_per_node", "cpu": "cpu", "memory": "memory", "pods": "nodes"}


def refused(config: ClusterConfig, s: Subject, message: str) -> str:
    """A FailedCreate event's message (the pods the controller could not create) in the stack's words."""
    w = s.workload
    message = _bounded(message)
    if "exceeded quota" in message:
        # The quota admission's message (k8s.io/apiserver resourcequota): `exceeded quota: NAME, requested: R=Q,...,
        # used: R=Q,..., limited: R=Q,...`, each list without spaces.
        m = re.search(r"exceeded quota: ([^,\s]+), requested: (\S+), used: (\S+), limited: (\S+)", message)
        if m is None:
            return f"a quota of namespace {w.namespace} refuses the pods: {_cut(message)}"
        name, requested, used, limited = m.groups()
        resource = (
            requested.split("=", 1)[0].split(".", 1)[-1] if requested.startswith(("requests.", "limits.")) else requested.split("=", 1)[0]
        )
        field_name = QUOTA_FIELDS.get(resource)
        asks = where(config, (*s.path, field_name)) if field_name and s.path[0] == "workloads" else where(config, s.path)
        return (
            f"the quota {name} of namespace {w.namespace} is full: requested {requested}, used {used}, limited {limited} (asked by {asks})"
        )
    scc = config.scc_of(w)
    scc_path: tuple[str, ...] = ("security", "scc") if scc == config.security.scc else ("security", "unprivileged_scc")
    if "failed to retrieve the required SCC" in message:
        # OpenShift's admission cannot find the SCC the pods pin (openshift.io/required-scc): the platform tier that
        # creates it is not applied, or the SCC was deleted by hand (Pulumi's state still has it: --refresh sees it gone).
        made = (
            "the platform tier creates it (`pulumi up --refresh` of the platform stack)"
            if config.security.create and scc == config.security.scc
            else "the stack does not create it (security.create): a cluster admin must"
        )
        return f"the SCC admission refuses the pods: the SCC {scc} they pin ({where(config, scc_path)}) is not on the cluster: {made}"
    if "security context constraint" in message:
        account = next(
            (i for i, a in enumerate(config.security.service_accounts) if a.name == w.service_account and a.namespace == w.namespace), None
        )
        sa = where(config, ("security", "service_accounts", account)) if account is not None else f"service account {w.service_account}"
        if re.search(rf'provider "?{re.escape(scc)}"?: Forbidden: not usable by user or serviceaccount', message):
            # --refresh: a grant removed by hand is still in Pulumi's state, and a plain `up` would change nothing.
            grant = (
                "its grant is the platform tier's (`pulumi up --refresh` of the platform stack)"
                if config.security.grant
                else f"the stack does not grant it ({where(config, ('security', 'grant'))}): a cluster admin runs "
                f"`{shlex.join(['oc', 'adm', 'policy', 'add-scc-to-user', scc, '-z', w.service_account, '-n', w.namespace])}`"
            )
            who = f"service account {w.service_account} may not use the SCC {scc} ({where(config, scc_path)}; {sa})"
            return f"the SCC admission refuses the pods: {who}: {grant}"
        detail = re.sub(r"^.*?unable to validate against any security context constraint:\s*", "", message)
        return f"the SCC {scc} ({where(config, scc_path)}) does not admit the pods: {_cut(detail)}"
    return f"the pods cannot be created: {_cut(message)}"


# --- a pod's containers ---------------------------------------------------------------------------------------


def _exit(config: ClusterConfig, s: Subject, terminated: Mapping[str, Any]) -> str:
    """A container's exit in the launcher's terms (components/launcher/launcher.py: 2 would not start, 3 its report
    could not be written, 127 the command could not be executed)."""
    code = terminated.get("exitCode")
    reason = terminated.get("reason") or ""
    said = f": {_cut(terminated['message'])}" if terminated.get("message") else ""
    if reason == "OOMKilled" or code == 137:
        limit = "memory_limit" if s.path[0] == "workloads" else "memory"
        return f"killed for memory (OOMKilled, exit {code}): raise {where(config, (*s.path, limit))}{said}"
    command = where(config, (*s.path, "args")) if s.path[0] == "workloads" else where(config, s.path)
    known = {
        2: "the launcher would not start it: a check failed or the configuration is invalid (its report heads the log)",
        3: "the launcher could not write its report",
        127: f"the command could not be executed ({command})",
    }
    if isinstance(code, int) and code in known:
        return f"exit {code} ({reason or 'Error'}): {known[code]}{said}"
    return f"the command exited {code} ({reason or 'Error'}){said}"


def _image_source(config: ClusterConfig, s: Subject) -> tuple[str | int, ...]:
    if len(s.path) == 4 and config.workloads[int(s.path[1])].tcp_variants[int(s.path[3])].image is None:
        return (*s.path[:2], "image")  # a variant without its own image runs its source's
    return (*s.path, "image")


def container_reason(config: ClusterConfig, s: Subject, pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(verb, reason) of a pod whose container does not run: `failing`, `pending`, or None when it runs or waits for
    nothing the cluster names."""
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        state = c.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        if waiting.get("reason") in IMAGE_PULL:
            image = c.get("image") or s.workload.image
            built = next((b for b in config.images if b.reference == image), None)
            build = (
                f"; it is built by {where(config, ('images', config.images.index(built)))}: has its build finished? "
                f"`{shlex.join(['oc', 'get', 'builds', '-n', built.namespace])}`"
                if built
                else ""
            )
            return "pending", (
                f"the image {image} cannot be pulled ({waiting['reason']}: {_cut(waiting.get('message'))}; "
                f"{where(config, _image_source(config, s))}{build})"
            )
        if waiting.get("reason") == "CrashLoopBackOff":
            last = (c.get("lastState") or {}).get("terminated") or {}
            return "failing", f"restarting (CrashLoopBackOff, {c.get('restartCount', 0)} restarts): last {_exit(config, s, last)}"
        if terminated and terminated.get("exitCode") not in (0, None):
            return "failed", _exit(config, s, terminated)
        if waiting.get("reason") and waiting["reason"] != "ContainerCreating":
            return "pending", f"its container waits: {waiting['reason']}: {_cut(waiting.get('message'))}"
    return None


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _ready(pod: Mapping[str, Any]) -> bool:
    ready = _condition(pod, "Ready")
    return bool(ready and ready.get("status") == "True")


def pod_reason(config: ClusterConfig, s: Subject, pod: dict[str, Any], cluster: Cluster) -> tuple[str, str]:
    """(verb, reason) of one pod that is not ready."""
    name = str(_meta(pod).get("name"))
    namespace = str(_meta(pod).get("namespace"))
    uid = _meta(pod).get("uid")
    scheduled = _condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        message = str(scheduled.get("message") or "")
        if not message:  # the condition without its message: the last FailedScheduling event has it
            found = [e for e in cluster.events("Pod", namespace, name, uid) if e.get("reason") == "FailedScheduling"]
            message = _event_message(found[-1]) if found else ""
        if message:
            return "pending", unschedulable(config, s, message, cluster)
        return "pending", "waiting for a node (the scheduler gives no reason yet)"
    found_container = container_reason(config, s, pod)
    if found_container is not None:
        return found_container
    warnings = [e for e in cluster.events("Pod", namespace, name, uid) if e.get("type") == "Warning"]
    if warnings:
        return "pending", f"{warnings[-1].get('reason')}: {_cut(_event_message(warnings[-1]))}"
    if (pod.get("status") or {}).get("phase") == "Running":
        return "pending", "running, not ready yet"
    return "pending", "starting"


# --- a workload -----------------------------------------------------------------------------------------------


def _grouped(found: list[tuple[str, str]], wanted: int) -> list[str]:
    """One line per cause: `1 of 2 pods pending: ...`."""
    counts = Counter(found)
    return [f"{n} of {wanted} pods {verb}: {reason}" for (verb, reason), n in counts.items()]


def _failed_create(config: ClusterConfig, s: Subject, cluster: Cluster, kind: str) -> str | None:
    uid = _meta(cluster.get(kind, s.workload.namespace, s.object) or {}).get("uid")
    found = [e for e in cluster.events(kind, s.workload.namespace, s.object, uid) if e.get("reason") == "FailedCreate"]
    return refused(config, s, _event_message(found[-1])) if found else None


def workload_status(config: ClusterConfig, s: Subject, cluster: Cluster) -> WorkloadStatus:
    """One workload's state, pods ready of wanted, and the reasons."""
    w = s.workload
    kind = "StatefulSet" if w.kind == "statefulset" else "Job"
    obj = cluster.get(kind, w.namespace, s.object)
    pods = cluster.pods(kind, w.namespace, s.object, obj)
    live = [p for p in pods if _active(p) and not _meta(p).get("deletionTimestamp")]
    ready = sum(1 for p in live if _ready(p))
    reasons: list[str] = []
    base: dict[str, Any] = {
        "config": located(s.path, config),
        "location": provenance.shown(provenance.origin(config, s.path)),
        "namespace": w.namespace,
        "kind": w.kind,
        "object": s.object,
        "declared": w.state,
    }
    if w.state == "stopped":
        if pods:
            reasons.append(f"{len(pods)} pod(s) still on the cluster (stopping, or started by hand: `python -m stacks drift`)")
        elif obj is not None and w.kind == "job":
            reasons.append(f"its Job {s.object} is still on the cluster (`pulumi up` removes it)")
        uid = str(_meta(obj or {}).get("uid") or "")
        held = [
            wl for wl in cluster.stranded(w.namespace)
            if _annotations(wl).get(KUEUE_JOB_NAME) == s.object and (not uid or _labels(wl).get(KUEUE_JOB_UID) == uid)
        ]  # fmt: skip
        reasons += [stranded_reason(wl, "its Kueue Workload", "the queue's next runs wait for it") for wl in held]
        return WorkloadStatus(**base, state="stopped", ready=ready, wanted=0, reasons=reasons, ok=not held)
    wanted = w.nodes
    if obj is None:
        reasons.append(f"its {kind} {s.object} is not on the cluster: `pulumi up` creates it (deleted by hand, or not deployed yet)")
        return WorkloadStatus(**base, state="missing", ready=0, wanted=wanted, reasons=reasons, ok=False)
    admitted_why: int | None = None  # where the queue's word on an admitted run goes in `reasons`
    said = 0  # and whether it is there already (1) or not (0: waitForPodsReady is off, nothing to say of a healthy run)
    if config.queueing is not None:
        queue, why = queue_status(config, s, cluster, kind)
        base["queue"] = queue
        if queue.admission != "admitted":
            # Its pods (a StatefulSet's, gated) or none (a suspended Job's) say nothing the queue does not.
            return WorkloadStatus(**base, state="pending", ready=0, wanted=wanted, reasons=[why], ok=False)
        admitted_why = len(reasons)
        if why:
            reasons.append(why)
            said = 1
    succeeded = 0
    if w.kind == "job":
        succeeded = int((obj.get("status") or {}).get("succeeded") or 0)
        complete, failed = _condition(obj, "Complete"), _condition(obj, "Failed")
        if complete is not None and complete.get("status") == "True":
            return WorkloadStatus(**base, state="succeeded", ready=succeeded, wanted=wanted, reasons=reasons, ok=True)
        if failed is not None and failed.get("status") == "True":
            reasons.append(f"the Job failed ({failed.get('reason')}: {_cut(failed.get('message'))})")
            reasons += _grouped([r for p in pods if (r := container_reason(config, s, p)) is not None], wanted)
            return WorkloadStatus(**base, state="failed", ready=succeeded, wanted=wanted, reasons=reasons, ok=False)
        ready += succeeded
    else:
        replicas = (obj.get("spec") or {}).get("replicas")
        if replicas is not None and replicas != wanted:
            reasons.append(f"the StatefulSet has {replicas} replicas on the cluster, {wanted} in the stack (`python -m stacks drift`)")
    found = [pod_reason(config, s, p, cluster) for p in live if not _ready(p)]
    # A Job with retries left replaces a failed pod: the failure is why it is not done yet.
    found += [("failed earlier", r[1]) for p in pods if not _active(p) and (r := container_reason(config, s, p)) is not None]
    missing = wanted - len(live) - succeeded - sum(1 for p in pods if not _active(p) and (p.get("status") or {}).get("phase") == "Failed")
    if missing > 0:
        refusal = _failed_create(config, s, cluster, kind)
        found += [("not created", refusal or "not created yet (no event says why)")] * missing
    unplaced = sum(1 for p in live if _unschedulable(p))
    if admitted_why is not None and unplaced:
        reasons[admitted_why : admitted_why + said] = [broken_admission(config, unplaced, wanted)]
    reasons += _grouped(found, wanted)
    if ready >= wanted:
        return WorkloadStatus(**base, state="running", ready=ready, wanted=wanted, reasons=reasons, ok=True)
    state: WorkloadState = "failed" if any(verb in ("failing", "failed") for verb, _ in found) else "pending"
    return WorkloadStatus(**base, state=state, ready=ready, wanted=wanted, reasons=reasons, ok=False)


# --- the queue ------------------------------------------------------------------------------------------------


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    """The scheduler found no node for the pod (PodScheduled False, Unschedulable), not that it waits for a gate."""
    scheduled = _condition(pod, "PodScheduled")
    return bool(scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable")


def broken_admission(config: ClusterConfig, unplaced: int, wanted: int) -> str:
    """A run Kueue admitted whose pods cannot all be placed: it cannot start, and what Kueue does about it. Kueue admits
    by quota (and, with Topology Aware Scheduling, by the nodes it counts); the scheduler may still find no node."""
    q = config.queueing
    assert q is not None
    cause = (
        "the nodes changed since Kueue's Topology Aware Scheduling counted them"
        if q.topology_aware
        else "Kueue admits by quota, not by node: `python -m stacks check` names the runs the quota admits together that "
        "the nodes cannot hold"
    )
    then = (
        f"Kueue evicts it at the waitForPodsReady timeout ({q.pods_ready.timeout_minutes} minutes after its admission), releases "
        "its quota and queues it again; until then it holds its quota and its placed pods' GPUs"
        if q.pods_ready.enabled
        else "waitForPodsReady is off (queueing.pods_ready), so Kueue never evicts it: it holds its quota and its placed pods' "
        "GPUs until it is stopped (state: stopped)"
    )
    return (
        f"broken: admitted by queue {q.cluster_queue}, but {unplaced} of its {wanted} pods cannot be placed, so it cannot start "
        f"({cause}); {then}"
    )


# Kueue's reasons a pod set gets no flavor (pkg/scheduler/flavorassigner/flavorassigner.go, v0.17): one per flavor tried,
# joined with ", " after "couldn't assign flavors to pod set NAME: ".
_UNUSED = re.compile(r"insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed")
_TOO_BIG = re.compile(
    r"insufficient quota for (\S+) in flavor (\S+), previously considered podsets requests \(\S+\) \+ current podset request "
    r"\((\S+)\) > maximum capacity \((\S+)\)"
)
_UNCOVERED = re.compile(r"resource (\S+) unavailable in ClusterQueue")
# Topology Aware Scheduling's refusal (kueue v0.17.0 pkg/cache/scheduler/tas_flavor_snapshot.go notFitMessage): the pods
# (or slices) that fit the nodes' free resources, then which nodes it left out and why (formatReasons).
_TOPOLOGY = re.compile(
    r'topology "([^"]+)" (?:doesn\'t allow to fit any of (\d{1,9})|allows to fit only (\d{1,9}) out of (\d{1,9})) (?:pod|slice)\(s\)'
    r"(?:\. Total nodes: (\d{1,9}); excluded: ([^;]*))?"
)
_EXCLUDED = re.compile(r'(resource|taint) "([^"]+)": (\d{1,9})|(nodeSelector|affinity|topologyDomain): (\d{1,9})')


def _topology_reason(config: ClusterConfig, match: re.Match[str]) -> str:
    """Topology Aware Scheduling's refusal in the stack's words: how many pods fit the nodes, and why the others do not."""
    fit = int(match.group(3) or 0)
    want = int(match.group(2) or match.group(4))
    where = " or ".join(ns.name for ns in config.node_sets) if len(config.node_sets) > 1 else config.node_sets[0].name
    why = []
    for kind, name, n, other, m in _EXCLUDED.findall(match.group(6) or ""):
        if kind == "resource":
            why.append(f"{n} without the {name} one pod requests free")
        elif kind == "taint":
            why.append(f"{n} with the taint {name}, which the pods do not tolerate (gpu_tolerations)")
        elif other == "nodeSelector":
            why.append(f"{m} without the labels the pods select (gpu_node_selector, node_sets[].labels)")
        elif other == "affinity":
            why.append(f"{m} outside the pods' node pins (node_sets[].nodes)")
    nodes = f" ({match.group(5)} nodes: {', '.join(why)})" if match.group(5) and why else ""
    # Kueue v0.17.0 looks again at a run it held back when a run of its queue ends or leaves, or a node's labels, taints
    # or allocatable change; not when a pod it does not manage leaves (non_tas_usage_controller only counts it).
    return (
        f"Kueue's Topology Aware Scheduling finds room for {fit} of its {want} pods on the nodes of {where}{nodes}; it counts "
        "every pod on them, other projects' too: it is admitted once they have room for all of them, when Kueue looks again "
        "(a run of its queue ending or leaving, a change of the nodes) (queueing.topology_aware)"
    )


def queue_reason(config: ClusterConfig, message: str) -> str:
    """Kueue's QuotaReserved=False message in the stack file's words: a flavor is a node set, the shortfall per resource."""
    message = _bounded(message)
    sets = {flavor_name(config, ns): ns.name for ns in config.node_sets}
    said: list[str] = []
    for resource, flavor, more in _UNUSED.findall(message):
        where = f" on node set {sets[flavor]}" if flavor in sets and len(sets) > 1 else ""
        said.append(f"needs {more} more {resource} than the queue has free{where}")
    for resource, flavor, want, cap in _TOO_BIG.findall(message):
        said.append(
            f"asks for {want} {resource}, more than node set {sets.get(flavor, flavor)} holds in the queue ({cap}): it can never be "
            "admitted (`python -m stacks check` says so: capacity)"
        )
    said += [f"requests {r}, which the queue does not cover (queueing.quota)" for r in _UNCOVERED.findall(message)]
    said += [_topology_reason(config, m) for m in _TOPOLOGY.finditer(message)]
    return "; ".join(dict.fromkeys(said)) if said else f"Kueue says: {_cut(message)}"


def queue_status(config: ClusterConfig, s: Subject, cluster: Cluster, kind: str) -> tuple[QueueStatus, str]:
    """Where a queued workload is (its Kueue Workload's conditions), and why it waits, in the stack file's words."""
    q = config.queueing
    assert q is not None
    wl = cluster.kueue_workload(
        kind, s.workload.namespace, s.object, _meta(cluster.get(kind, s.workload.namespace, s.object) or {}).get("uid")
    )
    if wl is None:
        queue = QueueStatus(local_queue=q.local_queue, cluster_queue=q.cluster_queue, admission="unknown", position=None, workload=None)
        return queue, (
            f"Kueue made no Workload for its {kind}: Kueue is not installed, or does not manage namespace {s.workload.namespace} "
            f"(the Red Hat build manages namespaces labelled kueue.openshift.io/managed=true: queueing.managed_namespace_label)"
        )
    name = str(_meta(wl).get("name"))
    admitted = _condition(wl, "Admitted") or {}
    finished = _condition(wl, "Finished") or {}  # a Job's run ended: its admission is history, its Job says how it ended
    if "True" in (admitted.get("status"), finished.get("status")):
        queue = QueueStatus(local_queue=q.local_queue, cluster_queue=q.cluster_queue, admission="admitted", position=None, workload=name)
        ready = _condition(wl, "PodsReady")
        if q.pods_ready.enabled and finished.get("status") != "True" and not (ready is not None and ready.get("status") == "True"):
            return queue, (
                f"admitted by queue {q.cluster_queue}; Kueue evicts it and queues it again if its pods are not all Ready within "
                f"{q.pods_ready.timeout_minutes} minutes (waitForPodsReady)"
            )
        return queue, ""
    position = cluster.positions.get((s.workload.namespace, name))
    queue = QueueStatus(local_queue=q.local_queue, cluster_queue=q.cluster_queue, admission="waiting", position=position, workload=name)
    at = f" (position {position})" if position is not None else ""
    evicted = _condition(wl, "Evicted")
    reserved = _condition(wl, "QuotaReserved")
    why = queue_reason(config, str(reserved.get("message") or "")) if reserved is not None and reserved.get("message") else ""
    if evicted is not None and evicted.get("status") == "True" and evicted.get("reason") == "PodsReadyTimeout":
        why = (
            f"evicted: its pods were not all Ready within {q.pods_ready.timeout_minutes} minutes (waitForPodsReady), so Kueue "
            "released its quota and queued it again" + (f"; {why}" if why else "")
        )
    # A stopped run's Workload Kueue left holding quota (KUEUE_12232) is often why: named with the one command that frees it.
    namespaces = sorted({p.namespace for p in config.pod_specs()})
    held = [wl for ns in namespaces for wl in cluster.stranded(ns) if _admitted_by(wl) in (q.cluster_queue, None)]
    said = ([why] if why else []) + [stranded_reason(wl, "Kueue Workload", "it counts against the queue") for wl in held]
    why = "; ".join(said)
    return queue, f"waiting in queue {q.cluster_queue}{at}" + (f": {why}" if why else "")


def _admission(wl: Mapping[str, Any]) -> Mapping[str, Any]:
    state = wl.get("status")
    admission = state.get("admission") if isinstance(state, dict) else None
    return admission if isinstance(admission, dict) else {}


def _admitted_by(wl: Mapping[str, Any]) -> str | None:
    """The ClusterQueue whose quota a Kueue Workload holds (status.admission.clusterQueue), None when it does not say."""
    queue = _admission(wl).get("clusterQueue")
    return str(queue) if queue else None


def stranded_reason(wl: Mapping[str, Any], what: str, effect: str) -> str:
    """What a Workload left holding quota with no owner (Cluster.stranded) holds, and the command that frees it."""
    meta = _meta(wl)
    name, namespace = str(meta.get("name")), str(meta.get("namespace") or "")
    assignments = _admission(wl).get("podSetAssignments")
    gpus = sum(
        _amount((a.get("resourceUsage") or {}).get(GPU, 0))
        for a in (assignments if isinstance(assignments, list) else [])
        if isinstance(a, dict) and isinstance(a.get("resourceUsage") or {}, dict)
    )
    queue = _admitted_by(wl)
    # What the cluster wrote is shown only as a count a queue can hold (not inf from "9" * 400, not a negative).
    holds = (f"{_count(gpus)} {GPU}" if 0 < gpus < 10**6 else "quota") + (f" of queue {queue}" if queue else "")
    return (
        f"{what} {name} in {namespace} still holds {holds} with no owner left ({KUEUE_12232}): nothing frees it and {effect}; "
        f"a user allowed to delete Kueue Workloads there frees it: `oc delete workloads.kueue.x-k8s.io {name} -n {namespace}`"
    )


# --- a bandwidth check ----------------------------------------------------------------------------------------


def verdict_of(log: str) -> str | None:
    """The last verdict a check's log holds (components/launcher/bandwidth.py prints `bandwidth check: PASS (mode
    rdma)`, then indented lines), as one line with its measurement and failures."""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("bandwidth check: ")]
    if not starts:
        return None
    first = starts[-1]
    kept = [_cut(lines[first])]  # a log line holds whatever the container wrote: cut to a line's worth
    for line in lines[first + 1 :]:
        if not line.startswith("  "):
            break
        text = line.strip()
        if text.startswith(("measured:", "FAIL:")):
            kept.append(_cut(text))
    return "; ".join(kept)


def check_status(config: ClusterConfig, index: int, check: BandwidthCheck, cluster: Cluster) -> CheckStatus:
    name = job_name(config, check)
    path: tuple[str | int, ...] = ("bandwidth_checks", index)
    as_workload = workload_status(config, Subject(path, config.bandwidth_workload(check), name), cluster)
    log = cluster.logs.get(f"{check.namespace}/{name}")
    states: dict[str, CheckState] = {"succeeded": "passed", "failed": "failed", "running": "running", "missing": "missing"}
    state = states.get(as_workload.state, "pending")
    return CheckStatus(
        config=as_workload.config,
        location=as_workload.location,
        namespace=check.namespace,
        job=name,
        state=state,
        verdict=verdict_of(log) if log is not None else None,
        reasons=as_workload.reasons,
        ok=state in ("passed", "running"),
    )


def stack_status(
    config: ClusterConfig, stack: str, context: str | None, objects: list[dict[str, Any]], logs: Mapping[str, str] | None = None,
    unreadable: Iterable[str] = (), source: str = "the objects read",
) -> StackStatus:  # fmt: skip
    """The status of every workload and enabled check of a stack, from the objects read from its cluster (`source`
    names them in the error an object of the wrong shape is: tools/kubectl.py)."""
    cluster = Cluster(kubectl.check(objects, source), logs or {})
    workloads = [workload_status(config, Subject(p, w, w.object_name), cluster) for p, w in config.located_workloads()]
    checks = [check_status(config, i, c, cluster) for i, c in enumerate(config.bandwidth_checks) if c.enabled]
    missing = list(unreadable)
    if not cluster.nodes and not any("nodes" in u for u in missing):
        missing.append("nodes: none in what was read, so the reasons count capacity from the config")
    return StackStatus(
        schema_version="1",
        stack=stack,
        cluster=config.name,
        context=context,
        workloads=workloads,
        checks=checks,
        unreadable=missing,
        ok=all(w.ok for w in workloads) and all(c.ok for c in checks),
    )


def report(status: StackStatus) -> str:
    """One line per workload (a running one short, the others with their reasons), then the checks' verdicts."""
    out = [f"{status.stack} ({status.cluster}): " + ("everything declared running runs" if status.ok else "not everything runs")]
    for w in status.workloads:
        head = f"  {w.config}" + (f" ({w.location})" if w.location else "")
        if w.state == "running" and not w.reasons:
            out.append(f"{head}: running, {w.ready}/{w.wanted} pods ready")
            continue
        counted = f", {w.ready}/{w.wanted} pods ready" if w.wanted else ""
        out.append(f"{head}: {w.state}{counted}" + (": " + "; ".join(w.reasons) if w.reasons else ""))
    for c in status.checks:
        head = f"  {c.config}" + (f" ({c.location})" if c.location else "")
        detail = [c.verdict] if c.verdict else []
        out.append(f"{head}: {c.state} (Job {c.job})" + (": " + "; ".join([*detail, *c.reasons]) if detail or c.reasons else ""))
    out += [f"  not read: {u}" for u in status.unreadable]
    # Each line holds what the cluster said (a message, a reason, an image, a log's verdict): shown escaped, so none can
    # recolour the screen or forge a line of its own ("everything declared running runs").
    return "\n".join(escaped(line) for line in out) + "\n"


# --- reading the cluster --------------------------------------------------------------------------------------


def _get(tool: str, args: list[str], where_: list[str], source: str) -> tuple[list[dict[str, Any]], str | None]:
    """(the objects of one `get -o json`, or why it failed)."""
    answer = kubectl.run([tool, "get", *args, "-o", "json", *where_], "status")
    if answer.returncode != 0:
        return [], answer.said or "refused"
    return kubectl.parse(answer.stdout, source), None


def _read_queue(tool: str, config: ClusterConfig, namespaces: list[str], where_: list[str], unreadable: list[str]) -> list[dict[str, Any]]:
    """A queued cluster's Kueue Workloads in the stack's namespaces, and each LocalQueue's waiting workloads in order
    (Kueue's visibility API, an aggregated API the cluster may not serve): what cannot be read is said, not fatal."""
    assert config.queueing is not None
    out: list[dict[str, Any]] = []
    for ns in namespaces:
        found, failed = _get(tool, ["workloads.kueue.x-k8s.io", "-n", ns], where_, f"`{tool} get workloads.kueue.x-k8s.io -n {ns}`")
        if failed is not None:
            unreadable.append(f"Kueue's workloads in {ns} ({failed})")
            continue
        out += found
        path = f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/{config.queueing.local_queue}/pendingworkloads"
        answer = kubectl.run([tool, "get", "--raw", path, *where_], "status")
        if answer.returncode == 0:
            out += kubectl.parse(answer.stdout, f"`{tool} get --raw {path}`")
        else:
            unreadable.append(f"the queue positions in {ns} ({answer.said or 'refused'})")
    return out


def read_cluster(
    config: ClusterConfig, context: str | None, kubectl_path: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
    """The objects `status` reads (read only: `get` and `logs`): per namespace of the stack one `get` of its
    StatefulSets, Jobs, Pods and Events; the Nodes where readable; each enabled check's log where its Job ran. Returns
    the objects, the logs by NAMESPACE/JOB, and what could not be read. A namespace the cluster refuses stops it; an
    answer that is not JSON, or objects of the wrong shape, are one error (tools/kubectl.py)."""
    tool = kubectl.tool(kubectl_path, "status")
    where_ = ["--context", context] if context else []
    objects: list[dict[str, Any]] = []
    namespaces = sorted({w.namespace for w in config.pod_specs()})
    for ns in namespaces:
        command = f"`{tool} get statefulsets,jobs,pods,events -n {ns}`"
        found, failed = _get(tool, ["statefulsets.apps,jobs.batch,pods,events", "-n", ns], where_, command)
        if failed is not None:
            raise stacks.ConfigError(f"status: {command} failed: {failed}")
        objects += found
    unreadable: list[str] = []
    if config.queueing is not None:
        objects += _read_queue(tool, config, namespaces, where_, unreadable)
    found, failed = _get(tool, ["nodes"], where_, f"`{tool} get nodes`")
    objects += found
    if failed is not None:
        unreadable.append(f"nodes ({failed})")
    kubectl.check(objects, f"`{tool} get`")
    logs: dict[str, str] = {}
    jobs = {(str(_meta(o).get("namespace")), str(_meta(o).get("name"))) for o in objects if o.get("kind") == "Job"}
    for check in config.enabled_checks():
        name = job_name(config, check)
        if (check.namespace, name) not in jobs:
            continue
        # A log is whatever the container wrote: bounded, and decoded without failing on a byte that is not UTF-8.
        cmd = [tool, "logs", "-n", check.namespace, f"job/{name}", "--tail=400", f"--limit-bytes={kubectl.MAX_LOG_BYTES}", *where_]
        answer = kubectl.run(cmd, "status")
        if answer.returncode == 0:
            logs[f"{check.namespace}/{name}"] = answer.stdout
        else:
            unreadable.append(f"the log of job/{name} ({answer.said or 'refused'})")
    return objects, logs, unreadable
