"""What `status` reads from the cluster (`oc get` and `oc logs` only, bounded by tools/kubectl.py), and the lookups on
it: objects told apart by uid, as their controllers tell them, never by a name or a label alone."""

import json
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import stacks
from components.bandwidth import job_name
from config.stack import ClusterConfig
from config.values import quantity_value
from tools import kubectl

Obj = dict[str, Any]

KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"  # label on a Kueue Workload: the uid of the StatefulSet or Job it is made for
# On a StatefulSet's Workload (Kueue v0.17.0 constructWorkload): its owner's name and GroupVersionKind.String().
KUEUE_JOB_NAME = "kueue.x-k8s.io/job-owner-name"
KUEUE_JOB_GVK = "kueue.x-k8s.io/job-owner-gvk"
OWNER_GVK = {"StatefulSet": "apps/v1, Kind=StatefulSet", "Job": "batch/v1, Kind=Job"}
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")  # the Job controller's label on its pods (new, old)
# A message from the cluster is matched within its first 4,096 characters, by patterns linear in it (no `.*`).
MATCHED_CHARS = 4096
MESSAGE_CHARS = 300  # a message quoted from the cluster is cut here: one line stays readable
LAUNCHER_LOGS = 8  # containers the launcher stopped (exit 2) whose logs are read for its start report
LAUNCHER_REPORT = "LAUNCHER_REPORT "  # the line of a container's log that holds the launcher's start report


def meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}  # kubectl.check: a mapping or absent, as every field of kubectl.SHAPES


def labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return meta(obj).get("labels") or {}


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def holds(obj: Mapping[str, Any], kind: str) -> bool:
    return condition(obj, kind).get("status") == "True"


def controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((r for r in meta(obj).get("ownerReferences") or [] if r.get("controller") is True), None)


def same_uid(one: Any, other: Any) -> bool:  # or one is not known (a file saved without them)
    return not one or not other or one == other


def admission(wl: Mapping[str, Any]) -> Mapping[str, Any]:  # not in kubectl.SHAPES: taken as whatever it is
    return kubectl.mapping((wl.get("status") or {}).get("admission"))


def admitted_by(wl: Mapping[str, Any]) -> str | None:  # the ClusterQueue whose quota it holds
    return str(admission(wl)["clusterQueue"]) if admission(wl).get("clusterQueue") else None


def bounded(message: Any) -> str:
    return (message if isinstance(message, str) else str(message or ""))[:MATCHED_CHARS]


def cut(text: Any) -> str:
    line = " ".join(bounded(text).split())
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 3] + "..."


def amount(value: Any) -> float:
    try:
        return float(quantity_value(str(value)))
    except (ValueError, TypeError, ArithmeticError):
        return 0.0


def count(n: float) -> str:
    return str(int(n)) if n == int(n) else f"{n:g}"


def active(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def launcher_refusal(log: str | None) -> str | None:
    """The launcher's first error in a container's log, from its start report (schema launcher-report/v1)."""
    line = next((ln for ln in reversed((log or "").splitlines()) if ln.startswith(LAUNCHER_REPORT)), None)
    try:
        errors = json.loads(line[len(LAUNCHER_REPORT) :]).get("errors") if line else None
    except (ValueError, AttributeError):
        return None
    return cut(errors[0]) if isinstance(errors, list) and errors and isinstance(errors[0], str) else None


def pasted(*words: str) -> str:
    return "`" + shlex.join(words) + "`"


@dataclass
class Cluster:
    """The objects read, indexed once, and the Pulumi stack and kube context they were read from (for the commands)."""

    objects: list[Obj]
    logs: Mapping[str, str] = field(default_factory=dict)  # a check's log by NAMESPACE/JOB, a pod's by NAMESPACE/pod/POD/CONTAINER
    context: str | None = None
    stack: str = ""
    by_kind: dict[str, list[Obj]] = field(init=False, default_factory=dict)
    positions: dict[tuple[str, str], int] = field(init=False, default_factory=dict)  # a waiting Workload's, 1 first
    memo: dict[tuple[str, ...], Any] = field(init=False, default_factory=dict)  # what each pod of a node set asks alike
    _named: dict[tuple[str, str, str], Obj] = field(init=False, default_factory=dict)
    _owned: dict[tuple[str, str, str], list[Obj]] = field(init=False, default_factory=dict)
    _job_uid: dict[str, list[Obj]] = field(init=False, default_factory=dict)
    _kueue: dict[tuple[str, str, str], list[tuple[Obj, Any]]] = field(init=False, default_factory=dict)
    _ownerless: dict[str, list[Obj]] = field(init=False, default_factory=dict)
    _events: dict[tuple[str, str, str], list[Obj]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        for o in self.objects:
            kind, namespace = str(o.get("kind")), namespace_of(o)
            self.by_kind.setdefault(kind, []).append(o)
            self._named[(kind, namespace, str(meta(o).get("name")))] = o
            if kind == "Pod":
                if (owner := controller(o)) is not None:
                    self._owned.setdefault((str(owner.get("kind")), namespace, str(owner.get("name"))), []).append(o)
                if job_uid := next((labels(o)[k] for k in JOB_UID_LABELS if labels(o).get(k)), None):
                    self._job_uid.setdefault(str(job_uid), []).append(o)
            elif kind == "Workload" and str(o.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):  # v1beta2, or v1beta1
                for r in (refs := meta(o).get("ownerReferences") or []):
                    self._kueue.setdefault((str(r.get("kind")), namespace, str(r.get("name"))), []).append((o, r.get("uid")))
                if not refs:
                    self._ownerless.setdefault(namespace, []).append(o)
            elif kind == "PendingWorkloadsSummary":  # Kueue's visibility API: a LocalQueue's waiting workloads, in order
                for item in o.get("items") or []:
                    at = (str(meta(item).get("namespace")), str(meta(item).get("name")))
                    self.positions[at] = int(item.get("positionInClusterQueue") or 0) + 1
            elif kind == "Event":  # core/v1 `involvedObject`, or events.k8s.io/v1 `regarding`
                about = o.get("involvedObject") or o.get("regarding") or {}
                at3 = (str(about.get("kind")), str(about.get("namespace") or namespace), str(about.get("name")))
                self._events.setdefault(at3, []).append(o)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self._named.get((kind, namespace, name))

    def refusal(self, pod: Mapping[str, Any], container: str) -> str | None:
        """The launcher's first error in the log read of a container of `pod`, if it refused to start."""
        return launcher_refusal(self.logs.get(f"{namespace_of(pod)}/pod/{meta(pod).get('name')}/{container}"))

    @property
    def nodes(self) -> list[Obj]:
        return self.by_kind.get("Node", [])

    def pods(self, kind: str, namespace: str, name: str, owner: Mapping[str, Any] | None) -> list[Obj]:
        """The pods `owner` (None: any of that name) controls or, a Job's, carry its uid label, that its selector matches."""
        uid = str(meta(owner).get("uid") or "")
        found = [p for p in self._owned.get((kind, namespace, name), []) if same_uid((controller(p) or {}).get("uid"), uid)]
        if kind == "Job" and uid:  # a pod with no controller: never among the owned ones above
            found += [p for p in self._job_uid.get(uid, []) if namespace_of(p) == namespace and controller(p) is None]
        match = (((owner or {}).get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return [p for p in found if all(labels(p).get(k) == v for k, v in match.items())]

    def kueue_workload(self, kind: str, namespace: str, name: str, uid: str | None) -> Obj | None:
        return next((wl for wl, owner_uid in reversed(self._kueue.get((kind, namespace, name), [])) if same_uid(owner_uid, uid)), None)

    def stranded(self, namespace: str) -> list[Obj]:
        """The Kueue Workloads holding quota for a StatefulSet or Job gone or at 0 replicas (kueue#12232)."""
        owners = {
            str(meta(o).get("uid")): o for k in ("StatefulSet", "Job") for o in self.by_kind.get(k, []) if namespace_of(o) == namespace
        }
        out = []
        for wl in self._ownerless.get(namespace, []):
            uid = str(labels(wl).get(KUEUE_JOB_UID) or "")
            if not uid or meta(wl).get("deletionTimestamp") or not holds(wl, "QuotaReserved") or holds(wl, "Finished"):
                continue
            if (owner := owners.get(uid)) is None or owner.get("kind") == "StatefulSet" and (owner.get("spec") or {}).get("replicas") == 0:
                out.append(wl)
        return out

    def leftovers(self, kind: str, namespace: str, name: str, uid: str, cluster_queue: str) -> list[Obj]:
        """The stranded Workloads made for this object (kind, name, uid where known), admitted by the stack's queue."""
        return [
            wl
            for wl in self.stranded(namespace)
            if (meta(wl).get("annotations") or {}).get(KUEUE_JOB_GVK) == OWNER_GVK[kind]
            and (meta(wl).get("annotations") or {}).get(KUEUE_JOB_NAME) == name
            and admitted_by(wl) == cluster_queue
            and (not uid or labels(wl).get(KUEUE_JOB_UID) == uid)
        ]

    def said(self, kind: str, namespace: str, name: str, uid: str | None, **fields: str) -> tuple[str, str] | None:
        """The reason and message of the newest event about an object (of its uid) with `fields`."""
        found = [e for e in self._events.get((kind, namespace, name), []) if all(e.get(k) == v for k, v in fields.items())]
        found = [e for e in found if same_uid((e.get("involvedObject") or e.get("regarding") or {}).get("uid"), uid)]
        found.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or meta(e).get("creationTimestamp") or ""))
        return (str(found[-1].get("reason")), str(found[-1].get("message") or found[-1].get("note") or "")) if found else None

    def oc(self, *args: str) -> str:
        return pasted("oc", *(["--context", self.context] if self.context else []), *args)

    def drift(self) -> str:
        return pasted("python", "-m", "stacks", "drift", *([self.stack] if self.stack else []))

    def up(self) -> str:
        return pasted("pulumi", "up", *(["-s", self.stack] if self.stack else []))


def read_cluster(
    config: ClusterConfig, context: str | None, kubectl_path: str | None = None
) -> tuple[list[Obj], dict[str, str], list[str]]:
    """The objects `status` reads, the logs (the checks', the launcher's) and what could not be read."""
    tool = kubectl.tool(kubectl_path, "status")
    where = ["--context", context] if context else []
    unreadable: list[str] = []

    def get(args: list[str], shown: str, what: str = "") -> list[Obj] | None:
        """The objects of one `get`, or None and `what` said unreadable (no `what`: the error)."""
        if (answer := kubectl.run([tool, "get", *args, *where], "status")).returncode == 0:
            return kubectl.parse(answer.stdout, f"`{tool} get {shown}`")
        if not what:
            raise stacks.ConfigError(f"status: `{tool} get {shown}` failed: {answer.said or 'refused'}")
        unreadable.append(f"{what} ({answer.said or 'refused'})")
        return None

    namespaces = sorted({w.namespace for w in config.pod_specs()})
    objects: list[Obj] = []
    for ns in namespaces:
        objects += get(["statefulsets.apps,jobs.batch,pods,events", "-n", ns, "-o", "json"], f"statefulsets,jobs,pods,events -n {ns}") or []
    local_queue = config.queueing.local_queue if config.queueing is not None else ""
    for ns in namespaces if local_queue else []:
        found = get(["workloads.kueue.x-k8s.io", "-n", ns, "-o", "json"], f"workloads.kueue.x-k8s.io -n {ns}", f"Kueue's workloads in {ns}")
        if found is not None:
            path = f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/{local_queue}/pendingworkloads"
            objects += found + (get(["--raw", path], f"--raw {path}", f"the queue positions in {ns}") or [])
    objects += get(["nodes", "-o", "json"], "nodes", "nodes") or []
    kubectl.check(objects, f"`{tool} get`")
    jobs = {(namespace_of(o), str(meta(o).get("name"))) for o in objects if o.get("kind") == "Job"}
    logs: dict[str, str] = {}

    def log(ns: str, *what: str) -> kubectl.Answer:
        return kubectl.run([tool, "logs", "-n", ns, *what, "--tail=400", f"--limit-bytes={kubectl.MAX_LOG_BYTES}", *where], "status")

    for check in config.enabled_checks():
        if (check.namespace, name := job_name(config, check)) not in jobs:
            continue
        if (answer := log(check.namespace, f"job/{name}")).returncode == 0:
            logs[f"{check.namespace}/{name}"] = answer.stdout
        else:
            unreadable.append(f"the log of job/{name} ({answer.said or 'refused'})")
    for ns, pod, container, previous in islice(launcher_stopped(objects), LAUNCHER_LOGS):
        # The kubelet may restart the container between the `get` and this read: the run it read as stopped is then
        # the previous one, and the current one has not written its report yet. The first log with a report is kept.
        for last in (previous, not previous):
            answer = log(ns, f"pod/{pod}", "-c", container, *(["--previous"] if last else []))
            if answer.returncode == 0 and LAUNCHER_REPORT in answer.stdout:
                logs[f"{ns}/pod/{pod}/{container}"] = answer.stdout
                break
    return objects, logs, unreadable


def launcher_stopped(objects: list[dict[str, Any]]) -> Iterator[tuple[str, str, str, bool]]:
    """(namespace, pod, container, whether it is the last run's) of each container the launcher stopped (exit 2)."""
    for o in objects:
        for c in (o.get("status") or {}).get("containerStatuses") or [] if o.get("kind") == "Pod" else []:
            now, last = ((c.get(k) or {}).get("terminated") or {} for k in ("state", "lastState"))
            if 2 in (now.get("exitCode"), last.get("exitCode")):
                yield namespace_of(o), str(meta(o).get("name")), str(c.get("name")), now.get("exitCode") != 2
