"""A cluster module is user code, and it is contained. Whatever one module does (exits, loops, prints, changes the
program) stays in the child process that runs it: checking or rendering one stack never depends on another's module,
and a misbehaving module is reported by its file and line, never passes a check. What a module returns is validated as
data, as a YAML config is; the stack files' names and tiers are checked; the Python mistakes of a YAML writer get a
hint in the stack file's words, with the whole value in the fix; and one broken stack stops only itself in
`render --all` and `check --all`.

Every case runs on a project folder of the test's own (the real clusters/ stays untouched).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

import policy
import policy.rules  # noqa: F401  (the registry filled, as a check fills it)
import stacks
from cli.main import main
from config import project as project_folder
from config import provenance
from tests.helpers import ROOT

CASES: dict[str, int] = {}


def cases(kind: str, table: list[object]) -> list[object]:
    CASES[kind] = CASES.get(kind, 0) + len(table)
    return table


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
CONFIG_LINE = 3  # the line of ClusterConfig( in GOOD
WORKLOAD_LINE = 11  # the line of Workload( in GOOD
NAMESPACES_LINE = 8  # the line of namespaces=[...] in GOOD: a plain value of ClusterConfig(...) has its keyword's line


def module(name: str = "scratch", before: str = "", after: str = "", extra: str = "") -> str:
    return GOOD.format(name=name, before=before, after=after, extra=extra)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """write(NAME=module text, ...): the modules of a project folder of the test's own, which project_folder.ROOT names."""
    monkeypatch.setattr(project_folder, "ROOT", tmp_path)
    (tmp_path / stacks.CLUSTERS).mkdir()

    def write(**modules: str) -> Path:
        for name, text in modules.items():
            (tmp_path / stacks.CLUSTERS / f"{name}.py").write_text(text, encoding="utf-8")
        return tmp_path

    return write


@contextmanager
def hang_guard(seconds: int) -> Iterator[None]:
    """Fail the test, instead of hanging the suite, when the block has not returned after `seconds` (SIGALRM in this
    process; a forked child does not inherit the alarm). Generous: only a hang takes that long, however loaded the
    machine."""

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def load_error(name: str = "scratch") -> str:
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load(name)
    message = str(err.value)
    assert "Traceback" not in message
    return message


def test_a_valid_module_loads_with_the_line_of_each_call(project: Callable[..., Path]) -> None:
    project(scratch=module())
    config = stacks.load("scratch")
    # a field is reported at its own line (nodes=2, the line after its Workload(), where the user changes it
    assert config.name == "scratch" and config.workloads[0].nodes == 2
    assert provenance.shown(provenance.origin(config, ("workloads", 0, "nodes"))) == f"clusters/scratch.py:{WORKLOAD_LINE + 1}"
    assert provenance.shown(provenance.origin(config, ("namespaces", 0))) == f"clusters/scratch.py:{NAMESPACES_LINE}"
    assert provenance.shown(provenance.origin(config, ())) == f"clusters/scratch.py:{CONFIG_LINE}"
    assert stacks.load("scratch") is config  # run once per process


CACHE = cases("cache", [1, 2, 5])


@pytest.mark.parametrize("loads", CACHE)
def test_a_module_runs_once_per_process_until_it_changes(loads: int, project: Callable[..., Path], tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    count = f"with open({str(runs)!r}, 'a') as f:\n    f.write('x')"
    project(scratch=module(before=count))
    first = [stacks.load("scratch") for _ in range(loads)]
    assert runs.read_text() == "x" and all(c is first[0] for c in first)
    project(scratch=module(before=count).replace("nodes=2", "nodes=1"))  # an edit: the module runs again
    assert stacks.load("scratch").workloads[0].nodes == 1 and runs.read_text() == "xx"


# --- exits: the module's, never the program's -----------------------------------------------------------


EXITS = cases(
    "exit",
    [
        ("import sys\nsys.exit(3)", "clusters/scratch.py:3: the module exited (code 3) while it was loaded"),
        ("import sys\nsys.exit(0)", "clusters/scratch.py:3: the module exited (code 0) while it was loaded"),
        ("import sys\nsys.exit('bye')", "clusters/scratch.py:3: the module exited (code 1) while it was loaded"),
        ("import os\nos._exit(3)", "clusters/scratch.py:3: the module exited (code 3) while it was loaded"),
        ("import os\nos._exit(0)", "clusters/scratch.py:3: the module exited (code 0) while it was loaded"),
        ("from os import _exit\n_exit(4)", "clusters/scratch.py:3: the module exited (code 4) while it was loaded"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", "clusters/scratch.py: the module was killed by signal SIGTERM"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "clusters/scratch.py: the module was killed by signal SIGKILL"),
        ("raise KeyboardInterrupt", "clusters/scratch.py:2: the stack module failed: KeyboardInterrupt"),
    ],
)


@pytest.mark.parametrize("code,expected", EXITS)
@pytest.mark.parametrize("where", ["before", "after"])
def test_an_exit_in_a_module_is_reported_and_never_ends_the_program(
    where: str, code: str, expected: str, project: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    project(scratch=module(**{where: code}))
    message = load_error()
    if where == "before":
        assert message.startswith(expected), message
    else:
        assert expected.split(": ", 1)[1] in message and message.startswith("clusters/scratch.py"), message
    assert "a stack module only defines CONFIG" in message or "KeyboardInterrupt" in message
    code_, out, err = main(["check", "scratch"]), *capsys.readouterr()
    assert code_ == 2 and out == "" and err.startswith("error: clusters/scratch.py")  # never a pass


def test_a_module_that_cannot_be_given_a_process_is_reported(project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    project(scratch=module())
    message = load_error()
    assert message.startswith("clusters/scratch.py: the module was not run: no child process could be started"), message


# --- time: a module that does not finish is stopped ------------------------------------------------------


LOOPS = cases(
    "loop",
    [
        "while True:\n    pass",
        "import time\ntime.sleep(600)",
        "import threading\nthreading.Event().wait()",
        "import signal\nsignal.pause()",
    ],
)


@pytest.mark.parametrize("code", LOOPS)
def test_a_module_that_does_not_finish_is_stopped_at_the_time_limit(
    code: str, project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stacks, "MODULE_TIME_LIMIT", 0.5)
    project(scratch=module(before=code))
    with hang_guard(60):  # stopped at its limit, or the load would wait for the module (600 s, or for ever)
        message = load_error()
    assert message.startswith("clusters/scratch.py: the module did not finish within 0.5 s (GPU_TRAINING_MODULE_TIME_LIMIT)"), message


def test_a_module_reading_stdin_gets_nothing_instead_of_waiting(project: Callable[..., Path]) -> None:
    project(scratch=module(before="input()"))
    assert load_error().startswith("clusters/scratch.py:2: the stack module failed: EOFError")


TIME_LIMITS = cases(
    "loop",
    [
        ("1.5", "1.5"),
        ("", "20.0"),
        ("soon", "GPU_TRAINING_MODULE_TIME_LIMIT is 'soon': give a number of seconds above 0"),
        ("0", "GPU_TRAINING_MODULE_TIME_LIMIT is '0': give a number of seconds above 0"),
        ("nan", "GPU_TRAINING_MODULE_TIME_LIMIT is 'nan': give a number of seconds above 0"),
    ],
)


@pytest.mark.parametrize("value,expected", TIME_LIMITS)
def test_the_time_limit_is_set_by_the_environment(value: str, expected: str, project: Callable[..., Path]) -> None:
    limit = stacks._time_limit(value)
    assert str(limit).startswith(expected)
    if isinstance(limit, str):  # a value that is no time limit: every load says so, and nothing runs
        project(scratch=module())
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(stacks, "MODULE_TIME_LIMIT", limit)
            assert load_error() == limit


# --- output: a print never reaches a command's stdout -------------------------------------------------------


PRINTS = cases(
    "print",
    [
        "print('hello: world')\nprint('---')",
        "import sys\nsys.stdout.write('not: [yaml\\n')",
        "import os\nos.write(1, b'raw bytes on fd 1: [\\n')",
        "import sys\nsys.__stdout__.write('{{{\\n'); sys.__stdout__.flush()",
    ],
)


@pytest.mark.parametrize("code", PRINTS)
def test_config_output_stays_parseable_whatever_a_module_prints(code: str, tmp_path: Path) -> None:
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "scratch.py").write_text(module(before=code), encoding="utf-8")
    program = (
        "import sys\nfrom pathlib import Path\nfrom config import project\nproject.ROOT = Path(sys.argv[1])\n"
        "from cli.main import main\nsys.stdout.flush()\nraise SystemExit(main(['config', 'scratch']))\n"
    )
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(done.stdout)
    assert data["name"] == "scratch" and data["workloads"][0]["nodes"] == 2
    assert stacks.validate(data, "out").name == "scratch"
    assert done.stderr.strip(), "the module's output is on stderr, where the user sees it"


# --- the program's state: a module cannot change it ------------------------------------------------------


MUTATIONS = cases(
    "mutation",
    [
        "import policy.core\npolicy.core.RULES.clear()",
        "import stacks\nstacks.validate = lambda *args, **kwargs: None",
        "import config.provenance\nconfig.provenance.origin = lambda *args: None",
        "import sys\nsys.modules['yaml'] = None",
        "import policy\npolicy.check = lambda *args, **kwargs: []",
        "import os\nos._exit = lambda code: None",  # the child still ends, never returns into the program
        "import os\nos.environ['GPU_TRAINING_LEAK'] = '1'\nos.chdir('/')",
    ],
)


@pytest.mark.parametrize("code", MUTATIONS)
def test_one_modules_changes_to_the_program_do_not_reach_the_check_of_another(
    code: str, project: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rules = len(policy.core.RULES)
    # `other` changes the program while it loads; `scratch` has one finding (an image tag without a digest)
    project(other=module(name="other", before=code), scratch=module())
    here = os.getcwd()
    stacks.load("other")
    assert len(policy.core.RULES) == rules and "GPU_TRAINING_LEAK" not in os.environ and os.getcwd() == here
    code_ = main(["check", "scratch"])  # loads `other` too (policy.run.project_stacks)
    out, _ = capsys.readouterr()
    assert code_ == 0 and f"scratch: ok: 0 errors, 1 warning ({rules} rules)" in out, out
    assert f"warning image workloads[h-kim].image (clusters/scratch.py:{WORKLOAD_LINE})" in out, out
    assert provenance.origin(stacks.load("scratch"), ("workloads", 0)) is not None


# --- what the module returns is validated as data --------------------------------------------------------


AROUND = cases(
    "as-data",
    [
        (
            "CONFIG = CONFIG.model_copy(update={'workloads': [CONFIG.workloads[0].model_copy(update={'nodes': 0})]})",
            "workloads[h-kim].nodes",
            "greater than or equal to 1",
            None,  # a copy of a copy: no call of the module's built either
        ),
        (
            "CONFIG.workloads[0] = CONFIG.workloads[0].model_copy(update={'nodes': -1})",
            "workloads[h-kim].nodes",
            "greater than",
            CONFIG_LINE,
        ),
        ("CONFIG.namespaces.append('Not_A_Namespace')", "namespaces[1]", "", CONFIG_LINE),
        ("CONFIG.workloads[0].env['BAD NAME'] = 'x'", "workloads[h-kim].env['BAD NAME']", "not a valid environment", WORKLOAD_LINE),
        (
            "CONFIG.workloads.append(Workload.model_construct(name='ghost', namespace='ns', nodes=0))",
            "workloads[ghost].nodes",
            "greater than",
            CONFIG_LINE,
        ),
        ("CONFIG = ClusterConfig.model_construct(**{**dict(CONFIG), 'gpu_model': 3})", "gpu_model", "valid string", None),
        ("CONFIG = ClusterConfig.model_construct(**{**dict(CONFIG), 'namespaces': 'ns'})", "namespaces", "valid list", None),
    ],
)


@pytest.mark.parametrize("code,field,phrase,line", AROUND)
def test_a_config_built_around_validation_is_validated_before_it_is_used(
    code: str, field: str, phrase: str, line: int | None, project: Callable[..., Path]
) -> None:
    project(scratch=module(after=code))
    message = load_error()
    assert message.startswith("clusters/scratch.py: invalid configuration\n"), message
    assert f"  {field}" in message and phrase in message, message
    if line is not None:  # the line of the call the value was written in, where the module has one
        assert f"{field} (clusters/scratch.py:{line})" in message, message
    else:
        assert "(clusters/" not in message, message


UNSERIALIZABLE = cases(
    "as-data",
    [
        "object.__setattr__(CONFIG, 'description', object())",
        "object.__setattr__(CONFIG, 'namespaces', [object()])",
    ],
)


@pytest.mark.parametrize("code", UNSERIALIZABLE)
def test_a_value_that_is_not_data_is_refused(code: str, project: Callable[..., Path]) -> None:
    project(scratch=module(after=code))
    message = load_error()
    assert message.startswith("clusters/scratch.py: CONFIG holds a value that is not config data") or message.startswith(
        "clusters/scratch.py: invalid configuration"
    ), message


# --- a helper module is named as itself ---------------------------------------------------------------------


HELPERS = cases(
    "helper",
    [
        ("X = 1\nY = undefined_name\n", "clusters/_common.py:2 (from clusters/{stack}.py:2): the stack module failed: NameError"),
        ("X = 1\ndef f(:\n", "clusters/_common.py:2: not valid Python"),
        (
            "X = 1\nraise ValueError('helper broke')\n",
            "clusters/_common.py:2 (from clusters/{stack}.py:2): the stack module failed: ValueError",
        ),
        (
            "from config import Workload\n"
            "BAD = Workload(name='w', namespace='ns', user='u', image='quay.io/a/b:1', service_account='sa', gpus_per_node=4,"
            " transport='tcp', nodes=0)\n",
            "(clusters/_common.py:2)",
        ),
    ],
)


@pytest.mark.parametrize("helper,expected", HELPERS)
def test_a_helper_module_is_named_as_itself_whichever_stack_imported_it(helper: str, expected: str, project: Callable[..., Path]) -> None:
    uses = "from clusters import _common  # noqa"
    project(_common=helper, alpha=module(name="alpha", before=uses), beta=module(name="beta", before=uses))
    for stack in ("alpha", "beta"):  # each is told about the helper, not about the stack that imported it first
        message = load_error(stack)
        assert expected.format(stack=stack) in message, message


def test_a_working_helper_module_is_imported_from_the_projects_clusters(project: Callable[..., Path]) -> None:
    project(_common="NODES = 1\n", scratch=module(before="from clusters._common import NODES", extra="").replace("nodes=2", "nodes=NODES"))
    assert stacks.load("scratch").workloads[0].nodes == 1


# --- an exception whose message fails --------------------------------------------------------------------


BAD_STR = cases(
    "bad-str",
    [
        "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()",
        "class E(Exception):\n    def __str__(self):\n        return 3\nraise E()",
        "class E(BaseException):\n    def __str__(self):\n        raise E()\nraise E()",
    ],
)


@pytest.mark.parametrize("code", BAD_STR)
def test_an_exception_whose_message_fails_is_reported(code: str, project: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    project(scratch=module(before=code))
    message = load_error()
    assert message.startswith("clusters/scratch.py:5: the stack module failed: E: (its message cannot be shown"), message
    assert main(["check", "scratch"]) == 2
    assert "Traceback" not in capsys.readouterr().err


# --- the stack files -------------------------------------------------------------------------------------


STACK_FILES = cases(
    "stack-file",
    [
        ("scratch", {"gpu-training:tier": "platfrom"}, "gpu-training:tier is 'platfrom'; expected one of all, platform, project"),
        ("scratch", {"gpu-training:tier": 3}, "gpu-training:tier is 3"),
        ("scratch", {"gpu-training:tier": ""}, "gpu-training:tier is ''"),
        ("scratch", {"gpu-training:tier": None}, "gpu-training:tier is None"),
        ("", {"gpu-training:cluster": "scratch"}, "Pulumi..yaml: the stack name is empty"),
        ("scrаtch", {}, "the stack name 'scrаtch' is not ASCII ('а' is U+0430 CYRILLIC SMALL LETTER A)"),
        ("ｓcratch", {}, "is not ASCII ('ｓ' is U+FF53 FULLWIDTH LATIN SMALL LETTER S)"),
        ("Scratch", {}, "the stack name 'Scratch' differs from the cluster 'scratch' only by case or look-alike characters"),
        ("sсratch-platform", {"gpu-training:cluster": "scratch"}, "is not ASCII ('с' is U+0441 CYRILLIC SMALL LETTER ES)"),
        ("lab", {"gpu-training:cluster": "SCRATCH"}, "gpu-training:cluster 'SCRATCH' differs from the cluster 'scratch'"),
        ("lab", {"gpu-training:cluster": ""}, "gpu-training:cluster is empty"),
        ("labl", {"gpu-training:cluster": "scratch"}, "the stack name 'labl' differs from the cluster 'lab1'"),
        ("scratc1", {"gpu-training:cluster": "scratch"}, ""),
        ("lab", {"gpu-training:cluster": ["scratch"]}, "gpu-training:cluster is not a name"),
    ],
)


@pytest.mark.parametrize("stack,settings,expected", STACK_FILES)
def test_a_stack_file_that_would_deploy_something_else_than_it_seems_is_an_error(
    stack: str, settings: dict[str, object], expected: str, project: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(scratch=module(), lab1=module(name="lab1"))
    (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": settings}, allow_unicode=True), encoding="utf-8")
    if not expected:  # one character away but not a look-alike: a name of its own
        assert [s.name for s in stacks.pulumi_stacks()] == [stack]
        return
    with pytest.raises(stacks.ConfigError) as err:
        stacks.pulumi_stacks()
    assert expected in str(err.value), err.value
    assert str(err.value).startswith(f"Pulumi.{stack}.yaml: ")
    assert main(["list", "--pulumi-stacks"]) == 2
    assert expected in capsys.readouterr().err


def test_two_stack_files_told_apart_only_by_case_are_an_error(project: Callable[..., Path]) -> None:
    root = project(scratch=module())
    for stack in ("lab", "LAB"):
        (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": {"gpu-training:cluster": "scratch"}}), encoding="utf-8")
    with pytest.raises(stacks.ConfigError, match="only by case or look-alike characters: give each stack a name of its own"):
        stacks.pulumi_stacks()


# --- a YAML writer's Python mistakes ---------------------------------------------------------------------


YAML_HABITS = cases(
    "yaml-habit",
    [
        ("\n                 state: 1", WORKLOAD_LINE + 2, "not valid Python", "use `state=1`"),
        (", nodes: 1", WORKLOAD_LINE + 1, "not valid Python", "use `nodes=1`"),
        (", image_pull=running", WORKLOAD_LINE + 1, "NameError", 'quote it: `image_pull="running"`'),
        (", shared=true", WORKLOAD_LINE + 1, "NameError", "Python writes True: `shared=True`"),
        (", shared=false", WORKLOAD_LINE + 1, "NameError", "Python writes False: `shared=False`"),
        (", shared=yes", WORKLOAD_LINE + 1, "NameError", "Python writes True"),
        (", shared=off", WORKLOAD_LINE + 1, "NameError", "Python writes False"),
        (", command=null", WORKLOAD_LINE + 1, "NameError", "Python writes None: `command=None`"),
        (", env={PATH: '/bin'}", WORKLOAD_LINE + 1, "NameError", 'quote a key (`"PATH": ...`)'),
    ],
)


@pytest.mark.parametrize("extra,line,kind,hint", YAML_HABITS)
def test_a_yaml_writers_python_mistake_gets_a_hint_in_the_stack_files_words(
    extra: str, line: int, kind: str, hint: str, project: Callable[..., Path]
) -> None:
    project(scratch=module(extra=extra))
    message = load_error()
    assert message.startswith(f"clusters/scratch.py:{line}: "), message
    assert kind in message and hint in message, message


# The whole value in the fix: brackets kept whole, a dashed word whole (HABIT_MODULE's namespaces and Workload( are on
# GOOD's lines).
HABIT_MODULE = """from config import ClusterConfig, NodeSet, Security, ServiceAccount, Workload
{before}
CONFIG = ClusterConfig(
    name="scratch",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    {namespaces}
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="h-kim", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa",
                 gpus_per_node=4, transport="tcp", nodes=2{extra}),
    ],
)
"""

# (before CONFIG, the namespaces line, extra arguments of the Workload, the line named, the hint)
HABITS: dict[str, tuple[str, str, str, int, str]] = {
    "a list as a YAML value": ('NS = "ns"', "namespaces:[NS],", "", NAMESPACES_LINE, "use `namespaces=[NS]`"),
    "a list with spaces": ('NS = "ns"', "namespaces: [NS, 'b'],", "", NAMESPACES_LINE, "use `namespaces=[NS, 'b']`"),
    "a call as a YAML value": (
        "", 'namespaces=["ns"],', ", env: dict(A='1, 2')", WORKLOAD_LINE + 1, "use `env=dict(A='1, 2')`"
    ),
    "a mapping as a YAML value": ("", 'namespaces=["ns"],', ', env: {"A": "1"}', WORKLOAD_LINE + 1, 'use `env={"A": "1"}`'),
    "a dashed word": ("NS = nccl-test", 'namespaces=[NS],', "", 2, 'if it is text, quote it: `NS="nccl-test"`'),
    "a word of three parts": ("NS = team-a-dev", 'namespaces=[NS],', "", 2, 'quote it: `NS="team-a-dev"`'),
    "a dashed word in a list": ("", "namespaces=[nccl-test],", "", NAMESPACES_LINE, 'if it is text, quote it: `"nccl-test"`'),
    "a dashed keyword value": ("", 'namespaces=["ns"],', ", image_pull=never-pull", WORKLOAD_LINE + 1, '`image_pull="never-pull"`'),
    "a plain word still": ("", 'namespaces=["ns"],', ", image_pull=running", WORKLOAD_LINE + 1, '`image_pull="running"`'),
}  # fmt: skip


@pytest.mark.parametrize("case", HABITS)
def test_a_yaml_habit_gets_the_whole_value_in_its_fix(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before, namespaces, extra, line, hint = HABITS[case]
    monkeypatch.setattr(project_folder, "ROOT", tmp_path)
    (tmp_path / stacks.CLUSTERS).mkdir()
    text = HABIT_MODULE.format(before=before, namespaces=namespaces, extra=extra)
    (tmp_path / stacks.CLUSTERS / "scratch.py").write_text(text, encoding="utf-8")
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load("scratch")
    message = str(err.value)
    assert message.startswith(f"clusters/scratch.py:{line}: ") and "Traceback" not in message, message
    assert hint in message, message


# --- one broken stack stops only itself -------------------------------------------------------------------


BROKEN = cases(
    "one-of-all",
    [
        module(name="broken", extra=", nodes=0").replace("nodes=2, nodes=0", "nodes=0"),
        module(name="broken", before="import sys\nsys.exit(0)"),
        module(name="broken", before="import os\nos._exit(0)"),
        module(name="broken", before="while True:\n    pass"),
        module(name="broken", before="import policy.core\npolicy.core.RULES.clear()\nraise SystemExit(0)"),
    ],
)


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
    # The good stack loads under the default time limit and stays loaded (a module runs once per process): only the
    # broken one meets the short limit below, which stops a looping module soon; a busy machine may take longer than
    # half a second to run any module.
    stacks.load("good")
    monkeypatch.setattr(stacks, "MODULE_TIME_LIMIT", 0.5)
    out_dir = tmp_path / "out"
    code = main([*command, *(["--out", str(out_dir)] if command[0] == "render" else [])])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "error: clusters/broken.py" in err and "broken: not checked or rendered: its config does not load" in err, err
    if command[0] == "render":
        assert (out_dir / "good" / "outputs.json").is_file() and not (out_dir / "broken").exists()
        assert "good: wrote" in out
    else:
        assert "good: ok" in out, out
        assert "broken" not in out


@pytest.mark.parametrize("command", [["render", "--all"], ["check", "--all"], ["check"]])
def test_a_project_without_stacks_says_so(
    command: list[str], project: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project(_common="X = 1\n")  # a helper alone is no stack
    assert main([*command, *(["--out", str(tmp_path / "out")] if command[0] == "render" else [])]) == 2
    assert capsys.readouterr().err.startswith("error: no stacks: a stack is a module clusters/NAME.py")


def test_the_committed_stacks_load_as_their_modules_build_them() -> None:
    """The boundary changes nothing for a module that behaves: each committed stack is equal to its data validated."""
    for name in stacks.names():
        config = stacks.load(name)
        assert stacks.validate(json.loads(json.dumps(config.model_dump(mode="json"))), name) == config


GRPC = """
import sys
from concurrent import futures
import grpc
import stacks
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
channel = grpc.insecure_channel(f"127.0.0.1:{port}")
grpc.channel_ready_future(channel).result(timeout=30)
for _ in range(ROUNDS):
    for name in stacks.names():
        stacks._LOADED.clear()
        stacks.load(name)
print("loaded")
server.stop(0)
"""


@pytest.mark.parametrize("spawn", [True, False])
def test_modules_load_in_a_process_with_grpc_threads_like_the_pulumi_program(spawn: bool) -> None:
    """The Pulumi program loads its stack's module with the language host's gRPC threads running. It spawns a fresh
    interpreter for each (policy/gate.py sets SPAWN_MODULES); a fork that gRPC's handlers crash is retried that way."""
    program = f"import stacks\nstacks.SPAWN_MODULES = {spawn}\nROUNDS = {1 if spawn else 5}\n" + GRPC
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "loaded", done.stderr


def test_cases_per_class() -> None:
    print("\ncontainment cases per class: " + "; ".join(f"{k} {v}" for k, v in CASES.items()))
    assert all(v >= 3 for v in CASES.values()), CASES
