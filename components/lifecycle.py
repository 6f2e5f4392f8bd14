"""What `pulumi up` waits for, per kind, and which changes replace an object: one place, read by the
components (the annotations they render), by `python -m stacks diff` (which marks replacements) and
by docs/lifecycle.md.

The facts behind it are the kubernetes provider's (pulumi-kubernetes 4.33/4.34, provider/pkg/await
and provider/pkg/provider/diff.go):
- `pulumi.com/waitFor` replaces the built-in await of create and update (not of delete): a JSONPath
  without a value waits until the field exists, with a value until its first result equals it.
  StatefulSet `status.replicas` counts the pods the controller created, Pending ones included, and is
  present even at 0. A Job gets `status.startTime` when the controller starts it, none while suspended.
- Without it, a StatefulSet is awaited until every pod is Ready (GPU scheduling), a Job until it
  completes (hours of training), a suspended Job until the timeout.
- A PVC is awaited until Bound (a fixed 5 minutes), except on a WaitForFirstConsumer class.
- Services without pods to wait for, ConfigMaps, RBAC, NetworkPolicies and every OpenShift kind
  (Route, BuildConfig, ImageStream, SCC, MachineConfig, NAD) and the SR-IOV operator's SriovNetwork and
  SriovNetworkNodePolicy are done once the API server accepts them.
"""

from __future__ import annotations

import re
from typing import Any

from config.kube import QUEUE_NAME

WAIT_FOR = "pulumi.com/waitFor"
SKIP_AWAIT = "pulumi.com/skipAwait"
PATCH_FORCE = "pulumi.com/patchForce"
# How long `pulumi up` may wait for a StatefulSet's pods to be created (an SCC or quota rejection shows up
# as pods that never exist, and fails the update after this long instead of the provider's 10 minutes), or
# for the Job controller to start a Job.
POD_CREATION_TIMEOUT = "5m"
# How much longer than a bandwidth check's deadline `pulumi up` waits for its verdict.
CHECK_MARGIN_MINUTES = 5


def statefulset_await(replicas: int) -> dict[str, str]:
    """Done when the pods exist (or are gone, when stopped): never waits on free GPUs."""
    return {WAIT_FOR: f"jsonpath={{.status.replicas}}={replicas}"}


def job_await(queued: bool = False) -> dict[str, str]:
    """A training Job: done when the controller has started it. Never its end. The controller sets startTime
    before it creates the pods, so an SCC or quota rejection of them does not fail `up` (it shows as FailedCreate
    events on the Job): the preflight's scc-grant rule and the grant read are what catch a missing grant first.
    A condition that held only once pods exist (`status.active`) would be gone again when the run ends, and
    hold every later update of the finished Job until it timed out.

    On a queued cluster Kueue's webhook creates the Job suspended, and it has no startTime until Kueue admits it, which
    may take hours: `up` does not wait for it at all (`python -m stacks status` says where it waits)."""
    if queued:
        return {SKIP_AWAIT: "true"}
    return {WAIT_FOR: "jsonpath={.status.startTime}"}


# A Job is the record of one run: the fields the provider would replace it for (its pod template above all)
# are never changed on an existing Job, so no edit of the stack, however unrelated (a node added to a set, a
# default changed), kills a running run or runs a finished one again. They take effect at the next run.
JOB_HELD_FIELDS = ("spec.template", "spec.completions", "spec.parallelism", "spec.selector")
HELD = "not applied to the Job that exists (the record of its run): it takes effect when the next run starts (raise run_number)"


# The "what pulumi up waits for" table of docs/lifecycle.md, in the order it is shown.
AWAITS: list[tuple[str, str]] = [
    (
        "StatefulSet",
        "until its pods exist (`status.replicas` equals the replicas; Pending pods count), at most "
        f"{POD_CREATION_TIMEOUT}: an SCC or quota rejection fails `up`, while free GPUs, image pulls and Ready "
        "never hold it. Stopped (0 replicas): until its pods are gone. On a queued cluster the same, and never for "
        "admission: Kueue's pods exist, gated, while the workload waits in the queue.",
    ),
    (
        "Job (training)",
        f"until the Job controller has started it (`status.startTime`), at most {POD_CREATION_TIMEOUT}. Never until it "
        "completes. The controller starts it before it creates the pods, so pods the SCC or a quota rejects do not fail "
        "`up`: they show as FailedCreate events (`oc describe job`); the preflight and the grant read catch a missing "
        "grant before. A stopped Job is not declared.",
    ),
    (
        "Job (training, queued cluster)",
        "not at all (`pulumi.com/skipAwait`): Kueue creates it suspended and it starts only when admitted, which may take "
        "hours; `python -m stacks status` says where it waits.",
    ),
    (
        "Job (bandwidth check)",
        f"until its verdict: Complete, or Failed at once; at most deadline_minutes + {CHECK_MARGIN_MINUTES}. The "
        "running workloads of its transport are declared after it; the stopped ones before it, so their nodes are free when "
        "it starts (a stopped Job is deleted at the end of `up`, after the check). On a queued cluster its time in "
        "the queue counts too: a check Kueue does not admit within that time fails `up`.",
    ),
    ("PersistentVolumeClaim", "until Bound on an Immediate class (the provider's fixed 5 minutes); not at all on WaitForFirstConsumer."),
    (
        "everything else",
        "not at all: Services (headless, or with `pulumi.com/skipAwait` for the developer tools, whose pod may not be "
        "Ready), ConfigMaps, ServiceAccounts, RBAC, NADs, NetworkPolicies, Routes, BuildConfigs, ImageStreams, SCCs, "
        "MachineConfigs, SriovNetworks and SriovNetworkNodePolicies are done when the API server accepts them (the SR-IOV operator "
        "acts on the last two afterwards: docs/networks.md). Reads of what the stack relies on take a moment each.",
    ),
]

# Kueue's StatefulSet webhook refuses, on a StatefulSet it manages (one with the queue-name label), every change of its
# pod's "shape" however many replicas it has (pkg/controller/jobs/statefulset/statefulset_webhook.go ValidateUpdate,
# jobframework.ValidateImmutablePodGroupPodSpec over pkg/util/pod SpecShape: the containers' requests and ports, node
# selector, affinity, tolerations, and fields this program never sets). Such a change replaces the StatefulSet instead
# (replaceOnChanges): the new one is a new Kueue Workload, which waits in the queue again. Its other fields (image, env,
# volumes) update in place as on any cluster.
QUEUED_SHAPE = (
    "spec.template.spec.containers[*].resources.requests",
    "spec.template.spec.containers[*].ports",
    "spec.template.spec.nodeSelector",
    "spec.template.spec.affinity",
    "spec.template.spec.tolerations",
)
QUEUED_REPLACE = (
    "Kueue refuses a change of the pods' requests, ports, node selector, affinity or tolerations on a queued StatefulSet, so "
    "it is deleted and created again (per-pod claims are kept, Retain): REQUEUED, the run waits in the queue again and restarts "
    "when admitted"
)
QUEUED_START = "it waits in the queue until Kueue admits all its pods at once (`python -m stacks status` says where it waits)"
# And a resize from N to M pods, neither 0 (the webhook allows only a scale to 0 and from 0): the preflight's
# `queue-edits` rule refuses that first (stop the workload, then start it at its new size).


def queued_replacements(obj: dict[str, Any]) -> list[str] | None:
    """The replaceOnChanges of a queued StatefulSet (QUEUED_SHAPE); None for anything else."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return list(QUEUED_SHAPE) if obj.get("kind") == "StatefulSet" and QUEUE_NAME in labels else None


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
    """What changing `path` of a `kind` costs, when the provider replaces the object for it."""
    if path.startswith(IDENTITY):
        return RENAME
    fields, cost = REPLACES.get(kind, ((), ""))
    return cost if _under(path, fields) else None


# A StatefulSet's pod template updates in place, but the controller then replaces its pods one by one: to a
# multi-node training run that is a restart. Some such changes come from edits elsewhere in the stack (a node
# added to a named node set changes the NotIn list of every workload on an unnamed set).
RESTARTS = {"StatefulSet": ("spec.template",)}
RESTART = "its pods are replaced one by one: a running training run is interrupted and starts again"


def restarts(kind: str, path: str) -> bool:
    """Whether a change of `path` restarts the pods of a `kind` (updated in place, not replaced)."""
    return _under(path, RESTARTS.get(kind, ()))


def held(kind: str, path: str) -> bool:
    """Whether a change of `path` is held for the next run (a Job's template)."""
    return kind == "Job" and _under(path, JOB_HELD_FIELDS)


# Ownership (docs/lifecycle.md "Drift"). The provider applies every object by server-side apply, so ownership is
# per field: the stack owns exactly the fields it declares, and a field it does not declare (what an operator,
# OpenShift's controllers or a person adds: a ServiceAccount's pull secrets, an annotation, an env variable added by
# hand) stays theirs. A hand edit of a declared field (`oc scale`, `oc set env` of a variable the stack sets,
# `oc label --overwrite`) moves that field to another field manager; after a refresh the next `up` applies the
# declared value again and, without force, stops at that manager's claim (an SSA conflict), every time.
# `pulumi.com/patchForce` (read per object by the provider: await.go patchForce) makes the apply take the
# declared fields back. It is set on every object the stack creates, and never on:
# - patches of objects that others own (the claim fixes): the stack declares a few of their fields, not the object;
# - objects listed in `hand_made`: adopting one narrows what someone made by hand, which `adopt-diff` must show
#   and the adoption run force once, on purpose (docs/adoption.md); a drifted adopted object stops `up` with the
#   conflict, whose fix is that procedure again.
def owned(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with `pulumi.com/patchForce`: the next `up` restores what it declares over hand edits."""
    meta = dict(obj["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), PATCH_FORCE: "true"}
    return {**obj, "metadata": meta}
