"""The placement search the capacity rule runs (policy/placement.py): a count set's nodes, given to the search as one entry
with a count, get the answer the search gives with every node listed (hypothesis), and an exhaustive search agrees; a
large stack is decided in a number of steps that grows with its groups, not with its nodes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import scale
from policy.placement import Group, place


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[str, int], int, int, list[tuple[str, int, int, str, tuple[str, ...], bool]]]:
    """Named nodes (name -> GPUs), a count set (how many, GPUs), and groups (name, pods, GPUs, pin, pinned names, spread)
    whose pins are the capacity rule's: In some named nodes, NotIn some (the count set's pods avoid them), or none."""
    names = {f"n{i}": draw(st.sampled_from([1, 2, 4, 8])) for i in range(draw(st.integers(0, 4)))}
    count = draw(st.integers(0 if names else 1, 5))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    groups = []
    for j in range(draw(st.integers(1, 5))):
        pin = draw(st.sampled_from(["In", "NotIn", ""] if names else ["NotIn", ""]))
        pinned = tuple(draw(st.lists(st.sampled_from(sorted(names)), unique=True))) if names else ()
        groups.append((f"g{j}", draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 4, 8])), pin, pinned, draw(st.booleans())))
    return names, count, gpus, groups


def _candidates(nodes: list[str], named: dict[str, int], pin: str, pinned: tuple[str, ...]) -> tuple[str, ...]:
    if pin == "In":
        return tuple(n for n in pinned if n in named)
    return tuple(n for n in nodes if n not in pinned) if pin == "NotIn" else tuple(nodes)


def _fits(nodes: dict[str, int], groups: list[Group]) -> bool:
    """An exhaustive search: every pod on a node it may use with GPUs left, the pods of a spread group on distinct nodes."""
    pods = [(g, k) for g in groups for k in range(g.pods)]
    free = dict(nodes)
    used: dict[str, set[str]] = {g.name: set() for g in groups}  # the nodes each group's pods are on

    def put(i: int) -> bool:
        if i == len(pods):
            return True
        g, _ = pods[i]
        for n in dict.fromkeys(g.candidates):
            if free[n] >= g.gpus and not (g.spread and n in used[g.name]):
                free[n] -= g.gpus
                used[g.name].add(n)
                if put(i + 1):
                    return True
                free[n] += g.gpus
                used[g.name].discard(n)
        return False

    return put(0)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(clusters())
def test_a_count_set_as_one_entry_gives_the_answer_of_its_nodes_listed(
    cluster: tuple[dict[str, int], int, int, list[tuple[str, int, int, str, tuple[str, ...], bool]]],
) -> None:
    """The capacity rule's old input (every node of the count set listed, `pool#1`...) and its new one (one entry with a
    count) give the search the same question: the same answer, the same culprit, the same give-up. Where it decides,
    an exhaustive search agrees."""
    named, count, gpus, shapes = cluster
    listed = {**named, **{f"pool#{i + 1}": gpus for i in range(count)}}
    entries = {**named, **({"pool#": gpus} if count else {})}
    old = [Group(n, p, g, _candidates(list(listed), named, pin, pinned), spread) for n, p, g, pin, pinned, spread in shapes]
    new = [Group(n, p, g, _candidates(list(entries), named, pin, pinned), spread) for n, p, g, pin, pinned, spread in shapes]
    before = place(listed, old)
    after = place(entries, new, counts={"pool#": count} if count else {})
    assert (after.placed, after.exhausted, after.unplaced and after.unplaced.name) == (
        before.placed,
        before.exhausted,
        before.unplaced and before.unplaced.name,
    )
    if not before.exhausted:
        assert before.placed == _fits(listed, old)


LARGE = scale.placements()


@pytest.mark.parametrize("nodes,counts,groups,placed", [c[1:] for c in LARGE], ids=[c[0] for c in LARGE])
def test_placement_of_a_large_stack_is_quick(nodes: dict[str, int], counts: dict[str, int], groups: list[Group], placed: bool) -> None:
    """Decided at once, either way: at most two steps of the search per group (it counts its steps against its budget,
    and says it gave up past it), so a search that backtracks, or grows with the nodes, fails here on any machine.
    Measured: one step per group where they fit, one in all where they cannot. `make bench` times these cases."""
    result = place(nodes, groups, budget=2 * len(groups), counts=counts)
    assert result.placed == placed and not result.exhausted
