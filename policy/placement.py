"""Can every running pod be scheduled at once? An exact search, small enough to run in every preview.

The scheduler places pods one by one; what the stack must guarantee is that a placement of all of
them exists (GPUs per node, one pod of a multi-node workload per node, node pins). Nodes that the
same groups may use and that have the same free GPUs are interchangeable, so the search works on
classes of nodes (a count per class) instead of on nodes, and remembers the states it has proved
hopeless. It tries the tightest fit first (nodes the fewest later pods may use, then the fewest free
GPUs) and drops a branch as soon as the GPUs left cannot hold what the remaining pods need. A budget of
steps bounds it; past it the answer is "unknown", never a hang. (Measured on random stacks of 20
workloads over 16 nodes in 4 pinned sets, against an exact solver: every yes and no right, about one
stack in 250 "unknown", at most 1.7 s.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    """Pods of one workload that run at once."""

    name: str
    pods: int
    gpus: int
    """GPUs each pod needs."""
    candidates: tuple[str, ...]
    """Nodes the pods may run on (their node pins)."""
    spread: bool
    """One pod per node (podAntiAffinity on the hostname)."""


@dataclass(frozen=True)
class Placement:
    placed: bool
    exhausted: bool = False
    unplaced: Group | None = None
    """The first group (in the search's order) that could not be placed beside the ones before it."""


State = tuple[tuple[int, int], ...]
"""Sorted (node class, how many nodes of it); a class is an interned (groups that may use it, free GPUs)."""


def _choices(counts: list[int], pods: int) -> Iterator[list[int]]:
    """How many pods to put on the nodes of each usable class, at most one per node, the first classes
    filled first."""

    def rec(i: int, left: int) -> Iterator[list[int]]:
        if left == 0:
            yield [0] * (len(counts) - i)
            return
        if i == len(counts):
            return
        for k in range(min(left, counts[i]), -1, -1):
            for rest in rec(i + 1, left - k):
                yield [k, *rest]

    yield from rec(0, pods)


def place(nodes: Mapping[str, int], groups: list[Group], budget: int = 50_000, counts: Mapping[str, int] | None = None) -> Placement:
    """Whether every group fits on `nodes` (name -> GPUs) at once. With `counts`, an entry stands for that many
    identical nodes that no pod pins by name (a node set's `count`): the same answer as listing each of them, with a
    setup that grows with the entries, not with the nodes."""
    # Pods that may share a node are placed one at a time: each is a group of one.
    units = [g if g.spread else Group(g.name, 1, g.gpus, g.candidates, True) for g in groups for _ in range(1 if g.spread else g.pods)]
    order = sorted(units, key=lambda g: (-g.gpus, -g.pods, g.name))
    classes: dict[tuple[frozenset[int], int], int] = {}  # interned: (groups that may use it, free GPUs) -> id
    keys: list[tuple[frozenset[int], int]] = []

    def intern(key: tuple[frozenset[int], int]) -> int:
        if key not in classes:
            classes[key] = len(keys)
            keys.append(key)
        return classes[key]

    # Which groups may use each node, through the distinct candidate lists (the pods of one node set share theirs): the
    # work grows with the entries and the distinct lists, not with nodes x groups x candidates.
    sharing: dict[tuple[str, ...], list[int]] = {}  # a candidate list -> the groups (indexes in `order`) that have it
    for i, g in enumerate(order):
        sharing.setdefault(g.candidates, []).append(i)
    lists = list(sharing.values())
    listed: dict[str, list[int]] = {}  # node -> the candidate lists (indexes in `lists`) that name it
    for k, candidates in enumerate(sharing):
        for n in dict.fromkeys(candidates):
            listed.setdefault(n, []).append(k)
    may_use: dict[tuple[int, ...], frozenset[int]] = {}  # the lists naming a node -> the groups that may use it
    start: dict[int, int] = {}
    many = counts or {}
    for n, gpus in nodes.items():
        naming = tuple(listed.get(n, ()))
        if naming not in may_use:
            may_use[naming] = frozenset(i for k in naming for i in lists[k])
        c = intern((may_use[naming], gpus))
        start[c] = start.get(c, 0) + many.get(n, 1)
    hopeless: set[tuple[int, State]] = set()
    steps = 0
    deepest = 0

    # GPUs the groups from i on need in all.
    demand = [0] * (len(order) + 1)
    for i in range(len(order) - 1, -1, -1):
        demand[i] = demand[i + 1] + order[i].pods * order[i].gpus

    def _room(i: int, state: State) -> bool:
        """A quick bound: the GPUs left can hold what the remaining groups need, and each of them still has
        enough nodes with room for one pod."""
        if sum(n * keys[c][1] for c, n in state if keys[c][0]) < demand[i]:
            return False
        return all(
            sum(n for c, n in state if j in keys[c][0] and keys[c][1] >= order[j].gpus) >= order[j].pods for j in range(i, len(order))
        )

    def solve(i: int, state: State) -> bool | None:
        nonlocal steps, deepest
        if i == len(order):
            return True
        if (i, state) in hopeless:
            return False
        deepest = max(deepest, i)
        g = order[i]
        usable = [(c, count) for c, count in state if i in keys[c][0] and keys[c][1] >= g.gpus]
        # Tightest fit first: nodes the fewest later groups may use, then the fewest free GPUs.
        usable.sort(key=lambda cc: (sum(1 for j in keys[cc[0]][0] if j > i), keys[cc[0]][1], cc[0]))
        for take in _choices([count for _, count in usable], g.pods):
            steps += 1
            if steps > budget:
                return None
            counts = dict(state)
            for (c, _), k in zip(usable, take, strict=True):
                if k:
                    counts[c] -= k
                    used = intern((keys[c][0], keys[c][1] - g.gpus))
                    counts[used] = counts.get(used, 0) + k
            nxt = tuple(sorted((c, n) for c, n in counts.items() if n))
            if not _room(i + 1, nxt):
                continue
            found = solve(i + 1, nxt)
            if found is None:
                return None
            if found:
                return True
        hopeless.add((i, state))
        return False

    found = solve(0, tuple(sorted(start.items())))
    if found is None:
        return Placement(False, exhausted=True)
    return Placement(True) if found else Placement(False, unplaced=order[min(deepest, len(order) - 1)] if order else None)
