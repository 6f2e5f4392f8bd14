"""What the pods run and how they are reached: images (named, built or declared, pinned, with RDMA userspace),
Python's environment, the Secrets they read, Routes and the debugger ports behind them, /dev/shm.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from config.kube import INSTANCE
from config.openshift import DEBUGGER_PORT_NAMES, DEBUGGER_PORTS, INTERNAL_REGISTRY
from config.values import MIB, quantity_value
from policy.core import Finding, PodView, Stack, error, info, ref, rule, warning

# What an image used by RDMA pods must install: NCCL's IB transport loads libibverbs, which needs the
# provider libraries of rdma-core (mlx5), or NCCL silently uses sockets.
RDMA_USERSPACE = ("rdma-core", "libibverbs")


@rule(
    "image",
    "Every container names an image, and an image from the internal registry comes from an ImageStream the stack "
    "builds or declares as existing (existing.image_streams); images RDMA pods use carry RDMA userspace (rdma-core, libibverbs). "
    "Warnings: an image not pinned by digest (a tag may move), and PYTHONPATH or PYTHONSTARTUP redirecting the image's Python.",
)
def image(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    built = {(b.namespace, b.name): b for b in config.images}
    declared = {(o.namespace, o.name) for o in config.existing.image_streams}
    for pod in stack.pods():
        for path, c in pod.containers():
            ref_ = str(c.get("image") or "")
            if not ref_:
                yield error(
                    pod.ref,
                    f"{path}.image",
                    "the container names no image: the pod is never created",
                    "set the workload's image",
                    setting="image",
                )
                continue
            yield from _mutable_image(pod, path, ref_, built)
            yield from _python_env(pod, path, c)
            if ref_.startswith(INTERNAL_REGISTRY + "/"):
                ns, _, rest = ref_[len(INTERNAL_REGISTRY) + 1 :].partition("/")
                stream = rest.split("@")[0].split(":")[0]
                if (ns, stream) not in built and (ns, stream) not in declared:
                    yield error(
                        pod.ref,
                        f"{path}.image",
                        f"ImageStream {ns}/{stream} is neither built by this stack (images) nor declared as existing: the pod "
                        "would stay in ImagePullBackOff if nobody made it",
                        f"add an image build for {stream} in {ns}, or list {ns}/{stream} in existing.image_streams",
                        setting="image",
                    )
                elif ns != pod.namespace:
                    yield warning(
                        pod.ref,
                        f"{path}.image",
                        f"the image comes from ImageStream {ns}/{stream} in another namespace: its service account needs "
                        f"system:image-puller in {ns}",
                        f"`oc policy add-role-to-user system:image-puller system:serviceaccount:{pod.namespace}:"
                        f"{pod.spec.get('serviceAccountName')} -n {ns}`, or build the image in {pod.namespace}",
                        setting="image",
                        value=ref_,
                    )
                b = built.get((ns, stream))
                if b is not None and pod.env(c).get("LAUNCHER_MODE") == "rdma":
                    lacking = [p for p in RDMA_USERSPACE if p not in b.dockerfile]
                    if lacking:
                        yield error(
                            pod.ref,
                            f"{path}.image",
                            f"an RDMA pod runs image {ns}/{stream}, whose Dockerfile does not install {', '.join(lacking)}: NCCL "
                            "finds no IB provider and silently uses sockets",
                            f"install {' and '.join(RDMA_USERSPACE)} in the Dockerfile of images[{stream}]",
                            setting="image",
                        )


def _mutable_image(pod: PodView, path: str, image: str, built: dict[tuple[str, str], Any]) -> Iterator[Finding]:
    """A tag without a digest may move (`:latest` does on every push): pods of one workload, restarted or rescheduled
    at different times, then run different code. An image the stack builds itself is left out: its tag is the one its
    own BuildConfig moves, and its digest cannot be known before the build."""
    if "@" in image:
        return  # pinned: IMAGE@sha256:<64 hex digits> (the model checks the digest's form)
    if image.startswith(INTERNAL_REGISTRY + "/"):
        ns, _, rest = image[len(INTERNAL_REGISTRY) + 1 :].partition("/")
        if (ns, rest.split(":")[0]) in built:
            return
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else None
    shown = f"the tag {tag!r}" if tag and tag != "latest" else "`latest`" + ("" if tag else " (no tag means latest)")
    yield warning(
        pod.ref,
        f"{path}.image",
        f"image {image} names {shown} without a digest: the registry may move it, so pods started at different times "
        "(a restart, a reschedule, a second node) may run different code",
        f"pin it: {image.split('@')[0]}@sha256:<digest> (`skopeo inspect docker://{image}` prints it), or accept the warning "
        f'in accepted_warnings with the reason and value="{image}"',
        setting="image",
        value=image,
    )


# Python's environment variables that reach the training process (the launcher itself runs isolated: python3 -I).
PYTHON_ENV = {
    "PYTHONPATH": "puts its folders before the image's site-packages for every Python the command starts (torchrun and each "
    "rank): a stray module there (a `torch/` or `json.py` in a workspace) shadows the image's, differently on each node",
    "PYTHONSTARTUP": "is read by interactive Python only (an `oc exec` session), never by the training: in a workload's "
    "environment it is almost certainly a leftover",
}


def _python_env(pod: PodView, path: str, container: dict[str, Any]) -> Iterator[Finding]:
    if "LAUNCHER_MODE" not in pod.env(container):
        return  # not a training container
    for e in container.get("env") or []:
        name = e.get("name")
        if name in PYTHON_ENV:
            yield warning(
                pod.ref,
                f"{path}.env[{name}]",
                f"{name} {PYTHON_ENV[name]}",
                "install the code into the image (or `pip install -e` it), or name paths in args; if it is meant, accept the "
                "warning in accepted_warnings with the reason and the variable's value",
                setting=f"env.{name}",
                value=str(e.get("value") or ""),
            )


@rule(
    "secret-ref",
    "Environment read from a Secret names one the stack declares as existing (existing.secrets): the "
    "pod would otherwise stop in CreateContainerConfigError.",
)
def secret_ref(stack: Stack) -> Iterator[Finding]:
    declared = {(o.namespace, o.name) for o in stack.config.existing.secrets}
    for pod in stack.pods():
        for path, c in pod.containers():
            for e in c.get("env") or []:
                ref_ = ((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                if ref_ and (pod.namespace, ref_) not in declared:
                    yield error(
                        pod.ref,
                        f"{path}.env[{e.get('name')}]",
                        f"Secret {pod.namespace}/{ref_} is not declared in existing.secrets: nothing says it exists",
                        f"create it (`oc create secret generic {ref_} -n {pod.namespace} ...`) and list it in existing.secrets",
                    )


@rule("route-port", "Every Route targets a port its Service has, and its Service selects pods that serve it.")
def route_port(stack: Stack) -> Iterator[Finding]:
    services = {((o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")): o for o in stack.of_kind("Service")}
    for r in stack.of_kind("Route"):
        meta = r.get("metadata") or {}
        spec = r.get("spec") or {}
        svc = services.get((meta.get("namespace"), (spec.get("to") or {}).get("name")))
        target = (spec.get("port") or {}).get("targetPort")
        if svc is None:
            yield error(
                ref(r),
                "spec.to.name",
                f"Route to Service {(spec.get('to') or {}).get('name')!r}, which the stack does not declare",
                "expose the port through the workload's ports (route: true)",
            )
            continue
        ports = (svc.get("spec") or {}).get("ports") or []
        if not any(p.get("name") == target or p.get("port") == target for p in ports):
            yield error(
                ref(r),
                "spec.port.targetPort",
                f"the Route targets port {target!r}, which Service {meta.get('namespace')}/{svc['metadata']['name']} does not have: "
                "the router answers 503",
                "name a port of the Service",
            )


@rule(
    "debugger-route",
    "No Route reaches a debugger's port (a port named debugpy, or 5678) unless the port says why (route_reason, printed "
    "with every check): a debugger runs whatever code its client sends, so a Route hands the pod, its GPUs, data and "
    "service account to anyone who reaches the router. `oc port-forward` reaches it from the user's own machine only.",
)
def debugger_route(stack: Stack) -> Iterator[Finding]:
    entries = {(w.namespace, w.name): path[:2] for path, w in stack.config.located_workloads()}  # a variant's ports are its source's
    for r in stack.of_kind("Route"):
        meta = r.get("metadata") or {}
        at = entries.get((str(meta.get("namespace")), str((meta.get("labels") or {}).get(INSTANCE))))
        if at is None:
            continue
        target = ((r.get("spec") or {}).get("port") or {}).get("targetPort")
        w = stack.config.workloads[int(at[1])]
        for k, p in enumerate(w.ports):
            if target not in (p.name, p.port) or not (p.name in DEBUGGER_PORT_NAMES or p.port in DEBUGGER_PORTS):
                continue
            if p.route_reason:
                yield info(
                    ref(r),
                    "spec.port.targetPort",
                    f"the Route exposes the debugger port {p.name} ({p.port}) outside the cluster; its route_reason: {p.route_reason}",
                    f"set route: false once the reason no longer holds (`oc port-forward POD {p.port}` reaches it from your machine)",
                    config=(*at, "ports", k, "route_reason"),
                )
            else:
                yield error(
                    ref(r),
                    "spec.port.targetPort",
                    f"the Route exposes the debugger port {p.name} ({p.port}) outside the cluster: whoever reaches the router can "
                    "run any code in the pod, with its GPUs, data and service account",
                    f"set route: false and reach it with `oc port-forward POD {p.port}`; if it must be routed, say why in the "
                    "port's route_reason (printed with every check)",
                    config=(*at, "ports", k, "route"),
                )


@rule(
    "shm-size",
    "/dev/shm (a memory emptyDir) fits in the container's memory limit: what is written there counts "
    "against it, and a larger size is an OOM kill waiting to happen. Below 64 MiB, the runtime's own size, it warns (NCCL).",
)
def shm_size(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        limits = [_limit(c) for _, c in pod.containers()]
        for i, v in enumerate(pod.spec.get("volumes") or []):
            size = ((v.get("emptyDir") or {}).get("medium") == "Memory") and (v.get("emptyDir") or {}).get("sizeLimit")
            limit = max((x for x in limits if x is not None), default=None)
            if size and limit is not None and quantity_value(str(size)) > limit:
                yield error(
                    pod.ref,
                    pod.at(f"spec.volumes[{i}].emptyDir.sizeLimit"),
                    f"/dev/shm may grow to {size}, more than the memory limit of the container: filling it gets the pod OOM-killed",
                    "set shm_size below the workload's memory limit",
                    setting="shm_size",
                )
            if size and v.get("name") == "dshm" and quantity_value(str(size)) < 64 * MIB:
                yield warning(
                    pod.ref,
                    pod.at(f"spec.volumes[{i}].emptyDir.sizeLimit"),
                    f"/dev/shm is {size}, less than the 64 MiB a container gets without it: NCCL's shared-memory transport and "
                    "DataLoader workers run out of it ('unhandled system error', bus errors)",
                    "set shm_size to 1Gi or more (the seeds ran with 4Gi to 32Gi), or accept the warning with the reason and "
                    f'value="{size}"',
                    setting="shm_size",
                    value=str(size),
                )


def _limit(container: dict[str, Any]) -> Any:
    value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    try:
        return quantity_value(str(value)) if value is not None else None
    except ValueError:
        return None
