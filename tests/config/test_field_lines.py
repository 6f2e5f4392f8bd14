"""An error or a finding names the line the user must change: the field's own line (its keyword, list item or dict key),
not the line of the `Workload(` or `ClusterConfig(` it is an argument of; and a bad value set once in a module-level
constant and used by many fields, at the line that sets it, once, listing the fields it fills (config/provenance.py,
config/errors.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import stacks
from cli.checking import preflight
from config import project as project_folder
from config import provenance

HEAD = """from config import ClusterConfig, NodeSet, Queueing, Security, ServiceAccount, Workload
"""

BODY = """CONFIG = ClusterConfig(
    name="{name}",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="pool", count=2, gpus_per_node=4, allocatable_cpu="64", allocatable_memory="512Gi")],
    namespaces=[NS],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace=NS)]),
    workloads=[
        Workload(
            name="a",
            namespace=NS,
            user="u",
            image="quay.io/a/b:1",
            service_account="sa",
            gpus_per_node=4,
            transport="tcp",
            nodes={nodes},
        ),
        _w("b", state="{state}"),
    ],{extra}
)
"""

HELPER = """

def _w(name, **fields):
    return Workload(**{"name": name, "namespace": NS, "user": "u", "image": "quay.io/a/b:1", "service_account": "sa",
                       "gpus_per_node": 4, "transport": "tcp", **fields})

"""


def module(ns: str = '"ns"', nodes: str = "1", state: str = "stopped", extra: str = "", name: str = "scratch") -> str:
    return HEAD + f"NS = {ns}\n" + HELPER + BODY.format(name=name, nodes=nodes, state=state, extra=extra)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based line of the nth line holding `needle`."""
    found = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    return found[nth - 1]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], str]:
    """write(text): clusters/scratch.py of a project folder of the test's own; answers the text."""
    monkeypatch.setattr(project_folder, "ROOT", tmp_path)
    (tmp_path / stacks.CLUSTERS).mkdir()

    def write(text: str) -> str:
        (tmp_path / stacks.CLUSTERS / "scratch.py").write_text(text, encoding="utf-8")
        return text

    return write


def load_error() -> str:
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load("scratch")
    assert "Traceback" not in str(err.value)
    return str(err.value)


def test_a_field_error_names_the_field_s_line_not_its_workload_s(project: Callable[[str], str]) -> None:
    text = project(module(nodes="0"))
    message = load_error()
    assert f"workloads[a].nodes (clusters/scratch.py:{line_of(text, 'nodes=0')}): Input should be greater than or equal to 1" in message


def test_a_field_a_helper_is_given_names_the_helper_call_s_keyword(project: Callable[[str], str]) -> None:
    text = project(module(state="runing"))
    message = load_error()
    assert f"workloads[b].state (clusters/scratch.py:{line_of(text, 'state=')}): " in message, message


def test_a_field_the_helper_fills_itself_names_the_helper_s_line_once(project: Callable[[str], str]) -> None:
    """The line to change is the helper's, where the value is written, not each call of the helper."""
    text = project(module().replace('"gpus_per_node": 4,', '"gpus_per_node": 0,'))
    message = load_error()
    assert message.count("gpus_per_node") == 1, message
    line = line_of(text, '"gpus_per_node": 0')
    assert f"workloads[b].gpus_per_node (clusters/scratch.py:{line}): " in message, message


def test_a_value_a_helper_fills_for_several_entries_is_one_error_at_the_helper_s_line(project: Callable[[str], str]) -> None:
    """rdma written in the helper of a stack without a fabric: one error, at the helper's `transport`, naming the other
    entries it fills; not the memlock strategy and SCC the RDMA pods would lack (they follow from it)."""
    text = module(state="running").replace('"transport": "tcp",', '"transport": "rdma",')
    text = project(text.replace('_w("b", state="running"),', '_w("b", state="running"),\n        _w("c"),\n        _w("d"),'))
    errors = load_error().splitlines()[1:]
    line = line_of(text, '"transport": "rdma"')
    assert len(errors) == 1 and errors[0].startswith(f"  workloads[b].transport (clusters/scratch.py:{line}): "), errors
    assert "has no fabric" in errors[0] and "workloads[c], workloads[d]" in errors[0] and "memlock" not in errors[0]


def test_a_finding_of_a_value_a_helper_fills_is_one_finding_at_the_helper_s_line(project: Callable[[str], str]) -> None:
    """A hidden character in the arguments the helper gives two workloads: one finding, where the helper writes them."""
    text = project(
        module()
        .replace('"transport": "tcp",', '"transport": "tcp", "args": ["python", "tr\u202eain.py"],')
        .replace('_w("b", state="stopped"),', '_w("b", state="stopped"),\n        _w("c"),')
    )
    found = [f for f in preflight(stacks.load("scratch"), None, None, others=[]) if f.rule == "hidden-characters"]
    assert [(f.severity, f.where, f.origin) for f in found] == [
        ("error", "workloads[b].args[1]", f"clusters/scratch.py:{line_of(text, chr(0x202E))}")
    ], found


def test_a_bad_constant_is_one_error_at_the_line_that_sets_it(project: Callable[[str], str]) -> None:
    text = project(module(ns='"Bad_NS"'))
    message = load_error()
    errors = [line for line in message.splitlines()[1:] if line.strip()]
    assert len(errors) == 1, message
    (error,) = errors
    assert error.lstrip().startswith(f"NS (clusters/scratch.py:{line_of(text, 'NS = ')}): 'Bad_NS' is not a valid Kubernetes name")
    # the first model built with it fails, naming where it is used
    assert f"the value of NS in security.service_accounts[sa].namespace at clusters/scratch.py:{line_of(text, 'ServiceAccount(')}" in error


def test_a_valid_module_s_values_have_their_own_lines(project: Callable[[str], str]) -> None:
    text = project(module())
    config = stacks.load("scratch")

    def shown(*path: str | int) -> str:
        return provenance.shown(provenance.origin(config, path))

    assert shown("workloads", 0, "nodes") == f"clusters/scratch.py:{line_of(text, 'nodes=1')}"
    assert shown("workloads", 0) == f"clusters/scratch.py:{line_of(text, 'Workload(', 2)}"  # the entry: its call
    assert shown("workloads", 1, "state") == f"clusters/scratch.py:{line_of(text, 'state=')}"
    assert shown("node_sets", 0, "count") == f"clusters/scratch.py:{line_of(text, 'NodeSet(')}"  # one line holds it all


def test_a_finding_about_a_dict_value_names_its_key_s_line(project: Callable[[str], str]) -> None:
    """A preflight finding located through the lines the module's child answered (provenance's registered calls)."""
    quota = (
        '\n    queueing=Queueing(\n        cluster_queue="q",\n        quota={\n            "pool": {"nvidia.com/gpu": "9"},\n        },\n'
        "    ),"
    )
    text = project(module(extra=quota))
    config = stacks.load("scratch")
    (f,) = [f for f in preflight(config, None, None, others=[]) if f.rule == "queue-quota"]
    assert f.origin == f"clusters/scratch.py:{line_of(text, chr(34) + 'pool' + chr(34) + ':')}", f


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("queueing", "quota"), 3),
        (("queueing", "quota", "pool"), 4),
        (("queueing", "quota", "pool", "cpu"), 4),
        (("queueing", "quota", "other"), 3),  # no such key: the keyword's line
        (("queueing", "pods_ready"), 6),
    ],
)
def test_field_line_reads_dict_keys_and_nested_keywords(path: tuple[str, ...], line: int, tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        'CONFIG = ClusterConfig(\n    queueing=Queueing(\n        quota={\n            "pool": {"cpu": "1"},\n        },\n'
        "        pods_ready=PodsReady(),\n    ),\n)\n",
        encoding="utf-8",
    )
    assert provenance.field_line(provenance.Site(str(source), 2), "Queueing", path[1:]) == (str(source), line)
    assert provenance.field_line(provenance.Site(str(source), 1), "ClusterConfig", path) == (
        str(source),
        2,
    )  # the value is a call: its keyword


def test_a_constant_is_found_by_its_name_or_by_the_one_text_it_holds(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text('NS = "ns"\nOTHER = "x"\nSAME = "x"\nW = Workload(namespace=NS, name=OTHER)\nV = _w("v")\n', encoding="utf-8")
    at = str(source)
    assert provenance.constant(provenance.Site(at, 4), "Workload", ("namespace",), "ns") == ("NS", (at, 1))
    assert provenance.constant(provenance.Site(at, 4), "Workload", ("name",), "x") == ("OTHER", (at, 2))  # written by name: that one
    assert provenance.constant(provenance.Site(at, 5), "Workload", ("namespace",), "ns") == (
        "NS",
        (at, 1),
    )  # a helper fills it: by its text
    assert provenance.constant(provenance.Site(at, 5), "Workload", ("image",), "x") is None  # two constants hold "x": neither is named
