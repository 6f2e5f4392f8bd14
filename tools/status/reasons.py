"""Why a workload's pods do not run, as the scheduler, an admission or the kubelet says it, in the stack file's words:
`no node of nairr has 4 free GPUs (nairr: 3 nodes, 12 GPUs, 12 in use by h-kim, yunshi)`. The scheduler's messages are
k8s.io/kubernetes pkg/scheduler v1.34's, and the older form that names the taint (`untolerated taint {KEY: VALUE}`)."""

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from components.kube import MANAGED_BY
from components.training import resources
from config import provenance
from config.errors import located
from config.kube import GPU, INSTANCE
from config.stack import ClusterConfig
from config.workloads import Workload
from tools.status.cluster import Cluster, active, amount, bounded, condition, controller, count, cut, labels, meta, namespace_of, same_uid

# The container states of a pod that cannot pull its image (kubelet images/types.go).
IMAGE_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable")
# Scheduler reasons that say a node is not one the pod may use at all (each node reports the first filter it fails).
PLACEMENT = ("untolerated taint", "didn't match Pod's node affinity/selector", "were unschedulable", "didn't match the requested node name")
QUOTA_FIELDS = {GPU: "gpus_per_node", "cpu": "cpu", "memory": "memory", "pods": "nodes"}


def _asked(resources: Mapping[str, Any], resource: str) -> float:  # a container's request, else its limit
    return amount((resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource)))  # None: 0


def _allocatable(node: Mapping[str, Any], resource: str) -> float:
    return amount(((node.get("status") or {}).get("allocatable") or {}).get(resource, 0))


def where(config: ClusterConfig, path: tuple[str | int, ...]) -> str:  # `workloads[alice].image (clusters/x.py:12)`
    line = provenance.shown(provenance.origin(config, path))
    return f"{located(path, config)} ({line})" if line else located(path, config)


@dataclass(frozen=True)
class Subject:
    """What runs pods (a workload, or a check's), the config path that declares it, its object's name."""

    path: tuple[str | int, ...]
    workload: Workload
    object: str

    @property
    def kind(self) -> str:
        return "StatefulSet" if self.workload.kind == "statefulset" else "Job"

    def entry(self, config: ClusterConfig, name: str | None) -> str:
        """Where the stack file writes a field of a workload (`workloads[dev].cpu`), or the check that runs it."""
        return where(config, (*self.path, name) if name and self.path[0] == "workloads" else self.path)


def scheduler_reasons(message: str) -> tuple[Counter[str], str]:
    """A FailedScheduling message as (nodes per reason, what a PreFilter plugin said instead): `0/6 nodes are available:
    3 Insufficient nvidia.com/gpu, ... preemption: ...` gives {"Insufficient nvidia.com/gpu": 3, ...}."""
    message = bounded(message)
    if (head := re.match(r"\s*0/\d+ nodes are available:\s*", message)) is None:
        return Counter(), cut(message)
    body = re.split(r"\.(?:\s|$)", message[head.end() :], maxsplit=1)[0].strip()
    reasons: Counter[str] = Counter()
    other = []
    for part in (p.strip() for p in re.split(r",\s+(?=\d+ )", body)):
        if m := re.fullmatch(r"(\d{1,9}) (.+)", part):  # a count of nodes; thousands of digits are no count
            reasons[m.group(2)] += int(m.group(1))
        elif part:
            other.append(part)
    return reasons, cut("; ".join(other))


def _tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    def matches(t: Mapping[str, Any]) -> bool:  # the toleration's key and value (Exists: its key, or none: any)
        if t.get("operator") == "Exists":
            return not t.get("key") or t.get("key") == taint.get("key")
        return t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or "")

    return any(t.get("effect") in (None, "", taint.get("effect")) and matches(t) for t in tolerations)


@dataclass
class NodeSetView:  # a node set as the cluster shows it
    name: str
    path: tuple[str | int, ...]
    size: int
    gpus_per_node: int
    names: list[str] | None  # the set's nodes (None: the nodes are not readable and the set names none)
    nodes: dict[str, Any]  # the Node objects read of them, by name


def node_set_view(config: ClusterConfig, name: str | None, cluster: Cluster) -> NodeSetView:
    node_set = config.node_set(name)
    key = ("view", node_set.name)
    if key not in cluster.memo:
        readable = {str(meta(n).get("name")): n for n in cluster.nodes}
        names: list[str] | None = list(node_set.nodes) if node_set.nodes else None
        if names is None and readable:
            # An unnamed set is every GPU node no named set holds (components/training.py scheduling): the selector's nodes.
            named = {n for s in config.node_sets for n in s.nodes}
            selector = config.gpu_node_selector.items()
            names = [
                n
                for n, obj in sorted(readable.items())
                if n not in named and all(labels(obj).get(k) == v for k, v in selector) and _allocatable(obj, GPU)
            ]
        path = ("node_sets", config.node_sets.index(node_set))
        nodes = {n: readable[n] for n in names or [] if n in readable}
        cluster.memo[key] = NodeSetView(node_set.name, path, node_set.size, node_set.gpus_per_node, names, nodes)
    return cast(NodeSetView, cluster.memo[key])


def _whose(pod: Mapping[str, Any], cluster: Cluster) -> str | None:
    """The instance label of this program's StatefulSet or Job that controls the pod (by uid, never the pod's labels)."""
    if (ref := controller(pod)) is None or ref.get("kind") not in ("StatefulSet", "Job"):
        return None
    owner = cluster.get(str(ref.get("kind")), namespace_of(pod), str(ref.get("name")))
    if owner is None or not same_uid(ref.get("uid"), meta(owner).get("uid")):
        return None
    theirs = labels(owner)
    return str(theirs[INSTANCE]) if theirs.get(INSTANCE) and all(theirs.get(k) == v for k, v in MANAGED_BY.items()) else None


def _use(config: ClusterConfig, view: NodeSetView, cluster: Cluster, resource: str) -> tuple[dict[str, float], list[str]]:
    """What the active pods on the set's nodes request of a resource, per node, and whose they are."""
    key = ("use", view.name, resource)
    if key not in cluster.memo:
        owners = {(w.namespace, w.name): w.user for w in config.all_workloads()}
        owners.update({(c.namespace, c.name): f"bandwidth check {c.name}" for c in config.enabled_checks()})
        named = {n for s in config.node_sets for n in s.nodes}
        mine = set(view.names or ())
        used: dict[str, float] = {}
        by: set[str] = set()
        for p in cluster.by_kind.get("Pod", []):
            node = (p.get("spec") or {}).get("nodeName")
            taken = sum(_asked(c.get("resources") or {}, resource) for c in (p.get("spec") or {}).get("containers") or [])
            if not node or not active(p) or not taken or not (node in mine or (view.names is None and node not in named)):
                continue
            used[str(node)] = used.get(str(node), 0.0) + taken
            ns = namespace_of(p)
            by.add(owners.get((ns, _whose(p, cluster) or ""), f"pods of {ns}"))
        cluster.memo[key] = used, sorted(by)
    return cast(tuple[dict[str, float], list[str]], cluster.memo[key])


def _unseen(view: NodeSetView, used: Mapping[str, float], resource: str, need: float, taken: set[str]) -> str:
    """A node of the set (not in `taken`, which run a pod of it) the pods read leave room on: others hold the rest."""
    if view.nodes:
        room = any(_allocatable(n, resource) - used.get(name, 0.0) >= need for name, n in view.nodes.items() if name not in taken)
    elif resource == GPU and view.names:
        room = any(view.gpus_per_node - used.get(name, 0.0) >= need for name in view.names if name not in taken)
    else:
        return ""
    return "; the rest is held by pods outside the stack's namespaces" if room else ""


def _capacity(config: ClusterConfig, s: Subject, view: NodeSetView, cluster: Cluster, resource: str) -> str:
    """`no node of nairr has 4 free GPUs (nairr: 3 nodes, 12 GPUs, 12 in use by h-kim, yunshi)`, or of VFs, CPU, memory."""
    w = s.workload
    per_node, by = _use(config, view, cluster, resource)
    need = _asked(resources(config, w), resource)
    # One pod per node (a multi-node workload): the nodes its placed pods run on have no room for its others.
    placed = cluster.pods(s.kind, w.namespace, s.object, cluster.get(s.kind, w.namespace, s.object)) if w.nodes > 1 else []
    taken = {str(p["spec"]["nodeName"]) for p in placed if active(p) and (p.get("spec") or {}).get("nodeName")}
    held = f"{count(sum(per_node.values()))} in use by {', '.join(by)}" if by else "none in use by the pods of the stack's namespaces"
    held += _unseen(view, per_node, resource, need, taken)
    attachments = [a.resource for a in config.fabric.attachments] if config.fabric else []
    if resource == GPU or resource in attachments:  # a GPU, or an SR-IOV resource of the fabric: one VF per attachment
        gpu = resource == GPU
        what = f"{w.gpus_per_node} free GPUs" if gpu else f"{count(need)} free VF{'s' if need != 1 else ''} of {resource}"
        entry = where(config, view.path if gpu else ("fabric", "attachments", attachments.index(resource)))
        counted = f"{held}; the nodes are not readable"
        if view.nodes or gpu:
            total = sum(_allocatable(n, resource) for n in view.nodes.values()) if view.nodes else view.size * view.gpus_per_node
            size = len(view.nodes) if view.nodes else view.size
            counted = f"{view.name}: {size} nodes, {count(total)} {'GPUs' if gpu else 'VFs'}, {held}"
        return f"no node of {view.name} has {what} ({counted}; {entry})"
    amounts = {"cpu": f"{count(need)} free CPUs", "memory": f"{w.memory} of free memory"}
    entry = s.entry(config, resource if resource in amounts else None)
    return f"no node of {view.name} has {amounts.get(resource, f'{count(need)} of {resource} free')} ({entry})"


def _placement(config: ClusterConfig, s: Subject, view: NodeSetView, cluster: Cluster, reasons: Counter[str]) -> list[str]:
    """Why no node of the set is one the pods may use, from the nodes where readable, else the scheduler's counts."""
    w = s.workload
    selector = {**config.gpu_node_selector, **w.node_selector}
    selected = ", ".join(f"{k}={v}" for k, v in selector.items()) or "(none)"
    sel_where, tol_where = where(config, ("gpu_node_selector",)), where(config, ("gpu_tolerations",))
    if w.node_selector and s.path[0] == "workloads":
        sel_where += f", {where(config, (*s.path, 'node_selector'))}"
    tolerations = [t.model_dump(exclude_none=True) for t in [*config.gpu_tolerations, *w.tolerations]]
    out: list[str] = []
    if cluster.nodes and view.names is not None:
        if absent := [n for n in view.names if n not in view.nodes]:
            out.append(f"the cluster has no node {', '.join(absent)} of {view.name} ({where(config, view.path)})")
        for name, node in view.nodes.items():
            spec = node.get("spec") or {}
            lacking = [f"{k}={v}" for k, v in selector.items() if labels(node).get(k) != v]
            taints = [
                f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
                for t in spec.get("taints") or []
                if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, t)
            ]
            said = ["is cordoned (unschedulable)"] if spec.get("unschedulable") else []
            said += [f"lacks the label {', '.join(lacking)} the pods select ({sel_where})"] if lacking else []
            said += [f"has the taint {', '.join(taints)}, which the pods do not tolerate ({tol_where})"] if taints else []
            out += [f"node {name} of {view.name} {what}" for what in said]
        if not view.names:
            out.append(f"no node carries the labels {selected} of the selector with GPUs ({sel_where})")
        if out:
            return out
    for reason, n in sorted(reasons.items()):
        if "untolerated taint" in reason:
            named = re.search(r"\{([^{}]*)\}", reason)
            taint = f" {{{named.group(1)}}}" if named else ""
            out.append(f"{n} node(s) have a taint{taint} the pods do not tolerate ({tol_where}; {cluster.oc('describe', 'node')} names it)")
        elif "node affinity/selector" in reason:
            pinned = config.node_set(w.node_set).nodes
            pins = f"the nodes of {view.name} ({where(config, view.path)})" if pinned else f"the unnamed nodes of {view.name}"
            out.append(f"{n} node(s) are not among {pins} or lack the labels {selected} ({sel_where})")
        elif "unschedulable" in reason:
            out.append(f"{n} node(s) are cordoned (unschedulable)")
        else:
            out.append(f"{n} {reason} (the scheduler)")
    return [
        *out,
        "the nodes read show no cause" if cluster.nodes else "the nodes are not readable, so which node of the set fails is not known",
    ]


def unschedulable(config: ClusterConfig, s: Subject, message: str, cluster: Cluster) -> str:
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


def refused(config: ClusterConfig, s: Subject, message: str, cluster: Cluster) -> str:
    """A FailedCreate event's message in the stack's words."""
    w = s.workload
    message = bounded(message)
    if "exceeded quota" in message:
        # k8s.io/apiserver resourcequota: `exceeded quota: NAME, requested: R=Q,..., used: R=Q,..., limited: R=Q,...`
        if (m := re.search(r"exceeded quota: ([^,\s]+), requested: (\S+), used: (\S+), limited: (\S+)", message)) is None:
            return f"a quota of namespace {w.namespace} refuses the pods: {cut(message)}"
        name, requested, used, limited = m.groups()
        resource = re.sub(r"^(?:requests|limits)\.", "", requested.split("=", 1)[0])
        asks = s.entry(config, QUOTA_FIELDS.get(resource))
        return (
            f"the quota {name} of namespace {w.namespace} is full: requested {requested}, used {used}, limited {limited} (asked by {asks})"
        )
    if "failed to retrieve the required SCC" in message or "security context constraint" in message:
        return _scc_refusal(config, s, message, cluster)
    return f"the pods cannot be created: {cut(message)}"


def _scc_refusal(config: ClusterConfig, s: Subject, message: str, cluster: Cluster) -> str:
    w = s.workload
    scc = config.scc_of(w)
    scc_where = where(config, ("security", "scc") if scc == config.security.scc else ("security", "unprivileged_scc"))
    if "failed to retrieve the required SCC" in message:
        # The SCC the pods pin (openshift.io/required-scc) is gone: --refresh sees what Pulumi's state still holds.
        if config.security.create and scc == config.security.scc:
            made = "the platform tier creates it (`pulumi up --refresh` of the platform stack)"
        else:
            made = "the stack does not create it (security.create): a cluster admin must"
        return f"the SCC admission refuses the pods: the SCC {scc} they pin ({scc_where}) is not on the cluster: {made}"
    if re.search(rf'provider "?{re.escape(scc)}"?: Forbidden: not usable by user or serviceaccount', message):
        accounts = [(a.name, a.namespace) for a in config.security.service_accounts]
        account = (w.service_account, w.namespace)
        if account in accounts:
            sa = where(config, ("security", "service_accounts", accounts.index(account)))
        else:
            sa = f"service account {w.service_account}"
        # --refresh: a grant removed by hand is still in Pulumi's state, and a plain `up` would change nothing.
        grant = (
            "its grant is the platform tier's (`pulumi up --refresh` of the platform stack)"
            if config.security.grant
            else f"the stack does not grant it ({where(config, ('security', 'grant'))}): a cluster admin runs "
            + cluster.oc("adm", "policy", "add-scc-to-user", scc, "-z", w.service_account, "-n", w.namespace)
        )
        who = f"service account {w.service_account} may not use the SCC {scc} ({scc_where}; {sa})"
        return f"the SCC admission refuses the pods: {who}: {grant}"
    detail = re.sub(r"^.*?unable to validate against any security context constraint:\s*", "", message)
    return f"the SCC {scc} ({scc_where}) does not admit the pods: {cut(detail)}"


def _exit(config: ClusterConfig, s: Subject, terminated: Mapping[str, Any], refusal: str | None) -> str:
    """A container's exit in the launcher's terms (components/launcher: 2 it would not start, 3 no report, 127 no command)."""
    code, reason = terminated.get("exitCode"), terminated.get("reason") or ""
    said = f": {cut(terminated['message'])}" if terminated.get("message") else ""
    if reason == "OOMKilled" or code == 137:
        limit = "memory_limit" if s.path[0] == "workloads" else "memory"
        return f"killed for memory (OOMKilled, exit {code}): raise {where(config, (*s.path, limit))}{said}"
    known = {
        2: f"the launcher would not start it: {refusal or 'a check failed or the configuration is invalid'} (its report heads the log)",
        3: "the launcher could not write its report",
        127: f"the command could not be executed ({s.entry(config, 'args')})",
    }
    if isinstance(code, int) and code in known:
        return f"exit {code} ({reason or 'Error'}): {known[code]}{said}"
    return f"the command exited {code} ({reason or 'Error'}){said}"


def _image_pull(config: ClusterConfig, s: Subject, status: Mapping[str, Any], cluster: Cluster) -> str:
    waiting = status["state"]["waiting"]
    image = status.get("image") or s.workload.image
    source = (*s.path, "image")
    if len(s.path) == 4 and config.workloads[int(s.path[1])].tcp_variants[int(s.path[3])].image is None:
        source = (*s.path[:2], "image")  # a variant without its own image runs its source's
    entry = where(config, source)
    if (built := next((i for i, b in enumerate(config.images) if b.reference == image), None)) is not None:
        builds = cluster.oc("get", "builds", "-n", config.images[built].namespace)
        entry += f"; it is built by {where(config, ('images', built))}: has its build finished? {builds}"
    return f"the image {image} cannot be pulled ({waiting['reason']}: {cut(waiting.get('message'))}; {entry})"


def container_reason(config: ClusterConfig, s: Subject, pod: Mapping[str, Any], cluster: Cluster) -> tuple[str, str] | None:
    """(`failing`, `failed` or `pending`, reason) of a pod whose container does not run, or None."""
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        refusal = cluster.refusal(pod, str(c.get("name")))
        state = c.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        if waiting.get("reason") in IMAGE_PULL:
            return "pending", _image_pull(config, s, c, cluster)
        last = (c.get("lastState") or {}).get("terminated") or {}
        crashed = terminated.get("exitCode") not in (0, None)
        restarted = crashed and (pod.get("spec") or {}).get("restartPolicy", "Always") != "Never"  # after a back-off
        # Between two back-offs the container runs (and, without a probe, is Ready) until the launcher refuses again.
        refused_before = state.get("running") is not None and last.get("exitCode") == 2
        if waiting.get("reason") == "CrashLoopBackOff" or restarted or refused_before:
            ended = terminated if crashed else last
            return "failing", f"restarting (CrashLoopBackOff, {c.get('restartCount', 0)} restarts): last {_exit(config, s, ended, refusal)}"
        if crashed:
            return "failed", _exit(config, s, terminated, refusal)
        if waiting.get("reason") and waiting["reason"] != "ContainerCreating":
            return "pending", f"its container waits: {waiting['reason']}: {cut(waiting.get('message'))}"
    return None


def relaunched(pod: Mapping[str, Any]) -> bool:
    """Whether a container runs again after the launcher refused it (exit 2): it is refused again, Ready or not."""
    return any(
        (c.get("state") or {}).get("running") is not None and ((c.get("lastState") or {}).get("terminated") or {}).get("exitCode") == 2
        for c in (pod.get("status") or {}).get("containerStatuses") or []
    )


def pod_reason(config: ClusterConfig, s: Subject, pod: Mapping[str, Any], cluster: Cluster) -> tuple[str, str]:
    name, namespace, uid = str(meta(pod).get("name")), namespace_of(pod), meta(pod).get("uid")
    if (scheduled := condition(pod, "PodScheduled")).get("status") == "False":
        message = str(scheduled.get("message") or "")
        if not message:  # the condition without its message: the last FailedScheduling event has it
            message = (cluster.said("Pod", namespace, name, uid, reason="FailedScheduling") or ("", ""))[1]
        if message:
            return "pending", unschedulable(config, s, message, cluster)
        return "pending", "waiting for a node (the scheduler gives no reason yet)"
    if (found_container := container_reason(config, s, pod, cluster)) is not None:
        return found_container
    if warning := cluster.said("Pod", namespace, name, uid, type="Warning"):
        return "pending", f"{warning[0]}: {cut(warning[1])}"
    return "pending", "running, not ready yet" if (pod.get("status") or {}).get("phase") == "Running" else "starting"


def failed_create(config: ClusterConfig, s: Subject, cluster: Cluster) -> str | None:
    uid = meta(cluster.get(s.kind, s.workload.namespace, s.object)).get("uid")
    found = cluster.said(s.kind, s.workload.namespace, s.object, uid, reason="FailedCreate")
    return refused(config, s, found[1], cluster) if found else None
