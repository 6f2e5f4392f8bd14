"""Issue 23: preflight rules the config cannot switch off. An audit found configs that `check` passed because the
config said so (an SCC OpenShift ships described as allowing what it does not), or because nothing looked (a stack in
`openshift-*`, a Route to debugpy, a GPU pod tolerating the control plane, keys and sizes the API server refuses).
Each class is refused by the config's validation (one `path: message` line), or reported by a preflight rule (a
finding naming rule, object and fix), or warned about where the text may be meant; never a traceback.

Tables as in test_issue19_config.py: INVALID (refused, naming the path), FINDINGS (a rule's finding), PASSES (what
must stay accepted, so each check is precise), plus standalone tests counted under their class. `pytest
tests/test_issue23_rules.py -k every_class -s` prints the cases per class.
"""

from __future__ import annotations

import copy
import fnmatch
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import policy
import stacks
from components.program import objects, patches
from config.openshift import BUILTIN_SCCS, OPENSHIFT_SCCS, platform_namespace
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures
from tests.helpers import ROOT, rendered_stack
from tools import writer
from tools.render import run

Data = dict[str, Any]
Edit = Callable[[Data], Any]

SCC = "shipped-scc: shipped SCCs judged by their facts"
NAMESPACES = "namespaces: the platform's and the SR-IOV source's"
LIMITS = "api-limits: annotations, labels, object size, hidden characters"
KEYS = "keys: qualified names; long object names render"
DEBUGGER = "debugger-route: a Route to debugpy"
CONTROL_PLANE = "control-plane: GPU pods off the control plane"
CLASSES = [SCC, NAMESPACES, LIMITS, KEYS, DEBUGGER, CONTROL_PLANE]

REGISTERED: Counter[str] = Counter()


def cases_of(cls: str, n: int = 1) -> Callable[[Any], Any]:
    """Count a standalone test (with n cases) under its class."""

    def mark(fn: Any) -> Any:
        REGISTERED[cls] += n
        return fn

    return mark


# --- edits of the fixtures' data --------------------------------------------------------------------


def W(workload: str, /, **fields: Any) -> Edit:  # noqa: N802 (reads like the fixture's workload)
    return lambda d: fixtures.workload(d, workload).update(fields)


def sec(**fields: Any) -> Edit:
    return lambda d: d["security"].update(fields)


def existing(scc: str, **fields: Any) -> Edit:
    """The stack's SCC is `scc`, which exists on the cluster, described by `fields` (security.existing_*)."""
    return sec(scc=scc, create=False, **fields)


def port(workload: str, index: int, /, **fields: Any) -> Edit:
    return lambda d: fixtures.workload(d, workload)["ports"][index].update(fields)


def add_port(workload: str, /, **fields: Any) -> Edit:
    return lambda d: fixtures.workload(d, workload).setdefault("ports", []).append(fields)


def both(*edits: Edit) -> Edit:
    def edit(d: Data) -> None:
        for e in edits:
            e(d)

    return edit


def add_namespace(ns: str) -> Edit:
    return lambda d: d["namespaces"].append(ns)


def toleration(key: str, **fields: Any) -> Data:
    return {"key": key, "operator": "Exists", **fields}


MASTER = "node-role.kubernetes.io/master"
CONTROL = "node-role.kubernetes.io/control-plane"
ARBITER = "node-role.kubernetes.io/arbiter"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
ZWSP = "\u200b"  # ZERO WIDTH SPACE

# --- refused by the config: (class, case, fixture, edit, the path the message names, a phrase of it) -------------

INVALID: list[tuple[str, str, str, Edit, str, str]] = [
    # a shipped SCC's broad grant needs its reason, whatever existing_allows_privileged says
    (
        SCC,
        "privileged claimed unprivileged",
        "roce",
        existing("privileged", existing_allows_privileged=False),
        "security.broad_grant_reason",
        "allows privileged containers and hostPath volumes",
    ),
    (
        SCC,
        "hostmount-anyuid",
        "roce",
        existing("hostmount-anyuid"),
        "security.broad_grant_reason",
        "hostPath volumes (the node's file system)",
    ),
    (SCC, "hostaccess", "tcp", existing("hostaccess"), "security.broad_grant_reason", "OpenShift ships 'hostaccess'"),
    (SCC, "machine-api-termination-handler", "tcp", existing("machine-api-termination-handler"), "security.broad_grant_reason", "hostPath"),
    (SCC, "creating hostmount-anyuid-v2", "roce", sec(scc="hostmount-anyuid-v2"), "security.create", "an SCC OpenShift ships"),
    # namespaces no stack touches
    (NAMESPACES, "default", "tcp", add_namespace("default"), "namespaces[1]", "a namespace of the platform"),
    (NAMESPACES, "kube-system", "tcp", add_namespace("kube-system"), "namespaces[1]", "pulumi destroy"),
    (NAMESPACES, "openshift", "tcp", add_namespace("openshift"), "namespaces[1]", "kube-*, openshift, openshift-*, default"),
    (NAMESPACES, "openshift-monitoring", "roce", add_namespace("openshift-monitoring"), "namespaces[2]", "Use the users' own projects"),
    (
        NAMESPACES,
        "the SR-IOV operator's",
        "roce",
        both(lambda d: d["fabric"].update(nad_source_namespace="sriov-nads"), add_namespace("sriov-nads")),
        "namespaces[2]",
        "holds the SR-IOV operator's NADs",
    ),
    (
        NAMESPACES,
        "a workload in openshift-config",
        "tcp",
        W("one", namespace="openshift-config"),
        "workloads[one].namespace",
        "of the platform",
    ),
    (
        NAMESPACES,
        "a volume in kube-public",
        "roce",
        lambda d: d["volumes"].append({"name": "x", "namespace": "kube-public", "mount_path": "/x", "size": "1Gi"}),
        "volumes[x].namespace",
        "of the platform",
    ),
    (
        NAMESPACES,
        "a service account in default",
        "tcp",
        lambda d: d["security"]["service_accounts"].append({"name": "sa2", "namespace": "default"}),
        "security.service_accounts[sa2].namespace",
        "of the platform",
    ),
    (
        NAMESPACES,
        "a claim fix in openshift-storage",
        "ib",
        lambda d: d["pvc_fixes"][0].update(namespace="openshift-storage"),
        "pvc_fixes[0].namespace",
        "of the platform",
    ),
    (
        NAMESPACES,
        "hand_made in kube-system",
        "tcp",
        lambda d: d.setdefault("hand_made", []).append({"kind": "ServiceAccount", "name": "x", "namespace": "kube-system", "source": "s"}),
        "hand_made[x].namespace",
        "adopt the platform's own objects",
    ),
    (
        NAMESPACES,
        "hand_made in the NAD source",
        "roce",
        both(
            lambda d: d["fabric"].update(nad_source_namespace="sriov-nads"),
            lambda d: d.setdefault("hand_made", []).append(
                {"kind": "NetworkAttachmentDefinition", "name": "port1-network", "namespace": "sriov-nads", "source": "s"}
            ),
        ),
        "hand_made[port1-network].namespace",
        "SR-IOV operator's NADs",
    ),
    # qualified names, as the API server checks them
    (
        KEYS,
        "toleration key with an empty prefix",
        "tcp",
        lambda d: d["gpu_tolerations"][0].update(key="/abs"),
        "gpu_tolerations[0].key",
        "the prefix before '/' is empty",
    ),
    (
        KEYS,
        "node selector key with an empty prefix",
        "tcp",
        W("one", node_selector={"/gpu": "true"}),
        "workloads[one].node_selector['/gpu']",
        "prefix before '/' is empty",
    ),
    (
        KEYS,
        "uppercase prefix",
        "roce",
        lambda d: d["gpu_node_selector"].update({"Example.com/gpu": "true"}),
        "gpu_node_selector['Example.com/gpu']",
        "not a DNS subdomain",
    ),
    (
        KEYS,
        "name part of 64 characters",
        "tcp",
        lambda d: d["gpu_tolerations"][0].update(key="nvidia.com/" + "g" * 64),
        "gpu_tolerations[0].key",
        "has 64 characters",
    ),
    (
        KEYS,
        "name part starting with '-'",
        "tcp",
        W("one", tolerations=[toleration("nvidia.com/-gpu")]),
        "workloads[one].tolerations[0].key",
        "starting and ending with a letter or digit",
    ),
    (KEYS, "two slashes", "roce", W("dev", tolerations=[toleration("a/b/c")]), "workloads[dev].tolerations[0].key", "prefix 'a/b'"),
]

INVALID += [
    (CONTROL_PLANE, "a toleration of every taint", "tcp", W("one", tolerations=[{"key": "", "operator": "Exists"}]),
     "workloads[one].tolerations[0].key", "tolerates every taint, the control plane's NoSchedule taints included"),
    (CONTROL_PLANE, "the stack's toleration of every taint", "roce", lambda d: d["gpu_tolerations"].append(toleration("")),
     "gpu_tolerations[1].key", "name the taint's key"),
]  # fmt: skip

INVALID += [
    (DEBUGGER, "a reason for a port not routed", "roce", port("dev", 1, route_reason="a tutorial"),
     "workloads[dev].ports[debugpy].route_reason", "not routed (route: false)"),
    (DEBUGGER, "a reason for Jupyter", "roce", port("dev", 0, route_reason="a tutorial"), "workloads[dev].ports[jupyter].route_reason",
     "not a debugger's"),
]  # fmt: skip

# --- a preflight finding: (class, case, fixture, edit, rule, severity, object, a phrase of message and fix) ---------

CAPS = ["IPC_LOCK"]
FINDINGS: list[tuple[str, str, str, Edit, str, str, str, str]] = [
    # root with IPC_LOCK under a shipped SCC that admits neither, whatever the config claims
    (
        SCC,
        "restricted-v2 claimed to allow IPC_LOCK",
        "roce",
        existing("restricted-v2", existing_allowed_capabilities=CAPS),
        "scc-capabilities",
        "error",
        "StatefulSet team-a/dev",
        "OpenShift ships",
    ),
    (
        SCC,
        "restricted-v2 claimed to admit root",
        "roce",
        existing("restricted-v2", existing_allowed_capabilities=CAPS, existing_allows_root=True),
        "memlock-strategy",
        "error",
        "StatefulSet team-a/dev",
        "does not admit root .*MustRunAsRange",
    ),
    (
        SCC,
        "nonroot-v2",
        "roce",
        existing("nonroot-v2", existing_allowed_capabilities=CAPS),
        "memlock-strategy",
        "error",
        "Job team-a/train-r1",
        "MustRunAsNonRoot",
    ),
    (
        SCC,
        "anyuid admits root but adds nothing",
        "roce",
        existing("anyuid", existing_allowed_capabilities=CAPS),
        "scc-capabilities",
        "error",
        "StatefulSet team-a/dev",
        "allows none",
    ),
    (
        SCC,
        "restricted",
        "tcp",
        both(existing("restricted"), W("one", memlock="root-ipc-lock")),
        "scc-capabilities",
        "error",
        "StatefulSet proj/one",
        "capability may not be added: IPC_LOCK",
    ),
    (
        SCC,
        "a contradicting capability list",
        "roce",
        existing("restricted-v2", existing_allowed_capabilities=CAPS),
        "shipped-scc",
        "warning",
        "SecurityContextConstraints restricted-v2",
        "says IPC_LOCK, but OpenShift ships 'restricted-v2' with allowedCapabilities NET_BIND_SERVICE",
    ),
    (
        SCC,
        "privileged claimed unprivileged",
        "ib",
        sec(existing_allows_privileged=False),
        "shipped-scc",
        "warning",
        "SecurityContextConstraints privileged",
        "allowPrivilegedContainer true",
    ),
    (
        SCC,
        "anyuid claimed non-root",
        "roce",
        existing("anyuid", existing_allows_root=False),
        "shipped-scc",
        "warning",
        "SecurityContextConstraints anyuid",
        "runAsUser RunAsAny",
    ),
    (
        SCC,
        "a hostPath SCC, with its reason",
        "ib",
        sec(scc="hostmount-anyuid"),
        "privileged-scc",
        "warning",
        "SecurityContextConstraints hostmount-anyuid",
        "allows hostPath volumes .*broad_grant_reason: no RDMA device plugin",
    ),
    (
        SCC,
        "privileged, judged by its facts",
        "ib",
        sec(existing_allows_privileged=False),
        "privileged-scc",
        "warning",
        "SecurityContextConstraints privileged",
        "allows privileged containers and hostPath volumes",
    ),
    # what the API server refuses of a rendered object
    (
        LIMITS,
        "a MachineConfig's reason of 300 KB",
        "tcp",
        lambda d: d.update(node_level={"crio_memlock_unlimited": True, "reason": "x" * 300_000}),
        "api-limits",
        "error",
        "MachineConfig 99-worker-crio-memlock",
        r"3000\d\d bytes, over the 262144",  # the reason, and the annotations every object carries (patchForce)
    ),
    (
        LIMITS,
        "a claim fix's reason of 300 KB",
        "ib",
        lambda d: d["pvc_fixes"][0].update(reason="r" * 300_000),
        "api-limits",
        "error",
        "PersistentVolumeClaim nfs/nfs-server-root (patch)",
        "annotations take",
    ),
    # text that displays otherwise than it runs
    (
        LIMITS,
        "right-to-left override in a script",
        "roce",
        lambda d: d["scripts"][0]["files"].update({"x.sh": f"echo {RLO}cba"}),
        "hidden-characters",
        "warning",
        "Stack roce",
        "U\\+202E RIGHT-TO-LEFT OVERRIDE",
    ),
    (
        LIMITS,
        "zero-width space in an argument",
        "tcp",
        W("one", args=["python", f"train{ZWSP}.py"]),
        "hidden-characters",
        "warning",
        "Stack tcp",
        "U\\+200B ZERO WIDTH SPACE \\(first at character 6\\)",
    ),
    (
        LIMITS,
        "isolate in an environment value",
        "roce",
        W("solo", env={"X": "a\u2066b\u2069"}),
        "hidden-characters",
        "warning",
        "Stack roce",
        "U\\+2066 LEFT-TO-RIGHT ISOLATE, U\\+2069 POP DIRECTIONAL ISOLATE",
    ),
    (
        LIMITS,
        "byte order mark in a Dockerfile",
        "roce",
        lambda d: d["images"][0].update(dockerfile="\ufeffFROM x\nRUN rdma-core libibverbs\n"),
        "hidden-characters",
        "warning",
        "Stack roce",
        "U\\+FEFF",
    ),
    (
        LIMITS,
        "word joiner in a user name",
        "tcp",
        W("one", user="d\u2060i"),
        "hidden-characters",
        "warning",
        "Stack tcp",
        "accepted_warnings",
    ),
    # a debugger's port routed outside the cluster
    (
        DEBUGGER,
        "debugpy routed",
        "roce",
        port("dev", 1, route=True),
        "debugger-route",
        "error",
        "Route team-a/dev-debugpy",
        "oc port-forward POD 5678",
    ),
    (
        DEBUGGER,
        "5678 under another name",
        "roce",
        add_port("solo", name="debug", port=5678, route=True),
        "debugger-route",
        "error",
        "Route team-b/solo-debug",
        "run any code in the pod",
    ),
    (
        DEBUGGER,
        "debugpy on another port",
        "tcp",
        add_port("one", name="debugpy", port=5679, route=True),
        "debugger-route",
        "error",
        "Route proj/one-debugpy",
        "route_reason",
    ),
    (
        DEBUGGER,
        "its TCP variant too",
        "roce",
        port("dev", 1, route=True),
        "debugger-route",
        "error",
        "Route team-a/dev-tcp-debugpy",
        "debugpy",
    ),
    (
        DEBUGGER,
        "routed with a reason",
        "roce",
        port("dev", 1, route=True, route_reason="a tutorial behind the VPN"),
        "debugger-route",
        "info",
        "Route team-a/dev-debugpy",
        "its route_reason: a tutorial behind the VPN",
    ),
    # GPU pods that may land on the control plane
    (
        CONTROL_PLANE,
        "master taint tolerated by every GPU pod",
        "tcp",
        lambda d: d["gpu_tolerations"].append(toleration(MASTER)),
        "control-plane-nodes",
        "error",
        "StatefulSet proj/one",
        "tolerates the control plane's taint node-role.kubernetes.io/master",
    ),
    (
        CONTROL_PLANE,
        "control-plane taint tolerated by a workload",
        "roce",
        W("solo", tolerations=[toleration(CONTROL, effect="NoSchedule")]),
        "control-plane-nodes",
        "error",
        "StatefulSet team-b/solo",
        "node-role.kubernetes.io/control-plane",
    ),
    (
        CONTROL_PLANE,
        "arbiter taint, Equal",
        "tcp",
        W("one", tolerations=[toleration(ARBITER, operator="Equal", value="")]),
        "control-plane-nodes",
        "error",
        "StatefulSet proj/one",
        "arbiter",
    ),
    (
        CONTROL_PLANE,
        "a workload selecting control-plane nodes",
        "roce",
        W("solo", node_selector={CONTROL: ""}),
        "control-plane-nodes",
        "error",
        "StatefulSet team-b/solo",
        "selects the control plane's nodes",
    ),
    (
        CONTROL_PLANE,
        "every GPU pod selecting masters",
        "roce",
        lambda d: d["gpu_node_selector"].update({MASTER: ""}),
        "control-plane-nodes",
        "error",
        "Job team-a/fabric-*",
        "compact cluster",
    ),
]

# --- what stays accepted, so each check refuses only what it means to: (class, case, fixture, edit) -----------------

PASSES: list[tuple[str, str, str, Edit]] = [
    (SCC, "privileged described as it is", "ib", lambda d: None),
    (SCC, "anyuid for TCP pods that add nothing", "tcp", existing("anyuid")),
    (
        SCC,
        "an SCC the program does not know, by the config's facts",
        "roce",
        both(
            existing("site-rdma", existing_allowed_capabilities=CAPS),
            lambda d: d.setdefault("accepted_warnings", []).append(
                {"rule": "scc-grant", "object": "ClusterRole system:openshift:scc:site-rdma", "reason": "made by the site's admin"}
            ),
        ),
    ),
    (NAMESPACES, "a project named like one", "tcp", both(add_namespace("my-openshift"), add_namespace("kubeflow-team"))),
    (
        NAMESPACES,
        "a NAD source namespace the stack does not deploy into",
        "roce",
        lambda d: d["fabric"].update(nad_source_namespace="sriov-nads"),
    ),
    (KEYS, "a key without prefix", "tcp", W("one", node_selector={"gpu": "true"})),
    (KEYS, "a name part of 63 characters", "tcp", lambda d: d["gpu_tolerations"][0].update(key="nvidia.com/" + "g" * 63)),
    (KEYS, "dots, dashes and underscores", "roce", W("dev", tolerations=[toleration("example.com/a_b.c-d")])),
    (
        LIMITS,
        "a long reason under the limit",
        "tcp",
        lambda d: d.update(node_level={"crio_memlock_unlimited": True, "reason": "x" * 200_000}),
    ),
    (LIMITS, "text in other scripts", "roce", lambda d: d["scripts"][0]["files"].update({"x.sh": "echo 'héllo wörld — ✓ 日本語'\n"})),
    (DEBUGGER, "debugpy reached with port-forward", "roce", lambda d: None),
    (DEBUGGER, "Jupyter and a port 5677 routed", "roce", add_port("dev", name="dbg", port=5677, route=True)),
    (CONTROL_PLANE, "worker role selected", "roce", W("solo", node_selector={"node-role.kubernetes.io/worker": ""})),
    (CONTROL_PLANE, "a GPU taint tolerated by key", "tcp", W("one", tolerations=[toleration("nvidia.com/gpu")])),
]


def the(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def findings_of(config: ClusterConfig, objs: list[dict[str, Any]] | None = None) -> list[Finding]:
    return policy.check(config, objects(config) if objs is None else objs, patches(config))


def refused(fixture: str, edit: Edit) -> str:
    with pytest.raises(stacks.ConfigError) as err:
        fixtures.config(fixture, edit)
    return str(err.value)


@pytest.mark.parametrize("cls,case,fixture,edit,path,phrase", INVALID, ids=[f"{c[0].split(':')[0]}: {c[1]}" for c in INVALID])
def test_refused_naming_the_path_and_the_fix(cls: str, case: str, fixture: str, edit: Edit, path: str, phrase: str) -> None:
    message = refused(fixture, edit)
    assert message.startswith(f"fixture {fixture}: invalid configuration\n"), message
    lines = message.splitlines()[1:]
    assert len(lines) == 1, message  # one cause, one error: a platform namespace is not also "not in namespaces"
    assert re.match(rf"  {re.escape(path)}( \([^)]*:\d+\))?: ", lines[0]) and phrase in lines[0], message
    assert "Traceback" not in message


@pytest.mark.parametrize(
    "cls,case,fixture,edit,rule,severity,obj,phrase", FINDINGS, ids=[f"{c[0].split(':')[0]}: {c[1]}" for c in FINDINGS]
)
def test_reported_by_the_preflight(cls: str, case: str, fixture: str, edit: Edit, rule: str, severity: str, obj: str, phrase: str) -> None:
    config = fixtures.config(fixture, edit)
    found = findings_of(config)
    hits = [f for f in found if f.rule == rule and f.severity == severity and fnmatch.filter(f.affects or (f.object,), obj)]
    assert hits, [f.line() for f in found]
    assert any(re.search(phrase, f"{f.message} Fix: {f.fix}") for f in hits), [f.line() for f in hits]
    assert all(f.fix and "\n" not in f.line() for f in hits)


@pytest.mark.parametrize("cls,case,fixture,edit", PASSES, ids=[f"{c[0].split(':')[0]}: {c[1]}" for c in PASSES])
def test_still_accepted(cls: str, case: str, fixture: str, edit: Edit) -> None:
    config = fixtures.config(fixture, edit)
    new = [f for f in findings_of(config) if f.severity != "info" and not f.accepted]
    assert new == [], [f.line() for f in new]


# --- shipped SCCs: one table, its facts the program's ------------------------------------------------------------------


@cases_of(SCC, 3)
def test_the_shipped_scc_facts_are_one_table() -> None:
    import policy.core

    assert BUILTIN_SCCS == frozenset(OPENSHIFT_SCCS)  # what a stack may not create is what the program knows
    assert not hasattr(policy.core, "KNOWN_SCCS")  # no second table of SCC facts
    # The facts the rules rely on, as OpenShift's manifests state them.
    assert OPENSHIFT_SCCS["restricted-v2"].capabilities == {"NET_BIND_SERVICE"} and not OPENSHIFT_SCCS["restricted-v2"].allows_root
    assert OPENSHIFT_SCCS["privileged"].capabilities is None and OPENSHIFT_SCCS["privileged"].privileged
    assert [n for n, f in OPENSHIFT_SCCS.items() if f.allows_root and f.capabilities is None] == ["privileged"]
    assert {n for n, f in OPENSHIFT_SCCS.items() if f.host_paths} == {
        "hostaccess", "hostmount-anyuid", "hostmount-anyuid-v2", "machine-api-termination-handler", "node-exporter", "privileged",
    }  # fmt: skip


@cases_of(SCC)
def test_a_shipped_scc_is_one_finding_at_security_scc() -> None:
    config = fixtures.config("roce", existing("restricted-v2", existing_allowed_capabilities=CAPS))
    found = [f for f in findings_of(config) if f.rule == "scc-capabilities"]
    assert len(found) == 1 and found[0].where == "security.scc", [f.line() for f in found]
    assert {"StatefulSet team-a/dev", "Job team-a/train-r1"} <= set(found[0].affects)


# --- namespaces: the committed stacks use none ----------------------------------------------------------------------


@cases_of(NAMESPACES, len(stacks.names()))
@pytest.mark.parametrize("name", stacks.names())
def test_the_committed_stacks_touch_no_platform_namespace(name: str) -> None:
    config = stacks.load(name)
    source = config.fabric.nad_source_namespace if config.fabric else None
    touched = {o.get("metadata", {}).get("namespace") for o in rendered_stack(name).objects()} - {None}
    touched |= set(config.namespaces) | {f.namespace for f in config.pvc_fixes} | {h.namespace for h in config.hand_made if h.namespace}
    assert touched and not [ns for ns in touched if platform_namespace(ns) or ns == source]


@cases_of(NAMESPACES, 4)
@pytest.mark.parametrize("ns", ["kube-node-lease", "openshift-sriov-network-operator", "default", "openshift"])
def test_platform_namespaces(ns: str) -> None:
    assert platform_namespace(ns)
    assert not platform_namespace(ns + "x" if ns in ("default", "openshift") else "x" + ns)


# --- API limits of rendered objects ------------------------------------------------------------------------------------


def _edited(fixture: str, kind: str, name: str, edit: Callable[[dict[str, Any]], Any]) -> list[Finding]:
    config = fixtures.config(fixture)
    objs = copy.deepcopy(objects(config))
    edit(the(objs, kind, name))
    return [f for f in findings_of(config, objs) if f.rule == "api-limits"]


LABELS = [
    ("a value of 64 characters", "x" * 64, "is not a label value"),
    ("a value with a space", "a b", "is not a label value"),
    ("a value ending in '-'", "gpu-", "is not a label value"),
]


@cases_of(LIMITS, len(LABELS) + 2)
@pytest.mark.parametrize("case,value,phrase", LABELS, ids=[c[0] for c in LABELS])
def test_a_label_the_api_server_refuses(case: str, value: str, phrase: str) -> None:
    [f] = _edited("tcp", "StatefulSet", "one", lambda o: o["spec"]["template"]["metadata"]["labels"].update(team=value))
    assert f.severity == "error" and f.field == "spec.template.metadata.labels[team]" and phrase in f.message


@cases_of(LIMITS)
def test_a_label_key_the_api_server_refuses() -> None:
    [f] = _edited("tcp", "Service", "one-headless", lambda o: o["metadata"]["labels"].update({"/team": "a"}))
    assert f.object == "Service proj/one-headless" and "prefix before '/' is empty" in f.message


@cases_of(LIMITS)
def test_an_object_over_the_request_limit() -> None:
    [f] = _edited("tcp", "ConfigMap", "gpu-training-launcher", lambda o: o["data"].update({"big.txt": "x" * 1_600_000}))
    assert f.object == "ConfigMap proj/gpu-training-launcher" and "etcd" in f.message


# --- keys and names: a 253-character object name renders ---------------------------------------------------------------

LONG_SCC = ".".join(["a" * 63] * 3 + ["b" * 61])  # 253 characters: the longest object name


@cases_of(KEYS, 3)
def test_an_object_name_of_253_characters_renders(tmp_path: Path) -> None:
    assert len(LONG_SCC) == 253
    target = writer.write(run(fixtures.config("roce", sec(scc=LONG_SCC))), tmp_path)
    names = [p.relative_to(target).as_posix() for p in target.rglob("*.yaml")]
    assert len(set(names)) == len(names) and all(len(n.rsplit("/", 1)[-1].encode()) <= writer.FILE_NAME_MAX for n in names)
    # a name too long for a file name is cut and carries a hash of the whole name: the SCC, its use-role, the binding
    cut = sorted(n for n in names if "aaaaaaaaaa" in n)
    assert len(cut) == 3 and all(re.search(r"-[0-9a-f]{12}\.yaml$", n) for n in cut), cut
    assert "_cluster/securitycontextconstraints-" + LONG_SCC[:100] in cut[1]
    # names that fit keep their form, kind-name.yaml, so rendered/ does not change
    assert "team-a/statefulset-dev.yaml" in names and "team-a/route-dev-jupyter.yaml" in names


# --- control plane: what only a rendered object can say ------------------------------------------------------------------


def _control_plane(edit: Callable[[dict[str, Any]], Any]) -> list[Finding]:
    config = fixtures.config("tcp")
    objs = copy.deepcopy(objects(config))
    edit(the(objs, "StatefulSet", "one")["spec"]["template"]["spec"])
    return [f for f in findings_of(config, objs) if f.rule == "control-plane-nodes"]


AFFINITY = [
    ("required In", "requiredDuringSchedulingIgnoredDuringExecution", {"key": CONTROL, "operator": "In", "values": [""]}, 1),
    ("required Exists", "requiredDuringSchedulingIgnoredDuringExecution", {"key": MASTER, "operator": "Exists"}, 1),
    ("preferred Exists", "preferredDuringSchedulingIgnoredDuringExecution", {"key": MASTER, "operator": "Exists"}, 1),
    ("required DoesNotExist", "requiredDuringSchedulingIgnoredDuringExecution", {"key": MASTER, "operator": "DoesNotExist"}, 0),
]


def _affinity(kind: str, expression: dict[str, Any]) -> dict[str, Any]:
    term = {"matchExpressions": [expression]}
    if kind.startswith("preferred"):
        return {"nodeAffinity": {kind: [{"weight": 1, "preference": term}]}}
    return {"nodeAffinity": {kind: {"nodeSelectorTerms": [term]}}}


@cases_of(CONTROL_PLANE, len(AFFINITY))
@pytest.mark.parametrize("case,kind,expression,errors", AFFINITY, ids=[c[0] for c in AFFINITY])
def test_node_affinity_on_the_control_plane(case: str, kind: str, expression: dict[str, Any], errors: int) -> None:
    found = _control_plane(lambda spec: spec.update(affinity=_affinity(kind, expression)))
    assert len(found) == errors and all("node affinity asks for node-role.kubernetes.io/" in f.message for f in found)


LOCATED = [
    (
        "a workload's toleration",
        "roce",
        W("solo", tolerations=[toleration("nvidia.com/x"), toleration(CONTROL)]),
        "workloads[solo].tolerations[1]",
    ),
    ("the stack's toleration", "roce", lambda d: d["gpu_tolerations"].append(toleration(ARBITER)), "gpu_tolerations[1]"),
    ("a variant's source", "roce", W("dev", node_selector={MASTER: ""}), "workloads[dev].node_selector['node-role.kubernetes.io/master']"),
    (
        "the stack's selector",
        "tcp",
        lambda d: d.setdefault("gpu_node_selector", {}).update({CONTROL: ""}),
        "gpu_node_selector['node-role.kubernetes.io/control-plane']",
    ),
]


@cases_of(CONTROL_PLANE, len(LOCATED))
@pytest.mark.parametrize("case,fixture,edit,where", LOCATED, ids=[c[0] for c in LOCATED])
def test_one_finding_where_the_config_writes_it(case: str, fixture: str, edit: Edit, where: str) -> None:
    [f] = [f for f in findings_of(fixtures.config(fixture, edit)) if f.rule == "control-plane-nodes"]
    assert f.where == where, f.line()


@cases_of(DEBUGGER, len(stacks.names()))
@pytest.mark.parametrize("name", stacks.names())
def test_the_committed_stacks_route_no_debugger(name: str) -> None:
    routes = [o for o in rendered_stack(name).objects() if o["kind"] == "Route"]
    assert not [r for r in routes if r["spec"]["port"]["targetPort"] in ("debugpy", 5678)]
    assert all(not (p.route and p.route_reason) for w in stacks.load(name).workloads for p in w.ports)  # none needs a reason


@cases_of(CONTROL_PLANE, 2)
def test_a_toleration_of_every_taint() -> None:
    [f] = _control_plane(lambda spec: spec["tolerations"].append({"operator": "Exists"}))
    assert f.severity == "error" and "every taint (no key, operator Exists)" in f.message
    assert _control_plane(lambda spec: spec["tolerations"].append({"key": "nvidia.com/gpu", "operator": "Exists"})) == []


# --- the command line: no traceback, the exit code, the config path ----------------------------------------------------

CLI = [
    (NAMESPACES, "tcp", add_namespace("openshift-config"), 2, "namespaces[1]", "a namespace of the platform"),
    (
        DEBUGGER,
        "roce",
        port("dev", 1, route=True),
        1,
        "error debugger-route workloads[dev].ports[debugpy].route (",
        "oc port-forward POD 5678",
    ),
    (
        SCC,
        "roce",
        existing("restricted-v2", existing_allowed_capabilities=CAPS),
        1,
        "error scc-capabilities security.scc (",
        "'restricted-v2' is an SCC OpenShift ships",
    ),
    (
        CONTROL_PLANE,
        "tcp",
        lambda d: d["gpu_tolerations"].append(toleration(MASTER)),
        1,
        "error control-plane-nodes gpu_tolerations[1] (",
        "node-role.kubernetes.io/master",
    ),
]


@pytest.mark.parametrize("cls,fixture,edit,code,where,phrase", CLI, ids=[c[0].split(":")[0] for c in CLI])
def test_check_from_a_file_in_a_real_process(
    cls: str, fixture: str, edit: Edit, code: int, where: str, phrase: str, tmp_path: Path
) -> None:
    data = fixtures.data(fixture)
    edit(data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    assert proc.returncode == code, output
    if code == 2:
        assert re.match(
            rf"error: {re.escape(str(path))}: invalid configuration\n  {re.escape(where)} \({re.escape(str(path))}:\d+\): ", proc.stderr
        ), proc.stderr
    else:
        assert where in proc.stdout, proc.stdout
    assert phrase in " ".join(output.split())  # a long finding wraps


# --- counts -------------------------------------------------------------------------------------------------------------


def case_counts() -> dict[str, int]:
    counts: Counter[str] = Counter()
    for table in (INVALID, FINDINGS, PASSES, CLI):
        counts.update(row[0] for row in table)
    counts.update(REGISTERED)
    return {cls: counts[cls] for cls in CLASSES}


def test_every_class_has_cases(capsys: pytest.CaptureFixture[str]) -> None:
    counts = case_counts()
    with capsys.disabled():
        print("\nissue 23 cases per class: " + "; ".join(f"{cls.split(':')[0]} {n}" for cls, n in counts.items()))
    assert all(n >= 5 for n in counts.values()), counts
