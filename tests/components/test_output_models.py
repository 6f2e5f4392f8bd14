"""The stack outputs are built by the models that define their schema (components/outputs.py), and the names that
change between the stack file and the pod or the outputs change exactly as the boundary tables say."""

from __future__ import annotations

import re
from typing import Any

import pydantic
import pytest

import stacks
from components.outputs import StackOutputs, WorkloadOutputs, stack_outputs
from components.program import objects
from tests import fixtures
from tests.helpers import ROOT, env_of, rendered_fixture, rendered_stack
from tools.render import Rendering, normalize

CASES = [f"stack:{n}" for n in stacks.names()] + [f"fixture:{n}" for n in sorted(fixtures.FIXTURES)]


def rendering(case: str) -> Rendering:
    kind, _, name = case.partition(":")
    return rendered_stack(name) if kind == "stack" else rendered_fixture(name)


@pytest.mark.parametrize("case", CASES)
def test_the_models_build_what_the_program_exports(case: str) -> None:
    # What `pulumi stack output` gives (the rendering records the exports): the SDK drops a top-level null, and the
    # runtime carries every number as a float.
    r = rendering(case)
    built = StackOutputs.of(r.config)
    assert normalize({k: v for k, v in stack_outputs(r.config).items() if v is not None}) == r.outputs
    assert built.model_dump(mode="json") == stack_outputs(r.config)
    assert set(built.workloads) == {w.name for w in r.config.all_workloads()}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"replicas": 0}, "replicas"),
        ({"mode": "infiniband"}, "mode"),
        ({"namespace": "Team_A"}, "namespace"),
        ({"per_pod_claims": ["no-namespace"]}, "per_pod_claims"),
        ({"state": "paused"}, "state"),
    ],
)
def test_a_value_outside_the_contract_is_refused_as_it_is_built(change: dict[str, Any], field: str) -> None:
    config = fixtures.config("roce")
    good = WorkloadOutputs.of(config, config.all_workloads()[0]).model_dump(mode="json")
    with pytest.raises(pydantic.ValidationError) as e:
        WorkloadOutputs.model_validate({**good, **change})
    assert [err["loc"][0] for err in e.value.errors()] == [field]


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_transport_and_nodes_reach_the_outputs_and_the_pod_under_the_tables_names(name: str) -> None:
    config = fixtures.config(name)
    outputs = StackOutputs.of(config)
    main = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects(config) if o["kind"] in ("StatefulSet", "Job")}
    seen = 0
    for w in config.all_workloads():
        out = outputs.workloads[w.name]
        assert (out.mode, out.replicas) == (w.transport, w.nodes)
        obj = main.get((w.namespace, out.object))
        if obj is None:  # a stopped Job is not declared
            continue
        env = env_of(obj)
        assert (env["LAUNCHER_MODE"], env["LAUNCHER_NNODES"]) == (w.transport, str(w.nodes))
        if obj["kind"] == "Job":
            assert obj["spec"]["completions"] == obj["spec"]["parallelism"] == w.nodes
        else:
            assert obj["spec"]["replicas"] == (w.nodes if w.state == "running" else 0)
        seen += 1
    for c in config.enabled_checks():
        assert (outputs.bandwidth_checks[c.name].mode, outputs.bandwidth_checks[c.name].nodes) == (c.transport, c.nodes)
    assert seen >= 1


def _table_fields(doc: str) -> list[str]:
    """The output fields the first column of docs/outputs.md's table of names names (`workloads[W].mode`)."""
    first = [line.split("|")[1] for line in doc.splitlines() if line.startswith("| `")]
    return [f for cell in first for f in re.findall(r"`([a-z_]+\[[A-Z]\]\.[a-z_]+)`", cell)]


@pytest.mark.parametrize("field", _table_fields((ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")))
def test_the_documented_table_names_fields_the_schema_has(field: str) -> None:
    collection, _, leaf = field.partition("[")
    leaf = leaf.split(".", 1)[1]
    model = StackOutputs.model_fields[collection].annotation
    assert model is not None and leaf in model.__args__[1].model_fields, field  # dict[str, Model]
