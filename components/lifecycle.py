"""What `pulumi up` waits for, per kind, and which changes replace an object (docs/lifecycle.md). The provider (4.33,
provider/pkg/await, diff.go): `pulumi.com/waitFor` replaces its await; without it a StatefulSet waits until every pod is
Ready, a Job until it completes, a PVC until Bound; every other kind is done once the API server accepts it."""

import re
from typing import Any

from config.kube import QUEUE_NAME

WAIT_FOR = "pulumi.com/waitFor"
SKIP_AWAIT = "pulumi.com/skipAwait"
PATCH_FORCE = "pulumi.com/patchForce"
# How long `up` waits for a StatefulSet's pods to exist (an SCC or quota rejection fails then) or a Job to start.
POD_CREATION_TIMEOUT = "5m"
# How much longer than a bandwidth check's deadline `pulumi up` waits for its verdict.
CHECK_MARGIN_MINUTES = 5


def statefulset_await(replicas: int) -> dict[str, str]:
    """Done when the pods exist (or are gone, when stopped): never waits on free GPUs."""
    return {WAIT_FOR: f"jsonpath={{.status.replicas}}={replicas}"}


def job_await(queued: bool = False) -> dict[str, str]:
    """Not `status.active`: gone when the run ends, it would hold every later update. A queued Job is not awaited."""
    return {SKIP_AWAIT: "true"} if queued else {WAIT_FOR: "jsonpath={.status.startTime}"}


# A Job is the record of one run: no edit of the stack kills a running run or runs a finished one again.
JOB_HELD_FIELDS = ("spec.template", "spec.completions", "spec.parallelism", "spec.selector")
HELD = "not applied to the Job that exists (the record of its run): it takes effect when the next run starts (raise run_number)"


# Kueue's webhook refuses a change of a queued StatefulSet's pod "shape" (statefulset_webhook.go): it replaces instead.
SHAPE = ("containers[*].resources.requests", "containers[*].ports", "nodeSelector", "affinity", "tolerations")
QUEUED_SHAPE = tuple("spec.template.spec." + field for field in SHAPE)
QUEUED_REPLACE = "Kueue refuses a change of the pods' requests, ports, node selector, affinity or tolerations on a queued StatefulSet, "
QUEUED_REPLACE += "so it is deleted and created again (per-pod claims are kept, Retain): REQUEUED, the run waits in the queue again and "
QUEUED_REPLACE += "restarts when admitted"
QUEUED_START = "it waits in the queue until Kueue admits all its pods at once (`python -m stacks status` says where it waits)"


def queued_replacements(obj: dict[str, Any]) -> list[str] | None:
    return list(QUEUED_SHAPE) if obj["kind"] == "StatefulSet" and QUEUE_NAME in obj["metadata"]["labels"] else None


def queued_replacement(kind: str, path: str) -> str | None:
    """What changing `path` (as `python -m stacks diff` writes it: `containers[training]`) of a queued `kind` costs."""
    if kind != "StatefulSet":
        return None
    for shape in QUEUED_SHAPE:
        head, _, tail = shape.partition("[*]")
        if path.startswith(head) and (not tail or re.match(r"\[[^\]]*\]" + re.escape(tail) + r"($|[.\[])", path[len(head) :])):
            return QUEUED_REPLACE
    return None


# Field paths whose change makes the provider replace the object (diff.go), and what that costs.
RENAME = "a new object is created and the old one deleted (for a StatefulSet: its pods restart under the new name)"
REPLACES: dict[str, tuple[tuple[str, ...], str]] = {
    "StatefulSet": (
        ("spec.volumeClaimTemplates", "spec.serviceName", "spec.podManagementPolicy", "spec.selector", "spec.revisionHistoryLimit"),
        "the StatefulSet is deleted, then created again: every pod restarts at once; per-pod claims are kept "
        "(Retain) and re-attached by name, but a new size or class in the template never reaches an existing claim",
    ),
    "PersistentVolumeClaim": (
        ("spec.accessModes", "spec.storageClassName", "spec.selector", "spec.volumeName"),
        "the claim would be deleted with its data: it is protected, so `pulumi up` stops with an error instead",
    ),
    "Service": (("spec.clusterIP",), "the Service is deleted, then created again"),
    "RoleBinding": (("roleRef",), "the grant is deleted, then created again"),
    "LocalQueue": (
        ("spec.clusterQueue",),
        "the LocalQueue is deleted, then created again (its clusterQueue is immutable; the program asks for the replacement: "
        "replaceOnChanges): admitted runs keep running, waiting ones wait in the new ClusterQueue",
    ),
}
# What removing an object from the stack costs, beyond its deletion.
REMOVES = {
    "PersistentVolumeClaim": "deleting a claim deletes its data: it is protected, so `pulumi up` stops with an error instead",
    "Job": "the Job is deleted: a running run ends, a finished one's record (and logs) goes",
    "StatefulSet": "the StatefulSet and its pods are deleted (per-pod claims stay: Retain)",
}
PATCH_REMOVED = "the patch is dropped: the object keeps its fields as they are (retainOnDelete), only no longer managed by the stack"
# Everything renamed or moved: metadata.name and metadata.namespace always replace.
IDENTITY = ("metadata.name", "metadata.namespace")


def _under(path: str, fields: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f + ".") or path.startswith(f + "[") for f in fields)


def replacement(kind: str, path: str) -> str | None:
    if path.startswith(IDENTITY):
        return RENAME
    fields, cost = REPLACES.get(kind, ((), ""))
    return cost if _under(path, fields) else None


RESTART = "its pods are replaced one by one: a running training run is interrupted and starts again"


def restarts(kind: str, path: str) -> bool:
    # A StatefulSet's pod template updates in place, but its pods are then replaced one by one: a restart of the run.
    return kind == "StatefulSet" and _under(path, ("spec.template",))


def held(kind: str, path: str) -> bool:
    return kind == "Job" and _under(path, JOB_HELD_FIELDS)


def owned(obj: dict[str, Any]) -> dict[str, Any]:
    """`pulumi.com/patchForce`: `up` takes its fields back from a hand edit (else an SSA conflict stops every `up`)."""
    meta = obj["metadata"]
    return {**obj, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}), PATCH_FORCE: "true"}}}
