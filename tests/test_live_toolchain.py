"""The live tier's toolchain rules (live/toolchain.py, docs/live.md "What it builds, once"), without building anything:
a cached binary is trusted only as its build recorded it, a cache that cannot be made and a Go that cannot run are
reported as what they are, a run that waits for the build lock says who holds it, and in CI level 2 is required."""

from __future__ import annotations

import fcntl
import io
import os
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

from live import toolchain  # noqa: E402

ELF = b"\x7fELF" + b"\0" * 60


def built(tmp_path: Path, content: bytes = ELF, record: bool = True) -> Path:
    binary = tmp_path / "kubectl"
    binary.write_bytes(content)
    binary.chmod(0o755)
    if record:
        (tmp_path / "kubectl.sha256").write_text(toolchain._digest(binary) + "\n")
    return binary


def test_a_binary_its_build_recorded_is_trusted(tmp_path: Path) -> None:
    assert toolchain.cached(built(tmp_path))


@pytest.mark.parametrize(
    "spoil",
    [
        lambda b: b.write_bytes(b""),  # empty: a build killed before it wrote
        lambda b: b.write_bytes(ELF[:20]),  # truncated: the digest no longer matches
        lambda b: b.chmod(0o644),  # not executable
        lambda b: (b.parent / "kubectl.sha256").unlink(),  # no record: not a finished build of ours
        lambda b: b.write_bytes(b"#!/bin/sh\necho hi\n"),  # not a binary at all
    ],
    ids=["empty", "truncated", "not-executable", "unrecorded", "not-elf"],
)
def test_an_empty_truncated_or_foreign_binary_is_built_again(tmp_path: Path, spoil: object) -> None:
    binary = built(tmp_path)
    spoil(binary)  # type: ignore[operator]
    assert not toolchain.cached(binary)


def test_a_cache_that_cannot_be_made_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(toolchain, "CACHE", blocker / "cache")  # under a file: no folder can be made there
    if not toolchain.go_version():
        pytest.skip("no go on PATH")
    got = toolchain.ensure(("kubectl",))
    assert "cannot be made or written" in str(got["kubectl"]) and "GPU_TRAINING_LIVE_CACHE" in str(got["kubectl"])


def test_a_go_that_cannot_run_is_reported_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\necho 'go: downloading go1.99.0: toolchain not available' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GOTOOLCHAIN", "go1.99.0")
    with pytest.raises(toolchain.ToolchainError, match="GOTOOLCHAIN=go1.99.0.*toolchain not available"):
        toolchain.go_version()
    got = toolchain.ensure(("kubectl",))
    assert "cannot run" in str(got["kubectl"]) and "no `go` on PATH" not in str(got["kubectl"])


def test_a_run_that_waits_for_the_build_lock_says_who_holds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not toolchain.go_version():
        pytest.skip("no go on PATH")
    monkeypatch.setattr(toolchain, "CACHE", tmp_path)
    (tmp_path / ".lock").write_text("pid 4242 (python -m live.toolchain) since 12:00:00, building kubectl (log x)\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,sys,time; f=open(sys.argv[1],'a'); fcntl.flock(f, 2); print(1, flush=True); time.sleep(1.5)",
         str(tmp_path / ".lock")], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "1"
    monkeypatch.setattr(toolchain, "_ensure", lambda names, lock: {})
    err = io.StringIO()
    with redirect_stderr(err):
        toolchain.ensure(("kubectl",))
    holder.wait()
    assert "waiting for the toolchain cache" in err.getvalue() and "pid 4242" in err.getvalue() and "building kubectl" in err.getvalue()
    with open(tmp_path / ".lock") as f:  # the lock is free again, and its note cleared
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert f.read() == ""


@pytest.mark.parametrize(("ci", "required"), [("true", True), ("1", True), ("", False), ("false", False)])
def test_level_2_is_required_in_ci(ci: str, required: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", ci)
    assert (set(toolchain.LEVEL2) <= set(toolchain.required())) is required
    assert set(toolchain.LEVEL1) <= set(toolchain.required())
