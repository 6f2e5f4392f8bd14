"""The scheduling rules (policy/rules/scheduling.py): each pod fits a node of its set (GPUs, CPU, memory, the set's
count) and selects only nodes the stack counts on; GPU pods keep off the control plane's nodes (tolerations, node
selectors, node affinity), found where the config writes it, and tolerate every taint of the GPU nodes. FINDINGS holds
the findings of each class, FOUND those located at a field of the config, PASSES what must stay accepted."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

import policy
from components.program import objects, patches
from config.values import MAX_TOLERATIONS
from policy.core import Finding
from tests import fixtures
from tests.fixtures import ARBITER, CONTROL, MASTER, Data, Edit, W, both, check_of, node_set, toleration
from tests.helpers import CONTROL_PLANE, RESOURCES, assert_accepted, assert_found, assert_reported, case_id, cases_of, classify, findings_of

# --- a preflight finding: (class, case, fixture, edit, rule, severity, object, a phrase of message and fix) ---------

FINDINGS: list[tuple[str, str, str, Edit, str, str, str, str]] = [
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
classify(FINDINGS)


@pytest.mark.parametrize("cls,case,fixture,edit,rule,severity,obj,phrase", FINDINGS, ids=[case_id(c) for c in FINDINGS])
def test_reported_by_the_preflight(cls: str, case: str, fixture: str, edit: Edit, rule: str, severity: str, obj: str, phrase: str) -> None:
    assert_reported(cls, fixture, edit, rule, severity, obj, phrase)


PASSES: list[tuple[str, str, str, Edit]] = [
    (CONTROL_PLANE, "worker role selected", "roce", W("solo", node_selector={"node-role.kubernetes.io/worker": ""})),
    (CONTROL_PLANE, "a GPU taint tolerated by key", "tcp", W("one", tolerations=[toleration("nvidia.com/gpu")])),
]
classify(PASSES)


@pytest.mark.parametrize("cls,case,fixture,edit", PASSES, ids=[case_id(c) for c in PASSES])
def test_still_accepted(cls: str, case: str, fixture: str, edit: Edit) -> None:
    assert_accepted(fixture, edit)


# --- found where the config writes it: (class, case, fixture, edit, rule, its config path, a phrase of message or fix) ---

FOUND: list[tuple[str, str, str, Edit, str, str, str]] = [
    (
        RESOURCES,
        "more pods than the node set",
        "roce",
        W("dev", nodes=5),
        "node-fit",
        "workloads[dev].nodes",
        "node set 'main' has 4 node(s)",
    ),
    (
        RESOURCES,
        "more GPUs than a node",
        "roce",
        W("dev", gpus_per_node=8),
        "node-fit",
        "workloads[dev].gpus_per_node",
        "the nodes of 'main' have 4",
    ),
    (
        RESOURCES,
        "CPU above the nodes'",
        "roce",
        node_set(1, allocatable_cpu="16"),
        "node-fit",
        "workloads[train].cpu",
        "offer 16 (allocatable_cpu)",
    ),
    (
        RESOURCES,
        "memory above the nodes'",
        "roce",
        node_set(0, allocatable_memory="32Gi"),
        "node-fit",
        "workloads[dev].memory",
        "Insufficient memory",
    ),
    (
        RESOURCES,
        "a check's memory above the nodes'",
        "roce",
        both(node_set(0, allocatable_memory="100Gi"), check_of("fabric", memory="128Gi")),
        "node-fit",
        "bandwidth_checks[fabric].memory",
        "offer 100Gi",
    ),
    (
        RESOURCES,
        "node_selector outside the set",
        "roce",
        W("solo", node_selector={"kubernetes.io/hostname": "node-a"}),
        "node-selector",
        "workloads[solo].node_selector['kubernetes.io/hostname']",
        "not a node of their node set 'spare'",
    ),
    (
        RESOURCES,
        "node_selector pinning many pods",
        "roce",
        W("dev", node_selector={"kubernetes.io/hostname": "node-a"}),
        "node-selector",
        "workloads[dev].node_selector['kubernetes.io/hostname']",
        "one node each",
    ),
    (
        RESOURCES,
        "node_selector to a named node of an unnamed set",
        "tcp",
        both(
            lambda d: d["node_sets"].append({"name": "pinned", "nodes": ["gpu-9"], "gpus_per_node": 4}),
            W("one", node_selector={"kubernetes.io/hostname": "gpu-9"}),
        ),
        "node-selector",
        "workloads[one].node_selector['kubernetes.io/hostname']",
        "avoid named nodes",
    ),
    (
        RESOURCES,
        "node_selector against gpu_node_selector",
        "roce",
        W("solo", node_selector={"nvidia.com/gpu.present": "false"}),
        "node-selector",
        "workloads[solo].node_selector['nvidia.com/gpu.present']",
        "contradicts",
    ),
]
classify(FOUND)

LINES = {"memory above the nodes'": 2}
"""Cases whose mistake shows in more than one entry: one finding each (dev's pods and the bandwidth check's)."""


@pytest.mark.parametrize("cls,case,fixture,edit,rule,path,phrase", FOUND, ids=[case_id(c) for c in FOUND])
def test_found_where_the_config_writes_it(cls: str, case: str, fixture: str, edit: Edit, rule: str, path: str, phrase: str) -> None:
    assert_found(fixture, edit, rule, path, phrase, LINES.get(case, 1))


# --- the control plane: what only a rendered object can say ------------------------------------------------------------------


def the(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


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


@cases_of(CONTROL_PLANE, 2)
def test_a_toleration_of_every_taint() -> None:
    [f] = _control_plane(lambda spec: spec["tolerations"].append({"operator": "Exists"}))
    assert f.severity == "error" and "every taint (no key, operator Exists)" in f.message
    assert _control_plane(lambda spec: spec["tolerations"].append({"key": "nvidia.com/gpu", "operator": "Exists"})) == []


# --- the GPU taints ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tolerations", [1, MAX_TOLERATIONS])
def test_gpu_toleration_rule_finds_an_untolerated_taint_among_many(tolerations: int) -> None:
    """The rule looks each taint up among the pod's tolerations (no longer tolerations x taints): a pod missing one taint
    of many is still found, and one tolerating them all is not."""
    from components.program import objects

    def edit(d: Data) -> None:
        d["gpu_tolerations"] = [
            {"key": f"example.com/t{k}", "operator": "Equal", "value": "x", "effect": "NoSchedule"} for k in range(tolerations - 1)
        ]

    config = fixtures.config("roce", edit)
    found = [f for f in policy.check(config, objects(config), patches(config)) if f.rule == "gpu-toleration"]
    assert found == []
    # The same pods, held against one taint more than they tolerate.
    wider = fixtures.config("roce", lambda d: (edit(d), d["gpu_tolerations"].append({"key": "example.com/extra", "operator": "Exists"})))
    found = [f for f in policy.check(wider, objects(config), patches(config)) if f.rule == "gpu-toleration"]
    assert found and all("example.com/extra" in f.message for f in found), found
