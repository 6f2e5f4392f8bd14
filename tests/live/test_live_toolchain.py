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
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

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


@pytest.mark.parametrize(("ci", "required"), [("true", True), ("yes", True), ("", False), ("0", False)])
def test_the_simulated_cluster_is_required_in_ci(ci: str, required: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Level 3 (kube-scheduler and kwok): a CI run that scheduled no pod must not pass; a developer gets the skip."""
    monkeypatch.setenv("CI", ci)
    assert (set(toolchain.LEVEL3) <= set(toolchain.required())) is required
    assert {"kube-scheduler", "kwok"} == set(toolchain.LEVEL3)


@pytest.mark.parametrize(("ci", "required"), [("true", True), ("1", True), ("", False), ("false", False)])
def test_kueue_is_required_in_ci(ci: str, required: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue (level 3, apart from the simulated cluster's binaries): a CI run that admitted nothing through the real
    queue must not pass; a developer who cannot build it gets the skip, and the simulated cluster's tests still run."""
    monkeypatch.setenv("CI", ci)
    assert (set(toolchain.QUEUE) <= set(toolchain.required())) is required
    assert not set(toolchain.QUEUE) & set(toolchain.LEVEL3)
    assert set(toolchain.QUEUE) <= set(toolchain.EVERYTHING)  # `python -m live.toolchain` builds it


def test_kueue_is_built_from_its_own_module_stamped_with_its_release() -> None:
    (kueue,) = [b for b in toolchain.BINARIES if b.name == "kueue"]
    assert kueue.module == "kueue" and kueue.package == "sigs.k8s.io/kueue/cmd/kueue"
    assert f"sigs.k8s.io/kueue/pkg/version.GitVersion=v{toolchain.KUEUE_VERSION}" in kueue.ldflags
    go_mod = (toolchain.MODULES / "kueue" / "go.mod").read_text()
    assert f"require sigs.k8s.io/kueue v{toolchain.KUEUE_VERSION}\n" in go_mod
    assert "sigs.k8s.io/kueue/cmd/kueue" in (toolchain.MODULES / "kueue" / "tools.go").read_text()


def _rebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: object) -> tuple[Path, Path]:
    """The k8s module's cache folder before and after `change` to the list of binaries (the module's files and the Go
    version the same)."""
    monkeypatch.setattr(toolchain, "go_version", lambda: "go1.26.0")
    monkeypatch.setattr(toolchain, "CACHE", tmp_path)
    before = toolchain.module_dir("k8s")
    monkeypatch.setattr(toolchain, "BINARIES", change(list(toolchain.BINARIES)))  # type: ignore[operator]
    return before, toolchain.module_dir("k8s")


def _restamped(bins: list[toolchain.Binary], name: str, ldflags: str) -> list[toolchain.Binary]:
    return [toolchain.Binary(b.name, b.module, b.package, ldflags) if b.name == name else b for b in bins]


@pytest.mark.parametrize(
    "change",
    [
        lambda bins: _restamped(bins, "kube-apiserver", toolchain.K8S_LDFLAGS.replace("v1.34.4", "v1.34.5")),
        lambda bins: _restamped(bins, "kubectl", ""),  # the stamp dropped
        lambda bins: _restamped(bins, "etcd", "-X main.version=3.6.4"),  # a stamp added
        lambda bins: [*bins, toolchain.Binary("kube-proxy", "k8s", "k8s.io/kubernetes/cmd/kube-proxy")],
        lambda bins: [toolchain.Binary(b.name, b.module, b.package + "/v2", b.ldflags) if b.name == "kubectl" else b for b in bins],
    ],
    ids=["version-changed", "stamp-dropped", "stamp-added", "binary-added", "package-changed"],
)
def test_a_changed_ldflags_or_binary_builds_the_module_anew(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: object) -> None:
    before, after = _rebuilt(monkeypatch, tmp_path, change)
    assert before != after and before.parent == after.parent == tmp_path


@pytest.mark.parametrize(
    "change",
    [
        lambda bins: list(bins),  # the same list again
        lambda bins: _restamped(bins, "pulumi", "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v9.9.9"),  # another module
        lambda bins: [*bins, toolchain.Binary("other", "kwok", "./other")],
    ],
    ids=["unchanged", "other-module-stamp", "other-module-binary"],
)
def test_what_another_module_builds_keeps_this_ones_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: object) -> None:
    before, after = _rebuilt(monkeypatch, tmp_path, change)
    assert before == after


@pytest.mark.parametrize("name", ["kube-apiserver", "kube-controller-manager", "kubectl", "kube-scheduler"])
@pytest.mark.parametrize("package", ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"])
def test_the_control_plane_binaries_report_the_pinned_release(name: str, package: str) -> None:
    """Each reports v1.34.4 (the k8s module's pin), not v0.0.0-master: the server's /version and kubectl's client half."""
    pinned = (ROOT / "live" / "toolchain" / "k8s" / "go.mod").read_text()
    assert f"k8s.io/kubernetes v{toolchain.K8S_VERSION}\n" in pinned
    ldflags = next(b for b in toolchain.BINARIES if b.name == name).ldflags.split()
    for var, value in (("gitVersion", f"v{toolchain.K8S_VERSION}"), ("gitMajor", "1"), ("gitMinor", "34")):
        assert f"{package}.{var}={value}" in ldflags


# --- how a cold toolchain is built: downloads at once, two module builds at a time, one `go build` per -ldflags ------

# A `go` that builds nothing real: it records each step (what, in which module, start and end) in $FAKE_GO_EVENTS, writes
# an ELF-looking file where `go build -o` says, and fails the packages named in $FAKE_GO_FAIL and the download of the
# modules named in $FAKE_GO_FAIL_DOWNLOAD. A step of a module named in $FAKE_GO_TOGETHER_<STEP> waits until every module
# named there has started the same step (a hang guard of 60 s, then it fails): they can only pass if they run at once.
FAKE_GO = r"""
import os, pathlib, sys, time
args, module = sys.argv[1:], pathlib.Path.cwd().name
events = pathlib.Path(os.environ["FAKE_GO_EVENTS"])
def note(what):
    with events.open("a") as f:
        f.write(what + "\n")
def together(step):
    names = [n for n in os.environ.get("FAKE_GO_TOGETHER_" + step.upper(), "").split(",") if n]
    if module not in names:
        return
    deadline = time.monotonic() + 60
    while not all(any(e.startswith(f"{step} {n} start") for e in events.read_text().splitlines()) for n in names):
        if time.monotonic() > deadline:
            sys.exit(f"{step} {module}: the others never started theirs")
        time.sleep(0.01)
if args[:2] == ["env", "GOVERSION"]:
    print("go1.26.0")
elif args[:2] == ["mod", "download"]:
    note(f"download {module} start")
    together("download")
    if module in os.environ.get("FAKE_GO_FAIL_DOWNLOAD", "").split(","):
        sys.exit(f"go: example.com/{module}@v1.0.0: reading https://proxy.golang.org: 403 Forbidden")
    note(f"download {module} end")
elif args[0] == "build":
    out = args[args.index("-o") + 1]
    packages = args[args.index("-o") + 2:]
    note(f"build {module} start " + " ".join(packages))
    together("build")
    for p in packages:
        if p in os.environ.get("FAKE_GO_FAIL", "").split(","):
            sys.exit(f"{p}: undefined: compile error")
    outputs = [pathlib.Path(out) / p.rstrip("/").split("/")[-1] for p in packages] if out.endswith("/") else [pathlib.Path(out)]
    for o in outputs:
        o.write_bytes(b"\x7fELF" + o.name.encode())
        o.chmod(0o755)
    note(f"build {module} end")
else:
    sys.exit("fake go: unexpected " + " ".join(args))
"""

FAKE_BINARIES = [
    toolchain.Binary("x", "alpha", "example.com/cmd/x", "-X example.com/v.Version=1"),
    toolchain.Binary("y", "alpha", "example.com/cmd/y", "-X example.com/v.Version=1"),
    toolchain.Binary("z", "alpha", "./z"),
    toolchain.Binary("w", "beta", "."),
    toolchain.Binary("v", "gamma", "example.com/cmd/v/v2"),
]


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three modules (alpha, beta, gamma) built by the fake `go` into a cache of the test's own; the events file."""
    bin_dir, modules = tmp_path / "bin", tmp_path / "modules"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(f"#!{sys.executable}\n{FAKE_GO}")
    (bin_dir / "go").chmod(0o755)
    for m in ("alpha", "beta", "gamma"):
        (modules / m).mkdir(parents=True)
        (modules / m / "go.mod").write_text(f"module example.com/{m}\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GO_EVENTS", str(tmp_path / "events"))
    monkeypatch.setattr(toolchain, "MODULES", modules)
    monkeypatch.setattr(toolchain, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(toolchain, "BINARIES", FAKE_BINARIES)
    monkeypatch.setattr(toolchain, "JOBS", 2)
    return tmp_path / "events"


def _ensure_quietly(*names: str) -> tuple[dict[str, Path | str], str]:
    err = io.StringIO()
    with redirect_stderr(err):
        got = toolchain.ensure(names)
    return got, err.getvalue()


def test_the_binaries_of_a_module_that_share_ldflags_are_built_by_one_go_build(fake_go: Path) -> None:
    got, _ = _ensure_quietly("x", "y", "z", "w", "v")
    builds = sorted(line for line in fake_go.read_text().splitlines() if line.startswith("build") and " start" in line)
    assert builds == [
        "build alpha start ./z",
        "build alpha start example.com/cmd/x example.com/cmd/y",
        "build beta start .",
        "build gamma start example.com/cmd/v/v2",
    ]
    for name, where in got.items():
        assert isinstance(where, Path) and where.name == name and toolchain.cached(where), (name, where)
    assert not list(toolchain.CACHE.rglob("*.partial")), "a finished build leaves no partial file"


def test_the_control_planes_kubernetes_binaries_are_one_go_build() -> None:
    """They share the stamp, so one `go build` loads and compiles their packages once and links the five at once."""
    k8s = [b for b in toolchain.BINARIES if b.module == "k8s"]
    grouped = {tuple(b.name for b in step) for step in toolchain.steps(k8s)}
    assert ("kube-apiserver", "kube-controller-manager", "kubectl", "kube-scheduler", "kubelet") in grouped
    assert ("etcd",) in grouped  # unstamped: apart
    for b in toolchain.BINARIES:  # a binary built with others gets the name go gives it; a lone one is named by -o
        if len(next(s for s in toolchain.steps([x for x in toolchain.BINARIES if x.module == b.module]) if b in s)) > 1:
            assert toolchain.exe_name(b.package) == b.name


def test_every_download_starts_at_once_and_two_modules_build_at_a_time(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each module's download waits until the other's has started, and so does its build: neither could pass if the
    downloads ran one after the other, or the module builds one at a time."""
    monkeypatch.setenv("FAKE_GO_TOGETHER_DOWNLOAD", "alpha,beta")
    monkeypatch.setenv("FAKE_GO_TOGETHER_BUILD", "alpha,beta")
    got, said = _ensure_quietly("x", "y", "z", "w")
    assert all(isinstance(p, Path) for p in got.values()), got
    assert "2 module(s), 2 at a time" in said


def test_a_failed_step_of_several_binaries_is_built_again_one_at_a_time(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """x and y share a `go build`; y does not compile: x is built, and y's result says y's error, with its log."""
    monkeypatch.setenv("FAKE_GO_FAIL", "example.com/cmd/y")
    got, _ = _ensure_quietly("x", "y", "w")
    assert isinstance(got["x"], Path) and toolchain.cached(got["x"]) and isinstance(got["w"], Path)
    why = str(got["y"])
    log = toolchain.module_dir("alpha") / "build.log"
    assert why.startswith("y could not be built") and f"log {log}" in why and "example.com/cmd/y: undefined: compile error" in why
    assert "go build -trimpath -gcflags=all=-dwarf=false -ldflags -s -w -X example.com/v.Version=1 -o" in log.read_text()


def test_a_failed_download_fails_its_modules_binaries_with_its_reason(fake_go: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GO_FAIL_DOWNLOAD", "beta")
    got, _ = _ensure_quietly("x", "w")
    assert isinstance(got["x"], Path)
    assert str(got["w"]).startswith(
        "w could not be built"
    ) and "example.com/beta@v1.0.0: reading https://proxy.golang.org: 403 Forbidden" in str(got["w"])
    assert "build beta start ." not in fake_go.read_text()


def test_a_cached_toolchain_is_found_without_waiting_for_anothers_build(fake_go: Path) -> None:
    """Another run holds the lock (building something else): what this run asks for is cached, so it does not wait."""
    first, _ = _ensure_quietly("x", "w")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,sys; f=open(sys.argv[1],'a'); fcntl.flock(f, 2); print(1, flush=True); sys.stdin.read()",
         str(toolchain.CACHE / ".lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "1"
        again, said = _ensure_quietly("x", "w")
        assert again == first and "waiting" not in said
    finally:
        holder.kill()
        holder.wait()


# --- the simulated cluster's nodes (live/nodes.py), from configs the tests own ------------------------------------


def _nodes(name: str, edit: object = None) -> dict[str, dict[str, Any]]:
    from live import nodes
    from tests import fixtures

    return {n["metadata"]["name"]: n for n in nodes.nodes(fixtures.config(name, edit))}  # type: ignore[arg-type]


def _gpu_nodes(built: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    from live import nodes

    return {k: n for k, n in built.items() if nodes.NODE_SET in n["metadata"]["labels"]}


MAIN = ["node-a", "node-b", "node-c", "node-d"]


@pytest.mark.parametrize(
    ("fixture", "edit", "sets"),
    [
        ("roce", None, {"main": MAIN, "spare": ["node-e", "node-f", "node-g"]}),
        ("tcp", None, {"pool": ["live-pool-0", "live-pool-1"]}),
        ("tcp", lambda d: d["node_sets"][0].update(count=5), {"pool": [f"live-pool-{i}" for i in range(5)]}),
        ("roce", lambda d: d["node_sets"][1].update(nodes=["node-f", "node-e"]), {"main": MAIN, "spare": ["node-f", "node-e"]}),
    ],
    ids=["named", "counted", "counted-grown", "named-shrunk"],
)
def test_one_gpu_node_per_node_of_each_set(fixture: str, edit: object, sets: dict[str, list[str]]) -> None:
    """Named sets give their names (pods are pinned to them by kubernetes.io/hostname), counted sets live-SET-N; each
    node is labelled with its set, so a test can tell where the scheduler put a pod."""
    from live import nodes

    gpu = _gpu_nodes(_nodes(fixture, edit))
    got: dict[str, list[str]] = {}
    for name, n in gpu.items():
        assert n["metadata"]["labels"]["kubernetes.io/hostname"] == name
        assert n["metadata"]["annotations"][nodes.FAKE] == "fake"  # kwok manages it
        got.setdefault(n["metadata"]["labels"][nodes.NODE_SET], []).append(name)
    assert got == sets


@pytest.mark.parametrize(
    ("fixture", "edit", "want"),
    [
        (
            "roce",
            None,
            {"nvidia.com/gpu": "4", "openshift.io/port1rdma": "4", "openshift.io/port2rdma": "4", "cpu": "4096", "memory": "64Ti"},
        ),
        ("tcp", None, {"nvidia.com/gpu": "4", "cpu": "4096", "memory": "64Ti"}),
        (
            "tcp",
            lambda d: d["node_sets"][0].update(gpus_per_node=8, allocatable_cpu="96", allocatable_memory="1000Gi"),
            {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1000Gi"},
        ),
        (
            "roce",
            lambda d: d["fabric"]["attachments"].append({**d["fabric"]["attachments"][0], "network": "port9-network", "interface": "net3"}),
            {"nvidia.com/gpu": "4", "openshift.io/port1rdma": "8", "openshift.io/port2rdma": "4"},
        ),
    ],
    ids=["vfs-per-attachment", "tcp-no-vfs", "cpu-memory-from-config", "shared-resource-counts-twice"],
)
def test_gpu_nodes_offer_the_sets_gpus_vfs_cpu_and_memory(fixture: str, edit: object, want: dict[str, str]) -> None:
    """gpus_per_node as nvidia.com/gpu; one VF per GPU of each attachment's resource (two attachments on one resource:
    twice that); CPU and memory from the set where given, else the most the model accepts (never the reason a pod
    waits, as the preflight does not check what is not known)."""
    for n in _gpu_nodes(_nodes(fixture, edit)).values():
        offered = n["status"]["allocatable"]
        assert n["status"]["capacity"] == offered
        assert {k: offered.get(k) for k in want} == want
        if fixture == "tcp":
            assert not [r for r in offered if r.startswith("openshift.io/")]


@pytest.mark.parametrize(
    ("fixture", "edit", "taints", "labels"),
    [
        ("roce", None, [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], {"nvidia.com/gpu.present": "true"}),
        ("tcp", None, [{"key": "nvidia.com/gpu.product", "value": "H100", "effect": "NoSchedule"}], {}),
        (
            "tcp",
            lambda d: d.update(
                gpu_tolerations=[
                    {"key": "a", "operator": "Exists"},
                    {"key": "b", "operator": "Equal", "value": "x", "effect": "NoExecute"},
                ],
                gpu_node_selector={"pool": "gpu", "zone": "z1"},
            ),
            [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "value": "x", "effect": "NoExecute"}],
            {"pool": "gpu", "zone": "z1"},
        ),
    ],
    ids=["exists", "equal", "several"],
)  # fmt: skip
def test_gpu_nodes_carry_the_selector_labels_and_the_taints_the_stack_tolerates(
    fixture: str, edit: object, taints: list[dict[str, str]], labels: dict[str, str]
) -> None:
    for n in _gpu_nodes(_nodes(fixture, edit)).values():
        assert n["spec"]["taints"] == taints
        assert labels.items() <= n["metadata"]["labels"].items()


@pytest.mark.parametrize("fixture", ["roce", "tcp", "ib"])
def test_a_worker_without_gpus_and_a_tainted_control_plane_node_beside_them(fixture: str) -> None:
    """Where a pod that lost its GPU request, selector or toleration would go: never a GPU node."""
    from live import nodes

    built = _nodes(fixture)
    worker, master = built[nodes.WORKER], built[nodes.CONTROL_PLANE]
    for n in (worker, master):
        assert "nvidia.com/gpu" not in n["status"]["allocatable"] and nodes.NODE_SET not in n["metadata"]["labels"]
    assert worker["spec"]["taints"] == []
    assert master["spec"]["taints"] == [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}]
    assert len(built) == len(_gpu_nodes(built)) + 2


# --- the SR-IOV network operator's controller (live/sriov.py, docs/live.md "SR-IOV operator") ---------------------


@pytest.mark.parametrize(("ci", "required"), [("true", True), ("1", True), ("", False), ("no", False)])
def test_the_sriov_controller_is_required_in_ci(ci: str, required: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI run whose SR-IOV operator tests skipped must not pass; a developer who cannot build it gets the skip."""
    monkeypatch.setenv("CI", ci)
    assert (set(toolchain.SRIOV) <= set(toolchain.required())) is required


def test_the_sriov_module_pins_the_operator_release_the_proxy_serves() -> None:
    """v1.5.0 exactly (the proxy serves exact versions only, docs/live.md), built from the module's own packages."""
    pinned = (ROOT / "live" / "toolchain" / "sriov" / "go.mod").read_text()
    assert f"\t{toolchain.SRIOV_MODULE} v1.5.0\n" in pinned or f"require {toolchain.SRIOV_MODULE} v1.5.0\n" in pinned
    main = (ROOT / "live" / "toolchain" / "sriov" / "main.go").read_text()
    assert f'"{toolchain.SRIOV_MODULE}/controllers"' in main


def test_a_sriov_controller_without_its_crds_and_templates_says_how_to_rebuild(tmp_path: Path) -> None:
    from live import sriov

    binary = built(tmp_path)
    (tmp_path / "crds").mkdir()
    with pytest.raises(FileNotFoundError, match=r"cni-config.*remove .*kubectl.*python -m live.toolchain"):
        sriov.assets(binary)
    (tmp_path / "cni-config").mkdir()
    assert sriov.assets(binary) == {"crds": tmp_path / "crds", "cni-config": tmp_path / "cni-config"}


# --- OpenShift's SCC admission (live/scc.py, docs/live.md "SCC admission") ---------------------------------------


@pytest.mark.parametrize(("ci", "required"), [("true", True), ("1", True), ("", False), ("no", False)])
def test_scc_admission_is_required_in_ci(ci: str, required: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI run whose SCC admission tests skipped must not pass; a developer who cannot build it gets the skip."""
    monkeypatch.setenv("CI", ci)
    assert (set(toolchain.SCC) <= set(toolchain.required())) is required
    assert set(toolchain.SCC) <= set(toolchain.EVERYTHING)  # `python -m live.toolchain` builds it


def test_scc_admission_is_openshifts_plugin_built_with_the_control_plane() -> None:
    """The webhook runs apiserver-library-go's sccadmission at the version the proxy serves, from the control plane's
    module (so it shares its k8s build); library-go, which the proxy does not serve, is replaced by the tier's own
    pkg/security/uid and nothing else."""
    (scc,) = [b for b in toolchain.BINARIES if b.name in toolchain.SCC]
    assert scc.module == "k8s"
    pinned = (ROOT / "live" / "toolchain" / "k8s" / "go.mod").read_text()
    assert "\tgithub.com/openshift/apiserver-library-go v0.0.0-20250917015549-a8019f39f670\n" in pinned
    assert "replace github.com/openshift/library-go => ./librarygo\n" in pinned
    main = (ROOT / "live" / "toolchain" / "k8s" / "sccadmission" / "main.go").read_text()
    assert '"github.com/openshift/apiserver-library-go/pkg/securitycontextconstraints/sccadmission"' in main
    local = ROOT / "live" / "toolchain" / "k8s" / "librarygo"
    packages = sorted(p.parent.relative_to(local).as_posix() for p in local.rglob("*.go"))
    assert set(packages) == {"pkg/security/uid"}
