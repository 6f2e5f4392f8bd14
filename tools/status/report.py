"""A stack's status: the models of `status --json` (schemas/status.v1.json: their docstrings are its descriptions),
their assembly from the objects read and the reasons, and the text `status` prints."""

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import takewhile
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from components.bandwidth import check_workload, job_name
from components.outputs import NoFieldTitles, one_line
from config import provenance
from config.errors import located
from config.stack import ClusterConfig
from config.text import escaped
from config.workloads import BandwidthCheck
from tools import kubectl
from tools.status.cluster import Cluster, Obj, active, condition, cut, holds, meta
from tools.status.queue import broken_admission, queue_place, stranded_reason
from tools.status.reasons import Subject, container_reason, failed_create, pod_reason, relaunched

SCHEMA_VERSION = "1"
SCHEMA_ID = f"urn:gpu-training:schema:status:v{SCHEMA_VERSION}"
SCHEMA_FILE = f"schemas/status.v{SCHEMA_VERSION}.json"

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
    queue: "QueueStatus | None" = Field(default=None, exclude_if=lambda v: v is None)
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
    body = StackStatus.model_json_schema(schema_generator=NoFieldTitles)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **one_line(body)}


def schema_json() -> str:
    """The schema as the exact text of schemas/status.v1.json."""
    return json.dumps(schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _grouped(found: list[tuple[str, str]], wanted: int) -> list[str]:
    return [f"{n} of {wanted} pods {verb}: {reason}" for (verb, reason), n in Counter(found).items()]


def _stopped(config: ClusterConfig, s: Subject, cluster: Cluster, obj: Obj | None, pods: list[Obj]) -> tuple[list[str], bool]:
    """What a stopped workload left on the cluster, and whether it is as declared (it holds no quota of the queue)."""
    w = s.workload
    reasons = []
    if pods:
        reasons.append(f"{len(pods)} pod(s) still on the cluster (stopping, or started by hand: {cluster.drift()})")
    elif obj is not None and w.kind == "job":
        reasons.append(f"its Job {s.object} is still on the cluster ({cluster.up()} removes it)")
    q = config.queueing
    held = cluster.leftovers(s.kind, w.namespace, s.object, str(meta(obj).get("uid") or ""), q.cluster_queue) if q else []
    reasons += [stranded_reason(wl, "its Kueue Workload", "the queue's next runs wait for it", cluster) for wl in held]
    return reasons, not held


def _causes(config: ClusterConfig, s: Subject, cluster: Cluster, pods: list[Obj], live: list[Obj], to_run: int) -> list[tuple[str, str]]:
    """(verb, reason) of each pod that does not run: a live one not ready, one that failed (why a Job is not done yet),
    one the controller has not created (of the `to_run` pods)."""
    found = [pod_reason(config, s, p, cluster) for p in live if not holds(p, "Ready") or relaunched(p)]
    found += [("failed earlier", r[1]) for p in pods if not active(p) and (r := container_reason(config, s, p, cluster)) is not None]
    missing = to_run - len(live) - sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
    if missing > 0:
        found += [("not created", failed_create(config, s, cluster) or "not created yet (no event says why)")] * missing
    return found


def workload_status(config: ClusterConfig, s: Subject, cluster: Cluster) -> WorkloadStatus:
    """One workload's state, pods ready of wanted, and the reasons (the queue's word on an admitted run first)."""
    w = s.workload
    obj = cluster.get(s.kind, w.namespace, s.object)
    pods = cluster.pods(s.kind, w.namespace, s.object, obj)
    live = [p for p in pods if active(p) and not meta(p).get("deletionTimestamp")]
    ready = sum(1 for p in live if holds(p, "Ready") and not relaunched(p))
    base: dict[str, Any] = dict(config=located(s.path, config), location=provenance.shown(provenance.origin(config, s.path)))
    base |= dict(namespace=w.namespace, kind=w.kind, object=s.object, declared=w.state)
    if w.state == "stopped":
        left, ok = _stopped(config, s, cluster, obj, pods)
        return WorkloadStatus(**base, state="stopped", ready=ready, wanted=0, reasons=left, ok=ok)
    wanted = w.nodes
    if obj is None:
        absent = f"its {s.kind} {s.object} is not on the cluster: {cluster.up()} creates it (deleted by hand, or not deployed yet)"
        return WorkloadStatus(**base, state="missing", ready=0, wanted=wanted, reasons=[absent], ok=False)
    head: list[str] = []
    if (q := config.queueing) is not None:
        place, why = queue_place(config, q, s, cluster)
        base["queue"] = QueueStatus(local_queue=q.local_queue, cluster_queue=q.cluster_queue, **place)
        if place["admission"] != "admitted":
            # Its pods (a StatefulSet's, gated) or none (a suspended Job's) say nothing the queue does not.
            return WorkloadStatus(**base, state="pending", ready=0, wanted=wanted, reasons=[why], ok=False)
        head = [why] if why else []
    reasons: list[str] = []
    succeeded = 0
    if w.kind == "job":
        succeeded = int((obj.get("status") or {}).get("succeeded") or 0)
        if holds(obj, "Complete"):
            return WorkloadStatus(**base, state="succeeded", ready=succeeded, wanted=wanted, reasons=head, ok=True)
        if (failed := condition(obj, "Failed")).get("status") == "True":
            reasons = [f"the Job failed ({failed.get('reason')}: {cut(failed.get('message'))})"]
            reasons += _grouped([r for p in pods if (r := container_reason(config, s, p, cluster)) is not None], wanted)
            return WorkloadStatus(**base, state="failed", ready=succeeded, wanted=wanted, reasons=head + reasons, ok=False)
        ready += succeeded
    elif (replicas := (obj.get("spec") or {}).get("replicas")) is not None and replicas != wanted:
        reasons.append(f"the StatefulSet has {replicas} replicas on the cluster, {wanted} in the stack ({cluster.drift()})")
    # The pods the scheduler found no node for, not those that wait for a gate.
    unplaced = sum(1 for p in live if (c := condition(p, "PodScheduled")).get("status") == "False" and c.get("reason") == "Unschedulable")
    if q is not None and unplaced:
        head = [broken_admission(q, unplaced, wanted)]
    found = _causes(config, s, cluster, pods, live, wanted - succeeded)
    reasons = head + reasons + _grouped(found, wanted)
    failing = any(verb in ("failing", "failed") for verb, _ in found)
    state: WorkloadState = "running" if ready >= wanted else "failed" if failing else "pending"
    return WorkloadStatus(**base, state=state, ready=ready, wanted=wanted, reasons=reasons, ok=state == "running")


def verdict_of(log: str) -> str | None:
    """The last verdict a check's log holds (`bandwidth check: PASS (mode rdma)`), one line with its indented lines."""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("bandwidth check: ")]
    if not starts:
        return None
    indented = takewhile(lambda line: line.startswith("  "), lines[starts[-1] + 1 :])
    # A log line holds whatever the container wrote: cut to a line's worth.
    return "; ".join([cut(lines[starts[-1]]), *(cut(line.strip()) for line in indented if line.strip().startswith(("measured:", "FAIL:")))])


def check_status(config: ClusterConfig, index: int, check: BandwidthCheck, cluster: Cluster) -> CheckStatus:
    name = job_name(config, check)
    run = workload_status(config, Subject(("bandwidth_checks", index), check_workload(config, check), name), cluster)
    states: dict[str, CheckState] = {"succeeded": "passed", "failed": "failed", "running": "running", "missing": "missing"}
    state, verdict = states.get(run.state, "pending"), verdict_of(cluster.logs.get(f"{check.namespace}/{name}") or "")
    return CheckStatus(
        config=run.config, location=run.location, namespace=check.namespace, job=name, state=state, verdict=verdict, reasons=run.reasons,
        ok=state in ("passed", "running"),
    )  # fmt: skip


def stack_status(
    config: ClusterConfig, stack: str, context: str | None, objects: list[dict[str, Any]], logs: Mapping[str, str] | None = None,
    unreadable: Iterable[str] = (), source: str = "the objects read", saved: bool = False,
) -> StackStatus:  # fmt: skip
    """The status of every workload and enabled check of a stack, from the objects read (`source` names them in errors);
    the commands it prints name the stack and its context (None: the current one); `saved`: read from a file."""
    cluster = Cluster(kubectl.check(objects, source), logs or {}, context, stack)
    workloads = [workload_status(config, Subject(p, w, w.object_name), cluster) for p, w in config.located_workloads()]
    checks = [check_status(config, i, c, cluster) for i, c in enumerate(config.bandwidth_checks) if c.enabled]
    missing = list(unreadable)
    if not cluster.nodes and not any("nodes" in u for u in missing):
        missing.append("nodes: none in what was read, so the reasons count capacity from the config")
    return StackStatus(
        schema_version="1", stack=stack, cluster=config.name, context=None if saved else context, workloads=workloads, checks=checks,
        unreadable=missing, ok=all(w.ok for w in workloads) and all(c.ok for c in checks),
    )  # fmt: skip


def report(status: StackStatus) -> str:
    """One line per workload, with its reasons, then the checks' verdicts."""
    out = [f"{status.stack} ({status.cluster}): " + ("everything declared running runs" if status.ok else "not everything runs")]
    rows: list[tuple[WorkloadStatus | CheckStatus, str, list[str]]]
    rows = [(w, w.state + (f", {w.ready}/{w.wanted} pods ready" if w.wanted else ""), w.reasons) for w in status.workloads]
    rows += [(c, f"{c.state} (Job {c.job})", ([c.verdict] if c.verdict else []) + c.reasons) for c in status.checks]
    for row, state, said in rows:
        head = f"  {row.config}" + (f" ({row.location})" if row.location else "")
        out.append(f"{head}: {state}" + (": " + "; ".join(said) if said else ""))
    out += [f"  not read: {u}" for u in status.unreadable]
    # Each line holds what the cluster said: escaped, so none can recolour the screen or forge a line of its own.
    return "\n".join(escaped(line) for line in out) + "\n"
