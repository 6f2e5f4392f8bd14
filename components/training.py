"""One training workload: its headless Service, NetworkPolicy, StatefulSet or Job, and its developer tools' Service
and Routes; the ConfigMaps the pods mount (launcher, scripts). Every pod comes from one template (`pod_template`) and
starts through the launcher (components/launcher/, shipped verbatim in a ConfigMap)."""

import json
from dataclasses import dataclass
from typing import Any

from components.kube import MANAGED_BY, Sourced, managed
from components.launcher import shipped_files
from components.lifecycle import SKIP_AWAIT, job_await, statefulset_await
from components.networks import attachment_ref
from components.storage import claim_spec
from config.cluster import Volume
from config.kube import HOSTNAME, INSTANCE, NETWORKS, PRIORITY_CLASS, QUEUE_NAME, REQUIRED_SCC, UNCONSTRAINED_TOPOLOGY
from config.stack import ClusterConfig
from config.values import LAUNCHER_DIR, STRATEGY_CAPABILITIES, STRATEGY_RUNS_AS_ROOT, kubelet_escape
from config.workloads import Workload

# One launcher ConfigMap per namespace: a launcher change is one object, updated in place (restarts nothing).
LAUNCHER_CONFIGMAP = "gpu-training-launcher"
CONTAINER = "training"
# The label the StatefulSet controller and the Job controller put on a pod to say which one it is.
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
# OpenShift's router pods run in namespaces labelled with this policy group.
INGRESS_POLICY_GROUP = "policy-group.network.openshift.io/ingress"


@dataclass(frozen=True)
class Names:
    """`job_name`: a bandwidth check's Job (a digest)."""

    workload: Workload
    job_name: str | None = None

    @property
    def object(self) -> str:
        return self.job_name or self.workload.object_name

    @property
    def service(self) -> str:
        return f"{self.workload.name}-headless"

    def route(self, port: str) -> str:
        return f"{self.workload.name}-{port}"

    @property
    def headless_dns(self) -> str:
        return f"{self.service}.{self.workload.namespace}.svc.cluster.local"

    def pod(self, rank: int) -> str:  # StatefulSet pods are NAME-ORDINAL; Indexed Job pods' hostnames JOBNAME-INDEX
        return f"{self.object}-{rank}"

    def pod_dns(self, rank: int) -> str:
        return f"{self.pod(rank)}.{self.headless_dns}"

    @property
    def master_addr(self) -> str:
        return "127.0.0.1" if self.workload.nodes == 1 else self.pod_dns(0)


def nccl_env(config: ClusterConfig, w: Workload) -> dict[str, str]:
    """The transport's, the stack's tuning, the workload's; the launcher adds what it detects unless these pin it."""
    fabric = config.fabric
    if w.uses_rdma and fabric is not None:
        env = {"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": fabric.gdr_level}
        if fabric.static_hca:
            env["NCCL_IB_HCA"] = "=" + ",".join(fabric.devices)  # '=': exact names, not prefixes
        if fabric.gid_index is not None and fabric.link_layer == "roce-v2":
            env["NCCL_IB_GID_INDEX"] = str(fabric.gid_index)
        env.update(config.defaults.nccl_env_rdma)
    else:
        env = {"NCCL_IB_DISABLE": "1", **config.defaults.nccl_env_tcp}
    return env | {k: v for k, v in w.env.items() if k.startswith("NCCL_")}


def launcher_env(config: ClusterConfig, w: Workload, names: Names) -> dict[str, str]:
    """The launcher's whole input (components/launcher/contract.py)."""
    fabric = config.fabric
    interfaces = [a.interface for a in fabric.attachments] if (fabric and w.uses_rdma) else []
    env = {
        "LAUNCHER_MODE": w.transport,
        "LAUNCHER_MEMLOCK_STRATEGY": config.memlock_of(w),
        "LAUNCHER_PIN_BYTES": str(config.defaults.pin_bytes),
        "LAUNCHER_TCP_FALLBACK": "true" if w.tcp_fallback else "false",
        "LAUNCHER_STRICT": "true" if w.launcher_strict else "false",
        "LAUNCHER_RDMA_INTERFACES": ",".join(interfaces),
        # Only ports of the fabric's link layer: a host's other NICs (a RoCE port on an InfiniBand cluster) stay out.
        "LAUNCHER_LINK_LAYER": fabric.link_layer if (fabric and w.uses_rdma) else "",
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
    """The memlock strategy as a securityContext (KNOWLEDGE.md's table), nothing more."""
    strategy = config.memlock_of(w)
    if strategy == "privileged":
        # privileged grants every capability, ambient included; escalation cannot be forbidden then.
        return {"privileged": True, "allowPrivilegeEscalation": True}
    ctx: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if strategy in STRATEGY_RUNS_AS_ROOT:  # added capabilities reach the effective set only for uid 0
        ctx["capabilities"]["add"] = list(STRATEGY_CAPABILITIES[strategy])
        ctx.update(runAsUser=0, runAsNonRoot=False)
    else:  # any uid the namespace assigns (restricted-v2)
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


def queue_labels(config: ClusterConfig, w: Workload) -> dict[str, str]:  # Kueue reads them on the StatefulSet or Job
    return {QUEUE_NAME: config.queueing.local_queue, **({PRIORITY_CLASS: w.priority} if w.priority else {})} if config.queueing else {}


def toleration(t: Any) -> dict[str, str]:
    return {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value), ("effect", t.effect)) if v is not None}


def scheduling(config: ClusterConfig, w: Workload) -> dict[str, Any]:
    """The workload's node set (an unnamed set is every GPU node no named set holds), one pod per node."""
    node_set = config.node_set(w.node_set)
    named = sorted(n for s in config.node_sets for n in s.nodes)
    affinity: dict[str, Any] = {}
    if node_set.nodes or named:
        expr = {"key": HOSTNAME, "operator": "In" if node_set.nodes else "NotIn", "values": list(node_set.nodes) or named}
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
    if w.nodes > 1:  # one pod per node: a pod takes all of a node's GPUs and NICs
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": selector(w)}, "topologyKey": HOSTNAME}]
        }
    tolerations = [toleration(t) for t in [*config.gpu_tolerations, *w.tolerations]]
    node_selector = {**config.flavor_labels(node_set), **w.node_selector}
    return {k: v for k, v in (("affinity", affinity), ("tolerations", tolerations), ("nodeSelector", node_selector)) if v}


def pod_annotations(config: ClusterConfig, w: Workload) -> dict[str, str]:
    annotations = {REQUIRED_SCC: config.scc_of(w)}
    if config.queueing is not None and config.queueing.topology_aware:
        # On any nodes of the flavor where each pod fits; set from creation, so Kueue counts the pods as its own.
        annotations[UNCONSTRAINED_TOPOLOGY] = "true"
    fabric = config.fabric
    if w.uses_rdma and fabric is not None and fabric.attachments:
        annotations[NETWORKS] = ",".join(attachment_ref(config, w.namespace, a.network, a.interface) for a in fabric.attachments)
    return annotations


def pod_env(config: ClusterConfig, w: Workload, names: Names) -> list[dict[str, Any]]:
    plain = {**launcher_env(config, w, names), **nccl_env(config, w), **{k: v for k, v in w.env.items() if not k.startswith("NCCL_")}}
    env: list[dict[str, Any]] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    # The kubelet expands `$(NAME)` and `$$`: every `$` is doubled, so the process gets the config's text exactly.
    env += [{"name": k, "value": kubelet_escape(v)} for k, v in plain.items()]
    env += [{"name": k, "valueFrom": {"secretKeyRef": {"name": r.secret, "key": r.key}}} for k, r in w.secret_env.items()]
    return env


def pod_storage(config: ClusterConfig, w: Workload) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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
        mounts.append({"name": v.name, "mountPath": m.mount_path or v.mount_path, **({"readOnly": True} if m.read_only else {})})
        if v.shared or v.existing:  # else a StatefulSet's volumeClaimTemplate of the same name
            volumes.append({"name": v.name, "persistentVolumeClaim": {"claimName": v.name}})
    for i, s in enumerate(w.scripts):
        mounts.append({"name": f"scripts-{i}", "mountPath": s.mount_path, "readOnly": True})
        volumes.append({"name": f"scripts-{i}", "configMap": {"name": s.config_map, "defaultMode": 0o555}})
    return mounts, volumes


def pod_template(config: ClusterConfig, w: Workload, names: Names) -> dict[str, Any]:
    mounts, volumes = pod_storage(config, w)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": w.image,
        # -I: isolated, so the user's PYTHONPATH, PYTHONHOME, PYTHONSTARTUP and site-packages cannot reach the launcher.
        "command": ["python3", "-I", LAUNCHER_DIR],
        "env": pod_env(config, w, names),
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
    return {"metadata": {"labels": labels(w), "annotations": pod_annotations(config, w)}, "spec": spec}


def headless_service(w: Workload, names: Names) -> dict[str, Any]:
    spec = {
        "clusterIP": "None",
        # Pod DNS names must resolve before the pods are Ready, or torchrun's rendezvous times out.
        "publishNotReadyAddresses": True,
        "selector": selector(w),
        "ports": [{"name": "rendezvous", "port": w.master_port, "targetPort": w.master_port, "protocol": "TCP"}],
    }
    return managed("v1", "Service", names.service, w.namespace, labels=labels(w), spec=spec)


def network_policy(w: Workload) -> dict[str, Any]:
    """The rendezvous (an unauthenticated TCPStore) and NCCL admit the workload's own pods; routed ports the router."""
    ingress: list[dict[str, Any]] = [{"from": [{"podSelector": {"matchLabels": selector(w)}}]}]
    if routed := [p for p in w.ports if p.route]:
        router = [{"namespaceSelector": {"matchLabels": {INGRESS_POLICY_GROUP: ""}}}]
        ingress.append({"from": router, "ports": [{"protocol": "TCP", "port": p.port} for p in routed]})
    spec = {"podSelector": {"matchLabels": selector(w)}, "policyTypes": ["Ingress"], "ingress": ingress}
    return managed("networking.k8s.io/v1", "NetworkPolicy", w.name, w.namespace, labels=labels(w), spec=spec)


def dev_tools(w: Workload, names: Names) -> list[dict[str, Any]]:
    routed = [p for p in w.ports if p.route]
    if not routed:
        return []
    dev = f"{w.name}-dev"
    rank0 = {STS_POD_NAME: names.pod(0)} if w.kind == "statefulset" else {JOB_INDEX: "0"}
    ports = [{"name": p.name, "port": p.port, "targetPort": p.name, "protocol": "TCP"} for p in routed]
    spec = {"selector": {**selector(w), **rank0}, "ports": ports}
    # The provider would wait for the rank-0 pod's endpoints (Ready), which a developer pod may never be.
    service = managed("v1", "Service", dev, w.namespace, labels=labels(w), annotations={SKIP_AWAIT: "true"}, spec=spec)

    def route(port: str) -> dict[str, Any]:
        to = {"kind": "Service", "name": dev, "weight": 100}
        tls = {"termination": "edge", "insecureEdgeTerminationPolicy": "Redirect"}
        spec = {"to": to, "port": {"targetPort": port}, "tls": tls, "wildcardPolicy": "None"}
        return managed("route.openshift.io/v1", "Route", names.route(port), w.namespace, labels=labels(w), spec=spec)

    return [service, *(route(p.name) for p in routed)]


def per_pod_volumes(config: ClusterConfig, w: Workload) -> list[Volume]:
    return [v for m in w.mounts if not (v := config.volume(w.namespace, m.volume)).shared and not v.existing]


def per_pod_claims(config: ClusterConfig, w: Workload) -> list[str]:
    return [f"{w.namespace}/{v.name}-{w.name}-{r}" for v in per_pod_volumes(config, w) for r in range(w.nodes)]  # Kubernetes' names


def statefulset(config: ClusterConfig, w: Workload, names: Names) -> dict[str, Any]:
    nodes = w.nodes if w.state == "running" else 0
    spec: dict[str, Any] = {
        "serviceName": names.service,
        "replicas": nodes,
        "podManagementPolicy": "Parallel",  # all ranks start together; rendezvous waits for them
        "selector": {"matchLabels": selector(w)},
        "template": pod_template(config, w, names),
    }
    templates = [{"metadata": {"name": v.name, "labels": dict(MANAGED_BY)}, "spec": claim_spec(v)} for v in per_pod_volumes(config, w)]
    if templates:
        spec["volumeClaimTemplates"] = templates
        # Per-pod workspaces are data: neither deleting the StatefulSet nor scaling it down removes them.
        spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Retain"}
    own = {**labels(w), **queue_labels(config, w)}
    return managed("apps/v1", "StatefulSet", names.object, w.namespace, labels=own, annotations=statefulset_await(nodes), spec=spec)


def job(config: ClusterConfig, w: Workload, names: Names, verdict_within: int | None = None) -> dict[str, Any]:
    """Awaited until it has started; with `verdict_within` (seconds), a bandwidth check's, awaited until its verdict."""
    spec: dict[str, Any] = {
        "completionMode": "Indexed",  # JOB_COMPLETION_INDEX is the node rank
        "completions": w.nodes,
        "parallelism": w.nodes,
        "backoffLimit": w.backoff_limit,
        # No TTL: a Job the cluster deleted would be forgotten by `pulumi refresh` and run again by the next `up`.
        "template": pod_template(config, w, names),
    }
    awaited = job_await(queued=config.queueing is not None) if verdict_within is None else None
    if verdict_within is not None:
        spec["activeDeadlineSeconds"] = verdict_within
    own = {**labels(w), **queue_labels(config, w)}
    return managed("batch/v1", "Job", names.object, w.namespace, labels=own, annotations=awaited, spec=spec)


def workload_objects(
    config: ClusterConfig, w: Workload, job_name: str | None = None, verdict_within: int | None = None
) -> list[dict[str, Any]]:
    """The workload itself last. A stopped Job is nothing: starting it creates its Job from the config of that moment."""
    if w.kind == "job" and w.state != "running":
        return []
    names = Names(w, job_name)
    main = statefulset(config, w, names) if w.kind == "statefulset" else job(config, w, names, verdict_within)
    return [headless_service(w, names), network_policy(w), *dev_tools(w, names), main]


def script_objects(config: ClusterConfig) -> list[Sourced]:
    launcher: list[Sourced] = [
        (("namespaces", config.namespaces.index(ns)), managed("v1", "ConfigMap", LAUNCHER_CONFIGMAP, ns, data=dict(shipped_files())))
        for ns in sorted({w.namespace for w in config.pod_specs()})
    ]
    return launcher + [
        (("scripts", i), managed("v1", "ConfigMap", s.name, s.namespace, data=dict(s.files))) for i, s in enumerate(config.scripts)
    ]
