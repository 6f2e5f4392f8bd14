"""Storage: every claim names a storage class the cluster has, and asks for access modes that class provides and
its pods need.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from policy.core import Finding, Stack, error, ref, rule, warning


def _claims(stack: Stack) -> Iterator[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(object, path of the claim spec, claim spec) of every claim the stack creates: standalone
    PVCs and StatefulSet volumeClaimTemplates."""
    for o in stack.of_kind("PersistentVolumeClaim"):
        yield o, "spec", o.get("spec") or {}
    for o in stack.of_kind("StatefulSet"):
        for i, t in enumerate((o.get("spec") or {}).get("volumeClaimTemplates") or []):
            yield o, f"spec.volumeClaimTemplates[{i}].spec", t.get("spec") or {}


@rule(
    "storage-class",
    "Every claim names a storage class that exists on the cluster; one that names none relies on "
    "the cluster default, which is what left seed 004's NFS server Pending.",
)
def storage_class(stack: Stack) -> Iterator[Finding]:
    classes = {s.name for s in stack.config.storage_classes}
    known = ", ".join(sorted(classes)) or "none"
    claims = [(ref(o), path, spec, _volume_setting(stack, o, path)) for o, path, spec in _claims(stack)]
    # A patch sets the class of a claim that exists already (Cairo's NFS server volume): the class must exist too.
    claims += [
        (ref(p) + " (patch)", "spec", p.get("spec") or {}, _fix_setting(stack, p))
        for p in stack.patches
        if p.get("kind") == "PersistentVolumeClaim"
    ]
    for obj, path, spec, setting in claims:
        sc = spec.get("storageClassName")
        if sc is None:
            yield warning(
                obj,
                f"{path}.storageClassName",
                "no storage class: the claim relies on the cluster's default class; where there is none it stays Pending",
                "set the volume's storage_class to a class listed in storage_classes",
                config=setting,
            )
        elif sc not in classes:
            yield error(
                obj,
                f"{path}.storageClassName",
                f"storage class {sc!r} is not known on {stack.config.name} (storage_classes: {known}): the claim stays Pending",
                "use a class from storage_classes, or add it there if `oc get storageclass` shows it",
                config=setting,
            )


def _volume_setting(stack: Stack, obj: dict[str, Any], path: str, field: str = "storage_class") -> tuple[str | int, ...] | None:
    """The config path of `field` of the volume a claim comes from: a standalone claim's own volume, a volumeClaimTemplate's
    volume (its template is named after the volume); None for a claim of no volume of the config."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if path != "spec":  # spec.volumeClaimTemplates[i].spec
        index = int(path.split("[", 1)[1].split("]", 1)[0])
        name = (((obj.get("spec") or {}).get("volumeClaimTemplates") or [{}])[index].get("metadata") or {}).get("name")
    for i, v in enumerate(stack.config.volumes):
        if v.namespace == meta.get("namespace") and v.name == name:
            return ("volumes", i, field)
    return None


def _fix_setting(stack: Stack, patch: dict[str, Any]) -> tuple[str | int, ...] | None:
    meta = patch.get("metadata") or {}
    for i, f in enumerate(stack.config.pvc_fixes):
        if f.namespace == meta.get("namespace") and f.pvc == meta.get("name"):
            return ("pvc_fixes", i, "storage_class")
    return None


@rule(
    "access-mode",
    "A claim asks only for access modes its class provides, and a claim mounted by several pods is "
    "ReadWriteMany on an RWX-capable class (seed 004: RWX on nfs-csi, RWO only on ceph-rbd).",
)
def access_mode(stack: Stack) -> Iterator[Finding]:
    classes = {s.name: s for s in stack.config.storage_classes}
    users: Counter[tuple[str, str]] = Counter()  # (namespace, claim) -> pods mounting it
    for pod in stack.pods():
        for v in pod.spec.get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                users[(pod.namespace, claim)] += stack.pods_started(pod)
    for o, path, spec in _claims(stack):
        obj = ref(o)
        modes = list(spec.get("accessModes") or [])
        sc_name = spec.get("storageClassName")
        sc = classes.get(sc_name) if sc_name else None
        where = f"{path}.accessModes"
        if sc is not None:
            for m in modes:
                if m not in sc.access_modes:
                    yield error(
                        obj,
                        where,
                        f"storage class {sc.name!r} provides {', '.join(sc.access_modes)} only: a {m} claim stays Pending",
                        "use a class that provides it (storage_classes), or a per-pod volume (shared: false)",
                        config=_volume_setting(stack, o, path),
                    )
        elif sc_name is None and "ReadWriteMany" in modes:
            yield error(
                obj,
                where,
                "a ReadWriteMany claim on the cluster's default class, whose access modes the stack does not know: on a "
                "block-backed default it stays Pending",
                "name an RWX-capable class in the volume's storage_class (list it in storage_classes), or use shared: false",
                config=_volume_setting(stack, o, path),
            )
        if path != "spec":
            continue  # volumeClaimTemplates: one claim per pod
        meta = o.get("metadata") or {}
        n = users[(str(meta.get("namespace") or "default"), str(meta.get("name")))]
        if n > 1 and "ReadWriteMany" not in modes:
            yield error(
                obj,
                where,
                f"mounted by {n} pods, one per node, but not ReadWriteMany: all but the first stay ContainerCreating (Multi-Attach error)",
                "make the volume shared (ReadWriteMany) on an RWX-capable class, or per-pod (shared: false)",
                config=_volume_setting(stack, o, path, "shared"),
            )
