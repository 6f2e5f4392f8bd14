"""What the rules read and what they report: findings, the rule registry, and views of the rendered
objects (the pods inside StatefulSets, Jobs and Pods; the SCC a pod runs under).

The policy reads the validated config and the Kubernetes objects the stack renders, as plain dicts, and, for
the rules that compare stacks, the configs of the project's other stacks (loaded through stacks/, which never
imports policy/). It never imports components/ or pulumi, so the same rules run in `python -m stacks check`
(over the offline rendering) and inside the Pulumi program (over `components.program.objects`).
"""

from __future__ import annotations

import fnmatch
import json
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from config import provenance
from config.errors import located
from config.openshift import OPENSHIFT_SCCS
from config.stack import AcceptedWarning, ClusterConfig
from config.values import kubelet_expand
from config.workloads import BandwidthCheck, Workload

Severity = Literal["error", "warning", "info"]
ConfigPath = tuple[str | int, ...]
ObjectKey = tuple[str, str, str, bool]
"""(kind, namespace or "", name, is a patch): how `check`'s `sources` name an object (components.program.sources)."""

WIDTH = 160
"""The longest line `python -m stacks check` (and `render`'s refusal) prints: a longer finding wraps (Finding.wrapped)."""
INDENT = "    "

# Annotations the rules read (the same strings components/kube.py writes; repeated here because the
# policy must not import components).
REQUIRED_SCC = "openshift.io/required-scc"
NETWORKS = "k8s.v1.cni.cncf.io/networks"
RESOURCE_NAME = "k8s.v1.cni.cncf.io/resourceName"
SCC_USE_ROLE_PREFIX = "system:openshift:scc:"
INSTANCE = "app.kubernetes.io/instance"


@dataclass(frozen=True)
class Finding:
    """One thing that would go wrong on the cluster (error), that the stack accepts knowingly (warning), or that
    a reviewer or a scanner would ask about and the stack answers (info: printed, never to accept)."""

    severity: Severity
    object: str
    """The object it concerns: `Kind namespace/name`, or `Kind name` for cluster-scoped objects."""
    field: str
    """Where in that object (a dotted path such as spec.template.spec.containers[0].resources.limits)."""
    message: str
    fix: str
    rule: str = ""
    """Filled in by `check` from the registry."""
    accepted: str | None = None
    """For a warning the stack accepts (accepted_warnings): the stack's reason."""
    config: ConfigPath | None = None
    """The config path of the value it is about (`("volumes", 0, "storage_class")`), where the rule knows it; else
    `check` takes the config entry the object is rendered from (its `sources`) and the rule's `setting`."""
    setting: str = ""
    """The field of that entry the object's wrong field comes from (`storage_class`), where the rule knows it."""
    where: str = ""
    """Filled in by `check`: the config path as the user writes it (`volumes[workspace].storage_class`)."""
    origin: str = ""
    """Filled in by `check`: the file and line that write it (`clusters/nerc.py line 95`), where known."""
    affects: tuple[str, ...] = ()
    """Filled in by `check` when one cause shows in several objects: all of them (`object` is the first)."""
    value: str = ""
    """The value a warning is about, where it is about one (the image of an `image` warning, the claims of an
    `orphaned-claims` one): an acceptance must name it (AcceptedWarning.value), so it stops accepting the warning
    when the value changes (a new tag is not the one whose reason the stack wrote)."""
    new: bool = False
    """Filled in by `python -m stacks check`: the check of the committed stack did not have this finding."""

    def _head(self) -> str:
        """`severity rule` (`new severity` for a finding this change made), then the config path and its line where known,
        else the object and its field."""
        severity = f"new {self.severity}" if self.new else self.severity
        if not self.where:
            return f"{severity} {self.rule} {self.object} {self.field}"
        return f"{severity} {self.rule} {self.where}" + (f" ({self.origin})" if self.origin else "")

    def _rendered(self) -> str:
        """The objects and field on the cluster, the secondary detail of a finding located in the config."""
        objects = self.affects or (self.object,)
        return f"[on the cluster: {', '.join(objects)}: {self.field}]"

    def _on_the_cluster(self) -> bool:
        """Whether `object` is a Kubernetes object (not the whole stack, `Stack NAME`, a workload of the committed render,
        `Workload NAME`, or a config entry)."""
        return bool(self.where) and not self.object.startswith(("Stack ", "Workload ", "accepted_warnings["))

    def line(self) -> str:
        """The finding on one line: severity, rule, where (the config path and its line, else the object and field),
        message, fix, the stack's reason when it accepts the warning, and the rendered objects it shows in."""
        text = f"{self._head()}: {self.message} Fix: {self.fix}"
        if self.accepted:
            text += f" [accepted: {self.accepted}]"
        if self._on_the_cluster():
            text += f" {self._rendered()}"
        return " ".join(text.split())  # reasons written in YAML may span lines; a finding never does

    def wrapped(self, prefix: str = "", width: int = WIDTH) -> list[str]:
        """The finding for a terminal, each line at most `width` characters: `prefix` + line() where that fits;
        else severity, rule, object, field and message wrapped, then `Fix: ...` and the stack's `[accepted: ...]`
        each starting a line of its own, every continuation line indented (INDENT). The words are line()'s, in
        its order; only a word longer than a line (none in the committed stacks) is split."""
        one = prefix + self.line()
        if len(one) <= width:
            return [one]
        parts = [f"{prefix}{self._head()}: {self.message}", f"Fix: {self.fix}"]
        if self.accepted:
            parts.append(f"[accepted: {self.accepted}]")
        if self._on_the_cluster():
            parts.append(self._rendered())
        out: list[str] = []
        for i, part in enumerate(parts):
            out += textwrap.wrap(
                " ".join(part.split()),
                width=width,
                initial_indent=INDENT if i else "",
                subsequent_indent=INDENT,
                break_long_words=True,
                break_on_hyphens=False,
            )
        return out


def error(obj: str, where: str, message: str, fix: str, setting: str = "", config: ConfigPath | None = None) -> Finding:
    return Finding("error", obj, where, message, fix, setting=setting, config=config)


def warning(obj: str, where: str, message: str, fix: str, setting: str = "", config: ConfigPath | None = None, value: str = "") -> Finding:
    return Finding("warning", obj, where, message, fix, setting=setting, config=config, value=value)


def info(obj: str, where: str, message: str, fix: str, setting: str = "", config: ConfigPath | None = None) -> Finding:
    return Finding("info", obj, where, message, fix, setting=setting, config=config)


# --- the registry -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    id: str
    summary: str
    """What the rule guarantees, and the seed failure it comes from."""
    run: Callable[[Stack], Iterable[Finding]]


RULES: dict[str, Rule] = {}


def rule(rule_id: str, summary: str) -> Callable[[Callable[[Stack], Iterable[Finding]]], Callable[[Stack], Iterable[Finding]]]:
    """Register a rule function under an id (the order of registration is the order of the report)."""

    def register(fn: Callable[[Stack], Iterable[Finding]]) -> Callable[[Stack], Iterable[Finding]]:
        if rule_id in RULES:
            raise ValueError(f"rule id {rule_id!r} registered twice")
        RULES[rule_id] = Rule(rule_id, summary, fn)
        return fn

    return register


# --- views of the rendered objects --------------------------------------------------------------


def ref(obj: dict[str, Any]) -> str:
    """`Kind namespace/name`, or `Kind name` for a cluster-scoped object."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns}/{meta.get('name')}" if ns else f"{obj.get('kind')} {meta.get('name')}"


@dataclass(frozen=True)
class PodView:
    """The pod an object runs: a Pod itself, or the template of a StatefulSet or Job."""

    owner: dict[str, Any]
    base: str
    """Path of the pod in the owner: '' for a Pod, 'spec.template' for the others."""
    replicas: int
    """Pods that run at the same time: StatefulSet replicas (0 when stopped), Job parallelism, 1 for a Pod."""

    @property
    def ref(self) -> str:
        return ref(self.owner)

    @property
    def namespace(self) -> str:
        return str((self.owner.get("metadata") or {}).get("namespace") or "default")

    @property
    def name(self) -> str:
        return str((self.owner.get("metadata") or {}).get("name"))

    def at(self, path: str) -> str:
        """A field path in the owner for a path relative to the pod ('spec.containers[0]')."""
        return f"{self.base}.{path}" if self.base else path

    @property
    def pod(self) -> dict[str, Any]:
        if not self.base:
            return self.owner
        return ((self.owner.get("spec") or {}).get("template")) or {}

    @property
    def meta(self) -> dict[str, Any]:
        return self.pod.get("metadata") or {}

    @property
    def spec(self) -> dict[str, Any]:
        return self.pod.get("spec") or {}

    @property
    def annotations(self) -> dict[str, str]:
        return self.meta.get("annotations") or {}

    def containers(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(field path, container) of every init and regular container."""
        for key in ("initContainers", "containers"):
            for i, c in enumerate(self.spec.get(key) or []):
                yield self.at(f"spec.{key}[{i}]"), c

    @staticmethod
    def env(container: dict[str, Any]) -> dict[str, str]:
        """The container's literal environment values as the process gets them: the kubelet's expansion of each
        (`$$` is `$`, `$(NAME)` an earlier variable's value). valueFrom entries are not knowable here."""
        out: dict[str, str] = {}
        for e in container.get("env") or []:
            if "value" in e:
                out[e["name"]] = kubelet_expand(str(e["value"]), out)
        return out

    def run_as_user(self, container: dict[str, Any]) -> int | None:
        """The uid the container asks for: its own securityContext wins over the pod's."""
        for ctx in (container.get("securityContext") or {}, self.spec.get("securityContext") or {}):
            if ctx.get("runAsUser") is not None:
                return int(ctx["runAsUser"])
        return None

    def network_refs(self) -> list[NetworkRef]:
        return parse_networks(self.annotations.get(NETWORKS, ""), self.namespace)

    @property
    def instance(self) -> str:
        """The workload the pod belongs to (its app.kubernetes.io/instance label)."""
        return str((self.meta.get("labels") or {}).get(INSTANCE) or self.name)


@dataclass(frozen=True)
class NetworkRef:
    """One entry of a pod's k8s.v1.cni.cncf.io/networks annotation."""

    namespace: str
    name: str
    interface: str


def parse_networks(value: str, pod_namespace: str) -> list[NetworkRef]:
    """Parse the networks annotation: a comma list of `name`, `ns/name`, `name@ifname`, or a JSON
    list of {name, namespace, interface}. Multus names unnamed interfaces net1, net2, ... in order."""
    value = value.strip()
    if not value:
        return []
    out: list[NetworkRef] = []
    if value.startswith("["):
        try:
            entries = json.loads(value)
        except ValueError:
            entries = []
        for i, e in enumerate(entries if isinstance(entries, list) else [], start=1):
            if isinstance(e, dict) and e.get("name"):
                out.append(NetworkRef(str(e.get("namespace") or pod_namespace), str(e["name"]), str(e.get("interface") or f"net{i}")))
        return out
    for i, entry in enumerate((p.strip() for p in value.split(",") if p.strip()), start=1):
        entry, _, iface = entry.partition("@")
        ns, _, name = entry.rpartition("/")
        out.append(NetworkRef(ns or pod_namespace, name, iface or f"net{i}"))
    return out


def pod_view(obj: dict[str, Any]) -> PodView | None:
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return PodView(obj, "", 1)
    if kind == "StatefulSet":
        return PodView(obj, "spec.template", int(spec.get("replicas", 1)))
    if kind == "Job":  # a stopped Job is not declared: a Job runs
        return PodView(obj, "spec.template", int(spec.get("parallelism", 1)))
    return None


@dataclass(frozen=True)
class SccView:
    """What admission needs to know of an SCC: from the rendered object when the stack creates it,
    from `security.existing_*` when it exists on the cluster already."""

    name: str
    created: bool
    allowed_capabilities: frozenset[str] | None
    """None: every capability may be added (`*`, or the privileged SCC)."""
    allows_privileged: bool
    allows_root: bool
    where: str
    """Where the facts come from, for messages: the rendered object or the config fields."""
    allows_host_paths: bool = False
    shipped: bool = False
    """One of the SCCs OpenShift ships (OPENSHIFT_SCCS): its facts are the platform's, never the config's."""

    def allows(self, capability: str) -> bool:
        return self.allowed_capabilities is None or capability in self.allowed_capabilities


def _scc_from_object(obj: dict[str, Any]) -> SccView:
    allowed = set(obj.get("allowedCapabilities") or []) | set(obj.get("defaultAddCapabilities") or [])
    run_as = obj.get("runAsUser") or {}
    # RunAsAny admits any uid; MustRunAs admits exactly its uid; the Range and NonRoot strategies never admit 0.
    root = run_as.get("type") == "RunAsAny" or (run_as.get("type") == "MustRunAs" and run_as.get("uid") == 0)
    return SccView(
        name=str(obj["metadata"]["name"]),
        created=True,
        allowed_capabilities=None if "*" in allowed else frozenset(allowed),
        allows_privileged=bool(obj.get("allowPrivilegedContainer")),
        allows_root=root,
        where=f"the SCC this stack creates ({ref(obj)})",
        allows_host_paths=bool(obj.get("allowHostDirVolumePlugin")),
    )


# --- the stack as the rules see it --------------------------------------------------------------


@dataclass
class Stack:
    config: ClusterConfig
    objects: list[dict[str, Any]]
    patches: list[dict[str, Any]] = field(default_factory=list)
    """Server-side apply patches of objects that exist on the cluster (kept apart: they are partial)."""
    previous: dict[str, Any] | None = None
    """The stack outputs of the render committed before this change (rendered/STACK/outputs.json),
    when there is one: what the cluster holds now, as far as the repository knows."""
    others: list[ClusterConfig] = field(default_factory=list)
    """The configs of the project's other stacks (as `pulumi up` deploys them), for the rules that compare stacks."""

    # The rules ask these per pod and per object: each is built once per check (the stack does not change during one),
    # so a rule's work stays linear in the objects.

    @cached_property
    def _by_kind(self) -> dict[Any, list[dict[str, Any]]]:
        out: dict[Any, list[dict[str, Any]]] = {}
        for o in self.objects:
            out.setdefault(o.get("kind"), []).append(o)
        return out

    @cached_property
    def _pods(self) -> list[PodView]:
        return [p for p in map(pod_view, self.objects) if p is not None]

    @cached_property
    def _specs(self) -> dict[tuple[str, str], Workload | BandwidthCheck]:
        """(namespace, name) -> the workload, TCP variant or check of that name (the first, as the config lists them)."""
        out: dict[tuple[str, str], Workload | BandwidthCheck] = {}
        for w in [*self.config.all_workloads(), *(getattr(self.config, "bandwidth_checks", None) or [])]:
            out.setdefault((w.namespace, w.name), w)
        return out

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return list(self._by_kind.get(kind, ()))

    def pods(self) -> list[PodView]:
        return list(self._pods)

    def spec_of(self, pod: PodView) -> Workload | BandwidthCheck | None:
        """The workload, TCP variant or bandwidth check a pod was rendered from (its instance label)."""
        return self._specs.get((pod.namespace, pod.instance))

    def pods_started(self, pod: PodView) -> int:
        """Pods the object runs when its workload runs: a stopped StatefulSet's too (its object says 0)."""
        spec = self.spec_of(pod)
        return spec.nodes if spec is not None else pod.replicas

    def workload(self, pod: PodView) -> Workload | None:
        spec = self.spec_of(pod)
        return spec if isinstance(spec, Workload) else None

    def privileged_reason(self, pod: PodView) -> str | None:
        """The reason the config gives for a pod's privileged container (a workload's or a check's)."""
        spec = self.spec_of(pod)
        return spec.privileged_reason if spec is not None else None

    def scc(self, name: str) -> SccView | None:
        """The SCC of that name as far as the stack knows it; None when it knows nothing of it. An SCC OpenShift ships
        is what OpenShift ships (OPENSHIFT_SCCS), whatever the config's existing_* fields say of it (rule shipped-scc
        reports where they disagree); the config's facts describe only SCCs the program does not know."""
        for obj in self.of_kind("SecurityContextConstraints"):
            if (obj.get("metadata") or {}).get("name") == name:
                return _scc_from_object(obj)
        facts = OPENSHIFT_SCCS.get(name)
        if facts is not None:
            return SccView(
                name,
                created=False,
                allowed_capabilities=facts.capabilities,
                allows_privileged=facts.privileged,
                allows_root=facts.allows_root,
                where=f"OpenShift ships {name} so: runAsUser {facts.run_as_user}",
                allows_host_paths=facts.host_paths,
                shipped=True,
            )
        sec = self.config.security
        if name == sec.scc and not sec.create:
            caps = sec.existing_allowed_capabilities
            return SccView(
                name=name,
                created=False,
                allowed_capabilities=None if caps is None else frozenset(caps),
                allows_privileged=sec.existing_allows_privileged,
                allows_root=sec.existing_allows_root,
                where="security.existing_allowed_capabilities / existing_allows_* of the config",
            )
        return None

    def scc_of(self, pod: PodView) -> str:
        """The SCC a pod runs under: the one it pins, else the stack's unprivileged one."""
        return pod.annotations.get(REQUIRED_SCC) or self.config.security.unprivileged_scc


def check(
    config: ClusterConfig,
    objects: Iterable[dict[str, Any]],
    patches: Iterable[dict[str, Any]] = (),
    only: Iterable[str] | None = None,
    previous: dict[str, Any] | None = None,
    others: Iterable[ClusterConfig] | None = None,
    sources: Mapping[ObjectKey, ConfigPath] | None = None,
) -> list[Finding]:
    """Run the rules (all, or the ids in `only`) over a config and the objects it renders. Warnings
    the config accepts carry its reason; an acceptance that matches nothing is itself a warning.
    Findings come sorted (severity, rule, object, field), so their order never depends on the order
    of the config's lists. `others` are the stacks the config is compared with (shared-projects); by
    default the project's other stacks (`project_stacks`), so every caller (`python -m stacks check` and
    `render`, the Pulumi program) compares with the same ones without passing them.

    `sources` (components.program.sources: the provenance `layout()` carries) name the config entry each object is
    rendered from: a finding then speaks the stack file's words (`where`: the config path, `origin`: its file and
    line; the object and its field stay as the secondary detail), and one cause found in several objects (a volume
    three StatefulSets claim from) is one finding listing them (`affects`)."""
    import policy.rules  # noqa: F401  (registers the rules)

    wanted = set(only) if only is not None else None
    unknown = (wanted or set()) - set(RULES)
    if unknown:
        raise KeyError(f"unknown rule ids: {', '.join(sorted(unknown))} (known: {', '.join(RULES)})")
    if others is None:  # loaded only for the rule that reads them
        others = project_stacks(config.name) if wanted is None or "shared-projects" in wanted else []
    stack = Stack(config, list(objects), list(patches), previous, [o for o in others if o.name != config.name])
    findings: list[Finding] = []
    for r in RULES.values():
        if wanted is None or r.id in wanted:
            findings += [replace(f, rule=r.id) for f in r.run(stack)]
    accepted = list(getattr(config, "accepted_warnings", []) or [])
    used: set[int] = set()
    for i, f in enumerate(findings):
        if f.severity != "warning":
            continue
        for k, a in enumerate(accepted):
            if _accepts(a, f):
                findings[i] = replace(f, accepted=a.reason)
                used.add(k)
                break
    if wanted is None:
        unaccepted = [f for f in findings if f.severity == "warning" and not f.accepted]
        findings += [_stale(k, a, unaccepted) for k, a in enumerate(accepted) if k not in used]
    findings = _in_config_terms(findings, config, sources or {})
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: (order[f.severity], f.rule, f.object, f.field, f.message))


def _accepts(a: AcceptedWarning, f: Finding, mind_value: bool = True) -> bool:
    """Whether acceptance `a` accepts warning `f`: its rule, its object (`*` a run of any characters) and, for a warning
    about a value, that very value (an acceptance without one accepts only warnings about none)."""
    return a.rule == f.rule and fnmatch.fnmatchcase(f.object, a.object) and (not mind_value or (a.value or "") == f.value)


def _stale(k: int, a: AcceptedWarning, unaccepted: list[Finding]) -> Finding:
    """The `accepted-warnings` finding of an acceptance that accepts nothing, located at its AcceptedWarning(...) line.
    When a warning of its rule and object remains with another value (a new image tag, a copied module's new
    workload), it says which, so the stack accepts the new value only if the reason holds for it."""
    what = f"warning {a.rule} on {a.object!r}" + (f" for the value {a.value!r}" if a.value else "")
    values = sorted({f.value for f in unaccepted if _accepts(a, f, mind_value=False) and f.value})
    if not values:
        message = f"the stack accepts {what}, but no such warning remains"
        fix = "remove the entry from accepted_warnings"
    elif a.value is None:
        message = (
            f"the stack accepts {what} without naming the value it accepts, and that warning is about one "
            f"({', '.join(map(repr, values))}): it stays unaccepted"
        )
        fix = f"if the reason holds for it, name it: value={values[0]!r} (one entry per value); else fix the warning"
    else:
        message = (
            f"the stack accepts {what}, but the warning is now about {', '.join(map(repr, values))}: the value changed, so the "
            "reason written for the old one may no longer hold"
        )
        fix = f"fix the warning, or, if the reason holds for the new value, write value={values[0]!r} in this entry"
    where = ("accepted_warnings", k)
    return Finding("warning", f"accepted_warnings[{k}]", "rule/object/value", message, fix, rule="accepted-warnings", config=where)


def _in_config_terms(findings: list[Finding], config: ClusterConfig, sources: Mapping[ObjectKey, ConfigPath]) -> list[Finding]:
    """Each finding located in the config (Finding.where, .origin), and the findings of one cause merged into one."""
    by_ref = {(f"{k} {ns}/{n}" if ns else f"{k} {n}") + (" (patch)" if patch else ""): path for (k, ns, n, patch), path in sources.items()}
    out: list[Finding] = []
    merged: dict[tuple[Any, ...], int] = {}
    for f in findings:
        path = f.config
        if path is None and f.object in by_ref:
            path = (*by_ref[f.object], *(f.setting.split(".") if f.setting else ()))
        if path is None:
            out.append(f)
            continue
        # Located by names (`volumes[data]`), not indexes: the findings do not depend on the order of the config's lists.
        f = replace(f, where=located(path, config), origin=provenance.shown(provenance.origin(config, path)), config=None, setting="")
        key = (f.severity, f.rule, f.where, f.message, f.fix, f.accepted)
        if key in merged:
            first = out[merged[key]]
            affects = first.affects or (first.object,)
            if f.object not in affects:
                out[merged[key]] = replace(first, affects=tuple(sorted((*affects, f.object))))
            continue
        merged[key] = len(out)
        out.append(f)
    return out


def project_stacks(exclude: str) -> list[ClusterConfig]:
    """The configs of the project's stacks but `exclude`, each as `pulumi up` deploys it (`stacks.load`: its
    gpu-training:configFile, else its module). A stack that does not load is left out: its own check reports why,
    and one broken stack must not stop the check of another."""
    import stacks  # the package, not only its model: policy/ sits above stacks/, which never imports policy/

    try:
        files = stacks.pulumi_stacks()  # read once: what each cluster's stack files deploy (stacks.config_file_of)
    except stacks.ConfigError:
        files = []
    out = []
    for name in stacks.names():
        deployed = {(s.config_file, s.path.name) for s in files if s.cluster == name}
        if name == exclude or len({f for f, _ in deployed}) > 1:  # stack files that disagree: its own check says so
            continue
        config_file, stack_file = min(deployed, default=(None, ""), key=str)
        try:
            out.append(stacks.load_deployed(name, config_file, stack_file))
        except stacks.ConfigError:
            continue
    return out


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def summary(name: str, findings: list[Finding], accepted_listed: bool = True) -> str:
    """`NAME: ok|FAIL: N errors, N warnings, N accepted, N new, N info (N rules)`; the parts that are 0 left out but the
    errors and warnings. `accepted_listed=False` (`check` without -v) says that -v lists the accepted warnings."""
    n_err = len(errors(findings))
    n_warn = sum(1 for f in findings if f.severity == "warning")
    n_acc = sum(1 for f in findings if f.accepted)
    n_new = sum(1 for f in findings if f.new)
    n_info = sum(1 for f in findings if f.severity == "info")
    verdict = "FAIL" if n_err else "ok"
    accepted = f", {n_acc} accepted" + ("" if accepted_listed else " (-v lists them)") if n_acc else ""
    new = f", {n_new} new" if n_new else ""
    infos = f", {n_info} info" if n_info else ""
    return (
        f"{name}: {verdict}: {n_err} error{'s' * (n_err != 1)}, {n_warn} warning{'s' * (n_warn != 1)}{accepted}{new}{infos} "
        f"({len(RULES)} rules)"
    )
