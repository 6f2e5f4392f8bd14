"""The live tier's toolchain: real binaries built from the Go module proxy, once, cached outside the clone.

Each module under live/toolchain/ pins what it builds (go.mod and go.sum, committed): the control plane
(etcd, kube-apiserver, kube-controller-manager, kubectl), the Pulumi CLI, and the kubernetes provider
plugin. A binary lives in CACHE/<module>-<key>/, where the key is a digest of the module's files and the Go
version, so a changed pin builds anew and an unchanged one is found again by the next run, in CI as on a
laptop. `python -m live.toolchain` builds everything and prints where; the live tests call `ensure()`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Binary:
    name: str
    module: str
    package: str
    ldflags: str = ""


BINARIES = [
    Binary("etcd", "k8s", "./etcd"),
    Binary("kube-apiserver", "k8s", "k8s.io/kubernetes/cmd/kube-apiserver"),
    Binary("kube-controller-manager", "k8s", "k8s.io/kubernetes/cmd/kube-controller-manager"),
    Binary("kubectl", "k8s", "k8s.io/kubernetes/cmd/kubectl"),
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


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        return ""
    return subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False).stdout.strip()


def module_dir(module: str) -> Path:
    """Where a module's binaries are cached: keyed by its pinned files and the Go version."""
    digest = hashlib.sha256(go_version().encode())
    for f in sorted((MODULES / module).rglob("*")):
        if f.is_file() and f.name not in ("schema.json", "terraform-mapping.json"):
            digest.update(f.relative_to(MODULES).as_posix().encode() + b"\0" + f.read_bytes())
    return CACHE / f"{module}-{digest.hexdigest()[:16]}"


def path_of(name: str) -> Path:
    b = next(b for b in BINARIES if b.name == name)
    return module_dir(b.module) / name


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # go.sum pins every module; the checksum database is not asked (this proxy's lookups miss some Pulumi modules).
    env["GOFLAGS"] = "-mod=readonly"
    env["GONOSUMDB"] = "github.com/pulumi"
    env.setdefault("CGO_ENABLED", "0")
    return env


def _prepare(b: Binary) -> None:
    """The provider's main embeds its schema: copy schema.json and terraform-mapping.json from the module."""
    if b.module != "provider":
        return
    src = MODULES / "provider"
    out = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "github.com/pulumi/pulumi-kubernetes/provider/v4"],
        cwd=src, env=_env(), capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    for name in ("schema.json", "terraform-mapping.json"):
        shutil.copyfile(Path(out) / "cmd" / "pulumi-resource-kubernetes" / name, src / name)


def build(b: Binary, log: Path) -> None:
    target = path_of(b.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    _prepare(b)
    partial = target.with_name(target.name + ".partial")
    cmd = ["go", "build", "-trimpath", "-ldflags", f"-s -w {b.ldflags}".strip(), "-o", str(partial), b.package]
    with log.open("a") as out:
        out.write(f"$ (cd {MODULES / b.module} && {' '.join(cmd)})\n")
        out.flush()
        subprocess.run(cmd, cwd=MODULES / b.module, env=_env(), stdout=out, stderr=subprocess.STDOUT, check=True)
    partial.replace(target)  # only a finished build is ever found in the cache


def ensure(names: tuple[str, ...] = LEVEL1 + LEVEL2) -> dict[str, Path | str]:
    """Each binary's path, building what the cache lacks; a binary that cannot be built maps to the reason
    (the tests that need it skip with it). One build at a time per cache (a lock file), so two runs wait for
    each other instead of writing the same binary."""
    if not go_version():
        return {n: "no `go` on PATH: the live tier builds its toolchain with Go (1.24+)" for n in names}
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure(names)


def _ensure(names: tuple[str, ...]) -> dict[str, Path | str]:
    result: dict[str, Path | str] = {}
    for b in BINARIES:
        if b.name not in names:
            continue
        target = path_of(b.name)
        if not target.exists():
            log = target.parent / "build.log"
            started = time.monotonic()
            print(f"live: building {b.name} ({b.module} module; log {log})", file=sys.stderr, flush=True)
            try:
                build(b, log)
            except (subprocess.CalledProcessError, OSError) as err:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
                result[b.name] = f"{b.name} could not be built ({err}): " + " | ".join(tail)
                continue
            print(f"live: built {b.name} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        result[b.name] = target
    return result


if __name__ == "__main__":
    started = time.monotonic()
    built = ensure()
    for name, where in built.items():
        print(f"{name}: {where}")
    print(f"toolchain ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
    # Level 1 (the control plane) is required; without level 2 its tests skip, saying why.
    sys.exit(0 if all(isinstance(built[n], Path) for n in LEVEL1) else 1)
