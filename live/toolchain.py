"""The live tier's toolchain: real binaries built from the Go module proxy, once, cached outside the clone.

Each module under live/toolchain/ pins what it builds (go.mod and go.sum, committed): the control plane
(etcd, kube-apiserver, kube-controller-manager, kubectl), the Pulumi CLI, the kubernetes provider plugin, and
the simulated cluster (kube-scheduler from the control plane's module, kwok and Kueue from their own), the
SR-IOV network operator's SriovNetwork controller with its CRDs and NAD templates (live/sriov.py), OpenShift's
SCC admission plugin in a webhook (live/scc.py; from the control plane's module), and the real nodes' kubelet (from the
control plane's module) and CoreDNS (live/realnodes.py). A binary lives in
CACHE/<module>-<key>/, where the key is a digest of the module's files, the Go version and how each of its
binaries is built (package and -ldflags), so a changed pin or stamp builds anew and an unchanged one is found
again by the next run, in CI as on a laptop. `python -m live.toolchain` builds everything and prints where; the live tests call `ensure()`.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
MODULES = HERE / "toolchain"
CACHE = Path(
    os.environ.get("GPU_TRAINING_LIVE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu-training-live"
)

# The releases the modules pin, for -ldflags (a binary built from a module reports no version of its own).
PULUMI_VERSION = "3.259.0"
# The provider is built from the newest commit of pulumi-kubernetes whose module the proxy serves (docs/live.md
# says why that is not 4.34.2's). It runs as the ambient plugin on PATH, whatever version the SDK asks for.
PROVIDER_COMMIT = "f47bc2d6f199"
PROVIDER_VERSION = "4.25.0"
# The Kubernetes release live/toolchain/k8s pins. A binary built from a module reports v0.0.0-master+$Format:%H$
# unless stamped, and controllers that read the server's version (Kueue does) refuse that: the control plane's
# binaries carry the release in both packages that report it (the server's /version, and kubectl's client half).
K8S_VERSION = "1.34.4"
K8S_LDFLAGS = " ".join(
    f"-X {package}.{var}={value}"
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    for var, value in (("gitVersion", f"v{K8S_VERSION}"), ("gitMajor", K8S_VERSION.split(".")[0]),
                       ("gitMinor", K8S_VERSION.split(".")[1]), ("gitTreeState", "clean"))
)  # fmt: skip


# The Kueue release live/toolchain/kueue pins; its manager logs it at start (unstamped it says v0.0.0-main).
KUEUE_VERSION = "0.17.0"


@dataclass(frozen=True)
class Binary:
    name: str
    module: str
    package: str
    ldflags: str = ""


BINARIES = [
    Binary("etcd", "k8s", "./etcd"),
    Binary("kube-apiserver", "k8s", "k8s.io/kubernetes/cmd/kube-apiserver", K8S_LDFLAGS),
    Binary("kube-controller-manager", "k8s", "k8s.io/kubernetes/cmd/kube-controller-manager", K8S_LDFLAGS),
    Binary("kubectl", "k8s", "k8s.io/kubernetes/cmd/kubectl", K8S_LDFLAGS),
    Binary("kube-scheduler", "k8s", "k8s.io/kubernetes/cmd/kube-scheduler", K8S_LDFLAGS),
    Binary("kubelet", "k8s", "k8s.io/kubernetes/cmd/kubelet", K8S_LDFLAGS),  # the real nodes' (live/realnodes.py)
    # OpenShift's SCC admission plugin (github.com/openshift/apiserver-library-go) in a webhook main of ours
    # (live/toolchain/k8s/sccadmission/main.go): built from the control plane's module, it shares its k8s v1.34.4 build.
    Binary("scc-admission", "k8s", "./sccadmission"),
    Binary("kwok", "kwok", "sigs.k8s.io/kwok/cmd/kwok"),  # reports its release itself (pkg/consts.Version)
    # The real nodes' cluster DNS: CoreDNS's server with the plugins the tier uses, in a main of ours (live/toolchain/coredns).
    Binary("coredns", "coredns", "."),  # reports its release itself (coremain.CoreVersion)
    # The operator's own SriovNetwork and SriovIBNetwork reconcilers in a small main of ours (live/toolchain/sriov/main.go).
    Binary("sriov-network-controller", "sriov", "."),
    Binary("kueue", "kueue", "sigs.k8s.io/kueue/cmd/kueue", f"-X sigs.k8s.io/kueue/pkg/version.GitVersion=v{KUEUE_VERSION}"),
    Binary(
        "pulumi",
        "pulumi",
        "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
        f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v{PULUMI_VERSION}",
    ),
    Binary(
        "pulumi-resource-kubernetes",
        "provider",
        ".",
        f"-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version={PROVIDER_VERSION}",
    ),
]
LEVEL1 = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")
LEVEL2 = ("pulumi", "pulumi-resource-kubernetes")
# The simulated cluster (docs/live.md): the real scheduler, and kwok as the kubelet of the stacks' fake nodes.
LEVEL3 = ("kube-scheduler", "kwok")
# The SR-IOV network operator's controller (docs/live.md "SR-IOV operator"), beside it its CRDs and NAD templates.
SRIOV = ("sriov-network-controller",)
SRIOV_MODULE = "github.com/k8snetworkplumbingwg/sriov-network-operator"
# What the controller needs from the operator's module besides its code, copied out of the downloaded module into
# the binary's cache folder by its build (so a cached binary has them): {folder in the cache: folder in the module}.
SRIOV_ASSETS = {"crds": "config/crd/bases", "cni-config": "bindata/manifests/cni-config"}
# Also level 3, built and required like it, but apart: the queue of a shared cluster (live/kueue.py). A machine
# that cannot build Kueue still runs the simulated cluster's other tests.
QUEUE = ("kueue",)
# OpenShift's SCC admission (live/scc.py, docs/live.md "SCC admission"), built and required like level 3.
SCC = ("scc-admission",)
# The real nodes' kubelet and cluster DNS (live/realnodes.py, docs/live.md "Real nodes"), built and required like level 3.
NODES = ("kubelet", "coredns")
EVERYTHING = LEVEL1 + LEVEL2 + LEVEL3 + QUEUE + SRIOV + SCC + NODES  # what `python -m live.toolchain` builds


class ToolchainError(Exception):
    """A reason the toolchain cannot be built at all (no usable Go, no cache folder), in words that say the fix."""


# How a cold toolchain is built (docs/live.md "What it builds, once"): every module's `go mod download` at once, so they
# overlap the first builds; each module's build as soon as its download is done, JOBS module builds at a time. One
# `go build` leaves a core idle while it loads packages, links (one thread) and compiles a package everything else waits
# for (6 to 7% of kwok's cold build); a second build fills those gaps (4 to 6% sooner, measured). The longest first, so
# that the last one to end is a short one.
JOBS = int(os.environ.get("GPU_TRAINING_LIVE_JOBS") or 2)
LONGEST_FIRST = ("provider", "pulumi", "kueue", "k8s", "coredns", "sriov", "kwok")  # a module not named here starts after these


# A go step that takes longer than this has hung (a proxy that stopped answering, a stuck lock): it is ended and
# reported, so a CI run fails with a reason instead of running into its own time limit. The cold provider build
# took 14 min under load (docs/live.md); the limit leaves room for a slower machine.
GO_STEP_TIMEOUT = int(os.environ.get("GPU_TRAINING_LIVE_GO_TIMEOUT") or 45 * 60)


def go_version() -> str:
    """The Go version that builds the toolchain; '' where there is no `go` on PATH. A Go that is there but cannot
    give one (a GOTOOLCHAIN it cannot fetch, a broken install) raises ToolchainError saying so."""
    go = shutil.which("go")
    if go is None:
        return ""
    return _go_version(go, _gotoolchain(), os.environ.get("GOROOT", ""))


@functools.lru_cache(maxsize=8)
def _go_version(go: str, gotoolchain: str, goroot: str) -> str:
    """Asked once per Go (every cache path is keyed by it, and a run asks for a dozen)."""
    try:
        run = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False, timeout=GO_STEP_TIMEOUT)
    except subprocess.TimeoutExpired as err:
        raise ToolchainError(f"`go env GOVERSION` did not answer in {GO_STEP_TIMEOUT} s (GOTOOLCHAIN={_gotoolchain()})") from err
    version = run.stdout.strip()
    if run.returncode != 0 or not version:
        said = " | ".join(run.stderr.strip().splitlines()[-2:]) or f"exit {run.returncode}"
        raise ToolchainError(
            f"{go} is on PATH but cannot run (GOTOOLCHAIN={_gotoolchain()}): {said}. "
            "Fix: unset GOTOOLCHAIN or set it to `local`, or name a toolchain the module proxy serves"
        )
    return version


def _gotoolchain() -> str:
    return os.environ.get("GOTOOLCHAIN") or "(unset)"


def module_dir(module: str) -> Path:
    """Where a module's binaries are cached: keyed by its pinned files, the Go version, and how each of its binaries
    is built (name, package, -ldflags: a changed version stamp is a different binary)."""
    digest = hashlib.sha256(go_version().encode())
    for b in BINARIES:
        if b.module == module:
            digest.update(f"{b.name}\0{b.package}\0{b.ldflags}\0".encode())
    for f in sorted((MODULES / module).rglob("*")):
        if f.is_file() and f.name not in GENERATED:
            digest.update(f.relative_to(MODULES).as_posix().encode() + b"\0" + f.read_bytes())
    return CACHE / f"{module}-{digest.hexdigest()[:16]}"


# Files a build copies from a downloaded module (never from the work tree): not part of the pin.
GENERATED = ("schema.json", "terraform-mapping.json")


def path_of(name: str) -> Path:
    b = next(b for b in BINARIES if b.name == name)
    return module_dir(b.module) / name


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # go.sum pins every module; the checksum database is not asked (this proxy's lookups miss some Pulumi modules).
    # No VCS stamp: the modules sit in this repository's work tree, and a binary must not differ by its commit.
    env["GOFLAGS"] = "-mod=readonly -buildvcs=false"
    env["GONOSUMDB"] = "github.com/pulumi"
    env.setdefault("CGO_ENABLED", "0")
    return env


def _go(args: list[str], cwd: Path, log: Path) -> str:
    """One go step, logged, with a time limit; its stdout. A failure raises CalledProcessError with the log's tail."""
    with log.open("a") as out:
        out.write(f"$ (cd {cwd} && go {' '.join(args)})\n")
        out.flush()
        try:
            run = subprocess.run(["go", *args], cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=out, text=True, timeout=GO_STEP_TIMEOUT)
        except subprocess.TimeoutExpired as err:
            out.write(f"ended: no result in {GO_STEP_TIMEOUT} s\n")
            raise subprocess.CalledProcessError(-1, ["go", *args], output=f"timed out after {GO_STEP_TIMEOUT} s") from err
        out.write(run.stdout)
    if run.returncode != 0:
        raise subprocess.CalledProcessError(run.returncode, ["go", *args])
    return run.stdout


def downloaded(module: str, cwd: Path, log: Path) -> Path:
    """The folder of `module` (at the version cwd's go.mod pins) in the module cache, downloaded first: on a fresh
    module cache `go list -m` names a folder that does not exist yet."""
    info = json.loads(_go(["mod", "download", "-json", module], cwd, log))
    where = Path(info.get("Dir") or "")
    if not info.get("Dir") or not where.is_dir():
        raise OSError(f"go mod download gave no folder for {module}: {info.get('Error') or info}")
    return where


def _stage(b: Binary, log: Path) -> Path:
    """The folder the binary is built in. Most modules build where they are committed. The provider's main embeds
    its schema, which the release build generates and the module does not ship under that name: the module is
    staged in the cache with schema.json and terraform-mapping.json from the downloaded provider module, so a build
    never writes into the work tree."""
    src = MODULES / b.module
    if b.module != "provider":
        return src
    stage = path_of(b.name).parent / "src"
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(src, stage, ignore=shutil.ignore_patterns(*GENERATED))
    where = downloaded("github.com/pulumi/pulumi-kubernetes/provider/v4", stage, log)
    for name in GENERATED:
        shutil.copyfile(where / "cmd" / "pulumi-resource-kubernetes" / name, stage / name)
    return stage


def _assets(b: Binary, log: Path) -> None:
    """The files a binary reads at run time from its module's source: the SR-IOV operator's CRDs and the NAD
    templates its controller renders from (api/v1.ManifestsPath), beside the binary. Copied before the binary is
    written, so a binary found in the cache has them."""
    if b.module != "sriov":
        return
    where = downloaded(SRIOV_MODULE, MODULES / b.module, log)
    for into, source in SRIOV_ASSETS.items():
        dest = path_of(b.name).parent / into
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(where / source, dest)
        for f in dest.rglob("*"):  # the module cache's files are read-only; the cache's copies must be replaceable
            f.chmod(0o755 if f.is_dir() else 0o644)
        dest.chmod(0o755)


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cached(target: Path) -> bool:
    """A cached binary is trusted only when it is the one a finished build wrote: an executable ELF file whose
    sha256 matches the one recorded beside it. An empty, truncated or foreign file is built again."""
    try:
        if not target.is_file() or not os.access(target, os.X_OK):
            return False
        with target.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                return False
        return _sidecar(target).read_text().strip() == _digest(target)
    except OSError:
        return False


# Every `go build` compiles without debug information (-dwarf=false): the link's -w drops it anyway, and writing it
# costs the compiler a tenth of its time (kwok's cold build: 155 s of CPU instead of 176, docs/live.md). It changes no
# code, so it is not part of a module's key: a binary cached before it was added is as good.
GCFLAGS = "all=-dwarf=false"


def exe_name(package: str) -> str:
    """The file name `go build -o DIR/` gives the binary of `package`: its last path element, or the one before a major
    version suffix (/v3); '' for a package named by a relative path that does not say it (".")."""
    parts = [p for p in package.split("/") if p not in ("", ".")]
    if len(parts) > 1 and re.fullmatch(r"v[0-9]+", parts[-1]):
        parts.pop()
    return parts[-1] if parts else ""


def steps(binaries: list[Binary]) -> list[list[Binary]]:
    """The `go build` invocations that build `binaries` (of one module): one for all that share -ldflags, which then
    share the loading of packages and their compilation, and are linked at once (`go build -o DIR/ pkg...`); one alone
    for a binary whose package would give it another name."""
    groups: dict[tuple[str, str], list[Binary]] = {}
    for b in binaries:
        key = ("together", b.ldflags) if exe_name(b.package) == b.name else ("alone", b.name)
        groups.setdefault(key, []).append(b)
    return list(groups.values())


def _install(built: Path, target: Path) -> None:
    digest = _digest(built)
    built.replace(target)  # only a finished build is ever found in the cache
    _sidecar(target).write_text(digest + "\n")


def build(group: list[Binary], where: Path, log: Path) -> None:
    """One `go build` of the binaries of `group` (one module, one -ldflags) in `where`, each into the cache."""
    targets = [path_of(b.name) for b in group]
    flags = ["-trimpath", f"-gcflags={GCFLAGS}", "-ldflags", f"-s -w {group[0].ldflags}".strip()]
    if len(group) == 1:
        partial = targets[0].with_name(targets[0].name + ".partial")
        _go(["build", *flags, "-o", str(partial), group[0].package], where, log)
        _install(partial, targets[0])
        return
    partial = targets[0].parent / ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    _go(["build", *flags, "-o", f"{partial}/", *(b.package for b in group)], where, log)
    for b, target in zip(group, targets, strict=True):
        _install(partial / b.name, target)
    shutil.rmtree(partial)


def _make_cache() -> None:
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
        probe = CACHE / f".probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ToolchainError(
            f"the live tier's cache {CACHE} cannot be made or written ({err.strerror or err}). "
            "Fix: set GPU_TRAINING_LIVE_CACHE (or XDG_CACHE_HOME) to a folder you can write"
        ) from err


def ensure(names: tuple[str, ...] = EVERYTHING) -> dict[str, Path | str]:
    """Each binary's path, building what the cache lacks; a binary that cannot be built maps to the reason
    (the tests that need it skip with it, or fail: see required()). One build at a time per cache (a lock file),
    so two runs wait for each other instead of writing the same binary; the one that waits says who holds it."""
    try:
        if not go_version():
            return {n: "no `go` on PATH: the live tier builds its toolchain with Go (1.24+)" for n in names}
        _make_cache()
    except ToolchainError as err:
        return {n: str(err) for n in names}
    # Everything asked for is there already (each binary as its finished build recorded it): nothing to wait for, even
    # while another run holds the lock to build something else. A binary being installed is not cached() yet.
    found = {b.name: path_of(b.name) for b in BINARIES if b.name in names}
    if len(found) == len(set(names)) and all(cached(p) for p in found.values()):
        return dict(found)
    with (CACHE / ".lock").open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another run (it left no note)"
            print(f"live: waiting for the toolchain cache {CACHE}: {holder}", file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _ensure(names, lock)
        finally:
            lock.seek(0)
            lock.truncate()
            lock.flush()


class _Note:
    """What the lock file says while this run holds it: who, since when, and what it builds now (from every thread)."""

    def __init__(self, lock: IO[str]) -> None:
        self.lock, self.since, self.mutex = lock, time.strftime("%H:%M:%S"), threading.Lock()
        self.building: dict[str, str] = {}

    def update(self, module: str, what: str | None) -> None:
        with self.mutex:
            if what is None:
                self.building.pop(module, None)
            else:
                self.building[module] = what
            self.lock.seek(0)
            self.lock.truncate()
            doing = "; ".join(self.building.values()) or "finishing"
            self.lock.write(f"pid {os.getpid()} ({' '.join(sys.argv[:2])}) since {self.since}, {doing}\n")
            self.lock.flush()


def _failed(b: Binary, err: BaseException, log: Path) -> str:
    """Why `b` was not built: the error, and the end of its module's log (the failed step's output: a module's steps
    run one after the other)."""
    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    return f"{b.name} could not be built ({err}; log {log}): " + " | ".join(tail)


BUILD_ERRORS = (subprocess.CalledProcessError, OSError, ValueError)


def _download(module: str, log: Path) -> None:
    """Every module the module's go.mod requires, into the module cache (what its build then reads)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    _go(["mod", "download"], MODULES / module, log)


def _build_module(module: str, todo: list[Binary], log: Path, fetched: Future[None], note: _Note) -> dict[str, Path | str]:
    """The module's binaries, its download done: staged, their assets copied, one `go build` per step. A step of
    several binaries that fails is built again one binary at a time, so each binary's result says its own reason."""
    try:
        fetched.result()
    except BUILD_ERRORS as err:
        return {b.name: _failed(b, err, log) for b in todo}
    started = time.monotonic()
    names = ", ".join(b.name for b in todo)
    note.update(module, f"building {names} (log {log})")
    print(f"live: building {names} ({module} module; log {log})", file=sys.stderr, flush=True)
    result: dict[str, Path | str] = {}
    try:
        where = _stage(todo[0], log)
        for b in todo:
            _assets(b, log)
    except BUILD_ERRORS as err:
        note.update(module, None)
        return {b.name: _failed(b, err, log) for b in todo}
    for group in steps(todo):
        try:
            build(group, where, log)
            result.update((b.name, path_of(b.name)) for b in group)
        except BUILD_ERRORS as err:
            if len(group) == 1:
                result[group[0].name] = _failed(group[0], err, log)
                continue
            for b in group:
                try:
                    build([b], where, log)
                    result[b.name] = path_of(b.name)
                except BUILD_ERRORS as alone:
                    result[b.name] = _failed(b, alone, log)
    note.update(module, None)
    built = [n for n, r in result.items() if isinstance(r, Path)]
    if built:
        print(f"live: built {', '.join(built)} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return result


def _ensure(names: tuple[str, ...], lock: IO[str]) -> dict[str, Path | str]:
    wanted = [b for b in BINARIES if b.name in names]
    result: dict[str, Path | str] = {}
    todo: dict[str, list[Binary]] = {}
    for b in wanted:
        target = path_of(b.name)
        if cached(target):
            result[b.name] = target
        else:
            todo.setdefault(b.module, []).append(b)
    if todo:
        note = _Note(lock)
        pending = sorted(todo, key=lambda m: LONGEST_FIRST.index(m) if m in LONGEST_FIRST else len(LONGEST_FIRST))
        logs = {m: module_dir(m) / "build.log" for m in pending}
        jobs = max(1, min(JOBS, len(pending)))
        print(f"live: building {len(pending)} module(s), {jobs} at a time, their downloads at once", file=sys.stderr, flush=True)
        mutex = threading.Lock()

        def builder() -> None:
            """Builds modules until none is left: of those downloaded, the first of LONGEST_FIRST; else waits for one."""
            while True:
                with mutex:
                    ready = next((m for m in pending if fetched[m].done()), None)
                    if ready is not None:
                        pending.remove(ready)
                    waiting = [fetched[m] for m in pending]
                if ready is not None:
                    built = _build_module(ready, todo[ready], logs[ready], fetched[ready], note)
                    with mutex:
                        result.update(built)
                elif waiting:
                    wait(waiting, return_when=FIRST_COMPLETED)
                else:
                    return

        with ThreadPoolExecutor(len(pending), thread_name_prefix="download") as downloads:
            fetched = {m: downloads.submit(_download, m, logs[m]) for m in pending}
            with ThreadPoolExecutor(jobs, thread_name_prefix="build") as builds:
                for worker in [builds.submit(builder) for _ in range(jobs)]:
                    worker.result()
    return {b.name: result[b.name] for b in wanted}


def required() -> tuple[str, ...]:
    """The binaries a run must have: level 1 always; levels 2 and 3 (with Kueue), the SR-IOV controller, SCC admission
    and the real nodes' too in CI (CI=true), where a skip would let a run that tested no engine, no scheduling, no queue,
    no operator, no admission or no container pass. A developer without them gets level 1's tests and the skip reasons."""
    return EVERYTHING if os.environ.get("CI", "").lower() in ("1", "true", "yes") else LEVEL1


if __name__ == "__main__":
    started = time.monotonic()
    built = ensure()
    for name, where in built.items():
        print(f"{name}: {where}")
    print(f"toolchain ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
    # Level 1 (the control plane) is required, and the rest in CI; elsewhere their tests skip, saying why.
    missing = [n for n in required() if not isinstance(built[n], Path)]
    if missing:
        print(f"live: required and not built: {', '.join(missing)}", file=sys.stderr)
    sys.exit(1 if missing else 0)
