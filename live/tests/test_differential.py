"""Level 3: the `capacity` rule against the real scheduler, as a differential test (issue 26, item 2).

200 configs generated from the tests' own fixtures (live/differential.py: seeded, one to three random edits each); for
each, the preflight's verdict (`policy.check` on the offline render: does `capacity` find an error?) and the cluster's
(kube-scheduler places the pods the StatefulSet and Job controllers make from the rendered objects, on Node objects
built from the config; kwok keeps the nodes alive): "fits" iff every pod got a node. Every case runs at once on one
control plane, each in its own namespace on its own nodes (docs/live.md "The capacity rule against the scheduler").

The two must agree on every case, but for the documented limits (differential.limit, docs/preflight.md): a cluster
whose nodes have what the config does not state (a taint, a label, fewer VFs) is not the preflight's to know.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import stacks
from live import differential
from live.controlplane import ControlPlane
from tests import fixtures

SEED = 26
CASES = 200


def validate(data: dict[str, Any]) -> Any:
    return stacks.validate(data, "a generated config")


def test_generation_is_seeded() -> None:
    """The same seed gives the same cases: a disagreement is reproduced from its seed."""
    one, _ = differential.generate(SEED, 20, fixtures.FIXTURES, validate)
    two, _ = differential.generate(SEED, 20, fixtures.FIXTURES, validate)
    assert [(c.seed, c.edits, c.data) for c in one] == [(c.seed, c.edits, c.data) for c in two]
    again = differential.generate_one(one[7].seed, fixtures.FIXTURES)
    assert again is not None and again.data == one[7].data and again.edits == one[7].edits


def test_capacity_agrees_with_the_scheduler(
    tools: dict[str, Path | str], sim_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, refused = differential.generate(SEED, CASES, fixtures.FIXTURES, validate)
    bins = {**{n: Path(p) for n, p in tools.items()}, **sim_tools}
    plane = ControlPlane("differential", tmp_path_factory.mktemp("differential"), bins).start()
    try:
        with capsys.disabled():
            verdicts = differential.run(plane, cases, validate, log=lambda line: print(line, flush=True))
    finally:
        plane.stop()

    report = differential.report(verdicts, refused)
    with capsys.disabled():
        print("\n" + report, flush=True)
    undecided = [v for v in verdicts if not v.decided]
    assert not undecided, f"the cluster did not decide {len(undecided)} case(s) in time:\n" + "\n".join(v.line() for v in undecided)
    # Both verdicts occur often enough that either kind of disagreement would be seen.
    fits = Counter(v.check_fits for v in verdicts)
    assert fits[True] >= CASES // 5 and fits[False] >= CASES // 10, fits
    wrong = [v for v in verdicts if not v.agree and differential.limit(v) is None]
    assert not wrong, f"`capacity` and the scheduler disagree on {len(wrong)} case(s):\n" + "\n".join(v.line() for v in wrong)
