"""Memory pinning (components/launcher/memlock.py and facts.py): the verdicts and their messages, following KNOWLEDGE.md's
memlock table; the container's memory limit, which the proof never exceeds; and the bash shim that makes a script's
refused `ulimit -l` moot once pinning is proven."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from components.launcher import contract, facts, memlock, plan
from tests.launcher import launcher_sysfs as fake
from tests.launcher.pod import MIB, contract_env, memlock_facts, plan_for, report_of, run_launcher


def test_root_with_ipc_lock_pins_under_the_default_limit() -> None:
    verdict = memlock.judge_memlock("root-ipc-lock", memlock_facts())
    assert verdict.ok
    assert any("IPC_LOCK is effective, so RLIMIT_MEMLOCK does not apply" in line for line in verdict.lines)


def test_non_root_failure_names_the_uid_and_the_strategies_that_work() -> None:
    verdict = memlock.judge_memlock("root-ipc-lock", memlock_facts(uid=1000680000, cap_eff=0, pin_errno=12))
    assert not verdict.ok
    assert "non-root uid 1000680000" in verdict.problem
    assert "8192 KB (CRI-O's default)" in verdict.problem
    assert "runAsUser: 0" in verdict.problem
    assert "only node-limit or privileged work" in verdict.problem
    assert "default_ulimits" in verdict.problem


def test_root_without_ipc_lock_failure_names_ipc_lock() -> None:
    verdict = memlock.judge_memlock("root-ipc-lock", memlock_facts(cap_eff=0, pin_errno=12))
    assert not verdict.ok
    assert "CAP_IPC_LOCK is not effective" in verdict.problem
    assert "IPC_LOCK in capabilities.add" in verdict.problem


def test_sys_resource_strategy_reports_a_refused_raise() -> None:
    refused = dict(raise_target=(facts.INFINITY, facts.INFINITY), raise_error="not allowed to raise maximum limit")
    verdict = memlock.judge_memlock("root-sys-resource", memlock_facts(cap_eff=0, pin_errno=12, **refused))
    assert not verdict.ok
    assert "could not be raised" in verdict.problem
    assert "CAP_SYS_RESOURCE, which is not effective" in verdict.problem


def test_node_limit_strategy_points_at_the_machineconfig() -> None:
    verdict = memlock.judge_memlock("node-limit", memlock_facts(uid=1000680000, cap_eff=0, pin_errno=12))
    assert "MachineConfig is not applied here" in verdict.problem


def test_non_root_ipc_lock_that_would_not_survive_exec_is_refused() -> None:
    verdict = memlock.judge_memlock("node-limit", memlock_facts(uid=1000, cap_eff=1 << facts.CAP_IPC_LOCK, cap_amb=0))
    assert not verdict.ok
    assert "loses it at exec" in verdict.problem


def test_privileged_strategy_is_checked_against_this_kernels_capabilities() -> None:
    seed_004 = memlock_facts(cap_eff=0x45FB, cap_last=40)  # CRI-O defaults + IPC_LOCK: not privileged
    assert any("does not hold every capability" in line for line in memlock.judge_memlock("privileged", seed_004).lines)
    older_kernel_all_caps = memlock_facts(cap_eff=(1 << 38) - 1, cap_last=37)
    assert not any("does not hold every capability" in line for line in memlock.judge_memlock("privileged", older_kernel_all_caps).lines)


def test_mlock_failing_despite_ipc_lock_blames_memory_not_the_limit() -> None:
    verdict = memlock.judge_memlock("root-ipc-lock", memlock_facts(pin_errno=12))
    assert not verdict.ok
    assert "the memlock limit is not the cause" in verdict.problem
    assert "give the pod more memory" in verdict.problem


@pytest.mark.parametrize(
    "found",
    [
        memlock_facts(uid=1000680000, cap_eff=0, limit_before=(facts.INFINITY, facts.INFINITY), pin_errno=12),  # node-limit applied
        memlock_facts(cap_eff=0, limit_before=(512 * MIB, 512 * MIB), pin_errno=11),  # a finite limit above the buffer
    ],
)
def test_mlock_failing_within_the_limit_blames_memory_not_the_limit_or_the_strategy(found: Any) -> None:
    verdict = memlock.judge_memlock("node-limit", found)
    assert not verdict.ok
    assert "the memlock limit is not the cause" in verdict.problem
    assert "give the pod more memory" in verdict.problem
    for contradiction in ("below the", "MachineConfig is not applied", "strategies that work", "IPC_LOCK cannot lift", "runAsUser"):
        assert contradiction not in verdict.problem


@pytest.mark.parametrize(
    "strategy, limit, expected",
    [
        ("root-sys-resource", (8 * MIB, 8 * MIB), (facts.INFINITY, facts.INFINITY)),
        ("privileged", (8 * MIB, 8 * MIB), (facts.INFINITY, facts.INFINITY)),
        ("privileged", (facts.INFINITY, facts.INFINITY), None),  # nothing left to raise
        ("root-ipc-lock", (8 * MIB, 8 * MIB), None),
        ("node-limit", (8 * MIB, facts.INFINITY), None),  # the soft-to-hard step below does this
        ("none", (8 * MIB, facts.INFINITY), None),
    ],
)
def test_raise_target(strategy: str, limit: tuple[int, int], expected: tuple[int, int] | None) -> None:
    assert facts.memlock_raise_target(strategy, limit) == expected


def test_pinning_failure_stops_rdma_but_not_tcp(tmp_path: pathlib.Path) -> None:
    failing = memlock_facts(cap_eff=0, pin_errno=12)
    p, report = plan_for(fake.barcelona(tmp_path), memlock=failing)
    assert p.errors and "cannot pin memory" in p.errors[0]
    assert "IBV_WC_LOC_PROT_ERR" in report
    p, _ = plan_for(tmp_path, memlock=failing, LAUNCHER_MODE="tcp")
    assert p.errors == []
    assert any("pinning failed" in w for w in p.warnings)


def test_caps_are_parsed_from_proc_status() -> None:
    status = "Name:\tpython3\nCapPrm:\t00000000000045fb\nCapEff:\t00000000000045fb\nCapAmb:\t0000000000000000\n"
    eff, amb = facts.parse_caps(status)
    assert facts.has_cap(eff, facts.CAP_IPC_LOCK) and not facts.has_cap(eff, facts.CAP_SYS_RESOURCE)  # seed 004
    assert amb == 0


# --------------------------------------------------------------------------------------------
# The container's memory limit: never pin what the OOM killer would punish
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("writer", [fake.cgroup_v2, fake.cgroup_v1])
def test_pin_above_the_container_memory_limit_stops_without_pinning(
    tmp_path: pathlib.Path, writer: Callable[[pathlib.Path, str], pathlib.Path]
) -> None:
    root = fake.empty(tmp_path, ["lo", "eth0", "net1"])
    fake.add_port(root, "mlx5_6")
    writer(root, str(128 * MIB))
    env = contract_env(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(256 * MIB))
    result = run_launcher(env, "--print-env", "--sysfs-root", str(root))
    assert result.returncode == 2, result.stderr
    assert "mlock of 256 MiB: not attempted" in result.stderr
    assert "LAUNCHER_PIN_BYTES is 256 MiB and the limit is 128 MiB" in result.stderr
    assert "exit 137" in result.stderr
    assert "lower LAUNCHER_PIN_BYTES (the stack's defaults.pin_bytes) to at most 64 MiB" in result.stderr
    assert "raise the pod's memory limit (resources.limits.memory) to at least 320 MiB" in result.stderr


@pytest.mark.parametrize(
    "v2, v1, limit, known",
    [
        ("max", None, None, True),
        (None, "9223372036854771712", None, True),  # v1's "no limit"
        (None, str(2 * 1024 * MIB), 2 * 1024 * MIB, True),
        (str(MIB), str(2 * 1024 * MIB), MIB, True),  # v2 wins
        ("garbage", None, None, False),
        ("9" * 5000, None, None, False),
        (None, None, None, False),
    ],
)
def test_cgroup_memory_limit_is_read_from_v2_then_v1(
    tmp_path: pathlib.Path, v2: str | None, v1: str | None, limit: int | None, known: bool
) -> None:
    if v2 is not None:
        fake.cgroup_v2(tmp_path, v2)
    if v1 is not None:
        fake.cgroup_v1(tmp_path, v1)
    cgroup = facts.read_cgroup_memory(str(tmp_path))
    assert (cgroup.limit, cgroup.known) == (limit, known)


def test_pin_blocked_in_tcp_mode_is_only_a_warning(tmp_path: pathlib.Path) -> None:
    blocked = memlock_facts(pin_errno=None, pin_blocked="the proof buffer does not fit the container's memory limit: ...")
    p, report = plan_for(fake.empty(tmp_path), memlock=blocked, LAUNCHER_MODE="tcp", LAUNCHER_RDMA_INTERFACES="")
    assert p.errors == []
    assert any("pinning failed, which tcp mode does not need" in w for w in p.warnings)
    p, _ = plan_for(fake.barcelona(tmp_path / "rdma"), memlock=blocked)
    assert p.errors and "does not fit the container's memory limit" in p.errors[0]


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
    monkeypatch.setattr(facts, "prove_pinning", lambda size: pinned.append(size) or 0)
    cgroup = facts.read_cgroup_memory(str(tmp_path))
    assert not cgroup.known
    cfg = contract.Config(contract_env(LAUNCHER_PIN_BYTES=str(4096 * MIB)), str(tmp_path))
    found = facts.gather_memlock(cfg, cgroup)
    assert pinned == [facts.UNGUARDED_PIN_BYTES] == [16 * MIB]
    assert (found.pin_bytes, found.proof_bytes) == (4096 * MIB, 16 * MIB)
    # A smaller request is pinned as it is; a known limit guards the whole request.
    small = contract.Config(contract_env(LAUNCHER_PIN_BYTES=str(MIB)), str(tmp_path))
    assert facts.gather_memlock(small, cgroup).proof_bytes == MIB and pinned[-1] == MIB
    facts.gather_memlock(cfg, facts.CgroupMemory(None, "memory.max"))
    assert pinned[-1] == 4096 * MIB


def test_unknown_memory_limit_is_reported_as_unguarded(tmp_path: pathlib.Path) -> None:
    found = memlock_facts(pin_bytes=256 * MIB, proof_bytes=16 * MIB)
    cgroup = facts.CgroupMemory(None, "", "neither memory.max (cgroup v2) nor memory/memory.limit_in_bytes (v1) is readable")
    cfg = contract.Config(contract_env(), str(fake.barcelona(tmp_path)))
    ports, nets = tuple(facts.read_rdma_ports(str(tmp_path))), tuple(facts.listdir(str(tmp_path / "class" / "net")))
    p = plan.decide(cfg, facts.Facts(found, ports, nets, cgroup))
    report = plan.render_report(cfg, p)
    assert p.errors == []
    (warning,) = [w for w in p.warnings if "out-of-memory guard" in w]
    assert warning.startswith("memory pinning ran without the out-of-memory guard: the container's memory limit is unknown (neither")
    assert "the proof pinned 16 MiB instead of LAUNCHER_PIN_BYTES 256 MiB, so it proves less than asked" in warning
    assert "container memory limit: unknown" in report and "so the proof pins at most 16 MiB" in report
    assert "proof buffer: 16 MiB, not LAUNCHER_PIN_BYTES 256 MiB" in report
    assert "mlock of 16 MiB: ok" in report
    pinning = p.summary["pinning"]
    assert (pinning["pin_bytes"], pinning["proof_bytes"], p.summary["container_memory"]["known"]) == (256 * MIB, 16 * MIB, False)


def test_unknown_memory_limit_warns_even_for_a_small_proof(tmp_path: pathlib.Path) -> None:
    root = fake.empty(tmp_path / "sys", ["lo", "eth0", "net1"])
    fake.add_port(root, "mlx5_6")
    env = contract_env(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(64 * 1024))
    result = run_launcher(env, "--print-env", "--sysfs-root", str(root))
    assert result.returncode == 0, result.stderr
    assert "WARNING: memory pinning ran without the out-of-memory guard" in result.stderr
    report = report_of(result.stderr)
    assert report["container_memory"]["known"] is False
    assert report["pinning"]["proof_bytes"] == 64 * 1024


# --------------------------------------------------------------------------------------------
# ulimit in the workload's scripts: the BASH_ENV shim, decided
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "found, moot",
    [
        (memlock_facts(), "CAP_IPC_LOCK is effective"),
        (memlock_facts(cap_eff=0, pin_bytes=6 * MIB), "pinned 6 MiB within RLIMIT_MEMLOCK"),
        (memlock_facts(cap_eff=0, pin_errno=12), ""),  # not proven
        (memlock_facts(pin_errno=None), ""),  # not checked
        (memlock_facts(pin_errno=None, pin_blocked="too big for the container"), ""),
        (memlock_facts(uid=1000, cap_eff=1 << facts.CAP_IPC_LOCK, cap_amb=1 << facts.CAP_IPC_LOCK), "CAP_IPC_LOCK is effective"),
        (
            memlock_facts(uid=1000, cap_eff=1 << facts.CAP_IPC_LOCK, cap_amb=0, limit_before=(facts.INFINITY, facts.INFINITY)),
            "within RLIMIT_MEMLOCK",
        ),
    ],
)
def test_moot_only_where_pinning_is_proven(found: Any, moot: str) -> None:
    reason = memlock.ulimit_moot_reason(found)
    assert (moot in reason) if moot else reason == ""


def test_plan_exports_bash_env_and_chains_the_images(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.barcelona(tmp_path), BASH_ENV="/etc/profile.d/image.sh")
    assert p.env["BASH_ENV"] == contract.DEFAULT_BASH_ENV_FILE
    assert p.bash_env is not None
    path, text = p.bash_env
    assert path == contract.DEFAULT_BASH_ENV_FILE
    assert "if [ -r /etc/profile.d/image.sh ]; then . /etc/profile.d/image.sh; fi" in text
    assert "a failing raise is moot and does not stop them (BASH_ENV)" in report


def test_a_bash_env_that_is_already_the_launchers_is_not_chained(tmp_path: pathlib.Path) -> None:
    # A launcher started inside a launched pod (oc exec) must not make the file source itself.
    p, _ = plan_for(fake.barcelona(tmp_path), BASH_ENV=contract.DEFAULT_BASH_ENV_FILE)
    assert p.bash_env is not None
    assert "if [ -r" not in p.bash_env[1]


def test_no_bash_env_when_pinning_failed(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.barcelona(tmp_path), memlock=memlock_facts(cap_eff=0, pin_errno=12), LAUNCHER_MODE="tcp")
    assert p.bash_env is None and "BASH_ENV" not in p.env
