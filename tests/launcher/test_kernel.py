"""The real kernel of the test machine (root only; skipped otherwise): the launcher passes or fails exactly as the
kernel allows pinning under an 8 MiB limit, without IPC_LOCK, as uid 1000, with the soft limit below the hard one or
with the container's memory limit unknown; and a script's `set -e; ulimit -l unlimited` survives once pinning is
proven. The launcher runs as the pod runs it: `python3 -I` on a folder laid out as the ConfigMap volume."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence

import pytest

from components.launcher import facts
from tests.launcher import launcher_sysfs as fake
from tests.launcher.pod import EIGHT_MIB_LIMIT, MIB, capsh_drop, configmap_volume, contract_env, kernel, run_launcher, self_caps


@pytest.fixture(scope="module")
def world_readable() -> Iterator[pathlib.Path]:
    """The ConfigMap volume and a one-port RoCE sysfs whose net1 is the device's interface, in a 0755 directory, so
    uid 1000 can read them (pytest's tmp_path for root is 0700)."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="launcher-kernel-"))
    try:
        configmap_volume(base / "launcher")
        sysfs = base / "sys"
        fake.add_port(sysfs, "mlx5_6")
        fake.link_interface(sysfs, "net1", "mlx5_6", "0000:3b:00.2")
        fake.add_netdevs(sysfs, ["lo", "eth0"])
        fake.cgroup_v2(sysfs, "max")  # a known limit (none): the proof pins all of LAUNCHER_PIN_BYTES
        for path in [base, *base.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def kernel_run(
    base: pathlib.Path, prefix: Sequence[str], *args: str, sysfs: pathlib.Path | None = None, python: str = sys.executable, **env: str
) -> subprocess.CompletedProcess[str]:
    """The launcher under `prefix` (limits, dropped capabilities, another uid); --print-env unless `args` say otherwise."""
    settings = {"LAUNCHER_RDMA_INTERFACES": "net1", "LAUNCHER_PIN_BYTES": str(256 * MIB), **env}
    argv = [*(args or ["--print-env"]), "--sysfs-root", str(sysfs or base / "sys")]
    return run_launcher(contract_env(**settings), *argv, prefix=prefix, folder=base / "launcher", python=python, cwd=str(base))


@kernel
def test_kernel_root_with_ipc_lock_pins_under_8_mib(world_readable: pathlib.Path) -> None:
    result = kernel_run(world_readable, EIGHT_MIB_LIMIT)
    assert result.returncode == 0, result.stderr
    assert "RLIMIT_MEMLOCK: soft 8192 KB, hard 8192 KB" in result.stderr
    assert "mlock of 256 MiB: ok" in result.stderr
    assert "NCCL_IB_HCA==mlx5_6:1" in result.stdout


@kernel
def test_kernel_without_ipc_lock_fails_naming_ipc_lock(world_readable: pathlib.Path) -> None:
    result = kernel_run(world_readable, [*EIGHT_MIB_LIMIT, *capsh_drop("cap_ipc_lock")])
    assert result.returncode == 2, result.stderr
    assert "CAP_IPC_LOCK is not effective" in result.stderr
    assert "RLIMIT_MEMLOCK is 8192 KB" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


@kernel
def test_kernel_tcp_mode_reports_and_continues_without_ipc_lock(world_readable: pathlib.Path) -> None:
    result = kernel_run(world_readable, [*EIGHT_MIB_LIMIT, *capsh_drop("cap_ipc_lock")], LAUNCHER_MODE="tcp")
    assert result.returncode == 0, result.stderr
    assert "mlock of 256 MiB: FAILED (ENOMEM" in result.stderr
    assert "pinning failed, which tcp mode does not need" in result.stderr


def _python_for_uid_1000() -> str | None:
    for candidate in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        probe = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", str(candidate), "-c", "pass"]
        if candidate and subprocess.run(probe, capture_output=True).returncode == 0:
            return candidate
    return None


@kernel
def test_kernel_non_root_uid_fails_naming_the_uid(world_readable: pathlib.Path) -> None:
    python = _python_for_uid_1000()
    if python is None:
        pytest.skip("no python3 that uid 1000 can execute")
    setpriv = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
    result = kernel_run(world_readable, [*EIGHT_MIB_LIMIT, *setpriv], python=python)
    assert result.returncode == 2, result.stderr
    assert "uid: 1000" in result.stderr
    assert "non-root uid 1000" in result.stderr


@kernel
def test_kernel_sys_resource_strategy_raises_the_limit_and_pins(world_readable: pathlib.Path) -> None:
    if not facts.has_cap(self_caps(), facts.CAP_SYS_RESOURCE):
        pytest.skip("this machine's processes lack CAP_SYS_RESOURCE (not in the bounding set), so nothing here can raise a hard rlimit")
    result = kernel_run(world_readable, [*EIGHT_MIB_LIMIT, *capsh_drop("cap_ipc_lock")], LAUNCHER_MEMLOCK_STRATEGY="root-sys-resource")
    assert result.returncode == 0, result.stderr
    assert "raised RLIMIT_MEMLOCK to unlimited/unlimited" in result.stderr
    assert "IPC_LOCK not effective" in result.stderr


@kernel
def test_kernel_sys_resource_strategy_without_the_capability_fails(world_readable: pathlib.Path) -> None:
    drop = capsh_drop("cap_ipc_lock,cap_sys_resource")
    result = kernel_run(world_readable, [*EIGHT_MIB_LIMIT, *drop], LAUNCHER_MEMLOCK_STRATEGY="root-sys-resource")
    assert result.returncode == 2, result.stderr
    assert "could not raise RLIMIT_MEMLOCK to unlimited/unlimited" in result.stderr
    assert "the limit could not be raised" in result.stderr
    assert "SYS_RESOURCE, which is not effective" in result.stderr


@kernel
def test_kernel_pin_within_the_memory_limit_with_headroom_is_proven(world_readable: pathlib.Path, tmp_path: pathlib.Path) -> None:
    shutil.copytree(world_readable / "sys", tmp_path / "sys", symlinks=True)
    fake.cgroup_v2(tmp_path / "sys", str(320 * MIB))  # exactly 256 MiB + the 64 MiB headroom
    result = kernel_run(world_readable, [], sysfs=tmp_path / "sys")
    assert result.returncode == 0, result.stderr
    assert "container memory limit: 320 MiB" in result.stderr
    assert "mlock of 256 MiB: ok" in result.stderr


@kernel
@pytest.mark.parametrize("strategy", ["none", "root-sys-resource", "privileged", "node-limit"])
def test_kernel_soft_limit_below_hard_is_raised_before_the_proof(world_readable: pathlib.Path, strategy: str) -> None:
    # 1 MiB soft, 8 MiB hard, no IPC_LOCK and no SYS_RESOURCE: 6 MiB can be pinned once soft is
    # raised to hard, which needs no privilege.
    prefix = ["prlimit", f"--memlock={MIB}:{8 * MIB}", *capsh_drop("cap_ipc_lock,cap_sys_resource")]
    result = kernel_run(world_readable, prefix, LAUNCHER_MEMLOCK_STRATEGY=strategy, LAUNCHER_PIN_BYTES=str(6 * MIB))
    assert result.returncode == 0, result.stderr
    assert "RLIMIT_MEMLOCK: soft 1024 KB, hard 8192 KB" in result.stderr
    assert "raised the soft RLIMIT_MEMLOCK to the hard limit, 8192 KB" in result.stderr
    assert "mlock of 6 MiB: ok" in result.stderr
    assert "effective pinning limit: 8192 KB" in result.stderr


@kernel
def test_kernel_soft_raise_does_not_hide_a_hard_limit_that_is_too_low(world_readable: pathlib.Path) -> None:
    prefix = ["prlimit", f"--memlock={MIB}:{4 * MIB}", *capsh_drop("cap_ipc_lock,cap_sys_resource")]
    result = kernel_run(world_readable, prefix, LAUNCHER_MEMLOCK_STRATEGY="none", LAUNCHER_PIN_BYTES=str(6 * MIB))
    assert result.returncode == 2, result.stderr
    assert "raised the soft RLIMIT_MEMLOCK to the hard limit, 4096 KB" in result.stderr
    assert "mlock of 6 MiB: FAILED (ENOMEM" in result.stderr


@kernel
@pytest.mark.parametrize("how", ["missing", "garbage"])
def test_kernel_unknown_memory_limit_never_pins_the_whole_request_blind(
    world_readable: pathlib.Path, tmp_path: pathlib.Path, how: str
) -> None:
    # A 4 GiB request in a process allowed 1 GiB of address space: the kernel refuses it as a container's
    # memory limit would (there, with the OOM killer and exit 137). Unguarded, the launcher must not try.
    shutil.copytree(world_readable / "sys", tmp_path / "sys", symlinks=True)
    (tmp_path / "sys" / "fs" / "cgroup" / "memory.max").unlink()
    if how == "garbage":
        fake.cgroup_v2(tmp_path / "sys", "a lot")
    bounded = ["prlimit", f"--as={1024 * MIB}"]
    result = kernel_run(world_readable, bounded, sysfs=tmp_path / "sys", LAUNCHER_PIN_BYTES=str(4096 * MIB))
    assert result.returncode == 0, result.stderr
    assert "mlock of 16 MiB: ok" in result.stderr
    assert "the proof pinned 16 MiB instead of LAUNCHER_PIN_BYTES 4096 MiB" in result.stderr
    # With the limit known ("max": none), the guard passes and the whole request is tried.
    fake.cgroup_v2(tmp_path / "sys", "max")
    result = kernel_run(world_readable, bounded, sysfs=tmp_path / "sys", LAUNCHER_PIN_BYTES=str(4096 * MIB))
    assert result.returncode == 2 and "mlock of 4096 MiB: FAILED (ENOMEM" in result.stderr


# --------------------------------------------------------------------------------------------
# `ulimit -l unlimited` under `set -e` in a user's script (the seeds' lm-train.sh) must not stop the pod where the
# launcher proved pinning works: the BASH_ENV it exports names a file that wraps `ulimit`.
# --------------------------------------------------------------------------------------------

SEED_SCRIPT = """#!/bin/bash
# lm-train.sh, as seed 000 left it: SYS_RESOURCE was meant to make this work.
set -e
ulimit -l unlimited
echo "survived, memlock $(ulimit -l)"
"""
SET_E_ULIMIT = ["bash", "-c", "set -e; ulimit -l unlimited; echo survived"]
# The seeds' root-ipc-lock pod: CRI-O's 8 MiB limit, IPC_LOCK kept, SYS_RESOURCE not there.
IPC_LOCK_ONLY = [*EIGHT_MIB_LIMIT, *capsh_drop("cap_sys_resource")]


def launch(
    base: pathlib.Path, out: pathlib.Path, command: Sequence[str], prefix: Sequence[str], **env: str
) -> subprocess.CompletedProcess[str]:
    """The launcher running `command`, its files in `out`."""
    files = ["--env-file", str(out / "launcher.env"), "--bash-env-file", str(out / "bash-env.sh")]
    settings = {"LAUNCHER_RUN": "command", "LAUNCHER_ARGS": json.dumps(list(command)), "LAUNCHER_REPORT_JSON": str(out / "report.json")}
    return kernel_run(base, prefix, *files, **{**settings, **env})


@kernel
def test_kernel_the_situation_is_real_without_the_launcher() -> None:
    # Control: the same bash under the same limits dies at the ulimit. If this passed, the tests
    # below would prove nothing.
    result = subprocess.run([*IPC_LOCK_ONLY, *SET_E_ULIMIT], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "survived" not in result.stdout
    assert "cannot modify limit" in result.stderr


@kernel
def test_kernel_set_e_ulimit_survives_when_ipc_lock_makes_the_limit_moot(world_readable: pathlib.Path, tmp_path: pathlib.Path) -> None:
    result = launch(world_readable, tmp_path, SET_E_ULIMIT, IPC_LOCK_ONLY)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "survived\n"
    assert (
        "launcher: `ulimit -l unlimited` could not change the memlock limit, which is moot here: CAP_IPC_LOCK is effective" in result.stderr
    )
    assert "effective pinning limit: unlimited: CAP_IPC_LOCK is effective, so the RLIMIT_MEMLOCK of 8192 KB is moot" in result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["bash_env"] == str(tmp_path / "bash-env.sh")
    assert report["pinning"]["limit_moot_by_ipc_lock"] is True
    assert report["pinning"]["effective_limit"] == "unlimited"


@kernel
def test_kernel_the_seed_script_itself_survives(world_readable: pathlib.Path, tmp_path: pathlib.Path) -> None:
    script = tmp_path / "lm-train.sh"
    script.write_text(SEED_SCRIPT)
    script.chmod(0o755)
    result = launch(world_readable, tmp_path, [str(script)], IPC_LOCK_ONLY)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "survived, memlock 8192\n"


@kernel
def test_kernel_pinning_within_the_limit_also_makes_the_raise_moot(world_readable: pathlib.Path, tmp_path: pathlib.Path) -> None:
    # No IPC_LOCK, but the 6 MiB proof fits the 8 MiB limit the training would run under.
    result = launch(
        world_readable,
        tmp_path,
        SET_E_ULIMIT,
        [*EIGHT_MIB_LIMIT, *capsh_drop("cap_ipc_lock,cap_sys_resource")],
        LAUNCHER_MEMLOCK_STRATEGY="node-limit",
        LAUNCHER_PIN_BYTES=str(6 * MIB),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "survived\n"
    assert "the launcher pinned 6 MiB within RLIMIT_MEMLOCK (soft 8192 KB, hard 8192 KB)" in result.stderr


@kernel
@pytest.mark.parametrize(
    "script, message",
    [
        ("set -e; ulimit -n 99999999; echo survived", "open files: cannot modify limit"),  # another limit
        ("set -e; ulimit -l abc; echo survived", "abc: invalid number"),  # a malformed value
        ("set -e; ulimit -l 100 -n 99999999; echo survived", "cannot modify limit"),  # memlock among others
    ],
)
def test_kernel_other_ulimit_failures_still_fail(world_readable: pathlib.Path, tmp_path: pathlib.Path, script: str, message: str) -> None:
    result = launch(world_readable, tmp_path, ["bash", "-c", script], IPC_LOCK_ONLY)
    assert result.returncode != 0, result.stdout
    assert "survived" not in result.stdout
    assert message in result.stderr


@kernel
def test_kernel_queries_and_successful_changes_behave_as_the_builtin(world_readable: pathlib.Path, tmp_path: pathlib.Path) -> None:
    script = "set -e; ulimit -l; ulimit -Sl 4096; ulimit -Sl; ulimit -Hl"
    result = launch(world_readable, tmp_path, ["bash", "-c", script], IPC_LOCK_ONLY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["8192", "4096", "8192"]
    assert "launcher: `ulimit" not in result.stderr


@kernel
def test_kernel_the_images_bash_env_still_runs(world_readable: pathlib.Path, tmp_path: pathlib.Path) -> None:
    image_env = tmp_path / "image-bash-env.sh"
    image_env.write_text('echo "image BASH_ENV read" >&2\nexport IMAGE_SETTING=from-image\n')
    script = 'set -e; ulimit -l unlimited; echo "survived with $IMAGE_SETTING"'
    result = launch(world_readable, tmp_path, ["bash", "-c", script], IPC_LOCK_ONLY, BASH_ENV=str(image_env))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "survived with from-image\n"
    assert "image BASH_ENV read" in result.stderr


@kernel
def test_kernel_without_proof_there_is_no_shim(world_readable: pathlib.Path, tmp_path: pathlib.Path) -> None:
    # tcp mode with strategy none proves nothing, so nothing is declared moot: the script's own
    # `set -e` decides, as it always did.
    result = launch(
        world_readable,
        tmp_path,
        SET_E_ULIMIT,
        IPC_LOCK_ONLY,
        LAUNCHER_MEMLOCK_STRATEGY="none",
        LAUNCHER_MODE="tcp",
        LAUNCHER_RDMA_INTERFACES="",
    )
    assert result.returncode != 0
    assert "survived" not in result.stdout
    assert not (tmp_path / "bash-env.sh").exists()


@kernel
def test_kernel_unwritable_bash_env_file_is_a_warning_and_not_exported(world_readable: pathlib.Path, tmp_path: pathlib.Path) -> None:
    (tmp_path / "bash-env.sh").mkdir()  # a directory where the file should go
    result = launch(world_readable, tmp_path, ["bash", "-c", 'echo "BASH_ENV=${BASH_ENV-unset}"'], IPC_LOCK_ONLY)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "BASH_ENV=unset\n"
    assert f"could not write {tmp_path / 'bash-env.sh'} (BASH_ENV)" in result.stderr
