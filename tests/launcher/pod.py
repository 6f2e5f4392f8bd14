"""What the launcher's tests share: an environment like the one the program renders, memlock facts, the plan for a
fake sysfs tree, and the launcher run as the pod runs it (`python3 -I FOLDER`), from the package folder or from a copy
laid out as the kubelet mounts the ConfigMap."""

from __future__ import annotations

import atexit
import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import pytest

from components.launcher import FOLDER, contract, facts, plan, shipped_files

MIB = 1024 * 1024
BASE_PATH = os.environ.get("PATH", "/usr/bin:/bin")
# Where launchers started by the tests write their JSON report, instead of the pod's /tmp/launcher-report.json.
REPORT_DIR = pathlib.Path(tempfile.mkdtemp(prefix="launcher-test-reports-"))
atexit.register(shutil.rmtree, REPORT_DIR, ignore_errors=True)


def contract_env(**overrides: str | None) -> dict[str, str]:
    """A Barcelona-like rendered environment for pod h-kim-1 of 2; None removes a key."""
    env: dict[str, str | None] = {
        "LAUNCHER_MODE": "rdma",
        "LAUNCHER_MEMLOCK_STRATEGY": "root-ipc-lock",
        "LAUNCHER_RDMA_INTERFACES": "net1,net2,net3,net4",
        "LAUNCHER_NNODES": "2",
        "LAUNCHER_GPUS_PER_NODE": "4",
        "MASTER_ADDR": "h-kim-0.h-kim-headless.ns.svc.cluster.local",
        "MASTER_PORT": "29500",
        "POD_NAME": "h-kim-1",
        "LAUNCHER_RUN": "torchrun",
        "LAUNCHER_ARGS": json.dumps(["train.py", "--epochs", "1"]),
        "LAUNCHER_REPORT_JSON": str(REPORT_DIR / "report.json"),
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def tcp_env(**overrides: str | None) -> dict[str, str]:
    return contract_env(**{"LAUNCHER_MODE": "tcp", "LAUNCHER_MEMLOCK_STRATEGY": "none", "LAUNCHER_RDMA_INTERFACES": "", **overrides})


def memlock_facts(**overrides: Any) -> facts.MemlockFacts:
    """Root with IPC_LOCK under CRI-O's 8 MiB default, pinning proven: the root-ipc-lock setup."""
    values: dict[str, Any] = dict(
        uid=0, cap_eff=1 << facts.CAP_IPC_LOCK, cap_amb=0, limit_before=(8 * MIB, 8 * MIB), pin_bytes=256 * MIB, pin_errno=0
    )
    values.update(overrides)
    values.setdefault("limit_after", values["limit_before"])
    values.setdefault("proof_bytes", values["pin_bytes"])
    return facts.MemlockFacts(**values)


def plan_for(sysfs_root: pathlib.Path, memlock: Any = None, **env_overrides: str | None) -> tuple[plan.Plan, str]:
    """The plan for a fake sysfs tree: sysfs read as gather_facts reads it, memlock facts given."""
    cfg = contract.Config(contract_env(**env_overrides), str(sysfs_root))
    net_names = tuple(facts.listdir(str(sysfs_root / "class" / "net")))
    links = facts.read_interface_links(str(sysfs_root), [i for i in cfg.rdma_interfaces if i in net_names])
    found = facts.Facts(memlock or memlock_facts(), tuple(facts.read_rdma_ports(str(sysfs_root))), net_names, links=links)
    decided = plan.decide(cfg, found)
    return decided, plan.render_report(cfg, decided)


def configmap_volume(dest: pathlib.Path) -> pathlib.Path:
    """The launcher ConfigMap as the kubelet mounts it (defaultMode 0555): the keys as files in a timestamped folder,
    `..data` naming that folder, and one symlink per key through `..data`."""
    data = dest / "..2026_01_01_00_00_00.000000001"
    data.mkdir(parents=True)
    for key, text in shipped_files().items():
        (data / key).write_text(text, encoding="utf-8")
        (data / key).chmod(0o555)
        (dest / key).symlink_to(f"..data/{key}")
    (dest / "..data").symlink_to(data.name)
    return dest


def run_launcher(
    env: dict[str, str],
    *args: str,
    prefix: Sequence[str] = (),
    folder: pathlib.Path = FOLDER,
    python: str = sys.executable,
    isolated: bool = True,
    redirect: str = "",
    cwd: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """The pod's command, `python3 -I FOLDER ARGS`; `redirect` is applied by bash to the launcher's own descriptors
    (`>&-` closes stdout, `2>/dev/full` fills stderr)."""
    command = [*prefix, python, *(["-I"] if isolated else []), str(folder), *args]
    if redirect:
        command = ["bash", "-c", f'exec "$@" {redirect}', "bash", *command]
    full_env = {"PATH": BASE_PATH, **env}
    return subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=60, cwd=cwd)


def report_of(stderr: str) -> dict[str, Any]:
    """The report of the LAUNCHER_REPORT line."""
    (line,) = [line for line in stderr.splitlines() if line.startswith(plan.REPORT_PREFIX)]
    return dict(json.loads(line[len(plan.REPORT_PREFIX) :]))


# The real kernel: root, the tools that drop capabilities and limits, and IPC_LOCK to drop.
EIGHT_MIB_LIMIT = ["prlimit", "--memlock=8388608:8388608"]


def self_caps() -> int:
    with open("/proc/self/status") as handle:
        return facts.parse_caps(handle.read())[0]


def _kernel_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the kernel tests need root (they drop IPC_LOCK and switch to uid 1000)"
    missing = [tool for tool in ("prlimit", "capsh", "setpriv") if not shutil.which(tool)]
    if missing:
        return f"the kernel tests need {', '.join(missing)} on PATH"
    if not facts.has_cap(self_caps(), facts.CAP_IPC_LOCK):
        return "this process lacks CAP_IPC_LOCK, so the kernel tests cannot show its effect"
    return None


kernel = pytest.mark.skipif(_kernel_skip_reason() is not None, reason=_kernel_skip_reason() or "")


def capsh_drop(caps: str) -> list[str]:
    # capsh runs /bin/bash with what follows "--"; bash then execs the launcher without the caps.
    return ["capsh", f"--drop={caps}", "--", "-c", 'exec "$@"', "launcher"]


@functools.cache
def python38() -> str | None:
    """A Python 3.8 interpreter (the oldest a PyTorch image may have), its own executable rather than a version
    manager's shim."""
    for candidate in (shutil.which("python3.8"), os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8")):
        if candidate and os.access(candidate, os.X_OK):
            probe = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2]); print(sys.executable)"], capture_output=True, text=True
            )
            lines = probe.stdout.splitlines()
            if probe.returncode == 0 and lines[:1] == ["(3, 8)"]:
                return lines[1] if len(lines) > 1 and lines[1] else candidate
    return None
