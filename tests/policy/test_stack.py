"""The rules over the whole stack (policy/rules/stack.py): the API server's limits on each object (annotations, labels,
size, a ConfigMap's data), hidden characters in the config, an object declared twice (named by both sources), names the
program derives that meet on the cluster (named at both entries), and the claims a change leaves behind, named by the
change. FINDINGS holds the findings of each class, FOUND those located at a field of the config, PASSES what must stay
accepted."""

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
from tests.fixtures import Edit, W, add_project, add_volume, add_workload, both, check_of, env, pvc_fix
from tests.helpers import LIMITS, NAMES, SIZE, assert_accepted, assert_found, assert_reported, case_id, cases_of, classify, findings_of

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
    # text that displays otherwise than it runs: an error where it runs (a script, a command, an environment value)
    (
        LIMITS,
        "right-to-left override in a script",
        "roce",
        lambda d: d["scripts"][0]["files"].update({"x.sh": f"echo {RLO}cba"}),
        "hidden-characters",
        "error",
        "Stack roce",
        "U\\+202E RIGHT-TO-LEFT OVERRIDE",
    ),
    (
        LIMITS,
        "zero-width space in an argument",
        "tcp",
        W("one", args=["python", f"train{ZWSP}.py"]),
        "hidden-characters",
        "error",
        "Stack tcp",
        "U\\+200B ZERO WIDTH SPACE \\(first at character 6\\)",
    ),
    (
        LIMITS,
        "isolate in an environment value",
        "roce",
        W("solo", env={"X": "a\u2066b\u2069"}),
        "hidden-characters",
        "error",
        "Stack roce",
        "U\\+2066 LEFT-TO-RIGHT ISOLATE, U\\+2069 POP DIRECTIONAL ISOLATE",
    ),
    (
        LIMITS,
        "byte order mark in a Dockerfile",
        "roce",
        lambda d: d["images"][0].update(dockerfile="\ufeffFROM x\nRUN rdma-core libibverbs\n"),
        "hidden-characters",
        "error",
        "Stack roce",
        "U\\+FEFF",
    ),
    (
        LIMITS,
        "right-to-left override in a check's environment",
        "roce",
        check_of("fabric", env={"X": f"a{RLO}b"}),
        "hidden-characters",
        "error",
        "Stack roce",
        "U\\+202E .*otherwise than it runs",
    ),
    (
        LIMITS,
        "zero-width joiner in the NCCL defaults",
        "roce",
        lambda d: d["defaults"]["nccl_env_rdma"].update(NCCL_IB_TIMEOUT="22\u200d"),
        "hidden-characters",
        "error",
        "Stack roce",
        "U\\+200D ZERO WIDTH JOINER",
    ),
    (
        LIMITS,
        "right-to-left override in a description",
        "tcp",
        lambda d: d.update(description=f"a{RLO}b"),
        "hidden-characters",
        "warning",
        "Stack tcp",
        "otherwise than it reads",
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


# --- found where the config writes it: (class, case, fixture, edit, rule, its config path, a phrase of message or fix) ---

FOUND: list[tuple[str, str, str, Edit, str, str, str]] = [
    (
        SIZE,
        "ConfigMap from big scripts",
        "roce",
        lambda d: d["scripts"][0]["files"].update({f"part{i}.py": "x" * 200_000 for i in range(6)}),
        "api-limits",
        "scripts[train-script].files",
        "over 1 MiB",
    ),
    (
        SIZE,
        "an environment over ARG_MAX, over etcd's limit first",
        "roce",
        env("dev", {f"V{i}": "x" * 60_000 for i in range(32)}),
        "api-limits",
        "workloads[dev].env",
        "etcd's limit",
    ),
    (
        SIZE,
        "pod template over etcd's limit",
        "roce",
        env("dev", {f"V{i}": "$" * 60_000 for i in range(14)}),
        "api-limits",
        "workloads[dev].env",
        "etcd",
    ),
    (
        NAMES,
        "a variant's Route host and a workload's",
        "roce",
        both(
            add_project("a"),
            add_workload("solo", name="dev-tcp-jupyter", namespace="a", ports=[{"name": "team", "port": 9000, "route": True}]),
        ),
        "derived-names",
        "workloads[dev-tcp-jupyter].ports[team].name",
        "Route host 'dev-tcp-jupyter-team-a'",
    ),
    (
        NAMES,
        "a variant's per-pod claim and a workload's",
        "roce",
        both(
            add_volume(name="workspace-dev", mount_path="/w2", storage_class=fixtures.RBD, shared=False),
            add_workload("solo", name="tcp", namespace="team-a", mounts=[{"volume": "workspace-dev"}]),
        ),
        "derived-names",
        "workloads[tcp].mounts[0].volume",
        "workspace-dev-tcp-0",
    ),
    (
        NAMES,
        "one Route host from two namespaces",
        "roce",
        both(
            add_project("a"),
            add_workload("solo", name="dev", namespace="a", ports=[{"name": "jupyter-team", "port": 9000, "route": True}]),
        ),
        "derived-names",
        "workloads[dev].ports[jupyter-team].name",
        "Route host 'dev-jupyter-team-a'",
    ),
    (
        NAMES,
        "one per-pod claim from two volume/workload pairs",
        "roce",
        both(
            add_volume(name="workspace-d", mount_path="/w2", storage_class=fixtures.RBD, shared=False),
            W("dev", name="d-ev"),
            add_workload("solo", name="ev", namespace="team-a", mounts=[{"volume": "workspace-d"}]),
        ),
        "derived-names",
        "workloads[ev].mounts[0].volume",
        "the per-pod claim of workload 'd-ev' on volume 'workspace'",
    ),
    (
        NAMES,
        "shared claim named like a per-pod claim",
        "roce",
        add_volume(name="workspace-dev-1", mount_path="/x"),
        "derived-names",
        "workloads[dev].mounts[0].volume",
        "volume 'workspace-dev-1'",
    ),
    (
        NAMES,
        "existing claim named like a per-pod claim",
        "roce",
        add_volume(name="workspace-dev-0", mount_path="/x", existing=True, size=None),
        "derived-names",
        "workloads[dev].mounts[0].volume",
        "claim 'workspace-dev-0'",
    ),
    (
        NAMES,
        "pvc_fixes of a shared claim the stack creates",
        "roce",
        pvc_fix("datasets"),
        "derived-names",
        "pvc_fixes[0].pvc",
        "created by this stack (volume 'datasets', volumes[datasets].name)",
    ),
    (
        NAMES,
        "pvc_fixes of a per-pod claim",
        "roce",
        pvc_fix("workspace-dev-1"),
        "derived-names",
        "pvc_fixes[0].pvc",
        "the per-pod claim of workload 'dev'",
    ),
]
classify(FOUND)


@pytest.mark.parametrize("cls,case,fixture,edit,rule,path,phrase", FOUND, ids=[case_id(c) for c in FOUND])
def test_found_where_the_config_writes_it(cls: str, case: str, fixture: str, edit: Edit, rule: str, path: str, phrase: str) -> None:
    assert_found(fixture, edit, rule, path, phrase)


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
