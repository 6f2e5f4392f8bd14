"""The Pulumi side of the components: one ComponentResource per concern, each registering the plain objects its
concern's module builds (`layout` in components/program.py says which, under which component), and `build`, which
declares a stack under them. `__main__.py` runs `build` under `pulumi up`, tools/render.py under Pulumi's mock runtime.

Only this module imports Pulumi. The concern modules are plain functions from config to object dicts, so the commands
that read what a stack declares without declaring it (`check`, `status`, `drift`, the import plan) never load the SDK:
importing it is most of such a command's start (0.2 s of `python -m stacks check`, docs/performance.md).

Every object reaches the kubernetes provider through one generic resource class (`KubernetesObject`), and every read
of what the stack relies on through one generic read (`LiveObject`).

Every resource goes through one explicit kubernetes provider, named after the cluster, whose context
comes from the stack file (the stack files disable the default provider, so nothing can reach
whatever kubeconfig context happens to be current). `clusterIdentifier` is the cluster's name: a
kubeconfig that moves (a CI runner's temporary file, another user's path) never replaces the provider
and with it every object. `enableConfigMapMutable` updates the launcher and script ConfigMaps in
place instead of deleting them under the pods that mount them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar

import pulumi
from pulumi_kubernetes import Provider, _utilities
from pulumi_kubernetes.provider import KubeClientSettingsArgs

from components import program
from components.kube import Declared, logical_name, token
from components.lifecycle import CHECK_MARGIN_MINUTES, JOB_HELD_FIELDS, POD_CREATION_TIMEOUT, REPLACES, queued_replacements
from components.outputs import stack_outputs
from components.prerequisites import Requirement, requirements
from components.queueing import LOCAL_QUEUE
from config.stack import ClusterConfig
from config.workloads import BandwidthCheck as CheckConfig

# --- how an object reaches the provider ------------------------------------------------------------------------------


def _with_version(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    # The SDK's own classes pin the provider plugin this way; do the same so the engine picks the
    # kubernetes provider that matches the pinned pulumi_kubernetes.
    return pulumi.ResourceOptions.merge(_utilities.get_resource_opts_defaults(), opts)


class KubernetesObject(pulumi.CustomResource):
    """Any Kubernetes object, registered with the kubernetes provider under its type token.

    The provider receives exactly what the typed pulumi_kubernetes classes would send (token and the
    object as inputs; they only add snake_case keyword arguments around it). Registering the object
    directly keeps one source for every kind, SCCs included (their fields sit at the top level,
    which `apiextensions.CustomResource` cannot express), and spares each `pulumi preview` the
    0.3 s it takes to import the typed classes' modules."""

    def __init__(self, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None, patch: bool = False) -> None:
        super().__init__(token(obj, patch), logical_name(obj), dict(obj), _with_version(opts))


def declare(obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None, patch: bool = False) -> pulumi.CustomResource:
    """Register one object (or, with `patch`, a server-side apply patch of an existing one)."""
    return KubernetesObject(obj, opts, patch)


class ObjectGroup(pulumi.ComponentResource):
    """A component whose objects need nothing of each other: each is declared under it, as it is. A
    subclass names the concern (its TYPE is part of every URN under it: never rename one)."""

    TYPE: ClassVar[str]

    def __init__(self, name: str, config: Any, declared: list[Declared], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        for d in declared:
            declare(d.object, pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


class LiveObject(pulumi.CustomResource):
    """An object the stack relies on but does not own, read from the cluster (`opts.id` is
    NAMESPACE/NAME or NAME). Reads run during `pulumi preview` too, and fail it when the object is
    missing: that is how preview learns what `up` would otherwise find out half-way.

    `apiextensions.CustomResource.get` drops `spec` in Python; declaring the fields to read as the
    resource's outputs keeps them (`getattr(obj, field)` is then an Output)."""

    def __init__(
        self,
        api_version: str,
        kind: str,
        object_id: str,
        fields: tuple[str, ...],
        opts: pulumi.ResourceOptions | None = None,
        name: str | None = None,
    ) -> None:
        typ = token({"apiVersion": api_version, "kind": kind})
        # Outputs only, no inputs: the provider's Read takes the kind from the type token and the namespace
        # and name from the id only when the read carries no apiVersion/kind (provider.go Read); with them it
        # would look in `default`. The SDKs' own reads send nothing either.
        props: dict[str, Any] = {f: None for f in fields}
        read = pulumi.ResourceOptions(id=object_id)
        super().__init__(typ, name or object_id, props, _with_version(pulumi.ResourceOptions.merge(opts, read)))


# --- one component per concern -----------------------------------------------------------------------------------------


class ClusterSecurity(pulumi.ComponentResource):
    """The SCC (created, or an existing one referenced), its use-grants, and the ServiceAccounts."""

    TYPE = program.SECURITY

    def __init__(self, name: str, config: ClusterConfig, declared: list[Declared], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        # The grant follows the SCC and its role, so a binding never names a role that is not there yet.
        granted: list[pulumi.Resource] = []
        for d in declared:
            after = granted if d.object["kind"] in ("ClusterRole", "RoleBinding") else []
            res = declare(d.object, pulumi.ResourceOptions(parent=self, depends_on=list(after)))
            if d.object["kind"] in ("SecurityContextConstraints", "ClusterRole"):
                granted.append(res)
        self.register_outputs({})


class RdmaNetworks(ObjectGroup):
    """The NAD copies of the SR-IOV networks in every namespace that runs RDMA pods, or the SriovNetworks the operator
    makes them from (platform tier)."""

    TYPE = program.NETWORKS


# Data outlives every deployment: `pulumi destroy` refuses a protected claim, and deleting it from the stack leaves the
# claim on the cluster (docs/lifecycle.md).
KEEP_DATA = pulumi.ResourceOptions(protect=True, retain_on_delete=True)


class SharedStorage(pulumi.ComponentResource):
    """The stack's PVCs (protected) and patches of existing PVCs."""

    TYPE = program.STORAGE

    def __init__(self, name: str, config: ClusterConfig, declared: list[Declared], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        serves = {(f.namespace, f.pvc): f.serves_storage_classes for f in config.pvc_fixes}
        fixed: dict[str, list[pulumi.Resource]] = {}
        for d in (d for d in declared if d.patch):  # the patches first: the claims they serve wait for them
            # Removing the patch from the stack must leave the NFS server's claim alone.
            res = declare(d.object, pulumi.ResourceOptions(parent=self, retain_on_delete=True), patch=True)
            meta = d.object["metadata"]
            for cls in serves[meta["namespace"], meta["name"]]:
                fixed.setdefault(cls, []).append(res)
        for d in (d for d in declared if not d.patch):
            after = fixed.get(d.object["spec"].get("storageClassName", ""), [])
            declare(d.object, pulumi.ResourceOptions.merge(KEEP_DATA, pulumi.ResourceOptions(parent=self, depends_on=after)))
        self.register_outputs({})


class PodScripts(ObjectGroup):
    """The ConfigMaps the pods mount: the launcher in every namespace that runs pods, the stack's scripts."""

    TYPE = program.SCRIPTS


class ImageBuilds(ObjectGroup):
    """The ImageStreams and BuildConfigs of the images the stack builds."""

    TYPE = program.IMAGES


class NodeConfiguration(ObjectGroup):
    """MachineConfigs of the GPU pool (each reboots the pool's nodes when applied or removed)."""

    TYPE = program.NODES


class Queueing(pulumi.ComponentResource):
    """The Kueue objects of a queued cluster: flavors, ClusterQueue, priority classes, LocalQueues, namespace labels."""

    TYPE = program.QUEUEING

    def __init__(self, name: str, config: ClusterConfig, declared: list[Declared], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        for d in declared:
            # Without queueing the label patch goes, and with it only this stack's claim on the label (server-side apply).
            # The CRD makes a LocalQueue's clusterQueue immutable, which the provider cannot know: the program asks for the
            # replacement (lifecycle.REPLACES), deleting first, since the new one has the same name.
            fields = list(REPLACES[LOCAL_QUEUE][0]) if d.object["kind"] == LOCAL_QUEUE else None
            declare(
                d.object, pulumi.ResourceOptions(parent=self, replace_on_changes=fields, delete_before_replace=bool(fields)), patch=d.patch
            )
        self.register_outputs({})


class SriovNodePolicies(ObjectGroup):
    """SriovNetworkNodePolicies of the named GPU nodes (each drains and reboots its node when applied or changed)."""

    TYPE = program.SRIOV


class Prerequisites(pulumi.ComponentResource):
    """Reads of what the stack relies on; a missing or wrong one fails preview with its fix."""

    TYPE = program.PREREQUISITES

    verdicts: list[pulumi.Input[pulumi.Resource]]
    """What the pods depend on: each read, once it exists and (where it has a check) passed it. A failed check
    holds back everything that depends on it, in `pulumi up` as in preview, and fails the run."""

    def __init__(self, name: str, config: ClusterConfig, tier: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.verdicts = []
        # A namespaced read waits for its namespace's read: with the namespace gone, the engine reports the first read
        # that fails and stops, and that must be the namespace's (its fix is the one that helps), not a grant's in it.
        namespaces: dict[str, LiveObject] = {}
        for req in requirements(config, tier):
            name = f"{req.object_id} (if missing: {req.hint})" if req.hint else req.object_id
            ns = req.object_id.split("/", 1)[0] if "/" in req.object_id else None
            after = [namespaces[ns]] if ns in namespaces else []
            options = pulumi.ResourceOptions(parent=self, depends_on=after)
            live = LiveObject(req.api_version, req.kind, req.object_id, req.fields, options, name=name)
            if req.kind == "Namespace":
                namespaces[req.object_id] = live
            if req.verify is None:
                self.verdicts.append(live)
                continue
            state = pulumi.Output.all(*[getattr(live, f) for f in req.fields])
            self.verdicts.append(state.apply(functools.partial(_verified, req, live)))
        self.register_outputs({})


def _verified(req: Requirement, live: LiveObject, values: list[Any]) -> LiveObject:
    assert req.verify is not None
    problem = req.verify(dict(zip(req.fields, values, strict=True)))
    if problem:
        raise pulumi.RunError(f"{req.kind} {req.object_id}: {problem} ({req.why}). Fix: {req.fix}")
    return live


def declare_workload(
    parent: pulumi.Resource,
    objects: list[dict[str, Any]],
    after: Sequence[pulumi.Input[pulumi.Resource]],
    timeout: str = POD_CREATION_TIMEOUT,
) -> None:
    """Declare a workload's objects under `parent`: the support objects first, then the StatefulSet
    or Job, after them and after `after` (grant, networks, claims, scripts, reads, gating checks),
    awaited at most `timeout` (components/lifecycle.py says for what). A Job never takes a change of the
    fields the provider would replace it for: it is the record of one run (lifecycle.JOB_HELD_FIELDS)."""
    if not objects:
        return
    *support, last = objects
    declared = [declare(obj, pulumi.ResourceOptions(parent=parent)) for obj in support]
    # Explicit object names cannot coexist with their replacement: delete first on replace.
    options = pulumi.ResourceOptions(
        parent=parent,
        delete_before_replace=True,
        depends_on=[*declared, *after],
        custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
        ignore_changes=list(JOB_HELD_FIELDS) if last["kind"] == "Job" else None,
        replace_on_changes=queued_replacements(last),
    )
    declare(last, options)


class TrainingWorkload(pulumi.ComponentResource):
    """Headless Service + NetworkPolicy + StatefulSet or Indexed Job (+ developer Service and Routes)."""

    TYPE = program.TRAINING_WORKLOAD

    def __init__(
        self,
        name: str,
        declared: list[Declared],
        after: Sequence[pulumi.Input[pulumi.Resource]] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        declare_workload(self, [d.object for d in declared], after)
        self.register_outputs({})


class BandwidthCheck(pulumi.ComponentResource):
    """Headless Service + NetworkPolicy + Indexed Job running the all-reduce check."""

    TYPE = program.BANDWIDTH_CHECK

    def __init__(
        self,
        check: CheckConfig,
        declared: list[Declared],
        after: Sequence[pulumi.Input[pulumi.Resource]] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, f"{check.namespace}/{check.name}", None, opts)
        declare_workload(self, [d.object for d in declared], after, f"{check.deadline_minutes + CHECK_MARGIN_MINUTES}m")
        self.register_outputs({})


# --- the stack --------------------------------------------------------------------------------------------------------

# The stack-wide components by type: `build` makes each of program.PARTS as component(name, config, its objects, opts).
STACK_WIDE: dict[str, type[Any]] = {
    c.TYPE: c
    for c in (ClusterSecurity, RdmaNetworks, SharedStorage, PodScripts, ImageBuilds, NodeConfiguration, Queueing, SriovNodePolicies)
}


def build(
    config: ClusterConfig, tier: str = "all", context: str | None = None, adopt: bool = False, force: bool | None = None
) -> dict[str, Any]:
    """Declare every resource of the stack's tier (`layout`, each under its component); returns the stack
    outputs. `adopt` is the first run of docs/adoption.md ("The other first run"): create-or-take-over every object,
    forcing the program's fields over other field managers (kubernetes:upsertExistingObjects and
    kubernetes:enablePatchForce in the stack file, which only this explicit provider can honour: the
    default one is disabled). `force` alone (default: `adopt`) is the run after `pulumi import`."""
    # Every setting explicit: the SDK fills a setting left out from the environment (PULUMI_K8S_*, KUBECONFIG), so
    # an exported variable could take objects over without the stack file saying so, turn server-side apply off
    # under the claim patch, or make the provider differ between a laptop and the CI runner. An empty kubeconfig
    # is client-go's own loading ($KUBECONFIG, a list of files too, else ~/.kube/config); the context picks the cluster.
    # Every boolean and the client's limits too: the SDK fills an unset one from PULUMI_K8S_* (with
    # PULUMI_K8S_SKIP_UPDATE_UNREACHABLE=true every read passes against a dead cluster), and the provider prefers a
    # set value over its own environment. The client limits are the provider's documented defaults.
    provider = Provider(
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
    opts = pulumi.ResourceOptions(providers={"kubernetes": provider})
    parts: dict[tuple[str, str], list[Declared]] = {}
    for d in program.layout(config, tier):
        parts.setdefault((d.component_type, d.component_name), []).append(d)
    # Pods need the verdicts of the reads, and the service accounts, grants, networks, claims, scripts, images
    # and node configuration before they start; a component this tier declares nothing of is left out.
    prerequisites = Prerequisites("prerequisites", config, tier, opts)
    after: list[pulumi.Input[pulumi.Resource]] = [*prerequisites.verdicts]
    for name, typ, _ in program.PARTS:
        if declared := parts.get((typ, name)):
            after.append(STACK_WIDE[typ](name, config, declared, opts))
    # Stopped workloads first: `up` waits until their pods are gone (components/lifecycle.py), so the nodes they held
    # are free before a bandwidth check starts. Gated by the check, a workload stopped in the same edit that enables
    # it would hold the check's nodes until the check's verdict, which could then never come (found live:
    # live/tests/test_scheduling.py). A stopped Job is not declared at all: Pulumi deletes it at the end of `up`, after
    # the check, which the capacity rule counts (docs/lifecycle.md).
    stopping: list[pulumi.Resource] = []
    workloads = [(w, parts.get((TrainingWorkload.TYPE, f"{w.namespace}/{w.name}"))) for w in config.all_workloads()]
    for w, declared in workloads:
        if declared and w.state == "stopped":
            stopping.append(TrainingWorkload(f"{w.namespace}/{w.name}", declared, after, opts))
    # An enabled bandwidth check runs next; the running workloads of its transport wait for its verdict.
    gates: dict[str, list[pulumi.Resource]] = {}
    for c in config.enabled_checks():
        if declared := parts.get((BandwidthCheck.TYPE, f"{c.namespace}/{c.name}")):
            gates.setdefault(c.transport, []).append(BandwidthCheck(c, declared, [*after, *stopping], opts))
    for w, declared in workloads:
        if declared and w.state != "stopped":
            TrainingWorkload(f"{w.namespace}/{w.name}", declared, [*after, *gates.get(w.transport, [])], opts)
    return stack_outputs(config, tier)
