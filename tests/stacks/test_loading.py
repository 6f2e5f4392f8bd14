"""A stack module is imported in process, once, and its mistakes are one line naming the file and the line to change:
an exception, an exit, a syntax error, a YAML writer's habit, a loop, a model built around validation. What it prints
goes to stderr, one broken stack stops only itself, and nothing of a module's mistake reaches another stack's check.
Every case runs on a project folder of the test's own."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import stacks
from cli.main import main
from config import project as project_folder
from config import provenance
from tests.helpers import ROOT

GOOD = """from config import ClusterConfig, NodeSet, Security, ServiceAccount, Workload
{before}
CONFIG = ClusterConfig(
    name="{name}",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    namespaces=["ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="h-kim", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa",
                 gpus_per_node=4, transport="tcp", nodes=2{extra}),
    ],
)
{after}
"""
CONFIG_LINE, NAMESPACES_LINE, WORKLOAD_LINE = 3, 8, 11  # in GOOD


def module(name: str = "scratch", before: str = "", after: str = "", extra: str = "") -> str:
    return GOOD.format(name=name, before=before, after=after, extra=extra)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """write(NAME=module text, ...): the modules of a project folder of the test's own."""
    monkeypatch.setattr(project_folder, "ROOT", tmp_path)
    (tmp_path / stacks.CLUSTERS).mkdir()

    def write(**modules: str) -> Path:
        for name, text in modules.items():
            (tmp_path / stacks.CLUSTERS / f"{name}.py").write_text(text, encoding="utf-8")
        return tmp_path

    return write


def load_error(name: str = "scratch") -> str:
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load(name)
    assert "Traceback" not in str(err.value)
    return str(err.value)


def test_a_module_loads_once_with_the_line_of_each_value_until_it_changes(project: Callable[..., Path], tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    count = f"with open({str(runs)!r}, 'a') as f:\n    f.write('x')"
    project(scratch=module(before=count))
    config = stacks.load("scratch")
    assert stacks.load("scratch") is config and runs.read_text() == "x"
    assert provenance.shown(provenance.origin(config, ("workloads", 0, "nodes"))) == f"clusters/scratch.py:{WORKLOAD_LINE + 2}"
    assert provenance.shown(provenance.origin(config, ("namespaces", 0))) == f"clusters/scratch.py:{NAMESPACES_LINE + 1}"
    assert provenance.shown(provenance.origin(config, ())) == f"clusters/scratch.py:{CONFIG_LINE + 1}"
    project(scratch=module(before=count).replace("nodes=2", "nodes=1"))  # an edit: the module runs again
    assert stacks.load("scratch").workloads[0].nodes == 1 and runs.read_text() == "xx"


MISTAKES = [
    ("import sys\nsys.exit(3)", "clusters/scratch.py:3: the module exited (code 3) while it was loaded"),
    ("import sys\nsys.exit('bye')", "clusters/scratch.py:3: the module exited (code 1) while it was loaded"),
    ("raise KeyboardInterrupt", "clusters/scratch.py:2: the stack module failed: KeyboardInterrupt"),
    ("x = {}['missing']", "clusters/scratch.py:2: the stack module failed: KeyError: 'missing'"),
    ("def f(:\n    pass", "clusters/scratch.py:2: not valid Python"),
    (
        "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()",
        "clusters/scratch.py:5: the stack module failed: E: (its message cannot be shown)",
    ),
    (
        "import time\ntime.sleep(600)",
        "clusters/scratch.py: the module did not finish within its time limit (GPU_TRAINING_MODULE_TIME_LIMIT; at clusters/scratch.py:3)",
    ),
    ("while True:\n    pass", "the module did not finish within its time limit"),
]


@pytest.mark.parametrize("code,expected", MISTAKES)
def test_a_mistake_is_one_line_at_its_line_and_never_a_pass(
    code: str, expected: str, project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(stacks.TIME_LIMIT_KEY, "0.5")
    project(scratch=module(before=code))
    assert expected in load_error()
    assert main(["check", "scratch"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: clusters/scratch.py") and "Traceback" not in err, err


def test_bytes_that_are_not_text_and_a_bad_time_limit_are_said(project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(scratch=module())
    (root / stacks.CLUSTERS / "scratch.py").write_bytes(module().encode() + b"# \xff\n")
    line = module().count("\n") + 1  # the module's file and the line of the byte, as the other mistakes are named
    assert f"clusters/scratch.py:{line}: not a UTF-8 text file" in load_error()
    project(scratch=module())
    monkeypatch.setenv(stacks.TIME_LIMIT_KEY, "soon")
    assert "GPU_TRAINING_MODULE_TIME_LIMIT is 'soon': give a number of seconds above 0" in load_error()


def test_a_loop_is_stopped_off_the_main_thread_too(project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The live tier's inline Pulumi program loads the stack in a gRPC thread, where no SIGALRM reaches."""
    monkeypatch.setenv(stacks.TIME_LIMIT_KEY, "0.5")
    project(scratch=module(before="while True:\n    pass"))
    said: list[str] = []
    thread = threading.Thread(target=lambda: said.append(load_error()))
    thread.start()
    thread.join(120)  # a hang guard: stopped at its limit, or the thread would loop for ever
    assert not thread.is_alive() and "did not finish within its time limit" in said[0], said


def test_what_a_module_prints_never_reaches_a_commands_output(tmp_path: Path) -> None:
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "scratch.py").write_text(module(before="print('not: [yaml')"), encoding="utf-8")
    program = (
        "import sys\nfrom pathlib import Path\nfrom config import project\nproject.ROOT = Path(sys.argv[1])\n"
        "from cli.main import main\nraise SystemExit(main(['config', 'scratch']))\n"
    )
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and yaml.safe_load(done.stdout)["name"] == "scratch", done.stderr
    assert "not: [yaml" in done.stderr


AROUND = [
    (
        "CONFIG = CONFIG.model_copy(update={'workloads': [CONFIG.workloads[0].model_copy(update={'nodes': 0})]})",
        "workloads[h-kim].nodes",
        "greater than or equal to 1",
    ),
    ("CONFIG.namespaces.append('Not_A_Namespace')", f"namespaces[1] (clusters/scratch.py:{NAMESPACES_LINE})", "valid Kubernetes name"),
    (
        "CONFIG.workloads[0].env['BAD NAME'] = 'x'",
        f"workloads[h-kim].env['BAD NAME'] (clusters/scratch.py:{WORKLOAD_LINE})",
        "not a valid environment",
    ),
    ("CONFIG.workloads.append(Workload.model_construct(name='ghost', namespace='ns', nodes=0))", "workloads[ghost].nodes", "greater than"),
    ("CONFIG = ClusterConfig.model_construct(**{**dict(CONFIG), 'gpu_model': 3})", "gpu_model", "valid string"),
    ("object.__setattr__(CONFIG, 'description', object())", "description (clusters/scratch.py:5)", "Input should be a valid string"),
]


@pytest.mark.parametrize("code,field,phrase", AROUND)
def test_a_config_built_around_validation_is_validated_once_more(code: str, field: str, phrase: str, project: Callable[..., Path]) -> None:
    project(scratch=module(after=code))
    message = load_error()
    assert f"  {field}" in message and phrase in message, message


HELPERS = [
    ("X = 1\nY = undefined_name\n", "clusters/_common.py:2 (from clusters/{stack}.py:2): the stack module failed: NameError"),
    ("X = 1\ndef f(:\n", "clusters/_common.py:2: not valid Python"),
    (
        "from config import Workload\nBAD = Workload(name='w', namespace='ns', user='u', image='quay.io/a/b:1', "
        "service_account='sa', gpus_per_node=4, transport='tcp', nodes=0)\n",
        "(clusters/_common.py:2)",
    ),
]


@pytest.mark.parametrize("helper,expected", HELPERS)
def test_a_helper_module_is_named_as_itself_whichever_stack_imported_it(helper: str, expected: str, project: Callable[..., Path]) -> None:
    uses = "from clusters import _common  # noqa"
    project(_common=helper, alpha=module(name="alpha", before=uses), beta=module(name="beta", before=uses))
    for stack in ("alpha", "beta"):
        assert expected.format(stack=stack) in load_error(stack)


def test_a_working_helper_module_is_imported_from_the_projects_clusters(project: Callable[..., Path]) -> None:
    project(_common="NODES = 1\n", scratch=module(before="from clusters._common import NODES").replace("nodes=2", "nodes=NODES"))
    assert stacks.load("scratch").workloads[0].nodes == 1


# (the Workload's extra arguments, or a line before CONFIG; the line named; the hint)
HABITS = [
    (", nodes: 1", WORKLOAD_LINE + 1, "use `nodes=1` (a keyword argument is written with =; `nodes: 1` is how a YAML file writes it)"),
    ("\n                 state: 1", WORKLOAD_LINE + 2, "use `state=1`"),
    (', env: {"A": "1"}', WORKLOAD_LINE + 1, 'use `env={"A": "1"}`'),
    (", env: dict(A='1, 2')", WORKLOAD_LINE + 1, "use `env=dict(A='1, 2')`"),
    (", shared=true", WORKLOAD_LINE + 1, "Python writes True: `shared=True`"),
    (", shared=off", WORKLOAD_LINE + 1, "Python writes False"),
    (", command=null", WORKLOAD_LINE + 1, "Python writes None: `command=None`"),
    (", env={PATH: '/bin'}", WORKLOAD_LINE + 1, 'quote a key (`"PATH": ...`)'),
    (", image_pull=never-pull", WORKLOAD_LINE + 1, 'if it is text, quote it: `image_pull="never-pull"`'),
    ("NS = team-a-dev", 2, 'quote it: `NS="team-a-dev"`'),
    ("NAMESPACE = 'ns'\nX = NAMESPACES", 3, "did you mean `NAMESPACE` (clusters/scratch.py:2), which the module defines?"),
]


@pytest.mark.parametrize("code,line,hint", HABITS)
def test_a_yaml_writers_python_mistake_gets_a_hint_in_the_stack_files_words(
    code: str, line: int, hint: str, project: Callable[..., Path]
) -> None:
    project(scratch=module(extra=code) if code.startswith((",", "\n")) else module(before=code))
    message = load_error()
    assert message.startswith(f"clusters/scratch.py:{line}: ") and hint in message, message


BROKEN = [
    module(name="broken", extra=", nodes=0").replace("nodes=2, nodes=0", "nodes=0"),
    module(name="broken", before="import sys\nsys.exit(0)"),
    module(name="broken", before="while True:\n    pass"),
]


@pytest.mark.parametrize("broken", BROKEN)
@pytest.mark.parametrize("command", [["render", "--all"], ["check", "--all"], ["check", "broken", "good"]])
def test_one_broken_stack_stops_only_itself(
    broken: str,
    command: list[str],
    project: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project(broken=broken, good=module(name="good"))
    monkeypatch.setenv(stacks.TIME_LIMIT_KEY, "0.5")
    stacks.load("good")  # loaded once for the process, whatever the machine's load
    code = main([*command, *(["--out", str(tmp_path / "out")] if command[0] == "render" else [])])
    out, err = capsys.readouterr()
    assert code == 2 and "error: clusters/broken.py" in err and "broken: not checked or rendered: its config does not load" in err, err
    assert ("good: wrote" if command[0] == "render" else "good: ok") in out and "broken:" not in out, out


@pytest.mark.parametrize("command", [["render", "--all"], ["check"]])
def test_a_project_without_stacks_says_so(
    command: list[str], project: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project(_common="X = 1\n")  # a helper alone is no stack
    assert main([*command, *(["--out", str(tmp_path / "out")] if command[0] == "render" else [])]) == 2
    assert capsys.readouterr().err.startswith("error: no stacks: a stack is a module clusters/NAME.py")


def test_a_committed_stack_that_cannot_be_compared_with_is_said(project: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The committed module exits: check cannot tell what is new, and says so instead of marking nothing silently."""
    root = project(good="import sys\nsys.exit(0)\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "a broken commit"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args], cwd=root, check=True)
    project(good=module(name="good").replace('description="x"', 'description="x\\u200b"'))
    assert main(["check", "good"]) == 0
    out = capsys.readouterr().out
    assert (
        "hidden-characters" in out
        and "good: nothing is marked new: the stack at HEAD cannot be checked to compare with (clusters/good.py" in out
    ), out
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout == " M clusters/good.py\n"


def test_a_constant_the_module_never_defines_is_not_told_to_be_quoted(project: Callable[..., Path]) -> None:
    """`namespace=NAMESPACE` quoted would be an invalid name: the fix is to define it, or use a constant that exists."""
    project(scratch=module(before='NS = "ns"').replace('namespace="ns", user', "namespace=NAMESPACE, user"))
    message = load_error()
    assert message.startswith(f"clusters/scratch.py:{WORKLOAD_LINE}: the stack module failed: NameError"), message
    assert "the module defines no NAMESPACE: define it (`NAMESPACE = ...`) above its first use, or use one it defines: NS" in message
    assert "quote" not in message, message
