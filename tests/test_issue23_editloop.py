"""Issue 23, the edit loop's rough edges: an acceptance accepts the value it names (a new tag warns again, and the
acceptance says it no longer matches, at its line); `check` counts accepted warnings (-v lists them) and marks `new`
what the committed stack's check did not have; shared-projects names the lines of `api_host` and of the project in
`namespaces`; orphaned-claims names the workload whose switch left the claims; the rendered/ freshness message names
only what is wrong. Every test runs on configs and stack modules the tests own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import policy
import stacks
from cli.main import main
from components.outputs import stack_outputs
from components.program import layout, objects, patches, sources
from config import project as project_folder
from config import provenance
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures
from tests.test_rendered_is_fresh import problems

Edit = Callable[[dict[str, Any]], Any]
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


def both(*edits: Edit) -> Edit:
    return lambda d: [e(d) for e in edits]


# --- an acceptance accepts the value it names ------------------------------------------------------------------------

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


# --- stack modules in a project of the test's own ----------------------------------------------------------------------

MODULE = """from config import AcceptedWarning, ClusterConfig, NodeSet, Security, ServiceAccount, Workload
CONFIG = ClusterConfig(
    name="{name}",
    description="x",
    gpu_model="H100",
    api_host="api.lab.example.org",
    node_sets=[NodeSet(name="n", count=4, gpus_per_node=4)],
    namespaces=[
        "ns",
        "other",
    ],
    security=Security(service_accounts=[ServiceAccount(name="sa", namespace="ns")]),
    workloads=[
        Workload(name="a", namespace="ns", user="u", image="quay.io/a/b:1", service_account="sa", gpus_per_node=4, transport="tcp"),{more}
    ],
    accepted_warnings=[
        AcceptedWarning(rule="image", object="StatefulSet ns/a", value="quay.io/a/b:1", reason="tags only"),
    ],
)
"""
WORKLOAD_B = """
        Workload(name="b", namespace="ns", user="u", image="quay.io/a/b:2", service_account="sa", gpus_per_node=4, transport="tcp"),"""


def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, modules: dict[str, str], commit: bool = True) -> Path:
    """A project folder of the test's own with these stack modules (the real clusters/ stays untouched), committed in a
    git repository of its own unless `commit` is false."""
    root = tmp_path / "project"
    (root / stacks.CLUSTERS).mkdir(parents=True)
    for name, text in modules.items():
        write_module(root, name, text)
    monkeypatch.setattr(project_folder, "ROOT", root)
    if commit:
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "committed stacks"]):
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args], cwd=root, check=True)
    return root


def write_module(root: Path, name: str, text: str) -> None:
    (root / stacks.CLUSTERS / f"{name}.py").write_text(text, encoding="utf-8")
    sys.modules.pop(f"{stacks.CLUSTERS}.{name}", None)  # the next load runs the edited module


def checked(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out.splitlines()


def line_of(root: Path, name: str, text: str) -> int:
    lines = (root / stacks.CLUSTERS / f"{name}.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, start=1) if text in line)


@pytest.mark.parametrize("tag", ["quay.io/a/b:3", "quay.io/a/b"], ids=["another tag", "no tag"])
def test_a_stale_acceptance_is_reported_at_its_line(
    tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: a copied module's acceptance of a tagged image no longer accepts the image its workload runs now."""
    text = MODULE.format(name="lab", more="").replace('image="quay.io/a/b:1", service', f'image="{tag}", service')
    root = project(tmp_path, monkeypatch, {"lab": text}, commit=False)
    code, lines = checked(["lab"], capsys)
    at = f"(clusters/lab.py:{line_of(root, 'lab', 'AcceptedWarning(rule=')})"
    assert code == 0 and any(line.startswith(f"lab: warning accepted-warnings accepted_warnings[0] {at}: ") for line in lines), lines
    assert any(line.startswith("lab: warning image workloads[a].image") for line in lines), lines  # not accepted any more
    assert f"value='{tag}'" in " ".join(" ".join(lines).split())  # the value to write, if the reason holds for it


# --- check counts the accepted warnings; -v lists them ------------------------------------------------------------------


@pytest.mark.parametrize("verbose", [False, True], ids=["counted", "-v lists them"])
def test_accepted_warnings_are_counted_and_listed_with_v(
    verbose: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project(tmp_path, monkeypatch, {"lab": MODULE.format(name="lab", more=WORKLOAD_B)}, commit=False)
    code, lines = checked(["lab", *(["-v"] if verbose else [])], capsys)
    assert code == 0
    heads = [line for line in lines if not line.startswith("    ")]
    unaccepted = [h for h in heads if h.startswith("lab: warning image workloads[b].image")]
    accepted = [h for h in heads if h.startswith("lab: warning image workloads[a].image")]
    assert len(unaccepted) == 1, lines  # what is not accepted is always printed
    assert len(accepted) == (1 if verbose else 0), lines
    assert any("[accepted: tags only]" in line for line in lines) == verbose
    summary = heads[-1]
    assert summary.startswith("lab: ok: 0 errors, 2 warnings, 1 accepted"), summary
    assert ("(-v lists them)" in summary) == (not verbose), summary


# --- check marks what is new against the committed stack ------------------------------------------------------------------

EDITS = [
    # (case, the module after the edit, the findings marked new, by the start of their lines, sorted)
    ("no edit", MODULE.format(name="lab", more=""), []),
    ("a workload added", MODULE.format(name="lab", more=WORKLOAD_B), ["new warning image workloads[b].image"]),
    (
        "the accepted tag changed",
        MODULE.format(name="lab", more="").replace('image="quay.io/a/b:1", service', 'image="quay.io/a/b:3", service'),
        ["new warning accepted-warnings accepted_warnings[0]", "new warning image workloads[a].image"],
    ),
    (
        "a workload added that does not fit",
        MODULE.format(name="lab", more=WORKLOAD_B).replace('name="a", namespace="ns"', 'name="a", nodes=4, namespace="ns"'),
        ["new error capacity workloads[", "new warning image workloads[b].image"],  # no committed render: the search's culprit
    ),
]


@pytest.mark.parametrize("case,edited,new", EDITS, ids=[e[0] for e in EDITS])
def test_check_marks_new_what_the_committed_stacks_check_did_not_have(
    case: str, edited: str, new: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, monkeypatch, {"lab": MODULE.format(name="lab", more="")})
    write_module(root, "lab", edited)
    code, lines = checked(["lab"], capsys)
    marked = sorted(line.removeprefix("lab: ") for line in lines if line.startswith("lab: new "))
    assert len(marked) == len(new) and all(m.startswith(n) for m, n in zip(marked, new, strict=True)), lines
    summary = lines[-1]
    assert (f", {len(new)} new" in summary) == bool(new) and ("new" in summary) == bool(new), summary
    assert code == (1 if any(n.startswith("new error") for n in new) else 0)
    # the unedited finding, printed with it, is not new (its line moved, its wording is the same)
    assert not any(line.startswith("lab: new warning image workloads[a]") for line in lines) or "tag changed" in case


@pytest.mark.parametrize("where", ["outside git", "a ref without the stack"])
def test_new_is_marked_only_where_the_committed_stack_is_known(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, monkeypatch, {"lab": MODULE.format(name="lab", more=WORKLOAD_B)}, commit=where != "outside git")
    argv = ["lab"]
    if where == "a ref without the stack":
        write_module(root, "other", MODULE.format(name="other", more="").replace("api.lab", "api.other"))
        subprocess.run(["git", "rm", "-q", "--cached", "clusters/lab.py"], cwd=root, check=True)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "clusters/other.py"], cwd=root, check=True)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lab gone"], cwd=root, check=True)
        argv += ["--against", "HEAD"]
    _, lines = checked(argv, capsys)
    image_b = [line for line in lines if "image workloads[b].image" in line]
    assert image_b, lines
    # outside git nothing can be told new; at a ref that has no such stack, everything printed is
    assert all(line.startswith("lab: new warning") for line in image_b) == (where != "outside git"), image_b


# --- shared-projects at the lines of api_host and of the project in namespaces ------------------------------------------------


@pytest.mark.parametrize(
    "head,written",
    [("shared-projects api_host", 'api_host="api.lab.example.org"'), ("shared-projects namespaces[0]", '"ns",')],
    ids=["api_host", "namespaces[0]"],
)
def test_a_copied_module_warns_at_the_lines_that_write_the_shared_values(
    head: str, written: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, monkeypatch, {"lab": MODULE.format(name="lab", more="")}, commit=False)
    write_module(root, "mylab", MODULE.format(name="mylab", more="").replace('    "other",\n', '    "mine",\n'))
    _, lines = checked(["mylab", "lab"], capsys)
    for name in ("mylab", "lab"):
        expected = f"{name}: warning {head} (clusters/{name}.py:{line_of(root, name, written)}):"
        assert any(line.startswith(expected) for line in lines), (expected, lines)
    # the project only one stack deploys into is not named
    assert not any("namespaces[1]" in line for line in lines)


KEYWORDS = """CONFIG = ClusterConfig(
    name="x",
    namespaces=[
        "a",
        *OTHERS,
        "b",
    ],
    api_host=(
        "h"
    ),
    single=["c", "d"],
)
"""


@pytest.mark.parametrize(
    "path,line",
    [
        (("name",), 2),
        (("namespaces",), 3),
        (("namespaces", 0), 4),
        (("namespaces", 2), 3),  # past a *spread the index is not the item's: the keyword's line
        (("api_host",), 8),
        (("single", 1), 11),
        (("single", 5), 11),  # no such item: the keyword's line
        (("absent",), None),
    ],
)
def test_keyword_line(path: tuple[str | int, ...], line: int | None, tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(KEYWORDS, encoding="utf-8")
    assert provenance.keyword_line(str(module), 1, "ClusterConfig", path) == line
    assert provenance.keyword_line(str(module), 2, "ClusterConfig", path) is None  # no such call on that line


# --- orphaned-claims names the workload whose change left the claims ----------------------------------------------------------


def _switch(d: dict[str, Any]) -> None:
    fixtures.workload(d, "dev").update(transport="tcp", tcp_variants=[])


def _volume_renamed(d: dict[str, Any]) -> None:
    next(v for v in d["volumes"] if v["name"] == "workspace")["name"] = "ws"
    for m in fixtures.workload(d, "dev")["mounts"]:
        if m["volume"] == "workspace":
            m["volume"] = "ws"


def _rename(d: dict[str, Any]) -> None:
    fixtures.workload(d, "dev").update(name="dev2", tcp_variants=[])


DEV_CLAIMS = "the committed render gives 'dev' the per-pod claims team-a/workspace-dev-0"
SWITCH = "(the TCP switch of 'dev', which drops its tcp_variants)"


@pytest.mark.parametrize(
    "case,edit,workload,where,phrase",
    [
        ("TCP switch drops its variant", _switch, "dev-tcp", "workloads[dev].transport", SWITCH),
        ("its volume renamed", _volume_renamed, "dev", "workloads[dev]", DEV_CLAIMS),
        ("renamed: no entry left", _rename, "dev", "", DEV_CLAIMS),
        (
            "renamed beside another's switch",
            both(_rename, lambda d: fixtures.workload(d, "train").update(transport="tcp")),
            "dev",
            "",
            DEV_CLAIMS,
        ),
    ],
    ids=["TCP switch drops its variant", "its volume renamed", "renamed: no entry left", "renamed beside another's switch"],
)
def test_orphaned_claims_name_the_change(case: str, edit: Edit, workload: str, where: str, phrase: str) -> None:
    before = stack_outputs(fixtures.config("roce"))
    found = [f for f in check(fixtures.config("roce", edit), previous=before) if f.rule == "orphaned-claims"]
    [f] = [f for f in found if f.object == f"Workload {workload}"]
    assert f.where == where and phrase in f.message, f.line()
    assert f.value and f.value in f.message  # the claims: an acceptance names them
    assert "[on the cluster: Workload" not in f.line()  # a workload of the committed render is no object on the cluster


# --- the rendered/ freshness message names only what is wrong -------------------------------------------------------------------


@pytest.mark.parametrize(
    "stale,orphans,says,never",
    [
        ([], [], "", "rendered/"),
        (["nerc"], [], "rendered/ is stale for: nerc", "left over"),
        ([], ["mylab"], "left over from removed stacks: mylab", "stale"),
        (["a", "b"], ["c"], "stale for: a, b; rendered/ has folders left over from removed stacks: c", ": -"),
    ],
)
def test_the_freshness_message_names_only_what_is_wrong(stale: list[str], orphans: list[str], says: str, never: str) -> None:
    message = problems(stale, orphans)
    assert says in message and (never not in message)
    assert ": -" not in message
