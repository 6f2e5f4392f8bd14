"""Stack names are held to Pulumi's grammar where they are read (issue 35): a stack file's name, its
gpu-training:cluster, a cluster module's name, a name on the command line. Pulumi's own rule (sdk/go/common/tokens/
stack_name.go, ParseStackName): not empty, at most 100 characters of [A-Za-z0-9_.-]. The attacker's stack file,
`Pulumi.fa-$(touch${IFS}PWNED);x.yaml`, reached the preview workflow through `list --pulumi-stacks --json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

import stacks
from cli.main import main
from config import project
from tests import fixtures

HOSTILE = [
    "fa-$(touch${IFS}PWNED);x",
    "lab`touch PWNED`",
    "lab;touch PWNED",
    "lab name",
    "lab\nscratch",
    "lab\x1b[31m",
    "lab'quote",
    "lab*",
    "..",
    ".",
    "x" * 101,
]


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose stack `lab` deploys a YAML copy of the tcp fixture (named lab)."""
    data = fixtures.tcp()
    data["name"] = "lab"
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    stack_file(tmp_path, "lab")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def stack_file(root: Path, name: str, cluster: str = "lab") -> Path:
    path = root / f"Pulumi.{name}.yaml"
    settings = {"gpu-training:configFile": "lab.yaml", "gpu-training:cluster": cluster, "kubernetes:context": "lab"}
    path.write_text(yaml.safe_dump({"config": settings}), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", HOSTILE)
def test_a_stack_file_whose_name_pulumi_would_refuse_is_an_error_and_never_listed(
    lab: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stack_file(lab, name)
    with pytest.raises(stacks.ConfigError, match="a stack name is letters, digits, '-', '_' and '.'|at most 100|is empty"):
        stacks.pulumi_stacks()
    assert main(["list", "--pulumi-stacks", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: Pulumi.") and err.count("\n") == 1 and "\x1b" not in err, err
    assert not (lab / "PWNED").exists()


@pytest.mark.parametrize("name", ["lab.v2", "LAB_2", "lab-2024.09", "a" * 100])
def test_every_name_of_pulumis_grammar_is_a_stack(lab: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    stack_file(lab, name)
    assert name in [s.name for s in stacks.pulumi_stacks()]
    assert main(["list", "--pulumi-stacks", "--json"]) == 0
    assert name in [row["stack"] for row in json.loads(capsys.readouterr().out)]


@pytest.mark.parametrize("cluster", ["lab;touch PWNED", "lab.x", "la_b", "lab$(id)"])
def test_a_cluster_setting_that_is_no_clusters_name_is_an_error(lab: Path, cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The cluster names the kubeconfig secret the workflow reads (KUBECONFIG_CLUSTER): a DNS label, its config's name.
    stack_file(lab, "lab-platform", cluster=cluster)
    assert main(["list", "--pulumi-stacks", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Pulumi.lab-platform.yaml: gpu-training:cluster") and "lowercase letters, digits and '-'" in err, err


def test_every_listed_row_is_of_the_grammar_and_its_secret_a_secrets_name(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack_file(lab, "lab.platform")
    assert main(["list", "--pulumi-stacks", "--json"]) == 0
    for row in json.loads(capsys.readouterr().out):
        assert stacks.STACK_NAME.fullmatch(row["stack"]) and stacks.CLUSTER_NAME.fullmatch(row["cluster"])
        assert row["kubeconfig_secret"].replace("_", "").isalnum() and row["kubeconfig_secret"].isupper()


@pytest.mark.parametrize("name", ["lab;touch PWNED", "a b"])
def test_a_cluster_module_whose_name_pulumi_would_refuse_is_an_error(lab: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    (lab / stacks.CLUSTERS / f"{name}.py").write_text("raise SystemExit(1)\n", encoding="utf-8")
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: clusters/{name}.py: the stack name") and not (lab / "PWNED").exists()


@pytest.mark.parametrize("command", ["status", "drift", "recover", "import-plan"])
@pytest.mark.parametrize("name", ["fa-$(touch${IFS}PWNED);x", "lab\n  workloads[x]: running", "lab\x1b]0;title\x07"])
def test_a_pulumi_stack_named_on_the_command_line_is_held_to_the_grammar(
    lab: Path, command: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, name]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: PULUMI_STACK: the stack name ") and err.count("\n") == 1, err
    assert "\x1b" not in err and "\x07" not in err and not (lab / "PWNED").exists()


@pytest.mark.parametrize("command", [["check"], ["config"], ["render", "--out", "out"], ["rights"], ["bandwidth-report", "-", "--stack"]])
def test_a_stack_named_on_the_command_line_is_held_to_the_grammar(
    lab: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "lab;touch PWNED"]) == 2
    err = capsys.readouterr().err
    assert "error: STACK: the stack name 'lab;touch PWNED' holds ';'" in err, err


def test_a_kube_context_is_listed_escaped_and_passed_raw_in_json(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A context's name is free text in a kubeconfig: the table shows it escaped (a tab would shift its columns, an escape
    # sequence act on the terminal); the JSON the workflow reads keeps it, and the workflow passes it through `env:`.
    context = "lab\tprod\x1b[2J"
    (lab / "Pulumi.lab.yaml").write_text(
        yaml.safe_dump({"config": {"gpu-training:configFile": "lab.yaml", "kubernetes:context": context}}), encoding="utf-8"
    )
    assert main(["list", "--pulumi-stacks"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "lab\tlab\tall\tlab\\tprod\\x1b[2J"
    assert main(["list", "--pulumi-stacks", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["context"] == context
