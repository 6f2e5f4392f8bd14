"""The benchmarks (`make bench`, bench/): each runs what it says it measures, checked here without timing anything."""

from __future__ import annotations

import pytest

from bench import scale
from config.values import MAX_CLUSTER_NODES, MAX_POD_TEMPLATES
from policy.placement import Group, place


def test_curve_rows_cover_the_sizes_the_bench_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's curve runs each size it names (checked here without timing it: check and render stubbed)."""
    seen: list[str] = []
    monkeypatch.setattr(scale, "check", lambda stack: (seen.append(stack["name"]), (0.0, 0.0, 1))[1])
    monkeypatch.setattr(scale, "render", lambda stack: 0.0)
    rows = scale.curve(repeats=1)
    sizes = {(row[1], row[2]) for row in rows}
    assert {n for _, n in sizes} >= {16, 512, 4096}
    assert any(name.startswith("scale-200-4096") for name in seen) and len(rows) == len(seen) == 12
    assert (MAX_POD_TEMPLATES, MAX_CLUSTER_NODES) in sizes


def test_the_placement_rows_count_the_steps_of_each_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's placement rows give each case its groups and the steps the search took: the least budget it decides
    within. Checked here without timing anything, on a case small enough to be cheap: 20 workloads over 16 nodes in four
    pinned sets, which fit."""
    nodes = {f"n{i}": 8 for i in range(16)}
    sets = [tuple(f"n{i}" for i in range(k * 4, k * 4 + 4)) for k in range(4)]
    shapes = [(4, 2), (2, 4), (1, 5), (2, 2), (1, 3)]  # (pods, GPUs per pod)
    groups = [Group(f"w{j}", *shapes[j % 5], sets[j % 4], spread=True) for j in range(16)]
    groups += [Group(f"u{j}", 1, 1, tuple(nodes), spread=True) for j in range(4)]
    monkeypatch.setattr(scale, "placements", lambda: [("pinned", nodes, {}, groups, True)])
    [(name, count, steps, _)] = scale.placement_times(repeats=1)
    assert (name, count) == ("pinned", 20) and steps >= count  # at least a step a group, where they fit
    assert not place(nodes, groups, budget=steps).exhausted and place(nodes, groups, budget=steps - 1).exhausted


def test_the_queue_rows_time_each_queued_stack_and_say_what_capacity_said() -> None:
    """The queued rows: the shapes of `data`, varied ones and a pods quota at each size, with what the capacity rule said
    (checked at the smallest size, where all three fit: the others are tests/policy/test_queue_placement.py's)."""
    rows = scale.queue_curve(repeats=1, sizes=(10,))
    assert [(name, n, said) for name, n, _, _, said in rows] == [
        ("queued-10", 10, "ok"),
        ("queued-10-varied", 10, "ok"),
        ("queued-10-pods", 10, "ok"),
    ]
