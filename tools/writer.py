"""Write a Rendering to disk: DIR/<stack>/<namespace or _cluster>/<kind>-<name>.yaml and outputs.json.

Output is deterministic (same config, same bytes): objects are written with apiVersion, kind and
metadata first and every other key sorted; multi-line strings (the launcher source) as YAML blocks.

The writer owns what it wrote and nothing else: DIR/<stack>/.render-manifest lists its files with their
sha256. A render is written whole to a temporary folder beside the target and swapped in with one atomic
exchange (Linux renameat2), so an interruption at any moment, even SIGKILL, leaves the old render or the
new one, each whole and agreeing with its manifest. The folder it replaces must hold exactly what the
previous render wrote: a file not listed, a listed file whose content changed, or a symlink anywhere is
refused, naming it, and nothing is changed (a link is never written through). A manifest line without a
hash (written before they were) is trusted by name.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

import stacks

if TYPE_CHECKING:  # annotations only: `check` reads a committed render through tools/diff.py and never renders
    from tools.render import Recorded, Rendering

MANIFEST = ".render-manifest"
"""The list `python -m stacks render` keeps of the files it wrote in a stack's folder; not an object."""

HEAD = ("apiVersion", "kind", "metadata")


def canonical(obj: Any, top: bool = False) -> Any:
    if isinstance(obj, dict):
        keys = [k for k in HEAD if k in obj] if top else []
        keys += sorted(k for k in obj if k not in keys)
        return {k: canonical(obj[k]) for k in keys}
    if isinstance(obj, list):
        return [canonical(v) for v in obj]
    return obj


# libyaml's emitter where PyYAML has it: the pure-Python one spends most of a render on the
# launcher source in every ConfigMap. Both write the same bytes.
_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[valid-type,misc]
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def to_yaml(obj: dict[str, Any]) -> str:
    return yaml.dump(canonical(obj, top=True), Dumper=_Dumper, sort_keys=False, width=4096, allow_unicode=True)


FILE_NAME_MAX = 255  # bytes of a file name (Linux NAME_MAX)


def relative_path(rec: Recorded) -> Path:
    """`<namespace or _cluster>/[patch-]<kind>-<name>.yaml`. A file name is not an object name: an object may be named
    with 253 characters, which with its kind exceeds what a file name holds, so a name that would is cut and carries
    a short hash of the whole name (unique, the same on every render); every shorter name is kept as it is."""
    obj = rec.object
    meta = obj.get("metadata") or {}
    folder = meta.get("namespace") or "_cluster"
    head = ("patch-" if rec.is_patch else "") + f"{obj['kind'].lower()}-"
    name = str(meta.get("name", rec.name)).replace(":", "_")
    if len(f"{head}{name}.yaml".encode()) > FILE_NAME_MAX:
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        room = FILE_NAME_MAX - len(f"{head}-{digest}.yaml".encode())
        name = f"{name.encode()[:room].decode(errors='ignore')}-{digest}"
    return Path(folder) / f"{head}{name}.yaml"


def document(rec: Recorded) -> str:
    head = "# server-side apply patch of an existing object: only these fields are managed\n" if rec.is_patch else ""
    return head + to_yaml(rec.object)


def outputs_json(outputs: dict[str, Any]) -> str:
    return json.dumps(outputs, indent=2, sort_keys=True) + "\n"


class WriteError(Exception):
    """The output folder cannot be written; the message names the path and the fix."""


# --- ownership: what DIR/<stack>/ may hold for a render to replace it -----------------------------------

_HASHED = re.compile(r"([0-9a-f]{64})  (.+)")
_HEADER = "# files written by `python -m stacks render` and their sha256; it replaces the folder only while they are unchanged\n"


def manifest_text(files: dict[str, bytes]) -> str:
    """The manifest of a stack folder holding these files (relative POSIX path -> content): one
    `sha256  path` line per file, the format of `sha256sum`."""
    return _HEADER + "".join(f"{hashlib.sha256(data).hexdigest()}  {rel}\n" for rel, data in sorted(files.items()))


def read_manifest(text: str) -> dict[str, str | None]:
    """The files a manifest lists and their sha256; None for a line without one (a manifest written
    before the hashes were), which is trusted by name only."""
    listed: dict[str, str | None] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        hashed = _HASHED.fullmatch(line)
        listed[hashed[2] if hashed else line] = hashed[1] if hashed else None
    return listed


MAX_READ = stacks.RENDERED_LIMITS.max_bytes
"""What the writer reads back of a file (the manifest, a file it hashes): as much as any reader of a render takes."""


def _read(path: Path) -> bytes | None:
    """A file's bytes, never through a symlink (ELOOP if the path became one); None past MAX_READ, which no file
    a render wrote reaches."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_READ + 1)
    return data if len(data) <= MAX_READ else None


def _walk(folder: Path, rel: str = "") -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every entry under folder (relative POSIX path, entry), sorted, never following a symlink."""
    with os.scandir(folder / rel if rel else folder) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        path = f"{rel}/{entry.name}" if rel else entry.name
        yield path, entry
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(folder, path)


def _check(target: Path, shown: Path | None = None) -> None:
    """Refuse (WriteError) unless `target` is absent, an empty folder, or a folder holding exactly what
    a render wrote: regular files its manifest lists, unchanged (by sha256), and their folders.
    Reads only. `shown` is the path the messages name (the folder's place before a swap)."""
    shown = shown or target
    unchanged = "nothing was changed"
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise WriteError(_link(shown))
    if not stat.S_ISDIR(mode):
        raise WriteError(f"{shown} is not a folder: give --out a folder (the stack's files go to DIR/{shown.name}/)")
    entries = list(_walk(target))
    links = [rel for rel, entry in entries if entry.is_symlink()]
    if links:
        raise WriteError(_link(shown / links[0], len(links) - 1))
    manifest = next((entry for rel, entry in entries if rel == MANIFEST), None)
    if manifest is None or not manifest.is_file(follow_symlinks=False):
        if entries:
            raise WriteError(
                f"{shown} is not empty and was not written by `python -m stacks render` (no {MANIFEST}): {unchanged}. "
                "Choose another --out folder, or empty this one yourself"
            )
        return
    text = _read(target / MANIFEST)
    if text is None:
        raise WriteError(f"{shown / MANIFEST} is larger than a render writes ({MAX_READ} bytes): {unchanged}. Delete the folder yourself")
    listed = read_manifest(text.decode("utf-8", errors="replace"))
    folders = {str(PurePosixPath(rel).parent) for rel in listed} - {"."}
    folders |= {str(parent) for f in folders for parent in PurePosixPath(f).parents} - {"."}
    changed, foreign = [], []
    for rel, entry in entries:
        if rel == MANIFEST:
            continue
        if entry.is_dir(follow_symlinks=False):
            if rel not in folders:
                foreign.append(rel)
        elif not entry.is_file(follow_symlinks=False) or rel not in listed:
            foreign.append(rel)
        elif (digest := listed[rel]) is not None and ((data := _read(target / rel)) is None or hashlib.sha256(data).hexdigest() != digest):
            changed.append(rel)  # a file past MAX_READ is not one the render wrote
    more = len(changed) + len(foreign) - 1
    others = f" ({more} other path{'s' * (more > 1)} too)" if more > 0 else ""
    fix = f"move what you want to keep out of {shown}/ (a render replaces the whole folder), then render again"
    if foreign:
        raise WriteError(
            f"{shown / foreign[0]} was not written by `python -m stacks render` (it is not in {MANIFEST}){others}: {unchanged}. "
            f"To render here, {fix}"
        )
    if changed:
        raise WriteError(
            f"{shown / changed[0]} was changed after `python -m stacks render` wrote it (its sha256 is not the one in "
            f"{MANIFEST}){others}: {unchanged}. To render here, {fix}; or delete the file to drop the edit"
        )


def _link(path: Path, more: int = 0) -> str:
    others = f" ({more} other link{'s' * (more > 1)} too)" if more > 0 else ""
    return (
        f"{path} is a symbolic link{others}: `python -m stacks render` never writes through a link nor touches what it "
        f"points to, so nothing was changed. Remove the link (`rm {path}` removes the link only, not what it points to), "
        "or give --out a folder without links"
    )


# --- the swap: build the render beside the target, then exchange the two folders in one step -------------

TEMP = ".render-tmp-"
"""A folder `DIR/.<stack>.render-tmp-<pid>-<random>` holds a render being written, or the previous one being
removed; one left by an interrupted run is removed by the next render of that stack."""

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _renameat2() -> Any:
    """libc's renameat2 on Linux (glibc 2.28+, musl), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths atomically (renameat2 RENAME_EXCHANGE): at every moment each name holds one
    whole folder. False where the system or the file system cannot, and nothing was done."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _temp(out: Path, name: str) -> Path:
    return out / f".{name}{TEMP}{os.getpid()}-{secrets.token_hex(4)}"


def _alive(pid: int) -> bool:
    """Whether the process still runs: not gone, and not a zombie (ended, unreaped, as a killed render's
    workers are in a container whose init reaps nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _remove(path: Path) -> None:
    """Remove one of the writer's temporary folders: shutil.rmtree unlinks a symlink inside, never follows it."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _remove_stale(out: Path, name: str) -> None:
    """Remove the temporary folders of this stack that earlier interrupted runs left (their process is gone)."""
    prefix = f".{name}{TEMP}"
    with os.scandir(out) as it:
        stale = [Path(e.path) for e in it if e.name.startswith(prefix)]
    for path in stale:
        pid = path.name[len(prefix) :].split("-")[0]
        if not (pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid))):
            _remove(path)


def _build(out: Path, name: str, files: dict[str, bytes]) -> Path:
    """A new temporary folder in `out` holding the files and, last, their manifest."""
    temp = _temp(out, name)
    os.mkdir(temp)
    try:
        made = {temp}
        for rel, data in sorted(files.items()):
            path = temp / rel
            if path.parent not in made:
                path.parent.mkdir(parents=True, exist_ok=True)
                made.add(path.parent)
            with open(path, "xb") as f:  # O_EXCL: never through a link
                f.write(data)
        with open(temp / MANIFEST, "xb") as f:
            f.write(manifest_text(files).encode("utf-8"))
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return temp


def _swap(a: Path, b: Path, spare: Path) -> None:
    """Exchange the folders at a and b: atomically, or else by two renames through `spare` (an
    interruption between them leaves b missing, its folder at `spare`)."""
    if not exchange(a, b):
        os.rename(b, spare)
        try:
            os.rename(a, b)
        except BaseException:
            os.rename(spare, b)
            raise
        os.rename(spare, a)


def _swap_in(temp: Path, target: Path) -> None:
    """Put the folder `temp` at `target`; the folder that was there is checked again and removed. On
    failure the target is as it was and the temporary folder is gone."""
    try:
        if not os.path.lexists(target):
            os.rename(temp, target)  # atomic; fails rather than replace a folder that appeared meanwhile with files
            return
        _swap(temp, target, _temp(target.parent, target.name))
    except BaseException:
        _remove(temp)  # the new render, not swapped in
        raise
    # `temp` now holds the previous folder. Checked again where nothing reaches it any more: what was added
    # or edited since the first check is refused too, and the swap undone.
    try:
        _check(temp, shown=target)
    except BaseException:
        _swap(temp, target, _temp(target.parent, target.name))
        _remove(temp)
        raise
    _remove(temp)


def write(rendering: Rendering, out: Path) -> Path:
    """Replace DIR/<stack>/ with the rendering as a whole; returns that folder. Refuses, changing nothing, a
    folder holding anything the previous render did not write, or any symlink."""
    name = rendering.config.name
    target = out / name
    texts: dict[Path, str] = {relative_path(rec): document(rec) for rec in rendering.resources}
    texts[Path("outputs.json")] = outputs_json(rendering.outputs)
    files = {rel.as_posix(): text.encode("utf-8") for rel, text in texts.items()}
    try:
        if os.path.lexists(out) and not out.is_dir():
            raise WriteError(f"{out} is not a folder: give --out a folder (each stack's files go to DIR/<stack>/)")
        _check(target)
        out.mkdir(parents=True, exist_ok=True)
        _remove_stale(out, name)
        _swap_in(_build(out, name, files), target)
    except OSError as err:
        where = err.filename or target
        raise WriteError(f"{where}: cannot write the rendering: {err.strerror or err} (choose a writable --out folder)") from None
    return target
