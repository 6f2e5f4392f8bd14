"""A Python set where the model expects a list has no order (it follows the hash seed): refused naming the field, in a
dict, a YAML file (!!set) or a stack module (at its line), so two renders of a stack never differ."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import stacks
from cli.main import main
from config import project
from tests import fixtures
from tests.fixtures import Edit
from tests.helpers import ROOT, refusal

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
    message = refusal(fixtures.data("roce", edit))
    assert f"  {path}: a set has no order" in message and "write a list [...]" in message, message


def test_several_sets_are_each_named() -> None:
    message = refusal(fixtures.data("roce", lambda d: d.update(namespaces={"team-a", "team-b"}, notes={"a", "b"})))
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
        ('["sleep", "infinity"]', ["gpu_tolerations (clusters/sets.py:7)"]),
        ('{"sleep", "infinity"}', ["workloads[w].args (clusters/sets.py:12)"]),  # the first model that fails: the line to change
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
