"""What the launcher writes besides the environment it execs with: the DeepSpeed hostfile."""

from __future__ import annotations

import json
import pathlib

import pytest
from test_launcher import L, contract_env, fake, plan_for, run_launcher, tcp_env

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
