"""Write a Rendering to DIR/<stack>/<namespace or _cluster>/<kind>-<name>.yaml and outputs.json, the same bytes for the
same config. The writer replaces only a folder holding exactly what it wrote (.render-manifest: the files and their
sha256), never writes through a symlink, and swaps the new render in atomically (renameat2): a kill leaves one whole."""

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
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

import stacks

if TYPE_CHECKING:  # annotations only: `check` imports this module through tools/diff.py and never renders
    from tools.render import Recorded, Rendering

MANIFEST = ".render-manifest"
HEAD = ("apiVersion", "kind", "metadata")


def canonical(obj: Any, top: bool = False) -> Any:
    if isinstance(obj, dict):
        keys = [k for k in HEAD if k in obj] if top else []
        keys += sorted(k for k in obj if k not in keys)
        return {k: canonical(obj[k]) for k in keys}
    return [canonical(v) for v in obj] if isinstance(obj, list) else obj


# libyaml's emitter where PyYAML has it (the same bytes; the pure-Python one spends most of a render on the launcher).
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    pass


_Dumper.add_representer(
    str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)
)


FILE_NAME_MAX = 255  # bytes of a file name (Linux NAME_MAX)


def relative_path(rec: "Recorded") -> Path:
    """`<namespace or _cluster>/[patch-]<kind>-<name>.yaml`; a name too long is cut and carries a hash of the whole."""
    obj = rec.object
    meta = obj.get("metadata") or {}
    head = ("patch-" if rec.is_patch else "") + f"{obj['kind'].lower()}-"
    name = str(meta.get("name", rec.name)).replace(":", "_")
    if len(f"{head}{name}.yaml".encode()) > FILE_NAME_MAX:
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        room = FILE_NAME_MAX - len(f"{head}-{digest}.yaml".encode())
        name = f"{name.encode()[:room].decode(errors='ignore')}-{digest}"
    return Path(meta.get("namespace") or "_cluster") / f"{head}{name}.yaml"


def document(rec: "Recorded") -> str:
    head = "# server-side apply patch of an existing object: only these fields are managed\n" if rec.is_patch else ""
    return head + yaml.dump(canonical(rec.object, top=True), Dumper=_Dumper, sort_keys=False, width=4096, allow_unicode=True)


class WriteError(stacks.ConfigError):
    """The output folder cannot be written; the message names the path and the fix."""


_HASHED = re.compile(r"([0-9a-f]{64})  (.+)")
_HEADER = "# files written by `python -m stacks render` and their sha256; it replaces the folder only while they are unchanged\n"
MAX_READ = stacks.RENDERED_LIMITS.max_bytes  # what the writer reads back of a file: as much as any reader of a render


def read_manifest(text: str) -> dict[str, str | None]:
    """The files a manifest lists and their sha256 (None: a line without one, trusted by name)."""
    lines = [(line, _HASHED.fullmatch(line)) for line in text.splitlines() if line and not line.startswith("#")]
    return {hashed[2] if hashed else line: hashed[1] if hashed else None for line, hashed in lines}


def _read(path: Path) -> bytes | None:
    """A file's bytes, never through a symlink; None past MAX_READ, which no file a render wrote reaches."""
    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as f:
        data = f.read(MAX_READ + 1)
    return data if len(data) <= MAX_READ else None


def _not_written(target: Path, shown: Path, entries: dict[str, int]) -> tuple[list[str], list[str]]:
    """(the files changed since the render wrote them, the paths it did not write), by its manifest."""
    if (text := _read(target / MANIFEST)) is None:
        too_big = f"{shown / MANIFEST} is larger than a render writes ({MAX_READ} bytes)"
        raise WriteError(f"{too_big}: nothing was changed. Delete the folder yourself")
    listed = read_manifest(text.decode("utf-8", errors="replace"))
    folders = {str(parent) for rel in listed for parent in PurePosixPath(rel).parents} - {"."}
    changed, foreign = [], []
    for rel, mode in entries.items():
        if rel == MANIFEST:
            continue
        if rel not in (folders if stat.S_ISDIR(mode) else listed) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            foreign.append(rel)
        elif (
            stat.S_ISREG(mode)
            and (digest := listed[rel]) is not None
            and ((data := _read(target / rel)) is None or hashlib.sha256(data).hexdigest() != digest)
        ):
            changed.append(rel)
    return changed, foreign


def _check(target: Path, shown: Path | None = None) -> None:
    """Refuse unless `target` is absent, empty, or holds exactly what its manifest lists; messages name `shown`."""
    shown = shown or target
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise WriteError(_link(shown))
    if not stat.S_ISDIR(mode):
        raise WriteError(f"{shown} is not a folder: give --out a folder (the stack's files go to DIR/{shown.name}/)")
    # Every path under it (relative POSIX path: its lstat mode), sorted; rglob never follows a symlinked folder.
    entries = {p.relative_to(target).as_posix(): os.lstat(p).st_mode for p in sorted(target.rglob("*"))}
    if links := [rel for rel, mode in entries.items() if stat.S_ISLNK(mode)]:
        raise WriteError(_link(shown / links[0], len(links) - 1))
    if not stat.S_ISREG(entries.get(MANIFEST, 0)):
        if entries:
            raise WriteError(
                f"{shown} is not empty and was not written by `python -m stacks render` (no {MANIFEST}): nothing was changed. "
                "Choose another --out folder, or empty this one yourself"
            )
        return
    changed, foreign = _not_written(target, shown, entries)
    more = len(changed) + len(foreign) - 1
    others = f" ({more} other path{'s' * (more > 1)} too)" if more > 0 else ""
    fix = f"move what you want to keep out of {shown}/ (a render replaces the whole folder), then render again"
    if foreign:
        raise WriteError(
            f"{shown / foreign[0]} was not written by `python -m stacks render` (it is not in {MANIFEST}){others}: nothing was changed. "
            f"To render here, {fix}"
        )
    if changed:
        raise WriteError(
            f"{shown / changed[0]} was changed after `python -m stacks render` wrote it (its sha256 is not the one in "
            f"{MANIFEST}){others}: nothing was changed. To render here, {fix}; or delete the file to drop the edit"
        )


def _link(path: Path, more: int = 0) -> str:
    others = f" ({more} other link{'s' * (more > 1)} too)" if more > 0 else ""
    return (
        f"{path} is a symbolic link{others}: `python -m stacks render` never writes through a link nor touches what it "
        f"points to, so nothing was changed. Remove the link (`rm {path}` removes the link only, not what it points to), "
        "or give --out a folder without links"
    )


# `DIR/.<stack>.render-tmp-<pid>-<random>`: a render being written, or the old one being removed.
TEMP = ".render-tmp-"


@functools.cache
def renameat2() -> Any:
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
    """Swap two existing paths atomically (RENAME_EXCHANGE); False where the system or file system cannot."""
    if (fn := renameat2()) is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    if (err := ctypes.get_errno()) in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _temp(out: Path, name: str) -> Path:
    return out / f".{name}{TEMP}{os.getpid()}-{secrets.token_hex(4)}"


def _alive(pid: int) -> bool:
    """Whether the process still runs: not gone, nor a zombie (a killed render's worker where init reaps nothing)."""
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
    """Remove one of the writer's temporary folders (rmtree unlinks a symlink inside, never follows it)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _remove_stale(out: Path, name: str) -> None:
    """Remove the temporary folders of this stack that earlier interrupted runs left (their process is gone)."""
    prefix = f".{name}{TEMP}"
    for path in list(out.glob(f"{prefix}*")):  # a stack name holds no glob character
        pid = path.name[len(prefix) :].split("-")[0]
        if not (pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid))):
            _remove(path)


def build_folder(out: Path, name: str, files: dict[str, bytes]) -> Path:
    """A new temporary folder in `out` holding the files and, last, their manifest."""
    temp = _temp(out, name)
    os.mkdir(temp)
    manifest = _HEADER + "".join(f"{hashlib.sha256(data).hexdigest()}  {rel}\n" for rel, data in sorted(files.items()))  # sha256sum's
    try:
        for rel, data in [*sorted(files.items()), (MANIFEST, manifest.encode("utf-8"))]:
            (temp / rel).parent.mkdir(parents=True, exist_ok=True)
            with open(temp / rel, "xb") as f:  # O_EXCL: never through a link
                f.write(data)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return temp


def _swap(a: Path, b: Path) -> None:
    """Exchange the folders at a and b: atomically, or else by two renames through a spare name."""
    if not exchange(a, b):
        spare = _temp(b.parent, b.name)
        os.rename(b, spare)
        try:
            os.rename(a, b)
        except BaseException:
            os.rename(spare, b)
            raise
        os.rename(spare, a)


def _swap_in(temp: Path, target: Path) -> None:
    """Swap `temp` in at `target`, the old folder checked again where nothing reaches it (an edit since: swapped back)."""
    try:
        if not os.path.lexists(target):
            os.rename(temp, target)  # atomic; fails rather than replace a folder that appeared meanwhile with files
            return
        _swap(temp, target)
    except BaseException:
        _remove(temp)
        raise
    try:
        _check(temp, shown=target)
    except BaseException:
        _swap(temp, target)
        _remove(temp)
        raise
    _remove(temp)


def write(rendering: "Rendering", out: Path) -> Path:
    """Replace DIR/<stack>/ with the rendering as a whole; returns that folder."""
    name = rendering.config.name
    target = out / name
    files = {relative_path(rec).as_posix(): document(rec).encode("utf-8") for rec in rendering.resources}
    files["outputs.json"] = (json.dumps(rendering.outputs, indent=2, sort_keys=True) + "\n").encode("utf-8")
    try:
        if os.path.lexists(out) and not out.is_dir():
            raise WriteError(f"{out} is not a folder: give --out a folder (each stack's files go to DIR/<stack>/)")
        _check(target)
        out.mkdir(parents=True, exist_ok=True)
        _remove_stale(out, name)
        _swap_in(build_folder(out, name, files), target)
    except OSError as err:
        where = err.filename or target
        raise WriteError(f"{where}: cannot write the rendering: {err.strerror or err} (choose a writable --out folder)") from None
    return target
