"""`python -m stacks` as a user meets it: every mistake in a config file, a stack module or on the
command line ends in a non-zero exit and one message naming the file, the object and the field;
never a traceback, never a hang. The YAML route (gpu-training:configFile) is honoured by every
command, and `render --out` touches only what it wrote.

Most cases call `cli.main.main(argv)` in process (fast); a few run the real command in a
subprocess, where an escaping exception would print a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from cli.main import main
from config import project
from tests import fixtures
from tests.helpers import ROOT


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml where PyYAML has it: the same text, a quarter of the time


def write(tmp_path: Path, data: Any, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.dump(data, Dumper=DUMPER, sort_keys=False), encoding="utf-8")
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


def _append(path: str, item: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        node: Any = data
        for p in path.split("."):
            node = node[int(p)] if isinstance(node, list) else node[p]
        node.append(item(data))

    return edit


# (case, edit of the roce fixture's YAML, the field the message must name, a phrase of the message)
BAD_FIELDS = [
    ("unknown top-level field", _set("gpu_modle", "H100"), "gpu_modle", "unknown field"),
    ("unknown nested field", _set("workloads.0.gpus", 4), "workloads[dev].gpus", "unknown field"),
    ("wrong type", _set("node_sets.0.gpus_per_node", "four"), "node_sets[main].gpus_per_node", "valid integer"),
    ("wrong type of a list", _set("namespaces", "team-a"), "namespaces", "valid list"),
    ("invalid namespace name", _set("workloads.0.namespace", "Team_A"), "workloads[dev].namespace", "not a valid Kubernetes name"),
    ("workload name not DNS-1035", _set("workloads.0.name", "1train"), "workloads[1train].name", "start with a letter"),
    ("statefulset name too long", _set("workloads.0.name", "a" * 53), "workloads[" + "a" * 53 + "].name", "at most 52 characters"),
    (
        "job hostname too long",
        lambda d: d["workloads"][1].update(name="j" * 54, run_number=999_999),
        "workloads[" + "j" * 54 + "].name",
        "would exceed 63 characters",
    ),  # fmt: skip
    (
        "invalid class name",
        _set("volumes.0.storage_class", "NFS CSI"),
        "volumes[workspace].storage_class",
        "not a valid Kubernetes object name",
    ),
    ("zero nodes", _set("workloads.0.nodes", 0), "workloads[dev].nodes", "greater than or equal to 1"),
    ("absurd nodes", _set("workloads.0.nodes", 3_000_000_000), "workloads[dev].nodes", "less than or equal to 256"),
    ("size not a quantity", _set("volumes.0.size", "100 GB"), "volumes[workspace].size", "not a Kubernetes quantity"),
    ("zero size", _set("volumes.1.size", "0Gi"), "volumes[datasets].size", "greater than zero"),
    ("limit below request", _set("workloads.0.memory_limit", "1Gi"), "workloads[dev].memory_limit", "below the request"),
    ("missing required field", lambda d: d.pop("node_sets"), "node_sets", "Field required"),
    ("misspelt optional field", _set("workloads.1.tcp_variant", []), "workloads[train].tcp_variant", "did you mean tcp_variants?"),
    (
        "misspelt required field",
        lambda d: d["workloads"][0].update(gpus_per_nod=d["workloads"][0].pop("gpus_per_node")),
        "workloads[dev].gpus_per_nod",
        "unknown field: did you mean gpus_per_node, a required field?",
    ),
    ("dangling volume", _set("workloads.0.mounts.0.volume", "scratch"), "workloads[dev].mounts[0].volume", "not a volume"),
    ("duplicate volume", _set("volumes.1.name", "workspace"), "volumes[workspace].name", "duplicate volume name"),
    ("duplicate workload", _append("workloads", lambda d: {**d["workloads"][2]}), "workloads[solo].name", "duplicate workload name 'solo'"),
    ("namespace listed twice", _append("namespaces", lambda d: "team-a"), "namespaces", "listed twice"),
    ("mount on /dev/shm", _set("volumes.0.mount_path", "/dev/shm"), "volumes[workspace].mount_path", "the program's own mount"),
    ("volume named launcher", _set("volumes.1.name", "launcher"), "volumes[launcher].name", "a volume the program adds"),
    (
        "one volume mounted twice",
        _append("workloads.0.mounts", lambda d: {"volume": "datasets", "mount_path": "/d2"}),
        "workloads[dev]",
        "mounted twice",
    ),
    (
        "job with a per-pod volume",
        _append("workloads.1.mounts", lambda d: {"volume": "workspace"}),
        "workloads[train].mounts[1].volume",
        "only a StatefulSet can make",
    ),
    (
        "launcher contract in env",
        _set("workloads.0.env", {"MASTER_ADDR": "x"}),
        "workloads[dev].env",
        "set by the program for the launcher",
    ),
    ("image reference", _set("workloads.0.image", "Not An Image"), "workloads[dev].image", "not an image reference"),
    ("created built-in scc", _set("security.scc", "restricted-v2"), "security.create", "an SCC OpenShift ships"),
    ("pin beyond 2**63", _set("defaults.pin_bytes", 2**64), "defaults.pin_bytes", "less than or equal to"),
    ("mount on the launcher", _set("volumes.1.mount_path", "/opt/launcher"), "volumes[datasets].mount_path", "the program's own mount"),
    ("volume named dshm", _set("volumes.1.name", "dshm"), "volumes[dshm].name", "a volume the program adds"),
    (
        "script mounted twice",
        _append("workloads.1.scripts", lambda d: {"config_map": "train-script", "mount_path": "/s2"}),
        "workloads[train]",
        "mounted twice",
    ),
    ("int32 port", _set("workloads.0.master_port", 70000), "workloads[dev].master_port", "less than or equal to 65535"),
    ("undeclared secret", _set("existing", {}), "workloads[train].secret_env.HF_TOKEN", "not declared in existing.secrets"),
    ("unknown node set", _set("workloads.2.node_set", "gpu"), "workloads[solo].node_set", "not in node_sets"),
    ("bare pods are gone", _set("workloads.2.kind", "pod"), "workloads[solo].kind", "kind 'pod' is gone"),
    ("CNI config not JSON", _set("fabric.attachments.0.cni_config", "x"), "fabric.attachments[0].cni_config", "not JSON"),
    (
        "variant beside its source",
        _set("workloads.0.tcp_variants.0.state", "running"),
        "workloads[dev].tcp_variants[dev-tcp].state",
        "alternatives",
    ),
]


@pytest.mark.parametrize("case,edit,field,phrase", BAD_FIELDS, ids=[c[0] for c in BAD_FIELDS])
@pytest.mark.parametrize("command", ["config", "check", "render"])
def test_bad_field_names_file_object_and_field(
    command: str,
    case: str,
    edit: Callable[[dict[str, Any]], None],
    field: str,
    phrase: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = fixtures.roce()
    edit(data)
    path = write(tmp_path, data)
    out_dir = ["--out", str(tmp_path / "out")] if command == "render" else []
    code, out, err = run([command, "--config", str(path), *out_dir], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path}: invalid configuration"), err
    assert f"  {field}" in err and phrase in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_misspelt_required_field_is_one_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not the unknown key and, as a consequence, the required field missing: the typo, with the field it stands for."""
    data = fixtures.roce()
    data["workloads"][0]["gpu_per_node"] = data["workloads"][0].pop("gpus_per_node")
    data["gpu_modle"] = data.pop("gpu_model")
    code, _, err = run(["check", "--config", str(write(tmp_path, data))], capsys)
    assert code == 2 and "Field required" not in err, err
    lines = sorted(err.splitlines()[1:])
    assert len(lines) == 2, err
    assert lines[0].startswith("  gpu_modle (") and lines[0].endswith("unknown field: did you mean gpu_model, a required field?")
    assert lines[1].startswith("  workloads[dev].gpu_per_node (") and lines[1].endswith("did you mean gpus_per_node, a required field?")


# --- the Python route names the object too -----------------------------------------------------------


def stack_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, name: str = "scratch") -> str:
    """A stack module as a user writes one, in a project folder of the test's own (the real clusters/ stays untouched)."""
    folder = tmp_path / stacks.CLUSTERS
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(body, encoding="utf-8")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.{name}", raising=False)
    return name


MODULE = """from config import ClusterConfig, NodeSet, Security, ServiceAccount, Workload
CONFIG = ClusterConfig(
    name="scratch",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    namespaces=["ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="h-kim", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa",
                 gpus_per_node=4, transport="tcp", nodes={nodes}{extra}),
    ],
)
"""


def test_a_stack_module_error_names_the_workload_field_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = stack_module(tmp_path, monkeypatch, MODULE.format(nodes=0, extra=""))
    code, _, err = run(["check", name], capsys)
    assert code == 2
    assert f"error: clusters/{name}.py: invalid configuration" in err
    # The line of the field itself (`nodes=0`, line 11), not of the Workload( it is an argument of (line 10).
    assert f"  workloads[h-kim].nodes (clusters/{name}.py:11): Input should be greater than or equal to 1" in err


def test_a_misspelt_field_in_a_module_is_named_with_the_field_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = stack_module(tmp_path, monkeypatch, MODULE.format(nodes=1, extra=', stat="stopped"'))
    code, _, err = run(["check", name], capsys)
    assert code == 2 and f"  workloads[h-kim].stat (clusters/{name}.py:11): unknown field: did you mean state?" in err, err
    name = stack_module(tmp_path, monkeypatch, MODULE.format(nodes=1, extra="").replace("transport=", "transprt="), "other")
    code, _, err = run(["check", name], capsys)
    assert code == 2 and "Field required" not in err, err
    assert f"  workloads[h-kim].transprt (clusters/{name}.py:11): unknown field: did you mean transport, a required field?" in err, err


def test_an_error_in_a_part_of_a_workload_names_the_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Python builds ContainerPort(...) before the Workload(...) around it: the error names the part's kind.
    body = MODULE.replace("Workload\n", "Workload, ContainerPort\n", 1)
    name = stack_module(tmp_path, monkeypatch, body.format(nodes=1, extra=', ports=[ContainerPort(name="debugpy", port=0)]'))
    code, _, err = run(["check", name], capsys)
    assert code == 2
    assert f"  ContainerPort[debugpy].port (clusters/{name}.py:11): Input should be greater than or equal to 1" in err, err


def test_a_cross_field_error_in_a_module_names_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = stack_module(tmp_path, monkeypatch, MODULE.format(nodes=1, extra=', tcp_variants=[{"name": "v"}]'))
    code, _, err = run(["check", name], capsys)
    # The line of the field that is wrong (line 11), not of its Workload( (10) or of the ClusterConfig(...) whose check found it (2).
    assert code == 2 and f"workloads[h-kim].tcp_variants (clusters/{name}.py:11): tcp_variants derive from an RDMA workload" in err
    name = stack_module(tmp_path, monkeypatch, MODULE.format(nodes=1, extra=', node_set="m"'), "other")
    code, _, err = run(["config", name], capsys)
    assert code == 2 and f"workloads[h-kim].node_set (clusters/{name}.py:11): node set 'm' is not in node_sets (n)" in err


HELPERS = """from config import ClusterConfig, NodeSet, Security, ServiceAccount, Workload


def user_workload(name, **fields):
    base = dict(name=name, namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa", gpus_per_node=4, nodes=1)
    return Workload(**{**base, "transport": "tcp", **fields})


CONFIG = ClusterConfig(
    name="scratch",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    namespaces=["ns"],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        user_workload("a", namespace="typo-one"),
        user_workload("b"),
        user_workload("c", namespace="typo-two"),
        user_workload("b", state="stopped"),
    ],
)
"""


def test_every_cross_field_error_is_reported_at_the_line_of_its_own_workload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two bad namespaces and a duplicate name: three lines, each at the line that calls the helper for that workload (not
    the helper's own Workload(...) line 5, nor the ClusterConfig(...) line 9), the duplicate naming where the first is."""
    name = stack_module(tmp_path, monkeypatch, HELPERS)
    code, _, err = run(["check", name], capsys)
    assert code == 2 and "Traceback" not in err
    assert err.splitlines() == [
        f"error: clusters/{name}.py: invalid configuration",
        f"  workloads[a].namespace (clusters/{name}.py:17): workload 'a' is in namespace 'typo-one', which is not in namespaces (ns)",
        f"  workloads[c].namespace (clusters/{name}.py:19): workload 'c' is in namespace 'typo-two', which is not in namespaces (ns)",
        f"  workloads[b].name (clusters/{name}.py:20): duplicate workload name 'b' in namespace 'ns' "
        f"(also workloads[b].name at clusters/{name}.py:18): names must be unique",
    ], err


def test_a_helper_line_that_makes_several_workloads_fail_is_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """nodes=3 written once, in the helper, for two workloads on a set of 2 nodes: one error at that line, naming both."""
    body = HELPERS.replace("gpus_per_node=4, nodes=1)", "gpus_per_node=4, nodes=3)")
    body = body[: body.index("        user_workload(")] + '        user_workload("a"),\n        user_workload("b"),\n    ],\n)\n'
    name = stack_module(tmp_path, monkeypatch, body)
    code, out, _ = run(["check", name], capsys)
    errors = [line for line in out.splitlines() if line.startswith(f"{name}: error")]
    assert code == 1 and len(errors) == 1, out
    assert errors[0].startswith(f"{name}: error node-fit workloads[a].nodes (clusters/{name}.py:5): 3 pods, one per node"), out
    assert "[on the cluster: StatefulSet ns/a, StatefulSet ns/b: spec.replicas]" in out and f"{name}: FAIL: 1 error" in out, out


def test_the_first_invalid_model_of_a_module_is_reported_and_nothing_it_causes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python stops at the first Workload(...) that fails: one error, at its line, and no consequence of it."""
    body = MODULE.replace(
        "    ],\n)",
        '        Workload(name="b", namespace="elsewhere", user="u", image="quay.io/a/b:1", service_account="sa",\n'
        '                 gpus_per_node=4, transport="tcp", nodes=1),\n'
        '        Workload(name="c", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa",\n'
        '                 gpus_per_node=0, transport="tcp", nodes=1),\n    ],\n)',
    )
    name = stack_module(tmp_path, monkeypatch, body.format(nodes=0, extra=""))
    code, _, err = run(["check", name], capsys)
    assert code == 2 and "Traceback" not in err
    assert err.splitlines() == [
        f"error: clusters/{name}.py: invalid configuration",
        f"  workloads[h-kim].nodes (clusters/{name}.py:11): Input should be greater than or equal to 1",
    ], err


def test_a_yaml_config_error_names_the_line_of_each_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = fixtures.tcp()
    data["workloads"][0]["namespace"] = "typo"
    data["volumes"] = [{"name": "data", "namespace": "elsewhere", "mount_path": "/data", "size": "1Gi"}]
    path = write(tmp_path, data)
    text = path.read_text(encoding="utf-8").splitlines()
    code, _, err = run(["check", "--config", str(path)], capsys)
    assert code == 2
    for line in err.splitlines()[1:]:
        number = int(line.split(f"({path}:", 1)[1].split(")", 1)[0])
        assert "namespace" in text[number - 1] and line.split("'")[3] in text[number - 1], (line, text[number - 1])
    assert len(err.splitlines()) == 3, err  # the workload's and the volume's namespace


VOLUMES = """from config import ClusterConfig, Mount, NodeSet, Security, ServiceAccount, StorageClass, Volume, Workload
CONFIG = ClusterConfig(
    name="scratch",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    namespaces=["ns"],
    storage_classes=[StorageClass(name="nfs-csi", access_modes=["ReadWriteMany"])],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    volumes=[
        Volume(name="data", namespace="ns", mount_path="/data", size="1Gi", storage_class="nfs-cs"),
    ],
    workloads=[
        Workload(name="h-kim", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa",
                 gpus_per_node=4, transport="tcp", nodes=2, mounts=[Mount(volume="data")]),
    ],
)
"""


def test_a_finding_names_the_config_path_and_the_line_that_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A storage class typo: one error, at the volume's storage_class and the line of its Volume(...), the claim it shows
    in last; an unpinned image: a warning at the workload's image and the line of its Workload(...)."""
    name = stack_module(tmp_path, monkeypatch, VOLUMES)
    code, out, _ = run(["check", name], capsys)
    text = " ".join(out.split())
    assert code == 1
    assert (
        f"{name}: error storage-class volumes[data].storage_class (clusters/{name}.py:11): storage class 'nfs-cs' is not "
        "known on scratch (storage_classes: nfs-csi): the claim stays Pending Fix: use a class from storage_classes"
    ) in text, out
    assert "[on the cluster: PersistentVolumeClaim ns/data: spec.storageClassName]" in text, out
    assert text.count("error storage-class") == 1, out
    assert f"{name}: warning image workloads[h-kim].image (clusters/{name}.py:14): " in text, out


def test_a_python_mistake_in_a_module_is_a_message_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = stack_module(tmp_path, monkeypatch, "CONFIG = undefined_name\n")
    code, _, err = run(["check", name], capsys)
    assert code == 2 and f"clusters/{name}.py:1: the stack module failed: NameError" in err
    name = stack_module(tmp_path, monkeypatch, "CONFIG = (\n", "broken")
    code, _, err = run(["check", name], capsys)
    assert code == 2 and f"clusters/{name}.py:" in err and "not valid Python" in err


def test_a_new_stack_module_is_discovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    name = stack_module(tmp_path, monkeypatch, MODULE.format(nodes=1, extra=""))
    code, out, _ = run(["list"], capsys)
    assert code == 0 and name in out.split()
    code, out, _ = run(["check", name], capsys)
    assert code == 0 and f"{name}: ok: 0 errors" in out


# --- the YAML loader ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,phrase",
    [
        ("name: tcp\nworkloads: [\n", ":3:1: not valid YAML"),
        ("name: tcp\n  gpu_model: x\n", ":2:"),
        ("- name: tcp\n", "the top level must be a mapping of fields, got list"),
        ("", "the file is empty"),
        ("name: a\nname: b\n", "duplicate key 'name'"),
        ("name: a\nworkloads:\n  - 1: 2\n", "the key '1' is not text: quote it"),
        ("? [a]\n: b\n", "is not text"),
        ("null: x\n", "the key 'null' is not text"),
        ("a: &x [1]\nb: *x\n", "YAML aliases (*name) are not supported"),
        ("a: " + "9" * 5000 + "\n", "a value cannot be read"),
    ],
)
def test_malformed_yaml(text: str, phrase: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    code, out, err = run(["check", "--config", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path}") and phrase in err, err


def test_a_second_workloads_key_does_not_empty_the_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = yaml.safe_dump(fixtures.roce(), sort_keys=False) + "workloads: []\n"
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    code, _, err = run(["config", "--config", str(path)], capsys)
    assert code == 2 and "duplicate key 'workloads'" in err


def test_unreadable_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.yaml"
    code, _, err = run(["check", "--config", str(missing)], capsys)
    assert code == 2 and err == f"error: {missing}: cannot read the file: No such file or directory\n"
    code, _, err = run(["check", "--config", str(tmp_path)], capsys)
    assert code == 2 and "not a regular file" in err
    code, _, err = run(["check", "--config", "/dev/zero"], capsys)
    assert code == 2 and "not a regular file" in err
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01name: x\n")
    code, _, err = run(["config", "--config", str(binary)], capsys)
    assert code == 2 and "not a UTF-8 text file" in err


def test_a_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(code=main(["config", "--config", str(fifo)])), daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "reading a FIFO hung"
    assert done["code"] == 2


def test_a_bad_file_in_a_real_process_prints_no_traceback(tmp_path: Path) -> None:
    data = fixtures.roce()
    data["workloads"][0]["nodes"] = -1
    path = write(tmp_path, data)
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"{path}: invalid configuration" in proc.stderr and f"workloads[dev].nodes ({path}:" in proc.stderr


# --- command lines -----------------------------------------------------------------------------------


# A stack name no module has (a user may well add a cluster called staging).
UNKNOWN = next(n for n in ["staging"] + [f"staging{i}" for i in range(2, 100)] if n not in stacks.names())


@pytest.mark.parametrize("argv", [["config", UNKNOWN], ["check", UNKNOWN], ["render", UNKNOWN, "--out", "unused"]])
def test_unknown_stack(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2 and f"unknown stack {UNKNOWN!r}" in err, err
    assert ", ".join(stacks.names()) in err, f"the message lists the stacks (clusters/*.py: {', '.join(stacks.names())}): {err}"


def test_output_into_a_closed_pipe_ends_quietly() -> None:
    # `python -m stacks schema | head -1`: the reader is gone before the command writes.
    proc = subprocess.Popen([sys.executable, "-m", "stacks", "schema"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_config_without_a_stack_says_what_to_give(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["config"], capsys)
    assert code == 2 and "name a stack" in err and "--config FILE" in err


def test_every_positional_argument_has_help() -> None:
    from cli.main import parser

    p = parser()
    for name, sub in p._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        for action in sub._actions:
            if not action.option_strings and action.dest != "help":
                assert action.help, f"{name} {action.dest}"


def test_stack_names_and_config_file_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, fixtures.tcp())
    code, _, err = run(["check", "nerc", "--config", str(path)], capsys)
    assert code == 2 and "not both" in err


def test_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["check", "--config", str(write(tmp_path, fixtures.tcp()))], capsys)
    assert code == 0 and out.splitlines()[-1].startswith("tcp: ok: 0 errors")
    data = fixtures.tcp()
    data["workloads"][0]["shm_size"] = "30Gi"
    code, out, _ = run(["check", "--config", str(write(tmp_path, data, "bad.yaml"))], capsys)
    assert code == 1
    # a finding's first line names stack, severity, rule, the config path and its line; a long one continues on indented
    # lines, its fix and the rendered object too
    [block] = [b for b in ("\n" + out).split("\ntcp: ") if re.match(r"error shm-size workloads\[one\]\.shm_size \(\S*bad\.yaml:\d+\)", b)]
    assert "Fix: " in block and all(line.startswith("    ") for line in block.splitlines()[1:])
    assert out.splitlines()[-1].startswith("tcp: FAIL: ")


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_config_round_trips_through_yaml(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, fixtures.data(name))
    code, printed, _ = run(["config", "--config", str(path)], capsys)
    assert code == 0
    again = tmp_path / "again.yaml"
    again.write_text(printed, encoding="utf-8")
    assert stacks.load_file(again) == stacks.load_file(path)
    code, twice, _ = run(["config", "--config", str(again)], capsys)
    assert code == 0 and twice == printed


def test_schema_documents_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["schema", "--json"], capsys)
    assert code == 0
    schema = json.loads(out)
    models = {"ClusterConfig": schema, **schema["$defs"]}
    undocumented = []
    for model, body in models.items():
        if body.get("type") != "object":
            continue
        if not body.get("description"):
            undocumented.append(model)
        undocumented += [f"{model}.{field}" for field, spec in body.get("properties", {}).items() if not spec.get("description")]
    assert undocumented == []
    assert "node_sets" in schema["properties"] and "Workload" in schema["$defs"]


def test_schema_lists_each_field_with_its_type_and_description(capsys: pytest.CaptureFixture[str]) -> None:
    """The README promises a description of each field: `schema` lists them, readable (the JSON Schema is `--json`)."""
    from config.schema import schema

    code, out, _ = run(["schema"], capsys)
    assert code == 0 and not out.startswith("{")
    body = schema()
    for model, spec in {"ClusterConfig": body, **body["$defs"]}.items():
        block = out.split(f"\n\n{model}: ", 1)[1].split("\n\n", 1)[0]
        for field, prop in spec.get("properties", {}).items():
            line = next(x for x in block.splitlines() if x.startswith(f"  {field}: "))
            described = block.split(line + "\n", 1)[1]
            assert " ".join(described.split()).startswith(" ".join(prop["description"].split())[:60]), f"{model}.{field}"
    assert "\n  node_sets: list[NodeSet], 1 to 64 items, required\n" in out
    assert "\n  transport: 'rdma' | 'tcp', required\n" in out


# --- the YAML route: what pulumi deploys is what every command reads -------------------------------------


@pytest.fixture
def yaml_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, Any]], Path]:
    """A project root whose Pulumi.nerc.yaml names a YAML config (as the YAML route of docs/deploy.md does)."""

    def make(data: dict[str, Any]) -> Path:
        path = tmp_path / "my-nerc.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        (tmp_path / stacks.CLUSTERS).mkdir(exist_ok=True)  # the stack exists (its module); its stack file deploys the YAML
        shutil.copy(project.ROOT / stacks.CLUSTERS / "nerc.py", tmp_path / stacks.CLUSTERS / "nerc.py")
        (tmp_path / "Pulumi.nerc.yaml").write_text(
            yaml.safe_dump({"config": {"gpu-training:configFile": "my-nerc.yaml", "kubernetes:context": "nerc"}}), encoding="utf-8"
        )
        monkeypatch.setattr(project, "ROOT", tmp_path)
        return path

    return make


def test_every_command_honours_the_stacks_config_file(
    yaml_route: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data = fixtures.tcp()
    data["name"] = "nerc"
    data["workloads"][0]["shm_size"] = "30Gi"  # an error the module does not have
    yaml_route(data)
    code, out, _ = run(["check", "nerc"], capsys)
    assert code == 1 and "nerc: error shm-size workloads[one].shm_size (my-nerc.yaml:" in out
    code, out, _ = run(["config", "nerc"], capsys)
    assert code == 0 and "namespaces:\n- proj\n" in out


def test_a_config_file_named_for_another_stack_is_refused(
    yaml_route: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = yaml_route(fixtures.tcp())  # name: tcp
    code, _, err = run(["check", "nerc"], capsys)
    assert code == 2
    assert "my-nerc.yaml: name: the config is for stack 'tcp', but it is deployed as stack 'nerc'" in err
    assert path.exists()


@pytest.mark.parametrize("command", ["check", "render", "config", "diff", "rights"])
def test_a_config_file_that_is_not_there_names_the_stack_file_that_names_it(
    command: str, yaml_route: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    yaml_route(fixtures.tcp()).unlink()
    code, out, err = run([command, "nerc"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: Pulumi.nerc.yaml: gpu-training:configFile names my-nerc.yaml, which does not exist"), err
    assert "remove the key to deploy clusters/nerc.py" in err


def test_stack_files_of_one_cluster_that_disagree_say_which_says_what(
    yaml_route: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data = fixtures.tcp()
    data["name"] = "nerc"
    path = yaml_route(data)
    (path.parent / "Pulumi.nerc-platform.yaml").write_text(
        yaml.safe_dump({"config": {"gpu-training:cluster": "nerc", "gpu-training:tier": "platform"}}), encoding="utf-8"
    )
    code, _, err = run(["check", "nerc"], capsys)
    assert code == 2 and "Pulumi.nerc-platform.yaml: (the module), Pulumi.nerc.yaml: my-nerc.yaml" in err, err


def test_diff_takes_a_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`diff --config FILE` compares the file's render with the render its stack committed."""
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.setattr(project, "ROOT", repo)
    original = write(tmp_path, fixtures.tcp(), "tcp.yaml")
    assert run(["render", "--config", str(original), "--out", str(repo / "rendered")], capsys)[0] == 0
    for git in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "render"]):
        subprocess.run(["git", *git], cwd=repo, check=True)
    data = fixtures.tcp()
    data["workloads"][0]["cpu"] = "6"
    edited = write(tmp_path, data, "edited.yaml")
    code, out, _ = run(["diff", "--config", str(edited)], capsys)
    assert code == 0
    assert "spec.template.spec.containers[training].resources.requests.cpu: '4' -> '6'" in out
    assert out.splitlines()[0].startswith("tcp: 0 added, 0 removed, 1 changed") and f"-> {edited})" in out.splitlines()[0]


# --- render --out writes only what it owns ----------------------------------------------------------------


def test_render_refuses_a_folder_it_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, fixtures.tcp())
    (tmp_path / "out" / "tcp").mkdir(parents=True)
    precious = tmp_path / "out" / "tcp" / "notes.txt"
    precious.write_text("mine", encoding="utf-8")
    code, _, err = run(["render", "--config", str(config), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "was not written by `python -m stacks render`" in err
    assert precious.read_text() == "mine"


def test_render_replaces_only_its_own_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A render replaces the folder whole, so a file of the user's in it is refused, not carried along
    (tests/tools/test_render_safety.py has the other cases)."""
    config = write(tmp_path, fixtures.tcp())
    out = tmp_path / "out"
    assert run(["render", "--config", str(config), "--out", str(out)], capsys)[0] == 0
    data = fixtures.tcp()
    data["workloads"].pop()
    assert run(["render", "--config", str(write(tmp_path, data)), "--out", str(out)], capsys)[0] == 0
    assert not (out / "tcp" / "proj" / "statefulset-two.yaml").exists()
    assert (out / "tcp" / "proj" / "statefulset-one.yaml").exists()
    mine = out / "tcp" / "notes.txt"
    mine.write_text("mine", encoding="utf-8")
    code, _, err = run(["render", "--config", str(config), "--out", str(out)], capsys)
    assert code == 2 and f"{mine} was not written by `python -m stacks render`" in err
    assert mine.read_text() == "mine" and not (out / "tcp" / "proj" / "statefulset-two.yaml").exists()


@pytest.mark.parametrize("target", ["/proc/nope", "FILE"])
def test_render_to_a_path_it_cannot_use_is_a_message(target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, fixtures.tcp())
    if target == "FILE":
        target = str(tmp_path / "a-file")
        Path(target).write_text("x", encoding="utf-8")
    code, _, err = run(["render", "--config", str(config), "--out", target], capsys)
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err


# --- output shape ------------------------------------------------------------------------------------


def test_the_pulumi_stacks_listing_names_its_columns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["list", "--pulumi-stacks"], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0] == "STACK\tCLUSTER\tTIER\tCONTEXT"
    assert [line.split("\t")[0] for line in lines[1:]] == [s.name for s in stacks.pulumi_stacks()]
    assert all(len(line.split("\t")) == 4 for line in lines)
    code, out, _ = run(["list", "--pulumi-stacks", "--json"], capsys)
    assert code == 0 and [r["stack"] for r in json.loads(out)] == [s.name for s in stacks.pulumi_stacks()]  # no header in JSON


LINE_LIMIT = 200  # the longest line `check` may print (policy.core.WIDTH wraps findings shorter still)


def test_no_line_of_check_all_is_longer_than_the_limit() -> None:
    from policy.core import WIDTH

    done = subprocess.run([sys.executable, "-m", "stacks", "check", "--all"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = (done.stdout + done.stderr).splitlines()
    assert lines and WIDTH <= LINE_LIMIT
    long = [line for line in lines if len(line) > LINE_LIMIT]
    assert not long, f"`python -m stacks check --all` printed {len(long)} line(s) over {LINE_LIMIT} characters, e.g. {long[0]!r}"
    # a wrapped finding's continuation lines are indented: every unindented line names its stack
    assert all(line.startswith(tuple(f"{n}: " for n in stacks.names())) for line in lines if not line.startswith(" ")), lines


def test_only_the_commands_that_declare_resources_load_the_pulumi_sdk() -> None:
    """Importing Pulumi is most of a command's start (0.2 s of `check`'s 0.4 s): `render` and `diff` run the program
    under its mock runtime and pay it; every other command reads what a stack declares as plain data (`layout`) and must
    not. In one fresh interpreter, the entry point and then each other command's module are imported in turn (those of
    render and diff last), and the first that brings the SDK is named."""
    from cli.main import COMMANDS

    renders = {COMMANDS["render"][0], COMMANDS["diff"][0]}
    groups = sorted({group for group, _ in COMMANDS.values()} - renders) + sorted(renders)
    probe = (
        "import importlib, json, sys\n"
        "sdk = lambda: sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_kubernetes'))\n"
        "import cli.main\n"
        "seen = [('main', sdk())]\n"
        f"for group in {groups!r}:\n"
        "    importlib.import_module('cli.' + group)\n"
        "    seen.append((group, sdk()))\n"
        "print(json.dumps(seen))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loads = [(group, modules) for group, modules in json.loads(done.stdout) if modules]
    assert loads, "no command loads Pulumi: render's module no longer imports the program?"
    group, modules = loads[0]
    assert group in renders, f"cli/{group}.py loads Pulumi ({', '.join(modules[:3])}, ...): none of its commands renders"
