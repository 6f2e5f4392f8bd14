"""The processes the live tier starts, found again and ended, so that none outlives the run that started it.

Every process a live run starts inherits MARKER from the run's environment: the pytest process sets it before it
starts anything (live/tests/leftovers.py), and environments are copied from os.environ (the control planes, the
Pulumi CLI and, through it, its provider plugins, kubectl, `python -m stacks`). Its value names the run (and the
xdist worker), so a run finds its own processes by it in /proc/PID/environ, whatever became of their parents, and
never another engineer's: their runs carry other values.

A container on a real node (live/realnodes.py) carries no marker: its environment is the pod's. It runs in the cgroup
its node's kubelet made under CGROUP/RUN/WORKER/NODE (cgroup_path), which says whose it is, and is found by that.

Process groups are not enough for what a test kills: the Pulumi CLI starts each plugin in a process group of its
own, so killing a `pulumi up`'s group leaves its provider running, orphaned. A run started in a session of its own
(start_new_session) keeps every descendant in that session, new groups included: end_session() ends them all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = "GPU_TRAINING_LIVE_RUN"
_PREFIX = MARKER.encode() + b"="
CGROUP = "gpu-training-live"  # the real nodes' cgroups: CGROUP/RUN/WORKER/NODE in every hierarchy


def own() -> str:
    """This process's marker value, the one every process it starts inherits; a fresh one if none is set yet."""
    return os.environ.setdefault(MARKER, uuid.uuid4().hex)


def cgroup_path(node: str, marker: str | None = None) -> str:
    """The cgroup (under every hierarchy's root) of a real node of the run `marker` (this process's by default)."""
    run, _, worker = (own() if marker is None else marker).partition("/")
    return f"/{CGROUP}/{run}/{worker or '-'}/{node}"


def cgroup_marker(cgroups: str) -> str | None:
    """The marker of the run whose real node's cgroup /proc/PID/cgroup names, if any."""
    for line in cgroups.splitlines():
        parts = line.rpartition(":")[2].split("/")
        if len(parts) > 4 and parts[1] == CGROUP:
            return parts[2] if parts[3] == "-" else f"{parts[2]}/{parts[3]}"
    return None


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    session: int
    marker: str
    cmd: str
    cwd: str

    def __str__(self) -> str:
        return f"pid {self.pid} (parent {self.ppid}): {self.cmd} (in {self.cwd})"


def _environ(base: Path) -> bytes:
    """/proc/PID/environ, read again for a moment while it is empty: it is empty for a zombie and a kernel thread, and
    also for a process in the middle of execve (the kernel closes the close-on-exec pipe that subprocess.Popen waits on
    before it has laid out the new program's arguments and environment, so a process Popen has just returned can still
    read empty here for a few milliseconds on a busy machine)."""
    environ = b""
    for _ in range(20):
        environ = (base / "environ").read_bytes()
        if environ or (base / "cmdline").read_bytes():
            return environ  # a process with arguments and really no environment (env -i) is not waited for
        stat = (base / "stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X") or int(fields[1]) in (0, 2):  # a zombie, kthreadd or one of its kernel threads
            return environ
        time.sleep(0.005)
    return environ


def _read(pid: int) -> Proc | None:
    """The process `pid` if it is running and carries a marker; None if it is gone, a zombie, or unmarked."""
    base = Path("/proc") / str(pid)
    try:
        environ = _environ(base)
        marker = next((item[len(_PREFIX) :] for item in environ.split(b"\0") if item.startswith(_PREFIX)), None)
        if marker is None:
            in_node = cgroup_marker((base / "cgroup").read_text())
            if in_node is None:
                return None
            marker = in_node.encode()
        stat = (base / "stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp session ...
        if fields[0] in ("Z", "X"):
            return None
        cmd = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        try:
            cwd = os.readlink(base / "cwd")
        except OSError:
            cwd = "?"
        return Proc(pid, int(fields[1]), int(fields[3]), marker.decode(errors="replace"), cmd, cwd)
    except (OSError, ValueError, IndexError):
        return None  # gone while it was read, or not ours to read


def marked(match: Callable[[str], bool]) -> list[Proc]:
    """Every running process but this one whose marker value `match` accepts."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            p = _read(int(entry.name))
            if p is not None and match(p.marker):
                found.append(p)
    return found


def end(procs: Iterable[Proc]) -> None:
    """SIGKILL each process that is still the one found: pinned by a pidfd first, and its marker read again, so a pid
    reused since it was found is never signalled."""
    for p in procs:
        try:
            fd = os.pidfd_open(p.pid)
        except OSError:
            continue  # gone already
        try:
            again = _read(p.pid)
            if again is not None and again.marker == p.marker and again.session == p.session:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)


def end_session(session: int, marker: str | None = None, timeout: float = 10) -> list[Proc]:
    """End every process of `session` that carries `marker` (this process's by default), until none is left (a member
    may start another while it is killed); what was ended."""
    marker = own() if marker is None else marker
    ended: list[Proc] = []
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in marked(lambda m: m == marker) if p.session == session]
        if not left:
            return ended
        if time.monotonic() > deadline:
            raise RuntimeError(f"session {session}: still running after SIGKILL: " + "; ".join(map(str, left)))
        end(left)
        ended += [p for p in left if p not in ended]
        time.sleep(0.05)


def run(
    args: list[str], *, timeout: float, check: bool = False, input: str | None = None, **popen: Any
) -> subprocess.CompletedProcess[str]:
    """subprocess.run(args, capture_output=True, text=True), in a session of its own, and nothing of it left after: what
    it started and left running is ended when it returns, and on the time limit the whole session is."""
    own()
    proc = subprocess.Popen(
        args, stdin=subprocess.PIPE if input is not None else None, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, **popen,
    )  # fmt: skip
    try:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            end_session(proc.pid)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(args, timeout, out, err) from None
    finally:
        end_session(proc.pid)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, args, out, err)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
