"""Nothing the live tier starts outlives it: a pytest plugin (conftest.py registers it) that fails the run when a
process a test started is still running at the end, names it (command, parent, working folder) and ends it.

Each run marks what it starts (live/procs.py MARKER, set in os.environ before anything is started): the controller
with a fresh run id, each xdist worker with `RUN/WORKER`. A worker checks its own processes when its last test is
done (the teardown of a session fixture: the failure is an error of that test); the controller checks the whole run's
once the workers are gone (a worker that crashed leaves its processes to it). Processes of another run (another
engineer's, on the same machine at the same time) carry another id and are never looked at.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Generator, Iterator

import pytest

from live import procs

_FOUND = pytest.StashKey[list[procs.Proc]]()


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    if worker is None:
        os.environ[procs.MARKER] = uuid.uuid4().hex  # the run; the workers inherit it
    else:
        run = os.environ.get(procs.MARKER, "").partition("/")[0] or uuid.uuid4().hex
        os.environ[procs.MARKER] = f"{run}/{worker['workerid']}"


def message(left: list[procs.Proc]) -> str:
    return f"{len(left)} process(es) started by this run still running at its end (ended now):\n" + "\n".join(f"  {p}" for p in left)


def _ended(match: Callable[[str], bool]) -> list[procs.Proc]:
    left = procs.marked(match)
    procs.end(left)
    return left


@pytest.fixture(scope="session", autouse=True)
def nothing_left_running() -> Iterator[None]:
    """This process's own: torn down after every other fixture of the session (it is set up first)."""
    yield
    mine = os.environ[procs.MARKER]
    left = _ended(lambda m: m == mine)
    if left:
        pytest.fail(message(left), pytrace=False)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None]:
    """The controller's check, after xdist has ended its workers (its own pytest_sessionfinish, inside this wrapper)."""
    result = yield
    if getattr(session.config, "workerinput", None) is None:
        run = os.environ[procs.MARKER]
        distributed = session.config.pluginmanager.get_plugin("dsession") is not None
        # With workers, what they started is RUN/WORKER; without, the tests ran here and theirs is RUN.
        left = _ended((lambda m: m.startswith(run + "/")) if distributed else (lambda m: m == run))
        if left:
            session.config.stash[_FOUND] = left
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return result


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    left = config.stash.get(_FOUND, [])
    if left:
        terminalreporter.section("processes left running", red=True)
        terminalreporter.write_line(message(left))
