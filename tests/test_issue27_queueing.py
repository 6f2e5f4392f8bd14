"""Issue 27: gang admission through Kueue on a shared cluster (`queueing`, docs/shared-clusters.md), offline.

The config and its errors in the stack file's words; the objects (ResourceFlavors, ClusterQueue, priority classes,
LocalQueues, the managed-namespace label, the queue labels on the workloads) against Kueue v0.17.0's own v1beta2 CRD
schemas (schemas/kueue/); what `up` waits for; the preflight (capacity against the quota, the edits Kueue's webhooks
refuse); what `stacks diff` says of an edit; and `stacks status` over synthetic Kueue Workloads shaped as Kueue v0.17.0
writes them. Configs are the tests' own (tests/fixtures.py); without `queueing` nothing changes (the committed stacks'
renders are held by tests/test_rendered_is_fresh.py).
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import stacks
from cli.checking import preflight
from cli.main import main
from components.lifecycle import QUEUED_SHAPE, SKIP_AWAIT, WAIT_FOR
from components.outputs import stack_outputs
from components.program import layout, objects
from components.queueing import MANAGED_NAMESPACE
from components.tiers import tier_of
from config.kube import GPU, PRIORITY_CLASS, QUEUE_NAME
from config.stack import ClusterConfig
from config.values import quantity_value
from tests import fixtures
from tests.helpers import ROOT, find, pod_spec
from tests.tools.test_status import declared, node, pod
from tools import status
from tools.diff import consequence, diff_trees
from tools.render import Rendering, run

Data = dict[str, Any]
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "WorkloadPriorityClass", "LocalQueue")


def queued(d: Data, **queueing: Any) -> Data:
    """The fixture queued: a ClusterQueue `gpu`, each node set labelled `gpu-pool: NAME` and stating its CPU and memory."""
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


@cache
def rendered(name: str) -> Rendering:
    return run(
        config(
            name,
            priority_classes={"urgent": 1000},
            edit=lambda d: fixtures.workload(d, d["workloads"][0]["name"]).update(priority="urgent"),
        )
    )


def refused(name: str, edit: Any) -> str:
    with pytest.raises(stacks.ConfigError) as err:
        fixtures.config(name, edit)
    return str(err.value)


def kinds(objs: list[Data], kind: str) -> list[Data]:
    return [o for o in objs if o["kind"] == kind]


# --- the config ---------------------------------------------------------------------------------------------------


class TestConfig:
    @pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
    def test_off_by_default_declares_nothing_of_kueue(self, name: str) -> None:
        c = fixtures.config(name)
        assert c.queueing is None
        objs = objects(c)
        assert [o for o in objs if o["apiVersion"].startswith("kueue.x-k8s.io")] == []
        assert [o for o in objs if QUEUE_NAME in (o["metadata"].get("labels") or {})] == []
        assert "queue" not in json.dumps(stack_outputs(c))

    def test_the_defaults(self) -> None:
        q = config("tcp").queueing
        assert q is not None
        assert (q.local_queue, q.managed_namespace_label, q.pods_ready.enabled, q.pods_ready.timeout_minutes) == (
            "gpu-training",
            True,
            True,
            5,
        )

    def test_the_yaml_form_reads_back_to_the_same_config(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        c = config(
            "roce",
            priority_classes={"urgent": 1000, "low": -5},
            quota={"main": {GPU: "8", "cpu": "100"}},
            pods_ready={"timeout_minutes": 12},
            edit=lambda d: fixtures.workload(d, "solo").update(priority="low"),
        )
        assert stacks.validate(yaml.safe_load(stacks.dump(c)), "round trip") == c
        path = tmp_path / "roce.yaml"
        path.write_text(stacks.dump(c), encoding="utf-8")
        assert main(["config", "--config", str(path)]) == 0
        printed = capsys.readouterr().out
        assert "cluster_queue: gpu" in printed and "timeout_minutes: 12" in printed
        assert stacks.validate(yaml.safe_load(printed), "printed") == c

    def test_the_schema_describes_every_new_field(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["schema"]) == 0
        schema = json.loads(capsys.readouterr().out)
        defs = schema["$defs"]
        assert schema["properties"]["queueing"]["description"].startswith("Gang admission through Kueue")
        for model, fields in (
            ("Queueing", ["cluster_queue", "local_queue", "quota", "pods_ready", "managed_namespace_label", "priority_classes"]),
            ("PodsReady", ["enabled", "timeout_minutes"]),
            ("NodeSet", ["labels"]),
            ("Workload", ["priority"]),
        ):
            assert [f for f in fields if not defs[model]["properties"][f].get("description")] == [], model

    def test_a_priority_without_queueing(self) -> None:
        said = refused("tcp", lambda d: fixtures.workload(d, "one").update(priority="urgent"))
        assert "workloads[one].priority" in said and "has no queueing" in said

    def test_a_priority_the_stack_does_not_declare(self) -> None:
        said = refused("tcp", lambda d: queued(d, priority_classes={"low": 1}) and fixtures.workload(d, "one").update(priority="urgent"))
        assert "workloads[one].priority" in said and "'urgent' is not one of queueing.priority_classes (low)" in said

    def test_a_quota_for_a_node_set_that_does_not_exist(self) -> None:
        said = refused("tcp", lambda d: queued(d, quota={"poool": {GPU: "4"}}))
        assert "queueing.quota.poool: 'poool' is not a node set" in said

    def test_node_sets_kueue_cannot_tell_apart(self) -> None:
        said = refused("roce", lambda d: queued(d)["node_sets"][1].update(labels={}))
        assert "node_sets[spare].labels" in said and "tell its nodes apart" in said
        said = refused("roce", lambda d: queued(d)["node_sets"][1].update(labels={"gpu-pool": "main"}))
        assert "node_sets[spare].labels" in said and "(the same as node set 'main')" in said

    def test_one_node_set_needs_no_labels(self) -> None:
        c = fixtures.config("tcp", lambda d: queued(d)["node_sets"][0].update(labels={}))
        assert c.queueing is not None

    def test_labels_that_contradict_the_gpu_node_selector(self) -> None:
        said = refused("roce", lambda d: queued(d)["node_sets"][0].update(labels={"nvidia.com/gpu.present": "false"}))
        assert "node_sets[main].labels['nvidia.com/gpu.present']: nvidia.com/gpu.present=false contradicts gpu_node_selector" in said

    def test_more_node_labels_than_a_flavor_takes(self) -> None:
        said = refused("roce", lambda d: queued(d)["node_sets"][0].update(labels={f"k{i}": "v" for i in range(8)}))
        assert "node_sets[main].labels" in said and "Kueue takes at most 8" in said

    @pytest.mark.parametrize(("field", "resource"), [("allocatable_cpu", "cpu"), ("allocatable_memory", "memory")])
    def test_cpu_or_memory_no_one_states(self, field: str, resource: str) -> None:
        said = refused("tcp", lambda d: queued(d)["node_sets"][0].pop(field))
        assert "queueing.quota" in said and f"states no {field}" in said and f"queueing.quota[pool][{resource}]" in said
        stated = fixtures.config("tcp", lambda d: queued(d, quota={"pool": {resource: "10"}})["node_sets"][0].pop(field))
        assert stated.queue_quota()["pool"][resource] == "10"


# --- the objects --------------------------------------------------------------------------------------------------


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
        r = run(config("roce", quota={"spare": {GPU: "4", "memory": "1Ti"}}))
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
        fractional = config("tcp", edit=lambda d: d["node_sets"][0].update(allocatable_cpu="63500m")).queue_quota()
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
        off = config("roce", managed_namespace_label=False)
        assert [d for d in layout(off) if d.patch and d.object["kind"] == "Namespace"] == []

    def test_the_tiers(self) -> None:
        c = config("roce", priority_classes={"urgent": 1})
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

        c = config("tcp")
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


# --- the preflight ------------------------------------------------------------------------------------------------


def errors(c: ClusterConfig, previous: Data | None = None, rule: str | None = None) -> list[str]:
    found = preflight(c, None, previous, others=[])
    return [f.line() for f in found if f.severity == "error" and (rule is None or f.rule == rule)]


def three_running(d: Data) -> None:
    """dev (2 x 4 GPUs on main) and two more 2-node workloads on main: 6 pods on 4 nodes, which never fit at once."""
    base = fixtures.workload(d, "dev")
    for name in ("dev2", "dev3"):
        d["workloads"].append(
            {
                **copy.deepcopy(base),
                "name": name,
                "tcp_variants": [],
                "ports": [],
                "mounts": [{"volume": "datasets"}],
                "deepspeed_hostfile": None,
            }
        )


class TestCapacity:
    def test_running_workloads_are_not_summed_on_a_queued_cluster(self) -> None:
        assert any("cannot all be scheduled at once" in e for e in errors(fixtures.config("roce", three_running), rule="capacity"))
        assert errors(config("roce", edit=three_running), rule="capacity") == []

    def test_a_workload_larger_than_its_node_sets_quota(self) -> None:
        found = errors(config("roce", quota={"main": {GPU: "4"}}), rule="capacity")
        assert len(found) == 2
        dev = next(f for f in found if "workloads[dev].nodes" in f)
        assert "asks for 2 x 4 nvidia.com/gpu, more than node set 'main' holds in the queue (4)" in dev
        assert "Kueue can never admit it" in dev and "queueing.quota[main][nvidia.com/gpu]" in dev
        assert any("bandwidth_checks[fabric].nodes" in f for f in found)  # a check waits in the same queue

    def test_a_workload_larger_than_the_whole_queue(self) -> None:
        assert errors(config("tcp", quota={"pool": {"memory": "8Gi"}}), rule="capacity") == []  # one asks for exactly that
        found = errors(config("tcp", quota={"pool": {"memory": "4Gi"}}), rule="capacity")
        assert len(found) == 1 and found[0].startswith("error capacity workloads[one].nodes")
        assert "asks for 1 x 8Gi memory, more than the whole queue holds (4Gi" in found[0]

    def test_a_stopped_workload_is_not_checked(self) -> None:
        def stop(d: Data) -> None:
            fixtures.workload(d, "dev").update(state="stopped")
            d["bandwidth_checks"][0]["enabled"] = False

        assert errors(config("roce", quota={"main": {GPU: "4"}}, edit=stop), rule="capacity") == []


class TestQueueEdits:
    def previous(self, edit: Any = None, **queueing: Any) -> Data:
        return stack_outputs(config("roce", edit=edit, **queueing))

    def test_a_running_statefulset_resized(self) -> None:
        found = errors(config("roce", edit=lambda d: fixtures.workload(d, "dev").update(nodes=3)), self.previous(), "queue-edits")
        assert len(found) == 1 and found[0].startswith("error queue-edits workloads[dev].nodes")
        assert "with 2 pods and this change runs it with 3" in found[0] and "stop it first" in found[0]

    def test_stopping_starting_and_resizing_a_stopped_one_are_allowed(self) -> None:
        assert (
            errors(config("roce", edit=lambda d: fixtures.workload(d, "dev").update(state="stopped")), self.previous(), "queue-edits") == []
        )
        stopped = self.previous(edit=lambda d: fixtures.workload(d, "dev").update(state="stopped"))
        assert errors(config("roce", edit=lambda d: fixtures.workload(d, "dev").update(nodes=3)), stopped, "queue-edits") == []

    def test_a_new_run_of_a_job_is_a_new_job(self) -> None:
        now = config(
            "roce", local_queue="other", edit=lambda d: [fixtures.workload(d, n).update(run_number=2, state="running") for n in ("train",)]
        )
        assert not any("job 'train'" in e for e in errors(now, self.previous(), "queue-edits"))

    def test_the_queue_of_running_workloads_changed(self) -> None:
        found = errors(config("roce", local_queue="other"), self.previous(), "queue-edits")
        assert len(found) == 1 and found[0].startswith("error queue-edits queueing.local_queue")
        assert (
            "this edit changes the queue from 'gpu-training' to 'other' of statefulset 'dev' (running), job 'train' (running), "
            "statefulset 'solo' (running): Kueue refuses to change the queue of a running workload"
        ) in found[0]
        assert "stop them first" in found[0] and "even when stopped" not in found[0]

    def test_queueing_turned_on_under_running_workloads(self) -> None:
        found = errors(config("roce"), stack_outputs(fixtures.config("roce")), "queue-edits")
        assert len(found) == 1 and "puts the workloads in queue 'gpu-training' of statefulset 'dev' (running)" in found[0]
        assert "dev-tcp" not in found[0]  # stopped: Kueue takes a queue on a stopped StatefulSet

    def test_queueing_turned_off_and_a_stopped_statefulset(self) -> None:
        found = errors(fixtures.config("roce"), self.previous(), "queue-edits")
        assert len(found) == 1 and "takes the workloads out of their queue" in found[0]
        assert "statefulset 'dev-tcp' (stopped)" in found[0] and "even when stopped" in found[0]

    def test_a_priority_added_to_a_running_workload_or_removed(self) -> None:
        classes = {"urgent": 1}
        found = errors(
            config("roce", priority_classes=classes, edit=lambda d: fixtures.workload(d, "solo").update(priority="urgent")),
            self.previous(priority_classes=classes),
            "queue-edits",
        )
        assert len(found) == 1 and "workloads[solo].priority" in found[0] and "Kueue refuses to add one to a running workload" in found[0]
        before = self.previous(
            priority_classes=classes, edit=lambda d: fixtures.workload(d, "solo").update(priority="urgent", state="stopped")
        )
        found = errors(
            config("roce", priority_classes=classes, edit=lambda d: fixtures.workload(d, "solo").update(state="stopped")),
            before,
            "queue-edits",
        )
        assert len(found) == 1 and "removes priority 'urgent'" in found[0]

    def test_nothing_without_a_committed_render(self) -> None:
        assert (
            errors(config("roce", local_queue="other", edit=lambda d: fixtures.workload(d, "dev").update(nodes=3)), None, "queue-edits")
            == []
        )


# --- stacks diff --------------------------------------------------------------------------------------------------


def tree(c: ClusterConfig) -> dict[str, Any]:
    return {f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in objects(c)}


def said(before: ClusterConfig, after: ClusterConfig, label: str) -> str | None:
    (change,) = [c for c in diff_trees(tree(before), tree(after)) if c.label == label]
    return consequence(change)


class TestDiff:
    @pytest.mark.parametrize(
        "edit",
        [lambda w: w.update(gpus_per_node=1), lambda w: w.update(memory="32Gi"), lambda w: w.update(ports=[{"name": "tb", "port": 6006}])],
    )
    def test_a_change_of_the_pods_shape_replaces_and_requeues(self, edit: Any) -> None:
        text = said(config("roce"), config("roce", edit=lambda d: edit(fixtures.workload(d, "solo"))), "StatefulSet team-b/solo")
        assert text is not None and text.startswith("REPLACES the object: Kueue refuses a change") and "REQUEUED" in text
        plain = said(
            fixtures.config("roce"), fixtures.config("roce", lambda d: edit(fixtures.workload(d, "solo"))), "StatefulSet team-b/solo"
        )
        assert plain is not None and plain.startswith("RESTARTS")

    def test_an_image_change_restarts_in_place(self) -> None:
        text = said(
            config("roce"),
            config("roce", edit=lambda d: fixtures.workload(d, "solo").update(image=fixtures.EXAMPLE)),
            "StatefulSet team-b/solo",
        )
        assert text is not None and text.startswith("RESTARTS")

    def test_a_start_and_a_new_run_wait_in_the_queue(self) -> None:
        text = said(
            config("roce"),
            config("roce", edit=lambda d: d["workloads"][0]["tcp_variants"][0].update(state="running", alongside=True)),
            "StatefulSet team-a/dev-tcp",
        )
        assert text is not None and text.startswith("QUEUED: it waits in the queue")
        changes = diff_trees(tree(config("roce")), tree(config("roce", edit=lambda d: fixtures.workload(d, "train").update(run_number=2))))
        (added,) = [c for c in changes if c.status == "added"]
        assert added.label == "Job team-a/train-r2" and (consequence(added) or "").startswith("QUEUED")


# --- stacks status ------------------------------------------------------------------------------------------------

WAITING = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor roce-main, 4 more needed"


def kueue_workload(owner: Data, *conditions: Data, name: str | None = None) -> Data:
    """A Kueue Workload as Kueue v0.17.0 makes one for a StatefulSet or Job: owned by it, with its conditions."""
    meta = owner["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name or f"{owner['kind'].lower()}-{meta['name']}-3f2a1",
            "namespace": meta["namespace"],
            "ownerReferences": [
                {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": "u1", "controller": True}
            ],
        },
        "spec": {"queueName": "gpu-training"},
        "status": {"conditions": list(conditions)},
    }


def condition(kind: str, state: str, reason: str = "", message: str = "") -> Data:
    return {"type": kind, "status": state, "reason": reason, "message": message}


def pending_summary(*names: tuple[str, str, int]) -> Data:
    """What Kueue's visibility API answers for a LocalQueue's pendingworkloads (v1beta2 PendingWorkloadsSummary)."""
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": n, "namespace": ns},
                "priority": 0,
                "localQueueName": "gpu-training",
                "positionInClusterQueue": p,
                "positionInLocalQueue": p,
            }
            for n, ns, p in names
        ],
    }


def gated(owner: Data, index: int) -> Data:
    p = pod(owner, index, node=None, ready=False, phase="Pending")
    p["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    p["status"]["conditions"].append(
        condition("PodScheduled", "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
    )
    return p


class TestStatus:
    def cluster(self) -> tuple[ClusterConfig, dict[str, Data]]:
        c = config("roce")
        return c, declared(c)

    def test_waiting_in_the_queue_with_its_position_and_why_in_the_stack_files_words(self) -> None:
        c, objs = self.cluster()
        wl = kueue_workload(objs["dev"], condition("QuotaReserved", "False", "Pending", WAITING))
        extra = [
            wl,
            pending_summary(("other", "team-a", 0), (wl["metadata"]["name"], "team-a", 1)),
            gated(objs["dev"], 0),
            gated(objs["dev"], 1),
        ]
        result = status.stack_status(c, "lab", None, [*objs.values(), *extra])
        dev = next(w for w in result.workloads if w.config == "workloads[dev]")
        assert dev.state == "pending" and not dev.ok and dev.ready == 0 and dev.wanted == 2
        assert dev.reasons == ["waiting in queue gpu (position 2): needs 4 more nvidia.com/gpu than the queue has free on node set main"]
        assert dev.queue is not None and (dev.queue.admission, dev.queue.position, dev.queue.workload) == (
            "waiting",
            2,
            wl["metadata"]["name"],
        )
        assert "workloads[dev]: pending, 0/2 pods ready: waiting in queue gpu (position 2): needs 4 more nvidia.com/gpu" in status.report(
            result
        )

    def test_the_position_is_not_made_up_when_it_could_not_be_read(self) -> None:
        c, objs = self.cluster()
        wl = kueue_workload(objs["solo"], condition("QuotaReserved", "False", "Pending", WAITING.replace("roce-main", "roce-spare")))
        solo = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), wl]).workloads if w.config == "workloads[solo]")
        assert solo.reasons == ["waiting in queue gpu: needs 4 more nvidia.com/gpu than the queue has free on node set spare"]
        assert solo.queue is not None and solo.queue.position is None

    def test_a_workload_that_can_never_be_admitted_and_other_kueue_reasons(self) -> None:
        c = config("roce")
        never = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor roce-main, previously " \
            "considered podsets requests (0) + current podset request (8) > maximum capacity (4)"  # fmt: skip
        assert status.queue_reason(c, never).startswith("asks for 8 nvidia.com/gpu, more than node set main holds in the queue (4)")
        assert status.queue_reason(c, "couldn't assign flavors to pod set main: resource example.com/fpga unavailable in ClusterQueue") == (
            "requests example.com/fpga, which the queue does not cover (queueing.quota)"
        )
        assert status.queue_reason(c, "LocalQueue gpu-training doesn't exist") == "Kueue says: LocalQueue gpu-training doesn't exist"

    def test_admitted_runs_are_counted_as_before_with_the_pods_ready_timeout(self) -> None:
        c, objs = self.cluster()
        wl = kueue_workload(objs["dev"], condition("QuotaReserved", "True"), condition("Admitted", "True"))
        pods = [pod(objs["dev"], 0, "node-a"), pod(objs["dev"], 1, "node-b", ready=False)]
        dev = next(
            w
            for w in status.stack_status(c, "lab", None, [*objs.values(), wl, *pods, node("node-a")]).workloads
            if w.config == "workloads[dev]"
        )
        assert dev.queue is not None and dev.queue.admission == "admitted" and dev.ready == 1
        assert dev.reasons[0] == (
            "admitted by queue gpu; Kueue evicts it and queues it again if its pods are not all Ready within 5 minutes (waitForPodsReady)"
        )
        wl["status"]["conditions"].append(condition("PodsReady", "True"))
        pods[1] = pod(objs["dev"], 1, "node-b")
        dev = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), wl, *pods]).workloads if w.config == "workloads[dev]")
        assert dev.ok and dev.state == "running" and dev.reasons == []

    def test_evicted_for_pods_not_ready(self) -> None:
        c, objs = self.cluster()
        wl = kueue_workload(
            objs["dev"],
            condition("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout default/dev"),
            condition("QuotaReserved", "False", "Pending", WAITING),
        )
        dev = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), wl]).workloads if w.config == "workloads[dev]")
        assert dev.reasons[0].startswith("waiting in queue gpu: evicted: its pods were not all Ready within 5 minutes (waitForPodsReady)")
        assert dev.reasons[0].endswith("; needs 4 more nvidia.com/gpu than the queue has free on node set main")

    def test_no_kueue_workload_says_what_to_look_at(self) -> None:
        c, objs = self.cluster()
        train = next(w for w in status.stack_status(c, "lab", None, list(objs.values())).workloads if w.config == "workloads[train]")
        assert train.queue is not None and train.queue.admission == "unknown" and not train.ok
        assert "Kueue made no Workload for its Job" in train.reasons[0] and "kueue.openshift.io/managed=true" in train.reasons[0]

    def test_a_finished_job_is_not_in_the_queue_any_more(self) -> None:
        c, objs = self.cluster()
        job = objs["train-r1"]
        job["status"] = {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}
        wl = kueue_workload(job, condition("Admitted", "False", "NoReservation"), condition("Finished", "True", "Succeeded"))
        train = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), wl]).workloads if w.config == "workloads[train]")
        assert train.state == "succeeded" and train.ok

    def test_the_json_validates_and_a_stack_without_queueing_prints_no_queue(self) -> None:
        schema = json.loads((ROOT / "schemas" / "status.v1.json").read_text(encoding="utf-8"))
        assert schema == status.schema()
        c, objs = self.cluster()
        result = status.stack_status(
            c, "lab", None, [*objs.values(), kueue_workload(objs["dev"], condition("QuotaReserved", "False", "Pending", WAITING))]
        )
        jsonschema.validate(json.loads(result.model_dump_json()), schema)
        plain = fixtures.config("roce")
        printed = json.loads(status.stack_status(plain, "lab", None, list(declared(plain).values())).model_dump_json())
        jsonschema.validate(printed, schema)
        assert all("queue" not in w for w in printed["workloads"])


def test_a_queued_stack_at_the_queueing_bounds() -> None:
    """queueing.quota for MAX_NODE_SETS node sets, MAX_PRIORITY_CLASSES classes, a set's labels at MAX_SELECTOR with the
    flavor's 8: the config takes it, the ClusterQueue stays within Kueue's bounds (64 flavors), and one past is refused."""
    from config.values import MAX_NODE_SETS, MAX_PRIORITY_CLASSES, MAX_SELECTOR

    def edit(d: Data) -> None:
        d["gpu_node_selector"] = {}
        d["node_sets"] = [{"name": f"s{k}", "nodes": [f"n{k}"], "gpus_per_node": 4} for k in range(MAX_NODE_SETS)]
        classes = {f"p{k}": k for k in range(MAX_PRIORITY_CLASSES)}
        queued(d, priority_classes=classes, quota={f"s{k}": {GPU: "4"} for k in range(MAX_NODE_SETS)})
        d["node_sets"][0]["labels"] = {f"example.com/l{k}": "x" for k in range(MAX_SELECTOR)}

    c = fixtures.config("tcp", edit)
    (cq,) = kinds(objects(c), "ClusterQueue")
    assert len(cq["spec"]["resourceGroups"][0]["flavors"]) == MAX_NODE_SETS == 64
    assert errors(c, rule="capacity") == []
    said = refused("tcp", lambda d: edit(d) or d["queueing"]["priority_classes"].update(extra=1))
    assert f"queueing.priority_classes: {MAX_PRIORITY_CLASSES + 1} entries, at most {MAX_PRIORITY_CLASSES}" in said
