"""The typed stack outputs: the published schema is what the command prints, and every stack's (and
every fixture's) outputs validate against it, so a consumer that validates never trips over ours."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

import stacks
from cli.main import main
from components.outputs import SCHEMA_FILE, SCHEMA_VERSION, schema_json
from tests import fixtures
from tests.helpers import ROOT, rendered_fixture, rendered_stack

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


@pytest.mark.parametrize("name", [f"stack:{n}" for n in stacks.names()] + [f"fixture:{n}" for n in sorted(fixtures.FIXTURES)])
def test_every_stack_outputs_validate(name: str):
    kind, _, which = name.partition(":")
    outputs = (rendered_stack if kind == "stack" else rendered_fixture)(which).outputs
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(outputs)]
    where = f"clusters/{which}.py" if kind == "stack" else f"tests/fixtures.py {which}"
    assert errors == [], f"{where}: its outputs do not validate against {SCHEMA_FILE}:\n" + "\n".join(errors)
    assert outputs["schema_version"] == SCHEMA_VERSION, (
        f"{where}: schema_version {outputs['schema_version']!r}, expected {SCHEMA_VERSION!r}"
    )


def _mutated(change: Any) -> dict[str, Any]:
    outputs = copy.deepcopy(rendered_fixture("roce").outputs)
    change(outputs)
    return outputs


@pytest.mark.parametrize(
    "change, complaint",
    [
        (lambda o: o.update(extra_field=1), "Additional properties"),
        (lambda o: o.update(schema_version="1"), "'2' was expected"),
        (lambda o: o["workloads"]["dev"].update(replicas="2"), "is not of type 'integer'"),
        (lambda o: o["workloads"]["dev"]["nccl_env"].update(MASTER_ADDR="x"), "does not match"),
        (lambda o: o["workloads"].update({"Bad_Name": o["workloads"]["dev"]}), "does not match"),
        (lambda o: o["workloads"]["dev"].pop("master_addr"), "'master_addr' is a required property"),
        (lambda o: o["workloads"]["dev"].update(state="paused"), "is not one of"),
    ],
)
def test_schema_rejects_what_a_consumer_could_not_rely_on(change: Any, complaint: str):
    messages = [e.message for e in validator().iter_errors(_mutated(change))]
    assert any(complaint in m for m in messages), messages


def test_the_documented_consumer_example_reads_master_addr(tmp_path):
    # The python one-liner of docs/outputs.md, run as a consumer would, on a stack's outputs document.
    readme = (ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in readme.splitlines() if ln.startswith("python3 -c ") and "master_addr" in ln]
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(rendered_fixture("roce").outputs), encoding="utf-8")
    line = line.replace('"h-kim"', '"dev"').replace("'h-kim'", "'dev'")
    done = subprocess.run(["bash", "-c", line.replace("python3", sys.executable, 1)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "dev-0.dev-headless.team-a.svc.cluster.local"


def test_bandwidth_checks_are_typed_too():
    ok = rendered_fixture("roce").outputs
    assert list(ok["bandwidth_checks"]) == ["fabric"] and list(validator().iter_errors(ok)) == []
    bad = _mutated(lambda o: o["bandwidth_checks"]["fabric"].update(min_fraction=1.5, extra=1))
    messages = " ".join(e.message for e in validator().iter_errors(bad))
    assert "1.5 is greater than the maximum of 1" in messages and "Additional properties" in messages
