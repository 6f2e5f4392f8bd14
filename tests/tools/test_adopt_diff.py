"""`python -m stacks adopt-diff`: what taking over a live object changes, read as the API server has it (a field the live
object leaves out counts at its API default, so taking it away is a narrowing; malformed metadata is one message naming
the file and the object), and advice after a narrowing that fits the kind of object it narrows."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT, rendered_fixture, run_cli


def _declared(kind: str, name: str) -> dict[str, Any]:
    return json.loads(
        json.dumps(next(o for o in rendered_fixture("roce").objects() if o["kind"] == kind and o["metadata"]["name"] == name))
    )


def _live(tmp_path: Path, obj: Any) -> Path:
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")
    return path


# (kind, name, the field the live object leaves out, the line adopt-diff prints, whether adopting narrows)
DEFAULTS = {
    "ServiceAccount token mount": (
        "ServiceAccount", "trainer", "automountServiceAccountToken",
        "- REMOVES automountServiceAccountToken: true -> false (not set on the live object: the API's default)", True,
    ),
    "SCC privilege escalation": (
        "SecurityContextConstraints", "gpu-rdma", "allowPrivilegeEscalation",
        "- REMOVES allowPrivilegeEscalation: true -> false (not set on the live object: the API's default)", True,
    ),
    "StatefulSet pod management": (
        "StatefulSet", "dev", "spec.podManagementPolicy",
        "~ changes spec.podManagementPolicy: OrderedReady -> Parallel (not set on the live object: the API's default)", False,
    ),
    "Service publishing unready pods": (
        "Service", "dev-headless", "spec.publishNotReadyAddresses",
        "~ changes spec.publishNotReadyAddresses: false -> true (not set on the live object: the API's default)", False,
    ),
}  # fmt: skip


def _without(obj: dict[str, Any], path: str) -> dict[str, Any]:
    *parents, last = path.split(".")
    node = obj
    for p in parents:
        node = node[p]
    node.pop(last)
    return obj


class TestAdoptDiff:
    @pytest.mark.parametrize("case", DEFAULTS)
    def test_a_field_the_live_object_leaves_out_counts_at_its_api_default(
        self, case: str, fixture_project: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        kind, name, field, line, narrows = DEFAULTS[case]
        fixture_project("roce")
        live = _without(_declared(kind, name), field)
        code, out, err = run_cli(["adopt-diff", "roce", str(_live(tmp_path, live))], capsys)
        assert code == (1 if narrows else 0), out + err
        assert f"  {line}\n" in out, out
        assert ("Adopting narrows this" in out) is narrows

    def test_a_default_the_stack_also_declares_is_no_change(
        self, fixture_project: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        fixture_project("roce")
        scc = _declared("SecurityContextConstraints", "gpu-rdma")
        assert scc["readOnlyRootFilesystem"] is False
        code, out, _ = run_cli(["adopt-diff", "roce", str(_live(tmp_path, _without(scc, "readOnlyRootFilesystem")))], capsys)
        assert code == 0 and "readOnlyRootFilesystem" not in out and "takes nothing away" in out, out

    @pytest.mark.parametrize(
        "metadata,phrase",
        [
            ({"namespace": "team-a"}, "the ServiceAccount: metadata.name is null, not a name"),
            ({"name": ["trainer"], "namespace": "team-a"}, "the ServiceAccount: metadata.name is [trainer], not a name"),
            (
                {"name": "trainer", "namespace": ["team-a"]},
                "ServiceAccount trainer: metadata.namespace is [team-a], not a namespace's name",
            ),
            ({"name": "trainer", "namespace": "team-a", "annotations": ["a"]}, "ServiceAccount trainer: metadata.annotations is [a]"),
            ({"name": "trainer", "namespace": "team-a", "labels": "app=x"}, "ServiceAccount trainer: metadata.labels is app=x"),
            ({"name": "trainer", "namespace": "team-a", "labels": {"replicas": 2}}, "metadata.labels is {replicas: 2}, not a map"),
        ],
    )
    @pytest.mark.parametrize("as_list", [False, True], ids=["object", "List"])
    def test_malformed_metadata_is_one_message_naming_file_and_object(
        self,
        metadata: dict[str, Any],
        phrase: str,
        as_list: bool,
        fixture_project: Callable[..., Path],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        fixture_project("roce")
        obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}
        live = _live(
            tmp_path, {"apiVersion": "v1", "kind": "List", "items": [_declared("ServiceAccount", "trainer"), obj]} if as_list else obj
        )
        code, out, err = run_cli(["adopt-diff", "roce", str(live)], capsys)
        assert code == 2 and out == "", out
        where = "items[1] of the List, " if as_list else ""
        assert err.startswith(f"error: {live}: {where}") and phrase in err, err

    def test_a_malformed_live_file_in_a_real_process_prints_no_traceback(self, tmp_path: Path) -> None:
        live = _live(tmp_path, {"kind": "ServiceAccount", "metadata": {"name": "trainer", "namespace": ["a"]}})
        cwd = ROOT
        done = subprocess.run(
            [sys.executable, "-m", "stacks", "adopt-diff", "nerc", str(live)], capture_output=True, text=True, timeout=120, cwd=cwd
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"{live}: ServiceAccount trainer: metadata.namespace is [a]" in done.stderr


SCC_ADVICE = ("ulimit -l", "SYS_RESOURCE", "openshift.io/scc")


TOKEN_ADVICE = "/var/run/secrets/kubernetes.io/serviceaccount"


def _narrowed(kind: str, name: str, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = _declared(kind, name)
    edit(obj)
    return obj


# (the live object: the declared one edited so that adopting narrows it, the advice it must get)
NARROWED: dict[str, tuple[dict[str, Any], str]] = {
    "ServiceAccount token mount": (
        _narrowed("ServiceAccount", "trainer", lambda o: o.update(automountServiceAccountToken=True)),
        TOKEN_ADVICE,
    ),
    "ServiceAccount token by default": (
        _narrowed("ServiceAccount", "trainer", lambda o: o.pop("automountServiceAccountToken")),
        TOKEN_ADVICE,
    ),
    "SCC privilege escalation": (
        _narrowed("SecurityContextConstraints", "gpu-rdma", lambda o: o.update(allowPrivilegeEscalation=True)),
        "`ulimit -l unlimited` under `set -e` needs SYS_RESOURCE",
    ),
    "PVC access modes": (
        _narrowed("PersistentVolumeClaim", "datasets", lambda o: o["spec"].update(accessModes=["ReadWriteMany", "ReadWriteOnce"])),
        "Whatever relies on what this PersistentVolumeClaim holds now loses it",
    ),
    "StatefulSet service links": (
        _narrowed("StatefulSet", "dev", lambda o: o["spec"]["template"]["spec"].update(enableServiceLinks=True)),
        "Whatever relies on what this StatefulSet holds now loses it",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", NARROWED)
def test_the_advice_after_a_narrowing_is_about_its_kind(
    case: str, fixture_project: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    live, advice = NARROWED[case]
    fixture_project("roce")
    code, out, err = run_cli(["adopt-diff", "roce", str(_live(tmp_path, live))], capsys)
    assert code == 1 and f"Adopting narrows this {live['kind']}" in out, out + err
    advice_text = out.split("Adopting narrows this", 1)[1]
    assert advice in advice_text, out
    scc = live["kind"] == "SecurityContextConstraints"
    assert all((phrase in advice_text) is scc for phrase in SCC_ADVICE), out
    assert (TOKEN_ADVICE in advice_text) is (live["kind"] == "ServiceAccount"), out
    assert "declare what they need in clusters/roce.py" in advice_text, out
