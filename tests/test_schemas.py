"""Every rendered object is one the API server accepts: built-in kinds against the Kubernetes 1.30
OpenAPI schemas (OpenShift 4.17), SCC and NAD against the upstream CRDs in ../shared/schemas."""

from __future__ import annotations

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import SHARED

K8S_VERSION = "1.30.0"
CRD_KINDS = {
    "SecurityContextConstraints": "securitycontextconstraints.crd.yaml",
    "NetworkAttachmentDefinition": "network-attachment-definitions.crd.yaml",
}


def crd_schema(kind: str) -> dict:
    path = SHARED / "schemas" / CRD_KINDS[kind]
    if not path.exists():
        pytest.skip(f"{path} is absent (a fresh clone without ../shared): CRD schemas not available")
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("served", True) and v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def test_built_in_kinds_validate_strictly(stack_rendering):
    for obj in stack_rendering.objects():
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}: {err.message} at {list(err.path)}")


@pytest.mark.parametrize("kind", sorted(CRD_KINDS))
def test_crd_kinds_validate_against_upstream_schemas(kind):
    from conftest import rendered_stack

    schema = crd_schema(kind)
    seen = 0
    for name in ("barcelona", "cairo", "nerc"):
        for obj in rendered_stack(name).objects():
            if obj["kind"] == kind:
                jsonschema.validate(obj, schema)
                seen += 1
    assert seen, f"no {kind} rendered by any stack"


def test_scc_schema_rejects_the_seeds_scc():
    """The check has teeth: seed 000's SCC, with only allowedCapabilities, is invalid."""
    schema = crd_schema("SecurityContextConstraints")
    seed = {
        "apiVersion": "security.openshift.io/v1",
        "kind": "SecurityContextConstraints",
        "metadata": {"name": "nccl-rdma-scc"},
        "allowedCapabilities": ["IPC_LOCK", "SYS_RESOURCE"],
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(seed, schema)
