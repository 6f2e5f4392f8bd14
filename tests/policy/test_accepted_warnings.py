"""Accepted warnings (a stack's accepted_warnings): an acceptance accepts the warning about the value it names and no
other (a new tag warns again, and the acceptance says it no longer matches); one without a value still accepts a warning
about none; the image warning says the value to accept."""

from __future__ import annotations

from typing import Any

import pytest

import policy
import stacks
from components.program import layout, objects, patches, sources
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures
from tests.fixtures import Edit, both

TAG = "quay.io/example/pytorch:2.9"  # fixtures.EXAMPLE without its digest: the image rule warns on it


def check(config: ClusterConfig, previous: dict[str, Any] | None = None) -> list[Finding]:
    return policy.check(config, objects(config), patches(config), previous=previous, others=[], sources=sources(layout(config)))


def tagged(*names: str, image: str = TAG) -> Edit:
    """The tcp fixture's workloads `names` running an image by tag only."""

    def edit(d: dict[str, Any]) -> None:
        for name in names:
            fixtures.workload(d, name)["image"] = image

    return edit


def accepting(*entries: dict[str, Any]) -> Edit:
    return lambda d: d.setdefault("accepted_warnings", []).extend(entries)


IMAGE_ONE = {"rule": "image", "object": "StatefulSet proj/one", "reason": "the registry gives tags only"}


ONE_BY_VALUE = accepting({**IMAGE_ONE, "value": TAG})


BOTH_BY_VALUE = accepting({**IMAGE_ONE, "object": "StatefulSet proj/*", "value": TAG})


COPIED = accepting({**IMAGE_ONE, "object": "StatefulSet proj/deepti-*", "value": TAG})


NO_VALUE = f"without naming the value it accepts, and that warning is about one ('{TAG}')"


ACCEPTANCES = [
    # (case, fixture, edit, workloads whose image warning is accepted, phrase of the accepted-warnings finding or None)
    ("the value named", "tcp", both(tagged("one"), ONE_BY_VALUE), {"one"}, None),
    ("a glob, one value for both", "tcp", both(tagged("one", "two"), BOTH_BY_VALUE), {"one", "two"}, None),
    ("no value named", "tcp", both(tagged("one"), accepting(IMAGE_ONE)), set(), NO_VALUE),
    ("the tag changed", "tcp", both(tagged("one", image=TAG + "-b"), ONE_BY_VALUE), set(), f"now about '{TAG}-b': the value changed"),
    ("the image pinned since", "tcp", ONE_BY_VALUE, set(), f"for the value '{TAG}', but no such warning remains"),
    ("a copied acceptance, its workload gone", "tcp", both(tagged("two"), COPIED), set(), "no such warning remains"),
    ("a value on a warning about none", "ib", lambda d: d["accepted_warnings"][1].update(value="x"), set(), "for the value 'x', but no"),
]


@pytest.mark.parametrize("case,fixture,edit,accepted,stale", ACCEPTANCES, ids=[c[0] for c in ACCEPTANCES])
def test_an_acceptance_accepts_the_value_it_names(case: str, fixture: str, edit: Edit, accepted: set[str], stale: str | None) -> None:
    findings = check(fixtures.config(fixture, edit))
    images = [f for f in findings if f.rule == "image"]
    assert {f.object.rsplit("/", 1)[-1] for f in images if f.accepted} == accepted, [f.line() for f in images]
    reported = [f for f in findings if f.rule == "accepted-warnings"]
    if stale is None:
        assert reported == [], [f.line() for f in reported]
        return
    [f] = reported
    assert f.severity == "warning" and stale in f.message, f.line()
    assert f.where.startswith("accepted_warnings[")
    if "naming the value" in stale or "now about" in stale:  # it says the value to write
        assert f"value='{TAG}" in f.fix, f.fix
    assert policy.errors(findings) == []  # all warnings: a stale acceptance never stops a render


def test_an_acceptance_without_a_value_still_accepts_a_warning_about_none() -> None:
    findings = check(fixtures.config("ib"))
    assert {f.rule for f in findings if f.accepted} == {"privileged-scc", "privileged-container"}
    assert [f for f in findings if f.rule == "accepted-warnings"] == []


@pytest.mark.parametrize("field,value", [("value", ""), ("value", 3)])
def test_an_empty_or_non_text_value_is_refused(field: str, value: object) -> None:
    with pytest.raises(stacks.ConfigError) as err:
        fixtures.config("tcp", accepting({**IMAGE_ONE, field: value}))
    assert "accepted_warnings[0].value" in str(err.value)


def test_the_image_warning_says_the_value_to_accept() -> None:
    [f] = [f for f in check(fixtures.config("tcp", tagged("one"))) if f.rule == "image"]
    assert f.value == TAG and f'value="{TAG}"' in f.fix
