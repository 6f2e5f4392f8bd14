"""How the `python -m stacks` process meets its terminal: Ctrl-C and SIGTERM end it quietly, and output
the terminal's encoding cannot show is escaped instead of failing.

Ctrl-C (SIGINT) exits 130 and SIGTERM 143 with one short line on stderr and no traceback, at any moment:
the process ends at once, without unwinding through the Pulumi runtime's event loop (whose teardown is
what printed `no running event loop`). Nothing is left half-written by that: `render` swaps each stack's
folder in whole (render/writer.py) and removes the temporary folder of an interrupted run next time.
The render workers forked by `render` end with the signal too, and the command waits for them, so no
worker keeps writing after the command has exited.

Installed as soon as `python -m stacks` starts importing the package (stacks/__init__.py imports this
module first) and again, idempotently, by stacks/__main__.py; importing `stacks` as a library (the
tests, the Pulumi program) changes nothing. The command's garbage collector is off from the same moment.
"""

from __future__ import annotations

import codecs
import gc
import os
import signal
import sys
import time
from types import FrameType

CHILDREN: set[int] = set()
"""The render workers this process forked and has not yet waited for (stacks/__main__.py keeps it)."""

WORKERS_GRACE = 2.0
"""Seconds an interrupted command waits for its workers to end before it kills them."""
_main_pid = 0

ESCAPE = "stacks.escape"
"""The error handler of stdout and stderr: surrogateescape where it applies (the bytes of a file name given
on the command line that were not text in the locale go back out as given), else backslashreplace (`\\xfc`
for `ü`)."""


def _escape(err: UnicodeError) -> tuple[str | bytes, int]:
    if isinstance(err, UnicodeEncodeError):
        try:
            return codecs.lookup_error("surrogateescape")(err)
        except UnicodeError:
            pass
    return codecs.lookup_error("backslashreplace")(err)


def _end(signum: int, frame: FrameType | None) -> None:
    code = 128 + signum
    if os.getpid() != _main_pid:  # a forked worker: the command reports for it
        os._exit(code)
    for pid in list(CHILDREN):
        try:
            os.kill(pid, signum)
        except OSError:
            CHILDREN.discard(pid)
    deadline = time.monotonic() + WORKERS_GRACE
    while CHILDREN:
        for pid in list(CHILDREN):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                CHILDREN.discard(pid)
            elif time.monotonic() > deadline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    CHILDREN.discard(pid)
        time.sleep(0.005)
    try:
        os.write(2, b"interrupted\n" if signum == signal.SIGINT else b"terminated\n")
    except OSError:
        pass
    os._exit(code)


def setup() -> None:
    """Quiet Ctrl-C and SIGTERM (unless the process was started with them ignored, e.g. by nohup), and
    escape on stdout and stderr what their encoding cannot write (PYTHONIOENCODING=ascii, LC_ALL=C)."""
    global _main_pid
    _main_pid = os.getpid()
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _end)
    codecs.register_error(ESCAPE, _escape)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) in ("strict", "surrogateescape", "backslashreplace"):
            reconfigure(errors=ESCAPE)


def _started_as_command() -> bool:
    """True while `python -m stacks ...` imports the package: Python sets sys.argv[0] to "-m" until the
    module is found."""
    argv = sys.orig_argv
    return sys.argv[:1] == ["-m"] and any(a == "-m" and b == "stacks" for a, b in zip(argv, argv[1:], strict=False))


if _started_as_command():
    setup()
    # The command runs without the garbage collector (cli/main.py run()), from here: the imports that follow build the
    # config model and load pydantic and the Pulumi SDK, and a collection during them (a tenth of the import) only walks
    # objects that live as long as the process.
    gc.disable()
