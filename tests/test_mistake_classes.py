"""Every class of configuration mistake the audits found keeps its cases (tests/helpers.py "classes of mistake"): the
rows of the tables and the standalone tests of each class, wherever what they test put them, counted per class."""

from __future__ import annotations

import importlib

import pytest

from tests.helpers import CASES_PER_CLASS, LEAST_CASES

MODULES = [
    "tests.config.test_validation",
    "tests.config.test_openshift_facts",
    "tests.config.test_kubelet_expansion",
    "tests.config.test_yaml_files",
    "tests.policy.test_security",
    "tests.policy.test_pods",
    "tests.policy.test_scheduling",
    "tests.policy.test_stack",
    "tests.components.test_reads",
    "tests.tools.test_render_file_names",
    "tests.cli.test_check",
]
"""The modules whose tables and tests are sorted by class: imported here, so the counts are whole in any run."""


def test_every_class_has_cases(capsys: pytest.CaptureFixture[str]) -> None:
    for name in MODULES:
        importlib.import_module(name)
    counts = {cls: CASES_PER_CLASS[cls] for cls in LEAST_CASES}
    with capsys.disabled():
        print("\ncases per class of mistake: " + "; ".join(f"{cls.split(':')[0]} {n}" for cls, n in counts.items()))
    assert set(CASES_PER_CLASS) <= set(LEAST_CASES), set(CASES_PER_CLASS) - set(LEAST_CASES)  # no case of a class unknown here
    short = {cls: (n, LEAST_CASES[cls]) for cls, n in counts.items() if n < LEAST_CASES[cls]}
    assert not short, short
