"""A YAML config (gpu-training:configFile, `--config`) is read as its writer meant it, each refusal at its file and line:
PyYAML's own node tree gives the data and the line of every key and list item; a duplicate key, a key that is not text,
an alias, a tag without an order or without text, a non-finite float and an integer YAML 1.1 reads as another number
are refused with the fix (config/files.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import stacks
from config import files
from tests import fixtures
from tests.helpers import YAML11, cases_of, run_cli


def read(text: str, tmp_path: Path) -> tuple[object, dict[tuple[str | int, ...], int]]:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    data, lines, _ = files.read_yaml_lines(path)
    return data, lines


def test_the_data_is_pyyamls_and_every_key_and_item_has_its_line(tmp_path: Path) -> None:
    text = "name: x\nlist:\n  - a\n  - {b: 2, c: [1, 2.5, true, null]}\nwhen: 2001-12-14\nanchored: &keep {a: 1}\n"
    data, lines = read(text, tmp_path)
    assert data == {**yaml.safe_load(text), "when": "2001-12-14"}  # YAML 1.2 has no timestamps: the text as written
    assert lines == {("name",): 1, ("list",): 2, ("list", 0): 3, ("list", 1): 4, ("list", 1, "b"): 4, ("list", 1, "c"): 4,
                     ("list", 1, "c", 0): 4, ("list", 1, "c", 1): 4, ("list", 1, "c", 2): 4, ("list", 1, "c", 3): 4,
                     ("when",): 5, ("anchored",): 6, ("anchored", "a"): 6}  # fmt: skip


REFUSED = [
    ("a: 1\na: 2\n", "c.yaml:2: not valid YAML: duplicate key 'a' (YAML keeps only the last one)"),
    ("1: x\n", "c.yaml:1: not valid YAML: the key '1' is not text: quote it"),
    ("on: x\n", "the key 'on' is not text"),
    ("? [a]\n: x\n", "the key of type sequence is not text"),
    ("a: &x [1]\nb: *x\n", "c.yaml:2: YAML aliases (*name) are not supported in a config"),
    ("a: 1\n---\nb: 2\n", "not valid YAML: but found another document"),
    ("s: !!set {a, b}\n", "set is not supported: a set has no order"),
    ("o: !!omap [a: 1]\n", "omap is not supported"),
    ("b: !!binary aGk=\n", "binary is not supported"),
    ("x: !!python/tuple [1]\n", "could not determine a constructor for the tag"),
    ("x: .nan\n", ".nan is not a JSON number"),
    ("x: [1, 2\n", "not valid YAML"),
]


@pytest.mark.parametrize("text,said", REFUSED, ids=[t[:20] for t, _ in REFUSED])
def test_a_refusal_names_the_file_and_line(text: str, said: str, tmp_path: Path) -> None:
    with pytest.raises(files.ConfigError) as err:
        read(text, tmp_path)
    assert said in str(err.value) and str(err.value).startswith(str(tmp_path / "c.yaml")), str(err.value)


YAML_CASES = [
    ("master_port: 017", "workloads[one].master_port", "017 is an octal number in YAML 1.1 (it reads as 15, not 17): write 17"),
    ("master_port: 0017", "workloads[one].master_port", "write 17, or quote it ('0017')"),
    ("master_port: 29:50", "workloads[one].master_port", "base-60 number in YAML 1.1"),
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
    with pytest.raises(files.ConfigError) as err:
        stacks.load_file(file)
    where = re.escape(str(file))
    assert re.match(rf"{where}: invalid configuration\n  {re.escape(path)} \({where}:\d+\): ", str(err.value)), err.value
    assert phrase in str(err.value), err.value


@cases_of(YAML11)
def test_a_quoted_octal_looking_text_is_text_and_written_back_quoted(tmp_path: Path) -> None:
    text = yaml.safe_dump(fixtures.tcp(), sort_keys=False).replace("  transport: tcp\n", "  transport: tcp\n  env: {MODE: '017'}\n", 1)
    file = tmp_path / "c.yaml"
    file.write_text(text, encoding="utf-8")
    config = stacks.load_file(file)
    assert config.workloads[0].env == {"MODE": "017"} and "MODE: '017'" in stacks.dump(config)


@pytest.mark.parametrize("command", ["config", "render"])
def test_a_set_in_a_config_file_stops_the_command_at_its_line(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = fixtures.roce()
    data.pop("namespaces")
    text = yaml.safe_dump(data, sort_keys=False)
    path = tmp_path / "roce.yaml"
    path.write_text(text + "namespaces: !!set {team-a, team-b}\n", encoding="utf-8")
    out_dir = ["--out", str(tmp_path / "out")] if command == "render" else []
    code, out, err = run_cli([command, "--config", str(path), *out_dir], capsys)
    assert code == 2 and out == "" and err.startswith(f"error: {path}:{len(text.splitlines()) + 1}:") and "a set has no order" in err, err
    assert not (tmp_path / "out").exists()
