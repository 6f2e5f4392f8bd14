"""The bandwidth check's verdict on a log (`python -m stacks bandwidth-report`): a run that asked for validation but
checked nothing fails, and so does one whose trailer is not `0 OK`; NaN, inf, 1e999, digits of another script, 5,000-digit
sizes, a #wrong that is no count and rows after the trailer fail the check; never PASS, never a traceback."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from components.launcher import allreduce
from components.launcher import bandwidth as bw
from tests.helpers import run_cli

ROCE = (Path(__file__).with_name("bandwidth_logs") / "nccl_tests_roce.log").read_text(encoding="utf-8")


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
        code, out, _ = run_cli(["bandwidth-report", *REPORT, str(log)], capsys)
        assert code == 0 and "bandwidth check: PASS" in out, out

    @pytest.mark.parametrize("case", UNVALIDATED)
    def test_a_run_without_the_validation_it_asked_for_fails(self, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = tmp_path / "bad.log"
        log.write_text(_log(case), encoding="utf-8")
        code, out, err = run_cli(["bandwidth-report", *REPORT, str(log)], capsys)
        assert code == 1 and err == "", err
        assert "bandwidth check: FAIL" in out and UNVALIDATED[case][1] in out, out

    @pytest.mark.parametrize("header", ["validation: 0", "no validation field"])
    def test_a_run_that_asked_for_no_validation_may_say_n_a(self, header: str) -> None:
        text = _wrong_cells("N/A")(ROCE)
        text = text.replace("validation: 1", "" if header == "no validation field" else header)
        verdict = bw.judge(text, "rdma", 400.0, 0.8, nodes=1, gpus_per_node=4)
        assert verdict.ok, verdict.failures

    def test_the_torch_loops_own_table_reads_back_as_it_passes(self) -> None:
        rows = [allreduce.table_row(s, s // 4, [None, (12.5, 3.0, 5.25, 0)]) for s in (4096, 8192)]
        text = "\n".join(allreduce.table_header("title validation: 1") + rows + allreduce.table_trailer([5.25, 5.25], 0))
        results = bw.parse_results(text)
        assert results.out_of_bounds == [] and len(results.unchecked) == 2  # its out-of-place half is N/A by design
        assert bw.parse_results(text.replace("validation: 1", "")).unchecked == []


MPIRUN_TWO_HOSTS = (Path(__file__).with_name("bandwidth_logs") / "made_up_mpirun_two_hosts.log").read_text(encoding="utf-8")


LAST_ROW = next(line for line in MPIRUN_TWO_HOSTS.splitlines() if " 1073741824 " in line and "float" in line)


PREFIX, LAST_CELLS = LAST_ROW.split(":", 1)[0] + ":", LAST_ROW.split(":", 1)[1]


def _cells(edit: Callable[[list[str]], None]) -> str:
    cells = LAST_CELLS.split()
    edit(cells)
    return MPIRUN_TWO_HOSTS.replace(LAST_ROW, PREFIX + "  " + "  ".join(cells))


def _cell(index: int, value: str) -> Callable[[list[str]], None]:
    return lambda cells: cells.__setitem__(index, value)


# the last row's cells: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
BAD_LOGS: dict[str, tuple[str, str]] = {
    "NaN bus bandwidth": (_cells(_cell(7, "nan")), "not a number"),
    "NaN everywhere": (_cells(lambda c: c.__setitem__(slice(5, 13), ["nan"] * 8)), "not a number"),
    "infinite bus bandwidth": (_cells(_cell(11, "inf")), "not a number"),
    "overflowing bus bandwidth": (_cells(_cell(11, "1e999")), "'1e999'"),
    "Arabic-Indic digits": (_cells(_cell(11, "\u0669\u0669.\u0669")), "not a number"),
    "fullwidth digits": (_cells(_cell(7, "\uff19\uff19.\uff19")), "not a number"),
    "Arabic-Indic size": (_cells(_cell(0, "\u0661\u0660\u0667\u0663\u0667\u0664\u0661\u0668\u0662\u0664")), "not a number"),
    "5,000-digit size": (_cells(_cell(0, "9" * 5000)), "not a number"),
    "5,000-digit count": (_cells(_cell(1, "2" * 5000)), "not a number"),
    "#wrong is text": (_cells(_cell(8, "x")), "'x' in the row"),
    "#wrong is negative": (_cells(_cell(12, "-1")), "'-1' in the row"),
    "#wrong is a fraction": (_cells(_cell(8, "0.5")), "'0.5' in the row"),
    "#wrong in other digits": (_cells(_cell(8, "\u0663")), "not a number"),
    "a row after the trailer": (MPIRUN_TWO_HOSTS + LAST_ROW.replace("88.05", "99.05") + "\n", "row(s) after the summary trailer"),
    "5,000-digit maxBytes": (MPIRUN_TWO_HOSTS.replace("maxBytes 1073741824", "maxBytes " + "9" * 5000), "thousands of digits in the line"),
}


class TestBandwidthReport:
    def test_the_log_the_cases_edit_passes(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = tmp_path / "ok.log"
        log.write_text(MPIRUN_TWO_HOSTS, encoding="utf-8")
        code, out, _ = run_cli(["bandwidth-report", str(log), "--mode", "rdma", "--line-rate-gbps", "800"], capsys)
        assert code == 0 and "bandwidth check: PASS" in out, out

    @pytest.mark.parametrize("case", BAD_LOGS)
    def test_a_log_whose_numbers_are_not_numbers_fails(self, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        text, phrase = BAD_LOGS[case]
        assert text != MPIRUN_TWO_HOSTS
        log = tmp_path / "bad.log"
        log.write_text(text, encoding="utf-8")
        code, out, err = run_cli(["bandwidth-report", str(log), "--mode", "rdma", "--line-rate-gbps", "800"], capsys)
        assert code == 1 and err == "", err
        assert "bandwidth check: FAIL" in out and phrase in out, out
