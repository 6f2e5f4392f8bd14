"""Node names follow the API server's grammar for them wherever the config names a node (issue 35): a node set's
nodes (which its node policies select by name), a pin by kubernetes.io/hostname in the GPU node selector, a
workload's selector or a node set's labels (which a queued cluster's flavor carries). A Node's name is a DNS
subdomain: lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit, at most 253
characters; pods are pinned to it by the kubernetes.io/hostname label, a label value of at most 63. One error, at the
line that writes the name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from tests import fixtures

NOT_NODES = ["", "gpu_node_a", "-gpu", "gpu-", "gpu..a", "gpu a", "gpu/a", "a" * 64, "gpu.a-"]


def write(tmp_path: Path, edit: Any) -> Path:
    data = fixtures.roce()
    edit(data)
    path = tmp_path / "roce.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def error_of(path: Path) -> list[str]:
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load_file(path)
    return str(err.value).splitlines()[1:]


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if text in line)


@pytest.mark.parametrize("name", NOT_NODES)
def test_a_node_set_naming_a_node_no_node_can_be_is_one_error_at_its_line(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, lambda d: d["node_sets"][0]["nodes"].__setitem__(1, name))
    (line,) = error_of(path)
    at = line_of(path, "node-a") + 1  # the list's second item
    assert line.startswith(f"  node_sets[main].nodes[1] ({path}:{at}): "), line
    assert "node" in line and ("DNS subdomain" in line or "63 characters" in line), line


@pytest.mark.parametrize("where", ["gpu_node_selector", "workload", "node set labels"])
@pytest.mark.parametrize("name", ["", "gpu_node_a", "Node-A"])
def test_a_pin_to_a_node_no_node_can_be_is_one_error_at_its_line(tmp_path: Path, where: str, name: str) -> None:
    def edit(d: dict[str, Any]) -> None:
        pin = {"kubernetes.io/hostname": name}
        if where == "gpu_node_selector":
            d["gpu_node_selector"].update(pin)
        elif where == "workload":
            fixtures.workload(d, "solo")["node_selector"] = pin
        else:
            d["node_sets"][1]["labels"] = pin

    path = write(tmp_path, edit)
    lines = error_of(path)
    at = next(i for i, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "kubernetes.io/hostname:" in text)
    assert any(
        f"['kubernetes.io/hostname'] ({path}:{at}): " in line and "pins the pods to the node of that name" in line for line in lines
    ), lines
    assert len(lines) == 1, lines


@pytest.mark.parametrize("name", ["node-a", "gpu-07.rack2.example.com", "a" * 63, "10-0-0-12"])
def test_every_name_a_node_can_have_is_taken(name: str) -> None:
    config = fixtures.config("roce", lambda d: d["node_sets"][0]["nodes"].__setitem__(0, name))
    assert config.node_sets[0].nodes[0] == name


def test_node_policies_select_only_named_nodes_a_node_can_have() -> None:
    # A policy selects `kubernetes.io/hostname: NODE` for each node of its set: '' would select no node, silently.
    def edit(d: dict[str, Any]) -> None:
        d["node_sets"][0]["nodes"][1] = ""
        d["node_sets"][0]["node_policies"] = [{"resource": "openshift.io/port1rdma", "pf_names": ["ens1f0"], "num_vfs": 8}]
        d["node_sets"][0]["node_reboot_reason"] = "the VFs are the stack's"

    with pytest.raises(stacks.ConfigError, match=r"node_sets\[main\]\.nodes\[1\]: '' is no node's name"):
        fixtures.config("roce", edit)
