"""Run a job in a child process forked from this one, with a time limit: how a stack module, which is user code,
is kept from the program that loads it (stacks.load_module).

Whatever the job does stays in the child: `sys.exit`, `os._exit`, a signal, an endless loop, a print, a change to
the program's state (a cleared rule registry, a patched function). Only its answer comes back, as JSON over a pipe,
so the parent receives plain data, never an object the child could have made misbehave.

Why a fork and not a fresh interpreter: the parent has pydantic and the models imported already, so the child
starts in about a millisecond; a new interpreter costs about half a second per load, and the commands and tests
load modules hundreds of times. Forking a process that has threads (the Pulumi program has gRPC's) is safe when the
child touches nothing those threads hold: the child runs only the import machinery (whose lock CPython resets in
a forked child), pydantic and the user's module, and ends with `os._exit`, never running the parent's exit handlers
or gRPC's (whose fork handlers are off unless GRPC_ENABLE_FORK_SUPPORT is set).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stacks import _process

ANSWER_FD = "STACKS_ANSWER_FD"
"""The environment variable that gives a spawned child the descriptor of its answer's pipe."""


@dataclass(frozen=True)
class Started:
    """A child running a job (`start`), whose answer `finish` collects."""

    pid: int
    read: int


def run(job: Callable[[], Any], limit: float, spawn: list[str] | None = None, _end: Callable[[int], Any] = os._exit) -> tuple[Any, str]:
    """(the job's answer, "") or (None, why the child gave none: "exited (code 3)", "was killed by signal
    SIGSEGV", "did not finish within 20 s", ...). The answer is what json.dumps/json.loads make of the job's
    return value. In the child, stdout is stderr (a print must not mix with a command's output, such as
    `config NAME`'s YAML) and stdin is empty (nothing waits for a terminal).

    With `spawn` (the arguments of `python` for a program that does the same job through `answer`), the child is a
    fresh interpreter instead of a fork: for a process whose threads a fork cannot copy (the Pulumi program's gRPC
    threads: a forked child of a live gRPC client can crash in gRPC's fork handlers)."""
    started = start(job, spawn, _end)
    if isinstance(started, str):
        return None, started
    return finish(started, limit)


def start(job: Callable[[], Any], spawn: list[str] | None = None, _end: Callable[[int], Any] = os._exit) -> Started | str:
    """The child that runs `job`, started and left running (`run` waits for it at once; a command that loads several
    stacks starts them all, then does other work); or why none could be started."""
    sys.stdout.flush()  # else what the parent has buffered would be written again by the child
    sys.stderr.flush()
    read, write = os.pipe()
    try:
        if spawn is not None:
            os.set_inheritable(write, True)
            pid = os.posix_spawn(sys.executable, [sys.executable, *spawn], {**os.environ, ANSWER_FD: str(write)})
        else:
            pid = os.fork()
            if pid == 0:  # pragma: no cover (the child; its answer is what the tests see)
                try:
                    answer(job, write, read)
                finally:  # whatever the module did to answer() or its globals, the child never returns into the program
                    _end(70)
    except OSError as err:  # no process to run it in (a process limit, no memory)
        os.close(read)
        return f"was not run: no child process could be started ({err.strerror or err})"
    finally:
        os.close(write)
    _process.CHILDREN.add(pid)  # an interrupted command ends it too (stacks/_process.py)
    return Started(pid, read)


def finish(started: Started, limit: float) -> tuple[Any, str]:
    """The answer of a started child (`run` says what it is), waited for at most `limit` seconds from now: a child started
    ahead (`start`) ran meanwhile beside the parent's own work, which must not count against its time."""
    pid, read = started.pid, started.read
    deadline = time.monotonic() + limit
    chunks: list[bytes] = []
    status: int | None = None
    try:
        status = _collect(pid, read, deadline, chunks)
        timed_out = status is None
    finally:
        os.close(read)
        if status is None:  # too slow, or the parent was interrupted: the child ends here, with whatever it holds
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            status = os.waitpid(pid, 0)[1]
        _process.CHILDREN.discard(pid)
    raw = b"".join(chunks)
    # An answer counts only from a child that ended as `answer` ends it (exit 0): a module that wrote into the pipe
    # itself and then died, or looped, answered nothing.
    if raw and not timed_out and os.waitstatus_to_exitcode(status) == 0:
        try:
            return json.loads(raw.decode("utf-8")), ""
        except ValueError:  # a partial answer: the child died while it wrote
            pass
    if timed_out:
        return None, f"did not finish within {limit:g} s"
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return None, f"was killed by signal {signal.Signals(-code).name}"
    return None, f"exited (code {code})"


def abandon(started: Started) -> None:
    """End a started child whose answer is not wanted any more (its module was edited since), and reap it."""
    os.close(started.read)
    try:
        os.kill(started.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(started.pid, 0)
    _process.CHILDREN.discard(started.pid)


def _collect(pid: int, read: int, deadline: float, chunks: list[bytes]) -> int | None:
    """Read the answer until the child has exited; its wait status, or None when the deadline passed first. The
    end of the pipe alone does not say the child is done (it may close the pipe and loop), nor does its exit say
    the pipe is done (a process it started may hold the pipe open): both are watched."""
    eof = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if not eof:
            ready, _, _ = select.select([read], [], [], min(remaining, 0.05))
            if ready:
                chunk = os.read(read, 1 << 16)
                chunks.append(chunk)
                eof = not chunk
                continue
        else:
            time.sleep(min(remaining, 0.001))
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            os.set_blocking(read, False)
            try:  # what is left in the pipe, without waiting on a process the child may have left holding it
                while chunk := os.read(read, 1 << 16):
                    chunks.append(chunk)
            except BlockingIOError:
                pass
            return status


def answer(  # pragma: no cover (runs in the child)
    job: Callable[[], Any], write: int, read: int = -1, _end: Callable[[int], Any] = os._exit
) -> None:
    """In the child: run the job, write its answer to `write`, and end the process without unwinding into the
    parent's code. `_end` is bound when this module is imported, before any stack module runs: one that replaces
    os._exit or this module's globals cannot bring the child back into the program."""
    try:
        if read >= 0:
            os.close(read)
        os.dup2(2, 1)
        sys.stdout = sys.stderr  # a print goes where the user sees it, never into the command's output
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the child's whole life)
        text = json.dumps(job()).encode("utf-8")
        view = memoryview(text)
        while view:
            view = view[os.write(write, view) :]
    except BaseException:  # noqa: BLE001 (no answer is the answer: the parent reports how the child ended)
        _end(70)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001,S110 (a module may have replaced or closed the streams)
                pass
    _end(0)
