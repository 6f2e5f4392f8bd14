"""What several test modules share: the checkout's folders, the renders of the committed stacks and of the
test-owned fixtures (each once per session), readers of a rendered pod, the config's refusal and the preflight's
findings of an edited fixture, and the classes of configuration mistake the tables of cases are sorted by."""

from __future__ import annotations

import fnmatch
import os
import re
import socket
import subprocess
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

import policy
import stacks
from cli.checking import preflight
from cli.main import main
from components.program import objects, patches
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures
from tools.render import Rendering, run

ROOT = Path(__file__).resolve().parent.parent
"""The checkout (never a test's copy: config.project.ROOT is the one a test may point elsewhere)."""
SHARED = ROOT.parent / "shared"

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def export_head(root: Path, dest: Path) -> None:
    """The project committed at HEAD of `root`, written into `dest` by git itself (through an index of its own)."""
    dest.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(dest.parent / f".{dest.name}.index")}
    done = subprocess.run(["git", f"--work-tree={dest}", "checkout", "HEAD", "--", "."], cwd=root, env=env, capture_output=True)
    assert done.returncode == 0, f"git checkout HEAD into {dest}: {done.stderr.decode()}"
    Path(env["GIT_INDEX_FILE"]).unlink()


def yaml_text(data: Any, **options: Any) -> str:
    """`yaml.safe_dump` through libyaml where PyYAML has it: the same text (the emitter is the same, in C), some twenty
    times faster, which the tests that write the largest stack's YAML (7,422 objects' worth) feel in seconds."""
    return yaml.dump(data, Dumper=_DUMPER, **options)


@cache
def rendered_stack(name: str) -> Rendering:
    """A committed stack, rendered once per session."""
    return run(stacks.load(name))


@cache
def rendered_fixture(name: str) -> Rendering:
    """A test-owned fixture (tests/fixtures.py), unedited, rendered once per session."""
    return run(fixtures.config(name))


def find(rendering: Rendering, kind: str, name: str, namespace: str | None = None) -> dict:
    """The rendered object of that kind and name (and namespace); fails the test if absent."""
    hits = [
        o
        for o in rendering.objects()
        if o["kind"] == kind and o["metadata"]["name"] == name and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]
    assert len(hits) == 1, f"expected one {kind} {namespace}/{name}, found {len(hits)}"
    return hits[0]


def pod_spec(obj: dict) -> dict:
    return obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]


def container(obj: dict) -> dict:
    return pod_spec(obj)["containers"][0]


def env_of(obj: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container(obj)["env"]}


def free_port() -> int:
    """A TCP port on loopback nobody listens on (for the torchrun end-to-end tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def refused(name: str, *edits: fixtures.Edit | None) -> str:
    """The message validating the fixture `name`, edited, ends in (the test fails if the config is accepted)."""
    with pytest.raises(stacks.ConfigError) as err:
        fixtures.config(name, *edits)
    message = str(err.value)
    assert "Traceback" not in message
    return message


def refusal(data: dict[str, Any], source: str = "my.yaml") -> str:
    """The config's validation error for plain data, as a user reads it (one ConfigError naming each field)."""
    with pytest.raises(stacks.ConfigError) as err:
        stacks.validate(data, source)
    return str(err.value)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`python -m stacks ARGV`, in process: its exit code, stdout and stderr."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def findings_of(config: ClusterConfig, objs: list[dict[str, Any]] | None = None) -> list[Finding]:
    """The preflight's findings for a config, on the objects it declares (or on `objs`, declared ones edited)."""
    return policy.check(config, objects(config) if objs is None else objs, patches(config))


# --- classes of mistake ------------------------------------------------------------------------------------------------
# Two audits (issues 19 and 23) sorted the configs that passed `check` and then failed on the cluster into classes. Each
# class is refused by the config (tests/config/test_validation.py), found by a rule (tests/policy/test_*.py), kept
# accepted where the value is meant (both), and met on the command line (tests/cli/test_check.py); the cases of a class
# are spread over those files by what they test, and tests/test_mistake_classes.py counts them per class. A case's id
# starts with its class's short name.

DOLLAR = "dollar: $$ and $(NAME) in env and args"
DATA_KEYS = "keys: ConfigMap and Secret keys"
IMAGE = "image: references, digests, mutable tags"
SIZE = "size: object and exec limits"
NAMES = "names: derived names, built-in and existing objects"
MOUNTS = "mounts: system paths, read-only parents, the launcher's files"
PYENV = "python-env: PYTHON* and $PATH in env"
RESOURCES = "resources: node facts, quantities, shm, node names and selectors"
POOL = "control-plane: node_level.pool"
YAML11 = "yaml11: integers as YAML 1.1 reads them"
SCC_FACTS = "scc-facts: an existing SCC lacking IPC_LOCK"
MEMLOCK_REASON = "memlock-reason: why root with IPC_LOCK"
SCC = "shipped-scc: shipped SCCs judged by their facts"
NAMESPACES = "namespaces: the platform's and the SR-IOV source's"
LIMITS = "api-limits: annotations, labels, object size, hidden characters"
QUALIFIED_NAMES = "keys: qualified names; long object names render"
DEBUGGER = "debugger-route: a Route to debugpy"
CONTROL_PLANE = "control-plane: GPU pods off the control plane"
BROAD = "broad-scc: an SCC granted for more than its pods need"
LEAST_CASES = {
    **dict.fromkeys([DOLLAR, DATA_KEYS, IMAGE, SIZE, NAMES, MOUNTS, PYENV, RESOURCES, POOL, YAML11, SCC_FACTS, MEMLOCK_REASON], 1),
    **dict.fromkeys([SCC, NAMESPACES, LIMITS, QUALIFIED_NAMES, DEBUGGER, CONTROL_PLANE, BROAD], 5),
}
"""Every class, and the cases it must keep at least (the second audit's classes were each written with five or more)."""
RENDERED_FIRST = {IMAGE, PYENV, RESOURCES, SCC_FACTS, MEMLOCK_REASON}
"""Classes whose findings are also checked not to stop the offline rendering `render` runs first (a RunError there
would hide the finding)."""

CASES_PER_CLASS: Counter[str] = Counter()
"""The cases of each class, counted as the tables and standalone tests are defined."""


def classify(table: list[tuple[Any, ...]]) -> None:
    """Count the rows of a table of cases (each starting with its class) under their classes."""
    CASES_PER_CLASS.update(row[0] for row in table)


def case_id(row: tuple[Any, ...]) -> str:
    """A row's test id: its class's short name, and its case (the second item) where it has one."""
    short = row[0].split(":")[0]
    return f"{short}: {row[1]}" if isinstance(row[1], str) else short


def cases_of(cls: str, n: int = 1) -> Callable[[Any], Any]:
    """Count a standalone test (with n cases) under its class."""

    def mark(fn: Any) -> Any:
        CASES_PER_CLASS[cls] += n
        return fn

    return mark


def assert_refused(fixture: str, edit: fixtures.Edit, path: str, phrase: str, lines: int = 1) -> None:
    """The edited fixture is refused by the config's validation: `lines` lines (one per field, each once), one naming
    `path` (with its file and line where the config has one) and saying `phrase`."""
    message = refused(fixture, edit)
    assert message.startswith(f"fixture {fixture}: invalid configuration\n"), message
    found = message.splitlines()[1:]
    fields = [line.split(": ", 1)[0] for line in found]
    assert len(found) == lines and len(set(fields)) == len(fields), message  # one cause, one error, each field once
    assert any(re.match(rf"  {re.escape(path)}( \([^)]*:\d+\))?: ", line) and phrase in line for line in found), message


def assert_reported(cls: str, fixture: str, edit: fixtures.Edit, rule: str, severity: str, obj: str, phrase: str) -> None:
    """The edited fixture passes the config and the preflight finds it: `rule` at `severity`, about `obj` (a pattern of
    the objects it affects), `phrase` (a regular expression) in its message and fix, each finding one line with a fix."""
    config = fixtures.config(fixture, edit)
    if cls in RENDERED_FIRST:
        run(config)  # the offline rendering `render` runs first does not stop on it (scc-facts: no RunError)
    found = findings_of(config)
    hits = [f for f in found if f.rule == rule and f.severity == severity and fnmatch.filter(f.affects or (f.object,), obj)]
    assert hits, [f.line() for f in found]
    assert any(re.search(phrase, f"{f.message} Fix: {f.fix}") for f in hits), [f.line() for f in hits]
    assert all(f.fix and "\n" not in f.line() for f in hits)


def assert_found(fixture: str, edit: fixtures.Edit, rule: str, path: str, phrase: str, lines: int = 1) -> None:
    """The edited fixture passes the config, and the preflight finds it as `check` does: `lines` errors in all (one cause,
    one finding per entry it shows in), of `rule`, one at the config path `path` saying `phrase` (in its message or fix)."""
    found = [f for f in preflight(fixtures.config(fixture, edit), None, None, others=[]) if f.severity == "error"]
    assert len(found) == lines and {f.rule for f in found} == {rule}, [f.line() for f in found]
    assert any(f.where == path and phrase in f"{f.message} Fix: {f.fix}" for f in found), [f.line() for f in found]


def assert_accepted(fixture: str, edit: fixtures.Edit) -> None:
    """The edited fixture passes the config, and the preflight finds nothing to warn about that is not accepted."""
    new = [f for f in findings_of(fixtures.config(fixture, edit)) if f.severity != "info" and not f.accepted]
    assert new == [], [f.line() for f in new]
