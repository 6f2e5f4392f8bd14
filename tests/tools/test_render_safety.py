"""Commands that must never lose or half-write a file.

`render` replaces DIR/<stack>/ whole: written beside it, swapped in with one atomic exchange, so a kill at
any moment leaves the old render or the new one, each agreeing with its manifest (sha256 per file). It
never follows a symlink out of --out, and it replaces only a folder holding exactly what the previous
render wrote; anything else is refused, naming it, with nothing changed. Ctrl-C and SIGTERM end any
command quietly (130, 143), and a terminal that cannot show non-ASCII gets it escaped.

The writer is exercised in process on a small fixture (fast); what happens at the process level (signals,
forked workers, the terminal's encoding) runs the real `python -m stacks` in subprocesses, concurrently.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from cli.main import main
from tests import fixtures
from tests.helpers import ROOT, rendered_fixture
from tools import writer
from tools.render import Rendering, run
from tools.writer import MANIFEST, TEMP, WriteError, read_manifest, write

LINUX = sys.platform.startswith("linux")


@cache
def _old() -> Rendering:
    """The render DIR/tcp holds before: the tcp fixture without its workload `two`."""
    return run(fixtures.config("tcp", lambda d: d["workloads"].pop()))


def _new() -> Rendering:
    return rendered_fixture("tcp")


def _tree(folder: Path) -> dict[str, Any]:
    """Everything under folder, links not followed: path -> bytes, 'dir', ('link', target) or 'other'."""
    tree: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                tree[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                tree[rel] = "dir"
            elif path.is_file():
                tree[rel] = path.read_bytes()
            else:
                tree[rel] = "other"
    return tree


def _whole(folder: Path) -> dict[str, bytes]:
    """The files of a stack folder, asserting that they are exactly what its manifest lists, by sha256."""
    import hashlib

    tree = _tree(folder)
    assert all(isinstance(v, bytes) or v == "dir" for v in tree.values()), f"{folder}: not only files and folders: {tree}"
    files = {rel: data for rel, data in tree.items() if isinstance(data, bytes)}
    listed = read_manifest(files.pop(MANIFEST).decode())
    assert set(listed) == set(files), f"{folder}: manifest and files disagree: {set(listed) ^ set(files)}"
    assert all(listed[rel] == hashlib.sha256(data).hexdigest() for rel, data in files.items()), f"{folder}: a hash differs"
    return files


def _temps(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if TEMP in p.name)


def _populated(tmp_path: Path) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """DIR with the old render of tcp; the old and the new render's files."""
    old = _whole(write(_old(), tmp_path / "expect-old"))
    new = _whole(write(_new(), tmp_path / "expect-new"))
    assert old != new
    out = tmp_path / "out"
    write(_old(), out)
    return out, old, new


# --- the swap: whole, atomic, and nothing left behind ---------------------------------------------------


def test_a_render_replaces_the_folder_whole_with_a_hash_per_file(tmp_path: Path) -> None:
    out, _, new = _populated(tmp_path)
    write(_new(), out)
    assert _whole(out / "tcp") == new
    assert _temps(out) == []
    assert all(line.startswith("#") or len(line.split("  ")[0]) == 64 for line in (out / "tcp" / MANIFEST).read_text().splitlines())


# A fork of this process renders, and ends itself (os._exit: no cleanup, as SIGKILL) just before the n-th
# step that changes the file system: mkdir, a file opened to write, rename, remove, rmdir, rmtree. The
# exchange (a libc call, no audit event) sits between the manifest's write and the removal of the old folder.
CHANGES = frozenset({"os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree"})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT
KILLED = 77


def _changes(event: str, args: tuple[Any, ...]) -> bool:
    if event == "open":
        _, mode, flags = args
        return bool(set(mode or "") & set("wxa+")) or bool((flags or 0) & WRITE_FLAGS)
    return event in CHANGES


def _render_killed_at(step: int, out: Path) -> int:
    """The pid of a fork that renders the new tcp into out and dies before its step-th change."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        seen = 0

        def hook(event: str, args: tuple[Any, ...]) -> None:
            nonlocal seen
            if _changes(event, args):
                seen += 1
                if seen == step:
                    os._exit(KILLED)

        code = 1
        try:
            sys.addaudithook(hook)
            write(_new(), out)
            code = 0
        finally:
            os._exit(code)
    return pid


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_kill_at_any_step_leaves_the_old_or_the_new_render_whole(tmp_path: Path) -> None:
    template, old, new = _populated(tmp_path)
    states: dict[int, bool] = {}  # step -> whether DIR/tcp held the new render after the kill
    batch = 2 * (os.cpu_count() or 1)
    finished = False
    while not finished:  # a batch of steps at a time, each in its own copy of the populated DIR
        first = len(states) + 1
        outs = {step: tmp_path / f"step{step}" for step in range(first, first + batch)}
        for out in outs.values():
            shutil.copytree(template, out, symlinks=True)
        children = {step: _render_killed_at(step, out) for step, out in outs.items()}
        for step, pid in children.items():
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            state = _whole(outs[step] / "tcp")
            assert state in (old, new), f"killed at step {step}: DIR/tcp is neither the old nor the new render"
            if code == 0:  # the render ended before this step: it is whole and new, and left nothing
                assert state == new and _temps(outs[step]) == []
                finished = True
            else:
                assert code == KILLED
                states[step] = state == new
    # Killed at every step from first to last: before the swap the old render, after it the new one.
    steps = sorted(states)
    assert len(steps) > 20 and steps == list(range(1, len(steps) + 1))
    flags = [states[s] for s in steps]
    assert flags[0] is False and flags[-1] is True and flags == sorted(flags)
    # The next render over what a kill left (before, and after the swap) removes it.
    for step in (steps[len(steps) // 2], steps[-1]):
        out = tmp_path / f"step{step}"
        assert _temps(out)
        write(_old(), out)
        assert _temps(out) == [] and _whole(out / "tcp") == old


def test_the_two_renames_stand_in_where_there_is_no_atomic_exchange(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "renameat2", lambda: None)
    assert writer.exchange(tmp_path, tmp_path) is False
    out, _, new = _populated(tmp_path)
    write(_new(), out)
    assert _whole(out / "tcp") == new and _temps(out) == []


@pytest.mark.parametrize("atomic", [True, False], ids=["exchange", "two renames"])
def test_what_appears_while_the_render_is_written_is_refused_and_the_swap_undone(
    atomic: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, old, _ = _populated(tmp_path)
    if not atomic:
        monkeypatch.setattr(writer, "renameat2", lambda: None)
    build = writer.build_folder

    def build_while_the_user_edits(*args: Any) -> Path:
        temp = build(*args)
        (out / "tcp" / "proj" / "notes.txt").write_text("mine")  # after the first check, before the swap
        return temp

    monkeypatch.setattr(writer, "build_folder", build_while_the_user_edits)
    with pytest.raises(WriteError, match="notes.txt was not written by"):
        write(_new(), out)
    assert (out / "tcp" / "proj" / "notes.txt").read_text() == "mine"
    (out / "tcp" / "proj" / "notes.txt").unlink()
    assert _whole(out / "tcp") == old and _temps(out) == []


@pytest.mark.skipif(not LINUX, reason="renameat2 is Linux's")
def test_exchange_swaps_two_folders_in_one_step(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    (tmp_path / "b").mkdir()
    assert writer.exchange(tmp_path / "a", tmp_path / "b") is True
    assert (tmp_path / "b" / "x").read_text() == "a" and not any((tmp_path / "a").iterdir())


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_the_temporary_folders_of_interrupted_runs_are_removed_and_only_theirs(tmp_path: Path) -> None:
    out, _, new = _populated(tmp_path)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    stale = out / f".tcp{TEMP}{_dead_pid()}-0000"
    (stale / "proj").mkdir(parents=True)
    (stale / "proj" / "half.yaml").write_text("kind: Half")
    (stale / "link").symlink_to(precious)  # removing the stale folder removes the link, never what it points to
    live = out / f".tcp{TEMP}{os.getppid()}-1111"  # a render still writing, in another process
    live.mkdir()
    other = out / f".other{TEMP}{_dead_pid()}-2222"  # another stack's: its own render removes it
    other.mkdir()
    zombie = os.fork()  # a killed render's worker that nobody reaped: it writes nothing any more
    if zombie == 0:  # pragma: no cover (the child)
        os._exit(0)
    while Path(f"/proc/{zombie}").exists() and "Z" not in Path(f"/proc/{zombie}/stat").read_text().rsplit(")", 1)[1][:3]:
        time.sleep(0.001)
    (out / f".tcp{TEMP}{zombie}-3333").mkdir()
    try:
        write(_new(), out)
    finally:
        os.waitpid(zombie, 0)
    assert _temps(out) == sorted([live.name, other.name])
    assert _whole(out / "tcp") == new and _tree(precious) == {"keep.txt": b"mine"}


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="needs the git checkout")
def test_a_stray_temporary_folder_is_never_committed() -> None:
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, check=False).returncode == 0

    assert ignored(f"rendered/.nerc{TEMP}1234-abcd/proj/configmap-x.yaml")
    assert ignored(f"rendered/.nerc{TEMP}1234-abcd")
    assert not ignored(f"rendered/nerc/{MANIFEST}") and not ignored("rendered/nerc/outputs.json")


# --- never through a symlink, never a file it did not write ----------------------------------------------


def _user_folder(tmp_path: Path, like: Path) -> Path:
    """A user's folder holding files named like the render's (a writer following a link would overwrite them)."""
    mine = tmp_path / "mine"
    shutil.copytree(like, mine)
    (mine / "notes.txt").write_text("my notes")
    return mine


LINKS = {
    # case: (path under DIR/tcp that becomes a link, whether it points to a folder)
    "namespace folder": ("proj", True),
    "the stack folder": ("", True),
    "a rendered file": ("outputs.json", False),
    "the manifest": (MANIFEST, False),
    "a dangling link": ("proj/new.yaml", None),
}


@pytest.mark.parametrize("case", LINKS)
def test_a_symlink_in_the_stack_folder_is_refused_and_not_written_through(case: str, tmp_path: Path) -> None:
    out, _, _ = _populated(tmp_path)
    rel, to_folder = LINKS[case]
    link = out / "tcp" / rel if rel else out / "tcp"
    if to_folder:
        target = _user_folder(tmp_path, link)
        shutil.rmtree(link)
    else:
        target = tmp_path / "mine.txt"
        if to_folder is False:
            target.write_bytes(link.read_bytes())
            link.unlink()
    link.symlink_to(target)
    before, theirs = _tree(out), _tree(target) if target.exists() else None
    mtimes = {p: p.stat().st_mtime_ns for p in [target, *target.rglob("*")]} if target.exists() else {}
    with pytest.raises(WriteError) as err:
        write(_new(), out)
    assert f"{link} is a symbolic link" in str(err.value) and "nothing was changed" in str(err.value)
    assert _tree(out) == before
    assert (_tree(target) if target.exists() else None) == theirs
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes


FOREIGN = {
    # case: (edit of DIR/tcp, the path the message names, a phrase of the message)
    "a file it did not write": (lambda d: (d / "proj" / "notes.txt").write_text("mine"), "proj/notes.txt", "not in .render-manifest"),
    "a folder it did not write": (lambda d: (d / "scratch").mkdir(), "scratch", "not in .render-manifest"),
    "an edited file": (lambda d: (d / "outputs.json").write_text("{}\n"), "outputs.json", "was changed after"),
    "a fifo": (lambda d: os.mkfifo(d / "proj" / "pipe"), "proj/pipe", "not in .render-manifest"),
    "no manifest": (lambda d: (d / MANIFEST).unlink(), "", "no .render-manifest"),
}


@pytest.mark.parametrize("case", FOREIGN)
def test_a_folder_holding_what_the_render_did_not_write_is_refused_unchanged(case: str, tmp_path: Path) -> None:
    out, _, _ = _populated(tmp_path)
    edit, rel, phrase = FOREIGN[case]
    edit(out / "tcp")
    before = _tree(out)
    with pytest.raises(WriteError) as err:
        write(_new(), out)
    named = out / "tcp" / rel if rel else out / "tcp"
    assert str(err.value).startswith(f"{named} ") and phrase in str(err.value) and "nothing was changed" in str(err.value)
    assert _tree(out) == before


def test_a_manifest_without_hashes_is_trusted_by_name_and_never_reaches_outside(tmp_path: Path) -> None:
    """The manifests committed before the hashes: one path per line. A line leaving the folder is no file of it."""
    out, _, new = _populated(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    listed = sorted(read_manifest((out / "tcp" / MANIFEST).read_text()))
    (out / "tcp" / MANIFEST).write_text("# old format\n" + "".join(f"{rel}\n" for rel in [*listed, "../../victim.txt", str(victim)]))
    write(_new(), out)
    assert _whole(out / "tcp") == new and victim.read_text() == "mine"


def test_render_out_empty_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tcp.yaml"
    config.write_text(yaml.safe_dump(fixtures.tcp()), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["render", "--config", str(config), "--out", ""]) == 2
    assert "--out '' names no folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tcp.yaml"]


# --- the process: signals, workers, the terminal's encoding ----------------------------------------------


def _loaded(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _caught(pid: int, signum: int) -> bool:
    """Whether the process has a handler for signum (the command's own are installed from its first import)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(mask >> (signum - 1) & 1)


def _group(pgid: int) -> list[str]:
    """The states of the processes left in a process group (Z: ended, not yet reaped)."""
    states = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            states.append(fields[0])
    return states


def _default_signals() -> None:  # a shell's background job starts with SIGINT ignored: a terminal's Ctrl-C is what is tested
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not LINUX or not hasattr(os, "fork"), reason="reads /proc; render forks its workers")
def test_render_all_interrupted_at_any_point_exits_quietly_and_leaves_each_stack_whole(tmp_path: Path) -> None:
    names = stacks.names()
    # What an uninterrupted render writes, made the same way (a process of its own), not from this test process's
    # cached renders: under pytest-xdist those may come from a worker whose earlier tests changed its state.
    expect = tmp_path / "expect-new"
    subprocess.run([sys.executable, "-m", "stacks", "render", "--all", "--out", str(expect)], cwd=ROOT, check=True, capture_output=True)
    new = {name: _whole(expect / name) for name in names}
    # (signal, when: "importing" = while the package imports pydantic (the handlers must be in place already),
    # "writing" = once a stack's temporary folder exists)
    cases = [(signal.SIGINT, "importing"), (signal.SIGTERM, "importing"), (signal.SIGINT, "writing")]
    cases.append((signal.SIGKILL, "writing"))  # to the whole process group: the command and its workers

    def prepared(out: Path) -> dict[str, bytes]:
        return {name: _whole(write(run(stacks.load(name), "platform"), out)) for name in names}  # a different render

    pending = []
    for i, case in enumerate(cases):
        out = tmp_path / f"out{i}"
        old = prepared(out)
        assert all(old[name] != new[name] for name in names)
        pending.append((case, (out, old)))
    runs = []
    # A render that ends before its signal could be sent (a loaded machine can keep this process from looking while a
    # render writes) tested nothing: it runs again, over its old render written anew, a few times at most.
    for _ in range(5):
        # Every folder is prepared before the first render starts: a render started while this process still prepares
        # the next folders could end (its imports cached) before the loop below looks at it.
        started = []
        for (signum, when), (out, old) in pending:
            argv = [sys.executable, "-m", "stacks", "render", "--all", "--out", str(out)]
            proc = subprocess.Popen(
                argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_default_signals
            )
            started.append((signum, when, out, old, proc))
        waiting, missed = list(started), []
        deadline = time.monotonic() + 120  # a hang guard: a loaded machine is slow to start the renders, never this slow
        while waiting and time.monotonic() < deadline:
            for item in list(waiting):
                signum, when, out, _, proc = item
                if proc.poll() is not None:
                    assert proc.returncode == 0, f"render ended (exit {proc.returncode}) before it could be sent {signum.name} at {when}"
                    proc.communicate()
                    waiting.remove(item)
                    missed.append(item)
                    continue
                if not (_loaded(proc.pid, "pydantic_core") if when == "importing" else _temps(out)):
                    continue
                if when == "importing":
                    assert _caught(proc.pid, signal.SIGTERM), "the quiet signal handlers come after the slow imports"
                (os.killpg if signum == signal.SIGKILL else os.kill)(proc.pid, signum)
                waiting.remove(item)
            time.sleep(0.001)
        assert not waiting, "the renders never reached the points to signal"
        runs += [item for item in started if item not in missed]
        pending = [((signum, when), (out, prepared(out))) for signum, when, out, _, _ in missed]
        if not pending:
            break
    assert not pending, f"renders ended before they could be signalled, five times over: {[c for c, _ in pending]}"
    for signum, when, out, old, proc in runs:
        _, err = proc.communicate(timeout=120)
        if signum == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL
            end = time.monotonic() + 5
            while set(_group(proc.pid)) - {"Z"} and time.monotonic() < end:
                time.sleep(0.01)
        else:
            assert (proc.returncode, err.decode()) == (128 + signum, "interrupted\n" if signum == signal.SIGINT else "terminated\n")
            assert _group(proc.pid) == [], f"{signum.name} at {when}: a render worker outlived the command"
        for name in names:
            state = _whole(out / name)
            # Old or new, whole: which one depends on how far the render got before the signal landed (on a loaded
            # machine a signal sent during the imports can arrive after a small stack is written).
            assert state in (old[name], new[name]), f"{signum.name} at {when}: {out / name} is neither the old nor the new render"
    # The next render over what the kill left: every stack new, no temporary folder left.
    out = next(out for signum, _, out, _, _ in runs if signum == signal.SIGKILL)
    subprocess.run([sys.executable, "-m", "stacks", "render", "--all", "--out", str(out)], cwd=ROOT, check=True, capture_output=True)
    for name in names:
        assert _whole(out / name) == new[name]
    assert _temps(out) == []


def test_output_the_terminal_cannot_encode_is_escaped(tmp_path: Path) -> None:
    data = fixtures.tcp()
    data["description"] = "Zürich \u2014 ✓"
    config = tmp_path / "tcp.yaml"
    config.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    environments = [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}]
    procs = []
    for extra in environments:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIOENCODING", "PYTHONUTF8"))} | extra
        argv = [sys.executable, "-m", "stacks", "config", "--config", str(config)]
        procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and err == b"", err.decode(errors="replace")
        assert b"description: Z\\xfcrich \\u2014 \\u2713" in out
