"""`queueing` in the config (docs/shared-clusters.md): off by default, its defaults, its YAML form, its schema, and its
mistakes refused in the stack file's words (a priority without queueing or undeclared, a quota for a node set that does
not exist); a queued stack at the queueing bounds. (What Kueue would refuse of a valid one is rule queue-flavors':
tests/policy/test_queueing.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import stacks
from cli.checking import preflight
from cli.main import main
from components.outputs import stack_outputs
from components.program import objects
from config.kube import GPU, QUEUE_NAME
from tests import fixtures
from tests.fixtures import Data, queued, queued_config
from tests.helpers import refused


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
        q = queued_config("tcp").queueing
        assert q is not None
        assert (q.local_queue, q.managed_namespace_label, q.pods_ready.enabled, q.pods_ready.timeout_minutes) == (
            "gpu-training",
            True,
            True,
            5,
        )

    def test_the_yaml_form_reads_back_to_the_same_config(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        c = queued_config(
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
        assert main(["schema", "--json"]) == 0
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

    def test_a_quota_for_a_node_set_that_does_not_exist_lists_the_sets(self) -> None:
        said = refused("roce", lambda d: queued(d, quota={"mian": {GPU: "4"}}))
        assert "queueing.quota.mian: 'mian' is not a node set: the quota is per node set (node_sets[].name: main, spare)" in said

    @pytest.mark.parametrize(
        "name,resource,listed",
        [
            ("roce", "nvidia.com/gpus", f"cpu, memory, {GPU}, pods, openshift.io/port1rdma, openshift.io/port2rdma"),
            ("tcp", "openshift.io/port1rdma", f"cpu, memory, {GPU}, pods"),  # no fabric: no VF resource
            ("tcp", "ephemeral-storage", f"cpu, memory, {GPU}, pods"),
        ],
    )
    def test_a_quota_for_a_resource_no_pod_requests_is_refused_with_the_list(self, name: str, resource: str, listed: str) -> None:
        """Issue 43: `nvidia.com/gpus` passed, and the ClusterQueue covered a resource nothing requests while the GPUs fell
        back to the node set's total."""
        node_set = fixtures.data(name)["node_sets"][0]["name"]
        said = refused(name, lambda d: queued(d, quota={node_set: {resource: "4"}}))
        key = f"['{resource}']" if "." in resource else f".{resource}"  # as the config path shows a key with dots
        assert f"queueing.quota.{node_set}{key}: '{resource}' is no resource the stack's pods request" in said
        assert f"A quota names one of {listed} (pods: Kueue counts them)" in said

    def test_a_quota_for_each_resource_the_pods_request_is_taken(self) -> None:
        resources = {GPU: "8", "cpu": "64", "memory": "1Ti", "pods": "4", "openshift.io/port1rdma": "8", "openshift.io/port2rdma": "8"}
        c = queued_config("roce", quota={"main": resources})
        (cq,) = [o for o in objects(c) if o["kind"] == "ClusterQueue"]
        assert set(cq["spec"]["resourceGroups"][0]["coveredResources"]) == set(resources)

    def test_one_node_set_needs_no_labels(self) -> None:
        c = fixtures.config("tcp", lambda d: queued(d)["node_sets"][0].update(labels={}))
        assert c.queueing is not None


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
    (cq,) = [o for o in objects(c) if o["kind"] == "ClusterQueue"]
    assert len(cq["spec"]["resourceGroups"][0]["flavors"]) == MAX_NODE_SETS == 64
    assert [f.line() for f in preflight(c, None, None, others=[]) if f.severity == "error" and f.rule == "capacity"] == []
    said = refused("tcp", lambda d: edit(d) or d["queueing"]["priority_classes"].update(extra=1))
    assert f"queueing.priority_classes: {MAX_PRIORITY_CLASSES + 1} entries, at most {MAX_PRIORITY_CLASSES}" in said
