"""Issue 23, part 5: what one stack may declare is bounded, and `check` of the largest stack the bounds accept takes
about a second, not minutes.

- bounds: a config past a bound is refused with one line naming the field, its line in the stack file and the
  bound; the largest stack they accept passes, and every bound is far above what the committed stacks use.
- placement: the capacity rule gives a count set's nodes to the search as one entry with a count; the answer is the
  one the search gives with every node listed (hypothesis), and an exhaustive search agrees with it.
- check: `check` reads the objects layout() declares instead of rendering under mocks; its findings are the ones the
  rendering gives.
- timing: `check` of the largest accepted stack, in process and as a fresh `python -m stacks check` process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policy
import stacks
from bench import scale
from cli.checking import preflight as _preflight
from cli.main import main
from components.program import layout, objects, patches, sources
from config import project
from config import values as config_values
from config.stack import ClusterConfig
from config.values import (
    MAX_CLUSTER_NODES,
    MAX_NAMED_NODES,
    MAX_NODE_SET_SIZE,
    MAX_NODES,
    MAX_POD_TEMPLATES,
    MAX_PORTS,
    MAX_TCP_VARIANTS,
    MAX_WORKLOADS,
)
from policy.placement import Group, place
from tests import fixtures
from tests.helpers import ROOT
from tools.render import run

Data = dict[str, Any]
Edit = Callable[[Data], Any]

# --- bounds ---------------------------------------------------------------------------------------------------------


def variants(workload: str, n: int) -> Edit:
    return lambda d: fixtures.workload(d, workload).update(tcp_variants=[{"name": f"{workload}-v{i}"} for i in range(n)])


def ports(n: int) -> Edit:
    return lambda d: fixtures.workload(d, "dev").update(ports=[{"name": f"p{i}", "port": 9000 + i} for i in range(n)])


def copies(n: int, with_variants: int = 0) -> Edit:
    """`n` more stopped copies of the RDMA workload `dev`, each with `with_variants` TCP variants."""

    def edit(d: Data) -> None:
        base = fixtures.workload(d, "dev")
        for i in range(n):
            extra = [{"name": f"c{i}-v{j}"} for j in range(with_variants)]
            d["workloads"].append({**json.loads(json.dumps(base)), "name": f"c{i}", "state": "stopped", "ports": [], "tcp_variants": extra})

    return edit


def counted(n: int) -> Edit:
    return lambda d: d["node_sets"].__setitem__(0, {"name": "pool", "count": n, "gpus_per_node": 4})


def named(set_index: int, n: int) -> Edit:
    return lambda d: d["node_sets"][set_index].update(nodes=[f"n{set_index}-{i}" for i in range(n)])


def both(*edits: Edit) -> Edit:
    return lambda d: [e(d) for e in edits]


def checks(n: int) -> Edit:
    def edit(d: Data) -> None:
        check = d["bandwidth_checks"][0]
        d["bandwidth_checks"] = [{**check, "name": f"fabric{i}", "enabled": i == 0} for i in range(n)]

    return edit


# (case, edit of the roce fixture, the path the message names, a phrase of it naming the bound)
REFUSED: list[tuple[str, Edit, str, str]] = [
    ("tcp variants of one workload", variants("dev", MAX_TCP_VARIANTS + 1), "workloads[dev].tcp_variants", f"at most {MAX_TCP_VARIANTS}"),
    ("ports of one workload", ports(MAX_PORTS + 1), "workloads[dev].ports", f"at most {MAX_PORTS}"),
    ("workloads", copies(MAX_WORKLOADS), "workloads", f"at most {MAX_WORKLOADS}"),
    (
        "pod templates: workloads and their variants",
        copies(MAX_WORKLOADS - 3, with_variants=1),
        "workloads[c126].name",  # the 257th: the fixture's dev, dev-tcp, train and solo, then two per copy
        f"at most {MAX_POD_TEMPLATES}",
    ),
    (
        "pod templates: the bandwidth checks past them",
        both(copies(123, with_variants=1), checks(16)),
        "bandwidth_checks[fabric6].name",  # after 4 + 2 x 123 = 250 workloads and variants
        f"at most {MAX_POD_TEMPLATES}",
    ),
    ("bandwidth checks", checks(17), "bandwidth_checks", "at most 16"),
    ("pods of one workload", lambda d: fixtures.workload(d, "dev").update(nodes=MAX_NODES + 1), "workloads[dev].nodes", str(MAX_NODES)),
    ("count of one set", counted(MAX_NODE_SET_SIZE + 1), "node_sets[pool].count", str(MAX_NODE_SET_SIZE)),
    (
        "nodes of all sets",
        both(counted(MAX_CLUSTER_NODES - 2), named(1, 3)),
        "node_sets[spare].nodes",
        f"at most {MAX_CLUSTER_NODES} in all",
    ),
    ("names of one set", named(0, MAX_NAMED_NODES + 1), "node_sets[main].nodes", f"at most {MAX_NAMED_NODES}"),
    ("names of all sets", both(named(0, 200), named(1, 57)), "node_sets[spare].nodes", f"at most {MAX_NAMED_NODES} in all"),
]


@pytest.mark.parametrize("case,edit,path,phrase", REFUSED, ids=[c[0] for c in REFUSED])
def test_a_stack_past_a_bound_is_refused_naming_the_field_and_the_bound(case: str, edit: Edit, path: str, phrase: str) -> None:
    with pytest.raises(stacks.ConfigError) as err:
        fixtures.config("roce", edit)
    message = str(err.value)
    assert message.startswith("fixture roce: invalid configuration\n"), message
    [line] = message.splitlines()[1:]  # one cause, one line
    assert line.startswith(f"  {path}: ") and phrase in line, message
    assert "Traceback" not in message


@pytest.mark.parametrize(
    "case,edit",
    [
        ("tcp variants of one workload", variants("dev", MAX_TCP_VARIANTS)),
        ("ports of one workload", ports(MAX_PORTS)),
        ("pod templates", copies(MAX_WORKLOADS - 3, with_variants=0)),
        ("named nodes", both(named(0, MAX_NAMED_NODES - 3), named(1, 3))),
        ("nodes of all sets", both(counted(MAX_CLUSTER_NODES - 3), named(1, 3))),
    ],
)
def test_a_stack_at_a_bound_is_accepted(case: str, edit: Edit) -> None:
    fixtures.config("roce", edit)


@pytest.mark.parametrize(
    "field,line_of",
    [
        ("tcp_variants", lambda text: text.index("  tcp_variants:")),
        ("ports", lambda text: text.index("  ports:")),
    ],
)
def test_a_bound_names_the_line_of_a_yaml_file(field: str, line_of: Callable[[str], int], tmp_path: Path) -> None:
    data = fixtures.roce()
    (variants("dev", MAX_TCP_VARIANTS + 1) if field == "tcp_variants" else ports(MAX_PORTS + 1))(data)
    path = tmp_path / "big.yaml"
    text = yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    line = text[: line_of(text)].count("\n") + 1
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"workloads[dev].{field} ({path}:{line}): " in done.stderr, done.stderr
    assert "at most" in done.stderr and 'docs/reference.md, "Bounds"' in done.stderr


MODULE = """from config import ClusterConfig, ContainerPort, NodeSet, Security, ServiceAccount, Workload
CONFIG = ClusterConfig(
    name="big",
    description="x",
    gpu_model="H100",
    node_sets=[
        NodeSet(name="pool", count={count}, gpus_per_node=4),
        NodeSet(name="more", nodes=["a", "b"], gpus_per_node=4),
    ],
    namespaces=["ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="w", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa", gpus_per_node=4, transport="tcp",
                 ports=[ContainerPort(name=f"p{{i}}", port=9000 + i) for i in range({ports})]),
    ],
)
"""


@pytest.mark.parametrize(
    "count,ports,where,phrase",
    [
        (MAX_CLUSTER_NODES - 1, 1, "node_sets[more].nodes (clusters/big.py:8)", f"at most {MAX_CLUSTER_NODES} in all"),
        (1, MAX_PORTS + 1, "workloads[w].ports (clusters/big.py:13)", f"{MAX_PORTS + 1} entries, at most {MAX_PORTS}"),
    ],
)
def test_a_bound_names_the_line_of_a_stack_module(
    count: int, ports: int, where: str, phrase: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "big.py").write_text(MODULE.format(count=count, ports=ports), encoding="utf-8")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.big", raising=False)
    assert main(["check", "big"]) == 2
    err = capsys.readouterr().err
    assert "error: clusters/big.py: invalid configuration" in err and f"  {where}: " in err and phrase in err, err


def test_the_largest_stack_the_bounds_accept_is_valid() -> None:
    config = scale.config(MAX_WORKLOADS, MAX_CLUSTER_NODES, variants=MAX_POD_TEMPLATES - MAX_WORKLOADS)
    assert len(config.all_workloads()) + len(config.bandwidth_checks) == MAX_POD_TEMPLATES
    assert sum(s.size for s in config.node_sets) == MAX_CLUSTER_NODES


@pytest.mark.parametrize("name", stacks.names())
def test_the_committed_stacks_use_a_small_part_of_every_bound(name: str) -> None:
    """The bounds are generous: a committed stack uses at most a quarter of each (so they are no constraint on real use)."""
    config = stacks.load(name)
    templates = len(config.all_workloads()) + len(config.bandwidth_checks)
    used = {
        "workloads": (len(config.workloads), MAX_WORKLOADS),
        "pod templates": (templates, MAX_POD_TEMPLATES),
        "nodes": (sum(s.size for s in config.node_sets), MAX_CLUSTER_NODES),
        "named nodes": (sum(len(s.nodes) for s in config.node_sets), MAX_NAMED_NODES),
        "tcp variants": (max(len(w.tcp_variants) for w in config.workloads), MAX_TCP_VARIANTS),
        "ports": (max(len(w.ports) for w in config.workloads), MAX_PORTS),
    }
    assert all(n * 4 <= bound for n, bound in used.values()), used


LIST_BOUNDS = [
    "MAX_NODE_SETS", "MAX_NAMESPACES", "MAX_VOLUMES", "MAX_BANDWIDTH_CHECKS", "MAX_ATTACHMENTS", "MAX_DEVICES", "MAX_OBSERVATIONS",
    "MAX_ACCESS_MODES", "MAX_STORAGE_CLASSES", "MAX_PVC_FIXES", "MAX_SERVICE_ACCOUNTS", "MAX_CAPABILITIES", "MAX_EXISTING",
    "MAX_SCRIPTS", "MAX_SCRIPT_FILES", "MAX_IMAGES", "MAX_HAND_MADE", "MAX_ACCEPTED_WARNINGS", "MAX_NOTES", "MAX_TOLERATIONS",
    "MAX_SELECTOR", "MAX_ENV", "MAX_SECRET_ENV", "MAX_MOUNTS", "MAX_SCRIPT_MOUNTS", "MAX_ARGS",
]  # fmt: skip


def test_the_reference_lists_every_bound() -> None:
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text[text.index("## Bounds") :]
    for name, value in [
        ("MAX_WORKLOADS", MAX_WORKLOADS),
        ("MAX_POD_TEMPLATES", MAX_POD_TEMPLATES),
        ("MAX_TCP_VARIANTS", MAX_TCP_VARIANTS),
        ("MAX_PORTS", MAX_PORTS),
        ("MAX_NODES", MAX_NODES),
        ("MAX_NODE_SET_SIZE", MAX_NODE_SET_SIZE),
        ("MAX_CLUSTER_NODES", MAX_CLUSTER_NODES),
        ("MAX_NAMED_NODES", MAX_NAMED_NODES),
        # The bounds of every other list and dict (issue 23, round 3): tests/test_issue23_fixes_model.py also holds that
        # the table names each field in its bound's row.
        *((name, getattr(config_values, name)) for name in LIST_BOUNDS),
    ]:
        assert re.search(rf"\| `{name}` \| {value:,} \|", section), name


# --- placement: a count set's nodes as one entry ---------------------------------------------------------------------


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


@pytest.mark.parametrize(
    "nodes,counts,groups,placed",
    [
        # 4,096 counted 8-GPU nodes, 400 groups: decided at once, either way
        ({"pool#": 8}, {"pool#": 4096}, [Group(f"g{i}", 8, 8, ("pool#",), True) for i in range(400)], True),
        ({"pool#": 8}, {"pool#": 4096}, [Group(f"g{i}", 8, 8, ("pool#",), True) for i in range(513)], False),
        # 256 named nodes in four pinned sets beside a count set
        (
            {**{f"n{i}": 4 for i in range(256)}, "pool#": 8},
            {"pool#": 3840},
            [Group(f"p{i}", 4, 4, tuple(f"n{k}" for k in range(i % 4 * 64, i % 4 * 64 + 64)), True) for i in range(64)]
            + [Group(f"c{i}", 16, 8, ("pool#",), True) for i in range(200)],
            True,
        ),
    ],
    ids=["4096 nodes, fits", "4096 nodes, one group too many", "named sets beside a count set"],
)
def test_placement_of_a_large_stack_is_quick(nodes: dict[str, int], counts: dict[str, int], groups: list[Group], placed: bool) -> None:
    start = time.perf_counter()
    result = place(nodes, groups, counts=counts)
    assert result.placed == placed and not result.exhausted
    assert time.perf_counter() - start < 6  # a loaded CI machine; quiet: well under a second


# --- check reads the declared objects --------------------------------------------------------------------------------


def _broken_capacity(d: Data) -> None:
    # dev's TCP variant runs beside it: with the bandwidth check, six 4-GPU pods on main's four nodes
    fixtures.workload(d, "dev")["tcp_variants"][0].update(state="running", alongside=True)


CHECKED: list[tuple[str, Callable[[], ClusterConfig]]] = [
    *((name, lambda name=name: fixtures.config(name)) for name in sorted(fixtures.FIXTURES)),  # type: ignore[misc]
    ("roce, a capacity error", lambda: fixtures.config("roce", _broken_capacity)),
    ("generated, 50 workloads on 16 named nodes", lambda: scale.config(50, 16, named=True)),
    ("generated, 50 workloads on 512 counted nodes", lambda: scale.config(50, 512)),
]


@pytest.mark.parametrize("case,build", CHECKED, ids=[c[0] for c in CHECKED])
def test_check_finds_what_the_rendering_shows(case: str, build: Callable[[], ClusterConfig]) -> None:
    """`check` (no rendering) and `render` (the rendering) report the same findings, located in the same config lines."""
    config = build()
    assert _preflight(config, None, None) == _preflight(config, run(config), None)
    assert _preflight(config, None, None) == policy.check(config, objects(config), patches(config), sources=sources(layout(config)))


def test_check_names_the_capacity_culprit_without_rendering(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = fixtures.roce()
    _broken_capacity(data)
    path = tmp_path / "roce.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    assert main(["check", "--config", str(path)]) == 1
    out = capsys.readouterr().out
    assert "roce: error capacity bandwidth_checks[fabric] (" in out and "FAIL: 1 error" in out, out


# --- timing ------------------------------------------------------------------------------------------------------------


def test_check_of_the_largest_accepted_stack_in_process() -> None:
    """docs/performance.md reports the quiet machine's figure (well under a second); 6 s leaves room for a loaded CI."""
    stack = scale.largest()
    scale.check(scale.data(5, 16))  # imports and first-run caches
    validated, preflight, count = scale.check(stack)
    assert count > 700
    assert validated + preflight < 6, (validated, preflight)


def test_check_of_the_largest_accepted_stack_in_a_fresh_process(tmp_path: Path) -> None:
    path = tmp_path / "largest.yaml"
    path.write_text(yaml.safe_dump(scale.largest(), sort_keys=False), encoding="utf-8")
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    took = time.perf_counter() - start
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 errors" in done.stdout
    assert took < 6 + 4, took  # the interpreter and imports besides: about 1 s quiet


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
