"""The launcher under adversarial input: nothing the environment or sysfs holds may produce a Python
traceback or a hang (a fuzz audit found 10 tracebacks and 2 hangs in 162 cases).

The sysfs cases run the real command line in a subprocess with a timeout and an address-space limit,
so a hang fails the test (instead of hanging the suite) and an endless read fails with a
MemoryError traceback (instead of eating the machine's memory).
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence

import pytest

from tests.launcher.test_launcher import (
    LAUNCHER_FILE,
    MIB,
    L,
    capsh_drop,
    contract_env,
    fake,
    kernel,
    memlock_facts,
    plan_for,
    tcp_env,
)

ADDRESS_SPACE_LIMIT = 1024 * MIB  # far above what the launcher needs in tcp mode, far below an endless read


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_bounded(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The launcher's command line; a hang raises TimeoutExpired (a minute: only a hang takes that long, however loaded
    the machine), an endless read hits RLIMIT_AS."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    return subprocess.run(
        [sys.executable, str(LAUNCHER_FILE), *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limit_address_space,
    )


def assert_clean(result: subprocess.CompletedProcess[str], returncode: int) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == returncode, result.stderr


def small_pin_env(**overrides: str | None) -> dict[str, str]:
    """rdma mode with a 64 KiB proof buffer: pins under any memlock limit, no privilege needed, so
    the sysfs cases run anywhere (the kernel cases below are the ones about pinning)."""
    return contract_env(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(64 * 1024), **overrides)


def one_port_tree(root: pathlib.Path) -> pathlib.Path:
    fake.add_port(root, "mlx5_6")
    fake.add_netdevs(root, ["lo", "eth0", "net1"])
    return root


def port_dir(root: pathlib.Path, device: str = "mlx5_6", port: int = 1) -> pathlib.Path:
    return root / "class" / "infiniband" / device / "ports" / str(port)


def replace_with(path: pathlib.Path, make: str) -> None:
    """Put something hostile where a sysfs attribute should be."""
    path.unlink()
    if make == "fifo":
        os.mkfifo(path)
    elif make == "dev-zero":
        path.symlink_to("/dev/zero")
    elif make == "huge":
        with open(path, "wb") as handle:
            handle.truncate(10 * MIB)  # sparse: 10 MB of NUL bytes, instantly
    elif make == "garbage":
        path.write_bytes(b"\xff\xfe\x00\x07 4: ACT\x00IVE \xe2\x98\x83\n")
    elif make == "loop":
        path.symlink_to(path.name)
    else:
        raise AssertionError(make)


# --------------------------------------------------------------------------------------------
# sysfs: FIFOs, endless and huge files, garbage, odd names
# --------------------------------------------------------------------------------------------

HOSTILE = ["fifo", "dev-zero", "huge", "garbage", "loop"]


@pytest.mark.parametrize("make", HOSTILE)
def test_hostile_state_file_is_unknown_not_a_hang(tmp_path: pathlib.Path, make: str) -> None:
    root = one_port_tree(tmp_path)
    replace_with(port_dir(root) / "state", make)
    result = run_bounded(small_pin_env(), "--print-env", "--sysfs-root", str(root))  # a hang fails it: TimeoutExpired
    assert_clean(result, 2)
    # The only port's state is unknown, so it is not ACTIVE: the pod stops and says what it saw.
    assert "no ACTIVE RDMA port" in result.stderr
    assert "mlx5_6:1 unknown" in result.stderr


@pytest.mark.parametrize("make", HOSTILE)
def test_hostile_gid_and_link_layer_files_are_unknown(tmp_path: pathlib.Path, make: str) -> None:
    root = one_port_tree(tmp_path)
    pdir = port_dir(root)
    replace_with(pdir / "link_layer", make)
    replace_with(pdir / "gids" / "3", make)
    result = run_bounded(small_pin_env(), "--print-env", "--sysfs-root", str(root))
    assert_clean(result, 0)  # ACTIVE, link layer unknown: usable, no GID index to choose
    assert "mlx5_6:1 ACTIVE unknown" in result.stderr
    assert "NCCL_IB_HCA==mlx5_6:1" in result.stdout


def test_fifo_and_device_in_class_net_and_cgroup_do_not_hang(tmp_path: pathlib.Path) -> None:
    root = one_port_tree(tmp_path)
    os.mkfifo(root / "class" / "net" / "fifo0")
    (root / "class" / "net" / "zero0").symlink_to("/dev/zero")
    memory_max = fake.cgroup_v2(root, "max")
    replace_with(memory_max, "fifo")
    replace_with(fake.cgroup_v1(root, "1"), "dev-zero")
    result = run_bounded(small_pin_env(), "--print-env", "--sysfs-root", str(root))
    assert_clean(result, 0)
    assert "container memory limit: unknown" in result.stderr


def test_read_is_bounded_in_size_and_refuses_non_regular_files(tmp_path: pathlib.Path) -> None:
    small = tmp_path / "small"
    small.write_text("4: ACTIVE\n")
    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * L.READ_LIMIT)
    big = tmp_path / "big"
    big.write_bytes(b"x" * (L.READ_LIMIT + 1))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert L._read(str(small)) == "4: ACTIVE"
    assert L._read(str(exact)) == "x" * L.READ_LIMIT
    assert L._read(str(big)) is None
    assert L._read(str(fifo)) is None
    assert L._read("/dev/zero") is None
    assert L._read(str(tmp_path)) is None  # a directory
    assert L._read(str(tmp_path / "missing")) is None
    assert L._read(str(small) + "\0") is None


# Not a device, port, GID or interface name: none of these may be read as one, or crash the reader.
ODD_NAMES = ["²", "٣", "mlx5 6", "mlx5,6", "a:b", "\udcff", "x" * 100]


def test_odd_names_in_sysfs_are_ignored_and_reported(tmp_path: pathlib.Path) -> None:
    root = one_port_tree(tmp_path)
    infiniband = root / "class" / "infiniband"
    for name in ODD_NAMES:
        odd = os.fsencode(name)
        os.makedirs(os.path.join(os.fsencode(infiniband), odd, b"ports", b"1"), exist_ok=True)
        os.makedirs(os.path.join(os.fsencode(port_dir(root).parent), odd), exist_ok=True)  # port names
        (port_dir(root) / "gids").joinpath(os.fsdecode(odd)).write_text(fake.ipv4_gid(10, 0, 0, 1))  # GID indexes
        os.makedirs(os.path.join(os.fsencode(root / "class" / "net"), odd), exist_ok=True)
    (infiniband / "a-file").write_text("not a device directory")
    (infiniband / "dangling").symlink_to("nowhere")
    (infiniband / "loop").symlink_to("loop")
    fake.add_port(root, "mlx5_7", port=123456)  # a port number too long for the name rules is ignored

    odd: list[str] = []
    ports = L.read_rdma_ports(str(root), odd)
    assert [p.name for p in ports] == ["mlx5_6:1"]
    assert [g.index for g in ports[0].gids][:4] == [0, 1, 2, 3]
    assert any("²" in entry for entry in odd)
    nets = L.read_net_names(str(root), odd)
    assert nets == ["eth0", "lo", "net1"]

    result = run_bounded(small_pin_env(), "--print-env", "--sysfs-root", str(root))
    assert_clean(result, 0)
    assert "ignored sysfs entries whose names are not device, port, GID or interface names" in result.stderr
    assert "NCCL_IB_HCA==mlx5_6:1" in result.stdout


def test_natural_sort_survives_odd_and_enormous_digit_runs() -> None:
    names = ["mlx5_10", "mlx5_2", "²", "mlx5_" + "9" * 5000, "mlx5_0010", ""]
    ordered = sorted(names, key=L.natural_key)
    assert ordered.index("mlx5_2") < ordered.index("mlx5_10") < ordered.index("mlx5_" + "9" * 5000)


def test_directory_listings_are_bounded(tmp_path: pathlib.Path) -> None:
    gids = port_dir(one_port_tree(tmp_path)) / "gids"
    for index in range(8, L.MAX_DIR_ENTRIES + 500):
        (gids / str(index)).write_text(fake.ZERO_GID)
    (port, *_) = L.read_rdma_ports(str(tmp_path))
    assert len(port.gids) <= L.MAX_GIDS


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4: ACTIVE", "ACTIVE"),
        ("1: DOWN", "DOWN"),
        ("ACTIVE", "ACTIVE"),
        ("4: ACT IVE", "unknown"),
        ("\ufffd\ufffd", "unknown"),
        ("", "unknown"),
    ],
)
def test_port_state_parsing_is_strict(text: str, expected: str) -> None:
    assert L.parse_port_state(text) == expected


# --------------------------------------------------------------------------------------------
# The environment: deep and huge JSON, NUL bytes, huge and odd integers
# --------------------------------------------------------------------------------------------


def test_deeply_nested_launcher_args_is_a_config_error(tmp_path: pathlib.Path) -> None:
    result = run_bounded(tcp_env(LAUNCHER_ARGS="[" * 100000), "--print-env", "--sysfs-root", str(fake.empty(tmp_path)))
    assert_clean(result, 2)
    assert "LAUNCHER_ARGS is nested too deeply" in result.stderr


def test_huge_launcher_args_is_a_config_error(tmp_path: pathlib.Path) -> None:
    # Bigger than the kernel would pass as one environment string, so only reachable in-process.
    huge = json.dumps(["x" * (2 * MIB)])
    with pytest.raises(L.ConfigError, match="LAUNCHER_ARGS is .* characters long"):
        L.load_config(tcp_env(LAUNCHER_ARGS=huge), str(fake.empty(tmp_path)))


@pytest.mark.parametrize("args", [["sh", "-c", "echo a\u0000b"], ["\u0000"], ["sh", "\ud800"]])
def test_nul_bytes_and_unencodable_text_in_the_command_are_config_errors(tmp_path: pathlib.Path, args: list[str]) -> None:
    env = tcp_env(LAUNCHER_RUN="command", LAUNCHER_ARGS=json.dumps(args))
    result = run_bounded(env, "--sysfs-root", str(fake.empty(tmp_path)), "--env-file", str(tmp_path / "env"))
    assert_clean(result, 2)
    assert "LAUNCHER_ARGS item" in result.stderr


def test_nul_byte_in_an_environment_value_is_a_config_error(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The kernel cannot pass a NUL byte in the environment; main() can be handed one in-process.
    env = tcp_env(NCCL_DEBUG="IN\0FO", LAUNCHER_RUN="command", LAUNCHER_ARGS='["true"]')
    assert L.main(["--sysfs-root", str(fake.empty(tmp_path)), "--env-file", str(tmp_path / "e")], env) == 2
    assert "'NCCL_DEBUG' has a NUL byte in its value" in capsys.readouterr().err


HUGE_NUMBERS = [str(2**63), str(2**64), "9" * 5000, "1" + "0" * 4400, "1_000", "٣", "²", "0x10", "-0", "1e9", "+5"]


@pytest.mark.parametrize("value", HUGE_NUMBERS)
@pytest.mark.parametrize("name", ["LAUNCHER_PIN_BYTES", "LAUNCHER_NNODES", "LAUNCHER_GPUS_PER_NODE", "MASTER_PORT"])
def test_odd_integers_are_config_errors(tmp_path: pathlib.Path, name: str, value: str) -> None:
    with pytest.raises(L.ConfigError) as info:
        L.load_config(contract_env(**{name: value}), str(tmp_path))
    assert name in str(info.value)


@pytest.mark.parametrize("name, value", [("LAUNCHER_PIN_BYTES", str(L.MAX_PIN_BYTES + 1)), ("LAUNCHER_PIN_BYTES", "0")])
def test_pin_size_is_bounded(tmp_path: pathlib.Path, name: str, value: str) -> None:
    with pytest.raises(L.ConfigError, match=f"{name} is {value}; expected an integer in 1..{L.MAX_PIN_BYTES}"):
        L.load_config(contract_env(**{name: value}), str(tmp_path))
    assert L.load_config(contract_env(LAUNCHER_PIN_BYTES=str(L.MAX_PIN_BYTES)), str(tmp_path)).pin_bytes == L.MAX_PIN_BYTES


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"JOB_COMPLETION_INDEX": "9" * 5000}, "JOB_COMPLETION_INDEX gives node rank"),
        ({"JOB_COMPLETION_INDEX": "²"}, "JOB_COMPLETION_INDEX gives node rank"),
        ({"POD_NAME": "h-kim-" + "9" * 5000}, "POD_NAME gives node rank"),
        ({"POD_NAME": "h-kim-٣"}, "has no trailing -N ordinal"),
    ],
)
def test_odd_node_ranks_are_errors_not_tracebacks(tmp_path: pathlib.Path, overrides: dict[str, str], message: str) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path), **overrides)
    assert any(message in e for e in plan.errors), plan.errors


@pytest.mark.parametrize("value", ["net1/../../x", "net 1", "net1,", "²", "a" * 16])
def test_rdma_interface_names_are_validated(tmp_path: pathlib.Path, value: str) -> None:
    env = contract_env(LAUNCHER_RDMA_INTERFACES=f"net0,{value}")
    if value == "net1,":  # an empty entry is only a trailing comma
        assert L.load_config(env, str(tmp_path)).rdma_interfaces == ("net0", "net1")
        return
    with pytest.raises(L.ConfigError, match="LAUNCHER_RDMA_INTERFACES has"):
        L.load_config(env, str(tmp_path))


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize(
    "name, value",
    [("NCCL_IB_HCA", "mlx5_6:²"), ("NCCL_IB_HCA", "=mlx5_6:" + "9" * 5000), ("NCCL_SOCKET_IFNAME", "net1:²")],
)
def test_a_port_that_is_not_a_number_is_an_invalid_entry(tmp_path: pathlib.Path, name: str, value: str, explicit: bool) -> None:
    # isdigit() accepts '²', which int() refuses; int() also refuses more than 4300 digits.
    settings = {"LAUNCHER_RDMA_INTERFACES": "net1", "LAUNCHER_EXPLICIT_NCCL": name if explicit else "", name: value}
    plan, _ = plan_for(one_port_tree(tmp_path), **settings)
    problem = f"has entry {L.shown(value.lstrip('='))}, whose port is not a port number"
    if explicit:
        (error,) = plan.errors
        assert problem in error
    else:
        assert plan.errors == []
        (override,) = plan.summary["overridden"]
        assert override["name"] == name and problem in override["reason"]
    result = run_bounded(small_pin_env(**{name: value}), "--print-env", "--sysfs-root", str(tmp_path))
    assert_clean(result, 0)


# Every variable of the contract, each given each hostile value, in-process: no exception may leave
# main(), and the verdict is an exit code.
CONTRACT = [
    "LAUNCHER_MODE",
    "LAUNCHER_MEMLOCK_STRATEGY",
    "LAUNCHER_PIN_BYTES",
    "LAUNCHER_TCP_FALLBACK",
    "LAUNCHER_RDMA_INTERFACES",
    "LAUNCHER_TCP_SOCKET_IFNAME",
    "LAUNCHER_SYSFS_ROOT",
    "LAUNCHER_NNODES",
    "LAUNCHER_GPUS_PER_NODE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "JOB_COMPLETION_INDEX",
    "POD_NAME",
    "LAUNCHER_RUN",
    "LAUNCHER_ARGS",
    "LAUNCHER_DEEPSPEED_HOSTFILE",
    "LAUNCHER_HOSTS",
    "LAUNCHER_LINK_LAYER",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_GID_INDEX",
]
# Values that are not UTF-8 are covered by a subprocess test below (pytest's capture cannot decode them).
HOSTILE_VALUES = ["\0", "9" * 5000, "²", "[" * 50000, "-1", "é\u2028", " ", ",,,", "../../..", "x" * 200000, "^", "=", ":", '["\\u0000"]']


@pytest.mark.parametrize("name", CONTRACT)
def test_no_contract_value_escapes_as_an_exception(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    sysfs = one_port_tree(tmp_path / "sys")
    for value in HOSTILE_VALUES:
        env = tcp_env(**{name: value})
        code = L.main(["--print-env", "--sysfs-root", str(sysfs)], env)
        out, err = capsys.readouterr()
        assert code in (0, 2), (name, value, err)
        assert "launcher report" in err
        if code == 0:
            assert "verdict: START" in err and out


def test_non_utf8_environment_values_pass_through_print_env(tmp_path: pathlib.Path) -> None:
    env = tcp_env(NCCL_DEBUG_SUBSYS="INIT\udcff")  # the byte 0xff, as os.environ holds it
    result = subprocess.run(
        [sys.executable, str(LAUNCHER_FILE), "--print-env", "--sysfs-root", str(fake.empty(tmp_path))],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert b"NCCL_DEBUG_SUBSYS=INIT\xff\n" in result.stdout


# --------------------------------------------------------------------------------------------
# The container's memory limit: never pin what the OOM killer would punish
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("writer", [fake.cgroup_v2, fake.cgroup_v1])
def test_pin_above_the_container_memory_limit_stops_without_pinning(
    tmp_path: pathlib.Path, writer: Callable[[pathlib.Path, str], pathlib.Path]
) -> None:
    root = one_port_tree(tmp_path)
    writer(root, str(128 * MIB))
    env = contract_env(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(256 * MIB))
    result = run_bounded(env, "--print-env", "--sysfs-root", str(root))
    assert_clean(result, 2)
    assert "mlock of 256 MiB: not attempted" in result.stderr
    assert "LAUNCHER_PIN_BYTES is 256 MiB and the limit is 128 MiB" in result.stderr
    assert "exit 137" in result.stderr
    assert "lower LAUNCHER_PIN_BYTES (the stack's defaults.pin_bytes) to at most 64 MiB" in result.stderr
    assert "raise the pod's memory limit (resources.limits.memory) to at least 320 MiB" in result.stderr


@kernel
def test_pin_within_the_memory_limit_with_headroom_is_proven(tmp_path: pathlib.Path) -> None:
    root = one_port_tree(tmp_path)
    fake.cgroup_v2(root, str(320 * MIB))  # exactly 256 MiB + the 64 MiB headroom
    result = run_bounded(
        contract_env(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(256 * MIB)), "--print-env", "--sysfs-root", str(root)
    )
    assert_clean(result, 0)
    assert "container memory limit: 320 MiB" in result.stderr
    assert "mlock of 256 MiB: ok" in result.stderr


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
    cgroup = L.read_cgroup_memory(str(tmp_path))
    assert (cgroup.limit, cgroup.known) == (limit, known)


def test_pin_blocked_in_tcp_mode_is_only_a_warning(tmp_path: pathlib.Path) -> None:
    facts = memlock_facts(pin_errno=None, pin_blocked="the proof buffer does not fit the container's memory limit: ...")
    plan, report = plan_for(fake.empty(tmp_path), memlock=facts, LAUNCHER_MODE="tcp", LAUNCHER_RDMA_INTERFACES="")
    assert plan.errors == []
    assert any("pinning failed, which tcp mode does not need" in w for w in plan.warnings)
    plan, _ = plan_for(fake.barcelona(tmp_path / "rdma"), memlock=facts)
    assert plan.errors and "does not fit the container's memory limit" in plan.errors[0]


# --------------------------------------------------------------------------------------------
# Soft limit below the hard one, on the real kernel
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def readable_copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    base = tmp_path_factory.mktemp("launcher-soft")
    shutil.copy(LAUNCHER_FILE, base / "launcher.py")
    one_port_tree(base / "sys")
    yield base


def soft_hard_run(base: pathlib.Path, strategy: str, drop: str, soft: int, hard: int, pin: int) -> subprocess.CompletedProcess[str]:
    env = contract_env(LAUNCHER_MEMLOCK_STRATEGY=strategy, LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_PIN_BYTES=str(pin))
    prefix: Sequence[str] = ["prlimit", f"--memlock={soft}:{hard}", *capsh_drop(drop)]
    return subprocess.run(
        [*prefix, sys.executable, str(base / "launcher.py"), "--print-env", "--sysfs-root", str(base / "sys")],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@kernel
@pytest.mark.parametrize("strategy", ["none", "root-sys-resource", "privileged", "node-limit"])
def test_kernel_soft_limit_below_hard_is_raised_before_the_proof(readable_copy: pathlib.Path, strategy: str) -> None:
    # 1 MiB soft, 8 MiB hard, no IPC_LOCK and no SYS_RESOURCE: 6 MiB can be pinned once soft is
    # raised to hard, which needs no privilege. The fuzz audit found the launcher refusing here.
    result = soft_hard_run(readable_copy, strategy, "cap_ipc_lock,cap_sys_resource", MIB, 8 * MIB, 6 * MIB)
    assert result.returncode == 0, result.stderr
    assert "RLIMIT_MEMLOCK: soft 1024 KB, hard 8192 KB" in result.stderr
    assert "raised the soft RLIMIT_MEMLOCK to the hard limit, 8192 KB" in result.stderr
    assert "mlock of 6 MiB: ok" in result.stderr
    assert "effective pinning limit: 8192 KB" in result.stderr


@kernel
def test_kernel_soft_raise_does_not_hide_a_hard_limit_that_is_too_low(readable_copy: pathlib.Path) -> None:
    result = soft_hard_run(readable_copy, "none", "cap_ipc_lock,cap_sys_resource", MIB, 4 * MIB, 6 * MIB)
    assert result.returncode == 2, result.stderr
    assert "raised the soft RLIMIT_MEMLOCK to the hard limit, 4096 KB" in result.stderr
    assert "mlock of 6 MiB: FAILED (ENOMEM" in result.stderr


# --------------------------------------------------------------------------------------------
# Python 3.8: the oldest interpreter a PyTorch image may have
# --------------------------------------------------------------------------------------------


@functools.cache
def _python38() -> str | None:
    """A Python 3.8 interpreter, probed once per process; its own executable, so that a version manager's shim
    (a shell script that looks the version up on every run) is not paid at each launch."""
    for candidate in (shutil.which("python3.8"), os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8")):
        if candidate and os.access(candidate, os.X_OK):
            probe = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2]); print(sys.executable)"], capture_output=True, text=True
            )
            lines = probe.stdout.splitlines()
            if probe.returncode == 0 and lines[:1] == ["(3, 8)"]:
                return lines[1] if len(lines) > 1 and lines[1] else candidate
    return None


def test_runs_on_python_3_8(tmp_path: pathlib.Path) -> None:
    python = _python38()
    if python is None:
        pytest.skip("no Python 3.8 interpreter on this machine")
    root = fake.barcelona(tmp_path)
    fake.cgroup_v2(root, str(4096 * MIB))
    env = contract_env(NCCL_IB_HCA="mlx5_6,mlx5_7,mlx5_10,mlx5_11", LAUNCHER_ARGS="[" * 100000, LAUNCHER_PIN_BYTES="65536")
    result = subprocess.run(
        [python, str(LAUNCHER_FILE), "--print-env", "--sysfs-root", str(root)],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_clean(result, 2)
    assert "LAUNCHER_ARGS is nested too deeply" in result.stderr
    env["LAUNCHER_ARGS"] = '["train.py"]'
    result = subprocess.run(
        [python, str(LAUNCHER_FILE), "--print-env", "--sysfs-root", str(root)],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_clean(result, 0)
    assert "NCCL_IB_DISABLE=0" in result.stdout
    assert "NCCL_IB_HCA==mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1" in result.stdout  # the image's list overridden
    assert "LAUNCHER_REPORT {" in result.stderr
