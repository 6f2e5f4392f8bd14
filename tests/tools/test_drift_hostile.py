"""`python -m stacks drift` and `adopt-diff` against live objects that lie (issue 35): a value added by hand that would
forge "no drift" or recolour the screen, entries of the wrong type, an `oc` answer that is no JSON. Offline."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import stacks
from cli.main import main
from components.kube import logical_name
from config import project
from tests import fixtures
from tests.helpers import yaml_text
from tools import adoption, drift

FORGED = "1\x1b[2K\r\nlab: no drift: the cluster holds what the stack declares\x07\u202e"
RAW = ("\x1b", "\x07", "\r", "\u202e")


def live_of(config: Any) -> list[dict[str, Any]]:
    return [copy.deepcopy(d.object) for d in drift.declared_for(config, "all")]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def container(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "edit",
    [
        lambda sts: container(sts)["env"].append({"name": "HAND", "value": FORGED}),  # `oc set env`, as a colleague may
        lambda sts: container(sts)["env"].append({"name": f"HAND{FORGED}", "value": "1"}),
        lambda sts: container(sts).update(image=FORGED),
        lambda sts: sts["metadata"].setdefault("labels", {}).update({"app.kubernetes.io/name": FORGED}),
        lambda sts: container(sts)["env"].append({"name": "HAND", "valueFrom": {"fieldRef": {"fieldPath": FORGED}}}),
    ],
    ids=["env value", "env name", "image", "label", "env entry"],
)
def test_a_value_on_the_cluster_never_forges_a_line_of_the_report(edit: Any) -> None:
    config = fixtures.config("tcp")
    declared = drift.declared_for(config, "all")
    live = live_of(config)
    edit(find(live, "StatefulSet", "one"))
    text = drift.report(config, drift.drift(config, declared, live), "lab")
    assert not any(c in text for c in RAW), repr(text)
    assert not any(line.startswith("lab: no drift") for line in text.splitlines())
    assert "\\x1b[2K\\r\\n" in text or "\\u001b[2K\\r\\n" in text  # shown escaped (as JSON escapes it, in an entry)


@pytest.mark.parametrize(
    "entry",
    [{"name": {"a": 1}, "value": "x"}, {"name": ["x"]}, {"name": None}, {"name": 3, "value": 4}, {"value": "no name"}],
)
def test_an_entry_whose_name_is_no_text_is_drift_never_a_traceback(entry: dict[str, Any]) -> None:
    config = fixtures.config("tcp")
    live = live_of(config)
    container(find(live, "StatefulSet", "one"))["env"].append(entry)
    found = drift.drift(config, drift.declared_for(config, "all"), live)
    assert any(f.added for f in found)
    drift.report(config, found, "lab")


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = fixtures.tcp()
    data["name"] = "lab"
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / "lab.yaml").write_text(yaml_text(data), encoding="utf-8")
    (tmp_path / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    (tmp_path / "Pulumi.lab.yaml").write_text(
        yaml_text({"config": {"gpu-training:configFile": "lab.yaml", "kubernetes:context": "lab"}}), encoding="utf-8"
    )
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    return tmp_path


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda o: o.update(metadata=["x"]), "metadata is a list, not a mapping"),
        (lambda o: o["metadata"].update(labels="x"), "metadata.labels is text, not a mapping"),
        (lambda o: o.update(kind=["StatefulSet"]), "kind is a list, not text"),
        (lambda o: o["spec"].update(replicas="3"), "spec.replicas is text, not a count"),
    ],
)
def test_a_saved_object_of_the_wrong_shape_is_one_line_exit_2(lab: Path, edit: Any, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    live = live_of(stacks.load("lab"))
    edit(find(live, "StatefulSet", "one"))
    path = lab / "live.yaml"
    path.write_text(yaml_text({"apiVersion": "v1", "kind": "List", "items": live}), encoding="utf-8")
    assert main(["drift", "lab", "--live", str(path)]) == 2  # never 1: that is "drift"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def fake_oc(folder: Path, answer: bytes, code: int = 0, stderr: bytes = b"") -> str:
    script = folder / "oc"
    (folder / "answer.bin").write_bytes(answer)
    (folder / "stderr.bin").write_bytes(stderr)
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write(open({str(folder / 'answer.bin')!r}, 'rb').read())\n"
        f"sys.stderr.buffer.write(open({str(folder / 'stderr.bin')!r}, 'rb').read())\nsys.exit({code})\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(
    ("answer", "code", "stderr", "said"),
    [
        (b"<html>proxy error</html>", 0, b"", "not valid JSON"),
        (b"\xff\xfe", 0, b"", "not valid JSON"),
        (b"[" * 100_000, 0, b"", "nested more than 64 levels deep"),
        (b'"a string"', 0, b"", "not a Kubernetes object or List"),
        (b"", 1, b"Error from server\xff\n\x1b[31mForbidden\x07\n", r"failed: Error from server\ufffd \| \\x1b\[31mForbidden\\x07"),
    ],
)
def test_an_answer_of_oc_that_is_no_list_of_objects_is_one_error(
    tmp_path: Path, answer: bytes, code: int, stderr: bytes, said: str
) -> None:
    config = fixtures.config("tcp")
    with pytest.raises(stacks.ConfigError, match=said):
        drift.read_live(drift.declared_for(config, "all"), None, fake_oc(tmp_path, answer, code, stderr))


# --- adopt-diff ---------------------------------------------------------------------------------------------------


def test_what_a_live_object_holds_never_forges_a_line_of_adopt_diff(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = stacks.load("lab")
    sa = next(o for o in live_of(config) if o["kind"] == "ServiceAccount")
    sa["metadata"]["annotations"] = {f"note{FORGED}": FORGED, "other": "a\nb"}
    sa["automountServiceAccountToken"] = True
    path = lab / "sa.yaml"
    path.write_text(yaml_text(sa), encoding="utf-8")
    main(["adopt-diff", "lab", str(path)])
    out = capsys.readouterr().out
    assert not any(c in out for c in RAW), repr(out)
    assert not any(line.startswith("lab: no drift") for line in out.splitlines())
    assert '"a\\nb"' in out  # a value of several lines is one line, as YAML escapes it
    report, _ = adoption.adopt_diff(config, sa, str(path))
    assert report == out and f"ServiceAccount {logical_name(sa)}" in report


def test_a_live_object_named_to_forge_lines_is_named_escaped_in_the_error(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": f"x{FORGED}", "namespace": "a"}}
    path = lab / "sa.yaml"
    path.write_text(yaml_text(obj), encoding="utf-8")
    assert main(["adopt-diff", "lab", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not any(c in err for c in RAW), repr(err)
    assert json.dumps(err)
