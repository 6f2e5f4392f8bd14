"""A bandwidth check's log holds whatever its processes wrote (issue 35): a line of megabytes is read with bounded work,
and what the verdict quotes of it reaches the terminal escaped. Work is counted (the length of text each pattern is
run on), never timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from components.launcher import bandwidth

PATTERNS = [name for name in dir(bandwidth) if name.startswith("_") and hasattr(getattr(bandwidth, name), "pattern")]


class Recorder:
    """Stands in for a compiled pattern: records the longest text it is run on."""

    def __init__(self, real: Any) -> None:
        self.real, self.longest, self.calls = real, 0, 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.real, name)
        if not callable(target):
            return target

        def call(text: str, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.longest = max(self.longest, len(text))
            return target(text, *args, **kwargs)

        return call


MEGABYTE = 1024 * 1024
LINES = {
    "spaces": "host NCCL INFO Using network x" + " " * MEGABYTE + "y",
    "a port name": "host NCCL INFO NET/IB : Using " + "mlx5_" * (MEGABYTE // 5),
    "brackets": "[" * MEGABYTE,
    "a header": "#" + " Rank 1" * (MEGABYTE // 7),
    "a table row": "1 2 " + "3.5 " * (MEGABYTE // 4),
}


@pytest.mark.parametrize("kind", list(LINES))
def test_a_megabyte_line_is_matched_within_a_bounded_prefix(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recorders = {name: Recorder(getattr(bandwidth, name)) for name in PATTERNS}
    for name, recorder in recorders.items():
        monkeypatch.setattr(bandwidth, name, recorder)
    text = "# nccl-tests\n" + LINES[kind] + "\n#  Avg bus bandwidth    : 40.5\n"
    verdict = bandwidth.judge(text, "rdma", 400.0, 0.8)
    assert sum(r.calls for r in recorders.values()) > 0
    assert max(r.longest for r in recorders.values()) <= bandwidth.MAX_LINE
    assert max(len(line) for line in verdict.lines) < 2 * bandwidth.MAX_LINE


def test_what_the_report_quotes_of_a_log_reaches_the_terminal_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "check.log"
    log.write_text(
        "#  Rank  0 Group  0 Pid   1 on \x1b]0;owned\x07node-a device  0 [0x1b] NVIDIA H100\n"
        "host NCCL INFO Using network IB\x1b[2K\r\n#  Avg bus bandwidth    : 40.5\n",
        encoding="utf-8",
    )
    main(["bandwidth-report", str(log), "--mode", "rdma", "--line-rate-gbps", "400"])
    out = capsys.readouterr().out
    assert not any(c in out for c in ("\x1b", "\x07", "\r")), repr(out)
