"""The shared-projects rule: a stack that deploys to another stack's API server, or into its projects there (a copied
stack module that still names the cluster it was copied from), warns. Every test runs on configs the tests own
(tests/fixtures.py), compared with other configs the tests own; one checks that the preflight compares with the
project's stacks when it is given none."""

from __future__ import annotations

from typing import Any

import pytest

import policy
import policy.run
import stacks
from components.program import objects, patches
from config.stack import ClusterConfig
from policy.core import Finding
from policy.rules.stack import cluster_host
from tests import fixtures

HOST = "api.lab.example.org"


def cluster(
    name: str, fixture: str = "tcp", api_host: str | None = HOST, namespaces: list[str] | None = None, **fields: Any
) -> ClusterConfig:
    """A fixture under another name and API server; `namespaces` renames its projects (every namespace= with them)."""

    def edit(d: dict[str, Any]) -> None:
        d["name"] = name
        if api_host is not None:
            d["api_host"] = api_host
        if namespaces is not None:
            renamed = dict(zip(d["namespaces"], namespaces, strict=True))
            rename(d, renamed)
        d.update(fields)

    return fixtures.config(fixture, edit)


def rename(node: Any, names: dict[str, str]) -> None:
    """Every `namespace` value and the `namespaces` list of plain config data, renamed."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "namespace" and value in names:
                node[key] = names[value]
            elif key == "namespaces":
                node[key] = [names.get(n, n) for n in value]
            else:
                rename(value, names)
    elif isinstance(node, list):
        for item in node:
            rename(item, names)


def shared(config: ClusterConfig, *others: ClusterConfig) -> list[Finding]:
    findings = policy.check(config, objects(config), patches(config), others=others)
    return [f for f in findings if f.rule == "shared-projects"]


def test_a_copied_stack_warns_on_the_api_server_and_each_project_it_shares() -> None:
    original = cluster("lab")
    copy = cluster("mylab")  # copied: same API server, same projects
    found = shared(copy, original)
    assert all(f.severity == "warning" for f in found)
    assert {(f.object, f.field) for f in found} == {("Stack mylab", "api_host")} | {
        (f"Namespace {ns}", f"namespaces[{i}]") for i, ns in enumerate(copy.namespaces)
    }
    assert all("stack lab" in f.message and HOST in f.message for f in found)
    # the stack it was copied from warns too: its next `pulumi up` would meet the copy's objects
    assert {f.object for f in shared(original, copy)} == {"Stack lab"} | {f"Namespace {ns}" for ns in original.namespaces}


def test_one_shared_project_is_named_alone() -> None:
    original = cluster("lab")
    kept, *moved = original.namespaces
    copy = cluster("mylab", namespaces=[kept, *(f"{ns}-mylab" for ns in moved)])
    assert {f.object for f in shared(copy, original)} == {"Stack mylab", f"Namespace {kept}"}


def test_one_cluster_with_separate_projects_warns_on_the_api_server_only() -> None:
    original = cluster("lab")
    other = cluster("otherlab", namespaces=[f"{ns}-other" for ns in original.namespaces])
    found = shared(other, original)
    assert [(f.object, f.field) for f in found] == [("Stack otherlab", "api_host")]
    assert "accepted_warnings" in found[0].fix


def test_one_project_name_on_two_clusters_is_no_finding() -> None:
    # Barcelona and Cairo both deploy into a project named nccl-test, on two clusters: project names are per cluster.
    barcelona = cluster("barcelona-like", "roce", api_host="api.barcelona.example.org", namespaces=["nccl-test", "team-b"])
    cairo = cluster("cairo-like", "ib", api_host="api.cairo.example.org", namespaces=["nccl-test"])
    assert shared(barcelona, cairo) == [] and shared(cairo, barcelona) == []


@pytest.mark.parametrize("which", ["this", "other", "both"])
def test_a_stack_without_api_host_is_compared_with_none(which: str) -> None:
    # Without api_host the config cannot tell which cluster it reaches (the stack file's kube context decides): a
    # shared project name alone proves nothing, so it is no finding.
    this = cluster("mylab", api_host=None if which in ("this", "both") else HOST)
    other = cluster("lab", api_host=None if which in ("other", "both") else HOST)
    assert shared(this, other) == []


@pytest.mark.parametrize("spelling", ["https://API.lab.example.org:6443", "api.lab.example.org.", "api.lab.example.org:6443/"])
def test_one_api_server_however_it_is_written(spelling: str) -> None:
    assert cluster_host(spelling) == HOST
    assert [f.object for f in shared(cluster("mylab", api_host=spelling), cluster("lab"))][-1] == "Stack mylab"


def test_cluster_host() -> None:
    assert cluster_host(None) is None and cluster_host("") is None and cluster_host("  ") is None
    assert cluster_host("https://[fd00::1]:6443") == "fd00::1"
    assert cluster_host("api.a.example.org") != cluster_host("api.b.example.org")


def test_a_stack_is_never_compared_with_itself() -> None:
    config = cluster("lab")
    assert shared(config, config) == []


def test_a_stack_that_shares_a_cluster_knowingly_accepts_the_warning() -> None:
    accepted = [{"rule": "shared-projects", "object": "Stack otherlab", "reason": "two teams on one cluster, each in its own projects"}]
    original = cluster("lab")
    other = cluster("otherlab", namespaces=[f"{ns}-other" for ns in original.namespaces], accepted_warnings=accepted)
    (found,) = shared(other, original)
    assert found.accepted == "two teams on one cluster, each in its own projects"
    assert "accepted_warnings" not in {f.rule for f in policy.check(other, objects(other), patches(other), others=[original])}


def test_the_stacks_a_check_compares_with_are_every_stack_but_the_one_checked() -> None:
    names = stacks.names()
    assert [c.name for c in stacks.others(names[0])] == names[1:]
    assert [c.name for c in stacks.others("not-a-stack")] == names
