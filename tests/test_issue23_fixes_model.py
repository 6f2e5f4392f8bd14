"""Issue 23, round 3 hardening of the config model (config/: values, cluster, workloads, stack):

- bounds: every list and dict of every model has a bound (docs/reference.md "Bounds"), so the largest stack the
  model accepts (bench/scale.py `largest()`, at every bound) is checked in seconds; past a bound, one line naming the
  field, the line and the bound.
- reasons: a reason (broad_grant_reason, route_reason, privileged_reason, an accepted warning's, node_level's, a PVC
  fix's, a hand-made object's source) made only of whitespace is no reason, and is refused naming the field.
- sets: a Python set where the model expects a list has no order (it follows the hash seed): refused, naming the field,
  so two renders of a stack never differ.
"""

from __future__ import annotations

import os
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
from config.stack import ClusterConfig
from config.values import (
    MAX_ACCEPTED_WARNINGS,
    MAX_ARGS,
    MAX_CLUSTER_NODES,
    MAX_ENV,
    MAX_HAND_MADE,
    MAX_NAMED_NODES,
    MAX_NODE_SETS,
    MAX_NOTES,
    MAX_POD_TEMPLATES,
    MAX_PRIORITY_CLASSES,
    MAX_SCRIPT_FILES,
    MAX_STORAGE_CLASSES,
    MAX_TOLERATIONS,
)
from tests import fixtures
from tests.helpers import ROOT

Data = dict[str, Any]
Edit = Callable[[Data], Any]


def refused(data: Data) -> str:
    """The config's validation error as a user reads it (validate raises one ConfigError naming each field)."""
    with pytest.raises(stacks.ConfigError) as caught:
        stacks.validate(data, "my.yaml")
    return str(caught.value)


def edited(name: str, edit: Edit) -> Data:
    data = fixtures.data(name)
    edit(data)
    return data


# --- reasons --------------------------------------------------------------------------------------------------------

BLANKS = [" ", "\t\n  ", "\u200b", " \u00a0 "]
"""Whitespace, a zero-width space and a non-breaking space: nothing a reader sees."""


def _accepted(reason: str) -> Edit:
    return lambda d: d["accepted_warnings"].__setitem__(0, {**d["accepted_warnings"][0], "reason": reason})


def _routed_debugger(reason: str) -> Edit:
    def edit(d: Data) -> None:
        fixtures.workload(d, "dev")["ports"][1].update(route=True, route_reason=reason)

    return edit


REASONS: list[tuple[str, str, Callable[[str], Edit], str]] = [
    ("ib", "broad grant", lambda r: lambda d: d["security"].update(broad_grant_reason=r), "security.broad_grant_reason"),
    (
        "ib",
        "privileged workload",
        lambda r: lambda d: fixtures.workload(d, "env").update(privileged_reason=r),
        "workloads[env].privileged_reason",
    ),
    ("ib", "accepted warning", _accepted, "accepted_warnings[0].reason"),
    ("ib", "pvc fix", lambda r: lambda d: d["pvc_fixes"][0].update(reason=r), "pvc_fixes[0].reason"),
    ("roce", "routed debugger", _routed_debugger, "workloads[dev].ports[debugpy].route_reason"),
    ("roce", "node level", lambda r: lambda d: d.update(node_level={"iommu_passthrough": True, "reason": r}), "node_level.reason"),
    (
        "roce",
        "control plane",
        lambda r: lambda d: d.update(node_level={"pool": "master", "control_plane_reason": r}),
        "node_level.control_plane_reason",
    ),
    (
        "roce",
        "hand-made source",
        lambda r: lambda d: d.update(hand_made=[{"kind": "ServiceAccount", "name": "trainer", "namespace": "team-a", "source": r}]),
        "hand_made[trainer].source",
    ),
    (
        "roce",
        "bandwidth check",
        lambda r: lambda d: d["bandwidth_checks"][0].update(memlock="privileged", privileged_reason=r),
        "bandwidth_checks[fabric].privileged_reason",
    ),
]


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
@pytest.mark.parametrize("fixture,case,edit,path", REASONS, ids=[r[1] for r in REASONS])
def test_a_reason_of_whitespace_only_is_refused_naming_the_field(
    fixture: str, case: str, edit: Callable[[str], Edit], path: str, blank: str
) -> None:
    message = refused(edited(fixture, edit(blank)))
    assert f"  {path}: a reason needs words" in message, message
    assert message.count("\n") == 1, message  # one line: this field, no other


@pytest.mark.parametrize("fixture,case,edit,path", REASONS, ids=[r[1] for r in REASONS])
def test_a_reason_with_words_is_kept_without_its_surrounding_whitespace(
    fixture: str, case: str, edit: Callable[[str], Edit], path: str
) -> None:
    config = stacks.validate(edited(fixture, edit("  the seed says so \n")), "my.yaml")
    assert "the seed says so" in config.model_dump_json()
    assert "  the seed says so \\n" not in config.model_dump_json()


def test_a_blank_broad_grant_reason_no_longer_passes_check(tmp_path: Path) -> None:
    """The audit's case through the CLI: the privileged SCC granted with broad_grant_reason ' ' is refused (exit 2),
    naming the field and the YAML line that writes it."""
    data = edited("ib", lambda d: d["security"].update(broad_grant_reason=" "))
    path = tmp_path / "ib.yaml"
    text = yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    line = text[: text.index("broad_grant_reason")].count("\n") + 1
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"security.broad_grant_reason ({path}:{line}): a reason needs words" in done.stderr, done.stderr


def test_an_empty_node_level_reason_is_the_default_not_a_blank() -> None:
    """node_level.reason is optional: "" (not given) is accepted, whitespace is refused (above)."""
    config = stacks.validate(edited("roce", lambda d: d.update(node_level={"reason": ""})), "my.yaml")
    assert config.node_level.reason == ""


# --- sets -----------------------------------------------------------------------------------------------------------

SETS: list[tuple[str, Edit, str]] = [
    (
        "gpu_tolerations",
        lambda d: d.update(gpu_tolerations=frozenset({("key", "nvidia.com/gpu")})),
        "gpu_tolerations",
    ),
    ("namespaces", lambda d: d.update(namespaces={"team-a", "team-b"}), "namespaces"),
    (
        "access_modes",
        lambda d: d["storage_classes"][1].update(access_modes={"ReadWriteMany", "ReadWriteOnce"}),
        "storage_classes[cephfs].access_modes",
    ),
    ("args", lambda d: fixtures.workload(d, "train").update(args={"bash", "/scripts/train.sh"}), "workloads[train].args"),
    ("notes", lambda d: d.update(notes=frozenset({"a", "b"})), "notes"),
    ("devices", lambda d: d["fabric"].update(devices={"mlx5_0", "mlx5_1"}), "fabric.devices"),
]


@pytest.mark.parametrize("case,edit,path", SETS, ids=[s[0] for s in SETS])
def test_a_set_where_a_list_is_expected_is_refused_naming_the_field(case: str, edit: Edit, path: str) -> None:
    message = refused(edited("roce", edit))
    assert f"  {path}: a set has no order" in message and "write a list [...]" in message, message


def test_several_sets_are_each_named() -> None:
    message = refused(edited("roce", lambda d: d.update(namespaces={"team-a", "team-b"}, notes={"a", "b"})))
    assert "  namespaces: a set has no order" in message and "  notes: a set has no order" in message, message


def test_a_yaml_set_is_refused_too(tmp_path: Path) -> None:
    """YAML's !!set tag would read as a Python set: the loader refuses it, at its line and column."""
    text = yaml.safe_dump(fixtures.roce(), sort_keys=False)
    text = text.replace("namespaces:\n- team-a\n- team-b\n", "namespaces: !!set {team-a: null, team-b: null}\n")
    assert "!!set" in text
    path = tmp_path / "roce.yaml"
    path.write_text(text, encoding="utf-8")
    line = text[: text.index("namespaces:")].count("\n") + 1
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{path}:{line}:" in done.stderr and "a set has no order" in done.stderr, done.stderr


SET_MODULE = """from config import ClusterConfig, NodeSet, Security, ServiceAccount, Toleration, Workload
CONFIG = ClusterConfig(
    name="sets",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="pool", count=4, gpus_per_node=4)],
    gpu_tolerations={{Toleration(key="nvidia.com/gpu"), Toleration(key="nvidia.com/gpu.product", operator="Equal", value="H100")}},
    namespaces=["ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="w", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa", gpus_per_node=4, transport="tcp",
                 args={args}),
    ],
)
"""


@pytest.mark.parametrize(
    "args,where",
    [
        ('["sleep", "infinity"]', ["gpu_tolerations (clusters/sets.py:2)"]),
        ('{"sleep", "infinity"}', ["gpu_tolerations (clusters/sets.py:2)", "workloads[w].args (clusters/sets.py:11)"]),
    ],
)
def test_a_set_in_a_stack_module_is_refused_naming_its_line(
    args: str, where: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "sets.py").write_text(SET_MODULE.format(args=args), encoding="utf-8")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.sets", raising=False)
    assert main(["check", "sets"]) == 2
    err = capsys.readouterr().err
    assert "error: clusters/sets.py: invalid configuration" in err and "Traceback" not in err, err
    for w in where:
        assert f"  {w}" in err and "a set has no order" in err, err


@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_renders_do_not_depend_on_the_hash_seed(seed: str, tmp_path: Path) -> None:
    """A stack that validates renders the same under any PYTHONHASHSEED: config (the validated stack) prints the same."""
    path = tmp_path / "roce.yaml"
    path.write_text(yaml.safe_dump(fixtures.roce(), sort_keys=False), encoding="utf-8")
    run = lambda s: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "stacks", "config", "--config", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": s},
    )  # fmt: skip
    first, other = run("0"), run(seed)
    assert first.returncode == 0, first.stderr
    assert first.stdout == other.stdout


# --- bounds ---------------------------------------------------------------------------------------------------------


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
    message = refused(edited("roce", edit))
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
    # a set's together) cannot hold beside every other list at its bound. tests/test_issue27_queueing.py holds a queued
    # stack at the queueing bounds.
    assert short == {
        "node_sets[].nodes": (MAX_NAMED_NODES - (MAX_NODE_SETS - 2), MAX_NAMED_NODES),
        "queueing.quota": (0, MAX_NODE_SETS),
        "queueing.priority_classes": (0, MAX_PRIORITY_CLASSES),
    }, short
    assert sum(len(s.nodes) for s in config.node_sets) == MAX_NAMED_NODES
    assert sum(s.size for s in config.node_sets) == MAX_CLUSTER_NODES
    assert len(config.all_workloads()) + len(config.bandwidth_checks) == MAX_POD_TEMPLATES


@pytest.mark.parametrize("tolerations", [1, MAX_TOLERATIONS])
def test_gpu_toleration_rule_finds_an_untolerated_taint_among_many(tolerations: int) -> None:
    """The rule looks each taint up among the pod's tolerations (no longer tolerations x taints): a pod missing one taint
    of many is still found, and one tolerating them all is not."""
    import policy
    from components.program import objects, patches

    def edit(d: Data) -> None:
        d["gpu_tolerations"] = [
            {"key": f"example.com/t{k}", "operator": "Equal", "value": "x", "effect": "NoSchedule"} for k in range(tolerations - 1)
        ]

    config = fixtures.config("roce", edit)
    found = policy.check(config, objects(config), patches(config), only=["gpu-toleration"])
    assert found == []
    # The same pods, held against one taint more than they tolerate.
    wider = fixtures.config("roce", lambda d: (edit(d), d["gpu_tolerations"].append({"key": "example.com/extra", "operator": "Exists"})))
    found = policy.check(wider, objects(config), patches(config), only=["gpu-toleration"])
    assert found and all("example.com/extra" in f.message for f in found), found
