"""Run `components.resources.build` under `pulumi.runtime.set_mocks` and record every resource.

The mocks stand in for the engine and the kubernetes provider: a resource's inputs are exactly what
the provider would receive from `pulumi up`, and a read of a live object is answered with the state
the stack assumes for it (components/prerequisites.py), or with what a test says the cluster holds.
A MockMonitor subclass records the resource options (protect, retain_on_delete, provider, ...) that
the Mocks interface does not see. Like the engine, the mocks refuse two resources with one URN.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format  # type: ignore[import-untyped]  # ships no stubs
from pulumi.runtime import resource as pulumi_resource
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.mocks import MockMonitor, MockResourceArgs
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.rpc_manager import RPCManager
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await

from components.prerequisites import requirements
from components.resources import build
from config.stack import ClusterConfig

PROVIDER_TOKEN = "pulumi:providers:kubernetes"
STACK_TOKEN = "pulumi:pulumi:Stack"
MISSING = None
"""In `live`: the cluster has no such object (the read fails as on a cluster)."""


@dataclass
class Recorded:
    """One custom resource the program declared."""

    type: str
    name: str
    """Its logical name; for a read, the id it reads (NAMESPACE/NAME or NAME)."""
    inputs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    urn_name: str = ""
    """A read's logical name (the id and the fix, see components/prerequisites.py)."""

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
    providers: list[Recorded] = field(default_factory=list)
    read_inputs: list[dict[str, Any]] = field(default_factory=list)

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


class DuplicateResource(Exception):
    """Two resources with one type and name: the Pulumi engine refuses the program the same way."""


class MissingObject(LookupError):
    """A read of an object the cluster (as a test describes it) does not have."""


class DuplicateRead(ValueError):
    """Two reads with one URN, which the Pulumi engine refuses."""


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self, config: ClusterConfig, tier: str, live: dict[tuple[str, str], dict[str, Any] | None]) -> None:
        self.config = config
        # What the stack assumes the cluster holds, unless a test says otherwise.
        self.cluster: dict[tuple[str, str], dict[str, Any] | None] = {(r.kind, r.object_id): r.expected for r in requirements(config, tier)}
        self.cluster.update(live)
        self.resources: dict[str, Recorded] = {}
        self.reads: list[Recorded] = []
        self.read_inputs: list[dict[str, Any]] = []  # what each read sends the provider (nothing, or it misreads)

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        kind = args.typ.rsplit(":", 1)[-1]
        if args.resource_id:  # a read of a live object (`opts.id`)
            self.read_inputs.append(dict(args.inputs))
            state = self.cluster.get((kind, args.resource_id))
            if state is None:
                raise MissingObject(f"resource '{args.resource_id}' does not exist ({kind})")
            state = copy.deepcopy(state)
            if any(r.type == args.typ and r.urn_name == args.name for r in self.reads):
                # The engine refuses two reads of one URN (step_generator); the mock runtime would not.
                raise DuplicateRead(f"two reads of {args.typ} {args.name}: the engine rejects a duplicate read URN")
            self.reads.append(Recorded(args.typ, args.resource_id, state, urn_name=args.name))
            return args.resource_id, state
        key = f"{args.typ}::{args.name}"
        if key in self.resources:
            raise DuplicateResource(f"Duplicate resource URN: {args.typ} {args.name!r} is declared twice")
        if args.typ.startswith("kubernetes:"):
            self.resources[key] = Recorded(args.typ, args.name, copy.deepcopy(dict(args.inputs)))
        elif args.typ == PROVIDER_TOKEN:
            self.resources[key] = Recorded(args.typ, args.name, dict(args.inputs))
        return args.name, dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class _OptionsMonitor(MockMonitor):
    """Sees the resource options the Mocks interface is not given."""

    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.options: dict[str, dict[str, Any]] = {}
        self.thread_loops: list[asyncio.AbstractEventLoop] = []
        self.stack_outputs: dict[str, Any] = {}

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
            "provider": request.provider,
            "ignore_changes": list(request.ignoreChanges),
            "replace_on_changes": list(request.replaceOnChanges),
            "custom_timeouts": (request.customTimeouts.create, request.customTimeouts.update)
            if request.HasField("customTimeouts")
            else None,
        }
        return super().RegisterResource(request)  # type: ignore[no-untyped-call]  # the SDK's method is unannotated

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        # The root stack's outputs as the SDK sends them to the engine: what `pulumi stack output --json` gives
        # (the SDK drops a top-level export whose value is None, so this is not build()'s dict).
        if request.urn.split("::")[-2:-1] == [STACK_TOKEN]:
            # set_mocks's own root Stack registers {} too, from another thread and in no fixed order: merge.
            self.stack_outputs.update(json_format.MessageToDict(request.outputs))
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


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


def _no_stack_trace() -> source_pb2.StackTrace:
    return source_pb2.StackTrace()


def _already_raised(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if "exception" in context and str(context.get("message", "")).endswith("exception was never retrieved"):
        return
    loop.default_exception_handler(context)


def run(
    config: ClusterConfig, tier: str = "all", live: dict[tuple[str, str], dict[str, Any] | None] | None = None, adopt: bool = False
) -> Rendering:
    """Run the program for one config (and tier) under fresh mocks; raises what the program raises.
    `live` replaces what the cluster holds for some reads: {(kind, id): state, or MISSING}."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = _Mocks(config, tier, live or {})
    monitor = _OptionsMonitor(mocks)
    # The SDK walks the Python stack (and reads source lines) for every resource to give the engine
    # source positions; the mocks discard them, and they were a fifth of a render.
    stack_trace = pulumi_resource._get_stack_trace
    pulumi_resource._get_stack_trace = _no_stack_trace
    try:
        pulumi_settings.ROOT.set(None)  # each run gets its own root Stack resource
        # set_mocks does not reset these (configure copies a Settings' __dict__; they are properties): a failed
        # run would leave its pending RPCs and outputs for the next run to await on a closed loop.
        pulumi_settings.SETTINGS.rpc_manager = RPCManager()
        pulumi_settings.SETTINGS.outputs = set()
        logs = _LogCollector()
        pulumi.runtime.set_mocks(mocks, project="gpu-training", stack=config.name, preview=False, monitor=monitor, logger=logs)  # type: ignore[arg-type]
        # set_mocks registers a root Stack and closes it at once; the program gets its own, as under `pulumi up`,
        # whose outputs are registered when the program ends.
        pulumi_settings.ROOT.set(None)

        def program() -> None:
            for key, value in build(config, tier, adopt=adopt).items():  # as __main__.py exports them
                pulumi.export(key, value)

        _sync_await(run_in_stack(program))
    except BaseException:
        # The error is raised to the caller here; the other futures that hold it would say so again, on stderr, whenever
        # the garbage collector frees them (after a test's capture, at exit): "Future exception was never retrieved".
        for failed_loop in (loop, *monitor.thread_loops):
            failed_loop.set_exception_handler(_already_raised)
        raise
    finally:
        pulumi_resource._get_stack_trace = stack_trace
        # Join the executor threads the mock monitor ran in, then close the loops it gave them.
        loop.run_until_complete(loop.shutdown_default_executor())
        for thread_loop in monitor.thread_loops:
            thread_loop.close()
        asyncio.set_event_loop(None)
        loop.close()
    resources: list[Recorded] = []
    providers: list[Recorded] = []
    for key, rec in sorted(mocks.resources.items()):
        rec.options = monitor.options.get(key, {})
        (providers if rec.type == PROVIDER_TOKEN else resources).append(rec)
    return Rendering(config, resources, mocks.reads, normalize(monitor.stack_outputs), logs.lines, providers, mocks.read_inputs)
