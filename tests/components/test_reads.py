"""What the program reads from the cluster before it declares anything (components/prerequisites.py): the objects each
tier needs, and the live facts it holds against the config: an existing SCC's capabilities, the NADs the SR-IOV operator
makes in operator mode."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pytest

from components.prerequisites import requirements
from config.openshift import SccFacts
from tests import fixtures
from tests.fixtures import OPERATOR_NS, operator_mode
from tests.helpers import BROAD, SCC_FACTS, cases_of, findings_of
from tools.render import MISSING, MissingObject, run


@cases_of(SCC_FACTS)
def test_a_live_scc_lacking_what_the_config_says_it_allows_still_fails_preview() -> None:
    config = fixtures.config(
        "roce", lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"])
    )
    live = {"metadata": {"name": "site-rdma"}, "allowedCapabilities": ["NET_RAW"], "runAsUser": {"type": "RunAsAny"}}
    with pytest.raises(pulumi.RunError, match=r"site-rdma: it does not admit capability IPC_LOCK \(its allowedCapabilities NET_RAW\)"):
        run(config, "platform", live={("SecurityContextConstraints", "site-rdma"): live})


# The audit's cluster: the SCC the config names is really a copy of `privileged` (its fields as OpenShift ships them).
PRIVILEGED_COPY = {
    "metadata": {"name": "site-rdma"}, "allowedCapabilities": ["*"], "allowPrivilegedContainer": True,
    "allowHostDirVolumePlugin": True, "allowHostIPC": True, "allowHostNetwork": True, "allowHostPID": True,
    "allowHostPorts": True, "runAsUser": {"type": "RunAsAny"}, "seccompProfiles": ["*"], "volumes": ["*"],
}  # fmt: skip
NARROW_FACTS = {"scc": "site-rdma", "create": False, "existing_allowed_capabilities": ["IPC_LOCK"], "existing_allows_privileged": False}
HONEST_FACTS = {
    "scc": "site-rdma", "create": False, "existing_allowed_capabilities": None, "existing_allows_privileged": True,
    "existing_allows_host_paths": True, "existing_allows_host_namespaces": True,
    "broad_grant_reason": "the site's admin grants a copy of privileged; a narrower SCC is requested",
}  # fmt: skip


def _platform(facts: dict[str, Any], live: dict[str, Any]) -> None:
    """The platform tier's run of roce, whose SCC the config describes by `facts`, on a cluster where it is `live`."""
    config = fixtures.config("roce", lambda d: d["security"].update(facts))
    run(config, "platform", live={("SecurityContextConstraints", "site-rdma"): live})


@cases_of(BROAD)
def test_a_live_scc_broader_than_its_facts_fails_preview_naming_each_field_and_the_live_value() -> None:
    with pytest.raises(pulumi.RunError) as err:
        _platform(NARROW_FACTS, PRIVILEGED_COPY)
    said = str(err.value)
    for field, live in [
        ("existing_allowed_capabilities says IPC_LOCK", "allowedCapabilities * (every capability)"),
        ("existing_allows_privileged says false", "allowPrivilegedContainer true"),
        ("existing_allows_host_paths says false", "allowHostDirVolumePlugin true"),
        ("existing_allows_host_namespaces says false", "allowHostIPC, allowHostNetwork, allowHostPID, allowHostPorts true"),
    ]:
        assert f"it has {live}, where security.{field}" in said, said
    assert "does not admit" not in said and "security.broad_grant_reason" in said and "clusters/roce.py" in said


@cases_of(BROAD)
def test_honest_facts_with_a_reason_pass_preview_and_the_preflight_prints_the_reason() -> None:
    _platform(HONEST_FACTS, PRIVILEGED_COPY)
    found = findings_of(fixtures.config("roce", lambda d: d["security"].update(HONEST_FACTS)))
    [f] = [f for f in found if f.rule == "privileged-scc"]
    assert f.severity == "warning" and HONEST_FACTS["broad_grant_reason"] in f.message and f.where == "security.broad_grant_reason"
    with_no_reason = fixtures.config("roce", lambda d: d["security"].update({**HONEST_FACTS, "broad_grant_reason": None}))
    assert [f.severity for f in findings_of(with_no_reason) if f.rule == "privileged-scc"] == ["error"]


@cases_of(SCC_FACTS, 3)
@pytest.mark.parametrize(
    ("run_as", "refused"),
    [
        ({"type": "MustRunAsRange", "uidRangeMin": 0, "uidRangeMax": 65535}, None),
        ({"type": "MustRunAsRange", "uidRangeMin": 1000, "uidRangeMax": 65535}, "runAsUser MustRunAsRange 1000-65535 (never uid 0)"),
        ({"type": "MustRunAsRange"}, "runAsUser MustRunAsRange (never uid 0)"),
    ],
)
def test_a_site_scc_admits_root_where_its_uid_range_holds_0(run_as: dict[str, Any], refused: str | None) -> None:
    """The reverse of a broad grant: a site SCC whose runAsUser range starts at 0 admits uid 0 (user/mustrunasrange.go),
    as existing_allows_root says, and preview takes it; a range without 0 is refused in the same words."""
    live = {"metadata": {"name": "site-rdma"}, "allowedCapabilities": ["IPC_LOCK"], "runAsUser": run_as}
    facts = {**NARROW_FACTS, "existing_allows_root": True}
    if refused is None:
        _platform(facts, live)
        return
    with pytest.raises(pulumi.RunError, match=re.escape(f"it does not admit uid 0 (its {refused})")):
        _platform(facts, live)


@cases_of(BROAD, 4)
@pytest.mark.parametrize(
    ("live", "facts"),
    [
        (PRIVILEGED_COPY, NARROW_FACTS),
        (PRIVILEGED_COPY, HONEST_FACTS),
        ({**PRIVILEGED_COPY, "allowedCapabilities": ["IPC_LOCK"], "allowPrivilegedContainer": False}, NARROW_FACTS),
        ({"metadata": {}, "allowedCapabilities": ["IPC_LOCK"], "runAsUser": {"type": "RunAsAny"}}, NARROW_FACTS),
    ],
)
def test_what_preview_says_of_a_live_scc_is_what_check_says_of_the_same_facts(live: dict[str, Any], facts: dict[str, Any]) -> None:
    """One judgement: the facts read from the live object, stated in the config instead, are what `check` judges. Preview
    passes exactly where they are no broader than the config's, and then `check` of the live facts finds what `check` of
    the config's found."""
    read = SccFacts.from_object(live)
    stated = {
        **facts,
        "existing_allowed_capabilities": None if read.capabilities is None else sorted(read.capabilities),
        "existing_allows_privileged": read.privileged,
        "existing_allows_root": read.allows_root,
        "existing_allows_host_paths": read.host_paths,
        "existing_allows_host_namespaces": bool(read.host_namespaces),
    }

    def judged(security: dict[str, Any]) -> list[tuple[str, str]]:
        return sorted((f.rule, f.severity) for f in findings_of(fixtures.config("roce", lambda d: d["security"].update(security))))

    try:
        _platform(facts, live)
    except pulumi.RunError as err:
        assert "it has " in str(err) and judged(stated) != judged(facts), str(err)
    else:
        assert judged(stated) == judged(facts)


class TestReads:
    def test_the_project_tier_reads_the_nads_the_operator_makes(self) -> None:
        reads = {
            r.object_id: r
            for r in requirements(fixtures.config("roce", operator_mode), "project")
            if r.kind == "NetworkAttachmentDefinition"
        }
        assert set(reads) == {"team-a/team-a-port1-network", "team-a/team-a-port2-network"}
        r = reads["team-a/team-a-port1-network"]
        assert "pulumi up -s roce-platform" in r.fix and r.verify is not None
        assert r.verify({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port1rdma"}}}) is None
        assert "port2rdma" in (r.verify({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port2rdma"}}}) or "")

    def test_a_missing_operator_nad_fails_the_project_preview_with_the_fix(self) -> None:
        # The engine names only the id of a missing object; the read's logical name carries the fix (prerequisites.py).
        names = [x.urn_name for x in run(fixtures.config("roce", operator_mode), "project").reads]
        assert "team-a/team-a-port1-network (if missing: a cluster admin runs pulumi up -s roce-platform)" in names
        with pytest.raises(MissingObject, match=r"resource 'team-a/team-a-port1-network' does not exist"):
            run(
                fixtures.config("roce", operator_mode),
                "project",
                live={("NetworkAttachmentDefinition", "team-a/team-a-port1-network"): MISSING},
            )
        with pytest.raises(pulumi.RunError, match=r"resourceName is 'openshift.io/other'.*Fix: a cluster admin runs"):
            other = {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/other"}}}
            run(
                fixtures.config("roce", operator_mode),
                "project",
                live={("NetworkAttachmentDefinition", "team-a/team-a-port2-network"): other},
            )

    def test_the_platform_tier_reads_the_operators_namespace_not_the_sources(self) -> None:
        reads = [(r.kind, r.object_id) for r in requirements(fixtures.config("roce", operator_mode), "platform")]
        assert ("Namespace", OPERATOR_NS) in reads
        assert not [x for x in reads if x[0] == "NetworkAttachmentDefinition"]
        copy_reads = [(r.kind, r.object_id) for r in requirements(fixtures.config("roce"), "platform")]
        assert ("NetworkAttachmentDefinition", "default/port1-network") in copy_reads and ("Namespace", OPERATOR_NS) not in copy_reads
        with pytest.raises(MissingObject, match=OPERATOR_NS):
            run(fixtures.config("roce", operator_mode), "platform", live={("Namespace", OPERATOR_NS): MISSING})

    def test_a_run_of_both_tiers_does_not_read_what_it_declares(self) -> None:
        reads = [
            r.object_id for r in requirements(fixtures.config("roce", operator_mode), "all") if r.kind == "NetworkAttachmentDefinition"
        ]
        assert reads == []


@cases_of(BROAD)
def test_in_preview_a_field_the_live_scc_lacks_is_absent_not_a_skipped_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine marks a read's missing output unknown in preview, which would skip every check of it (the audit's SCC
    lacks defaultAddCapabilities and userNamespaceLevel): the read takes it as absent, in preview as in `up`."""
    mocks = pulumi.runtime.set_mocks
    monkeypatch.setattr(pulumi.runtime, "set_mocks", lambda *a, **k: mocks(*a, **{**k, "preview": True}))
    with pytest.raises(pulumi.RunError, match="where security.existing_allows_privileged says false"):
        _platform(NARROW_FACTS, PRIVILEGED_COPY)
