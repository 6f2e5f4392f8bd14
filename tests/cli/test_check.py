"""`python -m stacks check` as a user meets it: a stack file's mistake in a real process ends in its exit code (1 for a
preflight error, 2 for an invalid config naming the file, the line and the field), never a traceback; accepted warnings
are counted (-v lists them), a stale acceptance is named at its line, and what the committed stack's check did not have
is marked new; `check` reads the objects the program declares, without rendering, and finds what the rendering shows.
Stack modules run in a project folder of the test's own."""

from __future__ import annotations

import cProfile
import pstats
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import policy
import stacks
from bench import scale
from cli.checking import preflight as _preflight
from cli.main import main
from components.program import layout, objects, patches, sources
from config import project as project_folder
from config.stack import ClusterConfig
from tests import fixtures
from tests.fixtures import MASTER, Data, Edit, W, add_namespace, add_workload, both, existing, mount, port, toleration
from tests.helpers import (
    BROAD,
    CONTROL_PLANE,
    DEBUGGER,
    IMAGE,
    MEMLOCK_REASON,
    MOUNTS,
    NAMES,
    NAMESPACES,
    ROOT,
    SCC,
    SCC_FACTS,
    YAML11,
    cases_of,
    classify,
    yaml_text,
)
from tools.render import run

CAPS = ["IPC_LOCK"]


# --- a stack file in a real process: no traceback, the exit code, the config path ---------------------------------------

CLI = [
    (
        SCC_FACTS,
        "roce",
        lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["NET_RAW"]),
        1,
        "error scc-capabilities security.existing_allowed_capabilities",
        "Job team-a/train-r1, StatefulSet team-a/dev: spec.",
    ),
    (
        NAMES,
        "roce",
        both(
            lambda d: d["workloads"][0]["ports"].append({"name": "a-b", "port": 9000, "route": True}),
            add_workload("solo", name="dev-a", namespace="team-a", ports=[{"name": "b", "port": 9000, "route": True}]),
        ),
        2,
        "workloads[dev-a].ports[b].name",
        "workloads[dev].ports[a-b].name",
    ),
    (
        MOUNTS,
        "roce",
        mount("dev", 1, mount_path="/tmp", read_only=True),
        1,
        "error mount-points workloads[dev].mounts[1].mount_path (",
        "/tmp/launcher.env",
    ),
    (IMAGE, "tcp", W("one", image="quay.io/example/pytorch:latest"), 0, "warning image workloads[one].image (", "@sha256:<digest>"),
    (MEMLOCK_REASON, "roce", lambda d: None, 0, "roce: ok: 0 errors, 0 warnings, 1 info (-v lists them)", "1 info"),
    (NAMESPACES, "tcp", add_namespace("openshift-config"), 2, "namespaces[1]", "a namespace of the platform"),
    (
        DEBUGGER,
        "roce",
        port("dev", 1, route=True),
        1,
        "error debugger-route workloads[dev].ports[debugpy].route (",
        "oc port-forward POD 5678",
    ),
    (
        SCC,
        "roce",
        existing("restricted-v2", existing_allowed_capabilities=CAPS),
        1,
        "error scc-capabilities security.scc (",
        "'restricted-v2' is an SCC OpenShift ships",
    ),
    (
        CONTROL_PLANE,
        "tcp",
        lambda d: d["gpu_tolerations"].append(toleration(MASTER)),
        1,
        "error control-plane-nodes gpu_tolerations[1] (",
        "node-role.kubernetes.io/master",
    ),
]
CLI += [
    # the audit's case: an existing SCC whose facts allow every capability, and root, bound to the pods' service account
    (BROAD, "roce", existing("site-rdma"), 1, "error privileged-scc security.broad_grant_reason (",
     "allows every capability (allowedCapabilities *), more than its pods need, and is granted to team-a/trainer"),
    (BROAD, "roce", existing("site-rdma", broad_grant_reason="the lab's own SCC until ours is approved"), 0,
     "warning privileged-scc security.broad_grant_reason (", "broad_grant_reason: the lab's own SCC until ours is approved"),
]  # fmt: skip
classify(CLI)


@pytest.mark.parametrize("cls,fixture,edit,code,where,phrase", CLI, ids=[c[0].split(":")[0] for c in CLI])
def test_check_from_a_file_in_a_real_process(
    cls: str, fixture: str, edit: Edit, code: int, where: str, phrase: str, tmp_path: Path
) -> None:
    data = fixtures.data(fixture)
    edit(data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml_text(data, sort_keys=False), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    assert proc.returncode == code, output  # 1: a preflight error; 2: an invalid config (the file and the path named)
    if code == 2:
        assert re.match(
            rf"error: {re.escape(str(path))}: invalid configuration\n  {re.escape(where)} \({re.escape(str(path))}:\d+\): ", proc.stderr
        ), proc.stderr
    else:
        assert where in proc.stdout, proc.stdout
    assert phrase in " ".join(output.split())  # a long finding wraps


@cases_of(YAML11)
def test_an_octal_port_from_a_file_in_a_real_process(tmp_path: Path) -> None:
    text = yaml_text(fixtures.tcp(), sort_keys=False).replace("  transport: tcp\n", "  transport: tcp\n  master_port: 017\n", 1)
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"error: {path}: invalid configuration\n"
        f"  workloads[one].master_port ({path}:27): 017 is an octal number in YAML 1.1 (it reads as 15, not 17): write 17, or "
        "quote it ('017') if it is text\n"
    )


# --- stack modules in a project of the test's own: acceptances, counts, what is new --------------------------------------

MODULE = """from config import AcceptedWarning, ClusterConfig, NodeSet, Security, ServiceAccount, Workload
CONFIG = ClusterConfig(
    name="{name}",
    description="x",
    gpu_model="H100",
    api_host="api.lab.example.org",
    node_sets=[NodeSet(name="n", count=4, gpus_per_node=4)],
    namespaces=[
        "ns",
        "other",
    ],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="a", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa", gpus_per_node=4, transport="tcp"),{more}
    ],
    accepted_warnings=[
        AcceptedWarning(rule="image", object="StatefulSet ns/a", value="quay.io/a/b:1", reason="tags only"),
    ],
)
"""


WORKLOAD_B = """
        Workload(name="b", namespace="ns", user="u", image="quay.io/a/b:2", service_account="sa", gpus_per_node=4, transport="tcp"),"""


def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, modules: dict[str, str], commit: bool = True) -> Path:
    """A project folder of the test's own with these stack modules (the real clusters/ stays untouched), committed in a
    git repository of its own unless `commit` is false."""
    root = tmp_path / "project"
    (root / stacks.CLUSTERS).mkdir(parents=True)
    for name, text in modules.items():
        write_module(root, name, text)
    monkeypatch.setattr(project_folder, "ROOT", root)
    if commit:
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "committed stacks"]):
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args], cwd=root, check=True)
    return root


def write_module(root: Path, name: str, text: str) -> None:
    (root / stacks.CLUSTERS / f"{name}.py").write_text(text, encoding="utf-8")
    sys.modules.pop(f"{stacks.CLUSTERS}.{name}", None)  # the next load runs the edited module


def checked(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out.splitlines()


def line_of(root: Path, name: str, text: str) -> int:
    lines = (root / stacks.CLUSTERS / f"{name}.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, start=1) if text in line)


@pytest.mark.parametrize("tag", ["quay.io/a/b:3", "quay.io/a/b"], ids=["another tag", "no tag"])
def test_a_stale_acceptance_is_reported_at_its_line(
    tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copied module's acceptance of a tagged image no longer accepts the image its workload runs now."""
    text = MODULE.format(name="lab", more="").replace('image="quay.io/a/b:1", service', f'image="{tag}", service')
    root = project(tmp_path, monkeypatch, {"lab": text}, commit=False)
    code, lines = checked(["lab"], capsys)
    at = f"(clusters/lab.py:{line_of(root, 'lab', 'AcceptedWarning(rule=')})"
    assert code == 0 and any(line.startswith(f"lab: warning accepted-warnings accepted_warnings[0] {at}: ") for line in lines), lines
    assert any(line.startswith("lab: warning image workloads[a].image") for line in lines), lines  # not accepted any more
    assert f"value='{tag}'" in " ".join(" ".join(lines).split())  # the value to write, if the reason holds for it


@pytest.mark.parametrize("verbose", [False, True], ids=["counted", "-v lists them"])
def test_accepted_warnings_are_counted_and_listed_with_v(
    verbose: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project(tmp_path, monkeypatch, {"lab": MODULE.format(name="lab", more=WORKLOAD_B)}, commit=False)
    code, lines = checked(["lab", *(["-v"] if verbose else [])], capsys)
    assert code == 0
    heads = [line for line in lines if not line.startswith("    ")]
    unaccepted = [h for h in heads if h.startswith("lab: warning image workloads[b].image")]
    accepted = [h for h in heads if h.startswith("lab: warning image workloads[a].image")]
    assert len(unaccepted) == 1, lines  # what is not accepted is always printed
    assert len(accepted) == (1 if verbose else 0), lines
    assert any("[accepted: tags only]" in line for line in lines) == verbose
    summary = heads[-1]
    assert summary.startswith("lab: ok: 0 errors, 2 warnings, 1 accepted"), summary
    assert ("(-v lists them)" in summary) == (not verbose), summary


EDITS = [
    # (case, the module after the edit, the findings marked new, by the start of their lines, sorted)
    ("no edit", MODULE.format(name="lab", more=""), []),
    ("a workload added", MODULE.format(name="lab", more=WORKLOAD_B), ["new warning image workloads[b].image"]),
    (
        "the accepted tag changed",
        MODULE.format(name="lab", more="").replace('image="quay.io/a/b:1", service', 'image="quay.io/a/b:3", service'),
        ["new warning accepted-warnings accepted_warnings[0]", "new warning image workloads[a].image"],
    ),
    (
        "a workload added that does not fit",
        MODULE.format(name="lab", more=WORKLOAD_B).replace('name="a", namespace="ns"', 'name="a", nodes=4, namespace="ns"'),
        ["new error capacity workloads[", "new warning image workloads[b].image"],  # no committed render: the search's culprit
    ),
]


@pytest.mark.parametrize("case,edited,new", EDITS, ids=[e[0] for e in EDITS])
def test_check_marks_new_what_the_committed_stacks_check_did_not_have(
    case: str, edited: str, new: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, monkeypatch, {"lab": MODULE.format(name="lab", more="")})
    write_module(root, "lab", edited)
    code, lines = checked(["lab"], capsys)
    marked = sorted(line.removeprefix("lab: ") for line in lines if line.startswith("lab: new "))
    assert len(marked) == len(new) and all(m.startswith(n) for m, n in zip(marked, new, strict=True)), lines
    summary = lines[-1]
    assert (f", {len(new)} new" in summary) == bool(new) and ("new" in summary) == bool(new), summary
    assert code == (1 if any(n.startswith("new error") for n in new) else 0)
    # the unedited finding, printed with it, is not new (its line moved, its wording is the same)
    assert not any(line.startswith("lab: new warning image workloads[a]") for line in lines) or "tag changed" in case


@pytest.mark.parametrize("where", ["outside git", "a ref without the stack"])
def test_new_is_marked_only_where_the_committed_stack_is_known(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, monkeypatch, {"lab": MODULE.format(name="lab", more=WORKLOAD_B)}, commit=where != "outside git")
    argv = ["lab"]
    if where == "a ref without the stack":
        write_module(root, "other", MODULE.format(name="other", more="").replace("api.lab", "api.other"))
        subprocess.run(["git", "rm", "-q", "--cached", "clusters/lab.py"], cwd=root, check=True)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "clusters/other.py"], cwd=root, check=True)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lab gone"], cwd=root, check=True)
        argv += ["--against", "HEAD"]
    _, lines = checked(argv, capsys)
    image_b = [line for line in lines if "image workloads[b].image" in line]
    assert image_b, lines
    # outside git nothing can be told new; at a ref that has no such stack, everything printed is
    assert all(line.startswith("lab: new warning") for line in image_b) == (where != "outside git"), image_b


@pytest.mark.parametrize(
    "head,written",
    [("shared-projects api_host", 'api_host="api.lab.example.org"'), ("shared-projects namespaces[0]", '"ns",')],
    ids=["api_host", "namespaces[0]"],
)
def test_a_copied_module_warns_at_the_lines_that_write_the_shared_values(
    head: str, written: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, monkeypatch, {"lab": MODULE.format(name="lab", more="")}, commit=False)
    write_module(root, "mylab", MODULE.format(name="mylab", more="").replace('    "other",\n', '    "mine",\n'))
    _, lines = checked(["mylab", "lab"], capsys)
    for name in ("mylab", "lab"):
        expected = f"{name}: warning {head} (clusters/{name}.py:{line_of(root, name, written)}):"
        assert any(line.startswith(expected) for line in lines), (expected, lines)
    # the project only one stack deploys into is not named
    assert not any("namespaces[1]" in line for line in lines)


# --- check reads the declared objects --------------------------------------------------------------------------------


def _broken_capacity(d: Data) -> None:
    # dev's TCP variant runs beside it: with the bandwidth check, six 4-GPU pods on main's four nodes
    fixtures.workload(d, "dev")["tcp_variants"][0].update(state="running", alongside=True)


CHECKED: list[tuple[str, Callable[[], ClusterConfig]]] = [
    *((name, lambda name=name: fixtures.config(name)) for name in sorted(fixtures.FIXTURES)),  # type: ignore[misc]
    ("roce, a capacity error", lambda: fixtures.config("roce", _broken_capacity)),
    ("generated, 50 workloads on 16 named nodes", lambda: scale.config(50, 16, named=True)),
    ("generated, 50 workloads on 512 counted nodes", lambda: scale.config(50, 512)),
]


@pytest.mark.parametrize("case,build", CHECKED, ids=[c[0] for c in CHECKED])
def test_check_finds_what_the_rendering_shows(case: str, build: Callable[[], ClusterConfig]) -> None:
    """`check` (no rendering) and `render` (the rendering) report the same findings, located in the same config lines."""
    config = build()
    assert _preflight(config, None, None) == _preflight(config, run(config), None)
    assert _preflight(config, None, None) == policy.check(config, objects(config), patches(config), sources=sources(layout(config)))


def test_check_names_the_capacity_culprit_without_rendering(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = fixtures.roce()
    _broken_capacity(data)
    path = tmp_path / "roce.yaml"
    path.write_text(yaml_text(data, sort_keys=False), encoding="utf-8")
    assert main(["check", "--config", str(path)]) == 1
    out = capsys.readouterr().out
    assert "roce: error capacity bandwidth_checks[fabric] (" in out and "FAIL: 1 error" in out, out


# --- the largest stack the bounds accept ------------------------------------------------------------------------------


def calls_of_check(stack: dict[str, Any]) -> tuple[int, int]:
    """The Python function calls `check` of a stack makes (counted by cProfile, whatever the machine's load: validation
    and the preflight, as `python -m stacks check` runs them), and the objects it checks."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        _, _, count = scale.check(stack)
    finally:
        profile.disable()
    return pstats.Stats(profile).total_calls, count  # type: ignore[attr-defined]


def test_check_of_the_largest_accepted_stack_in_process() -> None:
    """`check` of the largest stack the bounds accept does work that grows with what it checks, not with its square:
    counted in Python calls, never in seconds (measured: 570 calls an object for the largest, 7,422 objects; 920 and 1,045
    an object for 100 and 200 workloads on 4,096 nodes). `make bench` times it (docs/performance.md)."""
    scale.check(scale.data(5, 16))  # imports and first-run caches
    calls, count = calls_of_check(scale.largest())
    assert count > 7000 and calls < 1_000 * count, (calls, count)
    (half, n), (whole, m) = calls_of_check(scale.data(100, 4096)), calls_of_check(scale.data(200, 4096))
    assert whole / m < 1.3 * half / n, (half, n, whole, m)  # linear: 1.14; work quadratic in the workloads doubles it


def test_check_of_the_largest_accepted_stack_in_a_fresh_process(tmp_path: Path) -> None:
    path = tmp_path / "largest.yaml"
    """As a user runs it: the largest stack's YAML read with the line of every value, checked, 0 errors. The timeout is a
    hang guard (about 3.5 s here: `make bench` times it); the work is counted in process, above."""
    path.write_text(yaml_text(scale.largest(), sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 errors" in done.stdout
