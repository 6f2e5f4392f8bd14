"""What the pods run and how they are reached: images, Python's environment, Secrets, Routes, debugger ports, /dev/shm,
and whether a bandwidth check can finish within its deadline."""

from collections.abc import Iterator
from functools import partial
from typing import Any

from config.kube import INSTANCE
from config.openshift import DEBUGGER_PORT_NAMES, DEBUGGER_PORTS, INTERNAL_REGISTRY
from config.stack import ClusterConfig
from config.values import MAX_DEADLINE_MINUTES, MIB, quantity_value
from config.workloads import BandwidthCheck, Workload
from policy.core import Finding, PodView, Stack, error, info, ref, rule, warning

# NCCL's IB transport loads libibverbs, which needs rdma-core's providers (mlx5): without them NCCL silently uses sockets.
RDMA_USERSPACE = ("rdma-core", "libibverbs")


def _internal(image: str) -> tuple[str, str] | None:
    """(namespace, ImageStream) of an image of the internal registry; None for another registry's."""
    if not image.startswith(INTERNAL_REGISTRY + "/"):
        return None
    ns, _, rest = image[len(INTERNAL_REGISTRY) + 1 :].partition("/")
    return ns, rest.split("@")[0].split(":")[0]


@rule("image", "every container's image exists (built or declared), is pinned, has RDMA userspace where RDMA pods use it")
def image(stack: Stack) -> Iterator[Finding]:
    built = {(b.namespace, b.name): b for b in stack.config.images}
    declared = {(o.namespace, o.name) for o in stack.config.existing.image_streams}
    for pod, path, c in stack.containers():
        ref_ = str(c.get("image"))  # the model requires one
        yield from _mutable_image(pod, path, ref_, built)
        yield from _python_env(pod, path, c)
        if (stream := _internal(ref_)) is None:
            continue
        ns, name = stream
        image_error = partial(error, pod.ref, f"{path}.image", setting="image")
        if stream not in built and stream not in declared:
            yield image_error(
                f"ImageStream {ns}/{name} is neither built by this stack (images) nor declared as existing: the pod "
                "would stay in ImagePullBackOff if nobody made it",
                f"add an image build for {name} in {ns}, or list {ns}/{name} in existing.image_streams",
                missing=True,
            )
        elif ns != pod.namespace:
            yield warning(
                pod.ref,
                f"{path}.image",
                f"the image comes from ImageStream {ns}/{name} in another namespace: its service account needs system:image-puller in {ns}",
                f"`oc policy add-role-to-user system:image-puller system:serviceaccount:{pod.namespace}:"
                f"{pod.spec.get('serviceAccountName')} -n {ns}`, or build the image in {pod.namespace}",
                setting="image",
                value=ref_,
            )
        b = built.get(stream)
        if b and pod.env(c).get("LAUNCHER_MODE") == "rdma" and (lacking := [p for p in RDMA_USERSPACE if p not in b.dockerfile]):
            yield image_error(
                f"an RDMA pod runs image {ns}/{name}, whose Dockerfile does not install {', '.join(lacking)}: NCCL "
                "finds no IB provider and silently uses sockets",
                f"install {' and '.join(RDMA_USERSPACE)} in the Dockerfile of images[{name}]",
            )


def _mutable_image(pod: PodView, path: str, image: str, built: dict[tuple[str, str], Any]) -> Iterator[Finding]:
    """A tag without a digest may move; an image the stack builds is left out (its digest is not known before the build)."""
    if "@" in image or _internal(image) in built:
        return  # pinned: IMAGE@sha256:<64 hex digits> (the model checks the digest's form)
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
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


# Python's variables that reach the training process (the launcher itself runs isolated: python3 -I).
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


@rule("secret-ref", "a Secret the environment reads is declared in existing.secrets (else CreateContainerConfigError)")
def secret_ref(stack: Stack) -> Iterator[Finding]:
    declared = {(o.namespace, o.name) for o in stack.config.existing.secrets}
    for pod, path, c in stack.containers():
        for e in c.get("env") or []:
            ref_ = ((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
            if ref_ and (pod.namespace, ref_) not in declared:
                yield error(
                    pod.ref,
                    f"{path}.env[{e.get('name')}]",
                    f"Secret {pod.namespace}/{ref_} is not declared in existing.secrets: nothing says it exists",
                    f"create it (`oc create secret generic {ref_} -n {pod.namespace} ...`) and list it in existing.secrets",
                    missing=True,
                )


@rule("route-port", "every Route targets a port its Service has, and the Service selects pods that serve it")
def route_port(stack: Stack) -> Iterator[Finding]:
    services = {((o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")): o for o in stack.of_kind("Service")}
    for r in stack.of_kind("Route"):
        meta, spec = r.get("metadata") or {}, r.get("spec") or {}
        svc = services.get((meta.get("namespace"), (spec.get("to") or {}).get("name")))
        target = (spec.get("port") or {}).get("targetPort")
        if svc is None:
            yield error(
                ref(r),
                "spec.to.name",
                f"Route to Service {(spec.get('to') or {}).get('name')!r}, which the stack does not declare",
                "expose the port through the workload's ports (route: true)",
                missing=True,
            )
        elif not any(target in (p.get("name"), p.get("port")) for p in (svc.get("spec") or {}).get("ports") or []):
            yield error(
                ref(r),
                "spec.port.targetPort",
                f"the Route targets port {target!r}, which Service {meta.get('namespace')}/{svc['metadata']['name']} does not have: "
                "the router answers 503",
                "name a port of the Service",
            )


@rule("route-host", "a routed port's default host ROUTE-NAMESPACE.<domain> has a first label of at most 63 characters")
def route_host(stack: Stack) -> Iterator[Finding]:
    for path, w in stack.config.located_workloads():  # a TCP variant's ports are its source's
        for i, port in enumerate(w.ports):
            label = f"{w.name}-{port.name}-{w.namespace}"
            if port.route and len(label) > 63:
                yield error(
                    f"Route {w.namespace}/{w.name}-{port.name}",
                    "spec.host",
                    f"the Route {w.name}-{port.name} in {w.namespace!r} would get the host {label}.<domain>, whose first label "
                    "exceeds 63 characters: the router does not admit it",
                    "Shorten the workload or port name",
                    config=(*path[:2], "ports", i, "name"),
                )


@rule("debugger-route", "no Route reaches a debugger's port unless the port says why (route_reason)")
def debugger_route(stack: Stack) -> Iterator[Finding]:
    for r in stack.of_kind("Route"):
        meta = r.get("metadata") or {}
        at, w = stack.spec(str(meta.get("namespace")), str((meta.get("labels") or {}).get(INSTANCE)))  # a variant's: its source's
        if at is None or not isinstance(w, Workload):
            continue
        target = ((r.get("spec") or {}).get("port") or {}).get("targetPort")
        for k, p in enumerate(w.ports):
            if target not in (p.name, p.port) or not (p.name in DEBUGGER_PORT_NAMES or p.port in DEBUGGER_PORTS):
                continue
            exposes = f"the Route exposes the debugger port {p.name} ({p.port}) outside the cluster"
            if p.route_reason:
                message = f"{exposes}; its route_reason: {p.route_reason}"
                fix = f"set route: false once the reason no longer holds (`oc port-forward POD {p.port}` reaches it from your machine)"
            else:
                message = f"{exposes}: whoever reaches the router can run any code in the pod, with its GPUs, data and service account"
                fix = (
                    f"set route: false and reach it with `oc port-forward POD {p.port}`; if it must be routed, say why in the "
                    "port's route_reason (printed with every check)"
                )
            setting = "route_reason" if p.route_reason else "route"
            yield (info if p.route_reason else error)(ref(r), "spec.port.targetPort", message, fix, config=(*at, "ports", k, setting))


@rule("shm-size", "/dev/shm fits in the container's memory limit, and is at least the runtime's 64 MiB")
def shm_size(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        limits = [((c.get("resources") or {}).get("limits") or {}).get("memory") for _, c in pod.containers()]
        limit = max((quantity_value(str(v)) for v in limits if v is not None), default=None)
        for i, v in enumerate(pod.spec.get("volumes") or []):
            size = ((v.get("emptyDir") or {}).get("medium") == "Memory") and (v.get("emptyDir") or {}).get("sizeLimit")
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


# bandwidth-deadline's estimate is the least time the run can take (docs/preflight.md): every all-reduce at the line
# rate, each rank's link carrying 2(n-1)/n of the message, `iterations` of each size and `warmup_iterations` of the largest.
FASTEST_GBPS = 1600.0  # the fastest node these clusters have: Barcelona's four ports of 400 Gb/s


def least_seconds(config: ClusterConfig, check: BandwidthCheck) -> tuple[float, float, int, int]:
    """(least seconds of the check's run, the line rate in Gb/s it assumes, bytes of one pass over the sizes, the largest)."""
    rate = config.bandwidth_line_rate_gbps(check) or FASTEST_GBPS
    size, one_pass, largest = check.min_bytes, 0, check.min_bytes
    while size <= check.max_bytes:
        one_pass, largest, size = one_pass + size, size, size * 2
    ranks = check.nodes * check.gpus_per_node
    moved = (check.iterations * one_pass + check.warmup_iterations * largest) * 2 * (ranks - 1) / ranks
    return moved / (rate * 1e9 / 8), rate, one_pass, largest


def _duration(seconds: float) -> str:
    for unit, length in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:,.1f} {unit}"
    return f"{seconds:.1f} s"


@rule("bandwidth-deadline", "a bandwidth check's iterations at the line rate fit in its deadline (docs/preflight.md)")
def bandwidth_deadline(stack: Stack) -> Iterator[Finding]:
    for i, check in enumerate(stack.config.bandwidth_checks):
        seconds, rate, one_pass, largest = least_seconds(stack.config, check)
        deadline = check.deadline_minutes * 60
        if seconds <= deadline:
            continue
        per_iteration = seconds / (check.iterations * one_pass + check.warmup_iterations * largest)
        fit = int((deadline / per_iteration - check.warmup_iterations * largest) // one_pass)
        lower = f"lower iterations to {fit}" if fit >= 1 else "lower warmup_iterations and iterations"
        need = -(-int(seconds) // 60) + 1
        longer = f", or raise deadline_minutes to at least {need}" if need <= MAX_DEADLINE_MINUTES else ""
        yield error(
            stack.owner(check),
            "spec.activeDeadlineSeconds",
            f"{check.iterations:,} iterations of each size up to {largest:,} bytes (and {check.warmup_iterations:,} warm-up ones) take "
            f"at least {_duration(seconds)} at the line rate ({rate:g} Gb/s), longer than the check's deadline of "
            f"{check.deadline_minutes} min: the Job fails with DeadlineExceeded, and `pulumi up` with it",
            f"{lower} (or max_bytes){longer}",
            config=("bandwidth_checks", i, "iterations"),
        )
