"""`python -m stacks diff`: what a reviewer reads about a change, object by object and field by field."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest

from cli.main import main
from tools.diff import DiffError, committed, diff_trees, diff_values, read_folder, report

STS_PATH = "nccl-test/statefulset-h-kim.yaml"
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: nccl-test}\ndata: {k: VALUE}\n"


def statefulset(hca: str = "=mlx5_6,mlx5_7", replicas: int = 2) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "h-kim", "namespace": "nccl-test", "annotations": {"k8s.v1.cni.cncf.io/networks": "a@net1"}},
        "spec": {
            "replicas": replicas,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "training",
                            "command": ["python3", "/opt/launcher/launcher.py"],
                            "env": [{"name": "NCCL_IB_DISABLE", "value": "0"}, {"name": "NCCL_IB_HCA", "value": hca}],
                            "resources": {"limits": {"nvidia.com/gpu": 4}},
                        }
                    ],
                    "volumes": [{"name": "launcher", "configMap": {"name": "h-kim-launcher"}}],
                }
            },
        },
    }


def texts(changes: list) -> list[str]:
    return [line for f in changes for line in f.lines()]


def test_named_list_items_are_addressed_by_name_not_position():
    old, new = statefulset(), statefulset(hca="=mlx5_8")
    assert texts(diff_values(old, new)) == ["spec.template.spec.containers[training].env[NCCL_IB_HCA].value: '=mlx5_6,mlx5_7' -> '=mlx5_8'"]


def test_an_inserted_env_var_is_one_addition_not_a_shift_of_every_later_entry():
    old, new = statefulset(), statefulset()
    new["spec"]["template"]["spec"]["containers"][0]["env"].insert(0, {"name": "NCCL_DEBUG", "value": "INFO"})
    assert texts(diff_values(old, new)) == [
        'spec.template.spec.containers[training].env[NCCL_DEBUG]: added {"name": "NCCL_DEBUG", "value": "INFO"}'
    ]


def test_reordered_named_items_are_reported():
    old, new = statefulset(), statefulset()
    new["spec"]["template"]["spec"]["containers"][0]["env"].reverse()
    assert texts(diff_values(old, new)) == [
        'spec.template.spec.containers[training].env (order of names): ["NCCL_IB_DISABLE", "NCCL_IB_HCA"] -> '
        '["NCCL_IB_HCA", "NCCL_IB_DISABLE"]'
    ]


def test_keys_with_dots_and_slashes_are_quoted_and_scalar_lists_compare_whole():
    old, new = statefulset(), statefulset()
    new["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] = "b@net1"
    c = new["spec"]["template"]["spec"]["containers"][0]
    c["resources"]["limits"]["nvidia.com/gpu"] = 8
    c["command"] = ["bash", "-c", "run"]
    del new["spec"]["template"]["spec"]["volumes"]
    assert texts(diff_values(old, new)) == [
        "metadata.annotations[\"k8s.v1.cni.cncf.io/networks\"]: 'a@net1' -> 'b@net1'",
        'spec.template.spec.containers[training].command: ["python3", "/opt/launcher/launcher.py"] -> ["bash", "-c", "run"]',
        'spec.template.spec.containers[training].resources.limits["nvidia.com/gpu"]: 4 -> 8',
        'spec.template.spec.volumes: removed (was [{"configMap": {"name": "h-kim-launcher"}, "name": "launcher"}])',
    ]


def test_trees_report_added_removed_and_changed_objects_and_outputs():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "h-kim-headless", "namespace": "nccl-test"}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "old-job", "namespace": "nccl-test"}}
    old = {STS_PATH: statefulset(), "nccl-test/job-old-job.yaml": job, "outputs.json": {"workloads": {"h-kim": {"replicas": 2}}}}
    new = {
        STS_PATH: statefulset(replicas=3),
        "nccl-test/service-h-kim-headless.yaml": svc,
        "outputs.json": {"workloads": {"h-kim": {"replicas": 3}}},
    }
    changes = diff_trees(old, new)
    assert [(c.status, c.label) for c in changes] == [
        ("removed", "Job nccl-test/old-job"),
        ("added", "Service nccl-test/h-kim-headless"),
        ("changed", "StatefulSet nccl-test/h-kim"),
        ("changed", "outputs.json"),
    ]
    text = report("barcelona", "HEAD", changes, total=len(new))
    assert text.splitlines()[0] == "barcelona: 1 added, 1 removed, 2 changed, 0 unchanged (HEAD -> working tree)"
    assert "    spec.replicas: 2 -> 3" in text
    assert "    workloads.h-kim.replicas: 2 -> 3" in text
    assert diff_trees(old, copy.deepcopy(old)) == []


def test_a_dropped_patch_leaves_the_claim_and_a_dropped_claim_is_refused():
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "root", "namespace": "nfs"}}
    old = {
        "nfs/patch-persistentvolumeclaim-root.yaml": claim,
        "nfs/persistentvolumeclaim-data.yaml": {**claim, "metadata": {"name": "data", "namespace": "nfs"}},
    }
    text = report("cairo", "HEAD", diff_trees(old, {}), total=0)
    patch_block, claim_block = text.split("PersistentVolumeClaim nfs/root (patch)", 1)[1].split("PersistentVolumeClaim nfs/data", 1)
    assert "the patch is dropped: the object keeps its fields" in patch_block and "deletes its data" not in patch_block
    assert "deleting a claim deletes its data" in claim_block


def test_a_launcher_change_shared_by_every_configmap_is_shown_once():
    def cm(name: str, source: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {"launcher.py": source}}

    before, after = "a = 1\nb = 2\nc = 3\n", "a = 1\nb = 20\nc = 3\n"
    old = {"ns/configmap-x.yaml": cm("x", before), "ns/configmap-y.yaml": cm("y", before)}
    new = {"ns/configmap-x.yaml": cm("x", after), "ns/configmap-y.yaml": cm("y", after)}
    text = report("s", "HEAD", diff_trees(old, new), total=2)
    assert text.count("-b = 2") == 1 and text.count("+b = 20") == 1
    assert 'data["launcher.py"]: text changed, the same change as in ConfigMap ns/x' in text


# --- against git ---------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, cwd=repo, check=True, capture_output=True, text=True).stdout


def test_committed_render_at_a_ref_against_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    repo = tmp_path / "repo"
    stack = repo / "project" / "rendered" / "demo"  # the project may sit in a subfolder of the repository
    (stack / "nccl-test").mkdir(parents=True)
    (stack / "nccl-test" / "configmap-x.yaml").write_text(CONFIGMAP.replace("VALUE", "v1"))
    (stack / "outputs.json").write_text('{"cluster": "demo"}\n')
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    (stack / "nccl-test" / "configmap-x.yaml").write_text(CONFIGMAP.replace("VALUE", "v2"))

    project = repo / "project"
    before = committed(project, "HEAD", "rendered/demo")
    assert before is not None and sorted(before) == ["nccl-test/configmap-x.yaml", "outputs.json"]
    assert before["nccl-test/configmap-x.yaml"]["data"] == {"k": "v1"}
    assert before["outputs.json"] == {"cluster": "demo"}
    changes = diff_trees(before, read_folder(project / "rendered" / "demo"))
    assert [(c.label, texts(c.fields)) for c in changes] == [("ConfigMap nccl-test/x", ["data.k: 'v1' -> 'v2'"])]
    assert committed(project, "HEAD", "rendered/new-stack") is None  # a stack the ref does not have yet

    with pytest.raises(DiffError, match="unknown git ref 'no-such-branch'"):
        committed(project, "no-such-branch", "rendered/demo")
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(DiffError, match="not inside a git repository"):
        committed(outside, "HEAD", "rendered/demo")


def test_cli_unknown_ref_is_one_clear_error(capsys: pytest.CaptureFixture[str]):
    assert main(["diff", "nerc", "--against", "no-such-ref-0123"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown git ref 'no-such-ref-0123'") and "Traceback" not in err


def test_added_text_is_counted_and_long_values_are_cut():
    module = "".join(f"line {i}\n" for i in range(500))
    old = {"data": {"launcher.py": "a\nb\n"}}
    new = {"data": {"launcher.py": "a\nb\n", "bandwidth.py": module}, "spec": {"config": "x" * 1000}}
    lines = texts(diff_values(old, new))
    assert lines[0] == 'data["bandwidth.py"]: added text of 500 lines'
    assert lines[1].startswith('spec: added {"config": "xxx') and lines[1].endswith("... (614 more characters)")
