"""Unpack a `git archive --format=tar` into a folder: what `check` compares with (clusters/ at a commit, stacks.load_committed)
and what the tests that follow the docs copy (the committed project).

tarfile's own guard, `extractall(filter="data")`, is in Python 3.11.4 and later only: on an earlier 3.11 (Debian 12's
python3 is 3.11.2) the keyword is a TypeError, and `check` could compare no stack with its commit. So the members are
written here, on every 3.11, with the same rule: folders, regular files, and symbolic links that stay inside the folder.
Anything else (an absolute path, a `..` that leaves the folder, a hard link, a device, a FIFO) is refused by name, and
nothing of the archive is written outside the folder. A git archive holds only folders, files and links; the rule is for
a repository whose history holds what it should not.
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
from pathlib import Path


class UnsafeMember(ValueError):
    """A member that would be written outside the folder, or is not a folder, file or link."""


def _relative(name: str) -> str:
    """The member's path relative to the folder, normalized; UnsafeMember when it is absolute or has a `..` (which a
    git archive never writes: with links already written, `d/../x` can lead anywhere)."""
    if posixpath.isabs(name) or ".." in name.split("/"):
        raise UnsafeMember(f"{name!r} is outside the folder (absolute, or climbing with '..')")
    return posixpath.normpath(name)


def unpack(archive: bytes, dest: Path) -> None:
    """Write the archive's folders, files and links into `dest` (created if need be). Each file's owner may execute
    it where the archive says so (a script stays a script); no other mode, owner or time is taken from the archive."""
    dest.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(dest)

    def inside(path: Path | str, name: str) -> None:
        # Where the path leads once the links written so far are followed: a link to "." and then a path through
        # it and ".." is inside by its letters and outside on the disk.
        real = os.path.realpath(path)
        if real != root and not real.startswith(root + os.sep):
            raise UnsafeMember(f"{name!r} leads outside the folder")

    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            path = _relative(member.name)
            if path == ".":
                continue
            target = dest / path
            inside(target.parent, member.name)
            if member.isdir():
                inside(target, member.name)
                target.mkdir(parents=True, exist_ok=True)
            elif member.isreg():
                inside(target, member.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None  # a regular file always has data
                with source:
                    target.write_bytes(source.read())
                target.chmod(0o755 if member.mode & 0o100 else 0o644)
            elif member.issym():
                if posixpath.isabs(member.linkname):
                    raise UnsafeMember(f"{member.name!r} links to {member.linkname!r}, outside the folder")
                inside(target.parent / member.linkname, member.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(member.linkname, target)
            else:
                raise UnsafeMember(f"{member.name!r} is not a folder, a file or a link")
