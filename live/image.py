"""The image every pod on the real nodes runs, built without a registry, and what serves it to them.

What is in it (one layer): Debian's python3.11 with its libraries, bash and busybox (live/packages.py IMAGE), and torch
with the libraries it loads, taken from the e2e tier's venv (.venv-e2e, where `make test-e2e` installs torch==2.13.0):
the files of torch's requirements, less what a CPU run never opens (headers, tests, triton, and the CUDA libraries
torch does not load when it starts: the list is read from /proc/self/maps of a real gloo all-reduce in that venv).
`torchrun` is on PATH. Beside it, a static pause image built from k8s.io/kubernetes's own build/pause/linux/pause.c.

It stands in for every image a stack names (docs/live.md "Real nodes" says what differs): the nodes' containerd sends
every registry to REGISTRY (a mirror for "*"), which answers every repository and tag with this image. The nodes offer
nvidia.com/gpu with no GPU behind it, so the image carries a GPU stand-in (STANDIN): once torch is imported,
its CUDA calls run on the CPU and its NCCL backend is gloo; nothing else of torch is changed.

Built once per key (the packages' versions, torch's distributions, this file's stand-in and pause.c) into
CACHE/image-KEY: the OCI archive is imported into a containerd root there (`seed`), with its layer unpacked for the
overlayfs snapshotter, and each node's containerd starts from a copy of that root whose files are hard links
(`node_root`): a node has the image at once, and a run writes none of its gigabytes again.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from live import packages, toolchain

ROOT = Path(__file__).resolve().parent.parent
E2E_VENV = ROOT / ".venv-e2e"  # the Makefile's E2E
NAME = "live.gpu-training.local/image"
PAUSE = "registry.k8s.io/pause:3.10.1"  # containerd 1.6's sandbox_image, set to this in live/realnodes.py
SITE = "usr/local/lib/python3.11/dist-packages"  # Debian's python3.11 site folder for /usr/local
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
FORMAT = 1  # raised when what the image holds changes in a way the key does not see
SEED_TIMEOUT = 900

STANDIN = '''"""The live tier's GPU stand-in (live/image.py): the real nodes offer nvidia.com/gpu with no GPU behind it. Once
torch is imported, its CUDA calls run on the CPU and the NCCL backend is gloo."""
import importlib.abc
import importlib.util
import sys

FACTORIES = ("ones", "zeros", "empty", "full", "tensor", "rand", "randn", "arange")


def _patch(torch, dist):
    cpu = torch.device("cpu")

    def on_cpu(make):
        def call(*args, device=None, **kwargs):
            if device is not None and torch.device(device).type == "cuda":
                device = cpu
            return make(*args, device=device, **kwargs)
        return call

    for name in FACTORIES:
        setattr(torch, name, on_cpu(getattr(torch, name)))
    torch.cuda.set_device = lambda device: None
    torch.cuda.synchronize = lambda device=None: None
    init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        return init("gloo" if backend in (None, "nccl", "cuda:nccl") else backend, *args, **kwargs)

    dist.init_process_group = init_process_group


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            import torch.distributed

            _patch(module, torch.distributed)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
'''

TORCHRUN = "#!/usr/bin/python3\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n"

# Run by the e2e venv's python: the files of torch's requirements, and the shared libraries a CPU all-reduce loads.
_SURVEY = r"""
import importlib.metadata as md, json, os, sys
from packaging.requirements import Requirement
todo, seen, files = ["torch"], set(), {}
while todo:
    name = todo.pop().lower().replace("_", "-")
    if name in seen or name in ("triton", "setuptools"):
        continue
    seen.add(name)
    dist = md.distribution(name)
    files[name] = [str(dist.locate_file(f)) for f in dist.files or []]
    for r in dist.requires or []:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            todo.append(req.name)
            for extra in req.extras:
                todo += [Requirement(x).name for x in md.distribution(req.name).requires or []
                         if Requirement(x).marker is not None and Requirement(x).marker.evaluate({"extra": extra})]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1], RANK="0", WORLD_SIZE="1")
import torch, torch.distributed as dist, torch.distributed.run
dist.init_process_group("gloo")
x = torch.ones(4)
dist.all_reduce(x)
dist.destroy_process_group()
loaded = sorted({line.split()[-1] for line in open("/proc/self/maps") if ".so" in line.split()[-1]})
with open(sys.argv[2], "w") as out:
    json.dump({"version": sys.version_info[:2], "torch": torch.__version__, "files": files, "loaded": loaded}, out)
"""
# Never opened by a CPU run: C++ headers, tests, the code generator's templates.
PRUNED = re.compile(r"^torch/(include|test|testing/_internal/data|share)/|/__pycache__/")


class ImageError(Exception):
    """Why the image cannot be built here, in words that say the fix."""


@dataclass(frozen=True)
class Image:
    folder: Path

    @property
    def seed(self) -> Path:
        """The containerd root the image was imported into (a node's root is a hard-linked copy of it)."""
        return self.folder / "seed"

    @property
    def manifest(self) -> bytes:
        """The image's manifest, as the registry stand-in serves it for every repository and tag."""
        return (self.folder / "manifest.json").read_bytes()

    def blob(self, digest: str) -> Path | None:
        """A blob of the image, from the seed's content store (never a path outside it)."""
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            return None
        path = self.seed / "root" / "io.containerd.content.v1.content" / "blobs" / "sha256" / digest.split(":")[1]
        return path if path.is_file() else None


def survey(venv: Path = E2E_VENV) -> dict[str, Any]:
    """What torch takes in `venv` (its requirements' files and the libraries a CPU all-reduce loads), asked once per
    install of the venv's packages (a run of torch takes seconds)."""
    python = venv / "bin" / "python"
    installed = sorted(venv.glob("lib/python*/site-packages/*.dist-info"))
    seen = hashlib.sha256(f"{FORMAT}\0{_SURVEY}\0{venv.resolve()}".encode())
    for d in installed:
        seen.update(f"{d.name}\0{d.stat().st_mtime_ns}\0".encode())
    saved = toolchain.CACHE / f"torch-survey-{seen.hexdigest()[:16]}.json"
    if saved.is_file():
        return dict(json.loads(saved.read_text()))
    found = _survey(venv, python)
    toolchain.CACHE.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(found))
    return found


def _survey(venv: Path, python: Path) -> dict[str, Any]:
    if not python.exists():
        raise ImageError(f"no {venv}: the image takes torch from the e2e tier's venv. Fix: make {venv.name.strip('.')} (or make test-e2e)")
    from live.controlplane import free_port

    # The answer (2 MB) goes to a file: on stdout, whatever torch's threads write there could cut into it.
    with tempfile.TemporaryDirectory() as tmp:
        answer = Path(tmp) / "survey.json"
        cmd = [str(python), "-c", _SURVEY, str(free_port()), str(answer)]
        run = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
        if run.returncode != 0 or not answer.is_file():
            raise ImageError(f"torch in {venv} does not run a gloo all-reduce: {' | '.join(run.stderr.strip().splitlines()[-3:])}")
        found: dict[str, Any] = json.loads(answer.read_text())
    if tuple(found["version"]) != (3, 11):
        said = ".".join(map(str, found["version"]))
        raise ImageError(
            f"{venv} is Python {said}: the image's interpreter is Debian's 3.11, whose extension modules torch's must match. "
            "Fix: make the e2e venv with a Python 3.11 (PYTHON=python3.11)"
        )
    return found


def torch_entries(found: dict[str, Any]) -> Iterator[tuple[Path, str]]:
    """(file in the venv, path in the image) of every file the image takes from torch's distributions."""
    loaded = set(found["loaded"])
    site = None
    for files in found["files"].values():
        for f in map(Path, files):
            site = site or next((p for p in f.parents if p.name == "site-packages"), None)
            if site is None or not f.is_file():
                continue
            rel = f.relative_to(site).as_posix()
            if rel.startswith("..") or PRUNED.search(rel):
                continue
            if ".so" in f.name and (rel.startswith(("nvidia/", "torch/lib/")) and str(f) not in loaded):
                continue  # a library torch opens only for a GPU (cuDNN's engines, cuSOLVER, ...)
            yield f, f"{SITE}/{rel}"


def key(found: dict[str, Any], image_root: Path, pause_c: Path) -> str:
    digest = hashlib.sha256(f"{FORMAT}\0{STANDIN}\0{TORCHRUN}\0{found['torch']}\0".encode())
    digest.update((image_root.parent / "versions").read_bytes())
    digest.update(pause_c.read_bytes())
    for name in sorted(found["files"]):
        digest.update(f"{name}\0{len(found['files'][name])}\0".encode())
    return digest.hexdigest()[:16]


class _Hashing(io.RawIOBase):
    """A file written through, with the sha256 and size of what was written."""

    def __init__(self, out: io.BufferedWriter) -> None:
        self.out, self.sha, self.size = out, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.sha.update(b)
        self.size += len(b)
        return self.out.write(b)


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, mode: int = 0o644, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.linkname, info.mtime = kind, size, mode, link, 0
    return info


def _add_tree(tar: tarfile.TarFile, tree: Path, names: set[str]) -> None:
    for base, dirs, files in os.walk(tree):
        dirs.sort()
        for entry in [*dirs, *sorted(files)]:
            path = Path(base) / entry
            name = path.relative_to(tree).as_posix()
            names.add(name)
            info = tar.gettarinfo(str(path), name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.isreg():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            elif info.isdir() or info.issym():
                tar.addfile(info)


def _write_layer(path: Path, fill: Any) -> tuple[str, int]:
    """An uncompressed layer tar written by fill(tar); its sha256 digest and size."""
    with path.open("wb") as raw:
        hashing = _Hashing(raw)
        with tarfile.open(fileobj=hashing, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            fill(tar)
    return f"sha256:{hashing.sha.hexdigest()}", hashing.size


def _parents(tar: tarfile.TarFile, name: str, names: set[str]) -> None:
    """The folders above `name` that the layer does not hold yet, outermost first."""
    for parent in reversed(Path(name).parents[:-1]):
        if parent.as_posix() not in names:
            names.add(parent.as_posix())
            tar.addfile(_info(parent.as_posix(), tarfile.DIRTYPE, mode=0o755))


def _main_layer(image_root: Path, busybox_applets: list[str], torch: list[tuple[Path, str]]) -> Any:
    def fill(tar: tarfile.TarFile) -> None:
        names: set[str] = set()
        _add_tree(tar, image_root, names)
        for d, mode in (("tmp", 0o1777), ("root", 0o700)):
            if d not in names:
                names.add(d)
                tar.addfile(_info(d, tarfile.DIRTYPE, mode=mode))
        files = {
            "etc/passwd": (b"root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", 0o644),
            "etc/group": (b"root:x:0:\nnogroup:x:65534:\n", 0o644),
            "usr/local/bin/torchrun": (TORCHRUN.encode(), 0o755),
            f"{SITE}/live_gpu_standin.py": (STANDIN.encode(), 0o644),
            f"{SITE}/live-gpu-standin.pth": (b"import live_gpu_standin\n", 0o644),
        }
        for name, (data, mode) in files.items():
            _parents(tar, name, names)
            tar.addfile(_info(name, size=len(data), mode=mode), io.BytesIO(data))
        links = {"bin/sh": "bash", "usr/bin/python3": "python3.11"}
        links.update((f"usr/local/bin/{a}", "/bin/busybox") for a in busybox_applets
                     if not {f"bin/{a}", f"usr/bin/{a}", f"sbin/{a}", f"usr/sbin/{a}"} & names)  # fmt: skip
        for name, target in links.items():
            _parents(tar, name, names)
            tar.addfile(_info(name, tarfile.SYMTYPE, mode=0o777, link=target))
        for src, name in torch:
            _parents(tar, name, names)
            info = _info(name, size=src.stat().st_size, mode=src.stat().st_mode & 0o777)
            with src.open("rb") as f:
                tar.addfile(info, f)

    return fill


def _pause_layer(binary: Path) -> Any:
    def fill(tar: tarfile.TarFile) -> None:
        tar.addfile(_info("pause", size=binary.stat().st_size, mode=0o755), binary.open("rb"))

    return fill


def _blob(blobs: Path, data: bytes) -> tuple[str, int]:
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    (blobs / digest.split(":")[1]).write_bytes(data)
    return digest, len(data)


def _image(blobs: Path, layer: tuple[str, int], config: dict[str, Any]) -> tuple[str, int, bytes]:
    """The config and manifest of a one-layer image whose layer is in `blobs`: the manifest's digest, size and bytes."""
    config = {"architecture": "amd64", "os": "linux", "config": config, "rootfs": {"type": "layers", "diff_ids": [layer[0]]}}
    cdigest, csize = _blob(blobs, json.dumps(config, sort_keys=True).encode())
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": cdigest, "size": csize},
        "layers": [{"mediaType": LAYER, "digest": layer[0], "size": layer[1]}],
    }, sort_keys=True).encode()  # fmt: skip
    digest, size = _blob(blobs, manifest)
    return digest, size, manifest


def pause_binary(out: Path, log: Path) -> Path:
    """pause.c of the control plane's k8s.io/kubernetes, built static (as its release image's is)."""
    source = toolchain.downloaded("k8s.io/kubernetes", toolchain.MODULES / "k8s", log) / "build" / "pause" / "linux" / "pause.c"
    if shutil.which("gcc") is None:
        raise ImageError("no `gcc` on PATH: the pause image is built from k8s.io/kubernetes's pause.c (apt-get install gcc libc6-dev)")
    run = subprocess.run(["gcc", "-Os", "-Wall", "-static", "-DVERSION=v3.10.1-live", "-o", str(out), str(source)],
                         capture_output=True, text=True, check=False, timeout=120)  # fmt: skip
    if run.returncode != 0:
        raise ImageError(f"pause.c did not build (a static libc: libc6-dev): {run.stderr.strip()[-300:]}")
    return out


def build(runtime_root: Path, image_root: Path, venv: Path = E2E_VENV) -> Image:
    """The image, built and imported into its seed root the first time (minutes: the layer is some 3 GB)."""
    found = survey(venv)
    log = toolchain.CACHE / "image-build.log"
    pause_c = toolchain.downloaded("k8s.io/kubernetes", toolchain.MODULES / "k8s", log) / "build" / "pause" / "linux" / "pause.c"
    folder = toolchain.CACHE / f"image-{key(found, image_root, pause_c)}"
    if (folder / ".done").is_file():
        return Image(folder)
    with (toolchain.CACHE / ".image.lock").open("a+") as lock:  # one build at a time; a run that waited finds it made
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".done").is_file():
            _build(folder, runtime_root, image_root, found, log)
    return Image(folder)


def _build(folder: Path, runtime_root: Path, image_root: Path, found: dict[str, Any], log: Path) -> None:
    work = toolchain.CACHE / f".{folder.name}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    blobs = work / "archive" / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    try:
        applets = subprocess.run([str(image_root / "bin" / "busybox"), "--list"], capture_output=True, text=True, check=True).stdout.split()
        layer = _write_layer(work / "layer.tar", _main_layer(image_root, applets, list(torch_entries(found))))
        (work / "layer.tar").rename(blobs / layer[0].split(":")[1])
        main = _image(blobs, layer, {"Env": [f"PATH={PATH}"], "WorkingDir": "/"})
        pause = pause_binary(work / "pause", log)
        pause_layer = _write_layer(work / "pause.tar", _pause_layer(pause))
        (work / "pause.tar").rename(blobs / pause_layer[0].split(":")[1])
        paused = _image(blobs, pause_layer, {"Entrypoint": ["/pause"], "WorkingDir": "/"})
        named = ((main, f"{NAME}:{folder.name}"), (paused, PAUSE))
        index = {"schemaVersion": 2, "manifests": [
            {"mediaType": MANIFEST, "digest": d, "size": s,
             "annotations": {"io.containerd.image.name": n, "org.opencontainers.image.ref.name": n}}
            for (d, s, _), n in named
        ]}  # fmt: skip
        (work / "archive" / "index.json").write_text(json.dumps(index))
        (work / "archive" / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        (work / "manifest.json").write_bytes(main[2])
        seed(runtime_root, work / "archive", work / "seed")
        shutil.rmtree(work / "archive")
        (work / "pause").unlink()
        (work / ".done").write_text(f"{NAME}:{folder.name}\n")
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for old in toolchain.CACHE.glob("image-*"):  # gigabytes each; a node that runs from one holds hard links, not it
        if old != folder and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)


# --- containerd ---------------------------------------------------------------------------------------------------


# Snapshotters and tracing a node does not use (their start would only log that this machine has no btrfs, zfs, ...).
UNUSED_PLUGINS = [f"io.containerd.snapshotter.v1.{s}" for s in ("btrfs", "zfs", "devmapper", "aufs")] + [
    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]  # fmt: skip


def containerd_config(folder: Path, runtime_root: Path, extra: str = "") -> Path:
    """A containerd 1.6 config (version 2) whose root, state, sockets and plugin folders are all under `folder`."""
    text = f"""version = 2
root = "{folder}/root"
state = "{folder}/state"
disabled_plugins = {json.dumps(UNUSED_PLUGINS)}
[grpc]
  address = "{folder}/containerd.sock"
[ttrpc]
  address = "{folder}/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{folder}/opt"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  BinaryName = "{runtime_root}/usr/sbin/runc"
  SystemdCgroup = false
{extra}"""
    path = folder / "containerd.toml"
    path.write_text(text)
    return path


def runtime_env(runtime_root: Path) -> dict[str, str]:
    """containerd finds its shim (containerd-shim-runc-v2) on PATH."""
    return {**os.environ, "PATH": f"{runtime_root}/usr/bin:{runtime_root}/usr/sbin:{os.environ.get('PATH', '')}"}


def ctr(runtime_root: Path, folder: Path, *args: str, stdin: Any = None, timeout: float = 120) -> str:
    run = subprocess.run([f"{runtime_root}/usr/bin/ctr", "--address", f"{folder}/containerd.sock", "--namespace", "k8s.io", *args],
                         stdin=stdin, capture_output=True, text=True, check=False, timeout=timeout)  # fmt: skip
    if run.returncode != 0:
        raise ImageError(f"ctr {' '.join(args[:3])}: {run.stderr.strip()[-500:]}")
    return run.stdout


def wait_socket(proc: subprocess.Popen[bytes], socket: Path, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not socket.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise ImageError(f"containerd did not start: {log.read_text(errors='replace')[-800:]}")
        time.sleep(0.1)


def seed(runtime_root: Path, archive: Path, folder: Path) -> None:
    """Import the OCI layout `archive` into a containerd root in `folder` (its layers unpacked for overlayfs)."""
    folder.mkdir(parents=True)
    config = containerd_config(folder, runtime_root)
    log = folder / "containerd.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([f"{runtime_root}/usr/bin/containerd", "--config", str(config)], stdout=out, stderr=subprocess.STDOUT,
                                env=runtime_env(runtime_root), start_new_session=True)  # fmt: skip
    try:
        wait_socket(proc, folder / "containerd.sock", log)
        with subprocess.Popen(["tar", "-cf", "-", "-C", str(archive), "."], stdout=subprocess.PIPE) as tar:
            ctr(runtime_root, folder, "images", "import", "--snapshotter", "overlayfs", "-", stdin=tar.stdout, timeout=SEED_TIMEOUT)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    shutil.rmtree(folder / "state", ignore_errors=True)
    log.unlink()


def node_root(image: Image, dest: Path) -> None:
    """A node's containerd root: the seed's, its files hard links (the image's layers are never written to), its
    databases copies (each containerd writes its own)."""
    shutil.copytree(image.seed / "root", dest, copy_function=os.link, symlinks=True)
    for db in dest.rglob("*.db"):
        data = db.read_bytes()
        db.unlink()
        db.write_bytes(data)


# --- the registry stand-in ------------------------------------------------------------------------------------------


class Registry:
    """A read-only registry (the distribution API's pull half) that answers every repository and tag with the image:
    what the nodes' containerd asks when a pod's image is pulled (imagePullPolicy Always, or a name it has no record of).
    Serves on ADDRESS:PORT in a thread of the test process; stop() ends it."""

    def __init__(self, image: Image, address: str) -> None:
        manifest = image.manifest
        digest = f"sha256:{hashlib.sha256(manifest).hexdigest()}"

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, body: bytes | None, path: Path | None = None, kind: str = "application/octet-stream") -> None:
                size = len(body) if body is not None else path.stat().st_size if path else 0
                if body is None and path is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(size))
                self.send_header("Docker-Content-Digest", digest if kind == MANIFEST else self.path.rsplit("/", 1)[-1])
                self.end_headers()
                if self.command == "GET":
                    if body is not None:
                        self.wfile.write(body)
                    elif path is not None:
                        with path.open("rb") as f:
                            shutil.copyfileobj(f, self.wfile)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path in ("/v2/", "/v2"):
                    return self._answer(b"{}", kind="application/json")
                if "/manifests/" in self.path:
                    return self._answer(manifest, kind=MANIFEST)
                if "/blobs/" in self.path:
                    return self._answer(None, image.blob(self.path.rsplit("/", 1)[-1]))
                return self._answer(None)

            do_HEAD = do_GET  # noqa: N815

        self.server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://{address}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="live-registry", daemon=True)

    def start(self) -> Registry:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def ensure(venv: Path = E2E_VENV) -> tuple[Image, Path]:
    """The image and the runtime's unpacked packages (live/packages.py), building what the cache lacks."""
    try:
        runtime_root = packages.root(packages.RUNTIME)
        image_root = packages.root(packages.IMAGE)
    except packages.PackagesError as err:
        raise ImageError(str(err)) from err
    return build(runtime_root, image_root, venv), runtime_root


if __name__ == "__main__":
    started = time.monotonic()
    try:
        image, _ = ensure()
    except ImageError as err:  # the real nodes' tests skip with it, or fail in CI (live/tests/conftest.py)
        print(f"live: the real nodes' image cannot be built: {err}", file=sys.stderr)
        sys.exit(1 if "kubelet" in toolchain.required() else 0)
    print(f"{image.folder} ({time.monotonic() - started:.0f} s)")
