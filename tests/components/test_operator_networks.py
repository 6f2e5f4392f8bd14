"""What a stack in operator mode declares (components/networks.py, nodes.py; docs/networks.md): a SriovNetwork per attachment and RDMA
project instead of a NAD copy, a SriovNetworkNodePolicy per named node in the platform tier; each object one the
operator's CRDs admit, and the NAD its controller makes from it the one the copy would have been."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
import pytest

from components.program import objects
from components.tiers import PLATFORM, tier_of
from config.kube import operator_network_name
from tests import fixtures
from tests.fixtures import OPERATOR_NS, REASON, with_policies
from tests.helpers import ROOT
from tools.render import Rendering, run


@cache
def rendered(tier: str = "all") -> Rendering:
    return run(fixtures.config("roce", with_policies), tier)


def of_kind(r: Rendering, kind: str) -> list[dict[str, Any]]:
    return [o for o in r.objects() if o["kind"] == kind]


class TestRender:
    def test_one_sriov_network_per_attachment_and_rdma_project(self) -> None:
        nets = of_kind(rendered(), "SriovNetwork")
        # team-a runs the RDMA pods; team-b only a TCP one.
        assert sorted(n["metadata"]["name"] for n in nets) == ["team-a-port1-network", "team-a-port2-network"]
        assert {n["metadata"]["namespace"] for n in nets} == {OPERATOR_NS}
        spec = next(n["spec"] for n in nets if n["metadata"]["name"] == "team-a-port1-network")
        assert spec["networkNamespace"] == "team-a" and spec["resourceName"] == "port1rdma"
        assert json.loads(spec["ipam"])["range"] == "10.1.1.0/24"
        assert (spec["spoofChk"], spec["trust"], spec["linkState"], spec["vlan"], spec["vlanQoS"]) == ("off", "on", "enable", 0, 0)

    def test_no_nad_is_declared_and_the_pods_name_the_operators(self) -> None:
        r = rendered()
        assert of_kind(r, "NetworkAttachmentDefinition") == []
        sts = next(o for o in r.objects() if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "dev")
        refs = sts["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
        assert refs == "team-a/team-a-port1-network@net1,team-a/team-a-port2-network@net2"

    def test_the_tiers(self) -> None:
        c = fixtures.config("roce", with_policies)
        kinds = {"SriovNetwork", "SriovNetworkNodePolicy"}
        assert all(tier_of(o, c) == PLATFORM for o in objects(c) if o["kind"] in kinds)
        assert {o["kind"] for o in objects(c, "project")} & (kinds | {"NetworkAttachmentDefinition"}) == set()
        assert {o["kind"] for o in objects(c, "platform")} >= kinds
        # the rendered platform tier really declares them under the program (mocks)
        assert len(of_kind(rendered("platform"), "SriovNetworkNodePolicy")) == 8

    def test_one_policy_per_named_node_selecting_it_alone(self) -> None:
        pols = of_kind(rendered(), "SriovNetworkNodePolicy")
        assert len(pols) == 2 * 4  # two policies, four nodes in set main
        a = next(p for p in pols if p["metadata"]["name"] == "main-port1rdma-node-a")
        assert a["metadata"]["namespace"] == OPERATOR_NS
        assert a["spec"] == {
            "resourceName": "port1rdma",
            "nodeSelector": {"kubernetes.io/hostname": "node-a"},
            "numVfs": 4,
            "nicSelector": {"pfNames": ["eno5np0"]},
            "deviceType": "netdevice",
            "isRdma": True,
            "linkType": "eth",
            "mtu": 9000,
        }
        assert a["metadata"]["annotations"]["gpu-training/reason"] == REASON
        assert {p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in pols} == {"node-a", "node-b", "node-c", "node-d"}

    def test_copy_mode_is_unchanged(self) -> None:
        c = fixtures.config("roce")
        kinds = [o["kind"] for o in objects(c)]
        assert "SriovNetwork" not in kinds and "SriovNetworkNodePolicy" not in kinds
        assert kinds.count("NetworkAttachmentDefinition") == 2


# --- the operator's own API: its CRDs, and its controller's NAD template ------------------------------------------


def operator_nad_config(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The CNI config the operator's template (bindata/manifests/cni-config/sriov/sriov-cni-config.yaml) renders from a
    SriovNetwork as RenderNetAttDef fills it (api/v1/helper.go), after the CRD's defaults (logLevel info)."""
    spec = {"logLevel": "info", **spec}
    out: dict[str, Any] = {"cniVersion": "1.0.0", "name": name, "type": "sriov", "vlan": spec.get("vlan", 0)}
    for key, field in (("spoofchk", "spoofChk"), ("trust", "trust")):
        if spec.get(field) in ("on", "off"):
            out[key] = spec[field]
    out["vlanQoS"] = spec.get("vlanQoS", 0)
    for key, field in (("vlanProto", "vlanProto"), ("min_tx_rate", "minTxRate"), ("max_tx_rate", "maxTxRate")):
        if field in spec:
            out[key] = spec[field]
    if spec.get("capabilities"):
        out["capabilities"] = json.loads(spec["capabilities"])
    if spec.get("linkState") in ("auto", "enable", "disable"):
        out["link_state"] = spec["linkState"]
    for key in ("logLevel", "logFile"):
        if spec.get(key):
            out[key] = spec[key]
    out["ipam"] = json.loads("".join(spec["ipam"].split())) if spec.get("ipam") else {}
    return out


class TestOperatorApi:
    @pytest.mark.parametrize("kind", ["SriovNetwork", "SriovNetworkNodePolicy"])
    def test_every_rendered_object_is_one_the_crd_admits(self, kind: str) -> None:
        # The operator's v1.5.0 CRD schema, shipped in schemas/sriov/ (live/tests/test_sriov_operator.py holds it equal
        # to the CRD the live tier serves).
        schema = json.loads((ROOT / "schemas" / "sriov" / f"{kind.lower()}.schema.json").read_text(encoding="utf-8"))
        objs = of_kind(rendered(), kind)
        assert objs
        for o in objs:
            jsonschema.validate(o, schema)
        # and the schema is not vacuous: a value it refuses is refused
        bad = json.loads(json.dumps(objs[0]))
        bad["spec"]["isRdma" if kind == "SriovNetworkNodePolicy" else "spoofChk"] = "maybe"
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)

    def test_the_nads_the_operator_makes_carry_what_the_copies_carried(self) -> None:
        c = fixtures.config("roce", with_policies)
        assert c.fabric is not None
        for net in of_kind(rendered(), "SriovNetwork"):
            att = next(a for a in c.fabric.attachments if net["metadata"]["name"] == operator_network_name("team-a", a.network))
            copy = json.loads(att.cni_config or "{}")
            made = operator_nad_config(net["metadata"]["name"], net["spec"])
            differ = {"name", "mtu", "logLevel"}
            assert {k: v for k, v in made.items() if k not in differ} == {k: v for k, v in copy.items() if k not in differ}
            assert made["logLevel"] == "info" and "mtu" not in made
