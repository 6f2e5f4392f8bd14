"""What the rules read and report: findings, the rule registry (`rule`, RULES) and views of the rendered objects (the
pods of StatefulSets, Jobs and Pods; SCCs; the Stack every rule is given). It imports no rule, components/ or pulumi."""

import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, Literal, TypeVar

from config.kube import GPU, INSTANCE, NETWORKS, REQUIRED_SCC, ConfigPath
from config.openshift import OPENSHIFT_SCCS, SccFacts
from config.stack import ClusterConfig
from config.values import kubelet_expand
from config.workloads import BandwidthCheck, Workload

K = TypeVar("K")
V = TypeVar("V")

WIDTH = 160  # the longest line `check` (and `render`'s refusal) prints: a longer finding wraps
INDENT = "    "


@dataclass(frozen=True)
class Finding:
    """What would fail on the cluster (error), what a stack may accept knowingly (warning), or what a reviewer would ask
    and the stack answers (info)."""

    severity: Literal["error", "warning", "info"]
    object: str  # `Kind namespace/name`, or `Kind name` for cluster-scoped objects
    field: str  # where in that object (spec.template.spec.containers[0].resources.limits)
    message: str
    fix: str
    rule: str = ""  # filled in by `check`
    accepted: str | None = None  # the stack's reason, for a warning it accepts (accepted_warnings)
    config: ConfigPath | None = None  # the value's config path, where the rule knows it; else the object's entry (`sources`)
    setting: str = ""  # ... and this field of it
    where: str = ""  # filled in by `check`: the config path as the user writes it (`volumes[workspace].storage_class`)
    origin: str = ""  # filled in by `check`: the file and line that write it (`clusters/nerc.py line 95`)
    affects: tuple[str, ...] = ()  # filled in by `check` when one cause shows in several objects
    value: str = ""  # what a warning is about (an image): an acceptance names it, so it stops accepting when it changes
    new: bool = False  # filled in by `python -m stacks check`: the committed stack's check did not have it
    missing: bool = False  # the value names what does not exist: what else is found of it follows

    def _head(self) -> str:
        severity = f"new {self.severity}" if self.new else self.severity
        if not self.where:
            return f"{severity} {self.rule} {self.object} {self.field}"
        return f"{severity} {self.rule} {self.where}" + (f" ({self.origin})" if self.origin else "")

    def _parts(self) -> list[str]:
        parts = [f"{self._head()}: {self.message}", f"Fix: {self.fix}"] + [f"[accepted: {self.accepted}]"] * bool(self.accepted)
        # The rendered objects, where `object` is a Kubernetes object (not `Stack NAME`, `Workload NAME` or a config entry).
        on_the_cluster = bool(self.where) and not self.object.startswith(("Stack ", "Workload ", "accepted_warnings["))
        return parts + [f"[on the cluster: {', '.join(self.affects or (self.object,))}: {self.field}]"] * on_the_cluster

    def line(self) -> str:
        """The finding on one line: head, message, fix, the stack's reason when accepted, the rendered objects."""
        return " ".join(" ".join(self._parts()).split())  # reasons written in YAML may span lines; a finding never does

    def stated(self, prefix: str = "", width: int = WIDTH) -> list[str]:
        """What is wrong and where, without the fix (a warning `render` passes on), wrapped."""
        return _wrap(f"{prefix}{self._head()}: {self.message}", width)

    def wrapped(self, prefix: str = "", width: int = WIDTH) -> list[str]:
        """line() where it fits `width`; else wrapped, `Fix:`, `[accepted:` and the rendered objects each starting a line."""
        one = prefix + self.line()
        if len(one) <= width:
            return [one]
        head, *rest = self._parts()
        return [line for i, part in enumerate([prefix + head, *rest]) for line in _wrap(part, width, INDENT if i else "")]


def _wrap(text: str, width: int, first: str = "") -> list[str]:
    return textwrap.wrap(" ".join(text.split()), width, initial_indent=first, subsequent_indent=INDENT, break_on_hyphens=False)


# A rule's findings: error("Kind ns/name", "spec.field", message, fix, setting=, config=, value=, missing=).
error = partial(Finding, "error")
warning = partial(Finding, "warning")
info = partial(Finding, "info")


def grouped(pairs: Iterable[tuple[K, V]]) -> dict[K, list[V]]:
    """key -> its values, the keys in the order they first come."""
    out: dict[K, list[V]] = {}
    for k, v in pairs:
        out.setdefault(k, []).append(v)
    return out


def explained(findings: list[Finding]) -> list[Finding]:
    """The findings less what an error of a missing thing (Finding.missing) explains at its field or inside it."""
    causes = {f.where for f in findings if f.missing and f.where}
    return [f for f in findings if f.missing or not any(f.where == c or f.where.startswith((c + ".", c + "[")) for c in causes)]


@dataclass(frozen=True)
class Rule:
    id: str
    summary: str  # what the rule guarantees, and the seed failure it comes from
    run: Callable[["Stack"], Iterable[Finding]]


RULES: dict[str, Rule] = {}


def rule(rule_id: str, summary: str) -> Callable[[Callable[["Stack"], Iterable[Finding]]], Callable[["Stack"], Iterable[Finding]]]:
    def register(fn: Callable[[Stack], Iterable[Finding]]) -> Callable[[Stack], Iterable[Finding]]:
        if rule_id in RULES:
            raise ValueError(f"rule id {rule_id!r} registered twice")
        RULES[rule_id] = Rule(rule_id, summary, fn)
        return fn

    return register


def ref(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns}/{meta.get('name')}" if ns else f"{obj.get('kind')} {meta.get('name')}"


@dataclass(frozen=True)
class PodView:
    """The pod template of a StatefulSet or Job (the program makes no bare Pod)."""

    owner: dict[str, Any]
    replicas: int  # pods at once: StatefulSet replicas (0 when stopped), Job parallelism

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
        return f"spec.template.{path}"

    def at_annotation(self, key: str) -> str:
        return f'spec.template.metadata.annotations["{key}"]'

    @property
    def pod(self) -> dict[str, Any]:
        return (self.owner.get("spec") or {}).get("template") or {}

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
        for key in ("initContainers", "containers"):
            for i, c in enumerate(self.spec.get(key) or []):
                yield self.at(f"spec.{key}[{i}]"), c

    @staticmethod
    def env(container: dict[str, Any]) -> dict[str, str]:
        """The literal environment values as the process gets them, after the kubelet's expansion (`$$`, `$(NAME)`)."""
        out: dict[str, str] = {}
        for e in container.get("env") or []:
            if "value" in e:
                out[e["name"]] = kubelet_expand(str(e["value"]), out)
        return out

    def run_as_user(self, container: dict[str, Any]) -> int | None:
        """The uid the container asks for: its own securityContext wins over the pod's."""
        contexts = (container.get("securityContext") or {}, self.spec.get("securityContext") or {})
        return next((int(ctx["runAsUser"]) for ctx in contexts if ctx.get("runAsUser") is not None), None)

    def network_refs(self) -> list["NetworkRef"]:
        """The networks annotation (`name`, `ns/name`, `name@ifname`, comma-separated); Multus numbers the unnamed net1..."""
        out: list[NetworkRef] = []
        for i, entry in enumerate((p.strip() for p in self.annotations.get(NETWORKS, "").split(",") if p.strip()), start=1):
            entry, _, iface = entry.partition("@")
            ns, _, name = entry.rpartition("/")
            out.append(NetworkRef(ns or self.namespace, name, iface or f"net{i}"))
        return out

    @property
    def instance(self) -> str:
        """The workload the pod belongs to (its app.kubernetes.io/instance label)."""
        return str((self.meta.get("labels") or {}).get(INSTANCE) or self.name)

    def gpus(self) -> int:
        return sum(amount(c.get("resources") or {}, "limits", GPU) for _, c in self.containers())


@dataclass(frozen=True)
class NetworkRef:
    namespace: str
    name: str
    interface: str


def amount(resources: dict[str, Any], kind: str, name: str) -> int:
    """How many of an integer resource (GPUs, VFs) `resources` ask for under `kind` (the program writes whole numbers)."""
    return int((resources.get(kind) or {}).get(name) or 0)


def pod_view(obj: dict[str, Any]) -> PodView | None:
    count = {"StatefulSet": "replicas", "Job": "parallelism"}.get(str(obj.get("kind")))  # a stopped Job is not declared: a Job runs
    return PodView(obj, int((obj.get("spec") or {}).get(count, 1))) if count else None


@dataclass(frozen=True)
class SccView:
    """An SCC's facts and where they come from: the stack's own object, what OpenShift ships, or `security.existing_*`."""

    name: str
    facts: SccFacts
    where: str  # for messages
    created: bool = False
    shipped: bool = False


def pod_entries(config: ClusterConfig) -> Iterator[tuple[ConfigPath, Workload | BandwidthCheck]]:
    """Each workload and bandwidth check (enabled or not) with the config path of its entry."""
    yield from ((("workloads", i), w) for i, w in enumerate(config.workloads))
    yield from ((("bandwidth_checks", i), c) for i, c in enumerate(config.bandwidth_checks))


@dataclass
class Stack:
    config: ClusterConfig
    objects: list[dict[str, Any]]
    patches: list[dict[str, Any]] = field(default_factory=list)  # server-side apply patches of existing objects (partial)
    previous: dict[str, Any] | None = None  # the committed render's outputs.json: what the cluster holds now
    others: list[ClusterConfig] = field(default_factory=list)  # the project's other stacks, for the rules that compare

    @cached_property  # once per check, so a rule's work stays linear in the objects
    def _by_kind(self) -> dict[Any, list[dict[str, Any]]]:
        return grouped((o.get("kind"), o) for o in self.objects)

    @cached_property
    def _pods(self) -> list[PodView]:
        return [p for p in map(pod_view, self.objects) if p is not None]

    @cached_property
    def _specs(self) -> dict[tuple[str, str], tuple[ConfigPath, Workload | BandwidthCheck]]:
        """(namespace, name) -> (the entry the pods are built from: a TCP variant's is its source's, the workload or check);
        the model refuses two of one name."""
        specs: list[tuple[ConfigPath, Workload | BandwidthCheck]] = [*self.config.located_workloads()]
        specs += [(("bandwidth_checks", i), c) for i, c in enumerate(self.config.bandwidth_checks)]
        return {(w.namespace, w.name): (path[:2], w) for path, w in specs}

    @cached_property
    def _owners(self) -> dict[tuple[str, str], str]:
        return {(p.namespace, p.instance): p.ref for p in reversed(self._pods)}  # the first of duplicates

    def spec(self, namespace: str, name: str) -> tuple[ConfigPath | None, Workload | BandwidthCheck | None]:
        return self._specs.get((namespace, name), (None, None))

    def entry_of(self, pod: PodView) -> ConfigPath | None:
        return self.spec(pod.namespace, pod.instance)[0]

    def owner(self, w: Workload | BandwidthCheck) -> str:
        """The object that runs a workload's pods (`StatefulSet team-a/dev`), or `Workload NAME` where none is rendered."""
        return self._owners.get((w.namespace, w.name), f"Workload {w.name}")

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return list(self._by_kind.get(kind, ()))

    def pods(self) -> list[PodView]:
        return list(self._pods)

    def containers(self) -> Iterator[tuple[PodView, str, dict[str, Any]]]:
        """(pod, field path, container) of every container of every pod: the walk the per-container rules share."""
        return ((pod, path, c) for pod in self._pods for path, c in pod.containers())

    def spec_of(self, pod: PodView) -> Workload | BandwidthCheck | None:
        return self.spec(pod.namespace, pod.instance)[1]

    def pods_started(self, pod: PodView) -> int:
        """Pods the object runs when its workload runs: a stopped StatefulSet's too (its object says 0)."""
        spec = self.spec_of(pod)
        return spec.nodes if spec is not None else pod.replicas

    def workload(self, pod: PodView) -> Workload | None:
        spec = self.spec_of(pod)
        return spec if isinstance(spec, Workload) else None

    def scc(self, name: str) -> SccView | None:
        """The SCC as the stack knows it: one OpenShift ships is what it ships, whatever existing_* say (rule shipped-scc)."""
        for obj in self.of_kind("SecurityContextConstraints"):
            if (obj.get("metadata") or {}).get("name") == name:
                return SccView(name, SccFacts.from_object(obj), f"the SCC this stack creates ({ref(obj)})", created=True)
        if (facts := OPENSHIFT_SCCS.get(name)) is not None:
            return SccView(name, facts, f"OpenShift ships {name} so: runAsUser {facts.run_as_user}", shipped=True)
        sec = self.config.security
        if name == sec.scc and not sec.create:
            return SccView(name, sec.existing_facts(), "security.existing_allowed_capabilities / existing_allows_* of the config")
        return None

    def scc_of(self, pod: PodView) -> str:
        return pod.annotations.get(REQUIRED_SCC) or self.config.security.unprivileged_scc
