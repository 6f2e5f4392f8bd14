"""What stops the container or the launcher before it can say why:

- the user's Python environment: the pod starts the launcher isolated (`python3 -I`); what would still
  break the command it execs is refused (PYTHONHOME, a `$PATH` Kubernetes never expanded), the rest of
  PYTHON* is passed on and reported;
- a container memory limit that cannot be read: the pinning proof shrinks to what is safe without the
  out-of-memory guard, and the report says it ran unguarded;
- stdout or stderr closed (`>&-`) or full (/dev/full): a message on the stream that works and exit 3,
  never a traceback.

Process-level behaviour runs the real launcher in a subprocess: the interpreter's isolation, closed
descriptors and /dev/full exist only there.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
from typing import Any

import pytest

from tests.helpers import container, find, rendered_fixture
from tests.launcher.test_launcher import LAUNCHER_FILE, MIB, REPORT_DIR, L, contract_env, fake, kernel, memlock_facts, plan_for, tcp_env
from tests.launcher.test_launcher_hardening import _python38, run_bounded

BASE_PATH = os.environ.get("PATH", "/usr/bin:/bin")


def launch(
    env: dict[str, str], *args: str, redirect: str = "", python: str = sys.executable, isolated: bool = True
) -> subprocess.CompletedProcess[str]:
    """The real launcher, as the pod starts it (`python3 -I`); `redirect` is applied by bash to the
    launcher's own descriptors (`>&-` closes stdout, `2>/dev/full` fills stderr)."""
    command = [python, *(["-I"] if isolated else []), str(LAUNCHER_FILE), *args]
    return subprocess.run(
        ["bash", "-c", f'exec "$@" {redirect}', "bash", *command],
        env={"PATH": BASE_PATH, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr + result.stdout


# --------------------------------------------------------------------------------------------
# The user's Python environment
# --------------------------------------------------------------------------------------------


def shadowing_pythonpath(tmp_path: pathlib.Path) -> pathlib.Path:
    """A PYTHONPATH whose json.py (imported by the launcher) ends any interpreter that imports it."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "json.py").write_text("raise SystemExit(99)\n")
    return shadow


def test_the_pod_command_starts_the_launcher_isolated(tmp_path: pathlib.Path) -> None:
    command = container(find(rendered_fixture("tcp"), "StatefulSet", "one"))["command"]
    assert command[:2] == ["python3", "-I"] and command[-1].endswith("/launcher.py"), command
    # Run the pod's own command line: a PYTHONPATH that shadows the standard library does not reach
    # the launcher, and is still passed on (and reported) for the training it starts.
    shadow = shadowing_pythonpath(tmp_path)
    env = tcp_env(PYTHONPATH=str(shadow), PYTHONSTARTUP=str(shadow / "json.py"))
    argv = [sys.executable, *command[1:-1], str(LAUNCHER_FILE), "--print-env", "--sysfs-root", str(fake.empty(tmp_path / "sys"))]
    result = subprocess.run(argv, env={"PATH": BASE_PATH, **env}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "launcher: isolated (python3 -I)" in result.stderr
    python = json.loads(result.stderr.split(L.REPORT_PREFIX, 1)[1])["python"]
    assert python == {"isolated": True, "passed_on": {"PYTHONPATH": str(shadow), "PYTHONSTARTUP": str(shadow / "json.py")}}
    # The same without -I: the shadow json.py replaces the standard library's, and the launcher dies.
    plain = subprocess.run([argv[0], *argv[2:]], env={"PATH": BASE_PATH, **env}, capture_output=True, text=True, timeout=60)
    assert plain.returncode == 99


def test_pythonhome_and_an_unexpanded_path_are_refused_naming_variable_and_fix(tmp_path: pathlib.Path) -> None:
    # -I keeps PYTHONHOME from the launcher itself (checked: 3.8 and 3.11), so without the check the pod
    # would get past it, and torchrun would die at start.
    broken = subprocess.run([sys.executable, "-c", "pass"], env={"PYTHONHOME": "/nonexistent"}, capture_output=True, timeout=30)
    assert broken.returncode != 0
    env = tcp_env(PYTHONHOME="/nonexistent", PATH=f"/opt/venv/bin:$PATH:{BASE_PATH}")
    result = launch(env, "--print-env", "--sysfs-root", str(fake.empty(tmp_path)))
    no_traceback(result)
    assert result.returncode == 2, result.stderr
    assert "ERROR: PYTHONHOME is '/nonexistent': the launcher (python3 -I) ignores it, but torchrun" in result.stderr
    assert "Fix: remove PYTHONHOME from the workload's env" in result.stderr
    assert "ERROR: PATH is '/opt/venv/bin:$PATH:" in result.stderr and "with $PATH as text" in result.stderr
    assert "Fix: write the value out in full in the workload's env (the image's PATH included)" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("value", ["", sys.base_prefix, f"{sys.base_prefix}:{sys.base_exec_prefix}"], ids=["empty", "prefix", "both"])
def test_pythonhome_that_changes_nothing_is_passed_on(tmp_path: pathlib.Path, value: str) -> None:
    cfg = L.load_config(tcp_env(PYTHONHOME=value), str(tmp_path))
    assert cfg.python_env == {"PYTHONHOME": value}


@pytest.mark.parametrize(
    "name, value, shown_as",
    [
        ("PATH", "/opt/venv/bin:$PATH", "$PATH"),
        ("PATH", "${PATH}:/opt/venv/bin", "${PATH}"),
        ("PATH", "/opt/venv/bin:$(PATH)", "$(PATH)"),  # kubelet leaves a $(NAME) it cannot resolve as it is
        ("LD_LIBRARY_PATH", "/usr/local/cuda/lib64:$LD_LIBRARY_PATH", "$LD_LIBRARY_PATH"),
        ("PYTHONPATH", "/workspace:${PYTHONPATH:-}", "${PYTHONPATH:-}"),
        ("NCCL_TOOLS", "$PATH/nccl", "$PATH"),
    ],
)
def test_values_kubernetes_did_not_expand_are_refused(tmp_path: pathlib.Path, name: str, value: str, shown_as: str) -> None:
    with pytest.raises(L.ConfigError) as info:
        L.load_config(tcp_env(**{name: value}), str(tmp_path))
    (problem,) = str(info.value).splitlines()
    assert problem.startswith(f"{name} is {value!r}, with {shown_as} as text: Kubernetes never expands")
    assert "Fix: write the value out in full" in problem


@pytest.mark.parametrize(
    "name, value",
    [
        ("LAUNCHER_ARGS", json.dumps(["bash", "-c", "export PATH=/opt/venv/bin:$PATH; exec python train.py"])),
        ("TRAIN_OUTPUT", "$HOME/out"),  # another name: possibly a template a script expands
        ("NCCL_SOCKET_NTHREADS", "4"),
        ("MY_PATHS", "$PATHS"),  # $PATHS is not $PATH
        ("PRICE", "$5"),
    ],
)
def test_values_that_only_look_like_references_pass(tmp_path: pathlib.Path, name: str, value: str) -> None:
    cfg = L.load_config(tcp_env(**{name: value}), str(tmp_path))
    assert cfg.mode == "tcp"


def test_pythonpath_and_pythonstartup_are_reported_and_passed_on(tmp_path: pathlib.Path) -> None:
    python = {"PYTHONPATH": "/workspace/src", "PYTHONSTARTUP": "/workspace/.pythonrc", "PYTHONUNBUFFERED": "1"}
    plan, report = plan_for(fake.barcelona(tmp_path), **python)
    assert plan.errors == []
    assert plan.summary["python"] == {"isolated": True, "passed_on": python}
    assert "PYTHONPATH='/workspace/src': passed on to the command; torchrun and the training script import from it first" in report
    assert "PYTHONSTARTUP='/workspace/.pythonrc': passed on to the command; read by interactive interpreters only" in report
    assert not any("PYTHON" in w for w in plan.warnings)
    child = L.child_environment(contract_env(**python), plan)
    assert {k: child[k] for k in python} == python


def test_a_launcher_started_without_isolation_says_so(tmp_path: pathlib.Path) -> None:
    shadow = tmp_path / "site"
    shadow.mkdir()
    result = launch(tcp_env(PYTHONPATH=str(shadow)), "--print-env", "--sysfs-root", str(fake.empty(tmp_path / "sys")), isolated=False)
    assert result.returncode == 0, result.stderr
    assert "launcher: NOT isolated (started without python3 -I" in result.stderr
    assert f"WARNING: the launcher was started without python3 -I, so PYTHONPATH={L.shown(str(shadow))} was on its own" in result.stderr
    assert json.loads(result.stderr.split(L.REPORT_PREFIX, 1)[1])["python"]["isolated"] is False


# --------------------------------------------------------------------------------------------
# The container's memory limit cannot be read: no out-of-memory guard, so pin only what is safe
# --------------------------------------------------------------------------------------------


def unknown_limit(root: pathlib.Path, how: str) -> None:
    if how == "garbage":
        fake.cgroup_v2(root, "a lot")
    elif how == "unreadable":
        # A directory where the file should be: open() fails even for root, as an unreadable file would.
        (root / "fs" / "cgroup" / "memory.max").mkdir(parents=True)
        (root / "fs" / "cgroup" / "memory" / "memory.limit_in_bytes").mkdir(parents=True)
    else:
        assert how == "missing"


@pytest.mark.parametrize("how", ["missing", "garbage", "unreadable"])
def test_unknown_memory_limit_pins_only_the_unguarded_size(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    unknown_limit(tmp_path, how)
    pinned: list[int] = []
    monkeypatch.setattr(L, "prove_pinning", lambda size: pinned.append(size) or 0)
    cgroup = L.read_cgroup_memory(str(tmp_path))
    assert not cgroup.known
    cfg = L.load_config(contract_env(LAUNCHER_PIN_BYTES=str(4096 * MIB)), str(tmp_path))
    facts = L.gather_memlock(cfg, cgroup)
    assert pinned == [L.UNGUARDED_PIN_BYTES] == [16 * MIB]
    assert (facts.pin_bytes, facts.requested_bytes, facts.asked_bytes) == (16 * MIB, 4096 * MIB, 4096 * MIB)
    # A smaller request is pinned as it is; a known limit guards the whole request.
    small = L.load_config(contract_env(LAUNCHER_PIN_BYTES=str(MIB)), str(tmp_path))
    assert L.gather_memlock(small, cgroup).requested_bytes is None and pinned[-1] == MIB
    L.gather_memlock(cfg, L.CgroupMemory(None, "memory.max"))
    assert pinned[-1] == 4096 * MIB


def test_unknown_memory_limit_is_reported_as_unguarded(tmp_path: pathlib.Path) -> None:
    facts = memlock_facts(pin_bytes=16 * MIB, requested_bytes=256 * MIB)
    cgroup = L.CgroupMemory(None, "", "neither memory.max (cgroup v2) nor memory/memory.limit_in_bytes (v1) is readable")
    cfg = L.load_config(contract_env(), str(fake.barcelona(tmp_path)))
    plan = L.decide(cfg, L.Facts(facts, tuple(L.read_rdma_ports(str(tmp_path))), tuple(L.read_net_names(str(tmp_path))), cgroup))
    report = L.render_report(cfg, plan)
    assert plan.errors == []
    (warning,) = [w for w in plan.warnings if "out-of-memory guard" in w]
    assert warning.startswith("memory pinning ran without the out-of-memory guard: the container's memory limit is unknown (neither")
    assert "the proof pinned 16 MiB instead of LAUNCHER_PIN_BYTES 256 MiB, so it proves less than asked" in warning
    assert "container memory limit: unknown" in report and "so the proof pins at most 16 MiB" in report
    assert "proof buffer: 16 MiB, not LAUNCHER_PIN_BYTES 256 MiB" in report
    assert "mlock of 16 MiB: ok" in report
    pinning = plan.summary["pinning"]
    assert (pinning["pin_bytes"], pinning["proof_bytes"], pinning["memory_guard"]) == (256 * MIB, 16 * MIB, False)


def test_unknown_memory_limit_warns_even_for_a_small_proof(tmp_path: pathlib.Path) -> None:
    root = fake.empty(tmp_path / "sys", ["lo", "eth0", "net1"])
    fake.add_port(root, "mlx5_6")
    env = contract_env(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(64 * 1024))
    result = launch(env, "--print-env", "--sysfs-root", str(root))
    assert result.returncode == 0, result.stderr
    assert "WARNING: memory pinning ran without the out-of-memory guard" in result.stderr
    report = json.loads(result.stderr.split(L.REPORT_PREFIX, 1)[1])
    assert report["container_memory"]["known"] is False
    assert report["pinning"]["memory_guard"] is False and report["pinning"]["proof_bytes"] == 64 * 1024


@kernel
@pytest.mark.parametrize("how", ["missing", "garbage"])
def test_kernel_unknown_memory_limit_never_pins_the_whole_request_blind(tmp_path: pathlib.Path, how: str) -> None:
    # A 4 GiB request in a process allowed 1 GiB of address space: the kernel refuses it as a container's
    # memory limit would (there, with the OOM killer and exit 137). Unguarded, the launcher must not try.
    root = fake.empty(tmp_path, ["lo", "eth0", "net1"])
    fake.add_port(root, "mlx5_6")
    unknown_limit(root, how)
    env = contract_env(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(4096 * MIB))
    result = run_bounded(env, "--print-env", "--sysfs-root", str(root))
    assert result.returncode == 0, result.stderr
    assert "mlock of 16 MiB: ok" in result.stderr
    assert "the proof pinned 16 MiB instead of LAUNCHER_PIN_BYTES 4096 MiB" in result.stderr
    # With the limit known ("max": none), the guard passes and the whole request is tried.
    shutil.rmtree(root / "fs", ignore_errors=True)
    fake.cgroup_v2(root, "max")
    result = run_bounded(env, "--print-env", "--sysfs-root", str(root))
    assert result.returncode == 2 and "mlock of 4096 MiB: FAILED (ENOMEM" in result.stderr


# --------------------------------------------------------------------------------------------
# stdout or stderr closed or full: a message on the stream that works, exit 3, never a traceback
# --------------------------------------------------------------------------------------------

PRINT_ENV_CASES = [
    # (redirect, stream that carries the message, what it says)
    (">&-", "stderr", "launcher: could not write the environment (--print-env) to stdout (it is closed); verdict: start; exit 3"),
    (">/dev/full", "stderr", "launcher: could not write the environment (--print-env) to stdout (No space left on device)"),
    ("2>&-", "stdout", "launcher: could not write the report to stderr (it is closed); verdict: start; exit 3"),
    ("2>/dev/full", "stdout", "launcher: could not write the report to stderr (No space left on device); verdict: start"),
    (">&- 2>&-", None, ""),
    (">/dev/full 2>/dev/full", None, ""),
]


def _interpreters() -> list[str]:
    found = [sys.executable]
    old = _python38()
    return found + ([old] if old else [])


@pytest.mark.parametrize("python", _interpreters(), ids=lambda p: "python3.8" if "3.8" in p else "python")
@pytest.mark.parametrize("redirect, stream, message", PRINT_ENV_CASES, ids=[c[0] for c in PRINT_ENV_CASES])
def test_print_env_with_stdout_or_stderr_closed_or_full(
    tmp_path: pathlib.Path, python: str, redirect: str, stream: str | None, message: str
) -> None:
    result = launch(tcp_env(), "--print-env", "--sysfs-root", str(fake.empty(tmp_path)), redirect=redirect, python=python)
    no_traceback(result)
    # 1 would be an uncaught exception, 120 a failed flush at exit.
    assert result.returncode == L.EXIT_OUTPUT_FAILED, result.stderr
    if stream is None:
        assert result.stdout == result.stderr == ""
        return
    said = result.stdout if stream == "stdout" else result.stderr
    assert said.splitlines()[-1].startswith(message), said
    if stream == "stdout":
        assert "NCCL_IB_DISABLE=1" not in result.stdout  # no environment without its report


@pytest.mark.parametrize(
    "args, redirect, stream, message",
    [
        (["--help"], ">&-", "stderr", "launcher: could not write the help to stdout (it is closed); exit 3"),
        (["--help"], ">/dev/full", "stderr", "launcher: could not write the help to stdout (No space left on device); exit 3"),
        (["--bogus"], "2>&-", "stdout", "launcher: could not write the usage error to stderr (it is closed); exit 3"),
        (
            ["--print-env"],
            "2>/dev/full",
            "stdout",
            "launcher: could not write the report to stderr (No space left on device); verdict: would",
        ),
    ],
    ids=["help-stdout-closed", "help-stdout-full", "usage-error-stderr-closed", "config-error-stderr-full"],
)
def test_help_usage_errors_and_config_errors_with_a_stream_gone(
    tmp_path: pathlib.Path, args: list[str], redirect: str, stream: str, message: str
) -> None:
    env = tcp_env(LAUNCHER_MODE="rmda")  # a configuration error, for the --print-env case
    for python in _interpreters():
        result = launch(env, *args, "--sysfs-root", str(fake.empty(tmp_path)), redirect=redirect, python=python)
        no_traceback(result)
        assert result.returncode == L.EXIT_OUTPUT_FAILED, (python, result.stderr)
        said = result.stdout if stream == "stdout" else result.stderr
        assert said.splitlines()[-1].startswith(message), (python, said)


def test_no_exec_when_the_report_cannot_be_written_but_a_closed_stdout_is_the_commands(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "ran"
    report = REPORT_DIR / "isolation-exec.json"
    env = tcp_env(LAUNCHER_RUN="command", LAUNCHER_ARGS=json.dumps(["touch", str(marker)]), LAUNCHER_REPORT_JSON=str(report))
    args = ("--sysfs-root", str(fake.empty(tmp_path / "sys")), "--env-file", str(tmp_path / "env"))
    result = launch(env, *args, redirect="2>/dev/full")
    no_traceback(result)
    assert result.returncode == L.EXIT_OUTPUT_FAILED
    assert not marker.exists()
    assert result.stdout == (
        "launcher: could not write the report to stderr (No space left on device); verdict: start, but nothing was executed; "
        f"the report is in {report}; exit 3\n"
    )
    # The launcher itself never writes stdout when it execs: a closed one does not stop the command.
    result = launch(env, *args, redirect=">&-")
    assert result.returncode == 0, result.stderr
    assert marker.exists()


def test_in_process_output_failure_is_exit_3(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setattr(sys, "stdout", None)  # what Python sets when descriptor 1 is closed at start
    assert L.main(["--print-env", "--sysfs-root", str(fake.empty(tmp_path))], tcp_env()) == L.EXIT_OUTPUT_FAILED
    assert capsys.readouterr().err.splitlines()[-1].startswith("launcher: could not write the environment (--print-env) to stdout")
