"""Run `components.program.build` under `pulumi.runtime.set_mocks` and record every resource.

The mocks stand in for the engine and the kubernetes provider: a resource's inputs are exactly what
the provider would receive from `pulumi up`, and a read of a live object (the SR-IOV NADs) is
answered from the stack config. A MockMonitor subclass records the resource options (protect,
retain_on_delete, ...) that the Mocks interface does not see.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.mocks import MockMonitor, MockResourceArgs
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.kube import NAD_API, NAD_KIND, NAD_TOKEN, RESOURCE_NAME, SRIOV_OWNER_REF
from stacks.model import ClusterConfig


@dataclass
class Recorded:
    """One custom resource the program declared."""

    type: str
    name: str
    inputs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def is_patch(self) -> bool:
        return self.type.endswith("Patch")

    @property
    def object(self) -> dict[str, Any]:
        """The Kubernetes object: apiVersion and kind from the type token where inputs lack them."""
        obj: dict[str, Any] = normalize(self.inputs)
        _, api, kind = self.type.split(":", 2)
        if kind.endswith("Patch"):
            kind = kind[: -len("Patch")]
        group, _, version = api.rpartition("/")
        obj.setdefault("apiVersion", version if group in ("core", "") else f"{group}/{version}")
        obj.setdefault("kind", kind)
        return obj


@dataclass
class Rendering:
    config: ClusterConfig
    resources: list[Recorded]
    reads: list[Recorded]
    outputs: dict[str, Any]
    logs: list[tuple[str, str]] = field(default_factory=list)

    def objects(self) -> list[dict[str, Any]]:
        return [r.object for r in self.resources]


def normalize(value: Any) -> Any:
    """The mock runtime turns every number into a float; write integral ones back as ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def live_nad(config: ClusterConfig, resource_id: str) -> dict[str, Any]:
    """What the cluster would answer for a NAD read: the SR-IOV operator's object, server-set
    metadata included, so the copy's stripping is exercised exactly as on the cluster."""
    namespace, _, name = resource_id.partition("/")
    fabric = config.fabric
    att = next((a for a in (fabric.attachments if fabric else []) if a.network == name), None)
    if att is None or fabric is None or namespace != fabric.nad_source_namespace:
        raise LookupError(f"networkattachmentdefinitions {resource_id!r} not found (not in the stack's fabric.attachments)")
    return {
        "apiVersion": NAD_API,
        "kind": NAD_KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": "00000000-0000-0000-0000-000000000000",
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {
                RESOURCE_NAME: att.resource,
                SRIOV_OWNER_REF: f"SriovNetwork.sriovnetwork.openshift.io/openshift-sriov-network-operator/{name}",
            },
        },
        "spec": {"config": att.cni_config or "{}"},
    }


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.resources: dict[str, Recorded] = {}
        self.reads: list[Recorded] = []

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        if args.resource_id:  # a read of a live object (`opts.id`)
            if args.typ != NAD_TOKEN:
                raise LookupError(f"the offline renderer cannot answer a read of {args.typ}")
            state = live_nad(self.config, args.resource_id)
            self.reads.append(Recorded(args.typ, args.name, state))
            return args.resource_id, state
        if args.typ.startswith("kubernetes:"):
            self.resources[f"{args.typ}::{args.name}"] = Recorded(args.typ, args.name, copy.deepcopy(dict(args.inputs)))
        return args.name, dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class _OptionsMonitor(MockMonitor):
    """Sees the resource options the Mocks interface is not given."""

    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.options: dict[str, dict[str, Any]] = {}
        self.thread_loops: list[asyncio.AbstractEventLoop] = []

    def _own_thread_loop(self) -> None:
        # The SDK calls these methods from executor threads and gives each thread an event loop it
        # never closes; left to the garbage collector, closing one can print a traceback. Make that
        # loop here instead, so that `run` closes it.
        try:
            asyncio.get_event_loop()
        except RuntimeError:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.thread_loops.append(loop)

    def ReadResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self._own_thread_loop()
        return super().ReadResource(request)  # type: ignore[no-untyped-call]  # the SDK's method is unannotated

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self._own_thread_loop()
        self.options[f"{request.type}::{request.name}"] = {
            "protect": bool(request.protect),
            "retain_on_delete": bool(request.retainOnDelete),
            "delete_before_replace": bool(request.deleteBeforeReplace),
            "depends_on": sorted(request.dependencies),
            "parent": request.parent,
        }
        return super().RegisterResource(request)  # type: ignore[no-untyped-call]  # the SDK's method is unannotated


class _LogCollector:
    """pulumi.log.* under mocks goes to a logger; keep the lines for the caller."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def _add(self, level: str, msg: Any, *args: Any) -> None:
        self.lines.append((level, str(msg) % args if args else str(msg)))

    def debug(self, msg: Any, *args: Any) -> None:
        pass

    def info(self, msg: Any, *args: Any) -> None:
        self._add("info", msg, *args)

    def warning(self, msg: Any, *args: Any) -> None:
        self._add("warning", msg, *args)

    def error(self, msg: Any, *args: Any) -> None:
        self._add("error", msg, *args)


def run(config: ClusterConfig) -> Rendering:
    """Run the program for one config under fresh mocks; raises what the program raises."""
    from components.program import build  # the program is imported lazily: stacks/ must not need it

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = _Mocks(config)
    monitor = _OptionsMonitor(mocks)
    try:
        pulumi_settings.ROOT.set(None)  # each run gets its own root Stack resource
        logs = _LogCollector()
        pulumi.runtime.set_mocks(mocks, project="gpu-training", stack=config.name, preview=False, monitor=monitor, logger=logs)  # type: ignore[arg-type]
        outputs: dict[str, Any] = {}

        def program() -> None:
            outputs.update(build(config))

        _sync_await(run_pulumi_func(program))
    finally:
        # Join the executor threads the mock monitor ran in, then close the loops it gave them.
        loop.run_until_complete(loop.shutdown_default_executor())
        for thread_loop in monitor.thread_loops:
            thread_loop.close()
        asyncio.set_event_loop(None)
        loop.close()
    resources = []
    for key, rec in sorted(mocks.resources.items()):
        rec.options = monitor.options.get(key, {})
        resources.append(rec)
    return Rendering(config, resources, mocks.reads, normalize(outputs), logs.lines)
