"""A stack's YAML file (gpu-training:configFile, `--config`) is read as its writer meant it: an integer YAML 1.1 reads
as another number, and a tag that has no order (!!set, !!omap, !!pairs), are refused at their line with the fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import stacks
from tests import fixtures
from tests.helpers import YAML11, cases_of, run_cli

YAML_CASES = [
    ("master_port: 017", "workloads[one].master_port", "017 is an octal number in YAML 1.1 (it reads as 15, not 17): write 17"),
    ("master_port: 0017", "workloads[one].master_port", "write 17, or quote it ('0017')"),
    ("master_port: 29:50", "workloads[one].master_port", "base-60 number in YAML 1.1 (it reads as 1790)"),
    ("nodes: true", "workloads[one].nodes", "not the boolean true"),
    ("nodes: on", "workloads[one].nodes", "not the boolean true"),
    ("nodes: '1'", "workloads[one].nodes", "without quotes"),
    ("env: {MODE: 0644}", "workloads[one].env.MODE", "reads as 420"),
]


@cases_of(YAML11, len(YAML_CASES))
@pytest.mark.parametrize("line,path,phrase", YAML_CASES, ids=[c[0] for c in YAML_CASES])
def test_yaml_11_readings_are_refused_with_the_fix(line: str, path: str, phrase: str, tmp_path: Path) -> None:
    text = yaml.safe_dump(fixtures.tcp(), sort_keys=False).replace("  transport: tcp\n", f"  transport: tcp\n  {line}\n", 1)
    file = tmp_path / "c.yaml"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load_file(file)
    # The file's line of the value follows its path.
    assert re.match(
        rf"{re.escape(str(file))}: invalid configuration\n  {re.escape(path)} \({re.escape(str(file))}:\d+\): ", str(err.value)
    ), err.value
    assert phrase in str(err.value), err.value


@cases_of(YAML11)
def test_a_quoted_octal_looking_text_is_text(tmp_path: Path) -> None:
    text = yaml.safe_dump(fixtures.tcp(), sort_keys=False).replace("  transport: tcp\n", "  transport: tcp\n  env: {MODE: '017'}\n", 1)
    file = tmp_path / "c.yaml"
    file.write_text(text, encoding="utf-8")
    config = stacks.load_file(file)
    assert config.workloads[0].env == {"MODE": "017"}
    assert "MODE: '017'" in stacks.dump(config)  # and it is written back quoted


# --- tags without an order ------------------------------------------------------------------------------------------------

UNORDERED = {
    "a set of namespaces": ("namespaces: !!set {team-a, team-b}\n", "!!set is not supported: a set has no order"),
    "a set in flow style": ("namespaces: !!set {? team-a, ? team-b}\n", "!!set is not supported"),
    "an ordered map": ("gpu_node_selector: !!omap [{a: b}]\n", "!!omap is not supported"),
    "pairs": ("gpu_node_selector: !!pairs [{a: b}, {a: c}]\n", "!!pairs is not supported"),
    "a Python tuple": ("namespaces: !!python/tuple [team-a, team-b]\n", "could not determine a constructor"),
}


class TestYamlThatHasNoOrder:
    @pytest.mark.parametrize("case", UNORDERED)
    @pytest.mark.parametrize("command", ["config", "render"])
    def test_refused_with_the_file_and_line(self, case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        data = fixtures.roce()
        key = UNORDERED[case][0].split(":", 1)[0]
        data.pop(key)
        text = yaml.safe_dump(data, sort_keys=False)
        path = tmp_path / "roce.yaml"
        path.write_text(text + UNORDERED[case][0], encoding="utf-8")
        line = len(text.splitlines()) + 1
        out_dir = ["--out", str(tmp_path / "out")] if command == "render" else []
        code, out, err = run_cli([command, "--config", str(path), *out_dir], capsys)
        assert code == 2 and out == "", out
        assert err.startswith(f"error: {path}:{line}:") and UNORDERED[case][1] in err, err
        assert not (tmp_path / "out").exists()

    def test_the_same_data_as_lists_and_maps_loads(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "roce.yaml"
        path.write_text(yaml.safe_dump(fixtures.roce(), sort_keys=False), encoding="utf-8")
        code, out, err = run_cli(["config", "--config", str(path)], capsys)
        assert code == 0 and "namespaces:\n- team-a\n- team-b\n" in out, err
