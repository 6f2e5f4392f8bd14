"""The live tier's stand-in provisioner (live/controlplane.py), without a cluster: a claim it cannot serve is tried
again next round and never holds up the claims listed after it, as a CSI provisioner serves each claim on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from live.controlplane import PROVISIONER, ControlPlane

CLASS = {"metadata": {"name": "rbd"}, "provisioner": PROVISIONER, "volumeBindingMode": "Immediate"}


def claim(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}"},
        "spec": {"storageClassName": "rbd", "accessModes": ["ReadWriteOnce"], **spec},
    }


class Plane(ControlPlane):
    """A plane whose API is a list of claims, one class, and the PersistentVolumes POSTed to it."""

    def __init__(self, claims: list[dict[str, Any]]) -> None:
        super().__init__(name="test", workdir=Path("/nonexistent"), bin={})
        self.claims, self.created = claims, []

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
        if method == "POST":
            self.created.append(body)
            return 201, body
        return 200, {"items": self.claims if "claims" in path else [CLASS]}


def test_a_claim_it_cannot_serve_does_not_hold_up_the_next() -> None:
    no_size = claim("b-first", "broken")  # no resources.requests.storage: a PersistentVolume needs a capacity
    served = claim("nccl-test", "workspace-deepti-barcelona-0", resources={"requests": {"storage": "100Gi"}})
    plane = Plane([no_size, served])
    plane.provision_once()
    assert [pv["spec"]["claimRef"]["name"] for pv in plane.created] == ["workspace-deepti-barcelona-0"]
    assert plane.created[0]["spec"]["capacity"] == {"storage": "100Gi"}


def test_a_bound_claim_or_another_class_is_left_alone() -> None:
    bound = claim("a", "bound", resources={"requests": {"storage": "1Gi"}}, volumeName="pv-1")
    other = claim("a", "other", resources={"requests": {"storage": "1Gi"}}, storageClassName="nfs-csi")
    plane = Plane([bound, other])
    plane.provision_once()
    assert plane.created == []
