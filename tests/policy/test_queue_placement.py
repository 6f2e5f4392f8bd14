"""The preflight on a queued cluster against the nodes, not just the quota (rule `capacity`, docs/shared-clusters.md
"Admitted whole on the nodes"): without Topology Aware Scheduling, Kueue may admit together any runs whose charges fit
a node set's quota, so the preflight refuses, at the queue's line, a quota under which some of them cannot be held by
the set's nodes, and names fixes that it has checked; with it, a multi-node workload two of whose pods fit one node
(TAS reads no pod anti-affinity) is refused. The nodes count GPUs, CPU and memory where stated, and VFs where the
set's node policies state them. Configs are the tests' own (tests/fixtures.py)."""

from __future__ import annotations

import copy
from itertools import combinations
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stacks
from bench import scale
from cli.checking import preflight
from config.kube import GPU
from config.stack import ClusterConfig
from policy import placement
from policy.core import Finding
from policy.placement import UNBOUNDED, Admission, Budget, Group, place
from policy.rules import scheduling
from tests import fixtures

Data = dict[str, Any]


def qb(sizes: dict[str, tuple[int, int]], tas: bool = False, quota: dict[str, str] | None = None, **queueing: Any) -> Data:
    """The tcp fixture queued, one node set `qb` of 3 x 8 GPUs (CPU and memory stated), a workload per `sizes` entry
    (name: (pods, GPUs per pod)), all running."""
    d = fixtures.data("tcp")
    d["queueing"] = {"cluster_queue": "gpu", "topology_aware": tas, **queueing}
    if quota:
        d["queueing"]["quota"] = {"qb": quota}
    d["node_sets"] = [{"name": "qb", "count": 3, "gpus_per_node": 8, "allocatable_cpu": "64", "allocatable_memory": "512Gi",
                       "labels": {"gpu-pool": "qb"}}]  # fmt: skip
    base = fixtures.workload(d, "one")
    d["workloads"] = [{**copy.deepcopy(base), "name": n, "nodes": p, "gpus_per_node": g} for n, (p, g) in sizes.items()]
    return d


ISSUE = {"gamma": (2, 4), "delta": (2, 8)}


def findings(d: Data, severity: str = "error") -> list[Finding]:
    c = stacks.validate(d, "test")
    return [f for f in preflight(c, None, None, others=[]) if f.rule == "capacity" and f.severity in severity.split("|")]


def lines(d: Data, severity: str = "error") -> list[str]:
    return [f.line() for f in findings(d, severity)]


class TestWithoutTopologyAwareScheduling:
    def test_the_issues_case_is_refused_at_the_queues_line_with_the_fixes(self) -> None:
        (found,) = findings(qb(ISSUE))
        assert found.object == "ClusterQueue gpu" and found.where == "queueing"
        text = found.line()
        assert "Kueue may admit gamma (2 x 4 GPUs, 4 CPUs, 8Gi) and delta (2 x 8 GPUs, 4 CPUs, 8Gi) at once" in text
        assert f"(24 of the 24 {GPU})" in text and "(3 x 8 GPUs, 64 CPUs, 512Gi) cannot hold their pods at once" in text
        assert "the run admitted last cannot start" in text and "waitForPodsReady timeout (5 minutes)" in text
        assert f"Fix: lower queueing.quota[qb][{GPU}] to 16, or set queueing.quota[qb][pods] to 3" in text
        assert "queueing.topology_aware: true" in text

    def test_a_stated_quota_is_named_where_the_file_writes_it(self) -> None:
        (found,) = findings(qb(ISSUE, quota={GPU: "24"}))
        assert found.where == "queueing.quota.qb"

    @pytest.mark.parametrize("quota", [{GPU: "16"}, {"pods": "3"}, {GPU: "23"}])
    def test_each_fix_it_names_is_one_the_preflight_accepts(self, quota: dict[str, str]) -> None:
        assert lines(qb(ISSUE, quota=quota)) == []

    def test_runs_the_nodes_hold_together_are_not_refused(self) -> None:
        assert lines(qb({"gamma": (2, 4), "delta": (1, 8), "eps": (2, 4)})) == []  # 6 pods fit: 8 | 4+4 | 4+4 on 3 nodes

    def test_a_combination_the_quota_does_not_admit_is_not_refused(self) -> None:
        """delta and zeta (32 GPUs) never fit the nodes together, but the quota (24) never admits them together either."""
        assert lines(qb({"delta": (2, 8), "zeta": (2, 8)})) == []

    def test_the_combination_named_is_the_runs_it_cannot_do_without(self) -> None:
        """The quota (30) admits all three at once; the nodes hold solo beside either of the others, never alpha (one
        node each, 6 of its 8 GPUs) beside beta (4 on each of two nodes): the finding names those two, not solo."""
        (found,) = lines(qb({"alpha": (3, 6), "beta": (2, 4), "solo": (1, 2)}, quota={GPU: "30"}))
        assert "Kueue may admit alpha (3 x 6 GPUs, 4 CPUs, 8Gi) and beta (2 x 4 GPUs, 4 CPUs, 8Gi) at once" in found
        assert "solo" not in found.split(" Fix: ")[0]
        assert f"(26 of the 30 {GPU})" in found and f"lower queueing.quota[qb][{GPU}] to 20" in found

    def test_a_stopped_run_is_not_counted(self) -> None:
        d = qb(ISSUE)
        fixtures.workload(d, "delta")["state"] = "stopped"
        assert lines(d) == []

    def test_a_pods_quota_smaller_than_a_run_admits_it_never(self) -> None:
        (found,) = lines(qb({"big": (3, 8)}, quota={"pods": "2"}))
        assert found.startswith("error capacity workloads[big].nodes: it asks for 3 x 1 pods, more than the whole queue holds (2")
        assert "Kueue can never admit it" in found

    def test_pods_quota_off_waitforpodsready_says_it_is_never_evicted(self) -> None:
        (found,) = lines(qb(ISSUE, pods_ready={"enabled": False}))
        assert "for ever: waitForPodsReady is off (queueing.pods_ready), so Kueue never evicts it" in found

    def test_a_search_the_budget_cuts_short_says_so_and_what_it_proved(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """One budget of steps for the whole check: where it runs out, a warning says the search was cut short, which runs
        counting proved never fail, and how far it got with the others; the fix it names is one counting proves."""
        monkeypatch.setattr(scheduling, "QUEUE_BUDGET", 1)
        (found,) = findings(qb({**ISSUE, "tiny": (1, 1)}), "warning")
        assert found.object == "ClusterQueue gpu" and found.where == "queueing"
        assert "was cut short: the check's budget of 1 steps ran out before it decided" in found.message
        assert "It proved that tiny can always find room beside what the quota admits with them" in found.message
        assert "of the combinations of the other 2 (gamma, delta), the ones it placed (0) fit" in found.message
        assert found.fix.startswith("set queueing.quota[qb][pods] to 3 (Kueue then admits at most")
        assert lines(qb({**ISSUE, "tiny": (1, 1)})) == []  # no error it has not proved

    def test_the_placement_searches_are_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Twelve small runs on one set: the placement searches the check makes stay few (the combinations nothing more
        can join, once each), not one per combination."""
        calls = []
        real = placement.place

        def counting(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(placement, "place", counting)
        sizes = {f"w{i}": (1, 2) for i in range(12)}  # 24 GPUs, 12 pods: they all fit (4 per node)
        assert lines(qb(sizes)) == []
        assert len(calls) <= 1 + len(sizes) + 1, len(calls)


@pytest.mark.parametrize("varied", [False, True], ids=["the shapes of bench/scale.py", "varied shapes"])
@pytest.mark.parametrize("n", [10, 50, 200])
def test_a_queued_stack_is_decided_in_steps_near_linear_in_its_runs(n: int, varied: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: each combination the quota admitted got its own placement search (58 s of CPU for 26 workloads). Now
    `make bench`'s queued stacks (all running on 16 nodes, the quota their total) are decided within 10 steps per run,
    the combination that fails found and shrunk; with the pods quota the fix names, counting decides with no step."""
    monkeypatch.setattr(scheduling, "QUEUE_BUDGET", 10 * n)
    said = findings(scale.queued(n, varied=varied), "error|warning")
    assert [f.severity for f in said] == (["error"] if n > 10 else []), [f.line() for f in said]
    monkeypatch.setattr(scheduling, "QUEUE_BUDGET", 0)
    assert findings(scale.queued(n, varied=varied, pods_quota=True), "warning") == []


@st.composite
def queues(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, int], list[Group], list[dict[str, int]], dict[str, int]]:
    """A node set (named nodes, or a count), runs on it (pods, GPUs, CPU, VF sets; now and then pinned to some named
    nodes) with what they charge, and a quota of GPUs, and now and then of pods, CPU and an SR-IOV resource."""
    size, gpus = draw(st.integers(1, 4)), draw(st.sampled_from([2, 4, 8]))
    cpu, vfs = draw(st.sampled_from([UNBOUNDED, 8000, 16000])), draw(st.sampled_from([UNBOUNDED, 1, 2, 3]))
    named = draw(st.booleans())
    nodes = {f"n{i}": (gpus, cpu, UNBOUNDED, vfs) for i in range(size)} if named else {"set#": (gpus, cpu, UNBOUNDED, vfs)}
    counts = {} if named else {"set#": size}
    groups, charges = [], []
    for j in range(draw(st.integers(2, 6))):
        pods, per_pod, cores, vf = (
            draw(st.integers(1, size)),
            draw(st.integers(1, gpus)),
            draw(st.sampled_from([0, 2000, 8000])),
            draw(st.integers(0, 1)),
        )
        pins = tuple(nodes) if not named or draw(st.booleans()) else tuple(draw(st.permutations(list(nodes)))[: max(pods, size - 1)])
        groups.append(Group(f"g{j}", pods, per_pod, pins, True, min(cores, cpu), 0, vf if vfs < UNBOUNDED else 0))
        charges.append({GPU: pods * per_pod, "cpu": pods * min(cores, cpu), "pods": pods, "openshift.io/vf": pods * groups[-1].vfs})
    limit = {GPU: draw(st.integers(max(c[GPU] for c in charges), size * gpus + 4))}
    for resource, most in (("pods", 2 * size), ("cpu", 3 * size * 8000), ("openshift.io/vf", 2 * size)):
        least = max(c[resource] for c in charges)
        if draw(st.booleans()) and least <= most:
            limit[resource] = draw(st.integers(least, most))
    return nodes, counts, groups, charges, limit


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(queues())
def test_what_the_queue_admits_together_agrees_with_trying_every_combination(
    queue: tuple[dict[str, Any], dict[str, int], list[Group], list[dict[str, int]], dict[str, int]],
) -> None:
    """The search (policy/placement.py Admission) against every combination of runs the quota admits placed: a failing
    combination exists exactly where it finds one, the one it names is admitted and fails, and a run counting proved to
    find room never turns a combination that fits into one that fails."""
    nodes, counts, groups, charges, limit = queue
    if not all(place(nodes, [g], counts=counts).placed for g in groups):
        return  # a run that fits no node alone is node-fit's error: the rule leaves it out
    fits = {
        S: place(nodes, [groups[i] for i in S], counts=counts).placed
        for k in range(len(groups) + 1)
        for S in combinations(range(len(groups)), k)
    }
    admitted = [S for S in fits if all(sum(charges[i][r] for i in S) <= q for r, q in limit.items())]
    found = Admission(nodes, groups, charges, Budget(10**6), counts).check(limit)
    assert found.decided and bool(found.bad) == any(not fits[S] for S in admitted)
    assert not found.bad or (found.bad in admitted and not fits[found.bad])
    for j in found.room:
        assert all(fits[S] for S in admitted if j in S and fits[tuple(i for i in S if i != j)])


def test_every_search_of_a_check_draws_on_one_budget() -> None:
    """A part of a budget stops where it is spent or where the whole is: two searches of 8 steps do not fit in 10."""
    whole = Budget(10)
    groups = [Group(f"g{i}", 1, 1, ("n#",), True) for i in range(8)]
    assert place({"n#": 8}, groups, whole.part(100), counts={"n#": 8}).placed and whole.spent == 8
    assert place({"n#": 8}, groups, whole.part(100), counts={"n#": 8}).exhausted and whole.left < 0


class TestWithTopologyAwareScheduling:
    def test_a_workload_two_of_whose_pods_fit_one_node_is_refused(self) -> None:
        (found,) = findings(qb(ISSUE, tas=True))
        text = found.line()
        assert text.startswith("error capacity workloads[gamma].gpus_per_node")
        assert "two of gamma's pods (4 GPUs, 4 CPUs, 8Gi each) fit one node of qb (8 GPUs, 64 CPUs, 512Gi)" in text
        assert "Fix: ask for more than half a node per pod (gpus_per_node above 4 on qb" in text

    def test_pods_that_take_more_than_half_a_node_are_left_to_it(self) -> None:
        """5 + 7 GPUs: one pod per node by what they request, and TAS checks the nodes before it admits: no combination
        check (its quota of 24 admits both, which need 4 nodes: TAS admits one at a time)."""
        assert lines(qb({"gamma": (2, 5), "delta": (2, 7)}, tas=True)) == []

    def test_cpu_or_memory_past_half_a_node_is_one_pod_per_node_too(self) -> None:
        d = qb(ISSUE, tas=True)
        fixtures.workload(d, "gamma").update(cpu="40", cpu_limit="40")
        assert lines(d) == []

    def test_a_single_pod_run_is_left_to_it(self) -> None:
        assert lines(qb({"solo": (1, 4), "duo": (1, 4)}, tas=True)) == []


def spare_with_vfs(num_vfs: int, queued: bool = False) -> Data:
    """The roce fixture, its `spare` set (3 named nodes x 4 GPUs) given node policies that make `num_vfs` VFs per PF of
    each attachment's resource, and four RDMA pods on it: train 3 x 2 GPUs and solo 1 x 2 (8 of its 12 GPUs)."""
    d = fixtures.data("roce")
    spare = d["node_sets"][1]
    spare.update(
        node_reboot_reason="the tests' own nodes",
        node_policies=[{"resource": f"openshift.io/port{i}rdma", "pf_names": [f"ens{i}f0"], "num_vfs": num_vfs} for i in (1, 2)],
    )
    fixtures.workload(d, "train").update(nodes=3, gpus_per_node=2)
    fixtures.workload(d, "solo").update(transport="rdma")
    if queued:
        d["queueing"] = {"cluster_queue": "gpu"}
        for s in d["node_sets"]:
            s.update(allocatable_cpu="64", allocatable_memory="512Gi", labels={"gpu-pool": s["name"]})
    return d


class TestVirtualFunctions:
    def test_a_node_policys_vfs_are_what_a_node_offers(self) -> None:
        c: ClusterConfig = stacks.validate(spare_with_vfs(3), "vfs")
        assert c.node_sets[1].vfs_per_node == {"openshift.io/port1rdma": 3, "openshift.io/port2rdma": 3}
        assert c.node_sets[0].vfs_per_node == {}

    def test_the_running_rdma_pods_need_a_vf_of_each_port_on_their_node(self) -> None:
        """One VF per port on each of spare's 3 nodes, 4 RDMA pods: the GPUs hold them (8 of 12), the VFs do not."""
        (found,) = [f for f in lines(spare_with_vfs(1)) if "cannot all be scheduled at once" in f]
        assert (
            "train-r1: 3 x 2 GPUs, 32 CPUs, 64Gi, 1 VF per attachment" in found and "spare: 3 node(s) x 4 GPUs, VFs for 1 RDMA pod" in found
        )
        assert [f for f in lines(spare_with_vfs(2)) if "cannot all be scheduled at once" in f] == []

    def test_on_a_queued_cluster_the_vfs_bound_what_the_quota_admits_together(self) -> None:
        (found,) = [f for f in lines(spare_with_vfs(1, queued=True)) if "Kueue may admit" in f]
        assert "Kueue may admit train (3 x 2 GPUs, 32 CPUs, 64Gi, 1 VF per attachment) and solo" in found, found
        assert "(3 x 4 GPUs, 64 CPUs, 512Gi, VFs for 1 RDMA pod) cannot hold their pods at once" in found
        assert [f for f in lines(spare_with_vfs(2, queued=True)) if "Kueue may admit" in f] == []
