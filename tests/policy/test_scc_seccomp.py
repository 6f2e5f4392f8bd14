"""Rule `scc-seccomp` (policy/rules/security.py): found by OpenShift's own SCC admission in the live tier
(docs/live.md "SCC admission"). The program gives every container the RuntimeDefault seccomp profile; an SCC whose
manifest lists no seccompProfiles (anyuid, restricted, nonroot, hostnetwork, hostaccess as OpenShift ships them)
admits no profile at all, and admission refuses every such pod: `pod.metadata.annotations[container.seccomp.security.
alpha.kubernetes.io/training]: Forbidden: seccomp may not be set`. The preflight used to accept these configs."""

from __future__ import annotations

from typing import Any

import pytest

import policy
from components.program import objects, patches
from tests import fixtures


def errors(config: Any) -> list[Any]:
    return [f for f in policy.check(config, objects(config), patches(config)) if f.severity == "error"]


@pytest.mark.parametrize("shipped", ["restricted", "nonroot", "hostnetwork"])
def test_tcp_pods_under_a_shipped_scc_without_seccomp_profiles_are_refused(shipped: str) -> None:
    """The config admission refused live: TCP pods under `restricted` (v1), granted by the stack."""
    config = fixtures.config("tcp", lambda d: d["security"].update(scc=shipped, create=False, grant=True, unprivileged_scc=shipped))
    found = errors(config)
    # hostnetwork lets the pods into the node's network namespace, which none of them needs: a broad grant besides
    assert [f.rule for f in found] == ["privileged-scc", "scc-seccomp"][shipped != "hostnetwork" :], [(f.rule, f.message) for f in found]
    f = found[-1]
    assert f"seccomp profile runtime/default may not be set: SCC {shipped!r} allows none" in f.message
    assert "seccomp may not be set" in f.message and "restricted-v2" in f.fix


@pytest.mark.parametrize("fixture", ["roce", "ib", "tcp"])
def test_the_programs_own_and_the_v2_sccs_admit_runtime_default(fixture: str) -> None:
    """The stack's own SCC lists runtime/default; restricted-v2 does; privileged allows any profile."""
    assert not [f for f in errors(fixtures.config(fixture)) if f.rule == "scc-seccomp"]


def test_an_existing_scc_the_program_does_not_know_is_not_judged_for_seccomp() -> None:
    """No existing_* field says what seccomp profiles an SCC the program does not know admits."""
    existing = {"scc": "site-rdma", "create": False, "existing_allowed_capabilities": ["IPC_LOCK"], "existing_allows_root": True}
    config = fixtures.config("roce", lambda d: d["security"].update(existing))
    assert not [f for f in errors(config) if f.rule == "scc-seccomp"]
