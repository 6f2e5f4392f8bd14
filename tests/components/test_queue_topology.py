"""What a queued stack declares for Kueue's Topology Aware Scheduling (`queueing.topology_aware`, docs/shared-clusters.md
"Admitted whole on the nodes"), and the `pods` quota: the Topology, the flavors that name it (their names change with
the fields Kueue's CRD makes immutable), the pod sets that ask for it, all valid against Kueue v0.17.0's own v1beta2
CRD schemas (schemas/kueue/); and nothing of it without the field. Configs are the tests' own (tests/fixtures.py)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
import pytest

from cli.checking import preflight
from components.program import layout, objects
from components.tiers import can_i, tier_of
from config.kube import GPU, UNCONSTRAINED_TOPOLOGY
from config.stack import ClusterConfig
from tests import fixtures
from tests.helpers import ROOT

Data = dict[str, Any]
KUEUE_KINDS = ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")


def queued(d: Data, **queueing: Any) -> Data:
    d["queueing"] = {"cluster_queue": "gpu", **queueing}
    for s in d["node_sets"]:
        s.update(allocatable_cpu="64", allocatable_memory="512Gi", labels={"gpu-pool": s["name"]})
    return d


def config(name: str, edit: Any = None, **queueing: Any) -> ClusterConfig:
    def both(d: Data) -> None:
        queued(d, **queueing)
        if edit is not None:
            edit(d)

    return fixtures.config(name, both)


def kinds(objs: list[Data], kind: str) -> list[Data]:
    return [o for o in objs if o["kind"] == kind]


@cache
def validator(kind: str) -> Any:
    schema = json.loads((ROOT / "schemas" / "kueue" / f"{kind.lower()}.schema.json").read_text(encoding="utf-8"))
    checker = jsonschema.validators.validator_for(schema)
    checker.check_schema(schema)
    return checker(schema)


def pruned(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The fields of `value` a structural schema does not name: the API server would drop them."""
    if isinstance(value, dict) and "properties" in schema:
        out = []
        for key, sub in value.items():
            if key in schema["properties"]:
                out += pruned(sub, schema["properties"][key], f"{path}.{key}")
            elif key not in ("apiVersion", "kind", "metadata") or path:
                out.append(f"{path}.{key}")
        return out
    if isinstance(value, list) and "items" in schema:
        return [p for i, item in enumerate(value) for p in pruned(item, schema["items"], f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_kueues_crds_accept_the_topology_aware_objects_whole(name: str) -> None:
    seen = set()
    for o in objects(config(name, topology_aware=True, quota={fixtures.data(name)["node_sets"][0]["name"]: {"pods": "2"}})):
        if o["kind"] in KUEUE_KINDS:
            error = jsonschema.exceptions.best_match(validator(o["kind"]).iter_errors(o))
            assert error is None, f"{o['kind']} {o['metadata']['name']}: {error.message if error else ''}"
            assert pruned(o, validator(o["kind"]).schema) == [], o["kind"]
            seen.add(o["kind"])
    assert seen == set(KUEUE_KINDS)


def test_the_topology_is_the_node_and_every_flavor_names_it() -> None:
    objs = objects(config("roce", topology_aware=True))
    (topology,) = kinds(objs, "Topology")
    assert topology["metadata"]["name"] == "roce-nodes" and topology["spec"] == {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}
    flavors = kinds(objs, "ResourceFlavor")
    assert len(flavors) == 2 and all(f["spec"]["topologyName"] == "roce-nodes" for f in flavors)
    # Topology Aware Scheduling checks the node taints against the pods' tolerations and the flavor's.
    assert all(f["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] for f in flavors)
    (cq,) = kinds(objs, "ClusterQueue")
    assert [f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]] == [f["metadata"]["name"] for f in flavors]


def test_a_topology_aware_flavor_is_a_new_flavor_when_its_immutable_fields_change() -> None:
    """Kueue's CRD makes topologyName, nodeLabels and tolerations immutable once topologyName is set, and keeps a flavor
    a ClusterQueue names from being deleted: an edit of them must be a new flavor (name), never an update in place."""

    def names(c: ClusterConfig) -> list[str]:
        return [f["metadata"]["name"] for f in kinds(objects(c), "ResourceFlavor")]

    plain = names(config("roce"))
    aware = names(config("roce", topology_aware=True))
    assert plain == ["roce-main", "roce-spare"]
    assert [n.rsplit("-", 1)[0] for n in aware] == plain and aware != plain
    relabelled = names(config("roce", topology_aware=True, edit=lambda d: d["node_sets"][0]["labels"].update(rack="r1")))
    assert relabelled[0] != aware[0] and relabelled[1] == aware[1]
    tolerating = names(config("roce", topology_aware=True, edit=lambda d: d["gpu_tolerations"][0].update(effect="NoExecute")))
    assert set(tolerating).isdisjoint(aware)
    assert names(config("roce", topology_aware=True)) == aware, "stable: the same config, the same names"


def test_every_pod_set_asks_for_topology_aware_scheduling() -> None:
    objs = objects(config("roce", topology_aware=True))
    runners = [o for o in objs if o["kind"] in ("StatefulSet", "Job")]
    assert len(runners) == 5  # dev, dev-tcp, solo, train, the bandwidth check
    for o in runners:
        assert o["spec"]["template"]["metadata"]["annotations"][UNCONSTRAINED_TOPOLOGY] == "true", o["metadata"]["name"]
    plain = [o for o in objects(config("roce")) if o["kind"] in ("StatefulSet", "Job")]
    assert all(UNCONSTRAINED_TOPOLOGY not in o["spec"]["template"]["metadata"]["annotations"] for o in plain)


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_without_the_field_nothing_of_it_is_declared(name: str) -> None:
    objs = objects(config(name))
    assert kinds(objs, "Topology") == []
    assert all("topologyName" not in f.get("spec", {}) for f in kinds(objs, "ResourceFlavor"))
    assert UNCONSTRAINED_TOPOLOGY not in json.dumps(objs)


def test_the_topology_is_the_platform_tiers_and_rights_name_it() -> None:
    c = config("tcp", topology_aware=True)
    (topology,) = [d for d in layout(c) if d.object["kind"] == "Topology"]
    assert tier_of(topology.object, c) == "platform"
    assert "oc auth can-i create topologies.kueue.x-k8s.io" in can_i(topology.object, topology.patch)
    assert [d.object["kind"] for d in layout(c, "project") if d.object["kind"] == "Topology"] == []


def test_a_topology_aware_flavor_needs_a_node_label() -> None:
    """Kueue's CRD: `at least one nodeLabel is required when topology is set`; its nodes are the ones TAS counts."""

    def bare(d: Data) -> None:
        queued(d, topology_aware=True)
        d["node_sets"][0]["labels"] = {}

    said = [f for f in preflight(fixtures.config("tcp", bare), None, None, others=[]) if f.rule == "queue-flavors"]
    assert [f.where for f in said] == ["node_sets[pool].labels"] and "at least one node label" in said[0].message
    # The stack's GPU node selector is a node label of every flavor too.
    assert fixtures.config("ib", lambda d: bare(d) or d.update(gpu_node_selector={"gpu": "yes"})).queueing is not None


def test_a_pods_quota_is_covered_and_the_other_sets_get_what_their_nodes_take() -> None:
    c = config("roce", quota={"main": {"pods": "4"}})
    quota = c.queue_quota()
    assert quota["main"]["pods"] == "4" and quota["spare"]["pods"] == str(3 * 110)
    (cq,) = kinds(objects(c), "ClusterQueue")
    (group,) = cq["spec"]["resourceGroups"]
    assert "pods" in group["coveredResources"] and GPU in group["coveredResources"]
    for f in group["flavors"]:  # Kueue's rule: every flavor lists the covered resources, in their order
        assert [x["name"] for x in f["resources"]] == group["coveredResources"]
    assert "pods" not in json.dumps(config("roce").queue_quota())
