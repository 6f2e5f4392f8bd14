"""The live tier's real nodes without running one (live/realnodes.py, live/image.py, docs/live.md "Real nodes"): what a
container is predicted to start with, the machine a node's kubelet reads, whose a container in a node's cgroup is, the
files the image takes from torch, and the registry stand-in's answers."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from live import image, procs, realnodes

UID = 1_000_680_000


def pod(ctx: dict[str, Any], pod_ctx: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"spec": {"securityContext": pod_ctx or {}, "containers": [{"name": "training", "securityContext": ctx}]}}


@pytest.mark.parametrize(
    ("ctx", "uid", "caps"),
    [
        ({"runAsUser": 0, "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}, 0, 1 << 14),  # root-ipc-lock
        ({"runAsUser": 1000, "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}, 1000, 0),  # seed 003's trap
        ({"runAsUser": UID, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}, UID, 0),  # restricted-v2
        ({"privileged": True}, 0, None),  # every capability the runtime has
    ],
    ids=["root-ipc-lock", "non-root-ipc-lock", "restricted", "privileged"],
)
def test_the_predicted_start_follows_knowledge(ctx: dict[str, Any], uid: int, caps: int | None) -> None:
    want = realnodes.bounding_set() if caps is None else caps
    assert realnodes.predicted_start(pod(ctx)) == {"uid": uid, "cap_eff": want, "memlock": {"soft": 8 << 20, "hard": 8 << 20}}


def test_a_pod_level_uid_counts_where_the_container_sets_none() -> None:
    assert realnodes.predicted_start(pod({"capabilities": {"drop": ["ALL"]}}, {"runAsUser": UID}))["uid"] == UID


def test_a_nodes_machine_is_its_node_sets(tmp_path: Path) -> None:
    files = realnodes.machine(tmp_path, 6, 3 << 40)
    assert sorted(p.name for p in files["/sys/devices/system/cpu"].iterdir() if p.name.startswith("cpu")) == [f"cpu{i}" for i in range(6)]
    assert not any(files["/sys/devices/system/cpu"].rglob("topology")), "a topology makes the kubelet pin a cpuset of 6 CPUs"
    assert "MemTotal: 3221225472 kB" in files["/proc/meminfo"].read_text()
    assert files["/proc/sys/kernel/panic"].read_text() == "10\n"  # as the kubelet wants it: it writes nothing
    assert not any(files["/sys/devices/system/node"].iterdir())


@pytest.mark.parametrize(("text", "value"), [("4096", 4096), ("64Ti", 64 << 40), ("256Gi", 256 << 30), ("500m", 0), ("16", 16)])
def test_quantities(text: str, value: int) -> None:
    assert realnodes.quantity(text) == value


def test_a_container_in_a_nodes_cgroup_is_its_runs() -> None:
    path = procs.cgroup_path("moc-r4pcc02u15", "abc123/gw1")
    assert path == "/gpu-training-live/abc123/gw1/moc-r4pcc02u15"
    lines = f"12:pids:{path}/kubepods/besteffort/pod1/ctr\n0::/user.slice\n"
    assert procs.cgroup_marker(lines) == "abc123/gw1"
    assert procs.cgroup_marker(f"3:memory:{procs.cgroup_path('n', 'solo')}/kubepods\n") == "solo"
    assert procs.cgroup_marker("12:pids:/kubepods/pod1\n") is None  # a cluster's kubelet, not the tier's


def test_the_image_takes_torch_less_what_a_cpu_run_never_opens(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    names = ["torch/__init__.py", "torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda_linalg.so", "torch/include/c10/x.h",
             "nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/lib/libcudnn_engines.so.9", "nvidia/cudnn/__init__.py"]  # fmt: skip
    for n in names:
        (site / n).parent.mkdir(parents=True, exist_ok=True)
        (site / n).write_text(n)
    loaded = [str(site / n) for n in ("torch/lib/libtorch_cpu.so", "nvidia/cudnn/lib/libcudnn.so.9")]
    found = {"files": {"torch": [str(site / n) for n in names]}, "loaded": loaded}
    taken = {dest for _, dest in image.torch_entries(found)}
    assert taken == {f"{image.SITE}/{n}" for n in ("torch/__init__.py", "torch/lib/libtorch_cpu.so", "nvidia/cudnn/lib/libcudnn.so.9",
                                                     "nvidia/cudnn/__init__.py")}  # fmt: skip


def test_the_registry_answers_every_name_with_the_image(tmp_path: Path) -> None:
    manifest = json.dumps({"schemaVersion": 2, "mediaType": image.MANIFEST}).encode()
    (tmp_path / "manifest.json").write_bytes(manifest)
    blobs = tmp_path / "seed" / "root" / "io.containerd.content.v1.content" / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    layer = b"a layer"
    (blobs / hashlib.sha256(layer).hexdigest()).write_bytes(layer)
    registry = image.Registry(image.Image(tmp_path), "127.0.0.1").start()
    try:
        base = f"{registry.endpoint}/v2/"
        with urllib.request.urlopen(urllib.request.Request(f"{base}nccl-test/ml-dev-env/manifests/latest", method="HEAD")) as r:
            assert r.headers["Docker-Content-Digest"] == f"sha256:{hashlib.sha256(manifest).hexdigest()}"
            assert r.headers["Content-Type"] == image.MANIFEST
        with urllib.request.urlopen(f"{base}jschless/ml-dev-env/manifests/pytorch-2.9-numpy2") as r:
            assert r.read() == manifest
        with urllib.request.urlopen(f"{base}x/blobs/sha256:{hashlib.sha256(layer).hexdigest()}") as r:
            assert r.read() == layer
        for missing in ("x/blobs/sha256:" + "0" * 64, "x/blobs/../../etc/passwd", "x/tags/list"):
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(f"{base}{missing}")
    finally:
        registry.stop()
