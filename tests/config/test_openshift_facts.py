"""What the config model knows of OpenShift and of the launcher (config/openshift.py), one table each: the SCCs OpenShift
ships and the facts the rules rely on, the platform's namespaces, the files the launcher writes in the pod."""

from __future__ import annotations

import pytest

from config.openshift import BUILTIN_SCCS, LAUNCHER_FILES, OPENSHIFT_SCCS, SccFacts, SccNeeds, platform_namespace
from tests.helpers import MOUNTS, NAMESPACES, SCC, cases_of


@cases_of(MOUNTS)
def test_the_launcher_files_the_model_knows_are_the_launchers() -> None:
    from components.launcher import contract

    assert set(LAUNCHER_FILES) == {contract.DEFAULT_ENV_FILE, contract.DEFAULT_BASH_ENV_FILE, contract.DEFAULT_REPORT_JSON}


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


# runAsUser as apiserver-library-go's user strategies judge uid 0 (pkg/securitycontextconstraints/user/): runasany.go takes
# any uid; mustrunas.go exactly its uid; mustrunasrange.go any uid in [uidRangeMin, uidRangeMax], and with neither set
# the project's range (sccmatching/matcher.go; OpenShift allocates 1000000000 and up); nonroot.go refuses 0.
RUN_AS_USER = [
    ({"type": "RunAsAny"}, True),
    ({"type": "MustRunAs", "uid": 0}, True),
    ({"type": "MustRunAs", "uid": 1001}, False),
    ({"type": "MustRunAsRange", "uidRangeMin": 0, "uidRangeMax": 65535}, True),
    ({"type": "MustRunAsRange", "uidRangeMin": 1000, "uidRangeMax": 65535}, False),
    ({"type": "MustRunAsRange"}, False),
    ({"type": "MustRunAsRange", "uidRangeMin": 0}, False),  # only one end: the plugin refuses the SCC for every pod
    ({"type": "MustRunAsRange", "uidRangeMin": False, "uidRangeMax": 65535}, False),  # not a number
    ({"type": "MustRunAsNonRoot"}, False),
    ({}, False),
]


@cases_of(SCC, len(RUN_AS_USER))
@pytest.mark.parametrize(("run_as", "root"), RUN_AS_USER)
def test_an_scc_admits_uid_0_as_the_plugins_user_strategies_do(run_as: dict[str, object], root: bool) -> None:
    facts = SccFacts.from_object({"runAsUser": run_as})
    assert facts.allows_root is root
    assert SccFacts.from_object(facts.to_object()) == facts  # what preview's expected state states reads back the same
    assert ("(uid 0 admitted)" if root else "(never uid 0)") in facts.said("root")


def test_every_fact_reads_back_from_the_object_that_states_it() -> None:
    for facts in [*OPENSHIFT_SCCS.values(), SccFacts(frozenset({"IPC_LOCK"}), "RunAsAny", True, True, False, None)]:
        assert SccFacts.from_object(facts.to_object()) == facts


def test_a_live_scc_of_another_shape_reads_as_unset_and_says_what_it_has_escaped_and_bounded() -> None:
    odd = SccFacts.from_object({"allowedCapabilities": "*", "runAsUser": "RunAsAny", "allowPrivilegedContainer": "true"})
    assert odd.capabilities == frozenset() and not odd.allows_root and not odd.privileged
    many = SccFacts.from_object({"allowedCapabilities": [f"CAP_{i:03d}" for i in range(50)] + ["X\x1b[2J"]})
    said = many.said("capabilities")
    assert "\x1b" not in said and "(and 43 more)" in said and said.count(",") == 7
    # hostPath volumes as the plugin reads them (util.SCCAllowsFSType): `volumes` holding hostPath or `*`
    assert SccFacts.from_object({"volumes": ["*"]}).host_paths and SccFacts.from_object({"volumes": ["hostPath"]}).host_paths
    assert not SccFacts.from_object({"volumes": ["configMap"], "allowHostDirVolumePlugin": False}).host_paths


def test_one_judgement_of_what_an_scc_refuses_allows_beyond_and_allows_unstated() -> None:
    needs = SccNeeds.of(["root-ipc-lock", "none"])
    assert needs == SccNeeds(frozenset({"IPC_LOCK"}), root=True, privileged=False, used=True)
    privileged = OPENSHIFT_SCCS["privileged"]
    stated = SccFacts(frozenset({"IPC_LOCK"}), "RunAsAny", privileged=False, host_paths=False, escalation=True, seccomp=None)
    verdict = privileged.judge(needs, stated)
    assert verdict.refused == [] and verdict.unstated == ["capabilities", "privileged", "host_paths", "host_namespaces"]
    assert [f for f, _ in verdict.broad] == ["privileged", "host_paths", "host_namespaces", "capabilities"]
    assert stated.judge(needs, stated) == ([], [], [])  # exactly what the pods need: nothing broad, nothing unstated
    restricted = OPENSHIFT_SCCS["restricted-v2"]
    assert restricted.judge(needs).refused == [("capabilities", "capability IPC_LOCK"), ("root", "uid 0")]
    assert restricted.judge(needs, restricted).refused == []  # what the stated facts refuse is the preflight's finding
    assert restricted.judge(SccNeeds()).broad == []  # granted for no pod: only what is broad whatever the pods counts
