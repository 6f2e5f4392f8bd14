"""The preflight in operator mode: the SR-IOV operator's namespace and NADs, node policies against the nodes and
attachments they serve, and the MTU a policy gives the attachment's."""

from __future__ import annotations

from components.program import objects
from tests import fixtures
from tests.fixtures import OPERATOR_NS, REASON, Data, operator_mode, with_policies
from tests.helpers import findings_of


class TestPreflight:
    def test_operator_mode_passes_the_network_rules(self) -> None:
        c = fixtures.config("roce", with_policies)
        bad = [f.line() for f in findings_of(c) if f.severity == "error"]
        assert bad == []
        # the project tier alone (no SriovNetwork rendered) still knows the NADs the operator makes
        project = [f.line() for f in findings_of(c, objects(c, "project")) if f.rule in ("network-attachments", "sriov-resources")]
        assert project == []

    def test_too_few_vfs_per_node(self) -> None:
        def crowded(d: Data) -> None:
            with_policies(d, num_vfs=1)
            d["workloads"][0]["gpus_per_node"] = 2  # two dev pods now fit on one node: each takes one VF per port

        found = [f for f in findings_of(fixtures.config("roce", crowded)) if f.rule == "sriov-node-policies"]
        assert found and all(f.severity == "error" for f in found)
        assert "node_sets[main].node_policies[0].num_vfs" in {f.where for f in found}
        assert any("raise num_vfs to 2" in f.fix for f in found)
        assert not [
            f
            for f in findings_of(
                fixtures.config("roce", lambda d: with_policies(d, num_vfs=2), lambda d: d["workloads"][0].update(gpus_per_node=2))
            )
            if f.rule == "sriov-node-policies"
        ]

    def test_an_mtu_the_nads_do_not_name(self) -> None:
        found = [f for f in findings_of(fixtures.config("roce", lambda d: with_policies(d, mtu=1500))) if f.rule == "sriov-node-policies"]
        assert {f.where for f in found} == {"node_sets[main].node_policies[0].mtu", "node_sets[main].node_policies[1].mtu"}
        assert all("set mtu to 9000" in f.fix for f in found)

    def test_a_policy_selecting_more_than_one_named_node(self) -> None:
        c = fixtures.config("roce", with_policies)
        objs = objects(c)
        pol = next(o for o in objs if o["kind"] == "SriovNetworkNodePolicy")
        pol["spec"]["nodeSelector"] = {"node-role.kubernetes.io/worker": ""}
        found = [f for f in findings_of(c, objs) if f.rule == "sriov-node-policies"]
        assert len(found) == 1 and found[0].field == "spec.nodeSelector" and "reboot" in found[0].message

    def test_the_reboot_is_a_warning_that_prints_the_reason(self) -> None:
        found = [f for f in findings_of(fixtures.config("roce", with_policies)) if f.rule == "sriov-node-reboot"]
        assert len(found) == 1 and found[0].severity == "warning"
        assert REASON in found[0].message and "node-a, node-b, node-c, node-d" in found[0].message
        assert not [f for f in findings_of(fixtures.config("roce", operator_mode)) if f.rule == "sriov-node-reboot"]

    def test_the_platform_namespace_exception_is_exact(self) -> None:
        c = fixtures.config("roce", with_policies)
        objs = objects(c)
        assert not [f for f in findings_of(c, objs) if f.rule == "platform-namespaces"]
        net = next(o for o in objs if o["kind"] == "SriovNetwork")
        moved = [{**net, "metadata": {**net["metadata"], "namespace": "openshift-config"}}]
        nad = [
            {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": {"name": "x", "namespace": OPERATOR_NS}}
        ]
        default = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}]
        for extra, obj in (
            (moved, "SriovNetwork openshift-config/"),
            (nad, "NetworkAttachmentDefinition " + OPERATOR_NS),
            (default, "ConfigMap default/x"),
        ):
            found = [f for f in findings_of(c, [*objs, *extra]) if f.rule == "platform-namespaces"]
            assert len(found) == 1 and found[0].severity == "error" and found[0].object.startswith(obj), [f.line() for f in found]
