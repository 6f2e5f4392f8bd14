"""What the child that runs a stack module answers, and only that, is taken: a module that reaches into the child's
machinery or writes an answer of its own is reported by its file, never taken; an answer of the wrong shape is one clear
error; a stack file whose settings would be silently dropped is an error; and a committed stack that cannot be checked
to compare with is said. Each case is reproduced as the audit that found it did it, on a project of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import stacks
from cli.main import main
from config import project as project_folder

GOOD = """from config import ClusterConfig, NodeSet, Security, ServiceAccount
CONFIG = ClusterConfig(
    name="{name}", description="x", gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    namespaces=["{name}-ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="{name}-ns")]),
)
"""

# A module that replaces what ends the child, then fails: before the fix the forked child unwound into the command and
# ran `check` of every stack again, over and over.
REACHES_IN = {
    "replaces the child's exit": (
        "import stacks\nfrom stacks import _child\n"
        "def _boom(code):\n    raise stacks.ConfigError('clusters/evil.py: fine')\n"
        "_child._exit = _boom\n_child.answer = None\nraise ValueError('then fails')\n"
    ),
    "clears the program's globals, then exits": (
        "import policy.core as c\nimport stacks._child as k\nk.__dict__.clear()\nc.__dict__.clear()\nraise SystemExit(4)\n"
    ),
    "clears its own builtins, then exits": "import builtins\nbuiltins.__dict__.clear()\nraise SystemExit(5)\n",
}

# A module that writes an answer of its own into the pipe, then dies: before the fix a forged `[1]` was a traceback.
# (The audit's module wrote into every pipe it had; here the test tells it which one is the answer's, so it cannot
# write into the test runner's own pipes.)
FORGES = """import os, signal
os.write(int(os.environ["FORGE_FD"]), {answer!r})
os.kill(os.getpid(), signal.{how})
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "good.py").write_text(GOOD.format(name="good"), encoding="utf-8")
    monkeypatch.setattr(project_folder, "ROOT", tmp_path)
    monkeypatch.setattr(stacks, "_LOADED", {})
    return tmp_path


def check_all(capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["check", "--all"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("text", list(REACHES_IN.values()), ids=list(REACHES_IN))
def test_a_module_cannot_bring_its_child_back_into_the_program(project: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    (project / stacks.CLUSTERS / "evil.py").write_text(text, encoding="utf-8")
    code, out, err = check_all(capsys)
    assert code == 2 and "Traceback" not in out + err
    assert out.count("good: ok") == 1, out  # checked once, by this process only
    assert err.count("clusters/evil.py") == 1, err


@pytest.mark.parametrize(
    ("answer", "how"),
    [(b"[1]", "SIGKILL"), (b'{"config": 3}', "SIGKILL"), (b'{"error": "clusters/good.py: forged"}', "SIGTERM"), (b"[1]", "SIGSTOP")],
    ids=["list-killed", "bad-config-killed", "forged-error-terminated", "list-stopped"],
)
def test_an_answer_the_module_writes_itself_is_never_taken(
    project: Path, answer: bytes, how: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stacks, "MODULE_TIME_LIMIT", 3.0)  # a stopped child is ended at the time limit
    real_pipe = os.pipe

    def pipe() -> tuple[int, int]:  # the answer's pipe, named to the forked child
        read, write = real_pipe()
        os.environ["FORGE_FD"] = str(write)
        return read, write

    monkeypatch.setattr(os, "pipe", pipe)
    monkeypatch.setenv("FORGE_FD", "-1")
    (project / stacks.CLUSTERS / "evil.py").write_text(FORGES.format(answer=answer, how=how), encoding="utf-8")
    code, out, err = check_all(capsys)
    assert code == 2 and "Traceback" not in out + err
    assert "good: ok" in out and "forged" not in out + err
    assert "error: clusters/evil.py: the module" in err, err


@pytest.mark.parametrize(
    "answer",
    [[1], {"config": 3}, {"error": 3}, {"config": {}, "calls": [[["a"], "f"]]}, {"config": {}, "calls": [[[True], "f", 1]]},
     {"config": {}, "yaml": ["f", [[["a"], "x"]]]}, {"config": {}}, "text"],
)  # fmt: skip
def test_an_answer_of_the_wrong_shape_is_one_clear_error(answer: object) -> None:
    with pytest.raises(stacks.ConfigError, match="answered something that is not a config"):
        stacks._config_from("evil", answer, "")


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("confg:\n  kubernetes:context: good\n", "'confg' is not a key of a stack file"),
        ("config:\n  - gpu-training:tier: project\n", "`config:` must be a mapping of settings"),
        ("- config: {}\n", "a stack file is a mapping"),
        ("encryptionsalt: x\n", "`config:` must be a mapping of settings (kubernetes:context, gpu-training:tier, ...), not missing"),
    ],
    ids=["misspelled", "a-list", "not-a-mapping", "no-config"],
)
def test_a_stack_file_whose_settings_would_be_dropped_is_an_error(project: Path, text: str, phrase: str) -> None:
    (project / "Pulumi.good.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(stacks.ConfigError) as err:
        stacks.pulumi_stacks()
    assert str(err.value).startswith("Pulumi.good.yaml: ") and phrase in str(err.value)


def test_a_committed_stack_that_cannot_be_compared_with_is_said(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The committed module exits: the check cannot tell what is new, and says so instead of marking nothing silently."""
    module = project / stacks.CLUSTERS / "good.py"
    module.write_text("import sys\nsys.exit(0)\n", encoding="utf-8")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "a broken commit"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args], cwd=project, check=True)
    module.write_text(GOOD.format(name="good").replace('description="x"', 'description="x\\u200b"'), encoding="utf-8")
    sys.modules.pop(f"{stacks.CLUSTERS}.good", None)
    code = main(["check", "good"])
    out, _ = capsys.readouterr()
    assert code == 0 and "hidden-characters" in out
    assert "good: nothing is marked new: the stack at HEAD cannot be checked to compare with (clusters/good.py" in out, out
