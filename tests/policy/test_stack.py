"""The rules over the whole stack (policy/rules/stack.py): the API server's limits on each object (annotations, labels,
size), hidden characters in the config, an object declared twice (named by both sources), and the claims a change
leaves behind, named by the change. FINDINGS holds the findings of each class, PASSES what must stay accepted."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

import policy
from components.outputs import stack_outputs
from components.program import layout, objects, patches, sources
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures
from tests.fixtures import Edit, W, both
from tests.helpers import LIMITS, NAMES, assert_accepted, assert_reported, case_id, cases_of, classify, findings_of

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
ZWSP = "\u200b"  # ZERO WIDTH SPACE


# --- a preflight finding: (class, case, fixture, edit, rule, severity, object, a phrase of message and fix) ---------

FINDINGS: list[tuple[str, str, str, Edit, str, str, str, str]] = [
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
]
classify(FINDINGS)


@pytest.mark.parametrize("cls,case,fixture,edit,rule,severity,obj,phrase", FINDINGS, ids=[case_id(c) for c in FINDINGS])
def test_reported_by_the_preflight(cls: str, case: str, fixture: str, edit: Edit, rule: str, severity: str, obj: str, phrase: str) -> None:
    assert_reported(cls, fixture, edit, rule, severity, obj, phrase)


PASSES: list[tuple[str, str, str, Edit]] = [
    (
        LIMITS,
        "a long reason under the limit",
        "tcp",
        lambda d: d.update(node_level={"crio_memlock_unlimited": True, "reason": "x" * 200_000}),
    ),
    (LIMITS, "text in other scripts", "roce", lambda d: d["scripts"][0]["files"].update({"x.sh": "echo 'héllo wörld — ✓ 日本語'\n"})),
]
classify(PASSES)


@pytest.mark.parametrize("cls,case,fixture,edit", PASSES, ids=[case_id(c) for c in PASSES])
def test_still_accepted(cls: str, case: str, fixture: str, edit: Edit) -> None:
    assert_accepted(fixture, edit)


# --- API limits of rendered objects ------------------------------------------------------------------------------------


def _edited(fixture: str, kind: str, name: str, edit: Callable[[dict[str, Any]], Any]) -> list[Finding]:
    config = fixtures.config(fixture)
    objs = copy.deepcopy(objects(config))
    edit(next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name))
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


# --- an object declared twice names both sources --------------------------------------------------------------------------


@cases_of(NAMES)
def test_a_duplicate_rendered_object_names_both_sources() -> None:
    config = fixtures.config("roce")
    objs = objects(config)
    route = next(o for o in objs if o["kind"] == "Route")
    twin = json.loads(json.dumps(route))
    twin["metadata"]["labels"]["app.kubernetes.io/instance"] = "dev-a"
    [f] = [f for f in policy.check(config, [*objs, twin], patches(config)) if f.rule == "unique-objects"]
    assert f.object == "Route team-a/dev-jupyter" and "(from dev, dev-a)" in f.message


def check(config: ClusterConfig, previous: dict[str, Any] | None = None) -> list[Finding]:
    return policy.check(config, objects(config), patches(config), previous=previous, others=[], sources=sources(layout(config)))


def _switch(d: dict[str, Any]) -> None:
    fixtures.workload(d, "dev").update(transport="tcp", tcp_variants=[])


def _volume_renamed(d: dict[str, Any]) -> None:
    next(v for v in d["volumes"] if v["name"] == "workspace")["name"] = "ws"
    for m in fixtures.workload(d, "dev")["mounts"]:
        if m["volume"] == "workspace":
            m["volume"] = "ws"


def _rename(d: dict[str, Any]) -> None:
    fixtures.workload(d, "dev").update(name="dev2", tcp_variants=[])


DEV_CLAIMS = "the committed render gives 'dev' the per-pod claims team-a/workspace-dev-0"


SWITCH = "(the TCP switch of 'dev', which drops its tcp_variants)"


@pytest.mark.parametrize(
    "case,edit,workload,where,phrase",
    [
        ("TCP switch drops its variant", _switch, "dev-tcp", "workloads[dev].transport", SWITCH),
        ("its volume renamed", _volume_renamed, "dev", "workloads[dev]", DEV_CLAIMS),
        ("renamed: no entry left", _rename, "dev", "", DEV_CLAIMS),
        (
            "renamed beside another's switch",
            both(_rename, lambda d: fixtures.workload(d, "train").update(transport="tcp")),
            "dev",
            "",
            DEV_CLAIMS,
        ),
    ],
    ids=["TCP switch drops its variant", "its volume renamed", "renamed: no entry left", "renamed beside another's switch"],
)
def test_orphaned_claims_name_the_change(case: str, edit: Edit, workload: str, where: str, phrase: str) -> None:
    before = stack_outputs(fixtures.config("roce"))
    found = [f for f in check(fixtures.config("roce", edit), previous=before) if f.rule == "orphaned-claims"]
    [f] = [f for f in found if f.object == f"Workload {workload}"]
    assert f.where == where and phrase in f.message, f.line()
    assert f.value and f.value in f.message  # the claims: an acceptance names them
    assert "[on the cluster: Workload" not in f.line()  # a workload of the committed render is no object on the cluster
