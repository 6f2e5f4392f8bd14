"""clusters/ at a commit, unpacked for `check` to compare with (stacks/_archive.py): on every Python 3.11, Debian 12's
3.11.2 included, whose tarfile has no extraction filters; and never a member outside the folder it is unpacked into."""

from __future__ import annotations

import io
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

import stacks
from cli.main import main
from config import project as project_folder
from stacks._archive import UnsafeMember, unpack
from tests.stacks.test_module_answers import GOOD


def git(cwd: Path, *args: str) -> bytes:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True).stdout


def committed(folder: Path) -> None:
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "the committed stacks"]):
        git(folder, *args)


def test_a_git_archive_is_unpacked_whole(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "helpers").mkdir(parents=True)
    (repo / "good.py").write_text("CONFIG = 1\n", encoding="utf-8")
    (repo / "helpers" / "common.py").write_text("X = 2\n", encoding="utf-8")
    (repo / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (repo / "run.sh").chmod(0o755)
    (repo / "shared.py").symlink_to("helpers/common.py")
    committed(repo)
    dest = tmp_path / "out"
    unpack(git(repo, "archive", "--format=tar", "HEAD"), dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == ["good.py", "helpers", "helpers/common.py", "run.sh", "shared.py"]
    assert (dest / "good.py").read_text(encoding="utf-8") == "CONFIG = 1\n"
    assert (dest / "shared.py").is_symlink() and (dest / "shared.py").read_text(encoding="utf-8") == "X = 2\n"
    assert (dest / "run.sh").stat().st_mode & stat.S_IXUSR and not (dest / "good.py").stat().st_mode & stat.S_IXUSR


def _file(name: str, data: bytes = b"x") -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    return add


def _member(name: str, kind: bytes, linkname: str = "") -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = linkname
        tar.addfile(info)

    return add


# (what the archive holds, in order; the member the refusal names)
HOSTILE = {
    "an absolute path": ([_file("/tmp/evil.py")], "/tmp/evil.py"),
    "a path that climbs out": ([_file("../evil.py")], "../evil.py"),
    "a path that climbs out further down": ([_file("a/../../evil.py")], "a/../../evil.py"),
    "a link to an absolute path": ([_member("l", tarfile.SYMTYPE, "/etc")], "l"),
    "a link that climbs out": ([_member("l", tarfile.SYMTYPE, "../..")], "l"),
    # inside by its letters, outside on the disk: x is the folder itself, so x/.. is its parent
    "a link through a link to the folder": (
        [_member("x", tarfile.SYMTYPE, "."), _member("y", tarfile.SYMTYPE, "x/.."), _file("y/evil.py")],
        "y",
    ),
    "a file written through a link that leaves": ([_member("d", tarfile.SYMTYPE, "."), _file("d/../evil.py")], "d/../evil.py"),
    "a hard link": ([_file("a.py"), _member("b.py", tarfile.LNKTYPE, "a.py")], "b.py"),
    "a FIFO": ([_member("f", tarfile.FIFOTYPE)], "f"),
    "a device": ([_member("dev", tarfile.CHRTYPE)], "dev"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_member_outside_the_folder_or_not_a_file_is_refused_by_name(case: str, tmp_path: Path) -> None:
    members, named = HOSTILE[case]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for add in members:
            add(tar)
    dest = tmp_path / "deep" / "out"
    with pytest.raises(UnsafeMember, match=rf"^{named!r} "):
        unpack(buffer.getvalue(), dest)
    outside = [p for p in tmp_path.rglob("*") if not str(p).startswith(str(dest)) and p.is_file()]
    assert outside == [] and not Path("/tmp/evil.py").exists(), outside


def _tarfile_of_python_3_11_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """tarfile as Python 3.11.0 to 3.11.3 have it: no extraction filters, and `filter=` is a TypeError."""
    for name in ("data_filter", "tar_filter", "fully_trusted_filter", "FilterError"):
        monkeypatch.delattr(tarfile, name, raising=False)
    for method in ("extractall", "extract"):
        original = getattr(tarfile.TarFile, method)

        def without_filters(self: tarfile.TarFile, *args: object, _original: Callable[..., object] = original, **kwargs: object) -> object:
            if "filter" in kwargs:
                raise TypeError("extractall() got an unexpected keyword argument 'filter'")
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(tarfile.TarFile, method, without_filters)


@pytest.mark.parametrize("tarfile_of", ["this Python", "Python 3.11.2"])
def test_check_marks_new_against_the_commit_on_every_python_3_11(
    tarfile_of: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: on Debian 12's python3 every `check` said "the stack at HEAD cannot be checked to compare with (TypeError)"
    and marked nothing new."""
    if tarfile_of != "this Python":
        _tarfile_of_python_3_11_2(monkeypatch)
    (tmp_path / stacks.CLUSTERS).mkdir()
    module = tmp_path / stacks.CLUSTERS / "good.py"
    module.write_text(GOOD.format(name="good"), encoding="utf-8")
    committed(tmp_path)
    module.write_text(GOOD.format(name="good").replace('description="x"', 'description="x\\u200b"'), encoding="utf-8")
    monkeypatch.setattr(project_folder, "ROOT", tmp_path)
    monkeypatch.setattr(stacks, "_LOADED", {})
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.good", raising=False)
    assert main(["check", "good"]) == 0
    out = capsys.readouterr().out
    assert "cannot be checked to compare with" not in out, out
    assert "good: new warning hidden-characters description (clusters/good.py:3)" in out, out


def test_a_commit_whose_clusters_link_outside_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    (project / stacks.CLUSTERS).mkdir(parents=True)
    (project / stacks.CLUSTERS / "good.py").write_text(GOOD.format(name="good"), encoding="utf-8")
    (project / stacks.CLUSTERS / "out").symlink_to("../..")
    committed(project)
    edited = GOOD.format(name="good").replace('description="x"', 'description="x\\u200b"')  # a finding to mark new, or not
    (project / stacks.CLUSTERS / "good.py").write_text(edited, encoding="utf-8")
    monkeypatch.setattr(project_folder, "ROOT", project)
    monkeypatch.setattr(stacks, "_LOADED", {})
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.good", raising=False)
    with pytest.raises(stacks.ConfigError, match=r"^clusters/ at HEAD cannot be unpacked: 'out' leads outside the folder$"):
        stacks.load_committed("good", "HEAD")
    assert main(["check", "good"]) == 0
    out = capsys.readouterr().out
    said = "good: nothing is marked new: the stack at HEAD cannot be checked to compare with (clusters/ at HEAD cannot be unpacked"
    assert said in out, out
