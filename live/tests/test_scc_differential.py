"""Level 3: the preflight's security rules against OpenShift's SCC admission, as a differential test (issue 33, item 4).

300 configs generated from the tests' own fixtures (live/scc_differential.py: seeded, one to three random edits each of
what a user changes in a stack's security: memlock strategies, the SCC it claims and what that SCC allows, the
unprivileged SCC, grants, service accounts, volumes, tokens, checks; and a few of the cluster's own facts); for each,
the preflight's verdict (`policy.check` on the offline render: which pod templates do the security rules say admission
refuses, and under which SCC the rest run: the stack outputs' `scc`) and OpenShift's (apiserver-library-go's
sccadmission, live/scc.py: the pod each StatefulSet's or Job's controller would make, asked as that controller, in a
dry run). Every case runs at once on one control plane, each in namespaces of its own (docs/live.md "The security rules
against SCC admission").

The two must agree on every pod template of every case (refused or admitted, and under which SCC), but for the documented
limits (scc_differential.limit, docs/preflight.md): what the cluster has beyond the config is not the preflight's to know.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import stacks
from live import clusters, scc, scc_differential, toolchain
from live.controlplane import ControlPlane
from tests import fixtures

SEED = 33
CASES = 300


def validate(data: dict[str, Any]) -> Any:
    return stacks.validate(data, "a generated config")


def test_generation_is_seeded() -> None:
    """The same seed gives the same cases: a disagreement is reproduced from its seed."""
    one, _ = scc_differential.generate(SEED, 20, fixtures.FIXTURES, validate)
    two, _ = scc_differential.generate(SEED, 20, fixtures.FIXTURES, validate)
    assert [(c.seed, c.edits, c.data, c.cluster) for c in one] == [(c.seed, c.edits, c.data, c.cluster) for c in two]
    again = scc_differential.generate_one(one[7].seed, fixtures.FIXTURES)
    assert again.data == one[7].data and again.edits == one[7].edits and again.cluster == one[7].cluster


def test_the_security_rules_agree_with_sccs_admission(
    tools: dict[str, Path | str], scc_tools: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    if not clusters.SHARED_SCHEMAS.is_dir():
        pytest.skip(f"../shared/schemas is absent ({clusters.SHARED_SCHEMAS}): the SCC CRD comes from there")
    started = time.monotonic()
    cases, refused = scc_differential.generate(SEED, CASES, fixtures.FIXTURES, validate)
    bins = {n: Path(tools[n]) for n in toolchain.LEVEL1}
    plane = ControlPlane("scc-differential", tmp_path_factory.mktemp("scc-differential"), bins, controller_credentials=True).start()
    admission = None
    try:
        clusters.install_crds(plane)
        admission = scc.Admission(plane, scc_tools).start()
        with capsys.disabled():
            print(f"\nscc differential: the plane and admission up {time.monotonic() - started:.1f} s after the start", flush=True)
            verdicts = scc_differential.run(plane, cases, validate, log=lambda line: print(line, flush=True))
    finally:
        if admission is not None:
            admission.stop()
        plane.stop()

    report = scc_differential.report(verdicts, refused)
    with capsys.disabled():
        print("\n" + report, flush=True)
    undecided = [v for v in verdicts if not v.decided]
    assert not undecided, f"admission did not judge {len(undecided)} case(s):\n" + "\n".join(v.line() for v in undecided)
    # Both verdicts occur often enough that either kind of disagreement would be seen.
    accepts = Counter(v.check_accepts for v in verdicts)
    admits = Counter(v.admission_admits for v in verdicts)
    for counts in (accepts, admits):
        assert counts[True] >= CASES // 10 and counts[False] >= CASES // 10, (accepts, admits)
    wrong = [v for v in verdicts if not v.agree and scc_differential.limit(v) is None]
    assert not wrong, f"the security rules and admission disagree on {len(wrong)} case(s):\n" + "\n".join(v.line() for v in wrong)
