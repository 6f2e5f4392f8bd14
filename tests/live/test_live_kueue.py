"""How the live tier installs Kueue (live/kueue.py, docs/live.md "Kueue"), without running it: the module's webhooks
are called on loopback with the tier's CA, only those this manager serves are registered, and those of jobs,
StatefulSets and pods reach only the managed namespaces (its pod webhook fails closed: any other namespace of the
plane must not depend on it); the CRDs the release converts by webhook are converted by the manager."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from live import kueue

CA = b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"


def _hook(name: str, group: str, resources: list[str], path: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": resources}],
    }


def _module(tmp_path: Path) -> Path:
    """A Kueue module's layout with the webhook and CRD files live/kueue.py reads, in their release's shapes."""
    hooks = tmp_path / "config/components/webhook"
    hooks.mkdir(parents=True)
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            _hook("mpod.kb.io", "", ["pods"], "/mutate--v1-pod"),
            _hook("mjob.kb.io", "batch", ["jobs"], "/mutate-batch-v1-job"),
            _hook("mstatefulset.kb.io", "apps", ["statefulsets"], "/mutate-apps-v1-statefulset"),
            _hook("mdeployment.kb.io", "apps", ["deployments"], "/mutate-apps-v1-deployment"),
            _hook("mrayjob.kb.io", "ray.io", ["rayjobs"], "/mutate-ray-io-v1-rayjob"),
            _hook("mworkload.kb.io", "kueue.x-k8s.io", ["workloads", "workloads/status"], "/mutate-kueue-x-k8s-io-v1beta2-workload"),
        ],
    }
    (hooks / "manifests.yaml").write_text(yaml.safe_dump(mutating))
    crd = tmp_path / "config/components/crd"
    (crd / "bases").mkdir(parents=True)
    (crd / "patches").mkdir()
    for plural in ("workloads", "resourceflavors"):
        (crd / "bases" / f"kueue.x-k8s.io_{plural}.yaml").write_text(
            yaml.safe_dump({"kind": "CustomResourceDefinition", "metadata": {"name": f"{plural}.kueue.x-k8s.io"}, "spec": {}})
        )
    (crd / "patches/webhook_in_workloads.yaml").write_text(
        yaml.safe_dump({"metadata": {"name": "workloads.kueue.x-k8s.io"}, "spec": {"conversion": {"strategy": "Webhook"}}})
    )
    (crd / "kustomization.yaml").write_text(yaml.safe_dump({"patches": [{"path": "patches/webhook_in_workloads.yaml"}]}))
    return tmp_path


def test_the_webhooks_are_called_on_loopback_and_only_where_kueue_manages(tmp_path: Path) -> None:
    (config,) = kueue.webhook_configurations(_module(tmp_path), 9443, CA)
    hooks = {h["name"]: h for h in config["webhooks"]}
    # Deployments and Ray jobs are frameworks this manager does not run: their webhooks would refuse every request.
    assert set(hooks) == {"mpod.kb.io", "mjob.kb.io", "mstatefulset.kb.io", "mworkload.kb.io"}
    for name in ("mpod.kb.io", "mjob.kb.io", "mstatefulset.kb.io"):
        assert hooks[name]["namespaceSelector"] == {"matchLabels": {kueue.MANAGED: "true"}}, name
    assert "namespaceSelector" not in hooks["mworkload.kb.io"]  # Kueue's own kinds, wherever they are
    bundle = base64.b64encode(CA).decode()
    assert hooks["mpod.kb.io"]["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate--v1-pod", "caBundle": bundle}
    assert hooks["mpod.kb.io"]["failurePolicy"] == "Fail"  # as released: the scoping, not a softer policy, protects the rest


def test_the_crds_the_release_converts_by_webhook_are_converted_by_the_manager(tmp_path: Path) -> None:
    crds = {c["metadata"]["name"]: c for c in kueue.crds(_module(tmp_path), 9443, CA)}
    conversion = crds["workloads.kueue.x-k8s.io"]["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["clientConfig"]["url"] == "https://127.0.0.1:9443/convert"
    assert "conversion" not in crds["resourceflavors.kueue.x-k8s.io"]["spec"]


def test_the_manager_is_configured_for_loopback_without_leader_election_metrics_or_internal_certificates(tmp_path: Path) -> None:
    config = kueue.configuration(9443, 8081, tmp_path / "certs", pods_ready_timeout=20, backoff_seconds=5)
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False} and config["metrics"] == {"bindAddress": "0"}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 9443, "certDir": str(tmp_path / "certs")}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:8081"
    assert config["integrations"]["frameworks"] == ["batch/job", "statefulset"]
    assert config["managedJobsNamespaceSelector"] == {"matchLabels": {kueue.MANAGED: "true"}}
    assert config["waitForPodsReady"]["timeout"] == "20s"
    assert config["waitForPodsReady"]["requeuingStrategy"]["backoffBaseSeconds"] == 5


class _Plane:
    """A control plane's reads and deletes, from lists held in memory."""

    def __init__(self, sets: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> None:
        self.sets, self.workloads = sets, workloads
        self.deleted: list[str] = []

    def get(self, path: str) -> Any:
        return {"items": self.sets if path.endswith("/statefulsets") else self.workloads}

    def request(self, method: str, path: str) -> tuple[int, Any]:
        assert method == "DELETE"
        self.deleted.append(path.rsplit("/", 1)[1])
        return 200, {}


def _set(uid: str, replicas: int) -> dict[str, Any]:
    return {"metadata": {"uid": uid}, "spec": {"replicas": replicas}}


def _workload(name: str, uid: str, owners: int = 0, reserved: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {kueue.JOB_UID: uid}, "ownerReferences": [{"kind": "Pod"}] * owners}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "QuotaReserved", "status": str(reserved)}]}}


def test_an_orphaned_workload_is_one_holding_quota_for_a_stopped_or_gone_statefulset_with_no_owner() -> None:
    """Kueue v0.17.0's leftover (kueue#12232) and nothing else: a Workload still owned, no longer holding quota, already
    being deleted, or standing for a StatefulSet that runs, is never taken for one."""
    plane = _Plane(
        [_set("stopped", 0), _set("running", 2)],
        [
            _workload("stopped-orphan", "stopped"),
            _workload("gone-orphan", "gone"),
            _workload("stopped-owned", "stopped", owners=1),
            _workload("stopped-released", "stopped", reserved=False),
            _workload("stopped-deleting", "stopped", deleting=True),
            _workload("running-unowned", "running"),
        ],
    )
    assert [w["metadata"]["name"] for w in kueue.orphaned(plane, "proj")] == ["stopped-orphan", "gone-orphan"]


def _named(*names: str, code: int = 1) -> Any:
    """What `stacks status` says of the stopped workload: the exit code, and a line naming these Workloads' fix."""
    return lambda: (code, "; ".join(f"`oc delete workloads.kueue.x-k8s.io {n} -n proj`" for n in names))


def test_an_orphaned_workload_is_deleted_only_once_status_names_it_with_the_command_that_frees_it() -> None:
    """The gang tests delete Kueue's leftover as an admin would, but only after the program's `status` said so: a
    status that misses one (or exits 0) fails the wait, and nothing is deleted behind its back."""

    def leftovers() -> _Plane:
        return _Plane([_set("stopped", 0)], [_workload("a", "stopped"), _workload("b", "gone"), _workload("owned", "stopped", owners=1)])

    plane = leftovers()
    assert kueue.delete_orphaned(plane, "proj", _named("a", "b")) == ["a", "b"] == plane.deleted
    for said in (_named("a"), _named("a", "b", code=0)):
        plane = leftovers()
        with pytest.raises(AssertionError, match="status does not name"):
            kueue.delete_orphaned(plane, "proj", said)
        assert plane.deleted == []
    asked: list[bool] = []
    clean = _Plane([_set("stopped", 0)], [_workload("owned", "stopped", owners=1)])
    assert kueue.delete_orphaned(clean, "proj", lambda: asked.append(True) or (0, "")) == [] == asked  # none: status not run
