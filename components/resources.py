"""One ComponentResource per concern, declaring under it the objects `program.layout` assigns it, and `build`, which
declares a stack. Only this module imports Pulumi, so the commands that only read a stack start without the SDK."""

import functools
from collections.abc import Sequence
from typing import Any

import pulumi
from pulumi.output import Unknown
from pulumi_kubernetes import Provider
from pulumi_kubernetes.provider import KubeClientSettingsArgs

from components import program
from components.kube import Declared, logical_name, provider_version, token
from components.lifecycle import CHECK_MARGIN_MINUTES, JOB_HELD_FIELDS, POD_CREATION_TIMEOUT, REPLACES, queued_replacements
from components.outputs import stack_outputs
from components.prerequisites import Requirement, requirements
from components.queueing import LOCAL_QUEUE
from config.stack import ClusterConfig

Options = pulumi.ResourceOptions
Dependency = pulumi.Input[pulumi.Resource]


def _pinned(opts: Options | None) -> Options:
    # As the SDK's typed classes do: the engine then runs the provider plugin of the pinned pulumi_kubernetes.
    return Options.merge(Options(version=provider_version()), opts)


class KubernetesObject(pulumi.CustomResource):
    """Any object under its type token (an SCC's top-level fields are beyond `apiextensions.CustomResource`)."""

    def __init__(self, obj: dict[str, Any], opts: Options | None = None, patch: bool = False) -> None:
        super().__init__(token(obj, patch), logical_name(obj), dict(obj), _pinned(opts))


class LiveObject(pulumi.CustomResource):
    """A read (`opts.id`), in preview too; `fields` as outputs (`apiextensions.CustomResource.get` drops `spec`)."""

    def __init__(self, req: Requirement, opts: Options, name: str) -> None:
        # No inputs: with apiVersion/kind among them the provider's Read would look in `default`, not the id's namespace.
        typ = token({"apiVersion": req.api_version, "kind": req.kind})
        super().__init__(typ, name, {f: None for f in req.fields}, _pinned(Options.merge(opts, Options(id=req.object_id))))


class Component(pulumi.ComponentResource):
    """A concern's component; its objects need nothing of each other unless a subclass's `declare` says otherwise."""

    def __init__(self, typ: str, name: str, config: ClusterConfig, declared: list[Declared], opts: Options | None = None) -> None:
        super().__init__(typ, name, None, opts)
        self.declare(config, declared)
        self.register_outputs({})

    def declare(self, config: ClusterConfig, declared: list[Declared]) -> None:
        for d in declared:
            KubernetesObject(d.object, Options(parent=self))


class ClusterSecurity(Component):
    def declare(self, config: ClusterConfig, declared: list[Declared]) -> None:
        # The grant follows the SCC and its role, so a binding never names a role that is not there yet.
        granted: list[pulumi.Resource] = []
        for d in declared:
            after = list(granted) if d.object["kind"] in ("ClusterRole", "RoleBinding") else []
            res = KubernetesObject(d.object, Options(parent=self, depends_on=after))
            if d.object["kind"] in ("SecurityContextConstraints", "ClusterRole"):
                granted.append(res)


# Data outlives every deployment: `pulumi destroy` refuses a protected claim; removed from the stack, it stays.
KEEP_DATA = Options(protect=True, retain_on_delete=True)


class SharedStorage(Component):
    def declare(self, config: ClusterConfig, declared: list[Declared]) -> None:
        serves = {(f.namespace, f.pvc): f.serves_storage_classes for f in config.pvc_fixes}
        fixed: dict[str, list[pulumi.Resource]] = {}
        for d in (d for d in declared if d.patch):  # the patches first: the claims they serve wait for them
            # Removing the patch from the stack must leave the NFS server's claim alone.
            res = KubernetesObject(d.object, Options(parent=self, retain_on_delete=True), patch=True)
            meta = d.object["metadata"]
            for cls in serves[meta["namespace"], meta["name"]]:
                fixed.setdefault(cls, []).append(res)
        for d in (d for d in declared if not d.patch):
            after = fixed.get(d.object["spec"].get("storageClassName", ""), [])
            KubernetesObject(d.object, Options.merge(KEEP_DATA, Options(parent=self, depends_on=after)))


class Queueing(Component):
    def declare(self, config: ClusterConfig, declared: list[Declared]) -> None:
        for d in declared:
            # The CRD makes a LocalQueue's clusterQueue immutable, which the provider cannot know: replace, deleting first.
            fields = list(REPLACES[LOCAL_QUEUE][0]) if d.object["kind"] == LOCAL_QUEUE else None
            KubernetesObject(d.object, Options(parent=self, replace_on_changes=fields, delete_before_replace=bool(fields)), patch=d.patch)


STACK_WIDE: dict[str, type[Component]] = {program.SECURITY: ClusterSecurity, program.STORAGE: SharedStorage, program.QUEUEING: Queueing}


class Prerequisites(pulumi.ComponentResource):
    """A missing or wrong read fails preview with its fix. `verdicts`: each read, once it passed; pods depend on them."""

    def __init__(self, name: str, config: ClusterConfig, tier: str, opts: Options | None = None) -> None:
        super().__init__(program.PREREQUISITES, name, None, opts)
        self.verdicts: list[Dependency] = []
        # A namespaced read waits for its namespace's: with the namespace gone, the namespace's fix is the one shown.
        namespaces: dict[str, LiveObject] = {}
        for req in requirements(config, tier):
            ns = req.object_id.rpartition("/")[0]
            after = [namespaces[ns]] if ns in namespaces else []
            name = f"{req.object_id} (if missing: {req.hint})" if req.hint else req.object_id
            live = LiveObject(req, Options(parent=self, depends_on=after), name)
            if req.kind == "Namespace":
                namespaces[req.object_id] = live
            if req.verify is None:
                self.verdicts.append(live)
                continue
            # A field the live object lacks is unknown in preview, which would skip the check: read it as absent, as `up` does.
            fields = [getattr(live, f).apply(lambda v: None if isinstance(v, Unknown) else v, run_with_unknowns=True) for f in req.fields]
            self.verdicts.append(pulumi.Output.all(*fields).apply(functools.partial(_verified, req, live)))
        self.register_outputs({})


def _verified(req: Requirement, live: LiveObject, values: list[Any]) -> LiveObject:
    assert req.verify is not None
    if problem := req.verify(dict(zip(req.fields, values, strict=True))):
        raise pulumi.RunError(f"{req.kind} {req.object_id}: {problem} ({req.why}). Fix: {req.fix}")
    return live


class TrainingWorkload(pulumi.ComponentResource):
    """Support objects, then the StatefulSet or Job after them and `after`. A Job never takes a change the provider
    would replace it for: it is the record of one run (lifecycle.JOB_HELD_FIELDS)."""

    def __init__(
        self, typ: str, name: str, declared: list[Declared], after: Sequence[Dependency], opts: Options, timeout: str = POD_CREATION_TIMEOUT
    ) -> None:
        super().__init__(typ, name, None, opts)
        *support, last = [d.object for d in declared]
        support_objects = [KubernetesObject(obj, Options(parent=self)) for obj in support]
        options = Options(
            parent=self,
            delete_before_replace=True,  # explicit object names cannot coexist with their replacement
            depends_on=[*support_objects, *after],
            custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
            ignore_changes=list(JOB_HELD_FIELDS) if last["kind"] == "Job" else None,
            replace_on_changes=queued_replacements(last),
        )
        KubernetesObject(last, options)
        self.register_outputs({})


def stack_provider(config: ClusterConfig, context: str | None, adopt: bool, force: bool | None) -> Provider:
    """Every setting explicit: the SDK fills one left out from PULUMI_K8S_* or KUBECONFIG. `clusterIdentifier` keeps a
    moved kubeconfig from replacing every object; the client limits are the provider's documented defaults."""
    return Provider(
        config.name,
        kubeconfig="",
        context=context,
        cluster_identifier=config.name,
        enable_server_side_apply=True,
        enable_config_map_mutable=True,
        enable_secret_mutable=False,
        upsert_existing_objects=adopt,
        enable_patch_force=adopt if force is None else force,
        delete_unreachable=False,
        skip_update_unreachable=False,
        suppress_deprecation_warnings=False,
        suppress_helm_hook_warnings=False,
        kube_client_settings=KubeClientSettingsArgs(burst=120, qps=50, timeout=32),
    )


def build(
    config: ClusterConfig, tier: str = "all", context: str | None = None, adopt: bool = False, force: bool | None = None
) -> dict[str, Any]:
    """The stack outputs. `adopt`: the first run of docs/adoption.md; `force` alone: the run after `pulumi import`."""
    opts = Options(providers={"kubernetes": stack_provider(config, context, adopt, force)})
    parts: dict[tuple[str, str], list[Declared]] = {}
    for one in program.layout(config, tier):
        parts.setdefault((one.component_type, one.component_name), []).append(one)
    # Pods need the reads' verdicts and every stack-wide component this tier declares something of.
    after: list[Dependency] = [*Prerequisites("prerequisites", config, tier, opts).verdicts]
    for name, typ, *_ in program.PARTS:
        if declared := parts.get((typ, name)):
            after.append(STACK_WIDE.get(typ, Component)(typ, name, config, declared, opts))
    # Stopped workloads first: `up` waits until their pods are gone, so their nodes are free before a bandwidth check.
    workloads = [
        (w, name, d) for w in config.all_workloads() if (d := parts.get((program.TRAINING_WORKLOAD, name := f"{w.namespace}/{w.name}")))
    ]
    stopping: list[pulumi.Resource] = [
        TrainingWorkload(program.TRAINING_WORKLOAD, name, d, after, opts) for w, name, d in workloads if w.state == "stopped"
    ]
    # An enabled bandwidth check runs next; the running workloads of its transport wait for its verdict.
    gates: dict[str, list[pulumi.Resource]] = {}
    for c in config.enabled_checks():
        name = f"{c.namespace}/{c.name}"
        if declared := parts.get((program.BANDWIDTH_CHECK, name)):
            timeout = f"{c.deadline_minutes + CHECK_MARGIN_MINUTES}m"
            check = TrainingWorkload(program.BANDWIDTH_CHECK, name, declared, [*after, *stopping], opts, timeout)
            gates.setdefault(c.transport, []).append(check)
    for w, name, d in workloads:
        if w.state != "stopped":
            TrainingWorkload(program.TRAINING_WORKLOAD, name, d, [*after, *gates.get(w.transport, [])], opts)
    return stack_outputs(config, tier)
