"""What each cluster has before the program runs, made on a live control plane the way the cluster has it.

- CRDs: SecurityContextConstraints and NetworkAttachmentDefinition from ../shared/schemas (openshift/api and
  the network-plumbing working group, unchanged); Route and MachineConfig from openshift/api's CRD manifests
  (live/crds/, unchanged); BuildConfig and ImageStream are served by openshift-apiserver, not by CRDs, so
  they get minimal CRDs here (their fields are checked offline by schemas/openshift/).
- The objects a stack reads but does not own (components/prerequisites.py, each requirement's `expected`):
  namespaces, the storage classes (served by the live provisioner), the SR-IOV operator's source NADs in
  `default`, the NFS server's root claim without a class, existing ConfigMaps, ImageStreams and claims, and an
  existing SCC: one OpenShift ships exactly as it ships it (live/scc.py's manifests), another in that shape.
- What OpenShift makes in every project: the `builder` and `deployer` service accounts.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from components.prerequisites import Requirement, requirements
from config.stack import ClusterConfig
from live import scc
from live.controlplane import PROVISIONER, ControlPlane

HERE = Path(__file__).resolve().parent
SHARED_SCHEMAS = HERE.parent.parent / "shared" / "schemas"

# (file, group, plural) of every CRD the stacks use.
CRDS = [
    (SHARED_SCHEMAS / "securitycontextconstraints.crd.yaml", "security.openshift.io", "securitycontextconstraints"),
    (SHARED_SCHEMAS / "network-attachment-definitions.crd.yaml", "k8s.cni.cncf.io", "network-attachment-definitions"),
    (HERE / "crds" / "routes.crd.yaml", "route.openshift.io", "routes"),
    (HERE / "crds" / "machineconfigs.crd.yaml", "machineconfiguration.openshift.io", "machineconfigs"),
]


def _minimal_crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    """A namespaced kind with spec and status kept as given (status a subresource, as the real API has it)."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}, "subresources": {"status": {}}}
            ],  # fmt: skip
        },
    }


MINIMAL_CRDS = [
    ("build.openshift.io", "BuildConfig", "buildconfigs"),
    ("build.openshift.io", "Build", "builds"),  # what a BuildConfig starts; `rights` asks about builds/docker
    ("image.openshift.io", "ImageStream", "imagestreams"),
]


def install_crds(plane: ControlPlane) -> None:
    for path, _, _ in CRDS:
        plane.apply(yaml.safe_load(path.read_text()))
    for group, kind, plural in MINIMAL_CRDS:
        plane.apply(_minimal_crd(group, kind, plural))
    for _, group, plural in CRDS:
        plane.wait_crd(group, plural)
    for group, _, plural in MINIMAL_CRDS:
        plane.wait_crd(group, plural)


# OpenShift's `privileged` SCC as a cluster ships it (the fields the SCC CRD requires, and what it allows).
PRIVILEGED_SCC: dict[str, Any] = {
    "allowHostDirVolumePlugin": True, "allowHostIPC": True, "allowHostNetwork": True, "allowHostPID": True,
    "allowHostPorts": True, "allowPrivilegeEscalation": True, "allowPrivilegedContainer": True,
    "allowedCapabilities": ["*"], "defaultAddCapabilities": None, "priority": None, "readOnlyRootFilesystem": False,
    "requiredDropCapabilities": None, "runAsUser": {"type": "RunAsAny"}, "seLinuxContext": {"type": "RunAsAny"},
    "fsGroup": {"type": "RunAsAny"}, "supplementalGroups": {"type": "RunAsAny"}, "users": ["system:admin"],
    "groups": ["system:cluster-admins", "system:nodes", "system:masters"], "volumes": ["*"],
}  # fmt: skip


def existing_object(req: Requirement) -> dict[str, Any]:
    """The object a requirement reads, as its owner made it."""
    obj = copy.deepcopy(req.expected)
    obj.pop("status", None)
    obj["apiVersion"], obj["kind"] = req.api_version, req.kind
    meta = obj.setdefault("metadata", {})
    if "/" in req.object_id:
        meta["namespace"], meta["name"] = req.object_id.split("/", 1)
    else:
        meta["name"] = req.object_id
    if req.kind == "SecurityContextConstraints" and req.object_id in scc.shipped_sccs():
        return copy.deepcopy(scc.shipped_sccs()[req.object_id])  # one OpenShift ships: as it ships it
    if req.kind == "SecurityContextConstraints":
        caps = obj.get("allowedCapabilities")
        obj.update({k: v for k, v in PRIVILEGED_SCC.items() if k not in obj})
        obj["allowedCapabilities"] = caps
        if obj.get("runAsUser", {}).get("type") != "RunAsAny":
            obj["runAsUser"] = {"type": "MustRunAsRange"}
    elif req.kind == "PersistentVolumeClaim":
        # What its owner asked for: a claim with no class (the seeds' NFS root claim), or one of a served class.
        spec = obj.setdefault("spec", {})
        spec.setdefault("accessModes", ["ReadWriteMany"])
        spec.setdefault("resources", {"requests": {"storage": "1Gi"}})
        if spec.get("storageClassName") is None:
            spec.pop("storageClassName", None)
    elif req.kind == "StorageClass":
        obj.update({"provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
    elif req.kind == "ConfigMap":
        obj["data"] = {"placeholder": "made by its owner"}
    elif req.kind == "ImageStream":
        obj["spec"] = {}
    elif req.kind == "RoleBinding":
        obj = copy.deepcopy(req.expected)
    return obj


def bound_volume(claim: dict[str, Any]) -> dict[str, Any]:
    """A volume made for an existing claim the way an admin makes one for a claim without a class (a static NFS
    export): bound to it by claimRef, so the claim is Bound, as its owner's is on the cluster."""
    meta, spec = claim["metadata"], claim["spec"]
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"live-existing-{meta['namespace']}-{meta['name']}"},
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]}, "accessModes": spec["accessModes"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
            "hostPath": {"path": f"/live/existing/{meta['namespace']}/{meta['name']}"},
            "claimRef": {"namespace": meta["namespace"], "name": meta["name"]},
        },
    }  # fmt: skip


def seed(plane: ControlPlane, config: ClusterConfig) -> list[dict[str, Any]]:
    """Make on the control plane everything `config` relies on and does not own; returns what was made.
    The empty-class NFS root claim needs a class the provisioner does not serve to stay Pending (Kubernetes
    would give it the default class otherwise): none is marked default here, as on Cairo. Every other existing
    claim without a class (a researcher's data, e.g. yunshi's `tsfm`) is Bound to a volume of its own, as on the
    cluster: a pod that mounts an unbound claim is never scheduled."""
    reqs = requirements(config, "all")
    objs = [existing_object(r) for r in reqs]
    objs += [
        bound_volume(o) for r, o in zip(reqs, objs, strict=True)
        if o["kind"] == "PersistentVolumeClaim" and not o["spec"].get("storageClassName")
        and r.expected.get("status", {}).get("phase") != "Pending"
    ]  # fmt: skip
    namespaces = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"} | set(config.namespaces)
    namespaces |= {o["metadata"]["namespace"] for o in objs if o["metadata"].get("namespace")}
    for ns in sorted(namespaces - {"default"}):
        plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for sa in ("builder", "deployer"):  # OpenShift makes these in every project
            plane.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}})
    made = [o for o in objs if o["kind"] != "Namespace"]
    for obj in made:
        plane.apply(obj)
    return made
