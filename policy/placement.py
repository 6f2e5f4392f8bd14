"""Can every running pod be scheduled at once (GPUs; CPU, memory and VFs where stated; one pod of a multi-node workload
per node; node pins)? An exact search on classes of interchangeable nodes that remembers hopeless states, tries the
tightest fit first and drops a branch once the nodes left cannot hold the pods left; past its budget of steps the
answer is "unknown", never a hang. On a queued cluster (`Admission`): does every combination a quota admits fit?"""

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from fractions import Fraction

from policy.core import grouped

UNBOUNDED = 1 << 62  # a resource a node set does not state: never short, never lessened (nodes stay one class)

Free = tuple[int, int, int, int]  # GPUs, CPU in millicores, memory in bytes, VF sets (one per RDMA pod), free or asked


@dataclass(frozen=True)
class Group:
    """Pods of one workload that run at once, and what each needs."""

    name: str
    pods: int
    gpus: int
    candidates: tuple[str, ...]  # the nodes the pods may run on (their node pins)
    spread: bool  # one pod per node (podAntiAffinity on the hostname)
    cpu: int = 0  # millicores
    memory: int = 0  # bytes
    vfs: int = 0  # VF sets: 1 for an RDMA pod

    @property
    def need(self) -> Free:
        return (self.gpus, self.cpu, self.memory, self.vfs)


def fits(free: Free, need: Free) -> bool:
    return free[0] >= need[0] and free[1] >= need[1] and free[2] >= need[2] and free[3] >= need[3]


def _less(free: Free, need: Free) -> Free:
    gpus, cpu, memory, vfs = (f if f >= UNBOUNDED else f - n for f, n in zip(free, need, strict=True))  # GPUs are always stated
    return (gpus, cpu, memory, vfs)


def free_of(value: int | tuple[int, ...]) -> Free:
    """A node's free resources: a number is its GPUs, with CPU, memory and VFs not stated (a triple: VFs not stated)."""
    if isinstance(value, int):
        return (value, UNBOUNDED, UNBOUNDED, UNBOUNDED)
    return (value[0], value[1], value[2], value[3] if len(value) > 3 else UNBOUNDED)


@dataclass
class Budget:
    """Steps that searches may take together: past it, each answers "unknown"."""

    left: int
    spent: int = 0
    whole: "Budget | None" = None  # the budget this one is a part of: each step takes a step of it too

    def take(self) -> bool:
        self.spent += 1
        self.left -= 1
        return (self.whole is None or self.whole.take()) and self.left >= 0

    def part(self, steps: int) -> "Budget":
        return Budget(steps, whole=self)


@dataclass(frozen=True)
class Placement:
    placed: bool
    exhausted: bool = False
    unplaced: Group | None = None  # the first group (in the search's order) not placed beside the ones before it


State = tuple[tuple[int, int], ...]  # sorted (node class, how many nodes of it)


def _choices(counts: list[int], pods: int, i: int = 0) -> Iterator[list[int]]:
    """How many pods to put on the nodes of each usable class from the i-th on, at most one per node, the first classes first."""
    if pods == 0:
        yield [0] * (len(counts) - i)
    elif i < len(counts):
        for k in range(min(pods, counts[i]), -1, -1):
            for rest in _choices(counts, pods - k, i + 1):
                yield [k, *rest]


def _may_use(order: Sequence[Group], nodes: Iterable[str]) -> dict[str, frozenset[int]]:
    """Node -> the groups (indexes in `order`) that may use it, by the distinct candidate lists (not nodes x groups)."""
    sharing = grouped((g.candidates, i) for i, g in enumerate(order))  # a candidate list -> the groups that have it
    lists = list(sharing.values())
    # node -> the candidate lists (indexes in `lists`) that name it
    listed = grouped((n, k) for k, candidates in enumerate(sharing) for n in dict.fromkeys(candidates))
    naming = {n: tuple(listed.get(n, ())) for n in nodes}
    by_lists = {k: frozenset(i for j in k for i in lists[j]) for k in set(naming.values())}  # the lists naming a node -> its groups
    return {n: by_lists[k] for n, k in naming.items()}


def place(
    nodes: Mapping[str, int | tuple[int, ...]],
    groups: Sequence[Group],
    budget: int | Budget = 50_000,
    counts: Mapping[str, int] | None = None,
) -> Placement:
    """Whether every group fits on `nodes` (name -> GPUs, or Free) at once. With `counts`, an entry stands for that many
    identical nodes no pod pins by name. A step is one way of putting a group's pods on the node classes."""
    steps = budget if isinstance(budget, Budget) else Budget(budget)
    # Pods that may share a node are placed one at a time: each is a group of one.
    units = [g if g.spread else replace(g, pods=1, spread=True) for g in groups for _ in range(1 if g.spread else g.pods)]
    order = sorted(units, key=lambda g: (-g.gpus, -g.pods, g.name))
    classes: dict[tuple[frozenset[int], Free], int] = {}  # interned: (groups that may use it, free resources) -> id
    keys: list[tuple[frozenset[int], Free]] = []

    def intern(key: tuple[frozenset[int], Free]) -> int:
        if key not in classes:
            classes[key] = len(keys)
            keys.append(key)
        return classes[key]

    may_use = _may_use(order, nodes)
    start: Counter[int] = Counter()
    for n, free in nodes.items():
        start[intern((may_use[n], free_of(free)))] += (counts or {}).get(n, 1)
    hopeless: set[tuple[int, State]] = set()
    deepest = 0

    needs = [g.need for g in order]
    # What the groups from i on need in all, of each resource.
    demand = [(0, 0, 0, 0)] * (len(order) + 1)
    for i in range(len(order) - 1, -1, -1):
        demand[i] = tuple(d + order[i].pods * n for d, n in zip(demand[i + 1], needs[i], strict=True))  # type: ignore[assignment]

    bounded = [r for r in range(4) if any(free[r] < UNBOUNDED for _, free in keys)]  # a resource no node states never runs out

    def _room(i: int, state: State) -> bool:
        """What the nodes have left can hold what the remaining groups need, each with enough nodes with room for one pod."""
        short = any(demand[i][r] and sum(n * keys[c][1][r] for c, n in state if keys[c][0]) < demand[i][r] for r in bounded)
        return not short and all(
            sum(n for c, n in state if j in keys[c][0] and fits(keys[c][1], needs[j])) >= order[j].pods for j in range(i, len(order))
        )

    def solve(i: int, state: State) -> bool | None:
        nonlocal deepest
        if i == len(order):
            return True
        if (i, state) in hopeless:
            return False
        deepest = max(deepest, i)
        usable = [(c, count) for c, count in state if i in keys[c][0] and fits(keys[c][1], needs[i])]
        # Tightest fit first: nodes the fewest later groups may use, then the fewest free GPUs.
        usable.sort(key=lambda cc: (sum(1 for j in keys[cc[0]][0] if j > i), keys[cc[0]][1], cc[0]))
        for take in _choices([count for _, count in usable], order[i].pods):
            if not steps.take():
                return None
            counts = dict(state)
            for (c, _), k in zip(usable, take, strict=True):
                if k:
                    counts[c] -= k
                    used = intern((keys[c][0], _less(keys[c][1], needs[i])))
                    counts[used] = counts.get(used, 0) + k
            nxt = tuple(sorted((c, n) for c, n in counts.items() if n))
            if _room(i + 1, nxt) and (found := solve(i + 1, nxt)) is not False:
                return found  # True, or None: the budget ran out
        hopeless.add((i, state))
        return False

    found = solve(0, tuple(sorted(start.items())))
    if found is None:
        return Placement(False, exhausted=True)
    return Placement(True) if found else Placement(False, unplaced=order[deepest])


Charges = Mapping[str, int]  # what a run charges its flavor's quota per resource (Kueue's units), and `pods`


class _Spent(Exception):
    """The budget ran out."""


@dataclass(frozen=True)
class Together:
    """What `Admission.check` found for one quota."""

    bad: tuple[int, ...] = ()  # runs it admits together that the nodes cannot hold, shrunk to the ones needed
    decided: bool = True  # False: the budget ran out first
    room: tuple[int, ...] = ()  # runs that counting proves find room beside anything admitted with them
    fitting: int = 0  # maximal combinations of the other runs that were placed and fit

    @property
    def fits(self) -> bool:
        return self.decided and not self.bad


@dataclass
class Admission:
    """Does every combination of runs a quota admits fit the nodes (Kueue admits by quota, in any order)? Holding is
    monotone: only combinations nothing more can join are placed, one that fails is shrunk to the runs it needs; runs
    counting proves find room are left out (`finds_room`); runs alike count as kinds; placements are remembered."""

    nodes: Mapping[str, int | tuple[int, ...]]
    groups: Sequence[Group]
    charges: Sequence[Charges]
    budget: Budget
    counts: Mapping[str, int] = field(default_factory=dict)
    held: dict[tuple[int, ...], bool] = field(default_factory=dict)  # placements done, by a combination's count of each kind
    bad_known: list[tuple[int, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        kinds: dict[tuple[object, ...], int] = {}
        self.kind = [
            kinds.setdefault((g.pods, g.need, g.spread, g.candidates, tuple(sorted(c.items()))), len(kinds))
            for g, c in zip(self.groups, self.charges, strict=True)
        ]
        self.kinds = len(kinds)
        # What each run uses of GPUs, CPU, memory, VF sets and pods; per use and charge, the two runs using most per unit.
        self.use = [(*(g.pods * x for x in g.need), g.pods) for g in self.groups]
        self.total = [sum(u[d] for u in self.use) for d in range(5)]
        self.ratios: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
        for i, (used, charged) in enumerate(zip(self.use, self.charges, strict=True)):
            for d in range(5):
                for q in charged if used[d] else ():
                    best = self.ratios.setdefault((d, q), [])
                    best.append((used[d], charged[q], i))
                    best.sort(key=lambda r: Fraction(r[0], r[1]) if r[1] else Fraction(UNBOUNDED), reverse=True)
                    del best[2:]

    def holds(self, runs: Sequence[int], budget: Budget) -> bool:
        """Whether the runs fit the nodes at once (raises _Spent past the budget)."""
        of_kind = Counter(self.kind[i] for i in runs)
        key = tuple(of_kind[k] for k in range(self.kinds))
        if key not in self.held:
            found = place(self.nodes, [self.groups[i] for i in sorted(runs)], budget, self.counts)
            if found.exhausted:
                raise _Spent
            self.held[key] = found.placed
        return self.held[key]

    def finds_room(self, limit: Charges) -> list[bool]:
        """For each run: whether it finds nodes beside any runs the quota admits with it, however placed. The others close
        at most as many nodes as they have pods, and as their share of each resource (bounded by the quota left) allows."""
        out = []
        for j, g in enumerate(self.groups):
            candidates = [n for n in dict.fromkeys(g.candidates) if n in self.nodes]
            size = sum(self.counts.get(n, 1) for n in candidates)
            if not candidates or (g.pods > 1 and not g.spread):
                out.append(False)
                continue
            left = {q: max(0, quota - self.charges[j].get(q, 0)) for q, quota in limit.items()}
            top = {(d, q): next(((u, c) for u, c, i in self.ratios.get((d, q), ()) if i != j), (0, 1)) for d in range(5) for q in limit}
            used = [  # the most the others use of each resource
                min([self.total[d] - self.use[j][d]] + [left[q] * top[d, q][0] // top[d, q][1] for q in limit if top[d, q][1]])
                for d in range(5)
            ]
            free = [min(free_of(self.nodes[n])[d] for n in candidates) for d in range(4)]
            gaps = {d: free[d] - g.need[d] + 1 for d in range(4) if g.need[d] and free[d] < UNBOUNDED}  # what closes a node
            if any(gap <= 0 for gap in gaps.values()):
                out.append(False)  # a pod that fits no node: node-fit's error
                continue
            closed = min(used[4], sum(used[d] // gap for d, gap in gaps.items()))
            for q in limit:
                cost = min((-(-gap * top[d, q][1] // top[d, q][0]) if top[d, q][0] else UNBOUNDED for d, gap in gaps.items()), default=0)
                if cost:
                    closed = min(closed, left[q] // cost)
            out.append(size - closed >= g.pods)
        return out

    def check(self, limit: Charges, budget: Budget | None = None) -> Together:
        """Whether some combination of the runs that `limit` (resource -> quota) admits does not fit the nodes."""
        budget = budget or self.budget
        for known in self.bad_known:
            if all(sum(self.charges[i].get(r, 0) for i in known) <= quota for r, quota in limit.items()):
                return Together(bad=known)
        room = self.finds_room(limit)
        found = tuple(i for i, r in enumerate(room) if r)
        others = [i for i, r in enumerate(room) if not r]
        fitting = 0
        try:
            if len(others) < 2 or self.holds(others, budget):
                return Together(room=found)  # all of them at once fit: so does any combination
            for runs in self._maximal(others, limit, budget):
                if len(runs) < 2 or self.holds(runs, budget):  # a run alone fits its nodes (node-fit's error otherwise)
                    fitting += len(runs) > 1
                    continue
                self.bad_known.append(self._shrunk(runs, budget))
                return Together(bad=self.bad_known[-1], room=found)
        except _Spent:
            return Together(decided=False, room=found, fitting=fitting)
        return Together(room=found, fitting=fitting)

    def _shrunk(self, runs: Sequence[int], budget: Budget) -> tuple[int, ...]:
        """The runs of a failing combination it cannot do without (at least two)."""
        culprit = list(runs)
        with suppress(_Spent):  # past the budget what is left fails all the same: a proof, shrunk as far as the budget went
            for j in runs:
                rest = [i for i in culprit if i != j]
                if len(culprit) > 2 and not self.holds(rest, budget):
                    culprit = rest
        return tuple(sorted(culprit))

    def _maximal(self, runs: Sequence[int], limit: Charges, budget: Budget) -> Iterator[list[int]]:
        """The combinations of `runs` that `limit` admits and nothing more can join, the largest pods first."""
        largest_first = sorted(runs, key=lambda i: (tuple(-x for x in self.groups[i].need), -self.groups[i].pods, i))
        members = list(grouped((self.kind[i], i) for i in largest_first).values())
        quota = list(limit.values())
        charge = [[self.charges[m[0]].get(r, 0) for r in limit] for m in members]
        # What the kinds from k on can add at most, per resource; the kinds likeliest to join a combination first.
        after = [[0] * len(quota) for _ in range(len(members) + 1)]
        for k in range(len(members) - 1, -1, -1):
            after[k] = [a + len(members[k]) * c for a, c in zip(after[k + 1], charge[k], strict=True)]
        cheapest = sorted(range(len(members)), key=lambda k: charge[k])
        chosen = [0] * len(members)

        def joins(total: list[int], k: int, extra: list[int]) -> bool:
            return all(t + e + c <= q for t, e, c, q in zip(total, extra, charge[k], quota, strict=True))

        def walk(k: int, total: list[int]) -> Iterator[list[int]]:
            if not budget.take():
                raise _Spent
            if k == len(members):
                zero = [0] * len(quota)
                if not any(chosen[j] < len(members[j]) and joins(total, j, zero) for j in cheapest):
                    yield [i for j, m in enumerate(members) for i in m[: chosen[j]]]
                return
            most = min([len(members[k]), *((q - t) // c for c, q, t in zip(charge[k], quota, total, strict=True) if c)])
            for n in range(max(most, 0), -1, -1):
                now = [t + n * c for t, c in zip(total, charge[k], strict=True)]
                if n < most and joins(now, k, after[k + 1]):
                    break  # one more of kind k joins whatever the later kinds add: no combination from here on is maximal
                chosen[k] = n
                yield from walk(k + 1, now)
            chosen[k] = 0

        yield from walk(0, [0] * len(quota))
