"""How `python -m stacks` meets its terminal (installed by cli/main.py's `run`, never on import): Ctrl-C exits 130 and
SIGTERM 143 with one line and no traceback, at once (no unwinding through Pulumi's event loop), after the render
workers end; output the terminal's encoding cannot show is escaped instead of failing."""

import codecs
import contextlib
import os
import signal
import sys
import time
from types import FrameType

CHILDREN: set[int] = set()  # the render workers forked and not yet waited for (cli/rendering.py keeps it)
WORKERS_GRACE = 2.0  # seconds an interrupted command waits for its workers before it kills them
_main_pid = 0

# stdout's and stderr's error handler: surrogateescape where it applies, else backslashreplace (`\xfc` for `ü`).
ESCAPE = "stacks.escape"


def _escape(err: UnicodeError) -> tuple[str | bytes, int]:
    if isinstance(err, UnicodeEncodeError):
        with contextlib.suppress(UnicodeError):
            return codecs.lookup_error("surrogateescape")(err)
    return codecs.lookup_error("backslashreplace")(err)


def _end(signum: int, frame: FrameType | None) -> None:
    code = 128 + signum
    if os.getpid() != _main_pid:  # a forked worker: the command reports for it
        os._exit(code)
    for pid in list(CHILDREN):
        with contextlib.suppress(OSError):
            os.kill(pid, signum)
    deadline = time.monotonic() + WORKERS_GRACE
    for pid in list(CHILDREN):
        with contextlib.suppress(OSError):  # ChildProcessError: reaped already; a failed kill: gone
            while not os.waitpid(pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                time.sleep(0.005)
    with contextlib.suppress(OSError):
        os.write(2, b"interrupted\n" if signum == signal.SIGINT else b"terminated\n")
    os._exit(code)


def setup() -> None:
    """Quiet Ctrl-C and SIGTERM (unless started with them ignored: nohup); escape what stdout cannot write (LC_ALL=C)."""
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
