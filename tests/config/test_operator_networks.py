"""Operator-native SR-IOV networks in the config (fabric.nad_mode operator, node_sets[].node_policies, docs/networks.md):
off by default; what the SR-IOV operator cannot make (InfiniBand, a resource outside its prefix, a CNI key it cannot
render, a value its CRD refuses) and node policies without named nodes or a reason are refused in the stack file's
words; names stay labels, stable and apart; the YAML form reads back."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

import stacks
from config.kube import derived_name, operator_network_name
from config.schema import schema as config_schema
from tests import fixtures
from tests.fixtures import OPERATOR_NS, Data, operator_mode, with_policies
from tests.helpers import refused


class TestConfig:
    def test_off_by_default(self) -> None:
        c = fixtures.config("roce")
        assert c.fabric is not None and c.fabric.nad_mode == "copy"
        assert c.fabric.operator_namespace == OPERATOR_NS
        assert all(not s.node_policies and s.node_reboot_reason is None for s in c.node_sets)

    def test_infiniband_is_refused_naming_the_ib_kind(self) -> None:
        message = refused("roce", operator_mode, lambda d: d["fabric"].update(link_layer="infiniband"))
        assert "fabric.nad_mode" in message and "SriovIBNetwork" in message

    def test_a_resource_outside_the_operators_prefix_is_refused(self) -> None:
        message = refused("roce", operator_mode, lambda d: d["fabric"]["attachments"][0].update(resource="example.com/port1rdma"))
        assert "fabric.attachments[0].resource" in message and "openshift.io/NAME" in message

    def test_a_cni_key_the_operator_cannot_render_is_refused(self) -> None:
        def bridge(d: Data) -> None:
            a = d["fabric"]["attachments"][1]
            a["cni_config"] = a["cni_config"].replace('"type"', '"bridge":"br0","type"')

        message = refused("roce", operator_mode, bridge)
        assert "fabric.attachments[1].cni_config" in message and "bridge" in message and "nad_mode 'copy'" in message

    @pytest.mark.parametrize(
        "key,value,phrase",
        [
            ("spoofchk", "maybe", '"on", "off"'),
            ("vlan", 5000, "0 to 4096"),
            ("vlanQoS", True, "0 to 7"),
            ("type", "macvlan", "sriov CNI only"),
        ],
    )
    def test_a_value_the_crd_refuses_is_refused(self, key: str, value: Any, phrase: str) -> None:
        def bad(d: Data) -> None:
            a = d["fabric"]["attachments"][0]
            a["cni_config"] = json.dumps({**json.loads(a["cni_config"]), key: value})

        assert phrase in refused("roce", operator_mode, bad)

    def test_node_policies_need_named_nodes_and_a_reason(self) -> None:
        counted = refused("roce", with_policies, lambda d: d["node_sets"][0].update(nodes=[], count=4))
        assert "node_sets[main].node_policies" in counted and "kubernetes.io/hostname" in counted
        unreasoned = refused("roce", with_policies, lambda d: d["node_sets"][0].pop("node_reboot_reason"))
        assert "node_sets[main].node_reboot_reason" in unreasoned and "reboots" in unreasoned

    def test_a_policy_for_no_attachment_and_a_pf_twice_are_refused(self) -> None:
        other = refused("roce", with_policies, lambda d: d["node_sets"][0]["node_policies"][0].update(resource="openshift.io/other"))
        assert "no attachment's resource" in other
        twice = refused("roce", with_policies, lambda d: d["node_sets"][0]["node_policies"][1].update(pf_names=["eno5np0"]))
        assert "a PF is named by two policies" in twice

    def test_an_unsupported_nic_is_refused(self) -> None:
        vendor = refused("roce", with_policies, lambda d: d["node_sets"][0]["node_policies"][0].update(vendor="abcd"))
        assert "vendor abcd" in vendor
        device = refused("roce", with_policies, lambda d: d["node_sets"][0]["node_policies"][0].update(vendor="15b3", device_id="9999"))
        assert "1021 is ConnectX-7" in device

    def test_the_operator_namespace_is_no_project_of_the_stack(self) -> None:
        def mine(d: Data) -> None:
            d["fabric"]["operator_namespace"] = "team-b"

        assert "fabric.operator_namespace" in refused("roce", operator_mode, mine)

    def test_two_entries_that_would_make_one_sriov_network_are_refused(self) -> None:
        # namespace team-a + network a-port1 and namespace team + network a-team-a... the simplest: PROJECT-NETWORK meets.
        def clash(d: Data) -> None:
            d["namespaces"].append("team")
            d["security"]["service_accounts"].append({"name": "trainer", "namespace": "team"})
            d["fabric"]["attachments"][1]["network"] = "a-port1-network"
            d["fabric"]["attachments"][1]["cni_config"] = d["fabric"]["attachments"][1]["cni_config"].replace("port2-network", "x")
            w = fixtures.workload(d, "train")
            w["namespace"] = "team"
            w["mounts"], w["scripts"], w["secret_env"] = [], [], {}
            w["args"] = ["python", "train.py"]
            w["image"] = fixtures.PYTORCH

        message = refused("roce", operator_mode, clash)
        assert "SriovNetwork 'team-a-port1-network'" in message and "Rename one of them" in message

    def test_names_are_labels_stable_and_apart(self) -> None:
        long_ns, long_net = "n" * 60, "eno5np0-network"
        name = operator_network_name(long_ns, long_net)
        assert len(name) <= 63 and name == operator_network_name(long_ns, long_net)
        assert name != operator_network_name(long_ns, "eno6np0-network")
        assert operator_network_name("team-a", "port1-network") == "team-a-port1-network"
        assert derived_name("main", "Port_1rdma", "node-a") == "main-port-1rdma-node-a"

    def test_the_yaml_form_reads_back(self) -> None:
        c = fixtures.config("roce", with_policies)
        assert stacks.validate(yaml.safe_load(stacks.dump(c)), "round trip") == c
        schema = json.dumps(config_schema())
        for field in ("operator_namespace", "node_policies", "node_reboot_reason", "SriovNodePolicy", "num_vfs"):
            assert field in schema
