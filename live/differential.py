"""The `capacity` rule against the real scheduler: seeded configs, the preflight's verdict, the cluster's verdict.

`generate(seed, n, bases)` makes `n` configs from the tests' own fixtures (tests/fixtures.py), each with one to three
random edits of the kinds a user makes (EDITS): a workload started, grown, added; a node set shrunk or grown; GPUs per
pod and per node; a bandwidth check enabled or resized; a workload switched between RDMA (one SR-IOV VF per
attachment) and TCP; a workload's own node selector and tolerations; the nodes' allocatable CPU and memory. A config
the model refuses is not a case: the generator draws again (deterministically) until it has `n`.

Some edits change the cluster instead of the config (CLUSTER_EDITS): the nodes of a set offer fewer VFs than one per
GPU, carry a taint or a label. The config never states these, so the preflight cannot see them; they are in the run
to find out what the scheduler does with them, and a disagreement they cause is a documented limit (docs/live.md).

`preflight(case)` is `policy.check` on the offline render (components.program.objects: the objects `python -m stacks
render` writes); `case_nodes`/`case_objects` are what the simulated cluster gets: the case's Node objects (live/nodes.py
builds them the same way from a config) and its pod-bearing objects, made disjoint from every other case's so one
scheduler places all of them at once (docs/live.md "The capacity rule against the scheduler").
"""

from __future__ import annotations

import copy
import http.client
import json
import random
import re
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from config.kube import GPU
from live import nodes
from live.controlplane import api_path

Data = dict[str, Any]

CASE = "live.gpu-training.local/case"
"""The label every node and pod of a case carries; the harness adds it to each pod's nodeSelector."""
POOL = "live.gpu-training.local/pool"
"""A node label no config states (the `label` cluster edit)."""
NOT_READY = "node.kubernetes.io/not-ready"
RESERVED = "live.gpu-training.local/reserved"
"""A taint no config states (the `taint` cluster edit)."""


@dataclass
class Cluster:
    """What the cluster's nodes have beyond what the config says (a cluster edit): per node set."""

    vfs: dict[str, int] = field(default_factory=dict)
    """VFs of each attachment's resource every node of the set offers (else one per GPU, live/nodes.py)."""
    taints: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Case:
    index: int
    seed: int
    base: str
    edits: list[tuple[str, str]]
    """(edit class, what it did), in the order applied."""
    data: Data
    cluster: Cluster

    @property
    def tag(self) -> str:
        return f"d{self.index:03d}"

    @property
    def classes(self) -> list[str]:
        return sorted({k for k, _ in self.edits})

    @property
    def cluster_edited(self) -> bool:
        return any(k in CLUSTER_EDITS for k, _ in self.edits)

    def summary(self) -> str:
        sets = ", ".join(
            f"{s['name']}: {len(s['nodes']) if s.get('nodes') else s.get('count')} x {s['gpus_per_node']} GPUs"
            for s in self.data["node_sets"]
        )
        running = [w for w in self.data.get("workloads", []) if w.get("state", "running") == "running"]
        pods = ", ".join(
            f"{w['name']}: {w.get('nodes', 1)} x {w['gpus_per_node']} ({w.get('node_set') or self.data['node_sets'][0]['name']}"
            f"{', rdma' if w.get('transport') == 'rdma' else ''})"
            for w in running
        )
        checks = ", ".join(
            f"check {c['name']}: {c.get('nodes', 2)} x {c['gpus_per_node']}"
            for c in self.data.get("bandwidth_checks", [])
            if c.get("enabled", True)
        )
        edits = "; ".join(d for _, d in self.edits)
        return f"{self.base} seed {self.seed} [{edits}] nodes {{{sets}}} pods {{{pods}{'; ' + checks if checks else ''}}}"


# --- the edits ---------------------------------------------------------------------------------------

Edit = Callable[[random.Random, Data, Cluster], "str | None"]
"""Changes the data (or the cluster) in place and says what it did; None where it does not apply to this config."""


def _workloads(d: Data, running: bool | None = None) -> list[Data]:
    return [w for w in d.get("workloads", []) if running is None or (w.get("state", "running") == "running") == running]


def _set_of(d: Data, w: Data) -> Data:
    name = w.get("node_set") or d["node_sets"][0]["name"]
    return next(s for s in d["node_sets"] if s["name"] == name)


def start(rng: random.Random, d: Data, c: Cluster) -> str | None:
    stopped = _workloads(d, running=False)
    if not stopped:
        return None
    w = rng.choice(stopped)
    w["state"] = "running"
    return f"start {w['name']}"


def grow(rng: random.Random, d: Data, c: Cluster) -> str | None:
    w = rng.choice(_workloads(d))
    w["nodes"] = w.get("nodes", 1) + rng.randint(1, 3)
    return f"{w['name']} nodes {w['nodes']}"


def add(rng: random.Random, d: Data, c: Cluster) -> str | None:
    w = copy.deepcopy(rng.choice(_workloads(d)))
    for key in ("ports", "tcp_variants", "deepspeed_hostfile", "state"):
        w.pop(key, None)
    # Another user's copy: per-pod claims keep their volume, a Job's run gets its own name.
    w["name"] = f"extra{len(d['workloads'])}"
    s = rng.choice(d["node_sets"])
    w["node_set"] = s["name"]
    w["nodes"] = rng.randint(1, 3)
    w["gpus_per_node"] = rng.randint(1, s["gpus_per_node"])
    d["workloads"].append(w)
    return f"add {w['name']} {w['nodes']} x {w['gpus_per_node']} on {s['name']}"


def node_set(rng: random.Random, d: Data, c: Cluster) -> str | None:
    s = rng.choice(d["node_sets"])
    if s.get("nodes"):
        if rng.random() < 0.6 and len(s["nodes"]) > 1:
            s["nodes"] = s["nodes"][: rng.randint(1, len(s["nodes"]) - 1)]
        else:
            s["nodes"] = s["nodes"] + [f"{s['name']}-x{i}" for i in range(rng.randint(1, 2))]
        return f"{s['name']} {len(s['nodes'])} nodes"
    s["count"] = max(1, s["count"] + rng.choice([-2, -1, 1, 2]))
    return f"{s['name']} count {s['count']}"


def gpus_per_pod(rng: random.Random, d: Data, c: Cluster) -> str | None:
    w = rng.choice(_workloads(d))
    w["gpus_per_node"] = rng.randint(1, _set_of(d, w)["gpus_per_node"])
    return f"{w['name']} {w['gpus_per_node']} GPUs per pod"


def gpus_per_node(rng: random.Random, d: Data, c: Cluster) -> str | None:
    s = rng.choice(d["node_sets"])
    s["gpus_per_node"] = rng.choice([2, 4, 8])
    return f"{s['name']} {s['gpus_per_node']} GPUs per node"


def check(rng: random.Random, d: Data, c: Cluster) -> str | None:
    checks = d.setdefault("bandwidth_checks", [])
    if not checks:
        w = _workloads(d)[0]
        checks.append({
            "name": "bw", "namespace": w["namespace"], "service_account": w["service_account"], "image": w["image"],
            "gpus_per_node": _set_of(d, w)["gpus_per_node"], "transport": w.get("transport", "tcp"), "tool": "torch",
        })  # fmt: skip
        if "privileged_reason" in w:  # a privileged memlock strategy asks each of its pods for the reason
            checks[-1]["privileged_reason"] = w["privileged_reason"]
    bw = rng.choice(checks)
    if not bw.get("enabled", True) or rng.random() < 0.3:
        bw["enabled"] = not bw.get("enabled", True)
        return f"check {bw['name']} {'enabled' if bw['enabled'] else 'disabled'}"
    bw["nodes"] = rng.randint(1, 4)
    return f"check {bw['name']} {bw['nodes']} nodes"


def transport(rng: random.Random, d: Data, c: Cluster) -> str | None:
    if not (d.get("fabric") or {}).get("attachments"):
        return None
    w = rng.choice(_workloads(d))
    w["transport"] = "tcp" if w.get("transport") == "rdma" else "rdma"
    if w["transport"] == "tcp":
        w.pop("tcp_variants", None)  # a TCP workload has no TCP variant
    return f"{w['name']} {w['transport']}"


def allocatable(rng: random.Random, d: Data, c: Cluster) -> str | None:
    s = rng.choice(d["node_sets"])
    s["allocatable_cpu"] = rng.choice(["16", "32", "48", "64", "128"])
    s["allocatable_memory"] = rng.choice(["64Gi", "96Gi", "128Gi", "256Gi"])
    return f"{s['name']} allocatable {s['allocatable_cpu']} CPUs {s['allocatable_memory']}"


def selector(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """A workload asks for the stack's own GPU label (a no-op: every GPU node has it)."""
    gpu = d.get("gpu_node_selector") or {}
    if not gpu:
        return None
    w = rng.choice(_workloads(d))
    key = rng.choice(sorted(gpu))
    w.setdefault("node_selector", {})[key] = gpu[key]
    return f"{w['name']} selects {key}={gpu[key]}"


def label(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """A workload asks for a node label the config does not state; the nodes of one set (its own or another) carry
    it, or none does."""
    w = rng.choice(_workloads(d))
    w.setdefault("node_selector", {})[POOL] = "blue"
    if rng.random() < 0.6:
        s = rng.choice(d["node_sets"])
        c.labels.setdefault(s["name"], {})[POOL] = "blue"
        return f"{w['name']} selects {POOL}=blue, which the nodes of {s['name']} carry"
    return f"{w['name']} selects {POOL}=blue, which no node carries"


def toleration(rng: random.Random, d: Data, c: Cluster) -> str | None:
    w = rng.choice(_workloads(d))
    w.setdefault("tolerations", []).append({"key": RESERVED, "operator": "Exists", "effect": "NoSchedule"})
    return f"{w['name']} tolerates {RESERVED}"


def taint(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """The nodes of a set carry a taint the config does not state; a workload tolerates it, or none does."""
    s = rng.choice(d["node_sets"])
    c.taints.setdefault(s["name"], []).append({"key": RESERVED, "value": "yes", "effect": "NoSchedule"})
    said = f"nodes of {s['name']} tainted {RESERVED}"
    if rng.random() < 0.5:
        said += "; " + str(toleration(rng, d, c))
    return said


def vfs(rng: random.Random, d: Data, c: Cluster) -> str | None:
    if not (d.get("fabric") or {}).get("attachments"):
        return None
    s = rng.choice(d["node_sets"])
    c.vfs[s["name"]] = rng.choice([0, 1, 2])
    return f"nodes of {s['name']} offer {c.vfs[s['name']]} VFs per attachment"


# The edit classes, with how often each is drawn. A config edit changes what the user writes; a cluster edit what
# the nodes have beyond what the config says (the preflight cannot see it).
EDITS: dict[str, tuple[Edit, int]] = {
    "start": (start, 2),
    "grow": (grow, 3),
    "add": (add, 3),
    "node-set": (node_set, 3),
    "gpus-per-pod": (gpus_per_pod, 3),
    "gpus-per-node": (gpus_per_node, 2),
    "check": (check, 2),
    "transport": (transport, 2),
    "allocatable": (allocatable, 2),
    "selector": (selector, 2),
    "toleration": (toleration, 1),
    "label": (label, 1),
    "taint": (taint, 1),
    "vfs": (vfs, 2),
}
CLUSTER_EDITS = ("label", "taint", "vfs")


def generate_one(case_seed: int, bases: Mapping[str, Callable[[], Data]], index: int = 0) -> Case:
    """The config one seed draws: a base fixture and one to three edits (not yet validated)."""
    rng = random.Random(case_seed)
    names = sorted(bases)
    classes = sorted(EDITS)
    weights = [EDITS[k][1] for k in classes]
    base = names[rng.randrange(len(names))]
    data, cluster, edits = bases[base](), Cluster(), []
    for _ in range(rng.randint(1, 3)):
        for _attempt in range(10):  # a class that does not apply to this config draws another
            kind = rng.choices(classes, weights)[0]
            said = EDITS[kind][0](rng, data, cluster)
            if said is not None:
                edits.append((kind, said))
                break
    return Case(index, case_seed, base, edits, data, cluster)


def generate(seed: int, n: int, bases: Mapping[str, Callable[[], Data]], validate: Callable[[Data], Any]) -> tuple[list[Case], int]:
    """`n` cases, the same for the same seed; and how many drawn configs the model refused (not cases).
    `validate` is the model's (stacks.validate): it raises on a config a user could not deploy."""
    cases: list[Case] = []
    refused = 0
    draw = 0
    while len(cases) < n:
        case = generate_one(seed * 100_000 + draw, bases, len(cases))
        draw += 1
        try:
            validate(case.data)
        except Exception:  # noqa: BLE001  (the model's refusal, whatever its class: not a case)
            refused += 1
            continue
        cases.append(case)
    return cases, refused


# --- the cluster's side ----------------------------------------------------------------------------------


def case_nodes(case: Case, config: Any) -> list[dict[str, Any]]:
    """The case's GPU nodes, as live/nodes.py builds a cluster's from its config (labels from gpu_node_selector,
    taints from gpu_tolerations, the VFs of each attachment's resource), named and labelled for the case, with
    the cluster edits' VFs, taints and labels. No worker and no control-plane node: every pod here asks for GPUs."""
    out = []
    for s in config.node_sets:
        names = list(s.nodes) or [f"live-{s.name}-{i}" for i in range(s.count or 0)]
        offered = nodes.vfs(config, s)
        if s.name in case.cluster.vfs:
            offered = {r: str(case.cluster.vfs[s.name]) for r in offered}
        resources = {
            "cpu": str(s.allocatable_cpu or nodes.DEFAULT_CPU),
            "memory": str(s.allocatable_memory or nodes.DEFAULT_MEMORY),
            "pods": nodes.MAX_PODS,
            GPU: str(s.gpus_per_node),
            **offered,
        }
        labels = {nodes.NODE_SET: s.name, CASE: case.tag, **config.gpu_node_selector, **case.cluster.labels.get(s.name, {})}
        taints = nodes.gpu_taints(config) + case.cluster.taints.get(s.name, [])
        out += [_ready(nodes.node(f"{case.tag}-{n}", labels, resources, taints)) for n in names]
    return out


def _ready(node: dict[str, Any]) -> dict[str, Any]:
    """A node registered Ready, as a kubelet that has started reports it: kwok then only keeps its lease (its stage that
    makes a node Ready selects nodes that are not), one write per node fewer for the API server."""
    node["status"].update(
        {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kwok"}]}
    )
    return node


def expected_pods(obj: dict[str, Any]) -> int:
    spec = obj["spec"]
    if obj["kind"] == "StatefulSet":
        return int(spec.get("replicas", 1))
    return 0 if spec.get("suspend") else int(spec.get("parallelism", 1))


def case_objects(case: Case, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the case applies: the running StatefulSets and Jobs the program renders, and the ServiceAccounts their pods
    run as (admission refuses a pod whose account does not exist), in one namespace of the case's own (a config's
    workload, check and account names are unique across its namespaces, and a namespace costs the API server a few
    writes: the account and the CA ConfigMap its controllers add). Changed, and only
    these: the pods carry the case's label and select it (nodeSelector), a node pin names the case's nodes, and claims
    become emptyDir volumes (no claim here is bound; a claim is never a scheduling constraint for these classes: they
    bind at once, ReadWriteMany or not). Everything else stays as rendered: resources, affinity, tolerations, the NAD
    annotation (harmless without Multus)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for o in objects:
        if o["kind"] == "ServiceAccount" or (o["kind"] in ("StatefulSet", "Job") and expected_pods(o) > 0):
            obj = copy.deepcopy(o)
            meta = obj["metadata"]
            meta["namespace"] = case.tag
            meta.pop("annotations", None)  # the program's bookkeeping (pulumi.com/...): nothing the scheduler reads
            if o["kind"] != "ServiceAccount":
                _retarget(case, obj)
            out[(o["kind"], meta["name"])] = obj
    return list(out.values())


def _retarget(case: Case, obj: dict[str, Any]) -> None:
    template = obj["spec"]["template"]
    template["metadata"].setdefault("labels", {})[CASE] = case.tag
    pod = template["spec"]
    pod.setdefault("nodeSelector", {})[CASE] = case.tag
    # The taint the API server gives every new node until the node controller has seen it Ready (kwok's nodes are
    # registered Ready): tolerated, the pods need not wait for the controller to take it off hundreds of nodes. A
    # cluster's nodes are Ready; the pods already tolerate the NoExecute form for 300 s (DefaultTolerationSeconds).
    pod.setdefault("tolerations", []).append({"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"})
    node_affinity = (pod.get("affinity") or {}).get("nodeAffinity") or {}
    for term in (node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms", []):
        for e in term.get("matchExpressions", []):
            if e["key"] == "kubernetes.io/hostname":
                e["values"] = [f"{case.tag}-{v}" for v in e["values"]]
    claims = [t["metadata"]["name"] for t in obj["spec"].pop("volumeClaimTemplates", [])]
    volumes = [v for v in pod.get("volumes", []) if "persistentVolumeClaim" not in v]
    claimed = [v["name"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v]
    pod["volumes"] = volumes + [{"name": n, "emptyDir": {}} for n in claimed + claims]
    obj["spec"].pop("persistentVolumeClaimRetentionPolicy", None)


def scheduled(pods: list[dict[str, Any]]) -> tuple[int, int, str]:
    """(placed, reported Unschedulable, what the scheduler said of the first of those) among a case's pods."""
    placed = sum(1 for p in pods if p["spec"].get("nodeName"))
    said = [
        f"{p['metadata']['name']}: {c.get('message', '')}"
        for p in sorted(pods, key=lambda p: str(p["metadata"]["name"]))
        if not p["spec"].get("nodeName")
        for c in p.get("status", {}).get("conditions", [])
        if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
    ]
    return placed, len(said), said[0] if said else ""


# --- one run: every case at once on one simulated cluster ---------------------------------------------------


def placing(config: Any, f: Any) -> bool:
    """Whether a finding says the scheduler leaves a running pod Pending: capacity's (the set's nodes cannot hold all the
    pods at once), or node-fit's on a running workload or enabled check (a pod fits no node of its set; node-fit judges
    the stopped ones too, which the cluster never sees)."""
    entry = re.match(r"(workloads|bandwidth_checks)\[([^]]+)\]", f.where or "")
    if f.rule != "node-fit" or entry is None:
        return bool(f.rule == "capacity")
    kind, name = entry.groups()
    on = config.workloads if kind == "workloads" else config.bandwidth_checks
    return any(e.name == name and getattr(e, "state", "running") == "running" and getattr(e, "enabled", True) for e in on)


@dataclass
class Verdict:
    case: Case
    check_fits: bool | None
    """The preflight: no `capacity` error; None where it warns instead (its search gave up, or the placement it found
    needs the scheduler to pack pods as it may not)."""
    capacity: list[str]
    """The `capacity` findings' messages."""
    others: list[str]
    """The other rules whose errors the config has (they would stop `render`/`up` too)."""
    expected: int
    made: int = 0
    placed: int = 0
    refused: int = 0
    said: str = ""
    """What the scheduler said of an unplaced pod (its PodScheduled condition)."""

    @property
    def decided(self) -> bool:
        """Every pod placed, or every pod made and the unplaced ones reported Unschedulable by the scheduler."""
        return self.placed == self.expected or (self.made == self.expected and self.placed + self.refused == self.expected)

    @property
    def scheduler_fits(self) -> bool:
        return self.placed == self.expected

    @property
    def agree(self) -> bool:
        return self.decided and self.check_fits == self.scheduler_fits

    def line(self) -> str:
        check = {True: "fits", False: "does not fit", None: "warned"}[self.check_fits]
        said = f": {self.capacity[0]}" if self.capacity else ""
        others = f" (other errors: {', '.join(self.others)})" if self.others else ""
        return (
            f"case {self.case.tag} {self.case.summary()}\n    check: {check}{said}{others}\n"
            f"    scheduler: {self.placed} of {self.expected} pods placed, {self.refused} reported Unschedulable"
            + ("" if self.decided else f" (undecided: {self.made} made)")
            + (f": {self.said}" if self.said else "")
        )


def preflight(config: Any, objects: list[dict[str, Any]], patches: list[dict[str, Any]]) -> tuple[bool | None, list[str], list[str]]:
    """(fits, the capacity findings, the other rules with errors) of `policy.check` on the offline render."""
    import policy

    findings = policy.check(config, objects, patches, others=[])
    capacity = [f for f in findings if placing(config, f) and f.severity in ("error", "warning")]
    fits = False if any(f.severity == "error" for f in capacity) else None if capacity else True
    others = sorted({f.rule for f in findings if f.severity == "error" and not placing(config, f)})
    return fits, [f.message for f in capacity], others


def run(
    plane: Any, cases: list[Case], validate: Callable[[Data], Any], bound: float = 300, threads: int = 8, log: Callable[[str], None] = print
) -> list[Verdict]:
    """Every case on `plane` at once: its nodes (made Ready by kwok), then its objects; the preflight runs while the
    controllers make the pods and the scheduler places them; then wait until every case is decided (each pod placed, or
    all there and the unplaced ones reported Unschedulable) and nothing changed since the last look, or `bound` s."""
    from components.program import objects, patches

    api = Api(plane.port, plane.token)
    started = time.monotonic()

    def said(what: str) -> None:
        log(f"differential: {time.monotonic() - started:5.1f} s {what}")

    configs = [validate(c.data) for c in cases]
    rendered = [objects(config) for config in configs]
    applied = [case_objects(c, objs) for c, objs in zip(cases, rendered, strict=True)]
    made = [n for c, config in zip(cases, configs, strict=True) for n in case_nodes(c, config)]
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": c.tag}} for c in cases]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(api.create, made + namespaces))
        said(f"{len(made)} nodes and {len(namespaces)} namespaces made")
        list(pool.map(api.create, [o for objs in applied for o in objs if o["kind"] == "ServiceAccount"]))
        list(pool.map(api.create, [o for objs in applied for o in objs if o["kind"] != "ServiceAccount"]))
        said("the workloads and checks are applied")
    verdicts = []
    for c, config, objs, mine in zip(cases, configs, rendered, applied, strict=True):
        fits, capacity, others = preflight(config, objs, patches(config))
        verdicts.append(Verdict(c, fits, capacity, others, sum(expected_pods(o) for o in mine if o["kind"] != "ServiceAccount")))
    said("the preflight has judged every case")
    deadline = time.monotonic() + bound
    last: list[tuple[int, int, int, str]] = []
    while time.monotonic() < deadline:
        now = _observe(api, cases)
        for v, (pods, placed, refused, why) in zip(verdicts, now, strict=True):
            v.made, v.placed, v.refused, v.said = pods, placed, refused, why
        said(f"{sum(n for n, _, _, _ in now)} of {sum(v.expected for v in verdicts)} pods made, {sum(v.placed for v in verdicts)} placed, "
             f"{sum(v.refused for v in verdicts)} unschedulable")  # fmt: skip
        if now == last and all(v.decided for v in verdicts):
            break
        last = now
        time.sleep(5)  # a list of every case's pods is megabytes for the API server to write: not more often
    return verdicts


class Api:
    """The API server over one kept-alive connection per thread: hundreds of objects in a few seconds, where a fresh
    TLS connection per request (ControlPlane.request) takes a tenth of a second each on a loaded machine."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname, self.ctx.verify_mode = False, ssl.CERT_NONE
        self.local = threading.local()

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        for attempt in range(2):  # a kept-alive connection the server closed is opened again, once
            conn = getattr(self.local, "conn", None) or http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)
            self.local.conn = conn
            try:
                conn.request(method, path, data, headers)
                resp = conn.getresponse()
                raw = resp.read()
                return resp.status, json.loads(raw) if raw[:1] == b"{" else raw.decode()
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def create(self, obj: dict[str, Any]) -> None:
        path = f"/api/v1/{obj['kind'].lower()}s" if obj["kind"] in ("Node", "Namespace") else api_path(obj).rsplit("/", 1)[0]
        status, body = self.call("POST", path, obj)
        if status != 201:
            raise RuntimeError(f"creating {obj['kind']} {obj['metadata']['name']}: {status} {body}")

    def items(self, path: str) -> list[dict[str, Any]]:
        status, body = self.call("GET", path)
        return list(body.get("items", [])) if status == 200 else []


def _observe(api: Api, cases: list[Case]) -> list[tuple[int, int, int, str]]:
    """(pods made, placed, reported Unschedulable, what the scheduler said) of each case."""
    by_case: dict[str, list[dict[str, Any]]] = {}
    for p in api.items(f"/api/v1/pods?labelSelector={CASE}"):
        by_case.setdefault(p["metadata"]["labels"][CASE], []).append(p)
    return [(len(by_case.get(c.tag, [])), *scheduled(by_case.get(c.tag, []))) for c in cases]


def limit(v: Verdict) -> str | None:
    """Why a disagreement is a documented limit (docs/preflight.md, capacity), or None: a bug of the rule."""
    if v.agree or not v.decided:
        return None
    if v.check_fits is None:  # the rule said it cannot promise either answer, and why: the scheduler's is then either
        return f"the rule warned: {v.capacity[0]}"
    if v.check_fits and not v.scheduler_fits and v.case.cluster_edited:
        unstated = ", ".join(d for k, d in v.case.edits if k in CLUSTER_EDITS)
        return f"the nodes have what the config does not state ({unstated}): the config is all the preflight knows of them"
    return None


def report(verdicts: list[Verdict], refused: int) -> str:
    """The summary the test prints: agreement overall and per edit class, then every disagreement."""
    agree = sum(v.agree for v in verdicts)
    limits = [v for v in verdicts if limit(v)]
    wrong = [v for v in verdicts if v.decided and not v.agree and not limit(v)]
    lines = [
        f"capacity vs kube-scheduler: {len(verdicts)} cases ({refused} drawn configs refused by the model), {agree} agree, "
        f"{len(limits)} disagree within documented limits, {len(wrong)} disagree, {sum(not v.decided for v in verdicts)} undecided; "
        f"check says fits {sum(v.check_fits is True for v in verdicts)}, the scheduler {sum(v.scheduler_fits for v in verdicts)}",
        f"{'edit class':<14} {'cases':>5} {'agree':>5} {'limit':>5} {'wrong':>5}",
    ]
    for k in sorted(EDITS):
        mine = [v for v in verdicts if k in v.case.classes]
        lines.append(
            f"{k:<14} {len(mine):>5} {sum(v.agree for v in mine):>5} {sum(1 for v in mine if limit(v)):>5} "
            f"{sum(1 for v in mine if v.decided and not v.agree and not limit(v)):>5}"
        )
    lines += ["disagreements:"] + [
        v.line() + (f"\n    limit: {limit(v)}" if limit(v) else "") for v in verdicts if v.decided and not v.agree
    ]
    return "\n".join(lines)
