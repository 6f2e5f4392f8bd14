"""Debian's packages the real nodes run on and their image is made of, unpacked into the tier's cache.

    python -m live.packages      the tier's install step (make test-live runs it): download, unpack, print where

The nodes' runtime (containerd 1.6, runc 1.1, the CNI plugins) and the image's userland (Debian's python3.11 and its
libraries, bash, busybox), each set in a folder of its own, come from the Debian release the machine runs, by name,
with `apt-get download` (the machine's own apt sources and keys), and are unpacked with `dpkg-deb -x` into
CACHE/debian-<digest>/root, where the digest covers each package's name and version. Nothing is installed on the
machine: no package database entry, no service started, nothing under /usr; a second run finds the folder again.
apt's lists are read as they are; where they do not know a package, `apt-get update` runs once first.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from live import toolchain
from live.toolchain import CACHE

RUNTIME = ("containerd", "runc", "containernetworking-plugins")
# The image's userland: python3.11 with the libraries its standard library links, bash (the stacks' scripts are bash),
# busybox for the rest of a shell's tools, and the C++ runtime torch links.
IMAGE = (
    "busybox-static", "bash", "libtinfo6", "libc6", "libgcc-s1", "libstdc++6",
    "python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", "media-types",
    "libexpat1", "zlib1g", "libssl3", "libffi8", "libbz2-1.0", "liblzma5", "libsqlite3-0", "libuuid1",
    "libncursesw6", "libreadline8", "readline-common", "libcrypt1", "libdb5.3", "libgdbm6", "libgdbm-compat4",
    "libnsl2", "libtirpc3", "libtirpc-common", "libgssapi-krb5-2", "libkrb5-3", "libk5crypto3", "libcom-err2",
    "libkrb5support0", "libkeyutils1",
)  # fmt: skip
APT_TIMEOUT = 600


class PackagesError(Exception):
    """Why the packages cannot be had here (no apt, a package apt does not know), in words that say the fix."""


def _apt(args: list[str], cwd: Path | None = None) -> str:
    if shutil.which(args[0]) is None:
        raise PackagesError(f"no `{args[0]}` on PATH: the real nodes' runtime comes from Debian's packages (a Debian machine)")
    run = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False, timeout=APT_TIMEOUT)
    if run.returncode != 0:
        said = " | ".join(run.stderr.strip().splitlines()[-3:]) or f"exit {run.returncode}"
        raise PackagesError(f"`{' '.join(args[:3])} ...` failed: {said}")
    return run.stdout


def versions(names: tuple[str, ...]) -> dict[str, str]:
    """The version apt would fetch of each package (its candidate), updating apt's lists once if one is unknown."""

    def candidates() -> dict[str, str]:
        out, name = {}, ""
        for line in _apt(["apt-cache", "policy", *names]).splitlines():
            if line and not line.startswith(" "):
                name = line.rstrip(":")
            elif line.strip().startswith("Candidate:"):
                value = line.split(":", 1)[1].strip()
                if value != "(none)":
                    out[name] = value
        return out

    found = candidates()
    if set(found) != set(names):
        _apt(["apt-get", "update", "-qq"])
        found = candidates()
    missing = sorted(set(names) - set(found))
    if missing:
        raise PackagesError(f"apt knows no candidate for {', '.join(missing)} (this machine's Debian release and sources)")
    return found


def root(names: tuple[str, ...]) -> Path:
    """The folder the packages are unpacked into (usr/bin/containerd, usr/sbin/runc, usr/lib/cni/, usr/bin/python3.11, ...),
    downloading and unpacking them the first time."""
    pinned = versions(names)
    digest = hashlib.sha256("\n".join(f"{n}={pinned[n]}" for n in sorted(pinned)).encode()).hexdigest()[:16]
    folder = CACHE / f"debian-{digest}"
    if (folder / ".done").is_file():
        return folder / "root"
    CACHE.mkdir(parents=True, exist_ok=True)
    work = CACHE / f".debian-{digest}-{os.getpid()}"  # renamed into place once whole: a half-unpacked folder is never found
    debs, tree = work / "debs", work / "root"
    try:
        debs.mkdir(parents=True)
        # As root, apt's download sandbox user cannot write here: the download is done as root (it says so otherwise).
        _apt(["apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root", *(f"{n}={pinned[n]}" for n in sorted(pinned))], cwd=debs)
        for deb in sorted(debs.glob("*.deb")):
            _apt(["dpkg-deb", "-x", str(deb), str(tree)])
        shutil.rmtree(debs)
        (work / "versions").write_text("".join(f"{n} {pinned[n]}\n" for n in sorted(pinned)))
        (work / ".done").write_text("")
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder / "root"


if __name__ == "__main__":
    try:
        for names in (RUNTIME, IMAGE):
            print(root(names))
    except PackagesError as err:  # the real nodes' tests skip with it, or fail in CI (live/tests/conftest.py)
        print(f"live: the real nodes' packages cannot be had: {err}", file=sys.stderr)
        sys.exit(1 if "kubelet" in toolchain.required() else 0)
