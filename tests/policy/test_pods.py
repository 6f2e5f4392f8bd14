"""The pod rules (policy/rules/pods.py): an image pinned by digest, or warned about; what Python's environment in the pod
breaks; /dev/shm within the memory limit; a debugger's port never routed outside the cluster. FINDINGS holds each class's
findings, PASSES what must stay accepted."""

from __future__ import annotations

import re

import pytest

import stacks
from config.values import GIB
from tests import fixtures
from tests.fixtures import Edit, W, add_port, add_workload, both, check_of, env, port
from tests.helpers import (
    DEBUGGER,
    IMAGE,
    NAMES,
    PYENV,
    RESOURCES,
    assert_accepted,
    assert_found,
    assert_reported,
    case_id,
    cases_of,
    classify,
    findings_of,
    rendered_stack,
)

DIGEST = "sha256:" + "0123456789abcdef" * 4


# --- a preflight finding: (class, case, fixture, edit, rule, severity, object, a phrase of message and fix) ---------

FINDINGS: list[tuple[str, str, str, Edit, str, str, str, str]] = [
    (
        IMAGE,
        ":latest",
        "tcp",
        W("one", image="quay.io/example/pytorch:latest"),
        "image",
        "warning",
        "StatefulSet proj/one",
        "`latest` without a digest",
    ),
    (IMAGE, "no tag", "tcp", W("one", image="quay.io/example/pytorch"), "image", "warning", "StatefulSet proj/one", "no tag means latest"),
    (
        IMAGE,
        "a version tag",
        "tcp",
        W("one", image="quay.io/example/pytorch:2.9"),
        "image",
        "warning",
        "StatefulSet proj/one",
        "the tag '2.9'",
    ),
    (
        IMAGE,
        "registry port and tag",
        "tcp",
        W("one", image="localhost:5000/pytorch:2.9"),
        "image",
        "warning",
        "StatefulSet proj/one",
        "skopeo inspect",
    ),
    (
        IMAGE,
        "an existing ImageStream's tag",
        "roce",
        both(
            lambda d: d["existing"].update(image_streams=[{"namespace": "team-b", "name": "base"}]),
            W("solo", image="image-registry.openshift-image-registry.svc:5000/team-b/base:v1"),
        ),
        "image",
        "warning",
        "StatefulSet team-b/solo",
        "@sha256:<digest>",
    ),
    (
        PYENV,
        "PYTHONPATH",
        "roce",
        env("dev", {"PYTHONPATH": "/workspace/src"}),
        "image",
        "warning",
        "StatefulSet team-a/dev",
        "shadows the image's",
    ),
    (
        PYENV,
        "PYTHONSTARTUP",
        "tcp",
        env("one", {"PYTHONSTARTUP": "/ws/.pythonrc"}),
        "image",
        "warning",
        "StatefulSet proj/one",
        "interactive Python only",
    ),
    (
        PYENV,
        "PYTHONPATH from a Secret",
        "roce",
        lambda d: fixtures.workload(d, "train")["secret_env"].update(PYTHONPATH={"secret": "hf-secret", "key": "path"}),
        "image",
        "warning",
        "Job team-a/train-r1",
        "accept the warning",
    ),
    (
        RESOURCES,
        "shm below 64Mi",
        "tcp",
        W("one", shm_size="32Mi"),
        "shm-size",
        "warning",
        "StatefulSet proj/one",
        "too small|less than the 64 MiB",
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
]
classify(FINDINGS)


@pytest.mark.parametrize("cls,case,fixture,edit,rule,severity,obj,phrase", FINDINGS, ids=[case_id(c) for c in FINDINGS])
def test_reported_by_the_preflight(cls: str, case: str, fixture: str, edit: Edit, rule: str, severity: str, obj: str, phrase: str) -> None:
    assert_reported(cls, fixture, edit, rule, severity, obj, phrase)


# --- found where the config writes it: (class, case, fixture, edit, rule, its config path, a phrase of message or fix) ---

FOUND: list[tuple[str, str, str, Edit, str, str, str]] = [
    (
        NAMES,
        "a Route host over 63 characters",
        "roce",
        add_workload("solo", name="s" * 45, ports=[{"name": "jupyter-lab-xy", "port": 9000, "route": True}]),
        "route-host",
        f"workloads[{'s' * 45}].ports[jupyter-lab-xy].name",
        "whose first label exceeds 63 characters",
    ),
    # a bandwidth check that cannot finish within its deadline, at the line rate (policy/rules/pods.py: the least time)
    (
        RESOURCES,
        "200,000 iterations up to 64 GiB in a minute",
        "roce",
        check_of("fabric", iterations=100_000, warmup_iterations=100_000, max_bytes=64 * GIB, deadline_minutes=1),
        "bandwidth-deadline",
        "bandwidth_checks[fabric].iterations",
        "at least 4.2 days at the line rate (800 Gb/s), longer than the check's deadline of 1 min: the Job fails with DeadlineExceeded",
    ),
    (
        RESOURCES,
        "a tcp check without a line rate, at the fastest node's",
        "roce",
        check_of("fabric", transport="tcp", iterations=5_000, max_bytes=16 * GIB, deadline_minutes=1),
        "bandwidth-deadline",
        "bandwidth_checks[fabric].iterations",
        "(1600 Gb/s)",
    ),
]
classify(FOUND)


@pytest.mark.parametrize("cls,case,fixture,edit,rule,path,phrase", FOUND, ids=[case_id(c) for c in FOUND])
def test_found_where_the_config_writes_it(cls: str, case: str, fixture: str, edit: Edit, rule: str, path: str, phrase: str) -> None:
    assert_found(fixture, edit, rule, path, phrase)


PASSES: list[tuple[str, str, str, Edit]] = [
    (IMAGE, "pinned by digest", "tcp", W("one", image="quay.io/example/pytorch@" + DIGEST)),
    (IMAGE, "sha512 digest", "tcp", W("one", image="quay.io/example/pytorch:2.9@sha512:" + "ab" * 64)),
    (IMAGE, "registry port 65535", "tcp", W("one", image="registry.example.org:65535/a/b@" + DIGEST)),
    (PYENV, "PATH written whole", "roce", env("dev", {"PATH": "/opt/venv/bin:/usr/local/bin:/usr/bin:/bin"})),
    (DEBUGGER, "debugpy reached with port-forward", "roce", lambda d: None),
    (DEBUGGER, "Jupyter and a port 5677 routed", "roce", add_port("dev", name="dbg", port=5677, route=True)),
    (RESOURCES, "1,000 iterations up to 1 GiB in 30 minutes", "roce", check_of("fabric", iterations=1_000)),
]
classify(PASSES)


@pytest.mark.parametrize("cls,case,fixture,edit", PASSES, ids=[case_id(c) for c in PASSES])
def test_still_accepted(cls: str, case: str, fixture: str, edit: Edit) -> None:
    assert_accepted(fixture, edit)


def test_the_fix_of_a_check_past_its_deadline_finishes_in_it() -> None:
    """Each way out the finding names (the iterations that fit, or the deadline that fits them) passes."""
    too_long = check_of("fabric", iterations=2_000, max_bytes=16 * GIB, deadline_minutes=1)
    (found,) = [f for f in findings_of(fixtures.config("roce", too_long)) if f.rule == "bandwidth-deadline"]
    iterations, minutes = (int(n) for n in re.findall(r"lower iterations to (\d+) .* deadline_minutes to at least (\d+)", found.fix)[0])
    for fixed in (check_of("fabric", iterations=iterations), check_of("fabric", deadline_minutes=minutes)):
        assert not [f for f in findings_of(fixtures.config("roce", too_long, fixed)) if f.rule == "bandwidth-deadline"]
    longer = check_of("fabric", iterations=iterations + 1)
    assert [f for f in findings_of(fixtures.config("roce", too_long, longer)) if f.rule == "bandwidth-deadline"]


@cases_of(DEBUGGER, len(stacks.names()))
@pytest.mark.parametrize("name", stacks.names())
def test_the_committed_stacks_route_no_debugger(name: str) -> None:
    routes = [o for o in rendered_stack(name).objects() if o["kind"] == "Route"]
    assert not [r for r in routes if r["spec"]["port"]["targetPort"] in ("debugpy", 5678)]
    assert all(not (p.route and p.route_reason) for w in stacks.load(name).workloads for p in w.ports)  # none needs a reason
