"""Nothing the live tier starts outlives it (live/procs.py, live/tests/leftovers.py, docs/live.md "Nothing left
running"), shown without a cluster: a run's processes are found by the marker they inherit, whatever became of their
parents; a killed `pulumi up`'s session is ended whole, the provider the CLI put in a process group of its own too;
and a run that leaves something running fails, names it and ends it, in one process or with xdist workers, while
another run's processes on the same machine are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from live import procs

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"offline-{uuid.uuid4().hex}"
    monkeypatch.setenv(procs.MARKER, value)
    return value


def token() -> str:
    """A `sleep` argument no other process on the machine has: what a test looks for in the process list."""
    return f"{300 + uuid.uuid4().int % 10**6 / 10**6:.6f}"


def running(tok: str) -> list[int]:
    """The `sleep TOK` processes running, whoever's run they belong to."""
    return [p.pid for p in procs.marked(lambda m: True) if p.cmd == f"sleep {tok}"]


@pytest.fixture
def sweep() -> Iterator[list[str]]:
    """Tokens of the processes a test starts; whatever is left of them is ended after it, pass or fail."""
    tokens: list[str] = []
    yield tokens
    procs.end(p for p in procs.marked(lambda m: True) if p.cmd in {f"sleep {t}" for t in tokens})


def test_run_ends_what_its_command_left_running(marker: str, sweep: list[str]) -> None:
    tok = token()
    sweep.append(tok)
    done = procs.run(["sh", "-c", f"sleep {tok} >/dev/null 2>&1 & echo started"], timeout=30)
    assert done.returncode == 0 and done.stdout == "started\n"
    assert running(tok) == []


def test_run_on_its_time_limit_ends_the_whole_session(marker: str, sweep: list[str]) -> None:
    tok = token()
    sweep.append(tok)
    with pytest.raises(subprocess.TimeoutExpired):
        procs.run(["sh", "-c", f"sleep {tok} >/dev/null 2>&1 & sleep {tok}"], timeout=1)
    assert running(tok) == []


# The shape of a `pulumi up`: the CLI starts its provider in a process group of its own (as Pulumi does for every plugin).
CLI = "import subprocess, sys, time; subprocess.Popen(['sleep', sys.argv[1]], process_group=0); print('up', flush=True); time.sleep(300)"


def test_a_killed_runs_session_is_ended_whole_where_its_process_group_is_not(marker: str, sweep: list[str]) -> None:
    tok = token()
    sweep.append(tok)
    cli = subprocess.Popen([sys.executable, "-c", CLI, tok], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert cli.stdout is not None and cli.stdout.readline() == "up\n"
    (provider,) = running(tok)
    os.killpg(cli.pid, signal.SIGKILL)  # what the killed-run test did: the CLI's group only
    assert cli.wait(timeout=10) == -signal.SIGKILL
    assert running(tok) == [provider], "the provider outlives its CLI's process group"
    ended = procs.end_session(cli.pid)
    assert [p.pid for p in ended] == [provider] and running(tok) == []


def _pytest(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A pytest run of `body` with the live tier's check, as make test-live runs it (but for the tests). Without
    Hypothesis's plugin, which the bodies do not use: it is a fifth of a second of each process's start."""
    (tmp_path / "test_body.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(procs.MARKER, None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "live.tests.leftovers",
         *args, "test_body.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


LEAVES = """
import subprocess, sys

def test_leaves_an_orphan():
    # Started by a process that ends at once (Popen returns once `sleep` runs): an orphan, as a killed CLI's provider.
    subprocess.run([sys.executable, "-c", "import subprocess; subprocess.Popen(['sleep', '{tok}'])"], check=True)
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_that_leaves_a_process_running_fails_naming_it_and_ends_it(tmp_path: Path, sweep: list[str], workers: str) -> None:
    tok = token()
    sweep.append(tok)
    run = _pytest(tmp_path, LEAVES.format(tok=tok), "-n", workers)
    said = run.stdout + run.stderr
    assert run.returncode == 1, said
    assert "1 process(es) started by this run still running at its end (ended now)" in said and f"sleep {tok} (in {tmp_path})" in said
    assert "1 passed, 1 error" in said  # the error of the last test's teardown: the worker's own check
    assert running(tok) == []


CLEAN = """
import subprocess, time

def test_ends_what_it_starts():
    p = subprocess.Popen(["sleep", "{tok}"])
    p.kill()
    p.wait()

def test_starts_nothing():
    time.sleep(0.5)  # the other worker's test ends meanwhile
"""


def test_a_clean_run_passes_and_another_runs_processes_are_left_alone(tmp_path: Path, sweep: list[str]) -> None:
    """Another engineer's live run on the same machine (another marker), and the xdist workers themselves, are not
    this run's leftovers."""
    tok, theirs = token(), token()
    sweep += [tok, theirs]
    other = subprocess.Popen(["sleep", theirs], env={**os.environ, procs.MARKER: "someone-elses-run"})
    try:
        run = _pytest(tmp_path, CLEAN.format(tok=tok), "-n", "2")
        assert run.returncode == 0, run.stdout + run.stderr
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


CRASHES = """
import os, subprocess

def test_worker_dies():
    subprocess.Popen(["sleep", "{tok}"])
    os._exit(1)
"""


def test_what_a_crashed_worker_left_is_found_by_the_controller(tmp_path: Path, sweep: list[str]) -> None:
    tok = token()
    sweep.append(tok)
    run = _pytest(tmp_path, CRASHES.format(tok=tok), "-n", "2", "--max-worker-restart=0")
    said = run.stdout + run.stderr
    assert run.returncode == 1 and "processes left running" in said and f"sleep {tok}" in said, said
    time.sleep(0.1)
    assert running(tok) == []
