"""The edit loop as a user meets it on the command line: a green `check` says one line (an info counted, repeats grouped),
`check` says what only the tests used to (a tier no stack file deploys), `render` shows the warnings it passes, and a
command that reads the cluster without the cluster's kube context says so once, with both ways on."""

from __future__ import annotations

import copy
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from cli.main import main
from config import project
from policy.core import WIDTH
from tests import fixtures
from tests.fixtures import operator_mode

STACK = """from config import ClusterConfig, NodeSet, Queueing, Security, ServiceAccount, Workload
CONFIG = ClusterConfig(
    name="scratch",
    description="x",
    gpu_model="H100",
    api_host="api.scratch.example.org",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4, allocatable_cpu="64", allocatable_memory="512Gi")],
    namespaces=["ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="h-kim", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa",
                 gpus_per_node=4, transport="tcp", nodes=2),
    ],{extra}
)
"""
QUEUED = '\n    queueing=Queueing(cluster_queue="q"),'
PROJECT_TIER = "config:\n  gpu-training:tier: project\n  kubernetes:context: {context}\n"
PLATFORM_TIER = "config:\n  gpu-training:cluster: scratch\n  gpu-training:tier: platform\n  kubernetes:context: {context}\n"


def scratch_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str = "", platform: bool = False, context: str = "scratch"
) -> Path:
    """A project folder of the test's own: clusters/scratch.py and its stack files."""
    (tmp_path / stacks.CLUSTERS).mkdir(parents=True)
    (tmp_path / stacks.CLUSTERS / "scratch.py").write_text(STACK.format(extra=extra), encoding="utf-8")
    (tmp_path / "Pulumi.scratch.yaml").write_text(PROJECT_TIER.format(context=context), encoding="utf-8")
    if platform:
        (tmp_path / "Pulumi.scratch-platform.yaml").write_text(PLATFORM_TIER.format(context=context), encoding="utf-8")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.scratch", raising=False)
    return tmp_path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def config_file(tmp_path: Path, name: str, edit: Any = None) -> str:
    data = fixtures.data(name)
    if edit is not None:
        edit(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


# --- a green check says little ----------------------------------------------------------------------------------------


def test_a_green_check_is_one_line_and_v_says_the_info_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The memlock info answers a reviewer, on every run alike: a green check counts it (and the accepted warnings) in
    its one line, and says neither the number of rules nor the info's block."""
    path = config_file(tmp_path, "roce")
    code, out, _ = run(["check", "--config", path], capsys)
    assert code == 0 and out == "roce: ok: 0 errors, 0 warnings, 1 info (-v lists them)\n", out
    code, verbose, _ = run(["check", "--config", path, "-v"], capsys)
    assert code == 0 and "roce: info memlock-strategy defaults.memlock_rdma (" in verbose
    assert "CRI-O sets no ambient capabilities" in verbose and "Fix: nothing, for this strategy" in verbose
    assert all(len(line) <= WIDTH for line in verbose.splitlines()) and verbose.endswith("roce: ok: 0 errors, 0 warnings, 1 info\n")


def test_the_hand_made_copies_nad_mode_operator_replaces_are_one_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Twelve near-identical seven-line warnings before: one finding at fabric.nad_mode, one `oc delete` per project."""

    def copies(d: dict[str, Any]) -> None:
        operator_mode(d)
        d["namespaces"].append("team-c")
        d["workloads"].append(
            {**copy.deepcopy(fixtures.workload(d, "dev")), "name": "dev-c", "namespace": "team-c", "state": "stopped", "mounts": []}
        )
        d["security"]["service_accounts"].append({"name": "trainer", "namespace": "team-c"})
        d["hand_made"] = [
            {"kind": "NetworkAttachmentDefinition", "namespace": ns, "name": a["network"], "source": "oc create by hand"}
            for ns in ("team-a", "team-c")
            for a in d["fabric"]["attachments"]
        ]

    code, out, err = run(["check", "--config", config_file(tmp_path, "roce", copies)], capsys)
    assert code == 0, out + err
    warnings = [line for line in out.splitlines() if line.startswith("roce: warning hand-made")]
    assert len(warnings) == 1 and "fabric.nad_mode" in warnings[0], out
    assert "4 hand_made entries are NAD copies the stack no longer declares" in out.replace("\n    ", " ")
    flat = out.replace("\n    ", " ")
    assert "`oc delete net-attach-def port1-network port2-network -n team-a`" in flat
    assert "`oc delete net-attach-def port1-network port2-network -n team-c`" in flat


# --- check says what only the tests said ----------------------------------------------------------------------------------


def test_a_tier_no_stack_file_deploys_is_an_error_of_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scratch_project(tmp_path, monkeypatch, QUEUED)
    code, out, _ = run(["check", "scratch"], capsys)
    flat = out.replace("\n    ", " ")
    assert code == 1, out
    assert "scratch: error stack-files queueing (clusters/scratch.py:" in flat
    assert (
        "platform-tier objects (ResourceFlavor scratch-n, ClusterQueue q" in flat
        and "(Pulumi.scratch.yaml) deploy only the project tier" in flat
    )
    assert "Fix: add Pulumi.scratch-platform.yaml" in flat and "gpu-training:tier: platform" in flat


def test_a_platform_stack_file_answers_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scratch_project(tmp_path, monkeypatch, QUEUED, platform=True)
    code, out, err = run(["check", "scratch"], capsys)
    assert code == 0 and "stack-files" not in out, out + err


def test_a_config_file_is_no_stack_and_has_no_stack_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config_file(
        tmp_path, "tcp", lambda d: d.update(queueing={"cluster_queue": "q", "quota": {"pool": {"cpu": "64", "memory": "64Gi"}}})
    )
    code, out, _ = run(["check", "--config", path], capsys)
    assert "stack-files" not in out, out


# --- render shows the warnings it passes ---------------------------------------------------------------------------------------


def test_render_prints_the_warnings_the_stack_does_not_accept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = scratch_project(tmp_path / "p", monkeypatch)
    code, out, err = run(["render", "scratch", "--out", str(root / "rendered")], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[-1] == f"scratch: wrote {root / 'rendered' / 'scratch'} (1 warning above: `python -m stacks check scratch` gives the fix)"
    image = next(i for i, line in enumerate(STACK.splitlines(), start=1) if "image=" in line)
    assert lines[0].startswith(f"scratch: warning image workloads[h-kim].image (clusters/scratch.py:{image}): ") and "quay.io/a/b:1" in out
    assert "Fix:" not in out  # `check` gives it


# --- a command that reads the cluster, without its context ---------------------------------------------------------------


def fake_oc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, contexts: list[str]) -> Path:
    """An `oc` first on PATH that knows these contexts, fails every other command as a missing context does, and logs
    what it was asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "oc.log"
    oc = bin_dir / "oc"
    names = "\\n".join(contexts)
    oc.write_text(
        f'#!/bin/sh\necho "$*" >> {log}\nif [ "$1 $2" = "config get-contexts" ]; then printf "{names}\\n"; exit 0; fi\n'
        'echo "error: context \\"scratch\\" does not exist" >&2\nexit 1\n',
        encoding="utf-8",
    )
    oc.chmod(oc.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return log


@pytest.mark.parametrize("command", ["status", "drift"])
def test_a_missing_context_is_one_message_with_the_login_and_the_offline_way(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scratch_project(tmp_path / "p", monkeypatch)
    log = fake_oc(tmp_path, monkeypatch, ["barcelona", "nerc"])
    code, out, err = run([command, "scratch"], capsys)
    assert code == 2 and out == "", (out, err)
    (line,) = err.splitlines()
    assert line.startswith(f"error: {command} scratch: the kubeconfig has no context 'scratch' (Pulumi.scratch.yaml names it")
    assert "`oc login --server=https://api.scratch.example.org:6443`" in line
    assert f"`python -m stacks {command} scratch --live FILE`" in line
    assert line.count("does not exist") == 0
    assert log.read_text(encoding="utf-8").splitlines() == ["config get-contexts -o name"]  # nothing read of the cluster


def test_with_the_context_the_command_reads_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scratch_project(tmp_path / "p", monkeypatch)
    log = fake_oc(tmp_path, monkeypatch, ["scratch"])
    run(["status", "scratch"], capsys)
    assert any(line.startswith("get ") for line in log.read_text(encoding="utf-8").splitlines())
