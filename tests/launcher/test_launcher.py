"""Tests for the in-pod launcher (components/launcher/launcher.py).

Three layers:
- decisions over fake sysfs trees shaped like the clusters in the seeds (pure functions, fast);
- the real kernel of the test machine: the launcher must pass or fail exactly as the kernel allows
  pinning under an 8 MiB limit, without IPC_LOCK, or as uid 1000 (root only; skipped otherwise);
- end to end: two launchers on loopback start a real two-node torchrun (only where torch imports).

The launcher and the sysfs builder are loaded by file path: the launcher is shipped into pods as a
single file, and loading it this way keeps the tests independent of how the repository's packages
are laid out.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.helpers import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCHER_FILE = ROOT / "components" / "launcher" / "launcher.py"
MIB = 1024 * 1024


def _load(name: str, path: pathlib.Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


L = _load("launcher", LAUNCHER_FILE)
fake = _load("launcher_sysfs", pathlib.Path(__file__).with_name("launcher_sysfs.py"))

# Where launchers started by the tests write their JSON report, instead of the pod's default
# /tmp/launcher-report.json on the machine running the tests.
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


def memlock_facts(**overrides: Any) -> Any:
    """Root with IPC_LOCK under CRI-O's 8 MiB default, pinning proven: the root-ipc-lock setup."""
    values = dict(
        uid=0,
        cap_eff=1 << L.CAP_IPC_LOCK,
        cap_amb=0,
        limit_before=(8 * MIB, 8 * MIB),
        raise_target=None,
        raise_error=None,
        limit_after=(8 * MIB, 8 * MIB),
        pin_bytes=256 * MIB,
        pin_errno=0,
    )
    values.update(overrides)
    if "limit_before" in overrides and "limit_after" not in overrides:
        values["limit_after"] = values["limit_before"]
    return L.MemlockFacts(**values)


def plan_for(sysfs_root: pathlib.Path, memlock: Any = None, **env_overrides: str | None) -> tuple[Any, str]:
    """The plan for a fake sysfs tree: sysfs read as gather_facts reads it, memlock facts given."""
    cfg = L.load_config(contract_env(**env_overrides), str(sysfs_root))
    net_names = tuple(L.read_net_names(str(sysfs_root)))
    links = L.read_interface_links(str(sysfs_root), [i for i in cfg.rdma_interfaces if i in net_names])
    own = [d for link in links for d in link.devices]  # read first, as gather_facts does
    facts = L.Facts(memlock or memlock_facts(), tuple(L.read_rdma_ports(str(sysfs_root), own=own)), net_names, links=links)
    plan = L.decide(cfg, facts)
    return plan, L.render_report(cfg, plan)


# --------------------------------------------------------------------------------------------
# RDMA devices and NCCL settings over fake sysfs trees
# --------------------------------------------------------------------------------------------


def test_barcelona_selects_only_active_ports_exactly(tmp_path: pathlib.Path) -> None:
    # Seed 002 shipped NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11 while mlx5_6..9 were ACTIVE.
    plan, report = plan_for(fake.barcelona(tmp_path))
    assert plan.errors == []
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"
    assert plan.env["NCCL_IB_GID_INDEX"] == "3"
    assert plan.env["NCCL_IB_DISABLE"] == "0"
    assert plan.env["NCCL_SOCKET_IFNAME"] == "net1,net2,net3,net4"
    assert "left out: mlx5_10:1, mlx5_11:1" in report


def test_cairo_infiniband_needs_no_gid_index(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.cairo(tmp_path))
    assert plan.errors == []
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    assert "NCCL_IB_GID_INDEX" not in plan.env
    assert "InfiniBand uses GID index 0" in report


@pytest.mark.parametrize("active, expected", [("mlx5_1", "=mlx5_1:1"), ("mlx5_10", "=mlx5_10:1")])
def test_prefix_named_devices_use_exact_form(tmp_path: pathlib.Path, active: str, expected: str) -> None:
    for dev in ("mlx5_1", "mlx5_10"):
        fake.add_port(tmp_path, dev, state="ACTIVE" if dev == active else "DOWN")
    fake.add_netdevs(tmp_path, ["eth0", "net1"])
    plan, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    assert plan.env["NCCL_IB_HCA"] == expected
    # What NCCL will select under its own list rules: the exact form names one device only.
    assert L.nccl_list_matches(plan.env["NCCL_IB_HCA"].split(":")[0], ["mlx5_1", "mlx5_10"]) == [active]


def test_gid_index_is_found_where_the_roce_v2_ipv4_entry_is(tmp_path: pathlib.Path) -> None:
    # Index 3 is a RoCE v2 entry, but link-local; 4 is the IPv4 address as RoCE v1; 5 is the one.
    table: dict[int, tuple[str, str | None]] = {i: (fake.ZERO_GID, None) for i in range(8)}
    table.update(
        {
            0: (fake.link_local_gid(), "IB/RoCE v1"),
            3: (fake.link_local_gid(), "RoCE v2"),
            4: (fake.ipv4_gid(10, 0, 103, 7), "IB/RoCE v1"),
            5: (fake.ipv4_gid(10, 0, 103, 7), "RoCE v2"),
        }
    )
    for dev in ("mlx5_6", "mlx5_7"):
        fake.add_port(tmp_path, dev, gids=table)
    fake.add_netdevs(tmp_path, ["eth0", "net1", "net2"])
    plan, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1,net2")
    assert plan.env["NCCL_IB_GID_INDEX"] == "5"


def test_barcelona_layout_with_gid_index_shifted(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path, gid_index=5))
    assert plan.env["NCCL_IB_GID_INDEX"] == "5"


def test_ports_disagreeing_on_gid_index_leave_it_to_nccl(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", gids=fake.roce_gids(3))
    fake.add_port(tmp_path, "mlx5_7", gids=fake.roce_gids(5))
    fake.add_netdevs(tmp_path, ["net1", "net2"])
    plan, report = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1,net2")
    assert plan.errors == []
    assert "NCCL_IB_GID_INDEX" not in plan.env
    assert "mlx5_6:1 -> 3, mlx5_7:1 -> 5" in report


def test_roce_port_without_ipv4_gid_leaves_index_unset(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", gids=fake.roce_gids(3))
    fake.add_port(tmp_path, "mlx5_7", gids={0: (fake.link_local_gid(), "RoCE v2"), 1: (fake.ZERO_GID, None)})
    fake.add_netdevs(tmp_path, ["net1"])
    plan, report = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    assert "NCCL_IB_GID_INDEX" not in plan.env
    assert "mlx5_7:1 -> none" in report


def test_unreadable_gid_attrs_are_tolerated(tmp_path: pathlib.Path) -> None:
    fake.barcelona(tmp_path)
    ports = L.read_rdma_ports(str(tmp_path))
    # roce_gids() leaves unpopulated entries whose type cannot be read, as the kernel does.
    unreadable = [g for p in ports for g in p.gids if g.gid_type == ""]
    assert unreadable, "the fake tree should contain unreadable gid_attrs entries"
    assert [p.name for p in ports][:2] == ["mlx5_6:1", "mlx5_7:1"]  # natural order: mlx5_10 last
    assert ports[-1].name == "mlx5_11:1" and ports[-1].state == "DOWN"


def test_some_rdma_interfaces_missing_uses_the_rest_and_warns(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.barcelona(tmp_path, netdevs=["lo", "eth0", "net1", "net2"]))
    assert plan.errors == []
    assert plan.env["NCCL_SOCKET_IFNAME"] == "net1,net2"
    assert "SR-IOV interfaces missing from the pod: net3, net4" in report


def test_no_rdma_interface_present_fails_with_bootstrap_diagnosis(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.barcelona(tmp_path, netdevs=["lo", "eth0"]))
    assert len(plan.errors) == 1
    error = plan.errors[0]
    assert "net1, net2, net3, net4" in error
    assert "Bootstrap: no socket interface found" in error
    assert "networks annotation" in error and "NetworkAttachmentDefinitions" in error
    assert "WOULD NOT START" in report


def test_socket_ifname_goes_exact_when_a_prefix_would_catch_another_interface(tmp_path: pathlib.Path) -> None:
    fake.barcelona(tmp_path, netdevs=["lo", "eth0", "net1", "net2", "net10"])
    plan, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1,net2")
    assert plan.env["NCCL_SOCKET_IFNAME"] == "=net1,net2"


def test_explicit_nccl_values_are_kept_and_a_wrong_one_stops_an_rdma_pod(tmp_path: pathlib.Path) -> None:
    seed_hca = "mlx5_6,mlx5_7,mlx5_10,mlx5_11"
    explicit = "NCCL_IB_HCA,NCCL_NET_GDR_LEVEL"
    plan, report = plan_for(fake.barcelona(tmp_path), NCCL_IB_HCA=seed_hca, NCCL_NET_GDR_LEVEL="SYS", LAUNCHER_EXPLICIT_NCCL=explicit)
    assert plan.env["NCCL_IB_HCA"] == seed_hca  # never overridden: the workload meant it
    assert plan.env["NCCL_NET_GDR_LEVEL"] == "SYS"
    assert "NCCL_NET_GDR_LEVEL=SYS  kept: set explicitly by the workload" in report
    assert "detection would choose NCCL_IB_HCA='=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1'" in report
    # Two of the four names are not live here, so the pod stops and says which.
    (error,) = plan.errors
    assert "explicit NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11 names mlx5_10, which is not an ACTIVE" in error
    assert "names mlx5_11, which is not an ACTIVE" in error
    assert "WOULD NOT START" in report


def test_explicit_prefix_hca_is_flagged(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_1")
    fake.add_port(tmp_path, "mlx5_10", state="DOWN")
    fake.add_netdevs(tmp_path, ["net1"])
    plan, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_HCA="mlx5_1")
    assert plan.env["NCCL_IB_HCA"] == "mlx5_1"
    assert any("also selects mlx5_10" in w for w in plan.warnings)


def test_explicit_gid_index_that_is_wrong_stops_the_pod(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.barcelona(tmp_path, gid_index=5), NCCL_IB_GID_INDEX="3", LAUNCHER_EXPLICIT_NCCL="NCCL_IB_GID_INDEX")
    assert plan.env["NCCL_IB_GID_INDEX"] == "3"
    assert "detection would choose NCCL_IB_GID_INDEX='5'" in report
    assert any("explicit NCCL_IB_GID_INDEX=3 is not a RoCE v2 IPv4 GID on mlx5_6:1" in e for e in plan.errors)


def test_inherited_gid_index_that_is_wrong_is_overridden(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.barcelona(tmp_path, gid_index=5), NCCL_IB_GID_INDEX="3")
    assert plan.errors == []
    assert plan.env["NCCL_IB_GID_INDEX"] == "5"
    assert "NCCL_IB_GID_INDEX=5  OVERRIDDEN: inherited '3' is not a RoCE v2 IPv4 GID on mlx5_6:1" in report


def test_no_active_port_fails_without_fallback(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.add_netdevs(tmp_path, ["net1"])
    plan, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    assert len(plan.errors) == 1
    assert "no ACTIVE RDMA port" in plan.errors[0] and "mlx5_6:1 DOWN" in plan.errors[0]
    assert "LAUNCHER_TCP_FALLBACK=true" in plan.errors[0]


def test_no_active_port_falls_back_to_tcp_loudly_when_allowed(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.add_netdevs(tmp_path, ["eth0", "net1"])
    # Pinning failing does not stop a pod that has fallen back to TCP.
    plan, report = plan_for(
        tmp_path, memlock=memlock_facts(cap_eff=0, pin_errno=12), LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_TCP_FALLBACK="true"
    )
    assert plan.errors == []
    assert plan.env["NCCL_IB_DISABLE"] == "1"
    assert plan.env["NCCL_SOCKET_IFNAME"] == "^lo,docker0"
    assert "NCCL_IB_HCA" not in plan.env
    assert "RDMA MODE FELL BACK TO TCP" in report


def test_tcp_mode_uses_the_configured_socket_list(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(
        fake.empty(tmp_path),
        LAUNCHER_MODE="tcp",
        LAUNCHER_MEMLOCK_STRATEGY="none",
        LAUNCHER_RDMA_INTERFACES="",
        LAUNCHER_TCP_SOCKET_IFNAME="eth0",
        memlock=memlock_facts(pin_errno=None),
    )
    assert plan.errors == []
    assert plan.env["NCCL_IB_DISABLE"] == "1"
    assert plan.env["NCCL_SOCKET_IFNAME"] == "eth0"


def test_unreadable_link_layer_is_unknown_not_infiniband(tmp_path: pathlib.Path) -> None:
    # A RoCE port whose link_layer cannot be read: its GID index cannot be judged, and the report says so.
    pdir = fake.add_port(tmp_path, "mlx5_6", gids=fake.roce_gids(5))
    (pdir / "link_layer").unlink()
    fake.add_netdevs(tmp_path, ["lo", "eth0", "net1"])
    plan, report = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_GID_INDEX="3")
    assert plan.errors == []
    assert "InfiniBand" not in report
    assert "mlx5_6:1 ACTIVE unknown link layer" in report
    assert "NCCL_IB_GID_INDEX=3  kept" in report  # cannot be judged, so not overridden
    assert any("link layer of mlx5_6:1 is unknown" in w and "GID index not checked" in w for w in plan.warnings)
    assert any("inherited NCCL_IB_GID_INDEX=3: cannot be checked on mlx5_6:1 (link layer unknown)" in w for w in plan.warnings)
    plan, report = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    assert "NCCL_IB_GID_INDEX" not in plan.env
    assert "NCCL_IB_GID_INDEX unset: the link layer of mlx5_6:1 is unknown" in report


# --------------------------------------------------------------------------------------------
# Memory pinning verdicts (pure), following KNOWLEDGE.md's table
# --------------------------------------------------------------------------------------------


def test_root_with_ipc_lock_pins_under_the_default_limit() -> None:
    verdict = L.judge_memlock("root-ipc-lock", memlock_facts())
    assert verdict.ok
    assert any("IPC_LOCK is effective, so RLIMIT_MEMLOCK does not apply" in line for line in verdict.lines)


def test_non_root_failure_names_the_uid_and_the_strategies_that_work() -> None:
    verdict = L.judge_memlock("root-ipc-lock", memlock_facts(uid=1000680000, cap_eff=0, pin_errno=12))
    assert not verdict.ok
    assert "non-root uid 1000680000" in verdict.problem
    assert "8192 KB (CRI-O's default)" in verdict.problem
    assert "runAsUser: 0" in verdict.problem
    assert "only node-limit or privileged work" in verdict.problem
    assert "default_ulimits" in verdict.problem


def test_root_without_ipc_lock_failure_names_ipc_lock() -> None:
    verdict = L.judge_memlock("root-ipc-lock", memlock_facts(cap_eff=0, pin_errno=12))
    assert not verdict.ok
    assert "CAP_IPC_LOCK is not effective" in verdict.problem
    assert "IPC_LOCK in capabilities.add" in verdict.problem


def test_sys_resource_strategy_reports_a_refused_raise() -> None:
    facts = memlock_facts(cap_eff=0, raise_target=(L.INFINITY, L.INFINITY), raise_error="not allowed to raise maximum limit", pin_errno=12)
    verdict = L.judge_memlock("root-sys-resource", facts)
    assert not verdict.ok
    assert "could not be raised" in verdict.problem
    assert "CAP_SYS_RESOURCE, which is not effective" in verdict.problem


def test_node_limit_strategy_points_at_the_machineconfig() -> None:
    verdict = L.judge_memlock("node-limit", memlock_facts(uid=1000680000, cap_eff=0, pin_errno=12))
    assert "MachineConfig is not applied here" in verdict.problem


def test_non_root_ipc_lock_that_would_not_survive_exec_is_refused() -> None:
    verdict = L.judge_memlock("node-limit", memlock_facts(uid=1000, cap_eff=1 << L.CAP_IPC_LOCK, cap_amb=0))
    assert not verdict.ok
    assert "loses it at exec" in verdict.problem


def test_privileged_strategy_is_checked_against_this_kernels_capabilities() -> None:
    seed_004 = memlock_facts(cap_eff=0x45FB, cap_last=40)  # CRI-O defaults + IPC_LOCK: not privileged
    assert any("does not hold every capability" in line for line in L.judge_memlock("privileged", seed_004).lines)
    older_kernel_all_caps = memlock_facts(cap_eff=(1 << 38) - 1, cap_last=37)
    assert not any("does not hold every capability" in line for line in L.judge_memlock("privileged", older_kernel_all_caps).lines)


def test_mlock_failing_despite_ipc_lock_blames_memory_not_the_limit() -> None:
    verdict = L.judge_memlock("root-ipc-lock", memlock_facts(pin_errno=12))
    assert not verdict.ok
    assert "the memlock limit is not the cause" in verdict.problem
    assert "give the pod more memory" in verdict.problem


@pytest.mark.parametrize(
    "facts",
    [
        memlock_facts(uid=1000680000, cap_eff=0, limit_before=(L.INFINITY, L.INFINITY), pin_errno=12),  # node-limit applied
        memlock_facts(cap_eff=0, limit_before=(512 * MIB, 512 * MIB), pin_errno=11),  # a finite limit above the buffer
    ],
)
def test_mlock_failing_within_the_limit_blames_memory_not_the_limit_or_the_strategy(facts: Any) -> None:
    verdict = L.judge_memlock("node-limit", facts)
    assert not verdict.ok
    assert "the memlock limit is not the cause" in verdict.problem
    assert "give the pod more memory" in verdict.problem
    for contradiction in ("below the", "MachineConfig is not applied", "strategies that work", "IPC_LOCK cannot lift", "runAsUser"):
        assert contradiction not in verdict.problem


@pytest.mark.parametrize(
    "strategy, limit, expected",
    [
        ("root-sys-resource", (8 * MIB, 8 * MIB), (L.INFINITY, L.INFINITY)),
        ("privileged", (8 * MIB, 8 * MIB), (L.INFINITY, L.INFINITY)),
        ("privileged", (L.INFINITY, L.INFINITY), None),  # nothing left to raise
        ("root-ipc-lock", (8 * MIB, 8 * MIB), None),
        ("node-limit", (8 * MIB, L.INFINITY), None),  # the soft-to-hard step below does this
        ("none", (8 * MIB, L.INFINITY), None),
    ],
)
def test_raise_target(strategy: str, limit: tuple[int, int], expected: tuple[int, int] | None) -> None:
    assert L.memlock_raise_target(strategy, limit) == expected


@pytest.mark.parametrize(
    "limit, expected",
    [
        ((8 * MIB, L.INFINITY), (L.INFINITY, L.INFINITY)),
        ((1 * MIB, 8 * MIB), (8 * MIB, 8 * MIB)),
        ((8 * MIB, 8 * MIB), None),
        ((L.INFINITY, L.INFINITY), None),
    ],
)
def test_soft_limit_is_raised_to_the_hard_one_whatever_the_strategy(limit: tuple[int, int], expected: tuple[int, int] | None) -> None:
    assert L.soft_raise_target(limit) == expected


def test_pinning_failure_stops_rdma_but_not_tcp(tmp_path: pathlib.Path) -> None:
    failing = memlock_facts(cap_eff=0, pin_errno=12)
    plan, report = plan_for(fake.barcelona(tmp_path), memlock=failing)
    assert plan.errors and "cannot pin memory" in plan.errors[0]
    assert "IBV_WC_LOC_PROT_ERR" in report
    plan, _ = plan_for(tmp_path, memlock=failing, LAUNCHER_MODE="tcp")
    assert plan.errors == []
    assert any("pinning failed" in w for w in plan.warnings)


def test_caps_are_parsed_from_proc_status() -> None:
    status = "Name:\tpython3\nCapPrm:\t00000000000045fb\nCapEff:\t00000000000045fb\nCapAmb:\t0000000000000000\n"
    eff, amb = L.parse_caps(status)
    assert L.has_cap(eff, L.CAP_IPC_LOCK) and not L.has_cap(eff, L.CAP_SYS_RESOURCE)  # seed 004
    assert amb == 0


# --------------------------------------------------------------------------------------------
# Rendezvous and configuration
# --------------------------------------------------------------------------------------------


def test_rank_from_statefulset_ordinal_and_world_size(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path))
    assert plan.env["NODE_RANK"] == "1"
    assert plan.env["WORLD_SIZE"] == "8"
    assert plan.argv == [
        "torchrun",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "4",
        "--node_rank",
        "1",
        "--master_addr",
        "h-kim-0.h-kim-headless.ns.svc.cluster.local",
        "--master_port",
        "29500",
        "train.py",
        "--epochs",
        "1",
    ]


def test_job_completion_index_wins_over_pod_name(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path), POD_NAME="train-7-xk2p9", JOB_COMPLETION_INDEX="0", LAUNCHER_NNODES="3")
    assert plan.env["NODE_RANK"] == "0"


def test_rank_beyond_nnodes_is_an_error(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path), POD_NAME="h-kim-2")
    assert any("node rank 2" in e for e in plan.errors)


def test_single_pod_is_rank_zero_whatever_its_name(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path), POD_NAME="deepti-pod-2", LAUNCHER_NNODES="1", MASTER_ADDR=None, MASTER_PORT=None)
    assert plan.errors == []
    assert (plan.env["NODE_RANK"], plan.env["MASTER_ADDR"]) == ("0", "127.0.0.1")


def test_command_run_execs_args_as_given(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path), LAUNCHER_RUN="command", LAUNCHER_ARGS='["sleep", "infinity"]')
    assert plan.argv == ["sleep", "infinity"]


def test_config_errors_name_every_bad_variable(tmp_path: pathlib.Path) -> None:
    env = contract_env(LAUNCHER_MODE="roce", LAUNCHER_ARGS="train.py", LAUNCHER_NNODES="two", LAUNCHER_TCP_FALLBACK="maybe")
    with pytest.raises(L.ConfigError) as info:
        L.load_config(env, str(tmp_path))
    message = str(info.value)
    for name in ("LAUNCHER_MODE", "LAUNCHER_ARGS", "LAUNCHER_NNODES", "LAUNCHER_TCP_FALLBACK"):
        assert name in message


def test_package_exposes_the_tested_file() -> None:
    package = _load("components_launcher_pkg", LAUNCHER_FILE.with_name("__init__.py"))
    assert package.LAUNCHER_PATH == LAUNCHER_FILE


def test_launcher_uses_only_the_standard_library() -> None:
    source = LAUNCHER_FILE.read_text()
    imported = {line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


# --------------------------------------------------------------------------------------------
# The command line, in a subprocess
# --------------------------------------------------------------------------------------------


def run_launcher(
    env: dict[str, str],
    *args: str,
    prefix: Sequence[str] = (),
    launcher: pathlib.Path = LAUNCHER_FILE,
    python: str = sys.executable,
    cwd: str | None = None,
) -> subprocess.CompletedProcess[str]:
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    return subprocess.run([*prefix, python, str(launcher), *args], env=full_env, capture_output=True, text=True, timeout=60, cwd=cwd)


def tcp_env(**overrides: str | None) -> dict[str, str]:
    return contract_env(**{"LAUNCHER_MODE": "tcp", "LAUNCHER_MEMLOCK_STRATEGY": "none", "LAUNCHER_RDMA_INTERFACES": "", **overrides})


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


def test_bad_configuration_exits_two_without_traceback(tmp_path: pathlib.Path) -> None:
    result = run_launcher(tcp_env(LAUNCHER_ARGS="{not json"), "--print-env", "--sysfs-root", str(tmp_path))
    assert result.returncode == 2
    assert "LAUNCHER_ARGS is not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr


def test_sysfs_root_argument_wins_over_environment(tmp_path: pathlib.Path) -> None:
    real = fake.barcelona(tmp_path / "real")
    env = contract_env(LAUNCHER_SYSFS_ROOT=str(tmp_path / "missing"))
    assert L.load_config(env, str(real)).sysfs_root == str(real)
    with pytest.raises(L.ConfigError, match="sysfs root"):
        L.load_config(env)


def test_exec_replaces_the_launcher_and_exports_the_environment(tmp_path: pathlib.Path) -> None:
    env_file = tmp_path / "launcher.env"
    script = 'echo "pid=$$ rank=$NODE_RANK world=$WORLD_SIZE ifname=$NCCL_SOCKET_IFNAME"'
    env = tcp_env(LAUNCHER_RUN="command", LAUNCHER_ARGS=json.dumps(["sh", "-c", script]))
    proc = subprocess.Popen(
        [sys.executable, str(LAUNCHER_FILE), "--sysfs-root", str(fake.empty(tmp_path)), "--env-file", str(env_file)],
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


# --------------------------------------------------------------------------------------------
# The real kernel: pass or fail exactly as it allows pinning
# --------------------------------------------------------------------------------------------

EIGHT_MIB_LIMIT = ["prlimit", "--memlock=8388608:8388608"]


def _self_caps() -> int:
    with open("/proc/self/status") as handle:
        return int(L.parse_caps(handle.read())[0])


def _kernel_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the kernel tests need root (they drop IPC_LOCK and switch to uid 1000)"
    missing = [tool for tool in ("prlimit", "capsh", "setpriv") if not shutil.which(tool)]
    if missing:
        return f"the kernel tests need {', '.join(missing)} on PATH"
    if not L.has_cap(_self_caps(), L.CAP_IPC_LOCK):
        return "this process lacks CAP_IPC_LOCK, so the kernel tests cannot show its effect"
    return None


kernel = pytest.mark.skipif(_kernel_skip_reason() is not None, reason=_kernel_skip_reason() or "")


@pytest.fixture(scope="module")
def world_readable() -> Iterator[pathlib.Path]:
    """A copy of the launcher and a one-port RoCE sysfs in a 0755 directory, so uid 1000 can read
    them (pytest's tmp_path for root is 0700)."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="launcher-kernel-"))
    try:
        base.chmod(0o755)
        shutil.copy(LAUNCHER_FILE, base / "launcher.py")
        sysfs = base / "sys"
        fake.add_port(sysfs, "mlx5_6")
        fake.link_interface(sysfs, "net1", "mlx5_6", "0000:3b:00.2")
        fake.add_netdevs(sysfs, ["lo", "eth0"])
        fake.cgroup_v2(sysfs, "max")  # a known limit (none): the proof pins all of LAUNCHER_PIN_BYTES
        for path in [base, *base.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def kernel_run(
    base: pathlib.Path, strategy: str, prefix: Sequence[str] = (), mode: str = "rdma", python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    env = contract_env(
        LAUNCHER_MODE=mode, LAUNCHER_MEMLOCK_STRATEGY=strategy, LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(256 * MIB)
    )
    return run_launcher(
        env,
        "--print-env",
        "--sysfs-root",
        str(base / "sys"),
        launcher=base / "launcher.py",
        prefix=[*EIGHT_MIB_LIMIT, *prefix],
        python=python,
        cwd=str(base),
    )


def capsh_drop(caps: str) -> list[str]:
    # capsh runs /bin/bash with what follows "--"; bash then execs the launcher without the caps.
    return ["capsh", f"--drop={caps}", "--", "-c", 'exec "$@"', "launcher"]


@kernel
def test_kernel_root_with_ipc_lock_pins_under_8_mib(world_readable: pathlib.Path) -> None:
    result = kernel_run(world_readable, "root-ipc-lock")
    assert result.returncode == 0, result.stderr
    assert "RLIMIT_MEMLOCK: soft 8192 KB, hard 8192 KB" in result.stderr
    assert "mlock of 256 MiB: ok" in result.stderr
    assert "NCCL_IB_HCA==mlx5_6:1" in result.stdout


@kernel
def test_kernel_without_ipc_lock_fails_naming_ipc_lock(world_readable: pathlib.Path) -> None:
    result = kernel_run(world_readable, "root-ipc-lock", prefix=capsh_drop("cap_ipc_lock"))
    assert result.returncode == 2, result.stderr
    assert "CAP_IPC_LOCK is not effective" in result.stderr
    assert "RLIMIT_MEMLOCK is 8192 KB" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


@kernel
def test_kernel_tcp_mode_reports_and_continues_without_ipc_lock(world_readable: pathlib.Path) -> None:
    result = kernel_run(world_readable, "root-ipc-lock", prefix=capsh_drop("cap_ipc_lock"), mode="tcp")
    assert result.returncode == 0, result.stderr
    assert "mlock of 256 MiB: FAILED (ENOMEM" in result.stderr
    assert "pinning failed, which tcp mode does not need" in result.stderr


def _python_for_uid_1000() -> str | None:
    for candidate in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if (
            candidate
            and subprocess.run(
                ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", candidate, "-c", "pass"], capture_output=True
            ).returncode
            == 0
        ):
            return candidate
    return None


@kernel
def test_kernel_non_root_uid_fails_naming_the_uid(world_readable: pathlib.Path) -> None:
    python = _python_for_uid_1000()
    if python is None:
        pytest.skip("no python3 that uid 1000 can execute")
    setpriv = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
    result = kernel_run(world_readable, "root-ipc-lock", prefix=setpriv, python=python)
    assert result.returncode == 2, result.stderr
    assert "uid: 1000" in result.stderr
    assert "non-root uid 1000" in result.stderr


@kernel
def test_kernel_sys_resource_strategy_raises_the_limit_and_pins(world_readable: pathlib.Path) -> None:
    if not L.has_cap(_self_caps(), L.CAP_SYS_RESOURCE):
        pytest.skip("this machine's processes lack CAP_SYS_RESOURCE (not in the bounding set), so nothing here can raise a hard rlimit")
    result = kernel_run(world_readable, "root-sys-resource", prefix=capsh_drop("cap_ipc_lock"))
    assert result.returncode == 0, result.stderr
    assert "raised RLIMIT_MEMLOCK to unlimited/unlimited" in result.stderr
    assert "IPC_LOCK not effective" in result.stderr


@kernel
def test_kernel_sys_resource_strategy_without_the_capability_fails(world_readable: pathlib.Path) -> None:
    result = kernel_run(world_readable, "root-sys-resource", prefix=capsh_drop("cap_ipc_lock,cap_sys_resource"))
    assert result.returncode == 2, result.stderr
    assert "could not raise RLIMIT_MEMLOCK to unlimited/unlimited" in result.stderr
    assert "the limit could not be raised" in result.stderr
    assert "SYS_RESOURCE, which is not effective" in result.stderr


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
                [sys.executable, str(LAUNCHER_FILE), "--sysfs-root", str(sysfs), "--env-file", str(tmp_path / f"rank{rank}.env")],
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
