"""What the program reads from the cluster before it declares anything (components/prerequisites.py): the objects each
tier needs, and the live facts it holds against the config: an existing SCC's capabilities, the NADs the SR-IOV operator
makes in operator mode."""

from __future__ import annotations

import pulumi
import pytest

from components.prerequisites import requirements
from tests import fixtures
from tests.fixtures import OPERATOR_NS, operator_mode
from tests.helpers import SCC_FACTS, cases_of
from tools.render import MISSING, MissingObject, run


@cases_of(SCC_FACTS)
def test_a_live_scc_lacking_what_the_config_says_it_allows_still_fails_preview() -> None:
    config = fixtures.config(
        "roce", lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"])
    )
    live = {"metadata": {"name": "site-rdma"}, "allowedCapabilities": ["NET_RAW"], "runAsUser": {"type": "RunAsAny"}}
    with pytest.raises(pulumi.RunError, match="SecurityContextConstraints site-rdma: it does not allow capabilities IPC_LOCK"):
        run(config, "platform", live={("SecurityContextConstraints", "site-rdma"): live})


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
