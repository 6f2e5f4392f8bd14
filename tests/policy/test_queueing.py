"""The preflight on a queued stack: each node set's ResourceFlavor and quota are ones Kueue accepts and charges right,
capacity is held against the queue's quota (running workloads are not summed: Kueue admits them in turn), and the edits
Kueue's webhooks refuse of an admitted workload are errors before `up`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cli.checking import preflight
from components.outputs import stack_outputs
from config.kube import GPU
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures
from tests.fixtures import Data, queued, queued_config


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


def flavor_errors(fixture: str, edit: Any) -> list[Finding]:
    """The errors of the edited fixture, each of rule queue-flavors (one cause, one finding: capacity stays quiet)."""
    found = [f for f in preflight(fixtures.config(fixture, edit), None, None, others=[]) if f.severity == "error"]
    assert {f.rule for f in found} == {"queue-flavors"}, [f.line() for f in found]
    return found


class TestFlavors:
    def test_node_sets_kueue_cannot_tell_apart(self) -> None:
        (f,) = flavor_errors("roce", lambda d: queued(d)["node_sets"][1].update(labels={}))
        assert f.where == "node_sets[spare].labels" and "tell its nodes apart" in f.message
        (f,) = flavor_errors("roce", lambda d: queued(d)["node_sets"][1].update(labels={"gpu-pool": "main"}))
        assert f.where == "node_sets[spare].labels" and "(the same as node set 'main')" in f.message

    def test_labels_that_contradict_the_gpu_node_selector(self) -> None:
        (f,) = flavor_errors("roce", lambda d: queued(d)["node_sets"][0].update(labels={"nvidia.com/gpu.present": "false"}))
        assert f.where == "node_sets[main].labels['nvidia.com/gpu.present']"
        assert f.message.startswith("nvidia.com/gpu.present=false contradicts gpu_node_selector")

    def test_more_node_labels_than_a_flavor_takes(self) -> None:
        (f,) = flavor_errors("roce", lambda d: queued(d)["node_sets"][0].update(labels={f"k{i}": "v" for i in range(8)}))
        assert f.where == "node_sets[main].labels" and "Kueue takes at most 8" in f.message

    def test_topology_aware_needs_a_label(self) -> None:
        def bare(d: Data) -> None:
            queued(d, topology_aware=True)["node_sets"][0].update(labels={})
            d["gpu_node_selector"] = {}

        (f,) = flavor_errors("tcp", bare)
        assert f.where == "node_sets[pool].labels" and "at least one node label" in f.message

    @pytest.mark.parametrize(("field", "resource"), [("allocatable_cpu", "cpu"), ("allocatable_memory", "memory")])
    def test_cpu_or_memory_no_one_states(self, field: str, resource: str) -> None:
        (f,) = flavor_errors("tcp", lambda d: queued(d)["node_sets"][0].pop(field))
        assert f.where == "queueing.quota" and f"states no {field}" in f.message and f"queueing.quota[pool][{resource}]" in f.fix
        stated = fixtures.config("tcp", lambda d: queued(d, quota={"pool": {resource: "10"}})["node_sets"][0].pop(field))
        assert stated.queue_quota()["pool"][resource] == "10"

    def test_a_set_without_cpu_and_memory_hears_of_both_in_one_error(self) -> None:
        (f,) = flavor_errors("tcp", lambda d: d.update(queueing={"cluster_queue": "gpu", "quota": {"pool": {"nvidia.com/gpu": "8"}}}))
        assert "states no allocatable_cpu and allocatable_memory" in f.message
        assert "queueing.quota[pool][cpu] and queueing.quota[pool][memory]" in f.fix
        assert f.where == "queueing.quota.pool"  # at the set's own quota entry

    def test_a_set_that_states_one_of_them_hears_of_the_other_only(self) -> None:
        (f,) = flavor_errors("tcp", lambda d: d.update(queueing={"cluster_queue": "gpu", "quota": {"pool": {"cpu": "16"}}}))
        assert "states no allocatable_memory, so the ClusterQueue has no memory quota" in f.message
        assert "allocatable_cpu" not in f.message + f.fix


class TestCapacity:
    def test_running_workloads_are_not_summed_on_a_queued_cluster(self) -> None:
        assert any("cannot all be scheduled at once" in e for e in errors(fixtures.config("roce", three_running), rule="capacity"))
        assert errors(queued_config("roce", edit=three_running), rule="capacity") == []

    def test_a_workload_larger_than_its_node_sets_quota(self) -> None:
        found = errors(queued_config("roce", quota={"main": {GPU: "4"}}), rule="capacity")
        assert len(found) == 2
        dev = next(f for f in found if "workloads[dev].nodes" in f)
        assert "asks for 2 x 4 nvidia.com/gpu, more than node set 'main' holds in the queue (4)" in dev
        assert "Kueue can never admit it" in dev and "queueing.quota[main][nvidia.com/gpu]" in dev
        assert any("bandwidth_checks[fabric].nodes" in f for f in found)  # a check waits in the same queue

    def test_a_workload_larger_than_the_whole_queue(self) -> None:
        assert errors(queued_config("tcp", quota={"pool": {"memory": "8Gi"}}), rule="capacity") == []  # one asks for exactly that
        found = errors(queued_config("tcp", quota={"pool": {"memory": "4Gi"}}), rule="capacity")
        assert len(found) == 1 and found[0].startswith("error capacity workloads[one].nodes")
        assert "asks for 1 x 8Gi memory, more than the whole queue holds (4Gi" in found[0]

    def test_a_stopped_workload_is_not_checked(self) -> None:
        def stop(d: Data) -> None:
            fixtures.workload(d, "dev").update(state="stopped")
            d["bandwidth_checks"][0]["enabled"] = False

        assert errors(queued_config("roce", quota={"main": {GPU: "4"}}, edit=stop), rule="capacity") == []


class TestQueueEdits:
    def previous(self, edit: Any = None, **queueing: Any) -> Data:
        return stack_outputs(queued_config("roce", edit=edit, **queueing))

    def test_a_running_statefulset_resized(self) -> None:
        found = errors(queued_config("roce", edit=lambda d: fixtures.workload(d, "dev").update(nodes=3)), self.previous(), "queue-edits")
        assert len(found) == 1 and found[0].startswith("error queue-edits workloads[dev].nodes")
        assert "with 2 pods and this change runs it with 3" in found[0] and "stop it first" in found[0]

    def test_stopping_starting_and_resizing_a_stopped_one_are_allowed(self) -> None:
        assert (
            errors(
                queued_config("roce", edit=lambda d: fixtures.workload(d, "dev").update(state="stopped")), self.previous(), "queue-edits"
            )
            == []
        )
        stopped = self.previous(edit=lambda d: fixtures.workload(d, "dev").update(state="stopped"))
        assert errors(queued_config("roce", edit=lambda d: fixtures.workload(d, "dev").update(nodes=3)), stopped, "queue-edits") == []

    def test_a_new_run_of_a_job_is_a_new_job(self) -> None:
        now = queued_config(
            "roce", local_queue="other", edit=lambda d: [fixtures.workload(d, n).update(run_number=2, state="running") for n in ("train",)]
        )
        assert not any("job 'train'" in e for e in errors(now, self.previous(), "queue-edits"))

    def test_the_queue_of_running_workloads_changed(self) -> None:
        found = errors(queued_config("roce", local_queue="other"), self.previous(), "queue-edits")
        assert len(found) == 1 and found[0].startswith("error queue-edits queueing.local_queue")
        assert (
            "this edit changes the queue from 'gpu-training' to 'other' of statefulset 'dev' (running), job 'train' (running), "
            "statefulset 'solo' (running): Kueue refuses to change the queue of a running workload"
        ) in found[0]
        assert "stop them first" in found[0] and "even when stopped" not in found[0]

    def test_queueing_turned_on_under_running_workloads(self) -> None:
        found = errors(queued_config("roce"), stack_outputs(fixtures.config("roce")), "queue-edits")
        assert len(found) == 1 and "puts the workloads in queue 'gpu-training' of statefulset 'dev' (running)" in found[0]
        assert "dev-tcp" not in found[0]  # stopped: Kueue takes a queue on a stopped StatefulSet

    def test_queueing_turned_on_in_the_edit_that_stops_them(self) -> None:
        """docs/shared-clusters.md followed without committing the stop: the file stops the workload, the committed render
        (what the cluster runs, as far as the repository knows) runs it. Said so, never `(running)` of a stopped one."""

        def stop(d: Data) -> None:
            for w in d["workloads"]:
                w["state"] = "stopped"

        found = errors(queued_config("roce", edit=stop), stack_outputs(fixtures.config("roce")), "queue-edits")
        assert len(found) == 1 and "statefulset 'dev' (running in the committed render)" in found[0]
        assert "(running)" not in found[0] and "deploy the stop first" in found[0] and "commit" in found[0]

    def test_queueing_turned_off_and_a_stopped_statefulset(self) -> None:
        found = errors(fixtures.config("roce"), self.previous(), "queue-edits")
        assert len(found) == 1 and "takes the workloads out of their queue" in found[0]
        assert "statefulset 'dev-tcp' (stopped)" in found[0] and "even when stopped" in found[0]

    def test_a_priority_added_to_a_running_workload_or_removed(self) -> None:
        classes = {"urgent": 1}
        found = errors(
            queued_config("roce", priority_classes=classes, edit=lambda d: fixtures.workload(d, "solo").update(priority="urgent")),
            self.previous(priority_classes=classes),
            "queue-edits",
        )
        assert len(found) == 1 and "workloads[solo].priority" in found[0] and "Kueue refuses to add one to a running workload" in found[0]
        before = self.previous(
            priority_classes=classes, edit=lambda d: fixtures.workload(d, "solo").update(priority="urgent", state="stopped")
        )
        found = errors(
            queued_config("roce", priority_classes=classes, edit=lambda d: fixtures.workload(d, "solo").update(state="stopped")),
            before,
            "queue-edits",
        )
        assert len(found) == 1 and "removes priority 'urgent'" in found[0]

    def test_nothing_without_a_committed_render(self) -> None:
        assert (
            errors(
                queued_config("roce", local_queue="other", edit=lambda d: fixtures.workload(d, "dev").update(nodes=3)), None, "queue-edits"
            )
            == []
        )
