"""What one stack may declare is bounded (docs/reference.md "Bounds"): every list and dict of every model has a bound; past
one, one line names the field, its line in the stack file or module, and the bound; the largest stack the bounds accept
(bench/scale.py `largest()`) is valid with every list at its bound; and every bound is far above what the committed
stacks use."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

import stacks
from bench import scale
from cli.main import main
from config import project
from config import values as config_values
from config.stack import ClusterConfig
from config.values import (
    MAX_ACCEPTED_WARNINGS,
    MAX_ARGS,
    MAX_CLUSTER_NODES,
    MAX_ENV,
    MAX_HAND_MADE,
    MAX_NAMED_NODES,
    MAX_NODE_SET_SIZE,
    MAX_NODE_SETS,
    MAX_NODES,
    MAX_NOTES,
    MAX_POD_TEMPLATES,
    MAX_PORTS,
    MAX_PRIORITY_CLASSES,
    MAX_SCRIPT_FILES,
    MAX_STORAGE_CLASSES,
    MAX_TCP_VARIANTS,
    MAX_TOLERATIONS,
    MAX_WORKLOADS,
)
from tests import fixtures
from tests.fixtures import Data, Edit, both
from tests.helpers import ROOT, refusal

# --- every list and dict has a bound ------------------------------------------------------------------------------------


def _containers(annotation: Any) -> tuple[bool, list[type[BaseModel]]]:
    """Whether a field's type is a list or dict (under any Optional), and the models inside it."""
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return False, [annotation]
    if origin is Annotated:
        return _containers(args[0])
    container = origin in (list, dict)
    models = [m for a in args for m in _containers(a)[1]]
    return container or any(_containers(a)[0] for a in args if get_origin(a) is not None and get_origin(a) is not Annotated), models


def bounded_fields(model: type[BaseModel] = ClusterConfig, prefix: str = "") -> list[tuple[str, int | None]]:
    """(config path, max_length) of every list and dict field of the model, nested models included: `workloads[].env`."""
    out: list[tuple[str, int | None]] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        container, models = _containers(info.annotation)
        if container:
            out.append((path, next((m.max_length for m in info.metadata if getattr(m, "max_length", None) is not None), None)))
        for inner in dict.fromkeys(models):
            out += bounded_fields(inner, f"{path}[]." if container else f"{path}.")
    return sorted(set(out))


FIELDS = bounded_fields()


def test_the_walk_finds_the_lists_the_audit_named() -> None:
    found = {path for path, _ in FIELDS}
    named = {"gpu_tolerations", "accepted_warnings", "hand_made", "storage_classes", "pvc_fixes", "scripts", "images", "notes"}
    named |= {"workloads[].env", "workloads[].mounts", "workloads[].tolerations", "workloads[].node_selector", "workloads[].args"}
    named |= {"security.service_accounts", "namespaces", "node_sets[].nodes", "scripts[].files", "fabric.device_observations[].devices"}
    assert named <= found, named - found


@pytest.mark.parametrize("path,bound", FIELDS, ids=[f[0] for f in FIELDS])
def test_every_list_and_dict_has_a_bound_the_reference_lists(path: str, bound: int | None) -> None:
    """Every list and dict of every model is bounded, and docs/reference.md "Bounds" names the field in the row of its
    bound, with the bound's value."""
    assert bound is not None, f"{path} has no max_length"
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text[text.index("## Bounds") : text.index("## How it is built")]
    rows = [line for line in section.splitlines() if line.startswith("| `MAX_") and f"`{path}`" in line]
    assert rows, f"{path} is not in the Bounds table"
    assert any(row.split("|")[2].strip().replace(",", "") == str(bound) for row in rows), (path, bound, rows)


def _lists(value: Any, path: str) -> list[tuple[str, int]]:
    """(config path, length) of every list and dict in a validated config."""
    out: list[tuple[str, int]] = []
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            out += _lists(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, (list, dict)):
        out.append((path, len(value)))
        for item in value.values() if isinstance(value, dict) else value:
            out += _lists(item, f"{path}[]")
    return out


@pytest.mark.parametrize("name", stacks.names())
def test_the_committed_stacks_use_at_most_a_quarter_of_every_list_bound(name: str) -> None:
    bounds = dict(FIELDS)
    used = [(path, n, bounds[path]) for path, n in _lists(stacks.load(name), "") if path in bounds]
    assert used and {p for p, _, _ in used} <= set(bounds)
    too_many = [(path, n, bound) for path, n, bound in used if bound is not None and n * 4 > bound]
    assert not too_many, too_many


def _many(field: str, item: Callable[[int], Any], bound: int, under: Callable[[Data], Any] = lambda d: d) -> Edit:
    def edit(d: Data) -> None:
        entries = [item(k) for k in range(bound + 1)]
        under(d)[field] = dict(entries) if entries and isinstance(entries[0], tuple) else entries

    return edit


PAST: list[tuple[str, Edit, str, int]] = [
    (
        "gpu_tolerations",
        _many("gpu_tolerations", lambda k: {"key": f"example.com/t{k}"}, MAX_TOLERATIONS),
        "gpu_tolerations",
        MAX_TOLERATIONS,
    ),
    (
        "accepted_warnings",
        _many("accepted_warnings", lambda k: {"rule": "image", "object": f"x{k}", "reason": "r"}, MAX_ACCEPTED_WARNINGS),
        "accepted_warnings",
        MAX_ACCEPTED_WARNINGS,
    ),
    (
        "hand_made",
        _many("hand_made", lambda k: {"kind": "ServiceAccount", "name": f"sa-{k}", "namespace": "team-a", "source": "oc"}, MAX_HAND_MADE),
        "hand_made",
        MAX_HAND_MADE,
    ),
    ("notes", _many("notes", lambda k: f"note {k}", MAX_NOTES), "notes", MAX_NOTES),
    (
        "workload env",
        _many("env", lambda k: (f"VAR_{k}", "1"), MAX_ENV, lambda d: fixtures.workload(d, "dev")),
        "workloads[dev].env",
        MAX_ENV,
    ),
    (
        "workload tolerations",
        _many("tolerations", lambda k: {"key": f"example.com/t{k}"}, MAX_TOLERATIONS, lambda d: fixtures.workload(d, "dev")),
        "workloads[dev].tolerations",
        MAX_TOLERATIONS,
    ),
    (
        "workload args",
        _many("args", lambda k: f"--a{k}", MAX_ARGS, lambda d: fixtures.workload(d, "dev")),
        "workloads[dev].args",
        MAX_ARGS,
    ),
    (
        "storage classes",
        _many("storage_classes", lambda k: {"name": f"c{k}", "access_modes": ["ReadWriteOnce"]}, MAX_STORAGE_CLASSES),
        "storage_classes",
        MAX_STORAGE_CLASSES,
    ),
    (
        "script files",
        _many("files", lambda k: (f"f{k}.sh", "echo\n"), MAX_SCRIPT_FILES, lambda d: d["scripts"][0]),
        "scripts[train-script].files",
        MAX_SCRIPT_FILES,
    ),
]


@pytest.mark.parametrize("case,edit,path,bound", PAST, ids=[p[0] for p in PAST])
def test_a_list_past_its_bound_is_refused_naming_the_field_and_the_bound(case: str, edit: Edit, path: str, bound: int) -> None:
    message = refusal(fixtures.data("roce", edit))
    assert f"  {path}: {bound + 1} entries, at most {bound}: a bound of the program" in message, message


def test_the_largest_stack_holds_every_list_at_its_bound() -> None:
    """bench.scale.largest() is the worst case the bounds admit: each list and dict of the model at its bound somewhere
    (the names of all node sets share one bound, so no single set holds all of them)."""
    config = stacks.validate(scale.largest(), "bench/scale.py")
    longest: dict[str, int] = {}
    for path, n in _lists(config, ""):
        longest[path] = max(n, longest.get(path, 0))
    short = {path: (longest.get(path, 0), bound) for path, bound in FIELDS if longest.get(path, 0) != bound}
    # Queueing is off in the largest stack: Kueue's own bound (8 node labels per ResourceFlavor, gpu_node_selector's and
    # a set's together) cannot hold beside every other list at its bound. tests/config/test_queueing.py holds a queued
    # stack at the queueing bounds.
    assert short == {
        "node_sets[].nodes": (MAX_NAMED_NODES - (MAX_NODE_SETS - 2), MAX_NAMED_NODES),
        "queueing.quota": (0, MAX_NODE_SETS),
        "queueing.priority_classes": (0, MAX_PRIORITY_CLASSES),
    }, short
    assert sum(len(s.nodes) for s in config.node_sets) == MAX_NAMED_NODES
    assert sum(s.size for s in config.node_sets) == MAX_CLUSTER_NODES
    assert len(config.all_workloads()) + len(config.bandwidth_checks) == MAX_POD_TEMPLATES


# --- the bounds of what the program's work grows with: workloads, pod templates, nodes ----------------------------------


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
        (1, MAX_PORTS + 1, "workloads[w].ports (clusters/big.py:14)", f"{MAX_PORTS + 1} entries, at most {MAX_PORTS}"),
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
        # The bounds of every other list and dict: test_every_list_and_dict_has_a_bound_the_reference_lists (above) also
        # holds that the table names each field in its bound's row.
        *((name, getattr(config_values, name)) for name in LIST_BOUNDS),
    ]:
        assert re.search(rf"\| `{name}` \| {value:,} \|", section), name
