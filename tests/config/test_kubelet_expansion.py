"""$$ and $(NAME) in env values and args: what the process receives is what the config says. The program escapes each
value for the kubelet's expansion (config/values.py), and the preflight reads the value the process gets."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from config.values import kubelet_escape, kubelet_expand
from policy.core import PodView
from tests import fixtures
from tests.fixtures import W, both, env
from tests.helpers import DOLLAR, cases_of, container, find
from tools.render import run

LITERALS = ["pa$$word", "$$", "$", "a$b", "$(lower)", "$(", "x$$(y)", "$$$(date)", "cost: 5$", "${HOME}"]


@cases_of(DOLLAR, len(LITERALS))
@pytest.mark.parametrize("value", LITERALS)
def test_env_values_and_args_reach_the_process_as_written(value: str) -> None:
    config = fixtures.config("roce", both(env("dev", {"V": value}), W("dev", args=["bash", "-c", f"echo '{value}'"])))
    sts = find(run(config), "StatefulSet", "dev", "team-a")
    env_list = container(sts)["env"]
    defined: dict[str, str] = {}  # what the kubelet maps: the variables listed before (valueFrom ones unknown here)
    received = {}
    for e in env_list:
        if "value" in e:
            received[e["name"]] = defined[e["name"]] = kubelet_expand(e["value"], defined)
    assert received["V"] == value
    assert json.loads(received["LAUNCHER_ARGS"]) == ["bash", "-c", f"echo '{value}'"]
    assert PodView.env(container(sts))["V"] == value  # the preflight reads the value the process gets


@cases_of(DOLLAR)
@given(st.text(alphabet="$()ABN_a-z{} x", max_size=30), st.dictionaries(st.sampled_from(["A", "B", "N"]), st.text(max_size=5)))
def test_escaping_survives_any_expansion(text: str, defined: dict[str, str]) -> None:
    assert kubelet_expand(kubelet_escape(text), defined) == text


@cases_of(DOLLAR)
def test_the_kubelet_expansion_as_documented() -> None:
    # k8s.io/kubernetes third_party/forked/golang/expansion: the cases the kubelet's own tests name
    defined = {"VAR_A": "A", "VAR_B": "B"}
    assert kubelet_expand("pa$$word", {}) == "pa$word"
    assert kubelet_expand("$(VAR_A)-$(VAR_B)", defined) == "A-B"
    assert kubelet_expand("$(VAR_C)", defined) == "$(VAR_C)"
    assert kubelet_expand("$$(VAR_A)", defined) == "$(VAR_A)"
    assert kubelet_expand("$(VAR_A", defined) == "$(VAR_A"
    assert kubelet_expand("foo$", defined) == "foo$"
