"""Shared fixtures.

Rendering runs the real program under Pulumi's mock runtime (tools.render.run). The mock runtime is
process-global, so each run sets up its own event loop and root stack. Program tests render the
configs the tests own (tests/fixtures.py); the committed stacks are rendered once per session for
the tests that check their facts (test_committed_stacks.py) and validity.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# pytest keeps its assertion rewrite of each test module as a .pyc in __pycache__ (gitignored), unless bytecode writing
# is off (PYTHONDONTWRITEBYTECODE, which some shells and images set): then every run, in every xdist worker, rewrites and
# compiles all the test modules again (1.5 s a worker). The program's modules imported below are cached the same way.
sys.dont_write_bytecode = False

from hypothesis import settings  # noqa: E402

import stacks  # noqa: E402
from config import project  # noqa: E402
from tests.helpers import rendered_stack  # noqa: E402
from tools.render import Rendering  # noqa: E402

# No test has a deadline: hypothesis's default fails an example that takes 200 ms, which a loaded machine can make any
# example take. The work a test must bound is counted instead (docs/architecture.md, "Where tests live").
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")

# The longest tests start first: the README's recipes and the docs' examples that edit a stack (each runs the
# committed-stack tests on a copy, about 25 s of one core on a new commit), then the largest stack's checks and the
# properties (3 to 5 s). `make test` runs the suite on a worker per core (pytest-xdist, `--dist worksteal`: a worker
# that runs out takes half of another's queue), and a long test started last would leave the other workers idle.
LONGEST_FIRST = (
    "tests/test_recipes.py::",
    "tests/test_doc_examples.py::test_the_examples_of_a_page_can_be_followed",
    "tests/cli/test_check.py::test_check_of_the_largest_accepted_stack",
    "tests/test_properties.py::",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))  # stable: the rest keep their order


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """Quiet when green: under -q (`make test`) a test that passes prints no dot, so a green run says its one summary
    line; a failure, an error or a skip still prints its letter (and `-rs` the reason of each skip)."""
    if report.when == "call" and report.passed and not hasattr(report, "wasxfail") and config.get_verbosity() < 0:
        return "passed", "", "PASSED"
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Quiet when green, under xdist too: its "bringing up nodes..." status, which it prints twice where the output is no
    terminal (make's log), is not printed under -q. A worker that goes down is still said."""
    workers = session.config.pluginmanager.getplugin("terminaldistreporter")
    if workers is not None and session.config.get_verbosity() < 0:
        workers.ensure_show_status = lambda: None


@pytest.fixture(params=stacks.names())
def stack_rendering(request: pytest.FixtureRequest) -> Rendering:
    """Each committed stack, rendered once per session."""
    return rendered_stack(request.param)


@pytest.fixture
def fixture_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """A project folder whose one cluster is a test-owned fixture: clusters/NAME.py reading NAME.yaml (the
    fixture's data, edited), and the stack files of its two tiers (Pulumi.NAME.yaml: project,
    Pulumi.NAME-platform.yaml: platform). Commands that take a stack or a Pulumi stack then run on configs the
    tests own, whatever the committed stacks hold."""

    import yaml

    from tests import fixtures

    def make(name: str, edit: Callable[[dict[str, Any]], Any] | None = None) -> Path:
        data = fixtures.data(name)
        if edit is not None:
            edit(data)
        folder = tmp_path / stacks.CLUSTERS
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        (folder / f"{name}.py").write_text(
            f'from pathlib import Path\n\nfrom stacks import load_file\n\nCONFIG = load_file(Path(__file__).with_name("{name}.yaml"))\n',
            encoding="utf-8",
        )
        for stack, tier in ((name, "project"), (f"{name}-platform", "platform")):
            settings = {"gpu-training:cluster": name, "gpu-training:tier": tier, "kubernetes:context": name}
            (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": settings}), encoding="utf-8")
        monkeypatch.setattr(project, "ROOT", tmp_path)
        monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.{name}", raising=False)
        return tmp_path

    return make
