"""The SR-IOV network operator (issue 28): its CRDs and its own SriovNetwork controller on one control plane.

What `nad_mode: operator` relies on, proved with hand-written objects shaped as the stacks would declare them
(Barcelona's attachment eno5np0: resource `eno5np0rdma`, whereabouts on 10.0.103.0/24, rendered/barcelona/):

- the operator's CRDs (from its Go module, live/sriov.py) accept every SriovNetwork and SriovNetworkNodePolicy the
  program renders for a test config (isRdma, numVfs, nicSelector, netdevice, eth) and refuse malformed ones with
  their own validation;
- its controller (the operator's reconciler, live/toolchain/sriov/main.go) makes the NAD in the SriovNetwork's
  `networkNamespace`, named as the SriovNetwork, with the config and resourceName annotation pods need; keeps it
  (edits follow, a deleted NAD comes back, a namespace made later gets it); and overwrites a NAD of that name made
  by hand, in place. docs/live.md "SR-IOV operator" gives what the program's adoption advice takes from this.

Then the program itself (section c): that test config (nad_mode operator, two projects) deployed through real
`pulumi up`s of its two tiers on this plane, seeded as its cluster: the project tier fails before the platform tier
with the fix; after it, the NADs the controller makes are the ones the project tier's pods name and request the
resources of; nothing diffs after; adoption's "Delete first" agrees with what the operator does to a hand-made NAD.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from config.kube import NETWORKS, RESOURCE_NAME, operator_network_name
from config.stack import ClusterConfig
from live import clusters, sriov, toolchain
from live.controlplane import ControlPlane
from live.tests.harness import Project, failure, kubeconfig_of, project_copy, pulumi_env, yaml_config
from tests import fixtures
from tests.fixtures import REASON, with_policies
from tools import adoption
from tools.render import run

ROOT = Path(__file__).resolve().parent.parent.parent
OPERATOR_NS = sriov.NAMESPACE
V1 = f"{sriov.GROUP}/v1"
NAD_API = "k8s.cni.cncf.io/v1"
FINALIZER = "netattdef.finalizers.sriovnetwork.openshift.io"  # api/v1/helper.go NETATTDEFFINALIZERNAME
LAST_NAMESPACE = "operator.sriovnetwork.openshift.io/last-network-namespace"  # api/v1/helper.go LASTNETWORKNAMESPACE
# Barcelona's NAD for eno5np0, as the stack renders it in copy mode (the seeds' NAD, CLUSTER-FACTS.md).
BARCELONA_NAD = ROOT / "rendered" / "barcelona" / "nccl-test" / "networkattachmentdefinition-eno5np0-network.yaml"
IPAM = {"type": "whereabouts", "range": "10.0.103.0/24", "routes": [{"dst": "192.168.77.0/24"}]}


# The program's own operator-mode objects (issue 28 part C): a test-owned config, the tests' RoCE fixture in nad_mode
# operator with node policies (tests/fixtures.py with_policies), named as a committed cluster so that it is
# deployed through that cluster's two stack files (harness.yaml_config); one RDMA workload in each of two projects.
CLUSTER = "barcelona"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3@sha256:f2121948025691ba15f702877b9ffdb358b51c5db1105010c1d29646e9189f25"


def operator_data() -> dict[str, Any]:
    d = fixtures.roce()
    with_policies(d)
    for key in ("images", "scripts", "existing", "bandwidth_checks", "volumes"):
        d.pop(key)
    rdma = {"nodes": 1, "gpus_per_node": 4, "transport": "rdma", "service_account": "trainer", "image": IMAGE, "memory": "64Gi"}
    d.update(name=CLUSTER, workloads=[{**rdma, "name": "dev", "namespace": "team-a", "user": "ada"},
                                      {**rdma, "name": "solo", "namespace": "team-b", "user": "bob", "node_set": "spare"}])  # fmt: skip
    d["accepted_warnings"] = [{"rule": "sriov-node-reboot", "object": "SriovNetworkNodePolicy *", "reason": REASON}]
    return d


def operator_config() -> ClusterConfig:
    return stacks.validate(operator_data(), "the live tier's operator-mode config")


@pytest.fixture(scope="module")
def plane(tools: dict[str, Path | str], sriov_tools: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane for the module, named and seeded as the test config's cluster (its context is the one the
    stack files name), with the clusters' CRDs (the NAD's from ../shared/schemas) and the operator's."""
    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC and NAD CRDs come from there")
    p = ControlPlane(CLUSTER, tmp_path_factory.mktemp("sriov"), {n: Path(tools[n]) for n in toolchain.LEVEL1}).start()
    try:
        clusters.install_crds(p)
        sriov.install_crds(p, sriov_tools)
        clusters.seed(p, operator_config())
        for ns in (OPERATOR_NS, "proj-a", "proj-b"):
            sriov.ensure_namespace(p, ns)
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def controller(plane: ControlPlane, sriov_tools: Path) -> Iterator[sriov.Controller]:
    c = sriov.Controller(plane, sriov_tools).start()
    yield c
    c.stop()


def network(name: str, project: str, **spec: Any) -> dict[str, Any]:
    """A SriovNetwork as the platform tier would declare one for an attachment and a project."""
    return {
        "apiVersion": V1, "kind": "SriovNetwork", "metadata": {"name": name, "namespace": OPERATOR_NS},
        "spec": {"networkNamespace": project, "resourceName": "eno5np0rdma", "ipam": json.dumps(IPAM),
                 "vlan": 0, "spoofChk": "off", "trust": "on", "linkState": "enable", **spec},
    }  # fmt: skip


def node_policy(**spec: Any) -> dict[str, Any]:
    """A SriovNetworkNodePolicy as a node set's `node_policies` would declare one: the port's VFs for RDMA."""
    return {
        "apiVersion": V1, "kind": "SriovNetworkNodePolicy", "metadata": {"name": "main-eno5np0", "namespace": OPERATOR_NS},
        "spec": {"resourceName": "eno5np0rdma", "nodeSelector": {"kubernetes.io/hostname": "node-a"}, "numVfs": 8,
                 "mtu": 9000, "nicSelector": {"pfNames": ["eno5np0"], "vendor": "15b3"}, "deviceType": "netdevice",
                 "isRdma": True, "linkType": "eth", **spec},
    }  # fmt: skip


def dry_run(plane: ControlPlane, obj: dict[str, Any]) -> tuple[int, Any]:
    """The API server's verdict on creating `obj` (schema, defaulting), nothing stored."""
    plural = {"SriovNetwork": "sriovnetworks", "SriovNetworkNodePolicy": "sriovnetworknodepolicies"}[obj["kind"]]
    return plane.request("POST", f"/apis/{V1}/namespaces/{OPERATOR_NS}/{plural}?dryRun=All&fieldValidation=Strict", obj)


def nad_path(project: str, name: str) -> str:
    return f"/apis/{NAD_API}/namespaces/{project}/network-attachment-definitions/{name}"


def network_path(name: str, namespace: str = OPERATOR_NS, kind: str = "sriovnetworks") -> str:
    return f"/apis/{V1}/namespaces/{namespace}/{kind}/{name}"


def wait_for(plane: ControlPlane, path: str, ok: Callable[[Any], bool], what: str, timeout: float = 20) -> Any:
    """The object at `path` once ok(object) holds (ok(None): once it is gone); fails with the last one seen."""
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        seen = plane.get(path)
        if ok(seen):
            return seen
        time.sleep(0.2)
    pytest.fail(f"{what}: not after {timeout:.0f} s; last seen {json.dumps(seen)[:1500]}", pytrace=False)


def config_of(nad: Any) -> dict[str, Any]:
    return dict(json.loads(nad["spec"]["config"])) if nad else {}


# --- (a) the CRDs: what a stack declares is accepted, what is malformed is refused ------------------------------


def test_every_crd_of_the_operator_is_served(plane: ControlPlane, sriov_tools: Path) -> None:
    served = plane.kubectl("api-resources", f"--api-group={sriov.GROUP}", "-o", "name").stdout.split()
    assert {c["metadata"]["name"] for c in sriov.crds(sriov_tools)} == set(served) == {
        f"{plural}.{sriov.GROUP}"
        for plural in ("sriovnetworks", "sriovibnetworks", "sriovnetworknodepolicies", "sriovnetworknodestates",
                       "sriovnetworkpoolconfigs", "sriovoperatorconfigs", "ovsnetworks")
    }  # fmt: skip


def test_the_schemas_the_project_ships_are_the_operators_crds(sriov_tools: Path) -> None:
    """schemas/sriov/ is what `make test` validates SriovNetworks and node policies against, without the Go module cache:
    it must be the served CRDs' v1 schema, as is."""
    served = {c["spec"]["names"]["kind"]: c for c in sriov.crds(sriov_tools)}
    for kind in ("SriovNetwork", "SriovNetworkNodePolicy"):
        shipped = json.loads((ROOT / "schemas" / "sriov" / f"{kind.lower()}.schema.json").read_text(encoding="utf-8"))
        shipped.pop("$comment")
        (v1,) = [v for v in served[kind]["spec"]["versions"] if v["name"] == "v1"]
        assert shipped == v1["schema"]["openAPIV3Schema"], f"schemas/sriov/{kind.lower()}.schema.json differs from the operator's CRD"


def test_the_nad_template_is_the_one_the_offline_tests_follow(sriov_tools: Path) -> None:
    """tests/components/test_operator_networks.py's operator_nad_config follows the operator's NAD template: the keys it
    writes are the template's, and the template writes no MTU (a VF's MTU is its node policy's)."""
    template = (sriov.assets(sriov_tools)["cni-config"] / "sriov" / "sriov-cni-config.yaml").read_text()
    for key in ('"spoofchk"', '"trust"', '"vlanQoS"', '"link_state"', '"capabilities"', '"min_tx_rate"', "{{.SriovCniIpam}}"):
        assert key in template
    assert '"mtu"' not in template


def test_every_sriov_object_the_program_renders_is_accepted(plane: ControlPlane) -> None:
    """The platform tier's SriovNetworks (one per attachment and project) and SriovNetworkNodePolicies (one per
    resource and node) of the test config, as `python -m stacks render` gives them, against the operator's CRDs."""
    ours = [o for o in run(operator_config(), "platform").objects() if o["kind"] in ("SriovNetwork", "SriovNetworkNodePolicy")]
    assert [o["kind"] for o in ours].count("SriovNetwork") == 4 and len(ours) == 12
    verdicts = {f"{o['kind']} {o['metadata']['name']}": dry_run(plane, o) for o in ours}
    refused = {what: f"{status} {body.get('message')}" for what, (status, body) in verdicts.items() if status != 201}
    assert not refused, f"the API server refuses what the program renders: {refused}"
    # The CRD's default a stack need not state: the NAD the operator renders carries "logLevel":"info".
    assert {body["spec"].get("logLevel") for what, (_, body) in verdicts.items() if what.startswith("SriovNetwork ")} == {"info"}


MALFORMED = [
    (node_policy(numVfs=-1), "spec.numVfs"),
    (node_policy(deviceType="rdma"), "spec.deviceType"),
    (node_policy(linkType="roce"), "spec.linkType"),
    (node_policy(mtu=0), "spec.mtu"),
    ({**node_policy(), "spec": {k: v for k, v in node_policy()["spec"].items() if k != "nicSelector"}}, "spec.nicSelector"),
    (network("x", "proj-a", vlan=4097), "spec.vlan"),
    (network("x", "proj-a", spoofChk="yes"), "spec.spoofChk"),
    ({**network("x", "proj-a"), "spec": {"networkNamespace": "proj-a"}}, "spec.resourceName"),
]


@pytest.mark.parametrize(("obj", "field"), MALFORMED, ids=[f"{o['kind']}-{f}" for o, f in MALFORMED])
def test_a_malformed_one_is_refused_by_the_crds_own_validation(plane: ControlPlane, obj: dict[str, Any], field: str) -> None:
    status, body = dry_run(plane, obj)
    assert status == 422 and field in body.get("message", ""), f"{obj['kind']} with a bad {field}: {status} {body}"


# --- (b) the operator's controller makes and keeps each project's NAD ---------------------------------------------


def test_a_sriov_network_makes_the_nad_the_pods_need_in_its_project(plane: ControlPlane, controller: sriov.Controller) -> None:
    plane.apply(network("proj-a-eno5np0", "proj-a"))
    nad = wait_for(plane, nad_path("proj-a", "proj-a-eno5np0"), bool, "the NAD in proj-a")
    # Named as the SriovNetwork (one namespace holds every project's SriovNetworks: the names must differ).
    assert nad["metadata"]["annotations"] == {RESOURCE_NAME: "openshift.io/eno5np0rdma"}
    assert not nad["metadata"].get("ownerReferences"), "no owner across namespaces: the SriovNetwork's finalizer deletes it"
    config = config_of(nad)
    assert {k: config[k] for k in ("cniVersion", "name", "type", "ipam")} == {
        "cniVersion": "1.0.0", "name": "proj-a-eno5np0", "type": "sriov", "ipam": IPAM,
    }  # fmt: skip
    # Against Barcelona's own NAD: the same VF settings; no "mtu" (a SriovNetwork has no MTU: the node policy sets the
    # VF's), and the CRD's default "logLevel".
    barcelona = json.loads(yaml.safe_load(BARCELONA_NAD.read_text())["spec"]["config"])
    assert {k: v for k, v in config.items() if k not in ("name", "logLevel")} == {
        k: v for k, v in barcelona.items() if k not in ("name", "mtu")
    }
    assert config["logLevel"] == "info" and "mtu" not in config
    held = plane.get(network_path("proj-a-eno5np0"))
    assert FINALIZER in held["metadata"]["finalizers"]
    assert held["metadata"]["annotations"]["operator.sriovnetwork.openshift.io/last-network-namespace"] == "proj-a"


def test_an_edit_of_the_sriov_network_updates_the_nad(plane: ControlPlane, controller: sriov.Controller) -> None:
    before = wait_for(plane, nad_path("proj-a", "proj-a-eno5np0"), bool, "the NAD in proj-a")
    ipam = {**IPAM, "range": "10.0.113.0/24"}
    plane.apply(network("proj-a-eno5np0", "proj-a", ipam=json.dumps(ipam), capabilities='{"ips": true}'))
    after = wait_for(plane, nad_path("proj-a", "proj-a-eno5np0"), lambda n: config_of(n).get("ipam") == ipam, "the edited ipam")
    assert config_of(after)["capabilities"] == {"ips": True}
    assert after["metadata"]["uid"] == before["metadata"]["uid"], "updated in place, not made anew"


def test_a_nad_deleted_or_edited_by_hand_is_made_again(plane: ControlPlane, controller: sriov.Controller) -> None:
    path = nad_path("proj-a", "proj-a-eno5np0")
    before = wait_for(plane, path, bool, "the NAD in proj-a")
    edited = {**before, "spec": {"config": json.dumps({**config_of(before), "mtu": 1500})}}
    assert plane.request("PUT", path, edited)[0] == 200
    wait_for(plane, path, lambda n: "mtu" not in config_of(n), "the hand edit undone")
    plane.delete(before)
    again = wait_for(plane, path, lambda n: n and n["metadata"]["uid"] != before["metadata"]["uid"], "the deleted NAD made again")
    assert config_of(again) == config_of(before)


def test_a_sriov_network_moved_to_another_project_moves_its_nad(plane: ControlPlane, controller: sriov.Controller) -> None:
    """A project renamed in the config: the operator deletes the NAD where its last-network-namespace annotation says
    it made it, and makes it in the new one. It writes that annotation just after the NAD: a move before it (and before
    its informer has seen it) leaves the old NAD behind (generic_network_controller.go, v1.5.0), so the test waits."""
    plane.apply(network("moved-eno5np0", "proj-a"))
    wait_for(plane, nad_path("proj-a", "moved-eno5np0"), bool, "the NAD in proj-a")
    annotated = lambda n: bool(n) and (n["metadata"].get("annotations") or {}).get(LAST_NAMESPACE) == "proj-a"  # noqa: E731
    wait_for(plane, network_path("moved-eno5np0"), annotated, "the SriovNetwork's last-network-namespace annotation")
    plane.apply(network("moved-eno5np0", "proj-b"))
    wait_for(plane, nad_path("proj-b", "moved-eno5np0"), bool, "the NAD in proj-b")
    wait_for(plane, nad_path("proj-a", "moved-eno5np0"), lambda n: n is None, "the NAD in proj-a removed")
    plane.delete(network("moved-eno5np0", "proj-b"))


def test_a_project_made_after_its_sriov_network_gets_its_nad(plane: ControlPlane, controller: sriov.Controller) -> None:
    plane.apply(network("proj-c-eno5np0", "proj-c"))
    wait_for(plane, network_path("proj-c-eno5np0"), lambda n: FINALIZER in n["metadata"].get("finalizers", []), "the finalizer")
    assert plane.get(nad_path("proj-c", "proj-c-eno5np0")) is None
    sriov.ensure_namespace(plane, "proj-c")
    nad = wait_for(plane, nad_path("proj-c", "proj-c-eno5np0"), bool, "the NAD once proj-c exists")
    assert nad["metadata"]["annotations"][RESOURCE_NAME] == "openshift.io/eno5np0rdma"


def test_a_hand_made_nad_of_that_name_is_overwritten_in_place(plane: ControlPlane, controller: sriov.Controller) -> None:
    """What adoption must know: the operator takes an existing NAD of its SriovNetwork's name over, without asking.
    It keeps the object (same uid) and replaces its spec, annotations and labels with its own render; deleting the
    SriovNetwork then deletes that NAD too."""
    copy = yaml.safe_load(BARCELONA_NAD.read_text())
    copy["metadata"].update(name="proj-b-eno5np0", namespace="proj-b")
    copy["metadata"]["annotations"]["pulumi.com/patchForce"] = "true"
    made = plane.apply(copy)
    assert made["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "pulumi"
    plane.apply(network("proj-b-eno5np0", "proj-b"))
    taken = wait_for(plane, nad_path("proj-b", "proj-b-eno5np0"), lambda n: "mtu" not in config_of(n), "the operator's render")
    assert taken["metadata"]["uid"] == made["metadata"]["uid"]
    assert taken["metadata"]["annotations"] == {RESOURCE_NAME: "openshift.io/eno5np0rdma"}
    assert not taken["metadata"].get("labels"), "the copy's labels are dropped"
    assert config_of(taken)["name"] == "proj-b-eno5np0" and config_of(taken)["ipam"] == IPAM


def test_a_sriov_network_outside_the_operators_namespace_does_nothing(plane: ControlPlane, controller: sriov.Controller) -> None:
    stray = network("stray", "proj-a")
    stray["metadata"]["namespace"] = "proj-a"
    plane.apply(stray)
    plane.apply(network("proj-a-eno6np0", "proj-a", resourceName="eno6np0rdma"))  # queued after it
    wait_for(plane, nad_path("proj-a", "proj-a-eno6np0"), bool, "the NAD of the SriovNetwork in the operator's namespace")
    time.sleep(1)
    assert plane.get(nad_path("proj-a", "stray")) is None
    assert not plane.get(network_path("stray", "proj-a"))["metadata"].get("finalizers")


def test_a_sriov_ib_network_makes_an_ib_sriov_nad(plane: ControlPlane, controller: sriov.Controller) -> None:
    ib = {"apiVersion": V1, "kind": "SriovIBNetwork", "metadata": {"name": "proj-a-ib0", "namespace": OPERATOR_NS},
          "spec": {"networkNamespace": "proj-a", "resourceName": "mlx5ib0", "ipam": json.dumps(IPAM), "linkState": "enable"}}  # fmt: skip
    plane.apply(ib)
    nad = wait_for(plane, nad_path("proj-a", "proj-a-ib0"), bool, "the IB NAD")
    assert nad["metadata"]["annotations"] == {RESOURCE_NAME: "openshift.io/mlx5ib0"}
    assert {k: config_of(nad)[k] for k in ("type", "ipam", "link_state")} == {"type": "ib-sriov", "ipam": IPAM, "link_state": "enable"}


def test_deleting_the_sriov_network_removes_its_nad_and_waits_for_the_operator(plane: ControlPlane, controller: sriov.Controller) -> None:
    """Its finalizer: with the operator down, a deleted SriovNetwork and its NAD stay (a `pulumi destroy` of the
    platform tier waits for it); once the operator runs, both go."""
    for name, project in (("proj-a-eno5np0", "proj-a"), ("proj-b-eno5np0", "proj-b")):
        wait_for(plane, nad_path(project, name), bool, f"the NAD in {project}")
    controller.stop()
    try:
        plane.delete(network("proj-a-eno5np0", "proj-a"))
        time.sleep(1)
        held = plane.get(network_path("proj-a-eno5np0"))
        assert held["metadata"].get("deletionTimestamp") and held["metadata"]["finalizers"] == [FINALIZER]
        assert plane.get(nad_path("proj-a", "proj-a-eno5np0")) is not None
    finally:
        controller.start()
    plane.delete(network("proj-b-eno5np0", "proj-b"))
    for name, project in (("proj-a-eno5np0", "proj-a"), ("proj-b-eno5np0", "proj-b")):
        wait_for(plane, nad_path(project, name), lambda n: n is None, f"the NAD in {project} removed")
        wait_for(plane, network_path(name), lambda n: n is None, f"the SriovNetwork {name} gone")


# --- (c) the program's own objects through real `pulumi up`s, with the operator's controller ------------------------
# The platform tier declares the SriovNetworks (and node policies), the controller makes each project's NAD, the
# project tier reads it and its pods attach it. Five Pulumi runs in all: one preview that fails, two ups, two
# previews that must be empty.

RDMA_PROJECTS = ("team-a", "team-b")
# A hand-made NAD in team-b before the platform tier's up (issue 28 "Adoption"): one of the operator's name, and a
# copy-mode copy (the seeds' kind), both carrying the copy's config.
HAND_MADE = (operator_network_name("team-b", "port1-network"), "port1-network")


@pytest.fixture(scope="module")
def project(plane: ControlPlane, pulumi_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Project:
    work = tmp_path_factory.mktemp("sriov-pulumi")
    (work / "state").mkdir()
    env = pulumi_env([p.parent for p in pulumi_tools.values()], kubeconfig_of([plane], work / "kubeconfig"), work / "state", work / "home")
    project = Project(project_copy(work / "project"), env, {CLUSTER: plane})
    yaml_config(project, CLUSTER, operator_data())
    return project


def expected_nads(config: ClusterConfig) -> dict[tuple[str, str], Any]:
    """(project, NAD name) -> the attachment whose SriovNetwork makes it, for every RDMA project and attachment."""
    assert config.fabric is not None
    return {(ns, operator_network_name(ns, a.network)): a for ns in RDMA_PROJECTS for a in config.fabric.attachments}


def test_the_project_tier_before_the_platform_tier_fails_naming_the_platform_stack(plane: ControlPlane, project: Project) -> None:
    assert plane.get(nad_path("team-a", operator_network_name("team-a", "port1-network"))) is None
    preview = project.drive(CLUSTER, "preview")
    assert not preview["ok"], "the project tier's preview passed with no NAD of the operator's"
    text = "\n".join(preview["diagnostics"]) + preview.get("error", "")
    assert "team-a/team-a-port1-network" in text and f"pulumi up -s {CLUSTER}-platform" in text, text[-3000:]
    assert "Traceback" not in text


@pytest.fixture(scope="module")
def hand_made(plane: ControlPlane) -> dict[str, str]:
    """The hand-made NADs in team-b, made before the platform tier's up; name -> uid."""
    made: dict[str, str] = {}
    for name in HAND_MADE:
        copy = yaml.safe_load(BARCELONA_NAD.read_text())
        copy["metadata"].update(name=name, namespace="team-b")
        made[name] = plane.apply(copy)["metadata"]["uid"]
    return made


def test_adoption_says_delete_the_hand_made_nads_first(plane: ControlPlane, hand_made: dict[str, str]) -> None:
    """adopt-diff of `oc get net-attach-def -n team-b -o yaml`: both under "Delete first", the one of the operator's
    name because the operator overwrites it in place (what the next test sees it do)."""
    listed = plane.get(f"/apis/{NAD_API}/namespaces/team-b/network-attachment-definitions")
    report, narrows = adoption.adopt_diff(operator_config(), {**listed, "kind": "List"}, "live.yaml")
    assert narrows and "Delete first:" in report
    for name in HAND_MADE:
        assert f"`oc delete net-attach-def {name} -n team-b`" in report, report
    assert "overwrites a NAD of that name in place" in report, report
    # import-plan's list, from the same NADs recorded as the config's hand_made entries.
    recorded = [{"kind": "NetworkAttachmentDefinition", "namespace": "team-b", "name": n, "source": "made by hand"} for n in HAND_MADE]
    deletions = adoption.operator_deletions(stacks.validate({**operator_data(), "hand_made": recorded}, "hand_made"))
    assert [d.split(":")[0] for d in deletions] == [f"NetworkAttachmentDefinition team-b/{n}" for n in HAND_MADE], deletions


@pytest.fixture(scope="module")
def platform_up(project: Project, controller: sriov.Controller, hand_made: dict[str, str]) -> dict[str, Any]:
    up = project.drive(f"{CLUSTER}-platform", "up")
    assert up["ok"], failure(up)
    return up


def test_the_platform_tier_makes_each_projects_nads_as_the_pods_need_them(plane: ControlPlane, platform_up: dict[str, Any],
                                                                       hand_made: dict[str, str]) -> None:  # fmt: skip
    for (ns, name), att in expected_nads(operator_config()).items():
        nad = wait_for(plane, nad_path(ns, name), lambda n: n and "mtu" not in config_of(n), f"the operator's NAD {ns}/{name}")
        assert nad["metadata"]["annotations"] == {RESOURCE_NAME: att.resource}
        # The attachment's CNI config as the operator renders it: no "mtu" (the node policy sets the VF's), its logLevel.
        want = {k: v for k, v in json.loads(att.cni_config).items() if k != "mtu"}
        assert config_of(nad) == {**want, "name": name, "logLevel": "info"}
    # Adoption: the operator took the NAD of its name over in place; it leaves the copy as it was, kept by nothing.
    taken = plane.get(nad_path("team-b", HAND_MADE[0]))
    assert taken["metadata"]["uid"] == hand_made[HAND_MADE[0]] and not taken["metadata"].get("labels")
    copy = plane.get(nad_path("team-b", HAND_MADE[1]))
    assert copy["metadata"]["uid"] == hand_made[HAND_MADE[1]] and "mtu" in config_of(copy)


def test_the_project_tier_then_deploys_pods_that_attach_exactly_those_nads(plane: ControlPlane, project: Project,
                                                                         platform_up: dict[str, Any]) -> None:  # fmt: skip
    up = project.drive(CLUSTER, "up")
    assert up["ok"], failure(up)
    config = operator_config()
    nads = expected_nads(config)
    for w in config.workloads:
        template = plane.get(f"/apis/apps/v1/namespaces/{w.namespace}/statefulsets/{w.name}")["spec"]["template"]
        refs = template["metadata"]["annotations"][NETWORKS].split(",")
        mine = {name: a for (ns, name), a in nads.items() if ns == w.namespace}
        assert refs == [f"{w.namespace}/{name}@{a.interface}" for name, a in mine.items()]
        limits = template["spec"]["containers"][0]["resources"]["limits"]
        for name in mine:
            resource = plane.get(nad_path(w.namespace, name))["metadata"]["annotations"][RESOURCE_NAME]
            assert limits.get(resource) == "1", f"{w.name} does not request {resource}, which {name} names: {limits}"
    for stack in (f"{CLUSTER}-platform", CLUSTER):
        again = project.drive(stack, "preview", "--expect-no-changes")
        assert again["ok"], f"a second preview of {stack} has changes: " + failure(again)
