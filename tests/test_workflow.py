"""The pull-request workflow: its preview matrix is the project's Pulumi stack files (a new cluster needs no
workflow edit), and secrets reach only the steps that need them, never a job's whole environment or the
step that installs a pull request's requirements."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import yaml

import stacks
from tests.helpers import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "preview.yml"


def jobs() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]  # type: ignore[no-any-return]


def test_the_preview_matrix_is_read_from_the_stack_files() -> None:
    preview = jobs()["preview"]
    assert preview["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.stacks.outputs.matrix) }}"
    text = WORKFLOW.read_text(encoding="utf-8")
    for name in stacks.names():
        for named in (f"stack: {name}", f"KUBECONFIG_{name.upper()}"):
            assert named not in text, f"{WORKFLOW.relative_to(ROOT)} names stack {name} ({named!r}): its matrix comes from the stack files"
    assert "python -m stacks list --pulumi-stacks --json" in text


def test_every_matrix_value_the_preview_uses_is_in_the_stack_list() -> None:
    # A key the rows lack is an empty string in the workflow: no context to probe, no secret to read.
    used = set(re.findall(r"matrix\.([a-z_]+)", WORKFLOW.read_text(encoding="utf-8")))
    out = subprocess.run(
        [sys.executable, "-m", "stacks", "list", "--pulumi-stacks", "--json"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    rows = json.loads(out.stdout)
    assert rows, "`python -m stacks list --pulumi-stacks --json` lists no Pulumi stack file"
    for row in rows:
        assert used <= set(row), (
            f"stack {row.get('stack', row)}: the workflow reads matrix.{sorted(used - set(row))}, the stack list lacks them"
        )
        assert row["context"], f"stack {row.get('stack', row)}: its Pulumi stack file names no kubernetes:context"


def test_secrets_reach_only_the_steps_that_need_them() -> None:
    for name, job in jobs().items():
        assert "secrets." not in str(job.get("env", {})), f"job {name} puts secrets in its whole environment"
        for step in job["steps"]:
            if "make venv" in str(step.get("run", "")) or "make test" in str(step.get("run", "")):
                assert "secrets" not in str(step), f"{name}: a step that installs requirements sees secrets"
    assert jobs()["preview"]["environment"] == "cluster-preview"


def test_no_script_has_an_expression_pasted_into_it() -> None:
    # The runner pastes a `${{ }}` expression into a `run:` script's text before the shell reads it: a matrix value (a
    # stack file's name) would run as shell, beside the secrets of the step. Values reach scripts through `env:`.
    for name, job in jobs().items():
        for i, step in enumerate(job["steps"]):
            script = str(step.get("run", ""))
            assert "${{" not in script, f"{name} step {step.get('name', i)}: an expression inside `run:` ({script[:80]!r}...)"


def test_every_matrix_value_a_script_reads_comes_through_its_environment() -> None:
    for name, job in jobs().items():
        for step in job["steps"]:
            env = {k: str(v) for k, v in (step.get("env") or {}).items()}
            for var in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", str(step.get("run", ""))):
                value = env.get(var, "")
                assert "matrix." not in value or value.strip().startswith("${{"), f"{name}: ${var} is {value!r}"


def test_no_checkout_leaves_the_job_token_for_the_pull_requests_code() -> None:
    # actions/checkout writes the job's token into .git/config unless told not to; the stack modules the jobs run next are
    # the pull request's code.
    checkouts = [step for job in jobs().values() for step in job["steps"] if str(step.get("uses", "")).startswith("actions/checkout")]
    assert checkouts and all((step.get("with") or {}).get("persist-credentials") is False for step in checkouts), checkouts
