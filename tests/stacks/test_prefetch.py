"""stacks.prefetch: render and check start every stack's module in its child before they import the program, and a load
takes the answer. What a module does stays contained as in a load (stacks/_child.py); a module edited after it was
started is run again from its new text; a module that loops is stopped by the time limit counted from the wait, and
stops only itself; no child outlives the load."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import stacks
from cli.main import main
from config import project as project_folder
from stacks import _child, _process

MODULE = """from config import ClusterConfig, NodeSet, Security, ServiceAccount, Workload
{before}
CONFIG = ClusterConfig(
    name="{name}",
    description="{description}",
    gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    namespaces=["{name}-ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="{name}-ns")]),
    workloads=[Workload(name="w", namespace="{name}-ns", user="u", image="quay.io/a/b:1", service_account="sa", gpus_per_node=4,
                        transport="tcp")],
)
"""


def module(name: str, description: str = "x", before: str = "") -> str:
    return MODULE.format(name=name, description=description, before=before)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    monkeypatch.setattr(project_folder, "ROOT", tmp_path)
    monkeypatch.setattr(stacks, "_STARTED", {})
    (tmp_path / stacks.CLUSTERS).mkdir()

    def write(**modules: str) -> Path:
        for name, text in modules.items():
            (tmp_path / stacks.CLUSTERS / f"{name}.py").write_text(text, encoding="utf-8")
        return tmp_path

    return write


def no_child_left() -> bool:
    """No child of this process is tracked, and none has ended unreaped (a zombie: a child the loader forgot)."""
    try:
        ended, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:  # no child at all
        return not _process.CHILDREN
    return ended == 0 and not _process.CHILDREN


def test_a_started_module_s_answer_is_the_config_a_load_gives(project: Callable[..., Path], tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    project(one=module("one", before=f"open({str(runs)!r}, 'a').write('x')"), two=module("two"))
    stacks.prefetch(["one", "two"])
    assert set(stacks._STARTED) == {tmp_path / "clusters" / "one.py", tmp_path / "clusters" / "two.py"}
    one = stacks.load("one")
    assert one.name == "one" and one.namespaces == ["one-ns"] and stacks.load("two").name == "two"
    assert runs.read_text(encoding="utf-8") == "x"  # run once, in the child prefetch started: the load took its answer
    assert stacks._STARTED == {} and no_child_left()


def test_a_module_edited_after_its_start_is_run_again_from_its_new_text(project: Callable[..., Path]) -> None:
    root = project(one=module("one", description="before"))
    stacks.prefetch(["one"])
    (root / "clusters" / "one.py").write_text(module("one", description="after"), encoding="utf-8")
    assert stacks.load("one").description == "after"
    assert no_child_left()


def test_a_looping_module_stops_only_itself(
    project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stacks, "MODULE_TIME_LIMIT", 1.0)
    project(loops=module("loops", before="while True:\n    pass"), good=module("good"))
    assert main(["check", "--all"]) == 2
    out, err = capsys.readouterr()
    assert "clusters/loops.py: the module did not finish within 1 s" in err and "good: ok" in out, (out, err)
    assert no_child_left()


def test_a_module_that_exits_is_reported_as_a_load_reports_it(project: Callable[..., Path]) -> None:
    project(gone=module("gone", before="import os\nos._exit(3)"))
    stacks.prefetch(["gone"])
    with pytest.raises(stacks.ConfigError, match=r"clusters/gone.py:\d+: the module exited \(code 3\)"):
        stacks.load("gone")
    assert no_child_left()


def test_a_stack_deployed_from_a_yaml_file_is_not_started(project: Callable[..., Path]) -> None:
    root = project(filed=module("filed"))
    (root / "Pulumi.filed.yaml").write_text("config:\n  gpu-training:configFile: filed.yaml\n", encoding="utf-8")
    stacks.prefetch(["filed"])
    assert stacks._STARTED == {}


def test_an_abandoned_child_is_ended_and_reaped() -> None:
    started = _child.start(lambda: __import__("time").sleep(60))
    assert isinstance(started, _child.Started) and started.pid in _process.CHILDREN
    _child.abandon(started)
    assert started.pid not in _process.CHILDREN and no_child_left()


def test_a_command_that_stops_before_its_loads_leaves_no_child(project: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    project(one=module("one"), two=module("two"))
    assert main(["render", "--out", ""]) == 2  # refused before any stack is loaded
    assert "--out '' names no folder" in capsys.readouterr().err
    assert stacks._STARTED == {} and no_child_left()
