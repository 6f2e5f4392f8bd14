"""The security rules (policy/rules/security.py): an SCC is judged by its facts, and one OpenShift ships by what OpenShift
ships, whatever the config claims; root with IPC_LOCK under an SCC that admits neither is an error; the memlock
strategy's reason is printed once per stack; a privileged container says why, and the launcher's pinning proof fits the
pod. FINDINGS holds each class's findings, FOUND those located at a field of the config, PASSES what must stay
accepted."""

from __future__ import annotations

import pytest

import policy
from tests import fixtures
from tests.fixtures import Edit, W, both, existing, sec
from tests.helpers import (
    BROAD,
    MEMLOCK_REASON,
    RESOURCES,
    SCC,
    SCC_FACTS,
    assert_accepted,
    assert_found,
    assert_reported,
    case_id,
    cases_of,
    classify,
    findings_of,
)

CAPS = ["IPC_LOCK"]
SITE = "site-rdma"  # an SCC the site's admin made, which the program neither creates nor knows
REASON = "the site's admin made it for the whole lab; a narrower one is requested"


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
        "anyuid claimed to allow hostPath volumes",
        "tcp",
        existing("anyuid", existing_allows_host_paths=True),
        "shipped-scc",
        "warning",
        "SecurityContextConstraints anyuid",
        "existing_allows_host_paths says true, but OpenShift ships 'anyuid' with allowHostDirVolumePlugin false",
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
        "allows privileged containers, hostPath volumes",
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
    (
        BROAD,
        "every capability, with its reason",
        "roce",
        existing(SITE, broad_grant_reason=REASON),
        "privileged-scc",
        "warning",
        f"SecurityContextConstraints {SITE}",
        f"allows every capability .* is granted to team-a/trainer; the stack's broad_grant_reason: {REASON}",
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
PASSES += [
    (BROAD, "an existing SCC that allows what its pods need and no more", "roce", both(
        existing(SITE, existing_allowed_capabilities=CAPS),
        lambda d: d.setdefault("accepted_warnings", []).append(
            {"rule": "scc-grant", "object": f"ClusterRole system:openshift:scc:{SITE}", "reason": "made by the site's admin"}
        ),
    )),
    (BROAD, "restricted-v2 named for TCP pods: every user may use it", "tcp", existing("restricted-v2", unprivileged_scc="restricted-v2")),
]  # fmt: skip
classify(PASSES)


@pytest.mark.parametrize("cls,case,fixture,edit", PASSES, ids=[case_id(c) for c in PASSES])
def test_still_accepted(cls: str, case: str, fixture: str, edit: Edit) -> None:
    assert_accepted(fixture, edit)


# --- found where the config writes it: (class, case, fixture, edit, rule, its config path, a phrase of message or fix) ---

FOUND: list[tuple[str, str, str, Edit, str, str, str]] = [
    # a shipped SCC's broad grant needs its reason, whatever existing_allows_privileged says
    (
        SCC,
        "privileged claimed unprivileged",
        "roce",
        existing("privileged", existing_allows_privileged=False),
        "privileged-scc",
        "security.broad_grant_reason",
        "allows privileged containers, hostPath volumes",
    ),
    (
        SCC,
        "hostmount-anyuid",
        "tcp",
        existing("hostmount-anyuid"),
        "privileged-scc",
        "security.broad_grant_reason",
        "hostPath volumes (the node's file system)",
    ),
    (SCC, "hostaccess", "tcp", existing("hostaccess"), "privileged-scc", "security.broad_grant_reason", "OpenShift ships 'hostaccess'"),
    (
        SCC,
        "machine-api-termination-handler",
        "tcp",
        existing("machine-api-termination-handler"),
        "privileged-scc",
        "security.broad_grant_reason",
        "hostPath",
    ),
    (
        MEMLOCK_REASON,
        "a privileged workload without privileged_reason",
        "ib",
        lambda d: fixtures.workload(d, "env").pop("privileged_reason"),
        "privileged-container",
        "workloads[env].privileged_reason",
        "without a stated reason",
    ),
    (
        RESOURCES,
        "the pinning proof over an RDMA pod's memory limit",
        "roce",
        W("dev", memory="700Mi", shm_size="64Mi"),
        "pin-bytes",
        "defaults.pin_bytes",
        "it would be OOM-killed at start",
    ),
]
# A broad grant without a reason, at security.broad_grant_reason: every path that grants more than the pods need.
FOUND += [
    (BROAD, "every capability (existing_allowed_capabilities unset)", "roce", existing(SITE), "privileged-scc",
     "security.broad_grant_reason", f"SCC '{SITE}' allows every capability (allowedCapabilities *), more than its pods need"),
    (BROAD, "a capability no pod adds", "roce", existing(SITE, existing_allowed_capabilities=["IPC_LOCK", "SYS_ADMIN"]),
     "privileged-scc", "security.broad_grant_reason", "capabilities no pod under it adds (SYS_ADMIN)"),
    (BROAD, "hostPath volumes", "roce", existing(SITE, existing_allowed_capabilities=CAPS, existing_allows_host_paths=True),
     "privileged-scc", "security.broad_grant_reason", "hostPath volumes (the node's file system)"),
    (BROAD, "the node's namespaces", "roce", existing(SITE, existing_allowed_capabilities=CAPS, existing_allows_host_namespaces=True),
     "privileged-scc", "security.broad_grant_reason", "the node's namespaces and ports (allowHostIPC, allowHostNetwork"),
    (BROAD, "privileged containers no pod runs", "roce",
     existing(SITE, existing_allowed_capabilities=CAPS, existing_allows_privileged=True),
     "privileged-scc", "security.broad_grant_reason", f"SCC '{SITE}' allows privileged containers, more than its pods need"),
    (BROAD, "root for pods that run as none", "tcp", existing("site-tcp", existing_allowed_capabilities=[], unprivileged_scc="site-tcp"),
     "privileged-scc", "security.broad_grant_reason", "uid 0, which no pod under it runs as (runAsUser RunAsAny (uid 0 admitted))"),
    (BROAD, "a shipped SCC of the node's network", "tcp", existing("hostnetwork-v2", unprivileged_scc="hostnetwork-v2"),
     "privileged-scc", "security.broad_grant_reason", "(allowHostNetwork, allowHostPorts) and capabilities no pod under it adds"),
]  # fmt: skip
classify(FOUND)


@pytest.mark.parametrize("cls,case,fixture,edit,rule,path,phrase", FOUND, ids=[case_id(c) for c in FOUND])
def test_found_where_the_config_writes_it(cls: str, case: str, fixture: str, edit: Edit, rule: str, path: str, phrase: str) -> None:
    assert_found(fixture, edit, rule, path, phrase)


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
    assert policy.summary("roce", findings).endswith("0 errors, 0 warnings, 1 info")
    assert [f for f in findings_of(fixtures.config("tcp")) if f.severity == "info"] == []  # nobody runs as root there
