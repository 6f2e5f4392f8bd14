"""What the config model knows of OpenShift and of the launcher (config/openshift.py), one table each: the SCCs OpenShift
ships and the facts the rules rely on, the platform's namespaces, the files the launcher writes in the pod."""

from __future__ import annotations

import pytest

from config.openshift import BUILTIN_SCCS, LAUNCHER_FILES, OPENSHIFT_SCCS, platform_namespace
from tests.helpers import MOUNTS, NAMESPACES, SCC, cases_of


@cases_of(MOUNTS)
def test_the_launcher_files_the_model_knows_are_the_launchers() -> None:
    from components.launcher import launcher

    assert set(LAUNCHER_FILES) == {launcher.DEFAULT_ENV_FILE, launcher.DEFAULT_BASH_ENV_FILE, launcher.DEFAULT_REPORT_JSON}


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


@cases_of(NAMESPACES, 4)
@pytest.mark.parametrize("ns", ["kube-node-lease", "openshift-sriov-network-operator", "default", "openshift"])
def test_platform_namespaces(ns: str) -> None:
    assert platform_namespace(ns)
    assert not platform_namespace(ns + "x" if ns in ("default", "openshift") else "x" + ns)
