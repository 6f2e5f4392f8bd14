"""Adopting a stack that moves to operator mode: its hand-made NAD copies are left out of the import plan, and adoption
says to delete each first (the operator makes its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stacks
from tests import fixtures
from tests.fixtures import Data, operator_mode
from tests.helpers import findings_of
from tools import adoption


def hand_made_copies(d: Data) -> None:
    d["hand_made"] = [
        {"kind": "NetworkAttachmentDefinition", "name": f"port{i}-network", "namespace": "team-a", "source": "seed 003 step 2"}
        for i in (1, 2)
    ]


def live_nad(name: str, ns: str = "team-a") -> dict[str, Any]:
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": "1",
            "annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port1rdma"},
        },
        "spec": {"config": "{}"},
    }


class TestAdoption:
    def test_the_import_plan_leaves_the_copies_out_and_says_what_to_delete(self) -> None:
        c = fixtures.config("roce", operator_mode, hand_made_copies)
        plan = adoption.import_plan(c, "roce")
        assert not [r for r in plan["resources"] if r.get("type", "").endswith("NetworkAttachmentDefinition")]
        lines = adoption.operator_deletions(c)
        assert len(lines) == 2
        assert "oc delete net-attach-def port1-network -n team-a" in lines[0] and "team-a/team-a-port1-network" in lines[0]
        assert adoption.operator_deletions(fixtures.config("roce", hand_made_copies)) == []  # copy mode adopts them

    def test_adopt_diff_of_a_copy_says_delete_first(self) -> None:
        c = fixtures.config("roce", operator_mode)
        report, act = adoption.adopt_diff(c, live_nad("port1-network"), "nad.yaml")
        assert act and "oc delete net-attach-def port1-network -n team-a" in report
        same_name, act = adoption.adopt_diff(c, live_nad("team-a-port2-network"), "nad.yaml")
        assert act and "overwrites a NAD of that name" in same_name
        with pytest.raises(stacks.ConfigError, match="declares no"):
            adoption.adopt_diff(c, live_nad("port1-network", "team-b"), "nad.yaml")  # no RDMA pod there: not the operator's

    def test_adopt_diff_of_a_list(self) -> None:
        c = fixtures.config("roce", operator_mode)
        listing = {"apiVersion": "v1", "kind": "List", "items": [live_nad("port1-network"), live_nad("unrelated")]}
        report, act = adoption.adopt_diff(c, listing, "nads.yaml")
        assert act and "Delete first:" in report and "port1-network -n team-a" in report
        assert "NetworkAttachmentDefinition team-a/unrelated" in report.split("Not declared")[1]

    def test_the_hand_made_rule_names_the_operators_nad(self) -> None:
        found = [f for f in findings_of(fixtures.config("roce", operator_mode, hand_made_copies)) if f.rule == "hand-made"]
        # one finding for the project's copies (grouped: the same cause once), naming the operator and every copy to delete
        assert len(found) == 1
        assert "the SR-IOV operator makes each project's NADs itself" in found[0].message
        assert "oc delete net-attach-def port1-network port2-network -n team-a" in found[0].fix
        # a copy in a project without RDMA pods is not the operator's business: the old reason stands
        elsewhere = fixtures.config(
            "roce", operator_mode, hand_made_copies, lambda d: [h.update(namespace="team-b") for h in d["hand_made"]]
        )
        found = [f for f in findings_of(elsewhere) if f.rule == "hand-made"]
        assert len(found) == 2 and not [f for f in found if "SR-IOV operator makes" in f.message]

    def test_the_cli_prints_the_deletions_beside_the_plan(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        from cli import cluster

        c = fixtures.config("roce", operator_mode, hand_made_copies)
        target = stacks.PulumiStack("roce", "roce", "all", None, None, [], tmp_path / "Pulumi.roce.yaml")
        monkeypatch.setattr(stacks, "pulumi_stacks", lambda: [target])
        monkeypatch.setattr(stacks, "load", lambda name: c)
        args = type("A", (), {"pulumi_stack": "roce", "only": None, "out": str(tmp_path / "plan.json")})()
        assert cluster.cmd_import_plan(args) == 0  # type: ignore[arg-type]
        err = capsys.readouterr().err
        assert "delete first" in err and "oc delete net-attach-def port2-network -n team-a" in err
