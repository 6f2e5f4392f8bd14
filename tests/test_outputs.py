"""The typed stack outputs: the published schema is what the command prints, and every stack's
outputs validate against it, so a consumer that validates never trips over our own outputs."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

import stacks
from conftest import ROOT, rendered_stack
from render.outputs import SCHEMA_FILE, SCHEMA_VERSION, schema_json
from stacks.__main__ import main

PUBLISHED = ROOT / SCHEMA_FILE


def published() -> dict[str, Any]:
    return json.loads(PUBLISHED.read_text(encoding="utf-8"))


def validator() -> jsonschema.Draft202012Validator:
    schema = published()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_published_file_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]):
    assert main(["outputs-schema"]) == 0
    printed = capsys.readouterr().out
    assert printed == schema_json()
    assert PUBLISHED.read_text(encoding="utf-8") == printed, (
        f"{SCHEMA_FILE} is stale: run `.venv/bin/python -m stacks outputs-schema > {SCHEMA_FILE}` and commit it"
    )


def test_schema_is_versioned_draft_2020_12():
    schema = published()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith(f":v{SCHEMA_VERSION}") and PUBLISHED.name == f"outputs.v{SCHEMA_VERSION}.json"
    assert schema["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    assert "schema_version" in schema["required"]


def _properties(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        for name, sub in (node.get("properties") or {}).items():
            out.append((f"{where}.{name}", sub))
        for key, sub in node.items():
            out += _properties(sub, f"{where}/{key}")
    elif isinstance(node, list):
        for sub in node:
            out += _properties(sub, where)
    return out


def test_every_property_is_documented_and_objects_are_closed():
    schema = published()
    props = _properties(schema)
    assert len(props) >= 20
    assert [where for where, sub in props if not sub.get("description")] == []
    objects = [schema, *schema["$defs"].values()]
    assert all(o["additionalProperties"] is False for o in objects)


@pytest.mark.parametrize("name", stacks.STACKS)
def test_every_stack_outputs_validate(name: str):
    outputs = rendered_stack(name).outputs
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(outputs)]
    assert errors == []
    assert outputs["schema_version"] == SCHEMA_VERSION


def _mutated(change: Any) -> dict[str, Any]:
    outputs = copy.deepcopy(rendered_stack("barcelona").outputs)
    change(outputs)
    return outputs


@pytest.mark.parametrize(
    "change, complaint",
    [
        (lambda o: o.update(extra_field=1), "Additional properties"),
        (lambda o: o.update(schema_version="2"), "'1' was expected"),
        (lambda o: o["workloads"]["h-kim"].update(replicas="2"), "is not of type 'integer'"),
        (lambda o: o["workloads"]["h-kim"]["nccl_env"].update(MASTER_ADDR="x"), "does not match"),
        (lambda o: o["workloads"].update({"Bad_Name": o["workloads"]["h-kim"]}), "does not match"),
        (lambda o: o["workloads"]["h-kim"].pop("master_addr"), "'master_addr' is a required property"),
    ],
)
def test_schema_rejects_what_a_consumer_could_not_rely_on(change: Any, complaint: str):
    messages = [e.message for e in validator().iter_errors(_mutated(change))]
    assert any(complaint in m for m in messages), messages


def test_the_readme_consumer_example_reads_master_addr(tmp_path):
    # The README's python one-liner, run as a consumer would, on a stack's outputs document.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in readme.splitlines() if ln.startswith("python3 -c ") and "master_addr" in ln]
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(rendered_stack("barcelona").outputs), encoding="utf-8")
    done = subprocess.run(["bash", "-c", line.replace("python3", sys.executable, 1)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "h-kim-0.h-kim-headless.nccl-test.svc.cluster.local"


def test_bandwidth_checks_are_typed_too():
    # No committed stack declares a check yet; this is the shape components/bandwidth.py gives one.
    check = {
        "namespace": "nccl-test",
        "job": "fabric-check",
        "mode": "rdma",
        "tool": "torch",
        "nodes": 2,
        "gpus_per_node": 4,
        "pods": ["fabric-check-0", "fabric-check-1"],
        "line_rate_gbps": 1600,
        "min_fraction": 0.8,
        "min_busbw_gbytes_per_s": 160.0,
        "report": "oc logs -n nccl-test job/fabric-check | python -m stacks bandwidth-report - --stack barcelona --check fabric-check",
    }
    ok = _mutated(lambda o: o.update(bandwidth_checks={"fabric-check": check}))
    assert list(validator().iter_errors(ok)) == []
    bad = _mutated(lambda o: o.update(bandwidth_checks={"fabric-check": {**check, "min_fraction": 1.5, "extra": 1}}))
    messages = " ".join(e.message for e in validator().iter_errors(bad))
    assert "1.5 is greater than the maximum of 1" in messages and "Additional properties" in messages
