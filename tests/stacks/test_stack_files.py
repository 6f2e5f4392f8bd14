"""The Pulumi stack files and the names they hold: a stack file's name, its gpu-training:cluster, a cluster module's
name and a name on the command line are held to Pulumi's grammar where they are read (they reach printed commands, the
workflow's matrix and a file backend's paths); a file whose settings would deploy something else than they seem to (a
misspelled key, an unknown tier, a name that differs from a cluster's only by case or is not ASCII) is an error."""

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


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose stack `lab` deploys a YAML copy of the tcp fixture (named lab)."""
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump({**fixtures.tcp(), "name": "lab"}), encoding="utf-8")
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    stack_file(tmp_path, "lab")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def stack_file(root: Path, name: str, settings: dict[str, object] | None = None) -> None:
    base = {"gpu-training:configFile": "lab.yaml", "gpu-training:cluster": "lab", "kubernetes:context": "lab"}
    text = yaml.safe_dump({"config": {**base, **(settings or {})}}, allow_unicode=True)
    (root / f"Pulumi.{name}.yaml").write_text(text, encoding="utf-8")


REFUSED = [
    ("fa-$(touch${IFS}PWNED);x", {}, "a stack name is letters, digits, '-', '_' and '.'"),
    ("lab\x1b[31m", {}, "a stack name is letters"),
    ("x" * 101, {}, "Pulumi takes at most 100"),
    ("..", {}, "and not '.' or '..'"),
    ("lаb", {}, "is not ASCII ('а' is U+0430)"),
    ("LAB", {}, "differs from the cluster 'lab' only by case"),
    ("lab-platform", {"gpu-training:tier": "platfrom"}, "gpu-training:tier is 'platfrom'; expected one of all, platform, project"),
    ("lab-platform", {"gpu-training:cluster": "lab;touch PWNED"}, "lowercase letters, digits and '-'"),
    ("lab-platform", {"gpu-training:cluster": ""}, "gpu-training:cluster is empty"),
    ("lab", {"kubernets:context": "lab"}, "'kubernets:context' is a setting nothing reads: did you mean kubernetes:context?"),
    ("lab", {"gpu-training:teir": "project"}, "'gpu-training:teir' is a setting nothing reads: did you mean gpu-training:tier?"),
    ("lab", {"kubernetes:namespace": "x"}, "'kubernetes:namespace' is a setting nothing reads: the program (its provider too) reads"),
]


def test_settings_of_other_namespaces_are_left_to_pulumi(lab: Path) -> None:
    stack_file(lab, "lab", {"pulumi:tags": {"team": "ml"}, "aws:region": "us-east-1"})
    assert [s.name for s in stacks.pulumi_stacks()] == ["lab"]


@pytest.mark.parametrize("name,settings,said", REFUSED)
def test_a_stack_file_that_would_deploy_something_else_than_it_seems_is_an_error(
    lab: Path, name: str, settings: dict[str, object], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stack_file(lab, name, settings)
    with pytest.raises(stacks.ConfigError) as err:
        stacks.pulumi_stacks()
    assert said in str(err.value), err.value
    assert main(["list", "--pulumi-stacks", "--json"]) == 2
    out, err_text = capsys.readouterr()
    assert out == "" and err_text.startswith("error: Pulumi.") and err_text.count("\n") == 1 and "\x1b" not in err_text
    assert not (lab / "PWNED").exists()


@pytest.mark.parametrize(
    "text,said",
    [("confg:\n  kubernetes:context: lab\n", "'confg' is not a key of a stack file"), ("- config: {}\n", "a stack file is a mapping"),
     ("encryptionsalt: x\n", "`config:` must be a mapping of settings (kubernetes:context, gpu-training:tier, ...), not missing")],
)  # fmt: skip
def test_a_stack_file_whose_settings_would_be_dropped_is_an_error(lab: Path, text: str, said: str) -> None:
    (lab / "Pulumi.lab.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(stacks.ConfigError, match="^Pulumi.lab.yaml: ") as err:
        stacks.pulumi_stacks()
    assert said in str(err.value)


def test_every_name_of_the_grammar_is_listed_with_its_secret_and_its_context_escaped(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("lab.v2", "LAB_2", "a" * 100):
        stack_file(lab, name)
    stack_file(lab, "lab", {"kubernetes:context": "lab\tprod\x1b[2J"})  # free text in a kubeconfig
    assert main(["list", "--pulumi-stacks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["stack"] for r in rows} == {"lab.v2", "LAB_2", "a" * 100, "lab"} and {r["kubeconfig_secret"] for r in rows} == {
        "KUBECONFIG_LAB"
    }
    assert next(r for r in rows if r["stack"] == "lab")["context"] == "lab\tprod\x1b[2J"  # raw in JSON, passed through `env:`
    assert main(["list", "--pulumi-stacks"]) == 0
    assert "LAB_2\tlab\tall\tlab\n" in capsys.readouterr().out.replace("lab\\tprod\\x1b[2J", "lab")


def test_a_cluster_module_whose_name_pulumi_would_refuse_is_an_error(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (lab / stacks.CLUSTERS / "lab;touch PWNED.py").write_text("raise SystemExit(1)\n", encoding="utf-8")
    assert main(["list"]) == 2
    assert capsys.readouterr().err.startswith("error: clusters/lab;touch PWNED.py: the stack name") and not (lab / "PWNED").exists()


@pytest.mark.parametrize(
    "command,said",
    [(["status"], "PULUMI_STACK"), (["drift"], "PULUMI_STACK"), (["recover"], "PULUMI_STACK"), (["import-plan"], "PULUMI_STACK"),
     (["check"], "STACK"), (["config"], "STACK"), (["render", "--out", "out"], "STACK"), (["rights"], "STACK")],
)  # fmt: skip
def test_a_stack_named_on_the_command_line_is_held_to_the_grammar(
    lab: Path, command: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "fa-$(touch${IFS}PWNED);x\x1b]0;t\x07"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {said}: the stack name ") and err.count("\n") == 1 and "\x1b" not in err, err
