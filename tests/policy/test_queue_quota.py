"""queue-quota: on a queued cluster, a quota the stack states lies between what a workload of its node set needs and what
the set holds, each mistake a warning at the quota's own line (a YAML file's key here; a module's dict key in
tests/config/test_field_lines.py)."""

from __future__ import annotations

from typing import Any

import pytest

from cli.checking import preflight
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures

Data = dict[str, Any]


def queued(quota: dict[str, str], edit: Any = None) -> ClusterConfig:
    """The tcp fixture (one node set `pool` of 2 nodes x 4 GPUs; `one` running, `two` stopped, each 1 pod of 4 GPUs,
    4 and 32 CPUs, 8Gi) queued, the set stating 64 CPUs and 512Gi a node, with this quota for `pool`."""

    def edit_all(d: Data) -> None:
        d["queueing"] = {"cluster_queue": "gpu", "quota": {"pool": quota}}
        d["node_sets"][0].update(allocatable_cpu="64", allocatable_memory="512Gi")
        if edit is not None:
            edit(d)

    return fixtures.config("tcp", edit_all)


def quota_findings(config: ClusterConfig) -> list[Finding]:
    return [f for f in preflight(config, None, None, others=[]) if f.rule == "queue-quota"]


def test_a_quota_under_a_stopped_workload_s_need_warns_at_the_quota() -> None:
    (f,) = quota_findings(queued({"nvidia.com/gpu": "2"}))
    assert f.severity == "warning" and f.where == "queueing.quota.pool['nvidia.com/gpu']"
    assert "is 2, less than what stopped workload(s) of the queue need: two (1 x 4)" in f.message
    assert "wait in the queue for ever" in f.message and "raise it to 4" in f.fix
    assert f.value == "nvidia.com/gpu=2"  # an acceptance names the quota it accepts


def test_the_running_workload_that_does_not_fit_is_the_capacity_rule_s_error_not_a_second_finding() -> None:
    findings = preflight(queued({"nvidia.com/gpu": "2"}), None, None, others=[])
    capacity = [f for f in findings if f.rule == "capacity" and f.severity == "error"]
    assert [f.where for f in capacity] == ["workloads[one].nodes"]
    assert all("one (" not in f.message for f in quota_findings(queued({"nvidia.com/gpu": "2"})))


def test_every_stopped_workload_short_of_one_quota_is_listed_in_one_finding() -> None:
    def third(d: Data) -> None:
        d["workloads"].append({**fixtures.workload(d, "two"), "name": "three", "cpu": "40"})

    (f,) = quota_findings(queued({"cpu": "30"}, third))
    assert "two (1 x 32), three (1 x 40)" in f.message and "raise it to 40" in f.fix


@pytest.mark.parametrize(
    ("resource", "stated", "holds"),
    [("nvidia.com/gpu", "9", "2 node(s) x 4 = 8"), ("cpu", "129", "2 node(s) x 64 = 128"), ("memory", "2Ti", "2 node(s) x 512Gi = 1Ti")],
)
def test_a_quota_over_what_the_set_holds_warns(resource: str, stated: str, holds: str) -> None:
    (f,) = quota_findings(queued({resource: stated}))
    assert f.where == (f"queueing.quota.pool['{resource}']" if "." in resource else f"queueing.quota.pool.{resource}")
    assert f"is {stated}, more than the node set holds ({holds})" in f.message and "stay Pending" in f.message


@pytest.mark.parametrize("quota", [{"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "4", "cpu": "32", "memory": "8Gi"}, {}])
def test_a_quota_between_the_largest_need_and_the_set_s_total_is_quiet(quota: dict[str, str]) -> None:
    assert quota_findings(queued(quota)) == []


def test_without_queueing_the_rule_says_nothing() -> None:
    assert [f for f in preflight(fixtures.config("tcp"), None, None, others=[]) if f.rule == "queue-quota"] == []


def test_a_quota_of_a_set_whose_cpu_is_unknown_is_not_judged_against_the_set() -> None:
    def unknown(d: Data) -> None:
        d["node_sets"][0].pop("allocatable_cpu")

    assert quota_findings(queued({"cpu": "100000"}, unknown)) == []
