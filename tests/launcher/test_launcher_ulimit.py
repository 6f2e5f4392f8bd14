"""`ulimit -l unlimited` under `set -e` in a user's script (the seeds' lm-train.sh) must not stop the
pod where the launcher proved pinning works: the launcher exports BASH_ENV naming a file that wraps
`ulimit`. The kernel cases run real bash under the limits and capabilities of the seeds' pods."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence

import pytest

from tests.launcher.test_launcher import (
    EIGHT_MIB_LIMIT,
    LAUNCHER_FILE,
    MIB,
    L,
    capsh_drop,
    contract_env,
    fake,
    kernel,
    memlock_facts,
    plan_for,
)

SEED_SCRIPT = """#!/bin/bash
# lm-train.sh, as seed 000 left it: SYS_RESOURCE was meant to make this work.
set -e
ulimit -l unlimited
echo "survived, memlock $(ulimit -l)"
"""


@pytest.fixture()
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    """The launcher, a one-port RoCE sysfs whose net1 is the device's interface, and a place for
    the files the launcher writes."""
    root = tmp_path_factory.mktemp("launcher-ulimit")
    shutil.copy(LAUNCHER_FILE, root / "launcher.py")
    sysfs = root / "sys"
    fake.add_port(sysfs, "mlx5_6")
    fake.link_interface(sysfs, "net1", "mlx5_6", "0000:3b:00.2")
    fake.add_netdevs(sysfs, ["lo", "eth0"])
    script = root / "lm-train.sh"
    script.write_text(SEED_SCRIPT)
    script.chmod(0o755)
    yield root


def launch(
    base: pathlib.Path,
    command: Sequence[str],
    prefix: Sequence[str],
    strategy: str = "root-ipc-lock",
    pin: int = 256 * MIB,
    mode: str = "rdma",
    **extra: str,
) -> subprocess.CompletedProcess[str]:
    settings = {
        "LAUNCHER_MODE": mode,
        "LAUNCHER_MEMLOCK_STRATEGY": strategy,
        "LAUNCHER_RDMA_INTERFACES": "net1",
        "LAUNCHER_PIN_BYTES": str(pin),
        "LAUNCHER_RUN": "command",
        "LAUNCHER_ARGS": json.dumps(list(command)),
        "LAUNCHER_REPORT_JSON": str(base / "report.json"),
        **extra,
    }
    env = contract_env(**settings)
    args = ["--sysfs-root", str(base / "sys"), "--env-file", str(base / "launcher.env"), "--bash-env-file", str(base / "bash-env.sh")]
    return subprocess.run(
        [*prefix, sys.executable, str(base / "launcher.py"), *args],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(base),
    )


SET_E_ULIMIT = ["bash", "-c", "set -e; ulimit -l unlimited; echo survived"]
# The seeds' root-ipc-lock pod: CRI-O's 8 MiB limit, IPC_LOCK kept, SYS_RESOURCE not there.
IPC_LOCK_ONLY = [*EIGHT_MIB_LIMIT, *capsh_drop("cap_sys_resource")]


@kernel
def test_kernel_the_situation_is_real_without_the_launcher() -> None:
    # Control: the same bash under the same limits dies at the ulimit. If this passed, the tests
    # below would prove nothing.
    result = subprocess.run([*IPC_LOCK_ONLY, *SET_E_ULIMIT], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "survived" not in result.stdout
    assert "cannot modify limit" in result.stderr


@kernel
def test_kernel_set_e_ulimit_survives_when_ipc_lock_makes_the_limit_moot(base: pathlib.Path) -> None:
    result = launch(base, SET_E_ULIMIT, IPC_LOCK_ONLY)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "survived\n"
    assert (
        "launcher: `ulimit -l unlimited` could not change the memlock limit, which is moot here: CAP_IPC_LOCK is effective" in result.stderr
    )
    assert "effective pinning limit: unlimited: CAP_IPC_LOCK is effective, so the RLIMIT_MEMLOCK of 8192 KB is moot" in result.stderr
    report = json.loads((base / "report.json").read_text())
    assert report["bash_env"] == str(base / "bash-env.sh")
    assert report["pinning"]["limit_moot_by_ipc_lock"] is True
    assert report["pinning"]["effective_limit"] == "unlimited"


@kernel
def test_kernel_the_seed_script_itself_survives(base: pathlib.Path) -> None:
    result = launch(base, [str(base / "lm-train.sh")], IPC_LOCK_ONLY)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "survived, memlock 8192\n"


@kernel
def test_kernel_pinning_within_the_limit_also_makes_the_raise_moot(base: pathlib.Path) -> None:
    # No IPC_LOCK, but the 6 MiB proof fits the 8 MiB limit the training would run under.
    result = launch(
        base, SET_E_ULIMIT, [*EIGHT_MIB_LIMIT, *capsh_drop("cap_ipc_lock,cap_sys_resource")], strategy="node-limit", pin=6 * MIB
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
def test_kernel_other_ulimit_failures_still_fail(base: pathlib.Path, script: str, message: str) -> None:
    result = launch(base, ["bash", "-c", script], IPC_LOCK_ONLY)
    assert result.returncode != 0, result.stdout
    assert "survived" not in result.stdout
    assert message in result.stderr


@kernel
def test_kernel_queries_and_successful_changes_behave_as_the_builtin(base: pathlib.Path) -> None:
    script = "set -e; ulimit -l; ulimit -Sl 4096; ulimit -Sl; ulimit -Hl"
    result = launch(base, ["bash", "-c", script], IPC_LOCK_ONLY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["8192", "4096", "8192"]
    assert "launcher: `ulimit" not in result.stderr


@kernel
def test_kernel_the_images_bash_env_still_runs(base: pathlib.Path) -> None:
    image_env = base / "image-bash-env.sh"
    image_env.write_text('echo "image BASH_ENV read" >&2\nexport IMAGE_SETTING=from-image\n')
    script = 'set -e; ulimit -l unlimited; echo "survived with $IMAGE_SETTING"'
    result = launch(base, ["bash", "-c", script], IPC_LOCK_ONLY, BASH_ENV=str(image_env))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "survived with from-image\n"
    assert "image BASH_ENV read" in result.stderr


@kernel
def test_kernel_without_proof_there_is_no_shim(base: pathlib.Path) -> None:
    # tcp mode with strategy none proves nothing, so nothing is declared moot: the script's own
    # `set -e` decides, as it always did.
    result = launch(base, SET_E_ULIMIT, IPC_LOCK_ONLY, strategy="none", mode="tcp", LAUNCHER_RDMA_INTERFACES="")
    assert result.returncode != 0
    assert "survived" not in result.stdout
    assert not (base / "bash-env.sh").exists()


@kernel
def test_kernel_unwritable_bash_env_file_is_a_warning_and_not_exported(base: pathlib.Path) -> None:
    (base / "bash-env.sh").mkdir()  # a directory where the file should go
    result = launch(base, ["bash", "-c", 'echo "BASH_ENV=${BASH_ENV-unset}"'], IPC_LOCK_ONLY)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "BASH_ENV=unset\n"
    assert f"could not write {base / 'bash-env.sh'} (BASH_ENV)" in result.stderr


# --------------------------------------------------------------------------------------------
# The decision, without a kernel
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "facts, moot",
    [
        (memlock_facts(), "CAP_IPC_LOCK is effective"),
        (memlock_facts(cap_eff=0, pin_bytes=6 * MIB), "pinned 6 MiB within RLIMIT_MEMLOCK"),
        (memlock_facts(cap_eff=0, pin_errno=12), ""),  # not proven
        (memlock_facts(pin_errno=None), ""),  # not checked
        (memlock_facts(pin_errno=None, pin_blocked="too big for the container"), ""),
        (memlock_facts(uid=1000, cap_eff=1 << L.CAP_IPC_LOCK, cap_amb=1 << L.CAP_IPC_LOCK), "CAP_IPC_LOCK is effective"),
        (memlock_facts(uid=1000, cap_eff=1 << L.CAP_IPC_LOCK, cap_amb=0, limit_before=(L.INFINITY, L.INFINITY)), "within RLIMIT_MEMLOCK"),
    ],
)
def test_moot_only_where_pinning_is_proven(facts: object, moot: str) -> None:
    reason = L.ulimit_moot_reason(facts)
    assert (moot in reason) if moot else reason == ""


def test_plan_exports_bash_env_and_chains_the_images(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.barcelona(tmp_path), BASH_ENV="/etc/profile.d/image.sh")
    assert plan.env["BASH_ENV"] == L.DEFAULT_BASH_ENV_FILE
    assert plan.bash_env is not None
    path, text = plan.bash_env
    assert path == L.DEFAULT_BASH_ENV_FILE
    assert "if [ -r /etc/profile.d/image.sh ]; then . /etc/profile.d/image.sh; fi" in text
    assert "a failing raise is moot and does not stop them (BASH_ENV)" in report


def test_a_bash_env_that_is_already_the_launchers_is_not_chained(tmp_path: pathlib.Path) -> None:
    # A launcher started inside a launched pod (oc exec) must not make the file source itself.
    plan, _ = plan_for(fake.barcelona(tmp_path), BASH_ENV=L.DEFAULT_BASH_ENV_FILE)
    assert plan.bash_env is not None
    assert "if [ -r" not in plan.bash_env[1]


def test_no_bash_env_when_pinning_failed(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path), memlock=memlock_facts(cap_eff=0, pin_errno=12), LAUNCHER_MODE="tcp")
    assert plan.bash_env is None and "BASH_ENV" not in plan.env
