"""`make render` (python -m stacks render) runs the preflight first, as `pulumi preview` does: a stack with an error
is not written (its folder stays as it was), the findings are printed, and the command exits 1; the stacks that pass
are written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cli.main import main
from tests import fixtures


def test_a_stack_the_preflight_refuses_is_not_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = fixtures.data("tcp")
    data["workloads"][0]["state"] = "running"
    data["node_sets"][0]["count"] = 1
    data["workloads"][0]["nodes"] = 1
    # Two running copies of one workload's shape on a one-node set: the capacity rule refuses them.
    second = dict(data["workloads"][0], name="second")
    data["workloads"].append(second)
    config = tmp_path / "tcp.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    out = tmp_path / "out"
    code = main(["render", "--config", str(config), "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 1, err
    assert "not written" in err and "capacity" in err, err
    assert not (out / data["name"]).exists(), "a stack with a preflight error was written"
