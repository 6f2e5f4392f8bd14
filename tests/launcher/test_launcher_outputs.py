"""What the launcher writes besides the environment it execs with: the DeepSpeed hostfile and the
report as JSON."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from tests.launcher.test_launcher import L, contract_env, fake, plan_for, run_launcher, tcp_env

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
    plan, report = plan_for(fake.barcelona(tmp_path), LAUNCHER_HOSTS=HOSTS)
    assert plan.hostfile is None
    assert "deepspeed hostfile" not in report


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"LAUNCHER_HOSTS": None}, "LAUNCHER_HOSTS is empty"),
        ({"LAUNCHER_HOSTS": "a-0.svc"}, "LAUNCHER_HOSTS names 1 hosts but LAUNCHER_NNODES is 2"),
        ({"LAUNCHER_HOSTS": "a-0.svc,a 1.svc"}, "LAUNCHER_HOSTS has 'a 1.svc'; expected DNS names"),
        ({"LAUNCHER_HOSTS": "a-0.svc,a-1.svc\nevil slots=99"}, "expected DNS names"),
        ({"LAUNCHER_HOSTS": "a-0.svc,-a.svc"}, "expected DNS names"),
        ({"LAUNCHER_DEEPSPEED_HOSTFILE": "relative/hostfile"}, "expected an absolute path"),
    ],
)
def test_hostfile_contract_is_validated(tmp_path: pathlib.Path, overrides: dict[str, str | None], message: str) -> None:
    env = contract_env(LAUNCHER_DEEPSPEED_HOSTFILE="/workspace/.deepspeed/hostfile", LAUNCHER_HOSTS=HOSTS)
    env.update({k: v for k, v in overrides.items() if v is not None})
    for key in [k for k, v in overrides.items() if v is None]:
        env.pop(key)
    with pytest.raises(L.ConfigError, match=message):
        L.load_config(env, str(tmp_path))


# --------------------------------------------------------------------------------------------
# The report as JSON: a file in the pod and one LAUNCHER_REPORT line in the log
# --------------------------------------------------------------------------------------------


def report_lines(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line[len(L.REPORT_PREFIX) :]) for line in stderr.splitlines() if line.startswith(L.REPORT_PREFIX)]


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
    (logged,) = report_lines(result.stderr)
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
    (logged,) = report_lines(result.stderr)
    assert logged["verdict"] == "would-not-start"
    assert any("LAUNCHER_STRICT=true" in e for e in logged["errors"])
    assert json.loads((tmp_path / "out" / "report.json").read_text())["verdict"] == "would-not-start"


def test_a_configuration_error_is_reported_too(tmp_path: pathlib.Path) -> None:
    env = rdma_command_env(tmp_path, LAUNCHER_MODE="roce")
    result = run_launcher(env, "--sysfs-root", str(fake.empty(tmp_path / "sys")), "--env-file", str(tmp_path / "env"))
    assert result.returncode == 2
    (logged,) = report_lines(result.stderr)
    assert logged["verdict"] == "would-not-start"
    assert logged["errors"] == ["LAUNCHER_MODE is 'roce'; expected one of: rdma, tcp"]
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == logged


def test_an_unwritable_report_path_is_a_warning(tmp_path: pathlib.Path) -> None:
    (tmp_path / "out").write_text("a file where the report's directory should be")
    files = ["--env-file", str(tmp_path / "e"), "--bash-env-file", str(tmp_path / "b.sh")]
    result = run_launcher(rdma_command_env(tmp_path), "--sysfs-root", str(fake.shared_netns(tmp_path / "sys")), *files)
    assert result.returncode == 0, result.stderr
    (logged,) = report_lines(result.stderr)
    assert logged["verdict"] == "start"
    assert any("could not write the JSON report" in w for w in logged["warnings"])


def test_print_env_logs_the_report_but_writes_no_file(tmp_path: pathlib.Path) -> None:
    env = rdma_command_env(tmp_path)
    result = run_launcher(env, "--print-env", "--sysfs-root", str(fake.shared_netns(tmp_path / "sys")))
    assert result.returncode == 0, result.stderr
    (logged,) = report_lines(result.stderr)
    assert logged["verdict"] == "start"
    assert not (tmp_path / "out").exists()
    assert "BASH_ENV=/tmp/launcher-bash-env.sh" in result.stdout  # what exec would export
