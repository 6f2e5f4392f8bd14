"""Every rendered object is one the API server accepts: built-in kinds against the Kubernetes 1.30
OpenAPI schemas (OpenShift 4.17), SCC and NAD against the upstream CRDs in ../shared/schemas, and
the OpenShift kinds that are not CRDs there (Route, BuildConfig, ImageStream, MachineConfig) against
the schemas in schemas/openshift/, written from the API's rules (see their descriptions)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml

import stacks
from tests import fixtures
from tests.helpers import ROOT, SHARED, rendered_fixture, rendered_stack
from tools.render import Rendering, run

# kubernetes-validate reads and parses its JSON schema files (megabytes) on every call: parse each once per process.
kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)

K8S_VERSION = "1.30.0"
CRD_KINDS = {
    "SecurityContextConstraints": "securitycontextconstraints.crd.yaml",
    "NetworkAttachmentDefinition": "network-attachment-definitions.crd.yaml",
}
OPENSHIFT_KINDS = {"Route": "route", "BuildConfig": "buildconfig", "ImageStream": "imagestream", "MachineConfig": "machineconfig"}


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


def renderings() -> Iterator[tuple[str, Any]]:
    for name in stacks.names():
        yield f"clusters/{name}.py", rendered_stack(name)
    for name in sorted(fixtures.FIXTURES):
        yield f"fixture {name}", rendered_fixture(name)
    yield "fixture roce with node-level objects", roce_with_node_level()


@cache
def schema_validator(kind: str) -> Any:
    """What jsonschema.validate checks a CRD or OpenShift kind with, built (and the schema checked) once."""
    schema = crd_schema(kind) if kind in CRD_KINDS else openshift_schema(kind)
    checker = jsonschema.validators.validator_for(schema)
    checker.check_schema(schema)
    return checker(schema)


def validate(obj: dict[str, Any]) -> None:
    if obj["kind"] in CRD_KINDS or obj["kind"] in OPENSHIFT_KINDS:
        error = jsonschema.exceptions.best_match(schema_validator(obj["kind"]).iter_errors(obj))
        if error is not None:
            raise error
    else:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


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
            seen[obj["kind"]] = seen.get(obj["kind"], 0) + 1
    for kind in [*CRD_KINDS, *OPENSHIFT_KINDS, "StatefulSet", "Job", "NetworkPolicy", "PersistentVolumeClaim"]:
        assert seen.get(kind), f"no {kind} rendered: the check would prove nothing for it"


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
