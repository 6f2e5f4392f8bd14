"""The security rules where OpenShift's SCC admission disagreed with them (live/tests/test_scc_differential.py runs 200
seeded configs through both; docs/live.md "The security rules against SCC admission" lists the disagreements). Each case
here is one found live, rebuilt from the tests' own fixtures, and its neighbours: what must stay as it was.

- restricted-v3 and nested-container, SCCs OpenShift ships, were missing from the table of shipped SCCs: the preflight
  accepted the stack's RDMA pods under `security.scc: restricted-v3` on the config's `existing_*` defaults (root with
  IPC_LOCK), and a stack could `create` (own, and on destroy delete) either. Both require a user namespace
  (`userNamespaceLevel: RequirePodLevel`), which the program's pods do not ask for: admission refuses every one (seed
  3300019: `.spec.securityContext.hostUsers: Invalid value: null: Host Users must be set to false`). Rule
  `scc-user-namespace`; restricted-v3, like restricted-v2, needs no grant (both are bound to system:authenticated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import policy
import stacks
from components.program import objects, patches
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures

Data = dict[str, Any]


def errors(config: ClusterConfig) -> list[Finding]:
    return [f for f in policy.check(config, objects(config), patches(config), others=[]) if f.severity == "error"]


def refused(config: ClusterConfig) -> dict[str, set[str]]:
    """The rules that refuse each pod template (by object; one cause in the config is one finding, `affects` its pods)."""
    out: dict[str, set[str]] = {}
    for f in errors(config):
        for obj in f.affects or (f.object,):
            out.setdefault(obj, set()).add(f.rule)
    return out


def security(**fields: Any) -> Callable[[Data], Any]:
    def edit(d: Data) -> None:
        for k in [k for k in d["security"] if k.startswith("existing_") or k == "broad_grant_reason"]:
            del d["security"][k]
        d["security"].update(fields)

    return edit


def test_seed_3300019_rdma_pods_under_restricted_v3_are_refused() -> None:
    """As found live: roce with `security.scc: restricted-v3` (referenced) and `unprivileged_scc: hostmount-anyuid`. The
    RDMA pods (dev, train, the check) pinned restricted-v3; check accepted them, admission refused each: no user
    namespace, uid 0 outside 1000-65534, IPC_LOCK not allowed. The TCP pods under hostmount-anyuid: refused by both."""
    config = fixtures.config("roce", security(scc="restricted-v3", create=False, unprivileged_scc="hostmount-anyuid"))
    found = refused(config)
    for rdma in ("StatefulSet team-a/dev", "Job team-a/train-r1"):
        assert {"scc-user-namespace", "scc-capabilities", "memlock-strategy"} <= found[rdma], found
    check = next(o for o in found if o.startswith("Job team-a/fabric-"))
    assert "scc-user-namespace" in found[check]
    for tcp in ("StatefulSet team-b/solo", "StatefulSet team-a/dev-tcp"):
        assert "scc-user-namespace" not in found[tcp] and "scc-grant" in found[tcp], found
    said = next(f for f in errors(config) if f.rule == "scc-user-namespace")
    assert "Host Users must be set to false" in said.message and "restricted-v2" in said.fix
    assert said.where == "security.scc"  # one cause, at the config's line


@pytest.mark.parametrize("fixture", ["tcp", "roce"])
def test_tcp_pods_under_restricted_v3_need_no_grant_but_a_user_namespace(fixture: str) -> None:
    """restricted-v3 as the unprivileged SCC: every authenticated user may use it (no grant), its seccomp profile is the
    program's; only the user namespace refuses the pods."""
    config = fixtures.config(fixture, security(unprivileged_scc="restricted-v3"))
    found = refused(config)
    tcp = [o for o, rules in found.items() if "StatefulSet" in o and o.split("/")[1] in ("one", "two", "solo", "dev-tcp")]
    assert tcp and all(found[o] == {"scc-user-namespace"} for o in tcp), found


def test_nested_container_admits_uid_0_but_not_ipc_lock_nor_the_hosts_user_namespace() -> None:
    config = fixtures.config("roce", security(scc="nested-container", create=False))
    found = refused(config)
    assert {"scc-user-namespace", "scc-capabilities"} <= found["StatefulSet team-a/dev"], found
    assert not [f for f in errors(config) if f.rule == "memlock-strategy" and "does not admit root" in f.message]


@pytest.mark.parametrize("name", ["restricted-v3", "nested-container"])
def test_a_stack_may_not_create_them(name: str) -> None:
    with pytest.raises(stacks.ConfigError, match="is an SCC OpenShift ships"):
        fixtures.config("roce", security(scc=name, create=True))


@pytest.mark.parametrize("fixture", ["roce", "ib", "tcp"])
def test_the_fixtures_as_they_are_have_no_user_namespace_finding(fixture: str) -> None:
    assert not [f for f in errors(fixtures.config(fixture)) if f.rule == "scc-user-namespace"]


def test_an_scc_the_stack_creates_never_requires_a_user_namespace() -> None:
    config = fixtures.config("roce")
    (created,) = [o for o in objects(config) if o["kind"] == "SecurityContextConstraints"]
    assert "userNamespaceLevel" not in created
