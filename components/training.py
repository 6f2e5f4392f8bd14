"""One training workload: its headless Service, and StatefulSet, Job or Pod; the launcher ConfigMaps.

Every pod of every kind comes from one template builder (`pod_template`), so a StatefulSet, an
Indexed Job and a single Pod of the same workload differ only in the wrapper. The pod starts through
the launcher (components/launcher/launcher.py, shipped verbatim in a ConfigMap), which proves memory
can be pinned, picks the live RDMA devices and execs torchrun or the workload's command.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components.kube import MANAGED_BY, NETWORKS, REQUIRED_SCC, declare
from components.launcher import LAUNCHER_PATH
from components.networks import attachment_ref
from components.storage import claim_spec, per_pod_claim_name
from stacks.model import STRATEGY_CAPABILITIES, STRATEGY_RUNS_AS_ROOT, ClusterConfig, Workload

LAUNCHER_DIR = "/opt/launcher"
# One ConfigMap per namespace carries the launcher modules for every pod there: a launcher change is
# one object in a review, not one per workload.
LAUNCHER_CONFIGMAP = "gpu-training-launcher"
CONTAINER = "training"


@dataclass(frozen=True)
class Names:
    """What a workload's objects and pods are called on the cluster."""

    workload: Workload

    @property
    def service(self) -> str:
        return f"{self.workload.name}-headless"

    @property
    def launcher(self) -> str:
        return LAUNCHER_CONFIGMAP

    @property
    def headless_dns(self) -> str:
        return f"{self.service}.{self.workload.namespace}.svc.cluster.local"

    def pod(self, rank: int) -> str:
        # StatefulSet pods are NAME-ORDINAL; Indexed Job pods get the hostname NAME-INDEX.
        return self.workload.name if self.workload.kind == "pod" else f"{self.workload.name}-{rank}"

    @property
    def master_addr(self) -> str:
        if self.workload.kind == "pod":
            return "localhost"
        return f"{self.pod(0)}.{self.headless_dns}"


def launcher_files() -> dict[str, str]:
    """Every standard-library module of components/launcher/, verbatim: the ConfigMap holds the
    tested files, not copies."""
    folder = LAUNCHER_PATH.parent
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py")) if p.name != "__init__.py"}


def nccl_env(config: ClusterConfig, w: Workload) -> dict[str, str]:
    """The NCCL settings the program renders. The launcher adds what it detects in the pod
    (NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME) unless a value here pins it."""
    env: dict[str, str] = {}
    fabric = config.fabric
    if w.transport == "rdma" and fabric is not None:
        env["NCCL_IB_DISABLE"] = "0"
        env["NCCL_NET_GDR_LEVEL"] = fabric.gdr_level
        if fabric.static_hca:
            env["NCCL_IB_HCA"] = "=" + ",".join(fabric.devices)  # '=': exact names, not prefixes
        if fabric.gid_index is not None and fabric.link_layer == "roce-v2":
            env["NCCL_IB_GID_INDEX"] = str(fabric.gid_index)
    else:
        env["NCCL_IB_DISABLE"] = "1"
    env.update({k: v for k, v in w.env.items() if k.startswith("NCCL_")})
    return env


def launcher_env(config: ClusterConfig, w: Workload) -> dict[str, str]:
    """The launcher's whole input (see the contract in components/launcher/launcher.py)."""
    names = Names(w)
    fabric = config.fabric
    interfaces = [a.interface for a in fabric.attachments] if (fabric and w.transport == "rdma") else []
    return {
        "LAUNCHER_MODE": w.transport,
        "LAUNCHER_MEMLOCK_STRATEGY": config.memlock_of(w),
        "LAUNCHER_PIN_BYTES": str(config.defaults.pin_bytes),
        "LAUNCHER_TCP_FALLBACK": "true" if w.tcp_fallback else "false",
        "LAUNCHER_RDMA_INTERFACES": ",".join(interfaces),
        "LAUNCHER_TCP_SOCKET_IFNAME": config.defaults.tcp_socket_ifname,
        "LAUNCHER_NNODES": str(w.nodes),
        "LAUNCHER_GPUS_PER_NODE": str(w.gpus_per_node),
        "LAUNCHER_RUN": w.run,
        "LAUNCHER_ARGS": json.dumps(w.args),
        "MASTER_ADDR": names.master_addr,
        "MASTER_PORT": str(w.master_port),
    }


def container_security(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    """The memlock strategy as a securityContext (KNOWLEDGE.md's table)."""
    strategy = config.memlock_of(w)
    if strategy == "privileged":
        # privileged grants every capability, ambient included; escalation cannot be forbidden then.
        return {"privileged": True, "allowPrivilegeEscalation": True}
    ctx: dict[str, Any] = {"allowPrivilegeEscalation": False}
    caps = list(STRATEGY_CAPABILITIES[strategy])
    if caps:
        ctx["capabilities"] = {"add": caps}
    if strategy in STRATEGY_RUNS_AS_ROOT:
        # Added capabilities reach the effective set only for uid 0.
        ctx["runAsUser"] = 0
        ctx["runAsNonRoot"] = False
    return ctx


def resources(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    amounts: dict[str, Any] = {"cpu": w.cpu, "memory": w.memory, "nvidia.com/gpu": w.gpus_per_node}
    if w.transport == "rdma" and config.fabric is not None:
        for a in config.fabric.attachments:
            amounts[a.resource] = 1  # one VF per attachment, else the pod stays Pending
    return {"requests": dict(amounts), "limits": dict(amounts)}


def labels(w: Workload) -> dict[str, str]:
    return {"app.kubernetes.io/name": w.name, "app.kubernetes.io/instance": w.name, **MANAGED_BY}


def selector(w: Workload) -> dict[str, str]:
    return {"app.kubernetes.io/instance": w.name}


def affinity(w: Workload) -> dict[str, Any] | None:
    aff: dict[str, Any] = {}
    if w.nodes > 1:
        # One pod per node: a pod takes all of a node's GPUs and NICs.
        aff["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": selector(w)}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    if w.node_names:
        aff["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(w.node_names)}]}
                ]
            }
        }
    return aff or None


def pod_template(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    """The pod every kind of workload runs."""
    names = Names(w)
    annotations = {REQUIRED_SCC: config.security.scc}
    fabric = config.fabric
    if w.transport == "rdma" and fabric is not None and fabric.attachments:
        annotations[NETWORKS] = ",".join(attachment_ref(config, w.namespace, a.network, a.interface) for a in fabric.attachments)

    env = {**launcher_env(config, w), **nccl_env(config, w), **w.env}
    env_list: list[dict[str, Any]] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    env_list += [{"name": k, "value": v} for k, v in env.items()]

    mounts = [
        {"name": "launcher", "mountPath": LAUNCHER_DIR, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "launcher", "configMap": {"name": names.launcher, "defaultMode": 0o555}},
        # NCCL and DataLoader workers share memory through /dev/shm; the runtime's 64 MiB is too small.
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": w.shm_size}},
    ]
    for m in w.mounts:
        v = config.volume(w.namespace, m.volume)
        mounts.append({"name": v.name, "mountPath": m.mount_path or v.mount_path})
        if v.shared:
            volumes.append({"name": v.name, "persistentVolumeClaim": {"claimName": v.name}})
        elif w.kind == "pod":
            volumes.append({"name": v.name, "persistentVolumeClaim": {"claimName": per_pod_claim_name(v, w.name)}})
        # statefulset: the claim comes from volumeClaimTemplates under the same name

    spec: dict[str, Any] = {
        "serviceAccountName": w.service_account,
        "enableServiceLinks": False,  # no service env vars next to MASTER_ADDR and friends
        "restartPolicy": "Always" if w.kind == "statefulset" else "Never",
        "containers": [
            {
                "name": CONTAINER,
                "image": w.image,
                "command": ["python3", f"{LAUNCHER_DIR}/launcher.py"],
                "env": env_list,
                "resources": resources(config, w),
                "securityContext": container_security(config, w),
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }
    aff = affinity(w)
    if aff:
        spec["affinity"] = aff
    if w.kind == "job":
        spec["subdomain"] = names.service  # Indexed Job pods resolve as NAME-INDEX.SERVICE
    return {"metadata": {"labels": labels(w), "annotations": annotations}, "spec": spec}


def headless_service(w: Workload) -> dict[str, Any]:
    names = Names(w)
    return {
        "metadata": {"name": names.service, "namespace": w.namespace, "labels": labels(w)},
        "spec": {
            "clusterIP": "None",
            # Pod DNS names must resolve before the pods are Ready, or torchrun's rendezvous times out.
            "publishNotReadyAddresses": True,
            "selector": selector(w),
            "ports": [{"name": "rendezvous", "port": w.master_port, "targetPort": w.master_port, "protocol": "TCP"}],
        },
    }


def claim_templates(config: ClusterConfig, w: Workload) -> list[dict[str, Any]]:
    out = []
    for m in w.mounts:
        v = config.volume(w.namespace, m.volume)
        if not v.shared:
            out.append({"metadata": {"name": v.name, "labels": dict(MANAGED_BY)}, "spec": claim_spec(v)})
    return out


def statefulset_spec(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "serviceName": Names(w).service,
        "replicas": w.nodes,
        "podManagementPolicy": "Parallel",  # all ranks start together; rendezvous waits for them
        "selector": {"matchLabels": selector(w)},
        "template": pod_template(config, w),
    }
    templates = claim_templates(config, w)
    if templates:
        spec["volumeClaimTemplates"] = templates
        # Per-pod workspaces are data: neither deleting the StatefulSet nor scaling it down removes them.
        spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Retain"}
    return spec


def job_spec(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "completionMode": "Indexed",  # JOB_COMPLETION_INDEX is the node rank
        "completions": w.nodes,
        "parallelism": w.nodes,
        "backoffLimit": w.backoff_limit,
        "template": pod_template(config, w),
    }
    if w.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = w.ttl_seconds_after_finished
    return spec


def workload_outputs(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    """What other tools read about a workload from the stack outputs."""
    names = Names(w)
    return {
        "namespace": w.namespace,
        "kind": w.kind,
        "mode": w.transport,
        "replicas": w.nodes,
        "gpus_per_node": w.gpus_per_node,
        "world_size": w.nodes * w.gpus_per_node,
        "headless_service": None if w.kind == "pod" else names.headless_dns,
        "master_addr": names.master_addr,
        "master_port": w.master_port,
        "memlock_strategy": config.memlock_of(w),
        "nccl_env": nccl_env(config, w),
        "pods": [names.pod(r) for r in range(w.nodes)],
    }


def launcher_objects(namespaces: list[str]) -> list[dict[str, Any]]:
    """The launcher ConfigMap of each namespace that runs pods of this program."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": LAUNCHER_CONFIGMAP, "namespace": ns, "labels": dict(MANAGED_BY)},
            "data": launcher_files(),
        }
        for ns in sorted(set(namespaces))
    ]


def workload_objects(config: ClusterConfig, w: Workload) -> list[dict[str, Any]]:
    """The headless Service (multi-node kinds) and the workload itself; the last is the workload."""
    meta = {"name": w.name, "namespace": w.namespace, "labels": labels(w)}
    objs: list[dict[str, Any]] = []
    if w.kind != "pod":
        objs.append({"apiVersion": "v1", "kind": "Service", **headless_service(w)})
    if w.kind == "statefulset":
        objs.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": statefulset_spec(config, w)})
    elif w.kind == "job":
        objs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec(config, w)})
    else:
        tpl = pod_template(config, w)
        objs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, **tpl["metadata"]}, "spec": tpl["spec"]})
    return objs


class LauncherScripts(pulumi.ComponentResource):
    """The launcher ConfigMap in every namespace that runs training pods."""

    def __init__(self, name: str, namespaces: list[str], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-training:index:LauncherScripts", name, None, opts)
        for obj in launcher_objects(namespaces):
            declare(obj, pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


class TrainingWorkload(pulumi.ComponentResource):
    """Headless Service + StatefulSet / Indexed Job / Pod for one workload."""

    master_addr: pulumi.Output[str]

    def __init__(
        self, config: ClusterConfig, w: Workload, after: Sequence[pulumi.Resource] = (), opts: pulumi.ResourceOptions | None = None
    ) -> None:
        """`after`: what the pods need before they can start (grant, networks, claims, launcher)."""
        super().__init__("gpu-training:index:TrainingWorkload", f"{w.namespace}/{w.name}", None, opts)
        *support, main = workload_objects(config, w)
        declared = [declare(obj, pulumi.ResourceOptions(parent=self)) for obj in support]
        # Explicit object names cannot coexist with their replacement: delete first on replace.
        declare(main, pulumi.ResourceOptions(parent=self, delete_before_replace=True, depends_on=[*declared, *after]))
        self.master_addr = pulumi.Output.from_input(Names(w).master_addr)
        self.register_outputs({"master_addr": self.master_addr})
