"""Can every running pod be scheduled at once? An exact search, small enough to run in every preview.

The scheduler places pods one by one; what the stack must guarantee is that a placement of all of
them exists (GPUs per node, one pod of a multi-node workload per node, node pins). Nodes that the
same groups may use and that have the same free GPUs are interchangeable, so the search works on
classes of nodes (a count per class) instead of on nodes, and remembers the states it has proved
hopeless. A budget of steps bounds it; past it the answer is "unknown", never a hang.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

State = tuple[tuple[tuple[frozenset[int], int], int], ...]
"""Sorted ((groups that may use the node, free GPUs), how many such nodes)."""


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


def _choices(classes: list[tuple[tuple[frozenset[int], int], int]], pods: int, spread: bool) -> Iterator[list[int]]:
    """How many pods to put on nodes of each class (at most one per node when spread)."""

    def rec(i: int, left: int) -> Iterator[list[int]]:
        if left == 0:
            yield [0] * (len(classes) - i)
            return
        if i == len(classes):
            return
        (_, free), count = classes[i]
        most = min(left, count) if spread else left
        for k in range(most, -1, -1):
            for rest in rec(i + 1, left - k):
                yield [k, *rest]

    yield from rec(0, pods)


def place(nodes: dict[str, int], groups: list[Group], budget: int = 100_000) -> Placement:
    """Whether every group fits on `nodes` (name -> GPUs) at once."""
    order = sorted(groups, key=lambda g: (-g.gpus, -g.pods, g.name))
    index = {id(g): i for i, g in enumerate(order)}
    signature = {n: frozenset(index[id(g)] for g in order if n in g.candidates) for n in nodes}
    start: State = tuple(sorted(Counter((signature[n], gpus) for n, gpus in nodes.items()).items(), key=repr))
    hopeless: set[tuple[int, State]] = set()
    steps = 0
    deepest = 0

    def solve(i: int, state: State) -> bool | None:
        nonlocal steps, deepest
        if i == len(order):
            return True
        if (i, state) in hopeless:
            return False
        deepest = max(deepest, i)
        g = order[i]
        usable = [(key, count) for key, count in state if i in key[0] and key[1] >= g.gpus and count > 0]
        if not g.spread:
            usable = [(key, count) for key, count in usable]
        for take in _choices(usable, g.pods, g.spread):
            steps += 1
            if steps > budget:
                return None
            counts = Counter(dict(state))
            ok = True
            for (key, _), k in zip(usable, take, strict=True):
                if not k:
                    continue
                if g.spread:
                    counts[key] -= k
                    counts[(key[0], key[1] - g.gpus)] += k
                else:  # several pods may share a node: place them one by one on this class
                    for _ in range(k):
                        if counts[key] <= 0 or key[1] < g.gpus:
                            ok = False
                            break
                        counts[key] -= 1
                        key = (key[0], key[1] - g.gpus)
                        counts[key] += 1
            if not ok:
                continue
            nxt: State = tuple(sorted(((k, c) for k, c in counts.items() if c > 0), key=repr))
            found = solve(i + 1, nxt)
            if found is None:
                return None
            if found:
                return True
        hopeless.add((i, state))
        return False

    found = solve(0, start)
    if found is None:
        return Placement(False, exhausted=True)
    return Placement(True) if found else Placement(False, unplaced=order[min(deepest, len(order) - 1)] if order else None)
