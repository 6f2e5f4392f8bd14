"""Storage: claims name classes the cluster has, with access modes the class provides and the pods need; every mount
point can be made and every file the launcher writes can be written."""

from collections import Counter
from collections.abc import Iterator
from functools import partial
from typing import Any

from config.openshift import LAUNCHER_FILES
from config.values import LAUNCHER_DIR, system_path_problem
from config.workloads import Workload
from policy.core import Finding, Stack, error, ref, rule, warning


def _claims(stack: Stack) -> Iterator[tuple[dict[str, Any], str, dict[str, Any], Any]]:
    """(object, path of the claim spec, claim spec, its volume's name) of every PVC and volumeClaimTemplate."""
    for o in stack.of_kind("PersistentVolumeClaim"):
        yield o, "spec", o.get("spec") or {}, (o.get("metadata") or {}).get("name")
    for o in stack.of_kind("StatefulSet"):
        for i, t in enumerate((o.get("spec") or {}).get("volumeClaimTemplates") or []):
            yield o, f"spec.volumeClaimTemplates[{i}].spec", t.get("spec") or {}, (t.get("metadata") or {}).get("name")


@rule("storage-class", "every claim names a storage class the cluster has (seed 004)")
def storage_class(stack: Stack) -> Iterator[Finding]:
    classes = {s.name for s in stack.config.storage_classes}
    known = ", ".join(sorted(classes)) or "none"
    claims = [(ref(o), path, spec, _volume_setting(stack, o, name)) for o, path, spec, name in _claims(stack)]
    fixes = {
        f"PersistentVolumeClaim {f.namespace}/{f.pvc}": ("pvc_fixes", i, "storage_class") for i, f in enumerate(stack.config.pvc_fixes)
    }
    for p in stack.patches:  # a patch sets the class of a claim that exists already (Cairo's NFS server volume)
        if p.get("kind") == "PersistentVolumeClaim":
            claims.append((ref(p) + " (patch)", "spec", p.get("spec") or {}, fixes.get(ref(p))))
    for obj, path, spec, setting in claims:
        if (sc := spec.get("storageClassName")) is None:
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
                missing=True,
            )


def _volume_setting(stack: Stack, obj: dict[str, Any], name: Any, field: str = "storage_class") -> tuple[str | int, ...] | None:
    """The config path of `field` of the volume a claim comes from (a template is named after its volume), if any."""
    ns = (obj.get("metadata") or {}).get("namespace")
    return next((("volumes", i, field) for i, v in enumerate(stack.config.volumes) if (v.namespace, v.name) == (ns, name)), None)


@rule("access-mode", "a claim's access modes are its class's and its pods' need (seed 004: RWX on nfs-csi)")
def access_mode(stack: Stack) -> Iterator[Finding]:
    classes = {s.name: s for s in stack.config.storage_classes}
    users: Counter[tuple[str, str]] = Counter()  # (namespace, claim) -> pods mounting it
    for pod in stack.pods():
        for v in pod.spec.get("volumes") or []:
            if claim := (v.get("persistentVolumeClaim") or {}).get("claimName"):
                users[(pod.namespace, claim)] += stack.pods_started(pod)
    for o, path, spec, name in _claims(stack):
        modes = list(spec.get("accessModes") or [])
        sc_name = spec.get("storageClassName")
        sc = classes.get(sc_name) if sc_name else None
        mode_error = partial(error, ref(o), f"{path}.accessModes")
        if sc is not None:
            for m in modes:
                if m not in sc.access_modes:
                    yield mode_error(
                        f"storage class {sc.name!r} provides {', '.join(sc.access_modes)} only: a {m} claim stays Pending",
                        "use a class that provides it (storage_classes), or a per-pod volume (shared: false)",
                        config=_volume_setting(stack, o, name),
                    )
        elif sc_name is None and "ReadWriteMany" in modes:
            yield mode_error(
                "a ReadWriteMany claim on the cluster's default class, whose access modes the stack does not know: on a "
                "block-backed default it stays Pending",
                "name an RWX-capable class in the volume's storage_class (list it in storage_classes), or use shared: false",
                config=_volume_setting(stack, o, name),
            )
        if path != "spec":
            continue  # volumeClaimTemplates: one claim per pod
        n = users[(str((o.get("metadata") or {}).get("namespace") or "default"), str(name))]
        if n > 1 and "ReadWriteMany" not in modes:
            yield mode_error(
                f"mounted by {n} pods, one per node, but not ReadWriteMany: all but the first stay ContainerCreating (Multi-Attach error)",
                "make the volume shared (ReadWriteMany) on an RWX-capable class, or per-pod (shared: false)",
                config=_volume_setting(stack, o, name, "shared"),
            )
    for i, w in enumerate(stack.config.workloads):  # existing claims: the stack knows only what the config says
        for k, m in enumerate(w.mounts):
            v = stack.config.volume(w.namespace, m.volume)
            if v.existing and not v.shared and w.nodes > 1:
                yield error(
                    stack.owner(w),
                    "spec.template.spec.volumes",
                    f"existing claim {v.name!r} is not shared (ReadWriteOnce) but {w.nodes} pods mount it: all but one would stay "
                    "ContainerCreating",
                    "Set shared: true if the claim is ReadWriteMany",
                    config=("workloads", i, "mounts", k, "volume"),
                )


@rule("mount-points", "every mount point can be made and every file the launcher writes can be written")
def mount_points(stack: Stack) -> Iterator[Finding]:
    for i, w in enumerate(stack.config.workloads):  # a TCP variant mounts what its source mounts
        for where, message, fix in _mount_problems(stack, w):
            yield error(stack.owner(w), "spec.template.spec.containers[0].volumeMounts", message, fix, config=("workloads", i, *where))


def _mount_problems(stack: Stack, w: Workload) -> Iterator[tuple[tuple[str | int, ...], str, str]]:
    """(field of the workload, message, fix) of each mount point that cannot be made, and a hostfile not writable."""
    mounts: list[tuple[str, bool, tuple[str | int, ...], str]] = [
        (LAUNCHER_DIR, True, (), "the launcher's own mount"),
        ("/dev/shm", False, (), "the program's /dev/shm"),
    ]
    for k, m in enumerate(w.mounts):
        v = stack.config.volume(w.namespace, m.volume)
        mounts.append(
            (m.mount_path or v.mount_path, m.read_only, ("mounts", k, "mount_path" if m.mount_path else "volume"), f"volume {m.volume!r}")
        )
    for k, sm in enumerate(w.scripts):
        mounts.append((sm.mount_path, True, ("scripts", k, "mount_path"), f"ConfigMap {sm.config_map!r} (always read-only)"))
    for path, read_only, where, what in mounts:
        if not where or not read_only:
            continue
        inside = [(p, wh) for p, _, _, wh in mounts if p != path and p.startswith(path.rstrip("/") + "/")]
        if path == "/tmp" or "/tmp".startswith(path.rstrip("/") + "/"):
            yield (
                where,
                f"{what} is mounted read-only at {path}, but the launcher writes {', '.join(LAUNCHER_FILES)} at start: it could not",
                "Mount it elsewhere, or read-write",
            )
        elif inside:
            other, other_what = inside[0]
            yield (
                where,
                f"{what} is mounted read-only at {path}, a parent of {other} ({other_what}): the runtime cannot make that mount "
                "point inside a read-only mount, so the container is never created",
                "Mount one of them elsewhere",
            )
    if (hostfile := w.deepspeed_hostfile) is None:
        return
    at, problem = ("deepspeed_hostfile",), system_path_problem(hostfile)
    mounted = [(path, what) for path, _, _, what in mounts if hostfile == path]
    inside = [(path, what) for path, ro, _, what in mounts if ro and hostfile.startswith(path.rstrip("/") + "/")]
    if hostfile in LAUNCHER_FILES:
        yield at, f"{hostfile} is a file the launcher itself writes at start: the two would overwrite each other", "Choose another path"
    elif problem:
        yield at, f"the hostfile cannot be written there: {problem}", "Choose another path (e.g. /tmp/hostfile)"
    elif mounted:
        yield at, f"{hostfile} is where {mounted[0][1]} is mounted (a directory), not a file", "Name a file inside it"
    elif inside:
        path, what = inside[0]
        yield (
            at,
            f"{hostfile} is inside {path}, where {what} is mounted read-only: the launcher cannot write it and the pod stops",
            "Choose a path outside it (e.g. /tmp/hostfile)",
        )
