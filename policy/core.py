"""What the rules read and what they report: findings, the rule registry (`rule`, RULES), and views of the rendered
objects (the pods inside StatefulSets, Jobs and Pods; the SCC a pod runs under; the Stack every rule is given).

The bottom of policy/: the rules (policy/rules/, one module per area) import it and it imports none of them;
policy/run.py imports both and runs the rules (`policy.check`). The policy reads the validated config and the
Kubernetes objects the stack renders, as plain dicts, and, for the rules that compare stacks, the configs of the
project's other stacks. It never imports components/ or pulumi, so the same rules run in `python -m stacks check`
(over the offline rendering) and inside the Pulumi program (over `components.program.objects`); the names both
sides use (annotation keys, the GPU resource) are config/kube.py's.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from config.kube import INSTANCE, NETWORKS, REQUIRED_SCC, ConfigPath
from config.openshift import OPENSHIFT_SCCS
from config.stack import ClusterConfig
from config.values import kubelet_expand
from config.workloads import BandwidthCheck, Workload

Severity = Literal["error", "warning", "info"]

WIDTH = 160
"""The longest line `python -m stacks check` (and `render`'s refusal) prints: a longer finding wraps (Finding.wrapped)."""
INDENT = "    "


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
    brief: str = ""
    """An info's gist in a few words: what `check` prints of it on a green run, where the whole message would be a
    block of lines said on every run (`check -v` prints it whole)."""

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

    def briefly(self, prefix: str = "", width: int = WIDTH) -> list[str]:
        """The finding in brief where it has a brief (`brief`): its head and the gist, wrapped; else `wrapped`."""
        if not self.brief:
            return self.wrapped(prefix, width)
        text = " ".join(f"{prefix}{self._head()}: {self.brief} (-v says why)".split())
        return textwrap.wrap(text, width=width, subsequent_indent=INDENT, break_long_words=True, break_on_hyphens=False)

    def stated(self, prefix: str = "", width: int = WIDTH) -> list[str]:
        """What is wrong and where, without the fix (a warning `render` passes on; `check` gives the fix), wrapped."""
        text = " ".join(f"{prefix}{self._head()}: {self.message}".split())
        return textwrap.wrap(text, width=width, subsequent_indent=INDENT, break_long_words=True, break_on_hyphens=False)

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


def info(obj: str, where: str, message: str, fix: str, setting: str = "", config: ConfigPath | None = None, brief: str = "") -> Finding:
    return Finding("info", obj, where, message, fix, setting=setting, config=config, brief=brief)


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

    def at_annotation(self, key: str) -> str:
        """The field path of one of the pod's annotations (`spec.template.metadata.annotations["KEY"]`)."""
        return self.at("metadata.annotations") + f'["{key}"]'

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


def amount(resources: dict[str, Any], kind: str, name: str) -> int:
    """How many of resource `name` a container's `resources` ask for under `kind` (requests, limits): an integer
    resource (GPUs, SR-IOV VFs); 0 when unset or not a whole number."""
    value = (resources.get(kind) or {}).get(name)
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


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
    seccomp: frozenset[str] | None = None
    """seccompProfiles: the profiles a pod may set; None when any may be (`*`), or when the stack does not know (an
    existing SCC the config describes: no existing_* field says)."""
    user_namespace: bool = False
    """userNamespaceLevel RequirePodLevel: only pods in a user namespace of their own (`hostUsers: false`) are admitted."""

    def allows(self, capability: str) -> bool:
        return self.allowed_capabilities is None or capability in self.allowed_capabilities

    def allows_seccomp(self, profile: str) -> bool:
        """Whether admission lets a container set seccomp `profile` (runtime/default, unconfined, localhost/NAME):
        apiserver-library-go's seccomp strategy admits `*`, a listed profile, and runtime/default where docker/default
        is listed (or the other way round); an SCC listing none admits no profile at all."""
        if self.seccomp is None or "*" in self.seccomp or profile in self.seccomp:
            return True
        defaults = {"runtime/default", "docker/default"}
        return profile in defaults and bool(defaults & self.seccomp)


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
        seccomp=frozenset(obj.get("seccompProfiles") or ()),
        user_namespace=obj.get("userNamespaceLevel") == "RequirePodLevel",
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
                seccomp=facts.seccomp,
                user_namespace=facts.user_namespace,
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
