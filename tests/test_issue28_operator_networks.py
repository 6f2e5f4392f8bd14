"""Issue 28: operator-native SR-IOV networks (fabric.nad_mode operator) and node policies (node_sets[].node_policies),
on configs the tests own: what the config refuses, what the platform and project tiers declare and read, what the
preflight finds, what adoption says to delete first, and that the objects are the ones the operator's CRDs admit and
its controller turns into the NADs a copy would have been."""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pulumi
import pytest
import yaml

import policy
import stacks
from components.prerequisites import requirements
from components.program import objects, patches
from components.tiers import PLATFORM, tier_of
from config.kube import derived_name, operator_network_name
from config.schema import schema as config_schema
from config.stack import ClusterConfig
from tests import fixtures
from tools import adoption
from tools.render import MISSING, MissingObject, Rendering, run

Data = dict[str, Any]
OPERATOR_NS = "openshift-sriov-network-operator"
# The CNI config Barcelona's NADs carry (CLUSTER-FACTS "Real NAD configuration"), for the test-owned ports.
CNI = {
    "cniVersion": "1.0.0",
    "type": "sriov",
    "vlan": 0,
    "vlanQoS": 0,
    "spoofchk": "off",
    "trust": "on",
    "link_state": "enable",
    "mtu": 9000,
}
REASON = "the RDMA VFs of the main nodes, applied in a maintenance window"


def operator_mode(d: Data) -> None:
    d["fabric"]["nad_mode"] = "operator"
    for i, a in enumerate(d["fabric"]["attachments"], start=1):
        cni = {
            **CNI,
            "name": a["network"],
            "ipam": {"type": "whereabouts", "range": f"10.1.{i}.0/24", "routes": [{"dst": f"192.168.{i}.0/24"}]},
        }
        a["cni_config"] = json.dumps(cni, separators=(",", ":"))


def with_policies(d: Data, num_vfs: int = 4, mtu: int | None = 9000) -> None:
    operator_mode(d)
    d["node_sets"][0]["node_policies"] = [
        {"resource": f"openshift.io/port{i}rdma", "pf_names": [f"eno{4 + i}np0"], "num_vfs": num_vfs, **({"mtu": mtu} if mtu else {})}
        for i in (1, 2)
    ]
    d["node_sets"][0]["node_reboot_reason"] = REASON


def config(*edits: Any) -> ClusterConfig:
    def edit(d: Data) -> None:
        for e in edits:
            e(d)

    return fixtures.config("roce", edit)


def refused(*edits: Any) -> str:
    with pytest.raises(stacks.ConfigError) as err:
        config(*edits)
    message = str(err.value)
    assert "Traceback" not in message
    return message


@cache
def rendered(tier: str = "all") -> Rendering:
    return run(config(with_policies), tier)


def of_kind(r: Rendering, kind: str) -> list[dict[str, Any]]:
    return [o for o in r.objects() if o["kind"] == kind]


def findings(c: ClusterConfig, objs: list[dict[str, Any]] | None = None) -> list[policy.Finding]:
    return policy.check(c, objects(c) if objs is None else objs, patches(c))


# --- the config ----------------------------------------------------------------------------------------------------


class TestConfig:
    def test_off_by_default(self) -> None:
        c = fixtures.config("roce")
        assert c.fabric is not None and c.fabric.nad_mode == "copy"
        assert c.fabric.operator_namespace == OPERATOR_NS
        assert all(not s.node_policies and s.node_reboot_reason is None for s in c.node_sets)

    def test_infiniband_is_refused_naming_the_ib_kind(self) -> None:
        message = refused(operator_mode, lambda d: d["fabric"].update(link_layer="infiniband"))
        assert "fabric.nad_mode" in message and "SriovIBNetwork" in message

    def test_a_resource_outside_the_operators_prefix_is_refused(self) -> None:
        message = refused(operator_mode, lambda d: d["fabric"]["attachments"][0].update(resource="example.com/port1rdma"))
        assert "fabric.attachments[0].resource" in message and "openshift.io/NAME" in message

    def test_a_cni_key_the_operator_cannot_render_is_refused(self) -> None:
        def bridge(d: Data) -> None:
            a = d["fabric"]["attachments"][1]
            a["cni_config"] = a["cni_config"].replace('"type"', '"bridge":"br0","type"')

        message = refused(operator_mode, bridge)
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

        assert phrase in refused(operator_mode, bad)

    def test_node_policies_need_named_nodes_and_a_reason(self) -> None:
        counted = refused(with_policies, lambda d: d["node_sets"][0].update(nodes=[], count=4))
        assert "node_sets[main].node_policies" in counted and "kubernetes.io/hostname" in counted
        unreasoned = refused(with_policies, lambda d: d["node_sets"][0].pop("node_reboot_reason"))
        assert "node_sets[main].node_reboot_reason" in unreasoned and "reboots" in unreasoned

    def test_a_policy_for_no_attachment_and_a_pf_twice_are_refused(self) -> None:
        other = refused(with_policies, lambda d: d["node_sets"][0]["node_policies"][0].update(resource="openshift.io/other"))
        assert "no attachment's resource" in other
        twice = refused(with_policies, lambda d: d["node_sets"][0]["node_policies"][1].update(pf_names=["eno5np0"]))
        assert "a PF is named by two policies" in twice

    def test_an_unsupported_nic_is_refused(self) -> None:
        vendor = refused(with_policies, lambda d: d["node_sets"][0]["node_policies"][0].update(vendor="abcd"))
        assert "vendor abcd" in vendor
        device = refused(with_policies, lambda d: d["node_sets"][0]["node_policies"][0].update(vendor="15b3", device_id="9999"))
        assert "1021 is ConnectX-7" in device

    def test_the_operator_namespace_is_no_project_of_the_stack(self) -> None:
        def mine(d: Data) -> None:
            d["fabric"]["operator_namespace"] = "team-b"

        assert "fabric.operator_namespace" in refused(operator_mode, mine)

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

        message = refused(operator_mode, clash)
        assert "SriovNetwork 'team-a-port1-network'" in message and "Rename one of them" in message

    def test_names_are_labels_stable_and_apart(self) -> None:
        long_ns, long_net = "n" * 60, "eno5np0-network"
        name = operator_network_name(long_ns, long_net)
        assert len(name) <= 63 and name == operator_network_name(long_ns, long_net)
        assert name != operator_network_name(long_ns, "eno6np0-network")
        assert operator_network_name("team-a", "port1-network") == "team-a-port1-network"
        assert derived_name("main", "Port_1rdma", "node-a") == "main-port-1rdma-node-a"

    def test_the_yaml_form_reads_back(self) -> None:
        c = config(with_policies)
        assert stacks.validate(yaml.safe_load(stacks.dump(c)), "round trip") == c
        schema = json.dumps(config_schema())
        for field in ("operator_namespace", "node_policies", "node_reboot_reason", "SriovNodePolicy", "num_vfs"):
            assert field in schema


# --- what the tiers declare ----------------------------------------------------------------------------------------


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
        c = config(with_policies)
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


def operator_dir() -> Path:
    cache_dir = os.environ.get("GOMODCACHE") or ""
    if not cache_dir:
        try:
            cache_dir = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            cache_dir = ""
    path = Path(cache_dir or "/nonexistent") / "github.com/k8snetworkplumbingwg/sriov-network-operator@v1.5.0"
    if not path.is_dir():
        pytest.skip(
            f"{path} is absent: `go mod download github.com/k8snetworkplumbingwg/sriov-network-operator@v1.5.0` (the live tier does)"
        )
    return path


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
    @pytest.mark.parametrize("kind,crd", [("SriovNetwork", "sriovnetworks"), ("SriovNetworkNodePolicy", "sriovnetworknodepolicies")])
    def test_every_rendered_object_is_one_the_crd_admits(self, kind: str, crd: str) -> None:
        doc = yaml.safe_load((operator_dir() / f"config/crd/bases/sriovnetwork.openshift.io_{crd}.yaml").read_text())
        (version,) = [v for v in doc["spec"]["versions"] if v["name"] == "v1"]
        schema = version["schema"]["openAPIV3Schema"]
        objs = of_kind(rendered(), kind)
        assert objs
        for o in objs:
            jsonschema.validate(o, schema)
        # and the schema is not vacuous: a value it refuses is refused
        bad = json.loads(json.dumps(objs[0]))
        bad["spec"]["isRdma" if kind == "SriovNetworkNodePolicy" else "spoofChk"] = "maybe"
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)

    def test_the_template_is_the_one_this_test_follows(self) -> None:
        template = (operator_dir() / "bindata/manifests/cni-config/sriov/sriov-cni-config.yaml").read_text()
        for key in ('"spoofchk"', '"trust"', '"vlanQoS"', '"link_state"', '"capabilities"', '"min_tx_rate"', "{{.SriovCniIpam}}"):
            assert key in template
        assert '"mtu"' not in template  # the VF's MTU is the node policy's

    def test_the_nads_the_operator_makes_carry_what_the_copies_carried(self) -> None:
        c = config(with_policies)
        assert c.fabric is not None
        for net in of_kind(rendered(), "SriovNetwork"):
            att = next(a for a in c.fabric.attachments if net["metadata"]["name"] == operator_network_name("team-a", a.network))
            copy = json.loads(att.cni_config or "{}")
            made = operator_nad_config(net["metadata"]["name"], net["spec"])
            differ = {"name", "mtu", "logLevel"}
            assert {k: v for k, v in made.items() if k not in differ} == {k: v for k, v in copy.items() if k not in differ}
            assert made["logLevel"] == "info" and "mtu" not in made


# --- reads: the prerequisites ----------------------------------------------------------------------------------------


class TestReads:
    def test_the_project_tier_reads_the_nads_the_operator_makes(self) -> None:
        reads = {r.object_id: r for r in requirements(config(operator_mode), "project") if r.kind == "NetworkAttachmentDefinition"}
        assert set(reads) == {"team-a/team-a-port1-network", "team-a/team-a-port2-network"}
        r = reads["team-a/team-a-port1-network"]
        assert "pulumi up -s roce-platform" in r.fix and r.verify is not None
        assert r.verify({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port1rdma"}}}) is None
        assert "port2rdma" in (r.verify({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port2rdma"}}}) or "")

    def test_a_missing_operator_nad_fails_the_project_preview_with_the_fix(self) -> None:
        # The engine names only the id of a missing object; the read's logical name carries the fix (prerequisites.py).
        names = [x.urn_name for x in run(config(operator_mode), "project").reads]
        assert "team-a/team-a-port1-network (if missing: a cluster admin runs pulumi up -s roce-platform)" in names
        with pytest.raises(MissingObject, match=r"resource 'team-a/team-a-port1-network' does not exist"):
            run(config(operator_mode), "project", live={("NetworkAttachmentDefinition", "team-a/team-a-port1-network"): MISSING})
        with pytest.raises(pulumi.RunError, match=r"resourceName is 'openshift.io/other'.*Fix: a cluster admin runs"):
            other = {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/other"}}}
            run(config(operator_mode), "project", live={("NetworkAttachmentDefinition", "team-a/team-a-port2-network"): other})

    def test_the_platform_tier_reads_the_operators_namespace_not_the_sources(self) -> None:
        reads = [(r.kind, r.object_id) for r in requirements(config(operator_mode), "platform")]
        assert ("Namespace", OPERATOR_NS) in reads
        assert not [x for x in reads if x[0] == "NetworkAttachmentDefinition"]
        copy_reads = [(r.kind, r.object_id) for r in requirements(fixtures.config("roce"), "platform")]
        assert ("NetworkAttachmentDefinition", "default/port1-network") in copy_reads and ("Namespace", OPERATOR_NS) not in copy_reads
        with pytest.raises(MissingObject, match=OPERATOR_NS):
            run(config(operator_mode), "platform", live={("Namespace", OPERATOR_NS): MISSING})

    def test_a_run_of_both_tiers_does_not_read_what_it_declares(self) -> None:
        reads = [r.object_id for r in requirements(config(operator_mode), "all") if r.kind == "NetworkAttachmentDefinition"]
        assert reads == []


# --- the preflight ---------------------------------------------------------------------------------------------------


class TestPreflight:
    def test_operator_mode_passes_the_network_rules(self) -> None:
        c = config(with_policies)
        bad = [f.line() for f in findings(c) if f.severity == "error"]
        assert bad == []
        # the project tier alone (no SriovNetwork rendered) still knows the NADs the operator makes
        project = [f.line() for f in findings(c, objects(c, "project")) if f.rule in ("network-attachments", "sriov-resources")]
        assert project == []

    def test_too_few_vfs_per_node(self) -> None:
        def crowded(d: Data) -> None:
            with_policies(d, num_vfs=1)
            d["workloads"][0]["gpus_per_node"] = 2  # two dev pods now fit on one node: each takes one VF per port

        found = [f for f in findings(config(crowded)) if f.rule == "sriov-node-policies"]
        assert found and all(f.severity == "error" for f in found)
        assert "node_sets[main].node_policies[0].num_vfs" in {f.where for f in found}
        assert any("raise num_vfs to 2" in f.fix for f in found)
        assert not [
            f
            for f in findings(config(lambda d: with_policies(d, num_vfs=2), lambda d: d["workloads"][0].update(gpus_per_node=2)))
            if f.rule == "sriov-node-policies"
        ]

    def test_an_mtu_the_nads_do_not_name(self) -> None:
        found = [f for f in findings(config(lambda d: with_policies(d, mtu=1500))) if f.rule == "sriov-node-policies"]
        assert {f.where for f in found} == {"node_sets[main].node_policies[0].mtu", "node_sets[main].node_policies[1].mtu"}
        assert all("set mtu to 9000" in f.fix for f in found)

    def test_a_policy_selecting_more_than_one_named_node(self) -> None:
        c = config(with_policies)
        objs = objects(c)
        pol = next(o for o in objs if o["kind"] == "SriovNetworkNodePolicy")
        pol["spec"]["nodeSelector"] = {"node-role.kubernetes.io/worker": ""}
        found = [f for f in findings(c, objs) if f.rule == "sriov-node-policies"]
        assert len(found) == 1 and found[0].field == "spec.nodeSelector" and "reboot" in found[0].message

    def test_the_reboot_is_a_warning_that_prints_the_reason(self) -> None:
        found = [f for f in findings(config(with_policies)) if f.rule == "sriov-node-reboot"]
        assert len(found) == 1 and found[0].severity == "warning"
        assert REASON in found[0].message and "node-a, node-b, node-c, node-d" in found[0].message
        assert not [f for f in findings(config(operator_mode)) if f.rule == "sriov-node-reboot"]

    def test_the_platform_namespace_exception_is_exact(self) -> None:
        c = config(with_policies)
        objs = objects(c)
        assert not [f for f in findings(c, objs) if f.rule == "platform-namespaces"]
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
            found = [f for f in findings(c, [*objs, *extra]) if f.rule == "platform-namespaces"]
            assert len(found) == 1 and found[0].severity == "error" and found[0].object.startswith(obj), [f.line() for f in found]


# --- adoption: the hand-made copies go first -------------------------------------------------------------------------


def hand_made_copies(d: Data) -> None:
    d["hand_made"] = [
        {"kind": "NetworkAttachmentDefinition", "name": f"port{i}-network", "namespace": "team-a", "source": "seed 003 step 2"}
        for i in (1, 2)
    ]


def live_nad(name: str, ns: str = "team-a") -> dict[str, Any]:
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": "1",
            "annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port1rdma"},
        },
        "spec": {"config": "{}"},
    }


class TestAdoption:
    def test_the_import_plan_leaves_the_copies_out_and_says_what_to_delete(self) -> None:
        c = config(operator_mode, hand_made_copies)
        plan = adoption.import_plan(c, "roce")
        assert not [r for r in plan["resources"] if r.get("type", "").endswith("NetworkAttachmentDefinition")]
        lines = adoption.operator_deletions(c)
        assert len(lines) == 2
        assert "oc delete net-attach-def port1-network -n team-a" in lines[0] and "team-a/team-a-port1-network" in lines[0]
        assert adoption.operator_deletions(config(hand_made_copies)) == []  # copy mode adopts them

    def test_adopt_diff_of_a_copy_says_delete_first(self) -> None:
        c = config(operator_mode)
        report, act = adoption.adopt_diff(c, live_nad("port1-network"), "nad.yaml")
        assert act and "oc delete net-attach-def port1-network -n team-a" in report
        same_name, act = adoption.adopt_diff(c, live_nad("team-a-port2-network"), "nad.yaml")
        assert act and "overwrites a NAD of that name" in same_name
        with pytest.raises(stacks.ConfigError, match="declares no"):
            adoption.adopt_diff(c, live_nad("port1-network", "team-b"), "nad.yaml")  # no RDMA pod there: not the operator's

    def test_adopt_diff_of_a_list(self) -> None:
        c = config(operator_mode)
        listing = {"apiVersion": "v1", "kind": "List", "items": [live_nad("port1-network"), live_nad("unrelated")]}
        report, act = adoption.adopt_diff(c, listing, "nads.yaml")
        assert act and "Delete first:" in report and "port1-network -n team-a" in report
        assert "NetworkAttachmentDefinition team-a/unrelated" in report.split("Not declared")[1]

    def test_the_hand_made_rule_names_the_operators_nad(self) -> None:
        found = [f for f in findings(config(operator_mode, hand_made_copies)) if f.rule == "hand-made"]
        assert len(found) == 2
        assert all("SR-IOV operator makes team-a/team-a-port" in f.message and "oc delete net-attach-def" in f.message for f in found)
        # a copy in a project without RDMA pods is not the operator's business: the old reason stands
        elsewhere = config(operator_mode, hand_made_copies, lambda d: [h.update(namespace="team-b") for h in d["hand_made"]])
        found = [f for f in findings(elsewhere) if f.rule == "hand-made"]
        assert len(found) == 2 and not [f for f in found if "SR-IOV operator makes" in f.message]

    def test_the_cli_prints_the_deletions_beside_the_plan(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        from cli import cluster

        c = config(operator_mode, hand_made_copies)
        target = stacks.PulumiStack("roce", "roce", "all", None, None, [], tmp_path / "Pulumi.roce.yaml")
        monkeypatch.setattr(stacks, "pulumi_stacks", lambda: [target])
        monkeypatch.setattr(stacks, "load", lambda name: c)
        args = type("A", (), {"pulumi_stack": "roce", "only": None, "out": str(tmp_path / "plan.json")})()
        assert cluster.cmd_import_plan(args) == 0  # type: ignore[arg-type]
        err = capsys.readouterr().err
        assert "delete first" in err and "oc delete net-attach-def port2-network -n team-a" in err
