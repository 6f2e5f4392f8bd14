"""Ownership after hand edits (docs/lifecycle.md "Drift"): every object the stack creates carries the provider's
per-object `pulumi.com/patchForce`, so the `up` after a refresh takes its declared fields back from whoever edited
them by hand; patches of objects others own, and objects adopted from `hand_made`, never do (adoption narrows what
someone made, which `adopt-diff` shows first). The live tier proves what the provider does with it
(live/tests/test_convergence.py); these hold what the program declares. Configs are the tests' own (fixtures)."""

from __future__ import annotations

from typing import Any

import pytest

from components.lifecycle import PATCH_FORCE
from components.program import layout
from tests import fixtures


def forced(obj: dict[str, Any]) -> bool:
    return (obj["metadata"].get("annotations") or {}).get(PATCH_FORCE) == "true"


@pytest.mark.parametrize("name", ["roce", "tcp", "ib"])
def test_every_object_the_stack_creates_takes_its_fields_back(name: str) -> None:
    declared = [d for d in layout(fixtures.config(name)) if not d.patch]
    assert declared
    assert [f"{d.object['kind']} {d.object['metadata']['name']}" for d in declared if not forced(d.object)] == []


def test_a_patch_of_an_object_others_own_is_never_forced() -> None:
    patches = [d.object for d in layout(fixtures.config("ib")) if d.patch]
    assert patches, "the fixture patches the NFS server's root claim"
    assert not any(forced(p) for p in patches)


@pytest.mark.parametrize(
    "adopted",
    [
        ("ServiceAccount", "team-a", "trainer"),
        ("NetworkAttachmentDefinition", "team-a", "port1-network"),
        ("StatefulSet", "team-a", "dev"),
    ],
)
def test_an_adopted_object_is_forced_only_by_the_adoption_procedure(adopted: tuple[str, str, str]) -> None:
    kind, ns, name = adopted

    def edit(d: dict[str, Any]) -> None:
        d["hand_made"] = [{"kind": kind, "namespace": ns, "name": name, "source": "oc create"}]

    declared = {(d.object["kind"], d.object["metadata"].get("namespace") or "", d.object["metadata"]["name"]): d.object
                for d in layout(fixtures.config("roce", edit)) if not d.patch}  # fmt: skip
    assert adopted in declared, sorted(declared)
    assert not forced(declared[adopted])
    # Everything else the stack creates still is.
    assert all(forced(o) for key, o in declared.items() if key != adopted)


def test_forcing_adds_to_the_annotations_an_object_has() -> None:
    sts = next(d.object for d in layout(fixtures.config("roce")) if d.object["kind"] == "StatefulSet")
    assert sts["metadata"]["annotations"]["pulumi.com/waitFor"] == "jsonpath={.status.replicas}=2"
    assert forced(sts)
