"""Every rendered object is one the API server accepts, each kind against the schema the project ships or reads: built-in
kinds against the Kubernetes 1.30 OpenAPI schemas (OpenShift 4.17, kubernetes-validate), SCC and NAD against the upstream
CRDs in ../shared/schemas, the OpenShift kinds that are not CRDs there (Route, BuildConfig, ImageStream, MachineConfig)
against schemas/openshift/ (written from the API's rules, see their descriptions), Kueue's kinds against its CRDs in
schemas/kueue/ and the SR-IOV operator's against its CRDs in schemas/sriov/. A kind with none of these is a failure
naming it (a stack that starts rendering a new kind needs its schema here), never a traceback."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml

import stacks
from config.cluster import KUEUE_MAX_LABELS
from config.kube import GPU
from config.openshift import SRIOV_MAX_VFS
from config.values import MAX_ATTACHMENTS, MAX_DOCKERFILE, MAX_NODE_SETS, MAX_PRIORITY_CLASSES, MAX_TOLERATIONS
from tests import fixtures
from tests.helpers import ROOT, SHARED, refused, rendered_fixture, rendered_stack
from tools.render import Rendering, run

# kubernetes-validate reads and parses its JSON schema files (megabytes) on every call: parse each once per process.
kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)

K8S_VERSION = "1.30.0"
CRD_KINDS = {
    "SecurityContextConstraints": "securitycontextconstraints.crd.yaml",
    "NetworkAttachmentDefinition": "network-attachment-definitions.crd.yaml",
}
OPENSHIFT_KINDS = {"Route": "route", "BuildConfig": "buildconfig", "ImageStream": "imagestream", "MachineConfig": "machineconfig"}
# The CRD schemas the project ships (schemas/FOLDER/KIND.schema.json), by API group: Kueue v0.17.0's, the SR-IOV network
# operator v1.5.0's; no Go module cache needed.
SHIPPED_CRDS = {"kueue.x-k8s.io": "kueue", "sriovnetwork.openshift.io": "sriov"}
# The groups kubernetes-validate has the built-in kinds of ("" is the core group).
BUILT_IN_GROUPS = {"", "apps", "batch", "rbac.authorization.k8s.io", "networking.k8s.io", "policy", "storage.k8s.io",
                   "scheduling.k8s.io", "autoscaling", "coordination.k8s.io", "discovery.k8s.io", "node.k8s.io"}  # fmt: skip


def group_of(obj: dict[str, Any]) -> str:
    api = str(obj.get("apiVersion", ""))
    return api.rpartition("/")[0]


def shipped_schema_path(obj: dict[str, Any]) -> Path | None:
    folder = SHIPPED_CRDS.get(group_of(obj))
    return ROOT / "schemas" / folder / f"{str(obj['kind']).lower()}.schema.json" if folder else None


def crd_schema(kind: str) -> dict[str, Any]:
    path = SHARED / "schemas" / CRD_KINDS[kind]
    if not path.exists():
        pytest.skip(f"{path} is absent (a fresh clone without ../shared): CRD schemas not available")
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("served", True) and v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def openshift_schema(kind: str) -> dict[str, Any]:
    return json.loads((ROOT / "schemas" / "openshift" / f"{OPENSHIFT_KINDS[kind]}.schema.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@cache
def roce_with_node_level() -> Rendering:
    return run(fixtures.config("roce", lambda d: d.update(node_level={"crio_memlock_unlimited": True, "iommu_passthrough": True})))


@cache
def roce_queued_by_topology_in_operator_mode() -> Rendering:
    """The kinds no committed stack renders today: Kueue's (topology-aware, with a priority class) and the SR-IOV operator's."""

    def edit(d: dict[str, Any]) -> None:
        fixtures.queued(d, topology_aware=True, priority_classes={"deadline": 1000})
        fixtures.with_policies(d)

    return run(fixtures.config("roce", edit))


def renderings() -> Iterator[tuple[str, Any]]:
    for name in stacks.names():
        yield f"clusters/{name}.py", rendered_stack(name)
    for name in sorted(fixtures.FIXTURES):
        yield f"fixture {name}", rendered_fixture(name)
    yield "fixture roce with node-level objects", roce_with_node_level()
    yield "fixture roce queued (topology-aware) in operator mode with node policies", roce_queued_by_topology_in_operator_mode()


@cache
def schema_validator(kind: str, shipped: Path | None = None) -> Any:
    """What jsonschema.validate checks a CRD or OpenShift kind with, built (and the schema checked) once."""
    if shipped is not None:
        schema = json.loads(shipped.read_text(encoding="utf-8"))
    else:
        schema = crd_schema(kind) if kind in CRD_KINDS else openshift_schema(kind)
    checker = jsonschema.validators.validator_for(schema)
    checker.check_schema(schema)
    return checker(schema)


class NoSchema(Exception):
    """A rendered kind the project ships no schema for."""


def validate(obj: dict[str, Any]) -> None:
    kind, shipped = obj["kind"], shipped_schema_path(obj)
    if shipped is not None and not shipped.is_file():
        raise NoSchema(f"{kind} ({obj.get('apiVersion')}): {shipped.relative_to(ROOT)} is missing; add the CRD's openAPIV3Schema there")
    if shipped is not None or kind in CRD_KINDS or kind in OPENSHIFT_KINDS:
        error = jsonschema.exceptions.best_match(schema_validator(kind, shipped).iter_errors(obj))
        if error is not None:
            raise error
    elif group_of(obj) in BUILT_IN_GROUPS:
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            raise NoSchema(f"{kind} ({obj.get('apiVersion')}): kubernetes-validate has none in Kubernetes {K8S_VERSION}") from None
    else:
        raise NoSchema(
            f"{kind} ({obj.get('apiVersion')}): the project ships no schema for this kind; add its CRD's openAPIV3Schema under "
            "schemas/ and its group to SHIPPED_CRDS in tests/test_schemas.py"
        )


def test_every_rendered_object_validates() -> None:
    seen: dict[str, int] = {}
    for label, rendering in renderings():
        for rec in rendering.resources:
            obj = rec.object
            if rec.is_patch:
                continue  # a partial object, applied to one that exists
            try:
                validate(obj)
            except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as err:
                pytest.fail(
                    f"{label}: {obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}: "
                    f"{err.message} at {list(err.path)}"
                )
            except NoSchema as err:
                pytest.fail(f"{label}: {obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}: {err}", pytrace=False)
            seen[obj["kind"]] = seen.get(obj["kind"], 0) + 1
    folders = [ROOT / "schemas" / folder for folder in SHIPPED_CRDS.values()]
    shipped = [p.name.removesuffix(".schema.json") for folder in folders for p in folder.glob("*.json")]
    for kind in [*CRD_KINDS, *OPENSHIFT_KINDS, "StatefulSet", "Job", "NetworkPolicy", "PersistentVolumeClaim"]:
        assert seen.get(kind), f"no {kind} rendered: the check would prove nothing for it"
    unseen = sorted(set(shipped) - {k.lower() for k in seen})
    assert not unseen, f"no object of {unseen} rendered, though schemas/ ships their schema: the check would prove nothing for them"


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "x"}, "spec": {}},
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}},
        {"apiVersion": "apps/v1", "kind": "Widget", "metadata": {"name": "x"}},
    ],
    ids=["a shipped group's unshipped kind", "an unknown group", "an unknown built-in kind"],
)
def test_a_kind_without_a_schema_is_named_not_a_traceback(obj: dict[str, Any]) -> None:
    with pytest.raises(NoSchema, match=obj["kind"]):
        validate(obj)


@pytest.mark.parametrize(
    "kind,break_it",
    [
        ("ClusterQueue", lambda o: o["spec"].update(queueingStrategy="Sometimes")),
        ("Topology", lambda o: o["spec"].update(levels=[])),
        ("SriovNetwork", lambda o: o["spec"].update(spoofChk="maybe")),
        ("SriovNetworkNodePolicy", lambda o: o["spec"].update(numVfs="four")),
    ],
)
def test_the_shipped_crd_schemas_reject_what_the_api_server_would(kind: str, break_it: Any) -> None:
    obj = copy.deepcopy(next(o for o in roce_queued_by_topology_in_operator_mode().objects() if o["kind"] == kind))
    validate(obj)
    break_it(obj)
    with pytest.raises(jsonschema.ValidationError):
        validate(obj)


def test_scc_schema_rejects_the_seeds_scc() -> None:
    """The check has teeth: seed 000's SCC, with only allowedCapabilities, is invalid."""
    schema = crd_schema("SecurityContextConstraints")
    seed = {"apiVersion": "security.openshift.io/v1", "kind": "SecurityContextConstraints", "metadata": {"name": "nccl-rdma-scc"},
            "allowedCapabilities": ["IPC_LOCK", "SYS_RESOURCE"]}  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(seed, schema)


@pytest.mark.parametrize(
    "kind,name,break_it",
    [
        ("Route", "dev-jupyter", lambda o: o["spec"]["tls"].update(termination="Edge")),
        ("Route", "dev-jupyter", lambda o: o["spec"].update(port={"targetPort": 0})),
        ("BuildConfig", None, lambda o: o["spec"]["output"]["to"].update(kind="ImageStreamImage")),
        ("BuildConfig", None, lambda o: o["spec"]["strategy"].update(type="Custom")),
        ("ImageStream", "trainer", lambda o: o["metadata"].update(name="Trainer")),
        ("MachineConfig", "99-worker-crio-memlock", lambda o: o["spec"]["config"]["ignition"].update(version="2.2.0")),
    ],
)
def test_the_openshift_schemas_reject_what_the_api_server_would(kind: str, name: str | None, break_it: Any) -> None:
    rendering = roce_with_node_level()
    obj = copy.deepcopy(next(o for o in rendering.objects() if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)))
    jsonschema.validate(obj, openshift_schema(kind))
    break_it(obj)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, openshift_schema(kind))


# --- every bound of a shipped schema the config reaches is a bound of the config -------------------------------------


def _queued_sets(d: dict[str, Any]) -> None:
    """64 node sets (the ClusterQueue's 64 flavors), 16 priority classes, a quota for each set."""
    d["gpu_node_selector"] = {}
    d["node_sets"] = [{"name": f"s{k}", "nodes": [f"n{k}"], "gpus_per_node": 4, "labels": {"pool": f"s{k}"}} for k in range(MAX_NODE_SETS)]
    fixtures.queued(
        d, priority_classes={f"p{k}": k for k in range(MAX_PRIORITY_CLASSES)}, quota={f"s{k}": {GPU: "4"} for k in range(MAX_NODE_SETS)}
    )


def _covered(d: dict[str, Any]) -> None:
    """The fabric's 32 attachments each a VF resource of its own, a quota for every resource the pods request: the
    ClusterQueue covers 36 (cpu, memory, the GPUs, pods and the 32), under Kueue's 64."""

    def attachment(k: int) -> dict[str, str]:
        cni = {"name": f"port{k}-network", "type": "sriov", "ipam": {"type": "whereabouts", "range": "10.1.0.0/16"}}
        return {"network": cni["name"], "resource": f"openshift.io/port{k}rdma", "interface": f"net{k}", "cni_config": json.dumps(cni)}

    d["fabric"]["attachments"] = [attachment(k) for k in range(1, MAX_ATTACHMENTS + 1)]
    quota = {GPU: "16", "cpu": "64", "memory": "1Ti", "pods": "4", **{a["resource"]: "16" for a in d["fabric"]["attachments"]}}
    fixtures.queued(d, quota={"main": quota})


def _flavor(d: dict[str, Any]) -> None:
    """Topology-aware flavors with 8 tolerations and 8 node labels (4 of gpu_node_selector's, 4 of the set's), the
    stack's and the set's names at 63 characters (the flavors' names carry both and a digest)."""
    fixtures.queued(d, topology_aware=True, cluster_queue="q" * 63)
    d["name"] = "r" * 63
    d["gpu_tolerations"] = [{"key": f"example.com/taint-{k}", "operator": "Exists"} for k in range(MAX_TOLERATIONS)]
    d["gpu_node_selector"] = {f"example.com/gpu-{k}": "true" for k in range(KUEUE_MAX_LABELS // 2)}
    for s in d["node_sets"]:
        s["labels"] = {f"example.com/{s['name']}-{k}": "yes" for k in range(KUEUE_MAX_LABELS // 2)}
    d["node_sets"][1]["name"] = "s" * 63
    for w in d["workloads"] + d["bandwidth_checks"]:
        if w.get("node_set") == "spare":
            w["node_set"] = "s" * 63


def _image(d: dict[str, Any]) -> None:
    """An image built with a 63-character name, a 128-character tag and a Dockerfile of 60,000 bytes."""
    d["images"][0].update(name="i-" * 31 + "i", tag="t" * 128, dockerfile="FROM x\n" + "#" * (MAX_DOCKERFILE - 8) + "\n")


def _sriov(d: dict[str, Any]) -> None:
    """Node policies and SriovNetworks at the SR-IOV operator's bounds: 128 VFs per PF, MTU 9216, VLAN 4096, QoS 7."""
    fixtures.with_policies(d, num_vfs=SRIOV_MAX_VFS, mtu=9216)
    for a in d["fabric"]["attachments"]:
        a["cni_config"] = json.dumps({**json.loads(a["cni_config"]), "vlan": 4096, "vlanQoS": 7, "mtu": 9216, "max_tx_rate": 2**31 - 1})


AT_THE_BOUNDS = {"flavors": ("tcp", _queued_sets), "covered resources": ("roce", _covered), "flavor": ("roce", _flavor),
                 "image": ("roce", _image), "sr-iov": ("roce", _sriov)}  # fmt: skip


@pytest.mark.parametrize("case", sorted(AT_THE_BOUNDS))
def test_a_config_at_each_bound_of_a_shipped_schema_renders_objects_it_accepts(case: str) -> None:
    """Each bound of a shipped schema (schemas/kueue, schemas/openshift, schemas/sriov) that a config value reaches is
    one of the config (config/values.py): a config at it renders objects the schemas accept. One past it is refused at
    the field (below, and tests/config/test_bounds.py)."""
    name, edit = AT_THE_BOUNDS[case]
    rendering = run(fixtures.config(name, edit))
    kinds = set()
    for rec in rendering.resources:
        if not rec.is_patch and shipped_schema_path(rec.object) or rec.object["kind"] in OPENSHIFT_KINDS:
            try:
                validate(rec.object)
            except jsonschema.ValidationError as err:
                pytest.fail(f"{case}: {rec.object['kind']} {rec.object['metadata']['name']}: {err.message[:300]} at {list(err.path)}")
            kinds.add(rec.object["kind"])
    assert kinds, case


@pytest.mark.parametrize(
    "edit,said",
    [
        (
            lambda d: d["images"][0].update(dockerfile="FROM x\n" + "#" * MAX_DOCKERFILE),
            "images[trainer].dockerfile: the Dockerfile is 60007 bytes: OpenShift's build API takes at most 60000",
        ),
        (
            lambda d: d["images"][0].update(name="train--image"),
            "images[train--image].name: 'train--image' is not a valid ImageStream name",
        ),
    ],
    ids=["a Dockerfile of 60,007 bytes", "an image name with two '-' in a row"],
)
def test_one_past_a_bound_of_a_shipped_schema_is_refused_at_its_field(edit: Any, said: str) -> None:
    message = refused("roce", edit)
    assert said in message, message
