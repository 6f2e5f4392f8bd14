"""fabric.operator_namespace is a namespace the SR-IOV network operator can run in, and only its kinds go there
(issue 35). The operator (github.com/k8snetworkplumbingwg/sriov-network-operator v1.5.0) runs in the namespace it is
installed to (deploy/operator.yaml passes metadata.namespace as NAMESPACE; pkg/vars reads it, main.go caches only that
namespace, controllers/generic_network_controller.go reconciles there): OpenShift's OLM installs it in
openshift-sriov-network-operator, its Helm chart in a namespace of its own (sriov-network-operator in its README). A
SriovNetwork in `default` or `openshift-config` is never reconciled, and the stack would own objects in a namespace of
the platform."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from components.program import objects, patches
from config.openshift import SRIOV_OPERATOR_NAMESPACE
from policy import check
from tests import fixtures

CNI = {"cniVersion": "1.0.0", "type": "sriov", "vlan": 0, "spoofchk": "on", "trust": "off", "link_state": "auto"}


def operator_mode(d: dict[str, Any], namespace: str | None = None) -> None:
    d["fabric"]["nad_mode"] = "operator"
    if namespace is not None:
        d["fabric"]["operator_namespace"] = namespace
    for i, a in enumerate(d["fabric"]["attachments"], start=1):
        cni = {**CNI, "name": a["network"], "ipam": {"type": "whereabouts", "range": f"10.1.{i}.0/24"}}
        a["cni_config"] = json.dumps(cni, separators=(",", ":"))


@pytest.mark.parametrize("namespace", ["default", "openshift-config", "openshift", "kube-system", "openshift-operators"])
def test_a_namespace_of_the_platform_is_no_operators_namespace(tmp_path: Path, namespace: str) -> None:
    data = fixtures.roce()
    operator_mode(data, namespace)
    path = tmp_path / "roce.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load_file(path)
    (line,) = str(err.value).splitlines()[1:]
    at = next(i for i, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "operator_namespace:" in text)
    assert line.startswith(f"  fabric.operator_namespace ({path}:{at}): '{namespace}' is a namespace of the platform"), line
    assert SRIOV_OPERATOR_NAMESPACE in line and "oc get sriovoperatorconfigs -A" in line


@pytest.mark.parametrize("namespace", [SRIOV_OPERATOR_NAMESPACE, "sriov-network-operator", "network-operators"])
def test_the_operators_own_namespace_passes_check(namespace: str) -> None:
    config = fixtures.config("roce", lambda d: operator_mode(d, namespace))
    assert config.fabric is not None and config.fabric.operator_namespace == namespace
    found = check(config, objects(config), patches(config))
    assert [f for f in found if f.rule == "platform-namespaces"] == []
    made = [o for o in objects(config) if o["kind"] == "SriovNetwork"]
    assert made and all(o["metadata"]["namespace"] == namespace for o in made)


def test_only_the_operators_kinds_go_to_its_namespace() -> None:
    config = fixtures.config("roce", lambda d: operator_mode(d, "sriov-network-operator"))
    objs = objects(config)
    stray = json.loads(json.dumps(next(o for o in objs if o["kind"] == "ServiceAccount")))
    stray["metadata"]["namespace"] = "sriov-network-operator"
    moved = json.loads(json.dumps(next(o for o in objs if o["kind"] == "SriovNetwork")))
    moved["metadata"].update(namespace="team-a", name="elsewhere")
    found = [f for f in check(config, [*objs, stray, moved], patches(config)) if f.rule == "platform-namespaces"]
    said = sorted(f.message for f in found)
    assert len(said) == 2, said
    assert any("only SriovNetworks and SriovNetworkNodePolicies go there" in m for m in said), said
    assert any("one in 'team-a' is never acted on" in m for m in said), said
