"""`python -m stacks` with bad input: every mistake a user can make in a config file, or on the
command line, ends in a non-zero exit and one message naming the file and the field; never a
traceback. Also the config's YAML form (round trip) and its JSON Schema (every field documented),
and `check`'s exit codes.

Most cases call `stacks.__main__.main(argv)` in process (fast); one runs the real command in a
subprocess, where an escaping exception would print a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from conftest import ROOT
from stacks.__main__ import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def cairo_data() -> dict[str, Any]:
    return yaml.safe_load(stacks.dump(stacks.load("cairo")))


def write(tmp_path: Path, data: Any, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit of the YAML data at a dotted path (list items by index)."""

    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return edit


def _duplicate_volume(data: dict[str, Any]) -> None:
    data["volumes"][1]["name"] = data["volumes"][0]["name"]


def _duplicate_workload(data: dict[str, Any]) -> None:
    data["workloads"].append({**data["workloads"][0], "tcp_variants": []})


# (case, edit of Cairo's YAML, the field the message must name, a phrase of the message)
BAD_FIELDS = [
    ("unknown top-level field", _set("gpu_modle", "H100"), "gpu_modle", "unknown field"),
    ("unknown nested field", _set("workloads.0.gpus", 4), "workloads.0.gpus", "unknown field"),
    ("wrong type", _set("gpus_per_node", "four"), "gpus_per_node", "valid integer"),
    ("wrong type of a list", _set("namespaces", "nccl-test"), "namespaces", "valid list"),
    ("invalid namespace name", _set("workloads.0.namespace", "NCCL_Test"), "workloads.0.namespace", "not a valid Kubernetes name"),
    ("invalid workload name", _set("workloads.0.name", "ml-dev-"), "workloads.0.name", "not a valid Kubernetes name"),
    ("invalid class name", _set("volumes.0.storage_class", "NFS CSI"), "volumes.0.storage_class", "not a valid Kubernetes object name"),
    ("duplicate volume names", _duplicate_volume, "volumes.1.name", "duplicate volume name 'ml-dev-workspace'"),
    ("duplicate workload names", _duplicate_workload, "workloads.1.name", "duplicate workload name 'ml-dev-rdma'"),
    ("zero nodes", _set("workloads.0.nodes", 0), "workloads.0.nodes", "greater than 0"),
    ("negative GPUs", _set("gpus_per_node", -4), "gpus_per_node", "greater than 0"),
    ("zero GPUs on a node", _set("nodes.0.gpus", 0), "nodes.0.gpus", "greater than 0"),
    ("size not a quantity", _set("volumes.0.size", "100 GB"), "volumes.0.size", "not a Kubernetes quantity"),
    ("zero size", _set("volumes.1.size", "0Gi"), "volumes.1.size", "greater than zero"),
    ("memory not a quantity", _set("workloads.0.memory", "lots"), "workloads.0.memory", "not a Kubernetes quantity"),
    ("missing required field", lambda d: d.pop("security"), "security", "Field required"),
    ("dangling volume reference", _set("workloads.0.mounts.0.volume", "scratch"), "workloads.0.mounts.0.volume", "not a volume"),
]


@pytest.mark.parametrize("case,edit,field,phrase", BAD_FIELDS, ids=[c[0] for c in BAD_FIELDS])
@pytest.mark.parametrize("command", ["config", "check", "render"])
def test_bad_field_names_file_and_field(
    command: str,
    case: str,
    edit: Callable[[dict[str, Any]], None],
    field: str,
    phrase: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = cairo_data()
    edit(data)
    path = write(tmp_path, data)
    out_dir = ["--out", str(tmp_path / "out")] if command == "render" else []
    code, out, err = run([command, "--config", str(path), *out_dir], capsys)
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: {path}: invalid configuration")
    assert f"  {field}: " in err and phrase in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.yaml"
    code, _, err = run(["check", "--config", str(missing)], capsys)
    assert code == 2 and err == f"error: {missing}: cannot read the file: No such file or directory\n"
    code, _, err = run(["check", "--config", str(tmp_path)], capsys)
    assert code == 2 and f"error: {tmp_path}: cannot read the file" in err
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01name: cairo\n")
    code, _, err = run(["config", "--config", str(binary)], capsys)
    assert code == 2 and f"error: {binary}: not a UTF-8 text file" in err


@pytest.mark.parametrize(
    "text,phrase",
    [
        ("name: cairo\nworkloads: [\n", "not valid YAML at line 3, column 1"),
        ("name: cairo\n  gpu_model: x\n", "not valid YAML at line 2"),
        ("- name: cairo\n", "the top level must be a mapping of fields, got list"),
        ("", "the file is empty"),
    ],
)
def test_malformed_yaml(text: str, phrase: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    code, out, err = run(["check", "--config", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path}: ") and phrase in err


@pytest.mark.parametrize("argv", [["config", "staging"], ["check", "staging"], ["render", "staging", "--out", "unused"], ["config"]])
def test_unknown_stack(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2
    assert "unknown stack" in err and "barcelona, cairo, nerc" in err


def test_stack_names_and_config_file_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, cairo_data())
    code, _, err = run(["check", "cairo", "--config", str(path)], capsys)
    assert code == 2 and "not both" in err


def test_a_bad_file_in_a_real_process_prints_no_traceback(tmp_path: Path) -> None:
    data = cairo_data()
    data["workloads"][0]["nodes"] = -1
    path = write(tmp_path, data)
    argv = [sys.executable, "-m", "stacks", "check", "--config", str(path)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"{path}: invalid configuration" in proc.stderr and "workloads.0.nodes: Input should be greater than 0" in proc.stderr


# --- check: exit codes --------------------------------------------------------------------------


def test_check_passes_the_committed_stacks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["check", "--all"], capsys)
    assert code == 0
    for name in stacks.STACKS:
        assert f"{name}: ok: 0 errors" in out
    assert "cairo: warning privileged-scc SecurityContextConstraints privileged" in out


def test_check_fails_a_config_that_would_break_on_the_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = cairo_data()
    data["volumes"][0]["storage_class"] = "ocs-external-storagecluster-ceph-rbd"  # RWO only, mounted by 4 pods
    path = write(tmp_path, data)
    code, out, _ = run(["check", "--config", str(path)], capsys)
    assert code == 1
    lines = out.splitlines()
    assert any(
        line.startswith("cairo: error access-mode PersistentVolumeClaim nccl-test/ml-dev-workspace spec.accessModes: ") and "Fix: " in line
        for line in lines
    )
    assert lines[-1].startswith("cairo: FAIL: ")


# --- the config as a file -----------------------------------------------------------------------


@pytest.mark.parametrize("name", stacks.STACKS)
def test_config_round_trips_through_yaml(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, printed, _ = run(["config", name], capsys)
    assert code == 0
    path = tmp_path / f"{name}.yaml"
    path.write_text(printed, encoding="utf-8")
    assert stacks.load_file(path) == stacks.load(name)
    code, again, _ = run(["config", "--config", str(path)], capsys)
    assert code == 0 and again == printed


def test_schema_documents_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["schema"], capsys)
    assert code == 0
    schema = yaml.safe_load(out)  # JSON is YAML
    models = {"ClusterConfig": schema, **schema["$defs"]}
    undocumented = []
    for model, body in models.items():
        if body.get("type") != "object":
            continue
        if not body.get("description"):
            undocumented.append(model)
        undocumented += [f"{model}.{field}" for field, spec in body.get("properties", {}).items() if not spec.get("description")]
    assert undocumented == []
    assert "workloads" in schema["properties"] and "Workload" in schema["$defs"]
