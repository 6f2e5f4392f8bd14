"""The environment contract (components/launcher/contract.py): every problem named at once, in the words of the
variable, and what would break the command the launcher execs (PYTHONHOME, a `$PATH` Kubernetes never expanded)."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from components.launcher import contract
from tests.launcher import launcher_sysfs as fake
from tests.launcher.pod import contract_env, plan_for, tcp_env


def test_config_errors_name_every_bad_variable(tmp_path: pathlib.Path) -> None:
    env = contract_env(LAUNCHER_MODE="roce", LAUNCHER_ARGS="train.py", LAUNCHER_NNODES="two", LAUNCHER_TCP_FALLBACK="maybe")
    with pytest.raises(contract.ConfigError) as info:
        contract.Config(env, str(tmp_path))
    message = str(info.value)
    for name in ("LAUNCHER_MODE", "LAUNCHER_ARGS", "LAUNCHER_NNODES", "LAUNCHER_TCP_FALLBACK"):
        assert name in message


@pytest.mark.parametrize("value", [str(2**63), "1_000", "0x10", "1e9", "+5", "-1", "٣", "9" * 5000])
@pytest.mark.parametrize("name", ["LAUNCHER_PIN_BYTES", "LAUNCHER_NNODES", "LAUNCHER_GPUS_PER_NODE", "MASTER_PORT"])
def test_numbers_are_plain_decimal_integers_in_range(tmp_path: pathlib.Path, name: str, value: str) -> None:
    with pytest.raises(contract.ConfigError) as info:
        contract.Config(contract_env(**{name: value}), str(tmp_path))
    assert name in str(info.value)


@pytest.mark.parametrize("value", [str(contract.MAX_PIN_BYTES + 1), "0"])
def test_pin_size_is_bounded(tmp_path: pathlib.Path, value: str) -> None:
    with pytest.raises(contract.ConfigError, match=f"LAUNCHER_PIN_BYTES is {value}; expected an integer in 1..{contract.MAX_PIN_BYTES}"):
        contract.Config(contract_env(LAUNCHER_PIN_BYTES=value), str(tmp_path))
    assert contract.Config(contract_env(LAUNCHER_PIN_BYTES=str(contract.MAX_PIN_BYTES)), str(tmp_path)).pin_bytes == contract.MAX_PIN_BYTES


@pytest.mark.parametrize(
    "args, message",
    [
        ("{not json", "LAUNCHER_ARGS is not valid JSON"),
        ('{"script": "train.py"}', "expected a JSON list of strings"),
        ("[]", "LAUNCHER_ARGS is empty; it must name the training script"),
    ],
)
def test_launcher_args_is_a_json_list_of_strings(tmp_path: pathlib.Path, args: str, message: str) -> None:
    with pytest.raises(contract.ConfigError, match=message):
        contract.Config(contract_env(LAUNCHER_ARGS=args), str(tmp_path))


def test_sysfs_root_argument_wins_over_environment(tmp_path: pathlib.Path) -> None:
    real = fake.barcelona(tmp_path / "real")
    env = contract_env(LAUNCHER_SYSFS_ROOT=str(tmp_path / "missing"))
    assert contract.Config(env, str(real)).sysfs_root == str(real)
    with pytest.raises(contract.ConfigError, match="sysfs root"):
        contract.Config(env)


def test_link_layer_is_validated(tmp_path: pathlib.Path) -> None:
    with pytest.raises(contract.ConfigError, match="LAUNCHER_LINK_LAYER is 'roce'; expected one of: InfiniBand, Ethernet"):
        contract.Config(contract_env(LAUNCHER_LINK_LAYER="roce"), str(tmp_path))


# --------------------------------------------------------------------------------------------
# The node rank
# --------------------------------------------------------------------------------------------


def test_rank_from_statefulset_ordinal_and_world_size(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.barcelona(tmp_path))
    assert (p.env["NODE_RANK"], p.env["WORLD_SIZE"]) == ("1", "8")
    master = ["--master_addr", "h-kim-0.h-kim-headless.ns.svc.cluster.local", "--master_port", "29500"]
    assert p.argv == ["torchrun", "--nnodes", "2", "--nproc_per_node", "4", "--node_rank", "1", *master, "train.py", "--epochs", "1"]


def test_job_completion_index_wins_over_pod_name(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.barcelona(tmp_path), POD_NAME="train-7-xk2p9", JOB_COMPLETION_INDEX="0", LAUNCHER_NNODES="3")
    assert p.env["NODE_RANK"] == "0"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"POD_NAME": "h-kim-2"}, "node rank 2 (from POD_NAME) is outside 0..1"),
        ({"POD_NAME": "h-kim"}, "has no trailing -N ordinal and JOB_COMPLETION_INDEX is unset"),
        ({"JOB_COMPLETION_INDEX": "one"}, "JOB_COMPLETION_INDEX gives node rank 'one'"),
    ],
)
def test_a_rank_that_cannot_be_told_is_an_error(tmp_path: pathlib.Path, overrides: dict[str, str], message: str) -> None:
    p, _ = plan_for(fake.barcelona(tmp_path), **overrides)
    assert any(message in e for e in p.errors), p.errors


def test_single_pod_is_rank_zero_whatever_its_name(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.barcelona(tmp_path), POD_NAME="deepti-pod-2", LAUNCHER_NNODES="1", MASTER_ADDR=None, MASTER_PORT=None)
    assert p.errors == []
    assert (p.env["NODE_RANK"], p.env["MASTER_ADDR"]) == ("0", "127.0.0.1")


def test_command_run_execs_args_as_given(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.barcelona(tmp_path), LAUNCHER_RUN="command", LAUNCHER_ARGS='["sleep", "infinity"]')
    assert p.argv == ["sleep", "infinity"]


# --------------------------------------------------------------------------------------------
# What would break the command: PYTHONHOME, and references Kubernetes never expanded
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", sys.base_prefix, f"{sys.base_prefix}:{sys.base_exec_prefix}"], ids=["empty", "prefix", "both"])
def test_pythonhome_that_changes_nothing_is_passed_on(tmp_path: pathlib.Path, value: str) -> None:
    cfg = contract.Config(tcp_env(PYTHONHOME=value), str(tmp_path))
    assert cfg.python_env == {"PYTHONHOME": value}


def test_another_pythonhome_is_refused_naming_the_fix(tmp_path: pathlib.Path) -> None:
    with pytest.raises(contract.ConfigError) as info:
        contract.Config(tcp_env(PYTHONHOME="/nonexistent"), str(tmp_path))
    (problem,) = str(info.value).splitlines()
    assert problem.startswith("PYTHONHOME is '/nonexistent': the launcher (python3 -I) ignores it, but torchrun")
    assert "Fix: remove PYTHONHOME from the workload's env" in problem


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
    with pytest.raises(contract.ConfigError) as info:
        contract.Config(tcp_env(**{name: value}), str(tmp_path))
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
    assert contract.Config(tcp_env(**{name: value}), str(tmp_path)).mode == "tcp"
