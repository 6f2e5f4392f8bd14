"""Run `components.resources.build` under Pulumi's mock runtime and record every resource's inputs and options. A read
is answered with the state the stack assumes (components/prerequisites.py), or what a test says the cluster holds."""

import asyncio
import copy
import logging
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

from components.kube import PROVIDER_TOKEN
from components.prerequisites import requirements
from components.resources import build
from config.stack import ClusterConfig

STACK_TOKEN = "pulumi:pulumi:Stack"
MISSING = None  # in `live`: the cluster has no such object (the read fails as on a cluster)
Live = dict[tuple[str, str], dict[str, Any] | None]  # {(kind, id): the object a read finds, or MISSING}


@dataclass
class Recorded:
    """One custom resource the program declared; for a read, `name` is the id it reads and `urn_name` its logical name."""

    type: str
    name: str
    inputs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    urn_name: str = ""

    @property
    def is_patch(self) -> bool:
        return self.type.endswith("Patch")

    @property
    def object(self) -> dict[str, Any]:
        """The Kubernetes object: apiVersion and kind from the type token where inputs lack them."""
        obj: dict[str, Any] = normalize(self.inputs)
        _, api, kind = self.type.split(":", 2)
        group, _, version = api.rpartition("/")
        obj.setdefault("apiVersion", version if group in ("core", "") else f"{group}/{version}")
        obj.setdefault("kind", kind.removesuffix("Patch"))
        return obj


@dataclass
class Rendering:
    config: ClusterConfig
    resources: list[Recorded]
    reads: list[Recorded]
    outputs: dict[str, Any]
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
    return [normalize(v) for v in value] if isinstance(value, list) else value


class DuplicateResource(Exception):
    """Two resources with one type and name: the Pulumi engine refuses the program the same way."""


class MissingObject(LookupError):
    """A read of an object the cluster (as a test describes it) does not have."""


class DuplicateRead(ValueError):
    """Two reads with one URN, which the Pulumi engine refuses (step_generator) and the mock runtime would not."""


class Mocks(pulumi.runtime.Mocks):
    def __init__(self, config: ClusterConfig, tier: str, live: Live) -> None:
        self.cluster: Live = {(r.kind, r.object_id): r.expected for r in requirements(config, tier)}
        self.cluster.update(live)
        self.resources: dict[str, Recorded] = {}
        self.reads: list[Recorded] = []
        self.read_inputs: list[dict[str, Any]] = []  # what each read sends the provider (nothing, or it misreads)

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        kind = args.typ.rsplit(":", 1)[-1]
        if args.resource_id:  # a read of a live object (`opts.id`)
            self.read_inputs.append(dict(args.inputs))
            if (state := self.cluster.get((kind, args.resource_id))) is None:
                raise MissingObject(f"resource '{args.resource_id}' does not exist ({kind})")
            if any(r.type == args.typ and r.urn_name == args.name for r in self.reads):
                raise DuplicateRead(f"two reads of {args.typ} {args.name}: the engine rejects a duplicate read URN")
            state = copy.deepcopy(state)
            self.reads.append(Recorded(args.typ, args.resource_id, state, urn_name=args.name))
            return args.resource_id, state
        if (key := f"{args.typ}::{args.name}") in self.resources:
            raise DuplicateResource(f"Duplicate resource URN: {args.typ} {args.name!r} is declared twice")
        if args.typ.startswith("kubernetes:") or args.typ == PROVIDER_TOKEN:
            self.resources[key] = Recorded(args.typ, args.name, copy.deepcopy(dict(args.inputs)))
        return args.name, dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class _OptionsMonitor(MockMonitor):
    """Sees the resource options and stack outputs the Mocks interface is not given."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.options: dict[str, dict[str, Any]] = {}
        self.thread_loops: list[asyncio.AbstractEventLoop] = []
        self.stack_outputs: dict[str, Any] = {}

    def _own_thread_loop(self) -> None:
        # The SDK gives each executor thread an event loop it never closes (the collector may then print a traceback).
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
        timeouts = request.customTimeouts
        self.options[f"{request.type}::{request.name}"] = {
            "protect": bool(request.protect),
            "retain_on_delete": bool(request.retainOnDelete),
            "delete_before_replace": bool(request.deleteBeforeReplace),
            "depends_on": sorted(request.dependencies),
            "parent": request.parent,
            "provider": request.provider,
            "ignore_changes": list(request.ignoreChanges),
            "replace_on_changes": list(request.replaceOnChanges),
            "custom_timeouts": (timeouts.create, timeouts.update) if request.HasField("customTimeouts") else None,
        }
        return super().RegisterResource(request)  # type: ignore[no-untyped-call]  # the SDK's method is unannotated

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        # set_mocks's own root Stack registers {} too, from another thread and in no fixed order: merge.
        if request.urn.split("::")[-2:-1] == [STACK_TOKEN]:
            self.stack_outputs.update(json_format.MessageToDict(request.outputs))
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


# The SDK's own log lines under mocks: not the command's output.
_QUIET = logging.getLogger(__name__)
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def _already_raised(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if "exception" in context and str(context.get("message", "")).endswith("exception was never retrieved"):
        return
    loop.default_exception_handler(context)


def drain(loop: asyncio.AbstractEventLoop) -> None:
    """End the tasks a failed program left waiting, so that none is destroyed pending (asyncio would print each)."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def run(config: ClusterConfig, tier: str = "all", live: Live | None = None, adopt: bool = False) -> Rendering:
    """Run the program for one config (and tier) under fresh mocks; `live`: {(kind, id): state, or MISSING} for reads."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = Mocks(config, tier, live or {})
    monitor = _OptionsMonitor(mocks)
    # The SDK walks the Python stack for every resource (a fifth of a render) for source positions the mocks discard.
    stack_trace, pulumi_resource._get_stack_trace = pulumi_resource._get_stack_trace, source_pb2.StackTrace
    try:
        pulumi_settings.ROOT.set(None)
        # set_mocks does not reset these: a failed run would leave its pending RPCs for the next to await on a closed loop.
        pulumi_settings.SETTINGS.rpc_manager = RPCManager()
        pulumi_settings.SETTINGS.outputs = set()
        pulumi.runtime.set_mocks(mocks, project="gpu-training", stack=config.name, preview=False, monitor=monitor, logger=_QUIET)
        # set_mocks registers a root Stack and closes it at once; the program gets its own, as under `pulumi up`.
        pulumi_settings.ROOT.set(None)

        def program() -> None:
            for key, value in build(config, tier, adopt=adopt).items():  # as __main__.py exports them
                pulumi.export(key, value)

        loop.run_until_complete(run_in_stack(program))
    except BaseException:
        # Raised here; the other futures that hold the error would say so again on stderr when collected.
        for failed_loop in (loop, *monitor.thread_loops):
            failed_loop.set_exception_handler(_already_raised)
        drain(loop)
        raise
    finally:
        pulumi_resource._get_stack_trace = stack_trace
        loop.run_until_complete(loop.shutdown_default_executor())  # join the monitor's threads, then close their loops
        for thread_loop in monitor.thread_loops:
            thread_loop.close()
        asyncio.set_event_loop(None)
        loop.close()
    resources: list[Recorded] = []
    providers: list[Recorded] = []
    for key, rec in sorted(mocks.resources.items()):
        rec.options = monitor.options.get(key, {})
        (providers if rec.type == PROVIDER_TOKEN else resources).append(rec)
    return Rendering(config, resources, mocks.reads, normalize(monitor.stack_outputs), providers, mocks.read_inputs)
