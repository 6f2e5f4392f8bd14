"""A synthetic cluster for the tools that read one (status, drift, recover), its objects shaped as the API server returns
them: each with its uid, a pod with its controller's ownerReference, a Job with the selector and controller-uid label
the Job controller gives it, an event naming the uid of the object it is about, a Kueue Workload owned (by uid) by its
StatefulSet or Job. The configs are the tests' own (tests/fixtures.py)."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from components.bandwidth import job_name
from config.stack import ClusterConfig
from tests import fixtures
from tools import drift

Obj = dict[str, Any]
JOB_UID = "batch.kubernetes.io/controller-uid"


def uid(*parts: str) -> str:
    """A uid of the form the API server gives (a UUID), the same for the same parts."""
    h = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def declared(config: ClusterConfig, generation: str = "1") -> dict[str, Obj]:
    """The StatefulSets and Jobs the stack declares, by name, as the cluster holds them (`generation` tells a replaced
    object from the one before: another uid)."""
    out = {}
    for d in drift.declared_for(config, "all"):
        obj = copy.deepcopy(d.object)
        if obj["kind"] not in ("StatefulSet", "Job"):
            continue
        meta = obj["metadata"]
        meta["uid"] = uid(obj["kind"], meta["namespace"], meta["name"], generation)
        if obj["kind"] == "Job":  # the API server's selector for a Job, and the label its pods carry
            obj["spec"]["selector"] = {"matchLabels": {JOB_UID: meta["uid"]}}
            obj["spec"]["template"]["metadata"]["labels"][JOB_UID] = meta["uid"]
        out[meta["name"]] = obj
    return out


def pod(owner: Obj, index: int, node: str | None = "node-a", ready: bool = True, phase: str = "Running", **container: Any) -> Obj:
    """A pod of a StatefulSet or Job as its controller makes it: the template's labels, the controller's reference
    with the owner's uid, a uid of its own (a replaced pod of the same name has another)."""
    template, meta = owner["spec"]["template"], owner["metadata"]
    name = f"{meta['name']}-{index}" + ("-x7k2p" if owner["kind"] == "Job" else "")
    labels = dict(template["metadata"]["labels"])
    if owner["kind"] == "Job":
        labels["batch.kubernetes.io/job-name"] = meta["name"]
    spec = copy.deepcopy(template["spec"])
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if node:
        spec["nodeName"] = node
        conditions.append({"type": "PodScheduled", "status": "True"})
    statuses = [{"name": "training", "image": spec["containers"][0]["image"], "restartCount": 0, **container}] if node else []
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"], "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": uid("Pod", meta["namespace"], name, meta["uid"], str(ready), str(node)),
            "labels": labels,
            "ownerReferences": [ref],
        },
        "spec": spec,
        "status": {"phase": phase, "conditions": conditions, "containerStatuses": statuses},
    }


def pending(owner: Obj, index: int, message: str) -> Obj:
    p = pod(owner, index, node=None, ready=False, phase="Pending")
    p["status"]["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message})
    return p


def node(name: str, gpus: int = 4) -> Obj:
    allocatable = {
        "cpu": "120",
        "memory": "1000Gi",
        "nvidia.com/gpu": str(gpus),
        "openshift.io/port1rdma": "8",
        "openshift.io/port2rdma": "8",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": uid("Node", name), "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": allocatable},
    }


def event(about: Obj, reason: str, message: str, at: str = "2026-11-25T10:00:00Z", kind: str = "Warning") -> Obj:
    """An event about an object, naming its kind, namespace, name and uid (core/v1 involvedObject)."""
    meta = about["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{reason.lower()}",
            "namespace": meta["namespace"],
            "uid": uid("Event", meta["name"], reason, at),
        },
        "involvedObject": {"kind": about["kind"], "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
        "reason": reason,
        "message": message,
        "type": kind,
        "lastTimestamp": at,
    }


def condition(kind: str, state: str, reason: str = "", message: str = "") -> Obj:
    return {"type": kind, "status": state, "reason": reason, "message": message}


def kueue_workload(owner: Obj, *conditions: Obj, name: str | None = None) -> Obj:
    """A Kueue Workload as Kueue v0.17.0 makes one for a StatefulSet or Job: owned by it (by uid), with its conditions."""
    meta = owner["metadata"]
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"], "controller": True}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name or f"{owner['kind'].lower()}-{meta['name']}-{meta['uid'][:5]}",
            "namespace": meta["namespace"],
            "uid": uid("Workload", meta["uid"]),
            "ownerReferences": [ref],
        },  # fmt: skip
        "spec": {"queueName": "gpu-training"},
        "status": {"conditions": list(conditions)},
    }


def complete(job: Obj) -> Obj:
    job["status"] = {"succeeded": job["spec"]["completions"], "conditions": [{"type": "Complete", "status": "True"}]}
    return job


def running(name: str = "roce", edit: Any = None) -> tuple[ClusterConfig, dict[str, Obj], list[Obj]]:
    """A fixture cluster with everything declared running running (roce: dev on node-a/b, train on node-e/f, solo on
    node-g, the check done), with its nodes."""
    config = fixtures.config(name, edit)
    objs = declared(config)
    for check in config.enabled_checks():
        complete(objs[job_name(config, check)])
    pods = [pod(objs["dev"], 0, "node-a"), pod(objs["dev"], 1, "node-b")]
    pods += [pod(objs["train-r1"], 0, "node-e"), pod(objs["train-r1"], 1, "node-f"), pod(objs["solo"], 0, "node-g")]
    return config, objs, [*pods, *(node(f"node-{c}") for c in "abcdefg")]


def stranded_workload(owner: Obj, job_uid: str, gpus: int = 8, name: str | None = None, queue: str = "gpu") -> Obj:
    """The Workload Kueue v0.17.0 can leave when a queued StatefulSet is stopped (kueue#12232): made for the StatefulSet
    (job-uid label, owner-name and owner-gvk annotations, as statefulset_reconciler.go constructWorkload sets them), its
    owner references gone, its quota of ClusterQueue `queue` still reserved and admitted."""
    wl = kueue_workload(owner, condition("QuotaReserved", "True", "QuotaReserved"), condition("Admitted", "True"))
    wl["metadata"]["name"] = name or wl["metadata"]["name"]
    meta = wl["metadata"]
    del meta["ownerReferences"]
    meta["labels"] = {"kueue.x-k8s.io/job-uid": job_uid}
    gvk = f"{owner['apiVersion']}, Kind={owner['kind']}"  # apimachinery's GroupVersionKind.String()
    meta["annotations"] = {"kueue.x-k8s.io/job-owner-name": owner["metadata"]["name"], "kueue.x-k8s.io/job-owner-gvk": gvk}
    wl["status"]["admission"] = {
        "clusterQueue": queue,
        "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "roce-main"}, "resourceUsage": {"nvidia.com/gpu": str(gpus)}}],
    }
    return wl


def workbench(name: str, namespace: str) -> Obj:
    """Another owner's StatefulSet, as OpenShift AI stops a workbench: at 0 replicas, none of this program's labels."""
    labels = {"app": name, "opendatahub.io/notebook": "true"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "uid": uid("StatefulSet", namespace, name, "workbench"), "labels": labels},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"statefulset": name}}},
        "status": {"replicas": 0},
    }
