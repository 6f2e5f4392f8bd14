"""The launcher's command line, run as the pod runs it (`python3 -I /opt/launcher`): the container command itself, from
a folder laid out as the ConfigMap volume, on this interpreter and on Python 3.8; --print-env, exec, the exit codes;
the files it writes (the DeepSpeed hostfile, the JSON report, the environment for oc exec sessions); the user's
Python environment; and stdout or stderr closed or full."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import pytest

from components.launcher import FOLDER, contract, launch, shipped_files
from tests.helpers import container, find, free_port, rendered_fixture
from tests.launcher import launcher_sysfs as fake
from tests.launcher.pod import BASE_PATH, REPORT_DIR, configmap_volume, contract_env, plan_for, python38, report_of, run_launcher, tcp_env

# --------------------------------------------------------------------------------------------
# The container command, as the ConfigMap mounts the launcher
# --------------------------------------------------------------------------------------------


def test_the_configmap_holds_the_package_folders_files() -> None:
    cm = find(rendered_fixture("tcp"), "ConfigMap", "gpu-training-launcher")
    assert cm["data"] == shipped_files()
    assert set(cm["data"]) == {p.name for p in FOLDER.glob("*.py")} - {"__init__.py"}
    # Flat keys that import as the standard library never could: none shadows one of its modules.
    assert not {key.removesuffix(".py") for key in cm["data"]} & (sys.stdlib_module_names - {"__main__"})


def shadowing_pythonpath(tmp_path: pathlib.Path) -> pathlib.Path:
    """A PYTHONPATH whose json.py (imported by the launcher) ends any interpreter that imports it."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "json.py").write_text("raise SystemExit(99)\n")
    return shadow


def loaded_files(stderr: str) -> list[str]:
    """The files `python -v` says code was loaded from once the interpreter had started (after `site`, which runs the
    image's .pth files under -I too)."""
    lines = stderr.splitlines()
    loaded = re.compile(r"^# (?:code object from|extension module '[^']*' loaded from) '?([^']*)'?$")
    return [
        m.group(1) for line in lines[lines.index(next(x for x in lines if x.startswith("import 'site'"))) :] if (m := loaded.match(line))
    ]


@pytest.mark.parametrize("python", [sys.executable, "python3.8"])
def test_the_pod_command_runs_isolated_from_the_configmap_folder_on_the_standard_library_only(tmp_path: pathlib.Path, python: str) -> None:
    if python == "python3.8":
        python = python38() or pytest.skip("no Python 3.8 interpreter on this machine")
    command = container(find(rendered_fixture("tcp"), "StatefulSet", "one"))["command"]
    assert command == ["python3", "-I", "/opt/launcher"]
    volume = configmap_volume(tmp_path / "opt" / "launcher")
    # A PYTHONPATH that shadows the standard library does not reach the launcher, and is passed on (and reported).
    shadow = shadowing_pythonpath(tmp_path)
    env = tcp_env(PYTHONPATH=str(shadow), PYTHONSTARTUP=str(shadow / "json.py"))
    argv = [python, "-v", *command[1:-1], str(volume), "--print-env", "--sysfs-root", str(fake.empty(tmp_path / "sys"))]
    result = subprocess.run(argv, env={"PATH": BASE_PATH, **env}, capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "NCCL_IB_DISABLE=1" in result.stdout and "launcher: isolated (python3 -I)" in result.stderr
    assert report_of(result.stderr)["python"] == {
        "isolated": True, "passed_on": {"PYTHONPATH": str(shadow), "PYTHONSTARTUP": str(shadow / "json.py")}
    }  # fmt: skip
    # Its own modules came from the folder, every other one from the standard library.
    paths = "import sysconfig; print(sysconfig.get_paths()['stdlib']); print(sysconfig.get_paths()['platstdlib'])"
    stdlib = tuple(subprocess.run([python, "-I", "-c", paths], capture_output=True, text=True, check=True).stdout.split())
    files = loaded_files(result.stderr)
    ours = [f for f in files if f.startswith(f"{volume}/")]
    assert {pathlib.Path(f).name.split(".")[0] for f in ours} >= {"__main__", "contract", "facts", "launch", "plan"}
    assert [f for f in files if f not in ours and not f.startswith(stdlib)] == []
    # Without -I the shadow json.py replaces the standard library's, and the launcher dies.
    plain = subprocess.run([python, str(volume), "--print-env"], env={"PATH": BASE_PATH, **env}, capture_output=True, timeout=60)
    assert plain.returncode == 99


def test_runs_on_python_3_8(tmp_path: pathlib.Path) -> None:
    python = python38() or pytest.skip("no Python 3.8 interpreter on this machine")
    root = fake.barcelona(tmp_path)
    fake.cgroup_v2(root, str(4096 * 1024 * 1024))
    env = contract_env(NCCL_IB_HCA="mlx5_6,mlx5_7,mlx5_10,mlx5_11", LAUNCHER_PIN_BYTES="65536")
    result = run_launcher(env, "--print-env", "--sysfs-root", str(root), python=python)
    assert result.returncode == 0, result.stderr
    assert "NCCL_IB_DISABLE=0" in result.stdout
    assert "NCCL_IB_HCA==mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1" in result.stdout  # the image's list overridden
    assert "LAUNCHER_REPORT {" in result.stderr and "Traceback" not in result.stderr


# --------------------------------------------------------------------------------------------
# --print-env, exec and the exit codes
# --------------------------------------------------------------------------------------------


def test_print_env_prints_sorted_key_values_and_exits_zero(tmp_path: pathlib.Path) -> None:
    result = run_launcher(tcp_env(NCCL_DEBUG="INFO"), "--print-env", "--sysfs-root", str(fake.empty(tmp_path)))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == sorted(lines)
    env = dict(line.split("=", 1) for line in lines)
    assert env == {
        "MASTER_ADDR": "h-kim-0.h-kim-headless.ns.svc.cluster.local",
        "MASTER_PORT": "29500",
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "^lo,docker0",
        "NNODES": "2",
        "NODE_RANK": "1",
        "NPROC_PER_NODE": "4",
        "WORLD_SIZE": "8",
    }
    assert "launcher report (tcp mode) BEGIN" in result.stderr


def test_print_env_failure_exits_two_with_diagnosis_and_no_traceback(tmp_path: pathlib.Path) -> None:
    env = tcp_env(LAUNCHER_MODE="rdma", LAUNCHER_RDMA_INTERFACES="net1")
    result = run_launcher(env, "--print-env", "--sysfs-root", str(fake.empty(tmp_path)))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "no ACTIVE RDMA port" in result.stderr
    assert "Traceback" not in result.stderr


def test_exec_replaces_the_launcher_and_exports_the_environment(tmp_path: pathlib.Path) -> None:
    env_file = tmp_path / "launcher.env"
    script = 'echo "pid=$$ rank=$NODE_RANK world=$WORLD_SIZE ifname=$NCCL_SOCKET_IFNAME"'
    env = tcp_env(LAUNCHER_RUN="command", LAUNCHER_ARGS=json.dumps(["sh", "-c", script]))
    proc = subprocess.Popen(
        [sys.executable, "-I", str(FOLDER), "--sysfs-root", str(fake.empty(tmp_path)), "--env-file", str(env_file)],
        env={"PATH": os.environ["PATH"], **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # Same PID: the command replaced the launcher, so signals sent to the pod reach it directly.
    assert out.strip() == f"pid={proc.pid} rank=1 world=8 ifname=^lo,docker0"
    # An `oc exec` session sees the same environment by sourcing the file.
    sourced = subprocess.run(
        ["sh", "-c", f'. "{env_file}"; echo "$NODE_RANK $NCCL_SOCKET_IFNAME"'],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert sourced.stdout.strip() == "1 ^lo,docker0"


def test_missing_command_exits_127_without_traceback(tmp_path: pathlib.Path) -> None:
    env = tcp_env(LAUNCHER_RUN="command", LAUNCHER_ARGS='["/nonexistent/trainer"]')
    result = run_launcher(env, "--sysfs-root", str(fake.empty(tmp_path)), "--env-file", str(tmp_path / "e"))
    assert result.returncode == 127
    assert "cannot execute /nonexistent/trainer" in result.stderr
    assert "Traceback" not in result.stderr


def test_non_utf8_environment_values_pass_through_print_env(tmp_path: pathlib.Path) -> None:
    env = tcp_env(NCCL_DEBUG_SUBSYS="INIT\udcff")  # the byte 0xff, as os.environ holds it
    result = subprocess.run(
        [sys.executable, "-I", str(FOLDER), "--print-env", "--sysfs-root", str(fake.empty(tmp_path))],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert b"NCCL_DEBUG_SUBSYS=INIT\xff\n" in result.stdout


# --------------------------------------------------------------------------------------------
# The files: the DeepSpeed hostfile, the report as JSON and one LAUNCHER_REPORT line
# --------------------------------------------------------------------------------------------


HOSTS = "ml-dev-env-0.ml-dev-env-headless.nccl-test.svc.cluster.local,ml-dev-env-1.ml-dev-env-headless.nccl-test.svc.cluster.local"


def hostfile_env(path: pathlib.Path, **overrides: str | None) -> dict[str, str]:
    return tcp_env(
        LAUNCHER_RUN="command",
        LAUNCHER_ARGS=json.dumps(["true"]),
        LAUNCHER_DEEPSPEED_HOSTFILE=str(path),
        LAUNCHER_HOSTS=HOSTS,
        **overrides,
    )


def test_deepspeed_hostfile_is_written_in_rank_order_with_parents(tmp_path: pathlib.Path) -> None:
    # Cairo's ml-dev-env wrote /workspace/.deepspeed/hostfile with `NAME slots=4` lines.
    hostfile = tmp_path / "workspace" / ".deepspeed" / "hostfile"
    result = run_launcher(hostfile_env(hostfile), "--sysfs-root", str(fake.empty(tmp_path / "sys")), "--env-file", str(tmp_path / "env"))
    assert result.returncode == 0, result.stderr
    assert hostfile.read_text() == (
        "ml-dev-env-0.ml-dev-env-headless.nccl-test.svc.cluster.local slots=4\n"
        "ml-dev-env-1.ml-dev-env-headless.nccl-test.svc.cluster.local slots=4\n"
    )
    assert f"deepspeed hostfile:\n  {hostfile}:\n    ml-dev-env-0." in result.stderr


def test_unwritable_hostfile_stops_the_pod(tmp_path: pathlib.Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the hostfile's parent directory should be")
    result = run_launcher(
        hostfile_env(blocker / "hostfile"), "--sysfs-root", str(fake.empty(tmp_path / "sys")), "--env-file", str(tmp_path / "env")
    )
    assert result.returncode == 2, result.stderr
    assert "could not write the DeepSpeed hostfile" in result.stderr
    assert "DeepSpeed would fail without it" in result.stderr
    assert "Traceback" not in result.stderr


def test_print_env_writes_no_hostfile(tmp_path: pathlib.Path) -> None:
    hostfile = tmp_path / "hostfile"
    result = run_launcher(hostfile_env(hostfile), "--print-env", "--sysfs-root", str(fake.empty(tmp_path / "sys")))
    assert result.returncode == 0, result.stderr
    assert not hostfile.exists()


def test_no_hostfile_unless_requested(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.barcelona(tmp_path), LAUNCHER_HOSTS=HOSTS)
    assert p.hostfile is None
    assert "deepspeed hostfile" not in report


def rdma_command_env(base: pathlib.Path, **overrides: str | None) -> dict[str, str]:
    return contract_env(
        LAUNCHER_RUN="command",
        LAUNCHER_ARGS=json.dumps(["true"]),
        LAUNCHER_PIN_BYTES="65536",  # pins under any memlock limit: this is about the report
        LAUNCHER_REPORT_JSON=str(base / "out" / "report.json"),
        **overrides,
    )


def test_report_is_written_as_json_and_logged_on_one_line(tmp_path: pathlib.Path) -> None:
    sysfs = fake.shared_netns(tmp_path / "sys")
    env = rdma_command_env(tmp_path, NCCL_IB_HCA="mlx5_6,mlx5_7,mlx5_10,mlx5_11", NCCL_IB_GID_INDEX="3", NCCL_DEBUG="INFO\nWARN")
    result = run_launcher(env, "--sysfs-root", str(sysfs), "--env-file", str(tmp_path / "env"), "--bash-env-file", str(tmp_path / "b.sh"))
    assert result.returncode == 0, result.stderr
    logged = report_of(result.stderr)
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert logged == written
    assert written["schema"] == "launcher-report/v1"
    assert written["verdict"] == "start" and written["errors"] == []
    assert written["devices"]["chosen"] == ["mlx5_6:1", "mlx5_7:1", "mlx5_8:1", "mlx5_9:1"]
    assert written["devices"]["host_not_attached"] == ["mlx5_0:1", "mlx5_12:1"]
    assert written["gid_index"] == 5
    assert written["interfaces"]["expected"] == ["net1", "net2", "net3", "net4"] and written["interfaces"]["missing"] == []
    assert written["socket_ifname"] == "net1,net2,net3,net4"
    assert written["nccl"]["NCCL_DEBUG"] == "INFO\nWARN"  # the log line stayed one line all the same
    assert {(o["name"], o["inherited"], o["new"]) for o in written["overridden"]} == {
        ("NCCL_IB_HCA", "mlx5_6,mlx5_7,mlx5_10,mlx5_11", "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"),
        ("NCCL_IB_GID_INDEX", "3", "5"),
    }
    assert all(o["reason"] for o in written["overridden"])
    pinning = written["pinning"]
    assert pinning["result"] == "ok" and pinning["pin_bytes"] == 65536
    assert set(pinning) >= {"limit", "cap_eff", "ipc_lock", "sys_resource", "effective_limit", "limit_moot_by_ipc_lock", "ulimit_moot"}
    assert written["rendezvous"]["NODE_RANK"] == "1"
    assert written["command"] == ["true"]
    assert "json report:" in result.stderr


def test_a_pod_that_would_not_start_reports_why(tmp_path: pathlib.Path) -> None:
    env = rdma_command_env(tmp_path, LAUNCHER_STRICT="true", NCCL_IB_HCA="mlx5_10")
    result = run_launcher(env, "--sysfs-root", str(fake.barcelona(tmp_path / "sys")), "--env-file", str(tmp_path / "env"))
    assert result.returncode == 2
    logged = report_of(result.stderr)
    assert logged["verdict"] == "would-not-start"
    assert any("LAUNCHER_STRICT=true" in e for e in logged["errors"])
    assert json.loads((tmp_path / "out" / "report.json").read_text())["verdict"] == "would-not-start"


def test_a_configuration_error_is_reported_too(tmp_path: pathlib.Path) -> None:
    env = rdma_command_env(tmp_path, LAUNCHER_MODE="roce")
    result = run_launcher(env, "--sysfs-root", str(fake.empty(tmp_path / "sys")), "--env-file", str(tmp_path / "env"))
    assert result.returncode == 2
    logged = report_of(result.stderr)
    assert logged["verdict"] == "would-not-start"
    assert logged["errors"] == ["LAUNCHER_MODE is 'roce'; expected one of: rdma, tcp"]
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == logged


def test_an_unwritable_report_path_is_a_warning(tmp_path: pathlib.Path) -> None:
    (tmp_path / "out").write_text("a file where the report's directory should be")
    files = ["--env-file", str(tmp_path / "e"), "--bash-env-file", str(tmp_path / "b.sh")]
    result = run_launcher(rdma_command_env(tmp_path), "--sysfs-root", str(fake.shared_netns(tmp_path / "sys")), *files)
    assert result.returncode == 0, result.stderr
    logged = report_of(result.stderr)
    assert logged["verdict"] == "start"
    assert any("could not write the JSON report" in w for w in logged["warnings"])


def test_print_env_logs_the_report_but_writes_no_file(tmp_path: pathlib.Path) -> None:
    env = rdma_command_env(tmp_path)
    result = run_launcher(env, "--print-env", "--sysfs-root", str(fake.shared_netns(tmp_path / "sys")))
    assert result.returncode == 0, result.stderr
    logged = report_of(result.stderr)
    assert logged["verdict"] == "start"
    assert not (tmp_path / "out").exists()
    assert "BASH_ENV=/tmp/launcher-bash-env.sh" in result.stdout  # what exec would export


# --------------------------------------------------------------------------------------------
# The user's Python environment, and stdout or stderr closed or full
# --------------------------------------------------------------------------------------------


def test_pythonhome_and_an_unexpanded_path_are_refused_naming_variable_and_fix(tmp_path: pathlib.Path) -> None:
    # -I keeps PYTHONHOME from the launcher itself (checked: 3.8 and 3.11), so without the check the pod
    # would get past it, and torchrun would die at start.
    broken = subprocess.run([sys.executable, "-c", "pass"], env={"PYTHONHOME": "/nonexistent"}, capture_output=True, timeout=30)
    assert broken.returncode != 0
    env = tcp_env(PYTHONHOME="/nonexistent", PATH=f"/opt/venv/bin:$PATH:{BASE_PATH}")
    result = run_launcher(env, "--print-env", "--sysfs-root", str(fake.empty(tmp_path)))
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == 2, result.stderr
    assert "ERROR: PYTHONHOME is '/nonexistent': the launcher (python3 -I) ignores it, but torchrun" in result.stderr
    assert "Fix: remove PYTHONHOME from the workload's env" in result.stderr
    assert "ERROR: PATH is '/opt/venv/bin:$PATH:" in result.stderr and "with $PATH as text" in result.stderr
    assert "Fix: write the value out in full in the workload's env (the image's PATH included)" in result.stderr
    assert result.stdout == ""


def test_pythonpath_and_pythonstartup_are_reported_and_passed_on(tmp_path: pathlib.Path) -> None:
    python = {"PYTHONPATH": "/workspace/src", "PYTHONSTARTUP": "/workspace/.pythonrc", "PYTHONUNBUFFERED": "1"}
    p, report = plan_for(fake.barcelona(tmp_path), **python)
    assert p.errors == []
    assert p.summary["python"] == {"isolated": True, "passed_on": python}
    assert "PYTHONPATH='/workspace/src': passed on to the command; torchrun and the training script import from it first" in report
    assert "PYTHONSTARTUP='/workspace/.pythonrc': passed on to the command; read by interactive interpreters only" in report
    assert not any("PYTHON" in w for w in p.warnings)
    child = launch.child_environment(contract_env(**python), p)
    assert {k: child[k] for k in python} == python


def test_a_launcher_started_without_isolation_says_so(tmp_path: pathlib.Path) -> None:
    shadow = tmp_path / "site"
    shadow.mkdir()
    result = run_launcher(tcp_env(PYTHONPATH=str(shadow)), "--print-env", "--sysfs-root", str(fake.empty(tmp_path / "sys")), isolated=False)
    assert result.returncode == 0, result.stderr
    assert "launcher: NOT isolated (started without python3 -I" in result.stderr
    assert (
        f"WARNING: the launcher was started without python3 -I, so PYTHONPATH={contract.shown(str(shadow))} was on its own" in result.stderr
    )
    assert report_of(result.stderr)["python"]["isolated"] is False


PRINT_ENV_CASES = [
    # (redirect, stream that carries the message, what it says)
    (">&-", "stderr", "launcher: could not write the environment (--print-env) to stdout (it is closed); verdict: start; exit 3"),
    (">/dev/full", "stderr", "launcher: could not write the environment (--print-env) to stdout (No space left on device)"),
    ("2>&-", "stdout", "launcher: could not write the report to stderr (it is closed); verdict: start; exit 3"),
    ("2>/dev/full", "stdout", "launcher: could not write the report to stderr (No space left on device); verdict: start"),
    (">&- 2>&-", None, ""),
]


@pytest.mark.parametrize("redirect, stream, message", PRINT_ENV_CASES, ids=[c[0] for c in PRINT_ENV_CASES])
def test_print_env_with_stdout_or_stderr_closed_or_full(tmp_path: pathlib.Path, redirect: str, stream: str | None, message: str) -> None:
    result = run_launcher(tcp_env(), "--print-env", "--sysfs-root", str(fake.empty(tmp_path)), redirect=redirect)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    # 1 would be an uncaught exception, 120 a failed flush at exit.
    assert result.returncode == contract.EXIT_OUTPUT_FAILED, result.stderr
    if stream is None:
        assert result.stdout == result.stderr == ""
        return
    said = result.stdout if stream == "stdout" else result.stderr
    assert said.splitlines()[-1].startswith(message), said
    if stream == "stdout":
        assert "NCCL_IB_DISABLE=1" not in result.stdout  # no environment without its report


def test_no_exec_when_the_report_cannot_be_written_but_a_closed_stdout_is_the_commands(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "ran"
    report = REPORT_DIR / "isolation-exec.json"
    env = tcp_env(LAUNCHER_RUN="command", LAUNCHER_ARGS=json.dumps(["touch", str(marker)]), LAUNCHER_REPORT_JSON=str(report))
    args = ("--sysfs-root", str(fake.empty(tmp_path / "sys")), "--env-file", str(tmp_path / "env"))
    result = run_launcher(env, *args, redirect="2>/dev/full")
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == contract.EXIT_OUTPUT_FAILED
    assert not marker.exists()
    assert result.stdout == (
        "launcher: could not write the report to stderr (No space left on device); verdict: start, but nothing was executed; "
        f"the report is in {report}; exit 3\n"
    )
    # The launcher itself never writes stdout when it execs: a closed one does not stop the command.
    result = run_launcher(env, *args, redirect=">&-")
    assert result.returncode == 0, result.stderr
    assert marker.exists()


# --------------------------------------------------------------------------------------------
# End to end: a real two-node torchrun on loopback (needs PyTorch)
# --------------------------------------------------------------------------------------------

ALL_REDUCE = """
import os, pathlib, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
assert world == 2, world
assert value.item() == 3.0, value
assert os.environ["NCCL_IB_DISABLE"] == "1"
pathlib.Path(sys.argv[1], f"rank{rank}").write_text(str(value.item()))
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_two_launchers_run_a_two_node_torchrun_all_reduce(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("torch", reason="PyTorch is not installed here; the end-to-end torchrun test needs it")
    bindir = os.path.dirname(sys.executable)
    if not shutil.which("torchrun", path=bindir):
        pytest.skip(f"torchrun is not next to {sys.executable}")
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    results = tmp_path / "results"
    results.mkdir()
    sysfs = fake.empty(tmp_path / "sys")
    port = str(free_port())
    procs = []
    for rank in (0, 1):
        env = tcp_env(
            POD_NAME=f"x-{rank}",
            LAUNCHER_NNODES="2",
            LAUNCHER_GPUS_PER_NODE="1",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            LAUNCHER_ARGS=json.dumps([str(script), str(results)]),
        )
        env.update(PATH=bindir + os.pathsep + os.environ.get("PATH", ""), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-I", str(FOLDER), "--sysfs-root", str(sysfs), "--env-file", str(tmp_path / f"rank{rank}.env")],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        )
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=180)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out
    assert sorted(p.name for p in results.iterdir()) == ["rank0", "rank1"]
