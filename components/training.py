"""One training workload: its headless Service, NetworkPolicy, StatefulSet or Job, and the Service and
Routes of its developer tools; the ConfigMaps the pods mount (launcher, scripts).

Every pod of every kind comes from one template builder (`pod_template`), so a StatefulSet and an
Indexed Job of the same workload differ only in the wrapper. The pod starts through the launcher
(components/launcher/launcher.py, shipped verbatim in a ConfigMap), which proves memory can be
pinned, picks the RDMA devices behind the pod's networks and execs torchrun or the workload's command.

Lifecycle (components/lifecycle.py): a StatefulSet is awaited until its pods exist, never until they
are Ready; a Job until the controller started it, never until it completes. Stopping a workload keeps
its claims and definitions: a StatefulSet goes to 0 replicas; a Job, the record of one run, is removed (starting
it again creates it from the config of that moment). An existing Job never takes a change of its template: that
waits for the next run (run_number).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from components.kube import MANAGED_BY, Sourced
from components.launcher import LAUNCHER_PATH
from components.lifecycle import SKIP_AWAIT, job_await, statefulset_await
from components.networks import attachment_ref
from components.storage import claim_spec, per_pod_claim_name
from config.kube import HOSTNAME, INSTANCE, NETWORKS, PRIORITY_CLASS, QUEUE_NAME, REQUIRED_SCC, UNCONSTRAINED_TOPOLOGY
from config.stack import ClusterConfig
from config.values import LAUNCHER_DIR, STRATEGY_CAPABILITIES, STRATEGY_RUNS_AS_ROOT, kubelet_escape
from config.workloads import Workload

# One ConfigMap per namespace carries the launcher modules for every pod there: a launcher change is
# one object in a review, not one per workload, and (with the provider's enableConfigMapMutable) an
# update in place that restarts nothing.
LAUNCHER_CONFIGMAP = "gpu-training-launcher"
CONTAINER = "training"
# The label the StatefulSet controller and the Job controller put on a pod to say which one it is.
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
# OpenShift's router pods run in namespaces labelled with this policy group.
INGRESS_POLICY_GROUP = "policy-group.network.openshift.io/ingress"


@dataclass(frozen=True)
class Names:
    """What a workload's objects and pods are called on the cluster."""

    workload: Workload
    job_name: str | None = None
    """A Job name other than the workload's NAME-rRUN (a bandwidth check's carries a digest)."""

    @property
    def object(self) -> str:
        return self.job_name or self.workload.object_name

    @property
    def service(self) -> str:
        return f"{self.workload.name}-headless"

    @property
    def dev_service(self) -> str:
        return f"{self.workload.name}-dev"

    def route(self, port: str) -> str:
        return f"{self.workload.name}-{port}"

    @property
    def headless_dns(self) -> str:
        return f"{self.service}.{self.workload.namespace}.svc.cluster.local"

    def pod(self, rank: int) -> str:
        # StatefulSet pods are NAME-ORDINAL; Indexed Job pods get the hostname JOBNAME-INDEX.
        return f"{self.object}-{rank}"

    def pod_dns(self, rank: int) -> str:
        return f"{self.pod(rank)}.{self.headless_dns}"

    @property
    def master_addr(self) -> str:
        return "127.0.0.1" if self.workload.nodes == 1 else self.pod_dns(0)


@cache
def _launcher_sources() -> tuple[tuple[str, str], ...]:
    folder = LAUNCHER_PATH.parent
    return tuple((p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.py")) if p.name != "__init__.py")


def launcher_files() -> dict[str, str]:
    """Every standard-library module of components/launcher/, verbatim: the ConfigMap holds the
    tested files, not copies (read once per process)."""
    return dict(_launcher_sources())


def nccl_env(config: ClusterConfig, w: Workload) -> dict[str, str]:
    """The NCCL settings the program renders: the transport's, the stack's tuning, the workload's.
    The launcher adds what it detects in the pod (NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME)
    unless a value here pins it; anything else NCCL_* the image sets it treats as inherited and checks."""
    env: dict[str, str] = {}
    fabric = config.fabric
    if w.transport == "rdma" and fabric is not None:
        env["NCCL_IB_DISABLE"] = "0"
        env["NCCL_NET_GDR_LEVEL"] = fabric.gdr_level
        if fabric.static_hca:
            env["NCCL_IB_HCA"] = "=" + ",".join(fabric.devices)  # '=': exact names, not prefixes
        if fabric.gid_index is not None and fabric.link_layer == "roce-v2":
            env["NCCL_IB_GID_INDEX"] = str(fabric.gid_index)
        env.update(config.defaults.nccl_env_rdma)
    else:
        env["NCCL_IB_DISABLE"] = "1"
        env.update(config.defaults.nccl_env_tcp)
    env.update({k: v for k, v in w.env.items() if k.startswith("NCCL_")})
    return env


def launcher_env(config: ClusterConfig, w: Workload, names: Names) -> dict[str, str]:
    """The launcher's whole input (see the contract in components/launcher/launcher.py).

    Where a config name changes on its way into the pod, it changes here (the launcher's names are its own: it
    ships as one file into any image):

      config (the stack file)   pod
      transport                 LAUNCHER_MODE (the launcher's "mode")
      nodes                     LAUNCHER_NNODES (torchrun's --nnodes); StatefulSet replicas, Job completions and parallelism
      memlock (or the default)  LAUNCHER_MEMLOCK_STRATEGY
    """
    fabric = config.fabric
    interfaces = [a.interface for a in fabric.attachments] if (fabric and w.transport == "rdma") else []
    env = {
        "LAUNCHER_MODE": w.transport,
        "LAUNCHER_MEMLOCK_STRATEGY": config.memlock_of(w),
        "LAUNCHER_PIN_BYTES": str(config.defaults.pin_bytes),
        "LAUNCHER_TCP_FALLBACK": "true" if w.tcp_fallback else "false",
        "LAUNCHER_STRICT": "true" if w.launcher_strict else "false",
        "LAUNCHER_RDMA_INTERFACES": ",".join(interfaces),
        # Only ports of the fabric's link layer: a host's other NICs (a RoCE port on an InfiniBand cluster) stay out.
        "LAUNCHER_LINK_LAYER": fabric.link_layer if (fabric and w.transport == "rdma") else "",
        "LAUNCHER_TCP_SOCKET_IFNAME": config.defaults.tcp_socket_ifname,
        # Every NCCL_* the program renders is set on purpose; any other the pod has comes from the image.
        "LAUNCHER_EXPLICIT_NCCL": ",".join(sorted(nccl_env(config, w))),
        "LAUNCHER_NNODES": str(w.nodes),
        "LAUNCHER_GPUS_PER_NODE": str(w.gpus_per_node),
        "LAUNCHER_RUN": w.run,
        "LAUNCHER_ARGS": json.dumps(w.args),
        "MASTER_ADDR": names.master_addr,
        "MASTER_PORT": str(w.master_port),
    }
    if w.deepspeed_hostfile:
        env["LAUNCHER_DEEPSPEED_HOSTFILE"] = w.deepspeed_hostfile
        env["LAUNCHER_HOSTS"] = ",".join(names.pod_dns(r) for r in range(w.nodes))
    return env


def container_security(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    """The memlock strategy as a securityContext (KNOWLEDGE.md's table), with nothing more."""
    strategy = config.memlock_of(w)
    if strategy == "privileged":
        # privileged grants every capability, ambient included; escalation cannot be forbidden then.
        return {"privileged": True, "allowPrivilegeEscalation": True}
    ctx: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    caps = list(STRATEGY_CAPABILITIES[strategy])
    if strategy in STRATEGY_RUNS_AS_ROOT:
        # Added capabilities reach the effective set only for uid 0.
        ctx["capabilities"]["add"] = caps
        ctx["runAsUser"] = 0
        ctx["runAsNonRoot"] = False
    else:
        # Nothing to pin beyond the node's limit: any uid the namespace assigns (restricted-v2).
        ctx["runAsNonRoot"] = True
    return ctx


def resources(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    # The GPUs and one VF per attachment (config.pod_requests), as numbers: the committed renders write them so.
    devices: dict[str, Any] = {r: int(n) for r, n in config.pod_requests(w).items() if r not in ("cpu", "memory")}
    return {
        "requests": {"cpu": w.cpu, "memory": w.memory, **devices},
        "limits": {"cpu": w.cpu_limit_value, "memory": w.mem_limit, **devices},
    }


def labels(w: Workload) -> dict[str, str]:
    return {"app.kubernetes.io/name": w.name, INSTANCE: w.name, **MANAGED_BY}


def selector(w: Workload) -> dict[str, str]:
    return {INSTANCE: w.name}


def queue_labels(config: ClusterConfig, w: Workload) -> dict[str, str]:
    """On a queued cluster, the labels Kueue reads on the StatefulSet or Job itself (not on its pods: Kueue labels those):
    the LocalQueue it waits in, and its WorkloadPriorityClass where it names one."""
    if config.queueing is None:
        return {}
    out = {QUEUE_NAME: config.queueing.local_queue}
    if w.priority:
        out[PRIORITY_CLASS] = w.priority
    return out


def toleration(t: Any) -> dict[str, str]:
    return {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value), ("effect", t.effect)) if v is not None}


def scheduling(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    """Where the pods may run: the workload's node set (named nodes are pinned; unnamed ones are all
    GPU nodes that no named set holds), one pod per node, the GPU nodes' taints and labels."""
    out: dict[str, Any] = {}
    node_set = config.node_set(w.node_set)
    named = sorted(n for s in config.node_sets for n in s.nodes)
    affinity: dict[str, Any] = {}
    if node_set.nodes or named:
        expr = (
            {"key": HOSTNAME, "operator": "In", "values": list(node_set.nodes)}
            if node_set.nodes
            else {"key": HOSTNAME, "operator": "NotIn", "values": named}
        )
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
    if w.nodes > 1:
        # One pod per node: a pod takes all of a node's GPUs and NICs.
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": selector(w)}, "topologyKey": HOSTNAME}]
        }
    if affinity:
        out["affinity"] = affinity
    tolerations = [toleration(t) for t in [*config.gpu_tolerations, *w.tolerations]]
    if tolerations:
        out["tolerations"] = tolerations
    node_selector = {**config.gpu_node_selector, **node_set.labels, **w.node_selector}
    if node_selector:
        out["nodeSelector"] = node_selector
    return out


def pod_template(config: ClusterConfig, w: Workload, names: Names) -> dict[str, Any]:
    """The pod every kind of workload runs."""
    annotations = {REQUIRED_SCC: config.scc_of(w)}
    if config.queueing is not None and config.queueing.topology_aware:
        # Kueue's Topology Aware Scheduling places the pod set on any nodes of its flavor where each pod fits (the
        # Topology's one level is the node); the pods carry it from creation, so Kueue counts them as its own.
        annotations[UNCONSTRAINED_TOPOLOGY] = "true"
    fabric = config.fabric
    if w.transport == "rdma" and fabric is not None and fabric.attachments:
        annotations[NETWORKS] = ",".join(attachment_ref(config, w.namespace, a.network, a.interface) for a in fabric.attachments)

    plain = {**launcher_env(config, w, names), **nccl_env(config, w), **{k: v for k, v in w.env.items() if not k.startswith("NCCL_")}}
    env_list: list[dict[str, Any]] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    # The kubelet turns `$$` into `$` and `$(NAME)` into NAME's value: every `$` is doubled, so the process gets the
    # config's text exactly (config/values.py kubelet_escape; an ambiguous `$(NAME)` is refused by the config).
    env_list += [{"name": k, "value": kubelet_escape(v)} for k, v in plain.items()]
    env_list += [{"name": k, "valueFrom": {"secretKeyRef": {"name": r.secret, "key": r.key}}} for k, r in w.secret_env.items()]

    mounts: list[dict[str, Any]] = [
        {"name": "launcher", "mountPath": LAUNCHER_DIR, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "launcher", "configMap": {"name": LAUNCHER_CONFIGMAP, "defaultMode": 0o555}},
        # NCCL and DataLoader workers share memory through /dev/shm; the runtime's 64 MiB is too small.
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": w.shm_size}},
    ]
    for m in w.mounts:
        v = config.volume(w.namespace, m.volume)
        mount: dict[str, Any] = {"name": v.name, "mountPath": m.mount_path or v.mount_path}
        if m.read_only:
            mount["readOnly"] = True
        mounts.append(mount)
        if v.shared or v.existing:
            volumes.append({"name": v.name, "persistentVolumeClaim": {"claimName": v.name}})
        # else: a StatefulSet's volumeClaimTemplate of the same name
    for i, s in enumerate(w.scripts):
        mounts.append({"name": f"scripts-{i}", "mountPath": s.mount_path, "readOnly": True})
        volumes.append({"name": f"scripts-{i}", "configMap": {"name": s.config_map, "defaultMode": 0o555}})

    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": w.image,
        # -I: isolated, so the user's PYTHONPATH, PYTHONHOME, PYTHONSTARTUP and site-packages cannot reach the launcher.
        "command": ["python3", "-I", f"{LAUNCHER_DIR}/launcher.py"],
        "env": env_list,
        "ports": [{"name": "rendezvous", "containerPort": w.master_port, "protocol": "TCP"}]
        + [{"name": p.name, "containerPort": p.port, "protocol": "TCP"} for p in w.ports],
        "resources": resources(config, w),
        "securityContext": container_security(config, w),
        "volumeMounts": mounts,
    }
    if w.working_dir:
        container["workingDir"] = w.working_dir
    spec: dict[str, Any] = {
        "serviceAccountName": w.service_account,
        # Training pods never call the API: no token unless the workload asks for one.
        "automountServiceAccountToken": w.service_account_token,
        "enableServiceLinks": False,  # no service env vars next to MASTER_ADDR and friends
        "restartPolicy": "Always" if w.kind == "statefulset" else "Never",
        "containers": [container],
        "volumes": volumes,
        **scheduling(config, w),
    }
    if w.kind == "job":
        spec["subdomain"] = names.service  # Indexed Job pods resolve as JOBNAME-INDEX.SERVICE
    return {"metadata": {"labels": labels(w), "annotations": annotations}, "spec": spec}


def headless_service(w: Workload, names: Names) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": names.service, "namespace": w.namespace, "labels": labels(w)},
        "spec": {
            "clusterIP": "None",
            # Pod DNS names must resolve before the pods are Ready, or torchrun's rendezvous times out.
            "publishNotReadyAddresses": True,
            "selector": selector(w),
            "ports": [{"name": "rendezvous", "port": w.master_port, "targetPort": w.master_port, "protocol": "TCP"}],
        },
    }


def network_policy(w: Workload) -> dict[str, Any]:
    """The rendezvous (an unauthenticated TCPStore) and NCCL's sockets (ephemeral ports) admit the
    workload's own pods only; exposed developer ports admit OpenShift's router."""
    ingress: list[dict[str, Any]] = [{"from": [{"podSelector": {"matchLabels": selector(w)}}]}]
    routed = [p for p in w.ports if p.route]
    if routed:
        ingress.append(
            {
                "from": [{"namespaceSelector": {"matchLabels": {INGRESS_POLICY_GROUP: ""}}}],
                "ports": [{"protocol": "TCP", "port": p.port} for p in routed],
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": w.name, "namespace": w.namespace, "labels": labels(w)},
        "spec": {"podSelector": {"matchLabels": selector(w)}, "policyTypes": ["Ingress"], "ingress": ingress},
    }


def dev_tools(w: Workload, names: Names) -> list[dict[str, Any]]:
    """A Service to rank 0's pod and one Route (edge TLS) per port the workload exposes."""
    routed = [p for p in w.ports if p.route]
    if not routed:
        return []
    rank0 = {STS_POD_NAME: names.pod(0)} if w.kind == "statefulset" else {JOB_INDEX: "0"}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        # The provider would wait for the rank-0 pod's endpoints (Ready), which a developer pod may never be.
        "metadata": {"name": names.dev_service, "namespace": w.namespace, "labels": labels(w), "annotations": {SKIP_AWAIT: "true"}},
        "spec": {
            "selector": {**selector(w), **rank0},
            "ports": [{"name": p.name, "port": p.port, "targetPort": p.name, "protocol": "TCP"} for p in routed],
        },
    }
    routes = [
        {
            "apiVersion": "route.openshift.io/v1",
            "kind": "Route",
            "metadata": {"name": names.route(p.name), "namespace": w.namespace, "labels": labels(w)},
            "spec": {
                "to": {"kind": "Service", "name": names.dev_service, "weight": 100},
                "port": {"targetPort": p.name},
                "tls": {"termination": "edge", "insecureEdgeTerminationPolicy": "Redirect"},
                "wildcardPolicy": "None",
            },
        }
        for p in routed
    ]
    return [service, *routes]


def claim_templates(config: ClusterConfig, w: Workload) -> list[dict[str, Any]]:
    out = []
    for m in w.mounts:
        v = config.volume(w.namespace, m.volume)
        if not v.shared and not v.existing:
            out.append({"metadata": {"name": v.name, "labels": dict(MANAGED_BY)}, "spec": claim_spec(v)})
    return out


def per_pod_claims(config: ClusterConfig, w: Workload) -> list[str]:
    """NAMESPACE/NAME of the claims the StatefulSet makes (they outlive it; see "Rename a workload" in docs/lifecycle.md)."""
    if w.kind != "statefulset":
        return []
    out = []
    for t in claim_templates(config, w):
        v = config.volume(w.namespace, t["metadata"]["name"])
        out += [f"{w.namespace}/{per_pod_claim_name(v, w.name, r)}" for r in range(w.nodes)]
    return out


def statefulset(config: ClusterConfig, w: Workload, names: Names) -> dict[str, Any]:
    nodes = w.nodes if w.state == "running" else 0
    spec: dict[str, Any] = {
        "serviceName": names.service,
        "replicas": nodes,
        "podManagementPolicy": "Parallel",  # all ranks start together; rendezvous waits for them
        "selector": {"matchLabels": selector(w)},
        "template": pod_template(config, w, names),
    }
    templates = claim_templates(config, w)
    if templates:
        spec["volumeClaimTemplates"] = templates
        # Per-pod workspaces are data: neither deleting the StatefulSet nor scaling it down removes them.
        spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Retain"}
    meta = {
        "name": names.object,
        "namespace": w.namespace,
        "labels": {**labels(w), **queue_labels(config, w)},
        "annotations": statefulset_await(nodes),
    }
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": spec}


def job(config: ClusterConfig, w: Workload, names: Names, verdict_within: int | None = None) -> dict[str, Any]:
    """A training run's Indexed Job, awaited until it has started; or, with `verdict_within` (seconds), a
    bandwidth check's, ended by the cluster after that long and awaited until its verdict (the provider's
    own Job await: Complete, or Failed)."""
    spec: dict[str, Any] = {
        "completionMode": "Indexed",  # JOB_COMPLETION_INDEX is the node rank
        "completions": w.nodes,
        "parallelism": w.nodes,
        "backoffLimit": w.backoff_limit,
        # No TTL: a Job deleted by the cluster would make `pulumi refresh` forget it and the next `up` run the
        # training again. The Job stays as the record of its run until the stack stops it or starts the next run.
        "template": pod_template(config, w, names),
    }
    meta: dict[str, Any] = {"name": names.object, "namespace": w.namespace, "labels": {**labels(w), **queue_labels(config, w)}}
    if verdict_within is None:
        meta["annotations"] = job_await(queued=config.queueing is not None)
    else:
        spec["activeDeadlineSeconds"] = verdict_within
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def workload_objects(
    config: ClusterConfig, w: Workload, job_name: str | None = None, verdict_within: int | None = None
) -> list[dict[str, Any]]:
    """The headless Service, the NetworkPolicy, the developer tools' Service and Routes, and the
    workload itself, last. A stopped Job is nothing at all: starting it creates its Job from the config of
    that moment, never from one held since it was stopped. `job_name` and `verdict_within`: a bandwidth
    check's Job (components/bandwidth.py)."""
    if w.kind == "job" and w.state != "running":
        return []
    names = Names(w, job_name)
    main = statefulset(config, w, names) if w.kind == "statefulset" else job(config, w, names, verdict_within)
    return [headless_service(w, names), network_policy(w), *dev_tools(w, names), main]


def pod_namespaces(config: ClusterConfig) -> list[str]:
    """Namespaces where this program runs pods (each needs the launcher ConfigMap)."""
    return sorted({w.namespace for w in config.pod_specs()})


def script_objects(config: ClusterConfig) -> list[Sourced]:
    """The launcher ConfigMap of each namespace that runs pods, and the stack's script ConfigMaps."""
    launcher: list[Sourced] = [
        (
            ("namespaces", config.namespaces.index(ns)),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": LAUNCHER_CONFIGMAP, "namespace": ns, "labels": dict(MANAGED_BY)},
                "data": launcher_files(),
            },
        )
        for ns in pod_namespaces(config)
    ]
    scripts: list[Sourced] = [
        (
            ("scripts", i),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": s.name, "namespace": s.namespace, "labels": dict(MANAGED_BY)},
                "data": dict(s.files),
            },
        )
        for i, s in enumerate(config.scripts)
    ]
    return launcher + scripts
