"""What a queued stack declares for Kueue (components/queueing.py, docs/shared-clusters.md): ResourceFlavors per node set,
the ClusterQueue and its quota, priority classes, LocalQueues, the managed-namespace label and the queue labels on the
workloads, each valid against Kueue v0.17.0's own v1beta2 CRD schemas (schemas/kueue/) with nothing pruned; and what `up`
waits for and replaces. Without `queueing` nothing of Kueue is declared."""

from __future__ import annotations

import json
from decimal import Decimal
from functools import cache
from typing import Any

import jsonschema
import pytest

from components.lifecycle import QUEUED_SHAPE, SKIP_AWAIT, WAIT_FOR
from components.program import layout
from components.queueing import MANAGED_NAMESPACE
from components.tiers import tier_of
from config.kube import GPU, PRIORITY_CLASS, QUEUE_NAME
from config.values import quantity_value
from tests import fixtures
from tests.fixtures import Data, queued_config
from tests.helpers import ROOT, find, pod_spec
from tools.render import Rendering, run

KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "WorkloadPriorityClass", "LocalQueue")


@cache
def rendered(name: str) -> Rendering:
    return run(
        queued_config(
            name,
            priority_classes={"urgent": 1000},
            edit=lambda d: fixtures.workload(d, d["workloads"][0]["name"]).update(priority="urgent"),
        )
    )


def kinds(objs: list[Data], kind: str) -> list[Data]:
    return [o for o in objs if o["kind"] == kind]


@cache
def crd_validator(kind: str) -> Any:
    schema = json.loads((ROOT / "schemas" / "kueue" / f"{kind.lower()}.schema.json").read_text(encoding="utf-8"))
    checker = jsonschema.validators.validator_for(schema)
    checker.check_schema(schema)
    return checker(schema)


def pruned(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The fields of `value` the API server would drop (a structural schema prunes what it does not name)."""
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


class TestObjects:
    @pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
    def test_kueues_crds_accept_them_whole(self, name: str) -> None:
        seen = set()
        for o in rendered(name).objects():
            if o["kind"] in KUEUE_KINDS:
                error = jsonschema.exceptions.best_match(crd_validator(o["kind"]).iter_errors(o))
                assert error is None, f"{o['kind']} {o['metadata']['name']}: {error.message if error else ''}"
                assert pruned(o, crd_validator(o["kind"]).schema) == []
                assert o["apiVersion"] == "kueue.x-k8s.io/v1beta2"
                seen.add(o["kind"])
        assert seen == set(KUEUE_KINDS)

    def test_a_flavor_per_node_set_with_its_labels_and_the_gpu_tolerations(self) -> None:
        r = rendered("roce")
        main, spare = find(r, "ResourceFlavor", "roce-main"), find(r, "ResourceFlavor", "roce-spare")
        assert main["spec"]["nodeLabels"] == {"nvidia.com/gpu.present": "true", "gpu-pool": "main"}
        assert spare["spec"]["nodeLabels"] == {"nvidia.com/gpu.present": "true", "gpu-pool": "spare"}
        assert main["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]

    def test_the_pods_select_their_node_sets_labels(self) -> None:
        r = rendered("roce")
        assert pod_spec(find(r, "StatefulSet", "dev"))["nodeSelector"] == {"nvidia.com/gpu.present": "true", "gpu-pool": "main"}
        assert pod_spec(find(r, "Job", "train-r1"))["nodeSelector"]["gpu-pool"] == "spare"

    @pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
    def test_the_queue_covers_every_resource_a_pod_requests(self, name: str) -> None:
        r = rendered(name)
        (cq,) = kinds(r.objects(), "ClusterQueue")
        (group,) = cq["spec"]["resourceGroups"]
        requested = {
            res
            for o in r.objects()
            if o["kind"] in ("StatefulSet", "Job")
            for c in pod_spec(o)["containers"]
            for res in c["resources"]["requests"]
        }
        assert requested <= set(group["coveredResources"])
        for f in group["flavors"]:  # Kueue's rule: every flavor lists the covered resources, in their order
            assert [x["name"] for x in f["resources"]] == group["coveredResources"]

    def test_the_quota_defaults_to_the_node_sets_totals_and_takes_what_the_config_states(self) -> None:
        r = run(queued_config("roce", quota={"spare": {GPU: "4", "memory": "1Ti"}}))
        (cq,) = kinds(r.objects(), "ClusterQueue")
        quota = {f["name"]: {x["name"]: x["nominalQuota"] for x in f["resources"]} for f in cq["spec"]["resourceGroups"][0]["flavors"]}
        assert quota["roce-main"] == {
            "cpu": "256",
            "memory": "2Ti",
            GPU: "16",
            "openshift.io/port1rdma": "16",
            "openshift.io/port2rdma": "16",
        }
        assert quota["roce-spare"] == {
            "cpu": "192",
            "memory": "1Ti",
            GPU: "4",
            "openshift.io/port1rdma": "12",
            "openshift.io/port2rdma": "12",
        }
        fractional = queued_config("tcp", edit=lambda d: d["node_sets"][0].update(allocatable_cpu="63500m")).queue_quota()
        assert fractional["pool"]["cpu"] == "127" and quantity_value(fractional["pool"]["cpu"]) == Decimal(2) * Decimal("63.5")

    def test_the_cluster_queue_admits_the_stacks_namespaces_only(self) -> None:
        (cq,) = kinds(rendered("roce").objects(), "ClusterQueue")
        assert cq["metadata"]["name"] == "gpu"
        assert cq["spec"]["namespaceSelector"] == {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}]
        }

    def test_a_local_queue_per_namespace_and_the_priority_classes(self) -> None:
        r = rendered("roce")
        assert sorted((o["metadata"]["namespace"], o["spec"]["clusterQueue"]) for o in kinds(r.objects(), "LocalQueue")) == [
            ("team-a", "gpu"),
            ("team-b", "gpu"),
        ]
        assert {o["metadata"]["name"] for o in kinds(r.objects(), "LocalQueue")} == {"gpu-training"}
        assert [(o["metadata"]["name"], o["value"]) for o in kinds(r.objects(), "WorkloadPriorityClass")] == [("urgent", 1000)]

    def test_every_workload_names_the_queue_on_itself_not_on_its_pods(self) -> None:
        r = rendered("roce")
        runners = [o for o in r.objects() if o["kind"] in ("StatefulSet", "Job")]
        assert len(runners) == 5  # dev, dev-tcp, solo, train, the bandwidth check
        for o in runners:
            assert o["metadata"]["labels"][QUEUE_NAME] == "gpu-training", o["metadata"]["name"]
            assert QUEUE_NAME not in o["spec"]["template"]["metadata"]["labels"]  # Kueue labels the pods itself
        assert find(r, "StatefulSet", "dev")["metadata"]["labels"][PRIORITY_CLASS] == "urgent"
        assert find(r, "StatefulSet", "dev-tcp")["metadata"]["labels"][PRIORITY_CLASS] == "urgent"  # a variant follows its source
        assert PRIORITY_CLASS not in find(r, "StatefulSet", "solo")["metadata"]["labels"]

    def test_the_namespaces_get_the_red_hat_builds_label_unless_the_config_says_not(self) -> None:
        patches = [rec.object for rec in rendered("roce").resources if rec.is_patch and rec.object["kind"] == "Namespace"]
        assert sorted((p["metadata"]["name"], p["metadata"]["labels"]) for p in patches) == [
            ("team-a", {MANAGED_NAMESPACE: "true"}),
            ("team-b", {MANAGED_NAMESPACE: "true"}),
        ]
        off = queued_config("roce", managed_namespace_label=False)
        assert [d for d in layout(off) if d.patch and d.object["kind"] == "Namespace"] == []

    def test_the_tiers(self) -> None:
        c = queued_config("roce", priority_classes={"urgent": 1})
        tiers = {(d.object["kind"], d.patch): tier_of(d.object, c) for d in layout(c) if d.object["kind"] in (*KUEUE_KINDS, "Namespace")}
        assert tiers == {
            ("ResourceFlavor", False): "platform",
            ("ClusterQueue", False): "platform",
            ("WorkloadPriorityClass", False): "platform",
            ("Namespace", True): "platform",
            ("LocalQueue", False): "project",
        }
        assert {d.object["kind"] for d in layout(c, "project")} >= {"LocalQueue", "StatefulSet"}

    def test_rights_name_the_kueue_resources(self, capsys: pytest.CaptureFixture[str]) -> None:
        from components.tiers import can_i

        c = queued_config("tcp")
        lines = [line for d in layout(c) if d.object["kind"] in KUEUE_KINDS for line in can_i(d.object, d.patch)]
        assert "oc auth can-i create localqueues.kueue.x-k8s.io -n proj" in lines
        assert "oc auth can-i create clusterqueues.kueue.x-k8s.io" in lines


# --- what `up` waits for, and what it replaces --------------------------------------------------------------------


class TestLifecycle:
    def test_a_queued_training_job_is_not_awaited(self) -> None:
        job = find(rendered("roce"), "Job", "train-r1")
        assert job["metadata"]["annotations"].get(SKIP_AWAIT) == "true" and WAIT_FOR not in job["metadata"]["annotations"]
        plain = find(run(fixtures.config("roce")), "Job", "train-r1")
        assert plain["metadata"]["annotations"][WAIT_FOR] == "jsonpath={.status.startTime}"

    def test_a_queued_statefulset_is_awaited_until_its_gated_pods_exist_as_before(self) -> None:
        sts = find(rendered("roce"), "StatefulSet", "dev")
        assert sts["metadata"]["annotations"][WAIT_FOR] == "jsonpath={.status.replicas}=2"

    def test_a_bandwidth_check_is_still_awaited_for_its_verdict(self) -> None:
        (check,) = [o for o in rendered("roce").objects() if o["kind"] == "Job" and o["metadata"]["name"].startswith("fabric-")]
        assert WAIT_FOR not in check["metadata"]["annotations"] and SKIP_AWAIT not in check["metadata"]["annotations"]

    def test_a_queued_statefulset_is_replaced_when_its_pods_shape_changes(self) -> None:
        r = rendered("roce")
        for rec in r.resources:
            kind = rec.object["kind"]
            if kind == "StatefulSet":
                assert rec.options["replace_on_changes"] == list(QUEUED_SHAPE)
                assert rec.options["delete_before_replace"]
            elif kind == "LocalQueue":
                assert rec.options["replace_on_changes"] == ["spec.clusterQueue"] and rec.options["delete_before_replace"]
        plain = run(fixtures.config("roce"))
        assert all(rec.options["replace_on_changes"] == [] for rec in plain.resources)
