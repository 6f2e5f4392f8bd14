"""A name a stack module uses but never defines (a NameError while it loads): the names the module does define that are
close to it first (`namespace=H_KIM` for `H_KIM_NS`, with the line that sets it), then, if it was meant as text, how
to quote it (stacks._name_hint)."""

from __future__ import annotations

from pathlib import Path

import pytest

import stacks
from config import project as project_folder

MODULE = """from config import ClusterConfig, NodeSet, Security, ServiceAccount, Workload

H_KIM_NS = "b-efficient"
H_KIM_IMAGE = "quay.io/a/b:1"
YUNSHI_NS = "yunshi"

CONFIG = ClusterConfig(
    name="scratch",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="pool", count=2, gpus_per_node=4)],
    namespaces=[H_KIM_NS],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace=H_KIM_NS)]),
    workloads=[Workload(name="a", namespace={value}, user="u", image=H_KIM_IMAGE, service_account="sa", gpus_per_node=4,
                        transport="tcp")],
)
"""


def load_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, text: str = MODULE) -> str:
    monkeypatch.setattr(project_folder, "ROOT", tmp_path)
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "scratch.py").write_text(text.format(value=value), encoding="utf-8")
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load("scratch")
    return str(err.value)


def test_a_mistyped_constant_is_told_the_close_names_the_module_defines_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = load_error(tmp_path, monkeypatch, "H_KIM")
    assert message.startswith("clusters/scratch.py:14: the stack module failed: NameError: name 'H_KIM' is not defined: "), message
    hint = message.split("is not defined: ", 1)[1]
    assert hint.startswith("did you mean `H_KIM_NS` (clusters/scratch.py:3)"), hint
    assert "`H_KIM_IMAGE` (clusters/scratch.py:4)" in hint and "YUNSHI_NS" not in hint
    assert hint.endswith('Else, if it is text, quote it: `namespace="H_KIM"`')  # the old advice comes second


def test_a_mistyped_import_is_named_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = load_error(tmp_path, monkeypatch, "H_KIM_NS", MODULE.replace("[Workload(", "[Workoad("))
    assert "did you mean `Workload`, which the module defines?" in message, message


def test_text_without_quotes_and_no_close_name_keeps_the_quoting_advice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = load_error(tmp_path, monkeypatch, "research")
    assert message.endswith("NameError: name 'research' is not defined: if it is text, quote it: `namespace=\"research\"`"), message


def test_a_dashed_word_is_text_whatever_names_are_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = load_error(tmp_path, monkeypatch, "yunshi-ns")  # Python reads `yunshi - ns`: `yunshi` is close to YUNSHI_NS
    assert "did you mean" not in message and message.endswith('if it is text, quote it: `namespace="yunshi-ns"`'), message
