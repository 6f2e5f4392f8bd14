"""Drift and an interrupted run, offline (docs/lifecycle.md "Drift", "An interrupted run"): what `python -m stacks
drift` reports for hand edits, in the stack file's words, and the refresh `python -m stacks recover` prints for a
killed run's pending operations. The live tier runs both against a real API server and engine
(live/tests/test_convergence.py). Configs are the tests' own (fixtures)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from cli.main import main
from components.kube import logical_name
from config import project
from tests import fixtures
from tools import drift, recovery


def live_of(name: str, edit: Any = None) -> tuple[Any, list[Any], list[dict[str, Any]]]:
    """A fixture's declared objects, and the cluster as `pulumi up` left it (what the server adds included), edited."""
    config = fixtures.config(name)
    declared = drift.declared_for(config, "all")
    live = []
    for d in declared:
        obj = copy.deepcopy(d.object)
        obj["metadata"].update(uid="u-1", resourceVersion="7", managedFields=[{"manager": "pulumi-kubernetes"}])
        obj["status"] = {"observedGeneration": 1}
        if obj["kind"] == "ServiceAccount":
            obj["secrets"] = [{"name": "trainer-dockercfg-x"}]  # OpenShift's controller adds these: not the stack's
        live.append(obj)
    if edit is not None:
        edit(live)
    return config, declared, live


def find(live: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in live if o["kind"] == kind and o["metadata"]["name"] == name)


def test_what_up_left_is_no_drift_whatever_the_server_adds() -> None:
    config, declared, live = live_of("roce")
    assert drift.drift(config, declared, live) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda live: find(live, "StatefulSet", "dev")["spec"].update(replicas=3), "replicas 3 on the cluster, 2 in the stack"),
        (lambda live: live.remove(find(live, "ServiceAccount", "trainer")), "missing on the cluster"),
        (lambda live: find(live, "StatefulSet", "dev")["metadata"]["labels"].update({"app.kubernetes.io/managed-by": "kubectl"}),
         "label app.kubernetes.io/managed-by kubectl on the cluster, pulumi in the stack"),
        (lambda live: find(live, "NetworkPolicy", "dev")["spec"].update(podSelector={}), "spec.podSelector"),
    ],
    ids=["scale", "deleted", "label", "policy"],
)  # fmt: skip
def test_a_hand_edit_is_named_by_the_entry_that_declares_it(edit: Any, expected: str) -> None:
    config, declared, live = live_of("roce", edit)
    found = drift.drift(config, declared, live)
    assert len(found) == 1, found
    assert expected in found[0].what and not found[0].added
    assert found[0].where.startswith(("workloads[dev]", "security.service_accounts[")), found[0].where
    assert "(fixture roce" not in found[0].where  # a fixture has no file: no location is invented


def test_an_env_variable_changed_or_added_by_hand_is_named() -> None:
    def edit(live: list[dict[str, Any]]) -> None:
        env = find(live, "StatefulSet", "dev")["spec"]["template"]["spec"]["containers"][0]["env"]
        next(e for e in env if "value" in e)["value"] = "changed"
        env.append({"name": "ADDED_BY_HAND", "value": "1"})

    config, declared, live = live_of("roce", edit)
    found = drift.drift(config, declared, live)
    changed, added = sorted(found, key=lambda f: f.added)
    assert not changed.added and changed.what.startswith("env ") and "changed on the cluster" in changed.what
    assert added.added and added.what.startswith("env ADDED_BY_HAND=1 on the cluster, not in the stack")


def test_quantities_in_the_servers_canonical_form_are_not_drift() -> None:
    def edit(live: list[dict[str, Any]]) -> None:
        for c in find(live, "StatefulSet", "dev")["spec"]["template"]["spec"]["containers"]:
            limits = c.get("resources", {}).get("limits", {})
            if "memory" in limits:
                limits["memory"] = {"8Gi": "8192Mi"}.get(limits["memory"], limits["memory"])

    config, declared, live = live_of("roce", edit)
    assert drift.drift(config, declared, live) == []


def test_the_report_says_how_to_restore_and_what_stays(capsys: pytest.CaptureFixture[str]) -> None:
    config, declared, live = live_of("roce", lambda live: find(live, "StatefulSet", "dev")["spec"].update(replicas=0))
    text = drift.report(config, drift.drift(config, declared, live), "lab")
    assert "pulumi up --refresh -s lab" in text and 'state="stopped"' in text
    assert drift.report(config, [], "lab").endswith("no drift: the cluster holds what the stack declares\n")


# --- an interrupted run ---------------------------------------------------------------------------------------


def export(*ops: tuple[str, dict[str, Any] | None]) -> dict[str, Any]:
    pending = []
    for i, (op, obj) in enumerate(ops):
        urn = f"urn:pulumi:lab::gpu-training::gpu-training:x$kubernetes:core/v1:Thing::r{i}"
        pending.append({"type": op, "resource": {"urn": urn, "type": "kubernetes:x", "inputs": obj or {"a": 1}}})
    return {"version": 3, "deployment": {"resources": [], "pending_operations": pending}}


SA = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer", "namespace": "team-a"}}
SCC = {"apiVersion": "security.openshift.io/v1", "kind": "SecurityContextConstraints", "metadata": {"name": "gpu-rdma"}}


def test_a_create_that_happened_is_imported_one_that_did_not_is_cleared() -> None:
    ops = recovery.pending(export(("creating", SA), ("creating", SCC), ("updating", SA)))
    text, args = recovery.plan("lab", ops, {("ServiceAccount", "team-a", "trainer")})
    assert args is not None
    i = args.index("--import-pending-creates")
    # The CLI's flag is a string array: one value per flag, URN and ID alternating (refresh.go pendingCreatesToImports).
    assert args[i : i + 4] == ["--import-pending-creates", ops[0].urn, "--import-pending-creates", "team-a/trainer"]
    assert "--clear-pending-creates" in args and args[:5] == ["pulumi", "refresh", "-s", "lab", "--yes"]
    assert "creating ServiceAccount team-a/trainer: it exists on the cluster" in text
    assert "creating SecurityContextConstraints gpu-rdma: not on the cluster" in text
    assert "updating ServiceAccount team-a/trainer: the refresh reads it again" in text
    assert "pulumi cancel --yes -s lab" in text


@pytest.mark.parametrize("on_cluster", [set(), {("SecurityContextConstraints", "", "gpu-rdma")}])
def test_only_what_is_needed_is_asked_of_the_refresh(on_cluster: set[tuple[str, str, str]]) -> None:
    _, args = recovery.plan("lab", recovery.pending(export(("creating", SCC))), on_cluster)
    assert args is not None
    assert ("--import-pending-creates" in args) == bool(on_cluster)
    assert ("--clear-pending-creates" in args) != bool(on_cluster)


def test_no_pending_operations_means_up_converges() -> None:
    text, args = recovery.plan("lab", recovery.pending(export()), set())
    assert args is None and "converges" in text


def test_a_resource_that_is_not_an_object_is_cleared_not_imported() -> None:
    ops = recovery.pending(export(("creating", None)))
    assert ops[0].obj is None
    _, args = recovery.plan("lab", ops, set())
    assert args is not None and "--import-pending-creates" not in args


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"deployment": 3}'])
def test_a_state_file_that_is_not_an_export_is_one_clear_error(text: str, tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(stacks.ConfigError, match="not a stack export"):
        recovery.exported("lab", str(path))


def test_the_commands_read_a_pulumi_stack_of_a_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = fixtures.tcp()
    data["name"] = "lab"
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    (tmp_path / "Pulumi.lab.yaml").write_text(
        yaml.safe_dump({"config": {"gpu-training:configFile": "lab.yaml", "kubernetes:context": "lab"}}), encoding="utf-8"
    )
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    config = stacks.load("lab")
    live = [copy.deepcopy(d.object) for d in drift.declared_for(config, "all")]
    find(live, "StatefulSet", "one")["spec"]["replicas"] = 4
    (tmp_path / "live.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": live}), encoding="utf-8")
    assert main(["drift", "lab", "--live", str(tmp_path / "live.yaml")]) == 1
    out = capsys.readouterr().out
    assert "workloads[one] (lab.yaml:" in out and "replicas 4 on the cluster, 1 in the stack" in out
    sts = find(live, "StatefulSet", "one")
    (tmp_path / "state.json").write_text(json.dumps(export(("creating", sts))), encoding="utf-8")
    assert main(["recover", "lab", "--state", str(tmp_path / "state.json"), "--live", str(tmp_path / "live.yaml")]) == 0
    out = capsys.readouterr().out
    assert (
        "--import-pending-creates 'urn:pulumi:lab::gpu-training::gpu-training:x$kubernetes:core/v1:Thing::r0' "
        f"--import-pending-creates {logical_name(sts)}" in out
    )
    assert main(["drift", "nope"]) == 2 and "no Pulumi.nope.yaml" in capsys.readouterr().err


def test_recover_without_the_pulumi_cli_says_what_to_install(
    fixture_project: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a new user got was `[Errno 2] No such file or directory: 'pulumi'`."""
    fixture_project("roce")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    assert main(["recover", "roce"]) == 2
    err = capsys.readouterr().err
    assert "the Pulumi CLI, which is not on PATH: install it" in err and "recover roce --state FILE" in err and "Errno" not in err


# --- a file backend a killed run left half-written ----------------------------------------------------------------------


def backend(tmp_path: Path, attrs: bytes, lock: bool) -> Path:
    """A file:// state backend as a run killed while writing left it (the live tier saw this: an empty `.attrs`)."""
    stacks_dir = tmp_path / "state" / ".pulumi" / "stacks" / "gpu-training"
    stacks_dir.mkdir(parents=True)
    (tmp_path / "state" / ".pulumi" / "meta.yaml").write_text("version: 1\n", encoding="utf-8")  # the project-scoped layout
    (stacks_dir / "lab.json").write_text(json.dumps(export()), encoding="utf-8")
    (stacks_dir / "lab.json.attrs").write_bytes(attrs)
    (stacks_dir / "lab.json.bak.attrs").write_bytes(b'{"user.content_type":""}')
    if lock:
        locks = tmp_path / "state" / ".pulumi" / "locks" / "organization" / "gpu-training" / "lab"
        locks.mkdir(parents=True)
        (locks / "a1.json").write_text("{}", encoding="utf-8")
    return tmp_path / "state"


@pytest.mark.parametrize("url", ["file://{root}", "file://{root}?no_tmp_dir=true"])
def test_a_file_backend_is_found_from_the_environment_or_the_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    root = backend(tmp_path, b"", lock=False)
    monkeypatch.setenv("PULUMI_BACKEND_URL", url.format(root=root))
    assert recovery.diy_root() == root
    monkeypatch.delenv("PULUMI_BACKEND_URL")
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "credentials.json").write_text(json.dumps({"current": url.format(root=root)}), encoding="utf-8")
    assert recovery.diy_root() == root
    (tmp_path / "home" / "credentials.json").write_text(json.dumps({"current": "https://api.pulumi.com"}), encoding="utf-8")
    assert recovery.diy_root() is None


@pytest.mark.parametrize(("attrs", "broken"), [(b"", True), (b'{"user.content_type":""}', False)])
def test_an_empty_attributes_file_is_named_with_its_fix(tmp_path: Path, attrs: bytes, broken: bool) -> None:
    root = backend(tmp_path, attrs, lock=False)
    assert recovery.half_written(root, "lab") == ([root / ".pulumi" / "stacks" / "gpu-training" / "lab.json.attrs"] if broken else [])
    assert recovery.half_written(root, "other") == []


@pytest.mark.parametrize("locked", [True, False])
def test_a_lock_left_by_the_killed_run_is_seen_in_a_file_backend(tmp_path: Path, locked: bool) -> None:
    root = backend(tmp_path, b"{}", lock=locked)
    found = recovery.locks(root, "lab")
    assert len(found) == int(locked)
    text, _ = recovery.plan("lab", recovery.pending(export(("creating", SA))), set(), found)
    assert ("the stack is locked (1 lock file(s))" in text) == locked
    assert ("pulumi cancel --yes -s lab" in text) == locked
