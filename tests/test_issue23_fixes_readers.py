"""Issue 23, round 3 hardening: readers, bandwidth and hints.

- A: the bounded YAML loader reads only what JSON holds (a timestamp is its text; !!binary, .inf and .nan are refused at
  their line), and each committed render file is one object with kind and metadata.name: `diff` names the file instead
  of crashing or comparing a list with an object.
- B: a CNI config's number that overflows a float (1e999, which Python reads as inf) is refused like NaN.
- C: bandwidth-report fails a run that asked for validation but checked nothing (#wrong N/A), and a trailer whose
  "Out of bounds values" is not `0 OK`; the in-pod `bandwidth.py report` agrees.
- D: a YAML writer's Python mistakes get the fix with the whole value: brackets kept whole, a dashed word whole.
- E: adopt-diff's advice after a narrowing fits the kind of object it narrows.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from components.launcher import bandwidth as bw
from config import project
from config.values import bounded_json
from tests import fixtures
from tests.test_issue23_readback import _declared, _live, git, run

ROOT = Path(__file__).resolve().parents[1]

# --- A: the committed render is read as JSON data, one object per file ----------------------------------------------


@pytest.fixture
def committed_render(fixture_project: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> Callable[[Callable[[Path], None]], Path]:
    """The tcp fixture project as a git repository whose HEAD commits tcp's render after `edit(stack folder)`."""

    def make(edit: Callable[[Path], None]) -> Path:
        root = fixture_project("tcp")
        assert run(["render", "tcp"], capsys)[0] == 0
        edit(root / "rendered" / "tcp")
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "a render")
        return root

    return make


def _statefulset(folder: Path) -> Path:
    return next(folder.rglob("statefulset-*.yaml"))


def _append(line: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = _statefulset(folder)
        path.write_text(path.read_text(encoding="utf-8") + line, encoding="utf-8")

    return edit


def _replace(text: str) -> Callable[[Path], None]:
    return lambda folder: _statefulset(folder).write_text(text, encoding="utf-8")


# (an edit of the committed StatefulSet file, a phrase of the one message `diff` prints)
REFUSED: dict[str, tuple[Callable[[Path], None], str]] = {
    "binary": (_append("a: !!binary AAAA\n"), "!!binary is not supported"),
    "binary in a list": (_append("a: [x, !!binary AAAA]\n"), "!!binary is not supported"),
    "infinity": (_append("a: .inf\n"), ".inf is not a JSON number"),
    "NaN": (_append("a: .NaN\n"), ".NaN is not a JSON number"),
    "a list": (_replace("- 1\n- 2\n"), "not a rendered object (a list)"),
    "empty": (_replace(""), "not a rendered object (empty)"),
    "a comment only": (_replace("# nothing\n"), "not a rendered object (empty)"),
    "a scalar": (_replace("just text\n"), "not a rendered object (a scalar)"),
    "no metadata.name": (_replace("kind: StatefulSet\nmetadata: {namespace: x}\n"), "not a rendered object (a mapping without them)"),
    "no kind": (_replace("metadata: {name: x}\n"), "not a rendered object (a mapping without them)"),
}


class TestCommittedRenderFiles:
    @pytest.mark.parametrize("case", REFUSED)
    def test_a_file_that_is_not_one_object_of_json_data_is_named(
        self, case: str, committed_render: Callable[[Callable[[Path], None]], Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        edit, phrase = REFUSED[case]
        root = committed_render(edit)
        rel = _statefulset(root / "rendered" / "tcp").relative_to(root).as_posix()
        code, out, err = run(["diff", "tcp"], capsys)
        assert code == 2 and out == "" and "Traceback" not in err, err
        assert err.startswith(f"error: HEAD:{rel}") and phrase in err, err

    @pytest.mark.parametrize("case", ["binary", "infinity"])
    def test_the_refusal_names_the_line(
        self, case: str, committed_render: Callable[[Callable[[Path], None]], Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        root = committed_render(REFUSED[case][0])
        path = _statefulset(root / "rendered" / "tcp")
        last = len(path.read_text(encoding="utf-8").splitlines())
        _, _, err = run(["diff", "tcp"], capsys)
        assert f"{path.relative_to(root).as_posix()}:{last}:" in err, err

    @pytest.mark.parametrize("value", ["2001-12-14", "2001-12-14T21:59:43Z", "2001-12-14 21:59:43.10 -5"])
    def test_a_timestamp_is_read_as_its_text(
        self, value: str, committed_render: Callable[[Callable[[Path], None]], Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        def edit(folder: Path) -> None:
            path = _statefulset(folder)
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("metadata:\n", f"metadata:\n  creationTimestamp: {value}\n", 1), encoding="utf-8")

        committed_render(edit)
        code, out, err = run(["diff", "tcp"], capsys)
        assert code in (0, 1) and err == "", err
        assert f"metadata.creationTimestamp: removed (was '{value}')" in out, out

    @pytest.mark.parametrize(
        "text,data",
        [
            ("a: 2001-12-14\n", {"a": "2001-12-14"}),
            ("a: !!timestamp 2001-12-14\n", {"a": "2001-12-14"}),
            ("a: [1.5, -2.0e+3]\n", {"a": [1.5, -2000.0]}),
            ("a: '.inf'\n", {"a": ".inf"}),
        ],
    )
    def test_the_loader_reads_json_data(self, text: str, data: Any) -> None:
        assert stacks.parse_yaml(text, "x.yaml") == data

    @pytest.mark.parametrize("case", ["binary", "infinity"])
    def test_a_config_file_refuses_them_too(self, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        data = fixtures.tcp()
        path = tmp_path / "tcp.yaml"
        value = "!!binary AAAA" if case == "binary" else ".inf"
        path.write_text(yaml.safe_dump(data, sort_keys=False) + f"extra: {value}\n", encoding="utf-8")
        code, out, err = run(["check", "--config", str(path)], capsys)
        assert code == 2 and out == "" and err.startswith(f"error: {path}:"), err
        assert "not supported" in err or "not a JSON number" in err, err


# --- B: a CNI config's numbers are finite -----------------------------------------------------------------------------


class TestCniNumbers:
    @pytest.mark.parametrize("number", ["1e999", "-1e999", "1.5e400", "123456789e999"])
    @pytest.mark.parametrize("command", ["config", "check"])
    def test_an_overflowing_number_is_refused_at_its_path_and_line(
        self, number: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data = fixtures.roce()
        data["fabric"]["attachments"][0]["cni_config"] = '{"type": "sriov", "mtu": ' + number + "}"
        path = tmp_path / "roce.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False, width=1 << 30), encoding="utf-8")
        code, out, err = run([command, "--config", str(path)], capsys)
        assert code == 2 and out == "", err
        assert err.startswith(f"error: {path}: invalid configuration") and "fabric.attachments[0].cni_config" in err, err
        assert f"{number} is not a finite number" in err, err

    @pytest.mark.parametrize("text,value", [('{"mtu": 9000}', 9000), ('{"mtu": 1.5e3}', 1500.0), ('{"x": 1e308}', 1e308)])
    def test_a_finite_number_still_reads(self, text: str, value: float) -> None:
        assert list(bounded_json(text, 5).values()) == [value]

    @pytest.mark.parametrize("text", ['{"a": 1e999}', "[1, 2, -1e999]", '{"a": Infinity}', '{"a": NaN}'])
    def test_the_json_reader_of_committed_files_refuses_them(self, text: str) -> None:
        with pytest.raises(stacks.ConfigError, match=r"^outputs\.json: not valid JSON: .*(not a finite number|not a JSON number)"):
            stacks.parse_json(text, "outputs.json")


# --- C: bandwidth-report needs the validation it asked for --------------------------------------------------------------

ROCE = (Path(__file__).parent / "launcher" / "bandwidth_logs" / "nccl_tests_roce.log").read_text(encoding="utf-8")
ROW = re.compile(r"^( +[0-9]+ +[0-9]+ +float .*)$", re.MULTILINE)
OK_TRAILER = "# Out of bounds values : 0 OK"


def _wrong_cells(value: str, which: tuple[int, ...] = (8, 12), rows: int = 99) -> Callable[[str], str]:
    """Set the #wrong cells (8: out-of-place, 12: in-place) of the first `rows` rows to `value`."""

    def edit(text: str) -> str:
        seen = 0

        def one(match: re.Match[str]) -> str:
            nonlocal seen
            seen += 1
            cells = match.group(1).split()
            if seen <= rows:
                for i in which:
                    cells[i] = value
            return "  " + "  ".join(cells)

        return ROW.sub(one, text)

    return edit


def _trailer(new: str) -> Callable[[str], str]:
    return lambda text: text.replace(OK_TRAILER, new)


# (edits of the log, a phrase of the failure)
UNVALIDATED: dict[str, tuple[list[Callable[[str], str]], str]] = {
    "the audit's log": ([_wrong_cells("N/A"), _trailer("# Out of bounds values : 7 FAILED")], "have no #wrong count (N/A)"),
    "every #wrong N/A": ([_wrong_cells("N/A")], "11 row(s) of a run whose header asks for validation"),
    "one in-place #wrong N/A": ([_wrong_cells("N/A", (12,), rows=1)], "the row '1048576  262144  float"),
    "FAILED with no wrong value": ([_trailer("# Out of bounds values : 0 FAILED")], "the trailer '# Out of bounds values : 0 FAILED'"),
    "a count with OK": ([_trailer("# Out of bounds values : 3 OK")], "the trailer '# Out of bounds values : 3 OK'"),
    "no count": ([_trailer("# Out of bounds values : FAILED")], "reports values out of bounds"),
}


def _log(case: str) -> str:
    text = ROCE
    for edit in UNVALIDATED[case][0]:
        text = edit(text)
    assert text != ROCE
    return text


REPORT = ["--mode", "rdma", "--line-rate-gbps", "400", "--min-fraction", "0.8", "--nodes", "1", "--gpus-per-node", "4"]


class TestBandwidthValidation:
    def test_the_log_the_cases_edit_passes(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = tmp_path / "ok.log"
        log.write_text(ROCE, encoding="utf-8")
        code, out, _ = run(["bandwidth-report", *REPORT, str(log)], capsys)
        assert code == 0 and "bandwidth check: PASS" in out, out

    @pytest.mark.parametrize("case", UNVALIDATED)
    def test_a_run_without_the_validation_it_asked_for_fails(self, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = tmp_path / "bad.log"
        log.write_text(_log(case), encoding="utf-8")
        code, out, err = run(["bandwidth-report", *REPORT, str(log)], capsys)
        assert code == 1 and err == "", err
        assert "bandwidth check: FAIL" in out and UNVALIDATED[case][1] in out, out

    @pytest.mark.parametrize("case", ["the audit's log", "FAILED with no wrong value", "one in-place #wrong N/A"])
    def test_the_in_pod_report_fails_them_too(self, case: str, tmp_path: Path) -> None:
        log = tmp_path / "bad.log"
        log.write_text(_log(case), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-I", str(ROOT / "components" / "launcher" / "bandwidth.py"), "report", str(log), *REPORT],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "bandwidth check: FAIL" in done.stdout and UNVALIDATED[case][1] in done.stdout, done.stdout

    @pytest.mark.parametrize("header", ["validation: 0", "no validation field"])
    def test_a_run_that_asked_for_no_validation_may_say_n_a(self, header: str) -> None:
        text = _wrong_cells("N/A")(ROCE)
        text = text.replace("validation: 1", "" if header == "no validation field" else header)
        verdict = bw.judge(text, "rdma", 400.0, 0.8, nodes=1, gpus_per_node=4)
        assert verdict.ok, verdict.failures

    def test_the_torch_loops_own_table_reads_back_as_it_passes(self) -> None:
        rows = [bw.Row(s, s // 4, [bw.Measure(None, None, None, None), bw.Measure(12.5, 3.0, 5.25, 0)]) for s in (4096, 8192)]
        text = "\n".join(bw.table_header("title validation: 1") + [bw.table_row(r) for r in rows] + bw.table_trailer(rows))
        results = bw.parse_results(text)
        assert results.out_of_bounds == [] and len(results.unchecked) == 2  # its out-of-place half is N/A by design
        assert bw.parse_results(text.replace("validation: 1", "")).unchecked == []


# --- D: a YAML writer's mistakes get the whole value in the fix ---------------------------------------------------------

MODULE = """from config import ClusterConfig, NodeSet, Security, ServiceAccount, Workload
{before}
CONFIG = ClusterConfig(
    name="scratch",
    description="x",
    gpu_model="H100",
    node_sets=[NodeSet(name="n", count=2, gpus_per_node=4)],
    {namespaces}
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="h-kim", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa",
                 gpus_per_node=4, transport="tcp", nodes=2{extra}),
    ],
)
"""
NAMESPACES_LINE, WORKLOAD_LINE = 8, 11

# (before CONFIG, the namespaces line, extra arguments of the Workload, the line named, the hint)
HABITS: dict[str, tuple[str, str, str, int, str]] = {
    "a list as a YAML value": ('NS = "ns"', "namespaces:[NS],", "", NAMESPACES_LINE, "use `namespaces=[NS]`"),
    "a list with spaces": ('NS = "ns"', "namespaces: [NS, 'b'],", "", NAMESPACES_LINE, "use `namespaces=[NS, 'b']`"),
    "a call as a YAML value": (
        "", 'namespaces=["ns"],', ", env: dict(A='1, 2')", WORKLOAD_LINE + 1, "use `env=dict(A='1, 2')`"
    ),
    "a mapping as a YAML value": ("", 'namespaces=["ns"],', ', env: {"A": "1"}', WORKLOAD_LINE + 1, 'use `env={"A": "1"}`'),
    "a dashed word": ("NS = nccl-test", 'namespaces=[NS],', "", 2, 'if it is text, quote it: `NS="nccl-test"`'),
    "a word of three parts": ("NS = team-a-dev", 'namespaces=[NS],', "", 2, 'quote it: `NS="team-a-dev"`'),
    "a dashed word in a list": ("", "namespaces=[nccl-test],", "", NAMESPACES_LINE, 'if it is text, quote it: `"nccl-test"`'),
    "a dashed keyword value": ("", 'namespaces=["ns"],', ", image_pull=never-pull", WORKLOAD_LINE + 1, '`image_pull="never-pull"`'),
    "a plain word still": ("", 'namespaces=["ns"],', ", image_pull=running", WORKLOAD_LINE + 1, '`image_pull="running"`'),
}  # fmt: skip


@pytest.mark.parametrize("case", HABITS)
def test_a_yaml_habit_gets_the_whole_value_in_its_fix(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before, namespaces, extra, line, hint = HABITS[case]
    monkeypatch.setattr(project, "ROOT", tmp_path)
    (tmp_path / stacks.CLUSTERS).mkdir()
    text = MODULE.format(before=before, namespaces=namespaces, extra=extra)
    (tmp_path / stacks.CLUSTERS / "scratch.py").write_text(text, encoding="utf-8")
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load("scratch")
    message = str(err.value)
    assert message.startswith(f"clusters/scratch.py:{line}: ") and "Traceback" not in message, message
    assert hint in message, message


# --- E: adopt-diff's advice fits the object -------------------------------------------------------------------------

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
    code, out, err = run(["adopt-diff", "roce", str(_live(tmp_path, live))], capsys)
    assert code == 1 and f"Adopting narrows this {live['kind']}" in out, out + err
    advice_text = out.split("Adopting narrows this", 1)[1]
    assert advice in advice_text, out
    scc = live["kind"] == "SecurityContextConstraints"
    assert all((phrase in advice_text) is scc for phrase in SCC_ADVICE), out
    assert (TOKEN_ADVICE in advice_text) is (live["kind"] == "ServiceAccount"), out
    assert "declare what they need in clusters/roce.py" in advice_text, out
