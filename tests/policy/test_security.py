"""The security rules (policy/rules/security.py): an SCC is judged by its facts, and one OpenShift ships by what OpenShift
ships, whatever the config claims; root with IPC_LOCK under an SCC that admits neither is an error; the memlock
strategy's reason is printed once per stack. FINDINGS holds each class's findings, PASSES what must stay accepted."""

from __future__ import annotations

import pytest

import policy
from tests import fixtures
from tests.fixtures import Edit, W, both, existing, sec
from tests.helpers import MEMLOCK_REASON, SCC, SCC_FACTS, assert_accepted, assert_reported, case_id, cases_of, classify, findings_of

CAPS = ["IPC_LOCK"]


# --- a preflight finding: (class, case, fixture, edit, rule, severity, object, a phrase of message and fix) ---------

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
    (
        SCC_FACTS,
        "existing SCC without IPC_LOCK",
        "roce",
        lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["NET_RAW"]),
        "scc-capabilities",
        "error",
        "StatefulSet team-a/dev",
        "security.existing_allowed_capabilities",
    ),
    (
        SCC_FACTS,
        "existing SCC without SYS_RESOURCE",
        "roce",
        both(
            lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"]),
            W("dev", memlock="root-sys-resource"),
        ),
        "scc-capabilities",
        "error",
        "StatefulSet team-a/dev",
        "add SYS_RESOURCE to its allowedCapabilities",
    ),
    (
        SCC_FACTS,
        "existing SCC not admitting root",
        "roce",
        lambda d: d["security"].update(
            scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"], existing_allows_root=False
        ),
        "memlock-strategy",
        "error",
        "StatefulSet team-a/dev",
        "does not admit root",
    ),
    (
        SCC_FACTS,
        "existing SCC not allowing privileged",
        "ib",
        lambda d: d["security"].update(scc="site-priv", existing_allows_privileged=False, broad_grant_reason=None),
        "memlock-strategy",
        "error",
        "StatefulSet lab/env",
        "does not allow",
    ),
    (MEMLOCK_REASON, "root-ipc-lock", "roce", lambda d: None, "memlock-strategy", "info", "Stack roce", "checkov"),
    (
        MEMLOCK_REASON,
        "root-sys-resource",
        "roce",
        W("dev", memlock="root-sys-resource"),
        "memlock-strategy",
        "info",
        "Stack roce",
        "SYS_RESOURCE lets",
    ),
]
classify(FINDINGS)


@pytest.mark.parametrize("cls,case,fixture,edit,rule,severity,obj,phrase", FINDINGS, ids=[case_id(c) for c in FINDINGS])
def test_reported_by_the_preflight(cls: str, case: str, fixture: str, edit: Edit, rule: str, severity: str, obj: str, phrase: str) -> None:
    assert_reported(cls, fixture, edit, rule, severity, obj, phrase)


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
    (
        SCC_FACTS,
        "existing SCC with IPC_LOCK",
        "roce",
        both(
            lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"]),
            lambda d: d.setdefault("accepted_warnings", []).append(
                {"rule": "scc-grant", "object": "ClusterRole system:openshift:scc:site-rdma", "reason": "made by the site's admin"}
            ),
        ),
    ),
]
classify(PASSES)


@pytest.mark.parametrize("cls,case,fixture,edit", PASSES, ids=[case_id(c) for c in PASSES])
def test_still_accepted(cls: str, case: str, fixture: str, edit: Edit) -> None:
    assert_accepted(fixture, edit)


@cases_of(SCC)
def test_a_shipped_scc_is_one_finding_at_security_scc() -> None:
    config = fixtures.config("roce", existing("restricted-v2", existing_allowed_capabilities=CAPS))
    found = [f for f in findings_of(config) if f.rule == "scc-capabilities"]
    assert len(found) == 1 and found[0].where == "security.scc", [f.line() for f in found]
    assert {"StatefulSet team-a/dev", "Job team-a/train-r1"} <= set(found[0].affects)


@cases_of(MEMLOCK_REASON, 2)
def test_the_root_strategy_reason_is_printed_once_per_stack() -> None:
    findings = findings_of(fixtures.config("roce"))
    [f] = [f for f in findings if f.severity == "info"]
    assert f.rule == "memlock-strategy" and f.line().startswith("info memlock-strategy defaults.memlock_rdma")
    assert "KNOWLEDGE.md" in f.message and "StatefulSet team-a/dev" in f.message and "Job team-a/train-r1" in f.message
    assert policy.summary("roce", findings).endswith(f"0 errors, 0 warnings, 1 info ({len(policy.RULES)} rules)")
    assert [f for f in findings_of(fixtures.config("tcp")) if f.severity == "info"] == []  # nobody runs as root there
