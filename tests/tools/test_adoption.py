"""Adopting what exists, and who may run what: the import plan matches what the program registers (so a
`pulumi preview` after `pulumi import -f` plans no create and no delete for the adopted objects), adopt-diff
shows what taking over a broader live object removes, and every object has a tier a person can check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import stacks
from cli.main import main
from components.kube import CLUSTER_SCOPED_KINDS
from components.program import objects
from components.tiers import PLATFORM, PROJECT, tier_of
from tests import fixtures
from tests.helpers import ROOT, rendered_fixture, rendered_stack
from tools import adoption
from tools.render import Rendering, run

IMPORT_SCHEMA = json.loads((ROOT / "schemas" / "pulumi-import.schema.json").read_text(encoding="utf-8"))


def registered(r: Rendering) -> set[tuple[str, str, str, str]]:
    """(type, logical name, parent component type, parent component name) of every object the program declares."""
    out = set()
    for rec in r.resources:
        if rec.is_patch:
            continue
        parent = rec.options["parent"]
        out.add((rec.type, rec.name, parent.split("::")[-2].rsplit("$", 1)[-1], parent.split("::")[-1]))
    return out


def renderings() -> list[tuple[str, Any, str]]:
    return [(f"stack {n}", stacks.load(n), t) for n in stacks.names() for t in stacks.TIERS] + [
        (f"fixture {n}", fixtures.config(n), t) for n in sorted(fixtures.FIXTURES) for t in stacks.TIERS
    ]


@pytest.mark.parametrize("label,config,tier", renderings(), ids=lambda x: x if isinstance(x, str) else "")
def test_the_import_entries_are_what_the_program_registers(label: str, config: Any, tier: str) -> None:
    entries = adoption.import_entries(config, tier)
    planned = {(e["type"], e["logicalName"], *e["component"]) for e in entries}
    kind, name = label.split(" ", 1)
    # the whole program is the session's rendering (conftest); a tier is rendered here
    declared = registered((rendered_stack if kind == "stack" else rendered_fixture)(name) if tier == "all" else run(config, tier))
    where = f"clusters/{name}.py" if kind == "stack" else f"tests/fixtures.py {name}"
    assert planned == declared, (
        f"{where}, tier {tier}: the import plan differs from what the program registers: "
        f"planned only {sorted(planned - declared)}, registered only {sorted(declared - planned)}"
    )
    ids = [(e["id"], e["logicalName"]) for e in entries if e["id"] != e["logicalName"]]
    assert not ids, f"{where}, tier {tier}: an import id is NAMESPACE/NAME (NAME cluster-scoped), its logical name: found {ids}"


@pytest.mark.parametrize("name", stacks.names())
def test_each_stacks_import_plan_is_a_file_pulumi_import_reads(name: str) -> None:
    config = stacks.load(name)
    for tier in stacks.TIERS:
        plan = adoption.import_plan(config, f"{name}-{tier}", tier)
        jsonschema.validate(plan, IMPORT_SCHEMA)
        where = f"clusters/{name}.py, import plan of tier {tier}"
        handles = [r["name"] for r in plan["resources"]]
        assert len(handles) == len(set(handles)), (
            f"{where}: handles are unique, found twice {sorted({h for h in handles if handles.count(h) > 1})}"
        )
        parents = {r["parent"] for r in plan["resources"] if not r.get("component")}
        components = {r["name"] for r in plan["resources"] if r.get("component")}
        assert parents <= components, f"{where}: every parent is a component of the plan, found no {sorted(parents - components)}"
        provider = f"urn:pulumi:{name}-{tier}::gpu-training::pulumi:providers:kubernetes::{name}"
        assert plan["nameTable"] == {"kubernetes": provider}, f"{where}: expected the provider {provider}, found {plan['nameTable']}"
        declared = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects(config)}
        made = {(h.kind, h.namespace, h.name) for h in config.hand_made} & declared  # the rest: a hand-made warning
        adopted = {
            (r["name"].split(" ", 1)[0], *(r["logicalName"].split("/", 1) if "/" in r["logicalName"] else [None, r["logicalName"]]))
            for r in plan["resources"]
            if not r.get("component")
        }
        if tier == "all":
            assert adopted == made, (
                f"{where}: the plan adopts exactly what the stack lists in hand_made and declares: "
                f"adopted only {sorted(adopted - made, key=str)}, listed only {sorted(made - adopted, key=str)}"
            )


def _made_by_hand(*objects: tuple[str, str | None, str]) -> Any:
    """An edit of a fixture: these objects (kind, namespace, name) were made by hand on its cluster."""

    def edit(d: dict[str, Any]) -> None:
        d["hand_made"] = [{"kind": k, "namespace": ns, "name": n, "source": "oc create"} for k, ns, n in objects]

    return edit


def test_the_plan_marks_hand_made_and_fresh_objects_and_filters_kinds(
    fixture_project: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture_project("ib", _made_by_hand(("PersistentVolumeClaim", "lab", "shared"), ("ServiceAccount", "lab", "runner")))
    out = tmp_path / "plan.json"
    assert main(["import-plan", "ib", "--only", "PersistentVolumeClaim", "--out", str(out)]) == 0
    assert "ib (ib, tier project): wrote" in capsys.readouterr().out
    plan = json.loads(out.read_text())
    assert [r["logicalName"] for r in plan["resources"]] == ["storage", "lab/shared"]  # its component, then the claim
    assert main(["import-plan", "ib", "--only", "Pod"]) == 2
    assert "declares no Pod" in capsys.readouterr().err
    assert main(["import-plan", "ib-staging"]) == 2
    assert "no Pulumi.ib-staging.yaml" in capsys.readouterr().err
    fresh = [e["name"] for e in adoption.import_entries(stacks.load("ib")) if not e["hand_made"]]
    assert "StatefulSet lab/env" in fresh and "PersistentVolumeClaim lab/shared" not in fresh


def test_a_pulumi_stacks_plan_holds_only_its_own_tier(fixture_project: Any, capsys: pytest.CaptureFixture[str]) -> None:
    grant = "system:openshift:scc:gpu-rdma"
    fixture_project(
        "roce",
        _made_by_hand(
            ("SecurityContextConstraints", None, "gpu-rdma"),
            ("ClusterRole", None, grant),
            ("RoleBinding", "team-a", grant),
            ("ServiceAccount", "team-a", "trainer"),
        ),
    )
    assert main(["import-plan", "roce"]) == 0
    project = json.loads(capsys.readouterr().out)
    assert {r["type"].rsplit(":", 1)[-1] for r in project["resources"] if not r.get("component")} == {"ServiceAccount"}
    assert main(["import-plan", "roce-platform"]) == 0
    platform = json.loads(capsys.readouterr().out)
    assert {r["type"].rsplit(":", 1)[-1] for r in platform["resources"] if not r.get("component")} == {
        "SecurityContextConstraints", "ClusterRole", "RoleBinding"
    }  # fmt: skip
    assert platform["nameTable"]["kubernetes"] == "urn:pulumi:roce-platform::gpu-training::pulumi:providers:kubernetes::roce"


# The SCC seed 002 applied on Barcelona, as `oc get scc nccl-rdma-scc -o yaml` shows it (plus what the server sets).
SEED_002_SCC = {
    "apiVersion": "security.openshift.io/v1",
    "kind": "SecurityContextConstraints",
    "metadata": {"name": "nccl-rdma-scc", "uid": "x", "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z",
                 "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
    "allowHostDirVolumePlugin": True,
    "allowHostIPC": True,
    "allowHostNetwork": True,
    "allowPrivilegeEscalation": True,
    "allowPrivilegedContainer": False,
    "allowedCapabilities": ["IPC_LOCK", "SYS_RESOURCE"],
    "fsGroup": {"type": "RunAsAny"},
    "runAsUser": {"type": "RunAsAny"},
    "seLinuxContext": {"type": "RunAsAny"},
    "supplementalGroups": {"type": "RunAsAny"},
    "volumes": ["configMap", "downwardAPI", "emptyDir", "hostPath", "persistentVolumeClaim", "projected", "secret"],
    "users": ["system:serviceaccount:b-efficient-memory-offloading-765cab:h-kim-sa"],
}  # fmt: skip


def test_adopt_diff_lists_what_taking_over_the_seeds_scc_removes(
    fixture_project: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Seed 002's SCC, as the SCC a stack creates for its RDMA pods (Barcelona's nccl-rdma-scc is the real case).
    fixture_project("roce")
    live = tmp_path / "scc.yaml"
    live.write_text(yaml.safe_dump({**SEED_002_SCC, "metadata": {**SEED_002_SCC["metadata"], "name": "gpu-rdma"}}), encoding="utf-8")
    assert main(["adopt-diff", "roce", str(live)]) == 1
    out = capsys.readouterr().out
    for removed in (
        "REMOVES allowHostIPC: true -> false",
        "REMOVES allowHostNetwork: true -> false",
        "REMOVES allowHostDirVolumePlugin: true -> false",
        "REMOVES allowPrivilegeEscalation: true -> false",
        "REMOVES from allowedCapabilities: SYS_RESOURCE",
        "REMOVES from users: system:serviceaccount:b-efficient-memory-offloading-765cab:h-kim-sa",
        "REMOVES from volumes: hostPath",
    ):
        assert removed in out, removed
    assert "RESTRICTS seLinuxContext.type: RunAsAny -> MustRunAs" in out  # values as YAML writes them
    assert "ADDS to requiredDropCapabilities: ALL" in out  # added restrictions narrow too
    assert "uid" not in out and "last-applied" not in out  # what the server sets is never a change
    assert "Adopting narrows this SecurityContextConstraints" in out and "ulimit -l unlimited" in out


def test_adopt_diff_of_an_object_already_as_declared_takes_nothing(
    fixture_project: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture_project("ib")
    declared = next(o for o in rendered_fixture("ib").objects() if o["kind"] == "ServiceAccount")
    live = tmp_path / "sa.yaml"
    live.write_text(yaml.safe_dump({**declared, "metadata": {**declared["metadata"], "uid": "u"}, "secrets": [{"name": "t"}]}))
    assert main(["adopt-diff", "ib", str(live)]) == 0
    out = capsys.readouterr().out
    assert "takes nothing away" in out and "keeps secrets" in out


@pytest.mark.parametrize(
    "live,phrase",
    [
        ({"kind": "ConfigMap", "metadata": {"name": "nope", "namespace": "x"}}, "declares no ConfigMap x/nope"),
        ([1], "not a Kubernetes object"),
    ],
)
def test_adopt_diff_input_errors(live: Any, phrase: str, fixture_project: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture_project("tcp")
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(live))
    assert main(["adopt-diff", "tcp", str(path)]) == 2
    assert phrase in capsys.readouterr().err


def _all_renderings() -> list[tuple[str, Rendering]]:
    return [(f"clusters/{n}.py", rendered_stack(n)) for n in stacks.names()] + [
        (f"tests/fixtures.py {n}", rendered_fixture(n)) for n in sorted(fixtures.FIXTURES)
    ]


def test_every_object_has_a_tier_and_the_project_tier_holds_nothing_cluster_scoped() -> None:
    for name, r in _all_renderings():
        for rec in r.resources:
            tier = tier_of(rec.object, r.config)
            assert tier in (PLATFORM, PROJECT), f"{name}: {rec.object['kind']} {rec.name} has tier {tier!r}"
            if tier == PROJECT:
                ns = rec.object["metadata"].get("namespace")
                assert rec.object["kind"] not in CLUSTER_SCOPED_KINDS and ns in r.config.namespaces, (
                    f"{name}: the project tier holds {rec.object['kind']} {rec.name}, which is cluster-scoped or outside the "
                    f"stack's namespaces {r.config.namespaces} (namespace {ns})"
                )


def test_rights_names_each_objects_tier_and_its_check(fixture_project: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fixture_project("roce")
    assert main(["rights", "roce"]) == 0
    out = capsys.readouterr().out
    platform, project = out.split("\nplatform tier", 1)[1].split("\nproject tier", 1)
    assert "Pulumi stack roce-platform" in platform and "Pulumi stack roce)" in project
    assert "oc auth can-i create securitycontextconstraints.security.openshift.io" in platform
    assert "oc auth can-i bind clusterroles.rbac.authorization.k8s.io/system:openshift:scc:gpu-rdma -n team-a" in platform
    assert "oc auth can-i create statefulsets.apps -n team-b" in project
    assert "SecurityContextConstraints" not in project.split("\nreads", 1)[0]
    assert "oc auth can-i get namespaces/team-a -n team-a" in out and "if missing: create the project" in out


def test_rights_says_each_line_once(fixture_project: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Objects of a kind that need the same lines (a project's NADs, its ConfigMaps) are one entry: no line to run twice."""
    fixture_project("roce")
    assert main(["rights", "roce"]) == 0
    out = capsys.readouterr().out
    for tier in out.split("\n\n")[1:]:
        asked = [line.split("oc auth can-i", 1)[1] for line in tier.splitlines() if "oc auth can-i" in line]
        assert sorted(set(asked)) == sorted(asked), tier


def test_rights_run_asks_each_line_once_with_the_stack_files_context(
    fixture_project: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rights --run`: the lines asked of the cluster (as `oc auth can-i ... --context` of the stack files), each answer
    after its line, and exit 1 when one is not yes."""
    fixture_project("roce")
    bin_dir, asked = tmp_path / "bin", tmp_path / "asked"
    bin_dir.mkdir()
    (bin_dir / "oc").write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  "config get-contexts"*) echo roce ;;\n'
        f'  *statefulsets*) echo "$*" >> {asked}; echo no; exit 1 ;;\n'
        f'  *) echo "$*" >> {asked}; echo yes ;;\n'
        "esac\n",
        encoding="utf-8",
    )
    (bin_dir / "oc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert main(["rights", "roce", "--run"]) == 1
    out = capsys.readouterr().out
    calls = asked.read_text(encoding="utf-8").splitlines()
    assert len(calls) == len(set(calls)) and all(c.startswith("auth can-i ") and c.endswith("--context roce") for c in calls)
    assert "oc auth can-i create statefulsets.apps -n team-b  -> no" in out
    assert "oc auth can-i create securitycontextconstraints.security.openshift.io  -> yes" in out
    assert out.splitlines()[-1] == f"roce: {len(calls) - 2} of {len(calls)} answered yes (context roce); 2 did not: above"


def test_rights_run_without_oc_says_what_to_install(
    fixture_project: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture_project("roce")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["rights", "roce", "--run"]) == 2
    assert "error: rights --run: neither oc nor kubectl is on PATH: install the OpenShift CLI" in capsys.readouterr().err


def test_adopt_diff_of_a_list_diffs_what_the_stack_declares_and_names_the_rest(
    fixture_project: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `oc get scc -o yaml`: kind List, every SCC of the cluster; the roce fixture declares gpu-rdma only.
    fixture_project("roce")
    audited = {"example.com/audited": "true"}  # a string YAML would read as a boolean: quoted
    gpu_rdma = {**SEED_002_SCC, "metadata": {**SEED_002_SCC["metadata"], "name": "gpu-rdma", "annotations": audited}}
    gpu_rdma["priority"] = None  # oc prints `priority: null` for an SCC without one
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [
            {**SEED_002_SCC, "metadata": {"name": "anyuid"}},
            gpu_rdma,
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder", "namespace": "team-a"}},
        ],
    }
    live = tmp_path / "scc.yaml"
    live.write_text(yaml.safe_dump(json.loads(json.dumps(listing))), encoding="utf-8")  # no YAML aliases for shared values
    assert main(["adopt-diff", "roce", str(live)]) == 1  # gpu-rdma narrows
    out = capsys.readouterr().out
    assert out.startswith(f"{live}: a List of 3 object(s); stack roce declares 1, diffed one by one.\n")
    assert f"SecurityContextConstraints gpu-rdma: live ({live}) -> what stack roce declares" in out
    assert "REMOVES allowHostIPC: true -> false" in out and "RESTRICTS seLinuxContext.type: RunAsAny -> MustRunAs" in out
    # YAML forms, never Python reprs
    assert "~ changes priority: null -> 0" in out
    assert "= keeps metadata.annotations.example.com/audited: 'true'" in out
    assert "None" not in out and "False" not in out and "True" not in out
    assert out.endswith(
        "Not declared by stack roce (nothing adopts them; `pulumi up` leaves them as they are):\n"
        "  SecurityContextConstraints anyuid\n"
        "  ServiceAccount team-a/builder\n"
    )


@pytest.mark.parametrize(
    "items,phrase",
    [
        ([{"kind": "SecurityContextConstraints", "metadata": {"name": "anyuid"}}], "declares none of the 1 objects of the List"),
        ([], "the List holds no items"),
        ([{"kind": "SecurityContextConstraints"}], "items[0] of the List is not a Kubernetes object"),
    ],
)
def test_adopt_diff_of_a_list_input_errors(
    items: list[Any], phrase: str, fixture_project: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture_project("roce")
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    assert main(["adopt-diff", "roce", str(path)]) == 2
    err = capsys.readouterr().err
    assert phrase in err and "declares no List" not in err, err
