"""The preflight's security rules against OpenShift's SCC admission: seeded configs, the preflight's verdict, admission's.

`generate(seed, n, bases, validate)` makes `n` configs from the tests' own fixtures (tests/fixtures.py), each with one to
three random edits of the kinds a user makes to a stack's security (EDITS): a memlock strategy (what a container adds,
whether it runs as root, a privileged container with its reason), the cluster default, a transport switch, the SCC the
stack claims (its own, one OpenShift ships, or one that exists with `security.existing_*` facts), what that SCC allows
(capabilities, root), the unprivileged SCC, the grant, a service account, a volume (a shared or per-pod claim, an
existing one, one of an NFS class, a ConfigMap of scripts), a service account token (a projected volume), a bandwidth
check. A config the model refuses is not a case: the generator draws again (deterministically) until it has `n`.
(One file past 800 lines: the edits, the run on one control plane and the verdicts are one harness, read together.)

What the config cannot say is not an edit of it (docs/live.md "The security rules against SCC admission"): a pod's fsGroup,
supplemental groups, SELinux options, hostPath or in-line NFS volumes, allowPrivilegeEscalation and seccomp profile
(the program renders them from the memlock strategy). Some edits change the cluster instead (CLUSTER_EDITS): what a
service account may use besides (anyuid, granted by hand), a grant to a group, and of an existing SCC the facts no
`existing_*` field states (its fsGroup and supplemental groups, SELinux, seccomp profiles, privilege escalation, volume
types, its use-role). They are there to show what admission does with them; a disagreement they explain is a
documented limit (`limit`).

`preflight(...)` is `policy.check` on the offline render (components.program.objects: what `python -m stacks render`
writes, both tiers). The cluster's side: every case in namespaces of its own on one control plane with OpenShift's SCC
admission (live/scc.py), its SCC, use-role, RoleBindings and ServiceAccounts applied, then the pod each StatefulSet's
or Job's controller would make asked of admission as that controller (a server-side dry run), all cases at once.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from config.kube import REQUIRED_SCC, SCC_USE_ROLE_PREFIX
from config.values import STRATEGY_CAPABILITIES
from live import scc
from live.differential import Api

Data = dict[str, Any]

REASON = "a generated case: the stack says why"
OWN_SCC = "site-rdma"
"""The name of an SCC that exists on the cluster, made by its admin (not shipped, not the stack's)."""
STRATEGIES = ("node-limit", "root-ipc-lock", "root-sys-resource", "privileged", "none")
CAPABILITY_SETS: tuple[list[str] | None, ...] = (None, [], ["IPC_LOCK"], ["IPC_LOCK", "SYS_RESOURCE"], ["SYS_RESOURCE"], ["NET_RAW"])
SAFE = "security.openshift.io"
# restricted-v2's volume types (its manifest): what an admin's copy of it allows.
RESTRICTED_VOLUMES = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"]


@dataclass
class Cluster:
    """What the cluster has beyond what the config says (a cluster edit)."""

    grants: list[tuple[str, str, str, str]] = field(default_factory=list)
    """Grants made by hand: (SCC, subject kind ServiceAccount or Group, namespace of the RoleBinding, subject name)."""
    scc: dict[str, Any] = field(default_factory=dict)
    """Fields of the existing SCC (security.scc, create false, not shipped) the config does not state."""
    no_use_role: bool = False
    """The existing SCC's use-role (system:openshift:scc:NAME) is not on the cluster."""


@dataclass
class Case:
    index: int
    seed: int
    base: str
    edits: list[tuple[str, str]]
    """(edit class, what it did), in the order applied."""
    data: Data
    cluster: Cluster

    @property
    def tag(self) -> str:
        return f"s{self.index:03d}"

    @property
    def classes(self) -> list[str]:
        return sorted({k for k, _ in self.edits})

    @property
    def cluster_edits(self) -> list[tuple[str, str]]:
        return [(k, d) for k, d in self.edits if k in CLUSTER_EDITS]

    def summary(self) -> str:
        sec = self.data.get("security") or {}
        own = sec.get("scc")
        if own and not sec.get("create"):
            facts = {k.removeprefix("existing_"): v for k, v in sec.items() if k.startswith("existing_")}
            own = f"{own} (existing{', ' + str(facts) if facts else ''})"
        elif own:
            own = f"{own} (created)"
        specs = ", ".join(
            f"{s['name']}: {s.get('transport')} memlock {s.get('memlock') or 'default'} sa {s['service_account']}"
            + (" token" if s.get("service_account_token") else "")
            + ("" if s.get("state", "running") == "running" and s.get("enabled", True) else " (off)")
            for s in _specs(self.data)
        )
        defaults = self.data.get("defaults") or {}
        memlock = f"rdma {defaults.get('memlock_rdma', 'root-ipc-lock')}, tcp {defaults.get('memlock_tcp', 'none')}"
        edits = "; ".join(d for _, d in self.edits)
        return (
            f"{self.base} seed {self.seed} [{edits}] scc {own or 'none'}, unprivileged {sec.get('unprivileged_scc', 'restricted-v2')}, "
            f"grant {sec.get('grant', True)}, memlock defaults {{{memlock}}} pods {{{specs}}}"
        )


# --- the edits ---------------------------------------------------------------------------------------

Edit = Callable[[random.Random, Data, Cluster], "str | list[tuple[str, str]] | None"]
"""Changes the data (or the cluster) in place and says what it did (or, where it made another edit first, each edit
with its class); None where it does not apply to this config."""


def _specs(d: Data) -> list[Data]:
    """Every pod-running entry: workloads and bandwidth checks."""
    return list(d.get("workloads", [])) + list(d.get("bandwidth_checks", []))


def _strategy(d: Data, s: Data) -> str:
    defaults = d.get("defaults") or {}
    if s.get("memlock"):
        return str(s["memlock"])
    return str(defaults.get("memlock_rdma", "root-ipc-lock") if s.get("transport") == "rdma" else defaults.get("memlock_tcp", "none"))


def _needs_scc(d: Data) -> str:
    """A stack whose pods now need an SCC of their own and name none gets one it creates (as the model asks); what it
    did, or ''."""
    sec = d.setdefault("security", {})
    if sec.get("scc") or not any(_strategy(d, s) in ("root-ipc-lock", "root-sys-resource", "privileged") for s in _specs(d)):
        return ""
    sec.update(scc="gpu-own", create=True)
    return " (and security.scc gpu-own, created)"


def _reasons(d: Data) -> None:
    """Every privileged pod says why (the model asks for it; a missing reason is refused, not a case)."""
    for s in _specs(d):
        if _strategy(d, s) == "privileged":
            s.setdefault("privileged_reason", REASON)


def memlock(rng: random.Random, d: Data, c: Cluster) -> str | None:
    s = rng.choice(_specs(d))
    s["memlock"] = rng.choice(STRATEGIES)
    _reasons(d)
    return f"{s['name']} memlock {s['memlock']}" + _needs_scc(d)


def memlock_default(rng: random.Random, d: Data, c: Cluster) -> str | None:
    key = rng.choice(["memlock_rdma", "memlock_tcp"])
    d.setdefault("defaults", {})[key] = value = rng.choice(STRATEGIES)
    _reasons(d)
    return f"defaults.{key} {value}" + _needs_scc(d)


def privileged(rng: random.Random, d: Data, c: Cluster) -> str | None:
    s = rng.choice(_specs(d))
    s.update(memlock="privileged", privileged_reason=REASON)
    return f"{s['name']} memlock privileged with a reason" + _needs_scc(d)


def transport(rng: random.Random, d: Data, c: Cluster) -> str | None:
    if not d.get("fabric"):
        return None
    w = rng.choice(d["workloads"])
    w["transport"] = "tcp" if w.get("transport") == "rdma" else "rdma"
    if w["transport"] == "tcp":
        w.pop("tcp_variants", None)
    _reasons(d)
    return f"{w['name']} {w['transport']}" + _needs_scc(d)


def _existing(rng: random.Random, d: Data) -> str:
    """The stack claims an SCC of its admin's (OWN_SCC), which exists, described by security.existing_* facts drawn."""
    sec = d.setdefault("security", {})
    if sec.get("scc") == OWN_SCC:
        return ""
    for k in [k for k in sec if k.startswith("existing_") or k == "broad_grant_reason"]:
        del sec[k]
    if rng.random() < 0.5:  # the admin made it for these pods: what their strategies need (more where drawn)
        strategies = {_strategy(d, s) for s in _specs(d)}
        needed = sorted({c for st in strategies for c in STRATEGY_CAPABILITIES[st]})
        caps = None if rng.random() < 0.2 else needed + (["NET_RAW"] if rng.random() < 0.3 else [])
        root = bool(strategies & {"root-ipc-lock", "root-sys-resource"}) or rng.random() < 0.5
        sec.update(scc=OWN_SCC, create=False, existing_allowed_capabilities=caps, existing_allows_root=root)
        if "privileged" in strategies:
            sec.update(existing_allows_privileged=True, broad_grant_reason=REASON)
    else:
        caps = rng.choice(CAPABILITY_SETS)
        sec.update(scc=OWN_SCC, create=False, existing_allowed_capabilities=caps, existing_allows_root=rng.random() < 0.7)
        if rng.random() < 0.3:
            sec.update(existing_allows_privileged=True, broad_grant_reason=REASON)
    said = f"existing SCC {OWN_SCC} (capabilities {'any' if caps is None else caps}, root {sec['existing_allows_root']}"
    return said + (", privileged)" if sec.get("existing_allows_privileged") else ")")


def existing_scc(rng: random.Random, d: Data, c: Cluster) -> str | None:
    return _existing(rng, d) or None


def _after_existing(rng: random.Random, d: Data, kind: str, edit: Callable[[], str]) -> list[tuple[str, str]]:
    """An edit of the existing SCC (security.scc OWN_SCC): made to exist first (an existing-scc edit) where it is not."""
    said = _existing(rng, d)
    return ([("existing-scc", said)] if said else []) + [(kind, edit())]


def capabilities(rng: random.Random, d: Data, c: Cluster) -> list[tuple[str, str]]:
    """What the existing SCC allows a container to add (the config's fact, and the cluster's)."""

    def edit() -> str:
        caps = rng.choice(CAPABILITY_SETS)
        d["security"]["existing_allowed_capabilities"] = caps
        return f"existing_allowed_capabilities {'any' if caps is None else caps}"

    return _after_existing(rng, d, "capabilities", edit)


def run_as_user(rng: random.Random, d: Data, c: Cluster) -> str | list[tuple[str, str]]:
    """Root or not: the existing SCC admits uid 0 or not, or a pod switches between a root strategy and a non-root one."""
    if rng.random() < 0.5:

        def edit() -> str:
            sec = d["security"]
            sec["existing_allows_root"] = not sec.get("existing_allows_root", True)
            return f"existing_allows_root {sec['existing_allows_root']}"

        return _after_existing(rng, d, "run-as-user", edit)
    s = rng.choice(_specs(d))
    root = _strategy(d, s) in ("root-ipc-lock", "root-sys-resource")
    s["memlock"] = rng.choice(["node-limit", "none"]) if root else rng.choice(["root-ipc-lock", "root-sys-resource"])
    return f"{s['name']} memlock {s['memlock']} ({'non-root' if root else 'root'})" + _needs_scc(d)


def shipped_scc(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """The stack names an SCC OpenShift ships (reference, never create), with the reason a broad one needs."""
    sec = d.setdefault("security", {})
    name = rng.choice(sorted(scc.shipped_sccs()))
    manifest = scc.shipped_sccs()[name]
    keep = rng.random() < 0.2  # a stale claim about the SCC left in the file (the shipped-scc rule warns)
    for k in [k for k in sec if (k.startswith("existing_") and not keep) or k == "broad_grant_reason"]:
        del sec[k]
    sec.update(scc=name, create=False)
    if manifest.get("allowPrivilegedContainer") or manifest.get("allowHostDirVolumePlugin"):
        sec["broad_grant_reason"] = REASON
    return f"security.scc {name} (shipped)" + (", existing_* facts kept" if keep and any(k.startswith("existing_") for k in sec) else "")


def unprivileged_scc(rng: random.Random, d: Data, c: Cluster) -> str | None:
    sec = d.setdefault("security", {})
    names = sorted(scc.shipped_sccs()) + ([sec["scc"]] if sec.get("scc") else [])
    sec["unprivileged_scc"] = name = rng.choice(names)
    return f"unprivileged_scc {name}"


def grant(rng: random.Random, d: Data, c: Cluster) -> str | None:
    sec = d.setdefault("security", {})
    sec["grant"] = not sec.get("grant", True)
    return f"grant {sec['grant']}"


def service_account(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """A pod-running entry moves to another service account of its namespace (a new one, listed)."""
    s = rng.choice(_specs(d))
    accounts = d["security"]["service_accounts"]
    name = rng.choice(["runner-b", "trainer-b"])
    if {"name": name, "namespace": s["namespace"]} not in accounts:
        accounts.append({"name": name, "namespace": s["namespace"]})
    s["service_account"] = name
    return f"{s['name']} service account {name}"


def volume(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """A workload mounts one more thing: a claim (shared, per-pod, existing, of an NFS class) or a ConfigMap of scripts."""
    w = rng.choice(d["workloads"])
    ns, n = w["namespace"], len(d.get("volumes", [])) + len(d.get("scripts", []))
    kind = rng.choice(["shared", "per-pod", "existing", "nfs", "config-map"])
    if kind == "config-map":
        d.setdefault("scripts", []).append({"name": f"scripts{n}", "namespace": ns, "files": {"run.sh": "echo hi\n"}})
        w.setdefault("scripts", []).append({"config_map": f"scripts{n}", "mount_path": f"/scripts{n}"})
        return f"{w['name']} mounts ConfigMap scripts{n}"
    classes = d.setdefault("storage_classes", [])
    name = {"shared": "cephfs", "per-pod": "ceph-rbd", "nfs": "nfs-csi"}.get(kind)
    if name and not any(s["name"] == name for s in classes):
        modes = ["ReadWriteOnce"] if kind == "per-pod" else ["ReadWriteMany", "ReadWriteOnce"]
        classes.append({"name": name, "access_modes": modes})
    vol: Data = {"name": f"data{n}", "namespace": ns, "mount_path": f"/data{n}"}
    if kind == "existing":
        vol.update(existing=True)
    else:
        vol.update(size="10Gi", storage_class=name, shared=kind != "per-pod")
    d.setdefault("volumes", []).append(vol)
    w.setdefault("mounts", []).append({"volume": vol["name"]})
    return f"{w['name']} mounts a {kind} claim data{n}"


def token(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """A workload mounts its service account's API token (a projected volume the API server adds)."""
    w = rng.choice(d["workloads"])
    w["service_account_token"] = True
    return f"{w['name']} service_account_token (a projected volume)"


def check(rng: random.Random, d: Data, c: Cluster) -> str | None:
    checks = d.setdefault("bandwidth_checks", [])
    if not checks or rng.random() < 0.3:
        w = rng.choice(d["workloads"])
        checks.append({
            "name": f"bw{len(checks)}", "namespace": w["namespace"], "service_account": w["service_account"], "image": w["image"],
            "gpus_per_node": 1, "nodes": 1, "transport": w.get("transport", "tcp"), "tool": "torch",
        })  # fmt: skip
        if rng.random() < 0.5:
            checks[-1]["memlock"] = rng.choice(STRATEGIES)
        _reasons(d)
        return f"check {checks[-1]['name']} added ({checks[-1]['transport']}, memlock {_strategy(d, checks[-1])})" + _needs_scc(d)
    bw = rng.choice(checks)
    bw["enabled"] = not bw.get("enabled", True)
    return f"check {bw['name']} {'enabled' if bw['enabled'] else 'disabled'}"


# --- cluster edits: what the config does not state -----------------------------------------------------------------


def also_scc(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """A pod's service account may also use another SCC, granted by hand (`oc adm policy add-scc-to-user anyuid -z SA`)."""
    s = rng.choice(_specs(d))
    other = rng.choice(["anyuid", "anyuid", "privileged", "nonroot-v2", "hostmount-anyuid", "hostnetwork-v2"])
    c.grants.append((other, "ServiceAccount", s["namespace"], s["service_account"]))
    return f"{s['namespace']}/{s['service_account']} may also use {other} (granted by hand)"


def group_grant(rng: random.Random, d: Data, c: Cluster) -> str | None:
    """The SCC a pod runs under granted by hand to every service account of its namespace (a Group)."""
    s = rng.choice(_specs(d))
    sec = d.get("security") or {}
    name = sec.get("scc") if sec.get("scc") and _strategy(d, s) in ("root-ipc-lock", "root-sys-resource", "privileged") else None
    name = name or sec.get("unprivileged_scc", "restricted-v2")
    c.grants.append((name, "Group", s["namespace"], f"system:serviceaccounts:{s['namespace']}"))
    return f"{name} granted by hand to the group system:serviceaccounts:{s['namespace']}"


def _unstated(kind: str, field_name: str, choices: list[Any]) -> Edit:
    """A field of the existing SCC that no security.existing_* states, as the cluster has it (None: left out)."""

    def edit(rng: random.Random, d: Data, c: Cluster) -> list[tuple[str, str]]:
        def unstated() -> str:
            value = rng.choice(choices)
            c.scc[field_name] = value
            return f"on the cluster {OWN_SCC} has {field_name} {value if value is not None else '(unset)'}"

        return _after_existing(rng, d, kind, unstated)

    edit.__name__ = field_name
    return edit


def no_use_role(rng: random.Random, d: Data, c: Cluster) -> list[tuple[str, str]]:
    def edit() -> str:
        c.no_use_role = True
        return f"no ClusterRole {SCC_USE_ROLE_PREFIX}{OWN_SCC} on the cluster"

    return _after_existing(rng, d, "use-role", edit)


FS_GROUPS = [{"type": "MustRunAs"}, {"type": "MustRunAs", "ranges": [{"min": 1000, "max": 65534}]}, {"type": "RunAsAny"}]
SELINUX = [
    {"type": "MustRunAs"},
    {"type": "MustRunAs", "seLinuxOptions": {"level": "s0:c5,c10"}},
    {"type": "MustRunAs", "seLinuxOptions": {"type": "spc_t"}},
    {"type": "RunAsAny"},
]

# The edit classes, with how often each is drawn.
EDITS: dict[str, tuple[Edit, int]] = {
    "memlock": (memlock, 4),
    "memlock-default": (memlock_default, 2),
    "privileged": (privileged, 2),
    "transport": (transport, 2),
    "capabilities": (capabilities, 3),
    "run-as-user": (run_as_user, 3),
    "existing-scc": (existing_scc, 3),
    "shipped-scc": (shipped_scc, 4),
    "unprivileged-scc": (unprivileged_scc, 3),
    "grant": (grant, 2),
    "service-account": (service_account, 2),
    "volume": (volume, 3),
    "token": (token, 2),
    "check": (check, 2),
    # the cluster, not the config:
    "also-scc": (also_scc, 2),
    "group-grant": (group_grant, 2),
    "fsgroup": (_unstated("fsgroup", "fsGroup", FS_GROUPS), 1),
    "supplemental-groups": (_unstated("supplemental-groups", "supplementalGroups", FS_GROUPS), 1),
    "selinux": (_unstated("selinux", "seLinuxContext", SELINUX), 1),
    "seccomp": (_unstated("seccomp", "seccompProfiles", [["*"], ["runtime/default"], [], None]), 1),
    "escalation": (_unstated("escalation", "allowPrivilegeEscalation", [True, False]), 1),
    "volume-types": (
        _unstated(
            "volume-types",
            "volumes",
            [
                ["*"],
                RESTRICTED_VOLUMES,
                [v for v in RESTRICTED_VOLUMES if v != "projected"],
                [v for v in RESTRICTED_VOLUMES if v != "persistentVolumeClaim"],
                ["configMap", "emptyDir", "hostPath", "secret"],
            ],
        ),
        1,
    ),  # fmt: skip
    "read-only-root": (_unstated("read-only-root", "readOnlyRootFilesystem", [True, False]), 1),
    "use-role": (no_use_role, 1),
}
CLUSTER_EDITS = (
    "also-scc", "group-grant", "fsgroup", "supplemental-groups", "selinux", "seccomp", "escalation", "volume-types",
    "read-only-root", "use-role",
)  # fmt: skip


def generate_one(case_seed: int, bases: Mapping[str, Callable[[], Data]], index: int = 0) -> Case:
    """The config one seed draws: a base fixture and one to three edits (not yet validated)."""
    rng = random.Random(case_seed)
    names = sorted(bases)
    classes = sorted(EDITS)
    weights = [EDITS[k][1] for k in classes]
    base = names[rng.randrange(len(names))]
    data, cluster, edits = bases[base](), Cluster(), []
    for _ in range(rng.randint(1, 3)):
        for _attempt in range(10):  # a class that does not apply to this config draws another
            kind = rng.choices(classes, weights)[0]
            said = EDITS[kind][0](rng, data, cluster)
            if said is not None:
                edits += [(kind, said)] if isinstance(said, str) else said
                break
    return Case(index, case_seed, base, edits, data, cluster)


def generate(seed: int, n: int, bases: Mapping[str, Callable[[], Data]], validate: Callable[[Data], Any]) -> tuple[list[Case], int]:
    """`n` cases, the same for the same seed; and how many drawn configs the model refused (not cases)."""
    cases: list[Case] = []
    refused = 0
    draw = 0
    while len(cases) < n:
        case = generate_one(seed * 100_000 + draw, bases, len(cases))
        draw += 1
        try:
            validate(case.data)
        except Exception:  # noqa: BLE001  (the model's refusal, whatever its class: not a case)
            refused += 1
            continue
        cases.append(case)
    return cases, refused


# --- the preflight's side ------------------------------------------------------------------------------------------

# The rules of policy/rules/security.py that judge something other than admission: how a container is hardened (the
# program renders it), the NetworkPolicy, a grant broader than the pods need without its reason (admission admits what
# the SCC allows); and memlock-strategy's findings on the strategy itself (an RDMA pod with `none` cannot pin memory:
# admission admits it all the same).
NOT_ADMISSION = frozenset({"least-privilege", "network-policy", "privileged-scc"})
STRATEGY_FIELD = "env[LAUNCHER_MEMLOCK_STRATEGY]"


def admission_error(f: Any) -> bool:
    """Whether a finding of `check` says admission refuses a pod (or the stack's SCC setup): an error of the security
    rules, but for the ones that say something else (NOT_ADMISSION, the strategy's own findings)."""
    from policy.core import RULES

    rule = RULES.get(f.rule)
    if f.severity != "error" or rule is None or rule.run.__module__ != "policy.rules.security" or f.rule in NOT_ADMISSION:
        return False
    return not (f.rule == "memlock-strategy" and f.field.endswith(STRATEGY_FIELD))


@dataclass
class Template:
    """One pod template of a case (a StatefulSet's or Job's, running or stopped), as the config names it and as the case
    applies it, with what each side says of it."""

    ref: str
    """`Kind namespace/name` as rendered (the findings' object)."""
    obj: dict[str, Any]
    """The object as applied to the case's namespaces."""
    predicted: str
    """The SCC the stack's outputs name for its pods (`scc`), in the case's names."""
    refused_by_check: list[str] = field(default_factory=list)
    """The messages of the admission errors `check` finds on it."""
    admitted: bool | None = None
    scc: str | None = None
    said: str = ""
    """Admission's own message, when it refused the pod."""
    read_only: bool = False
    """Admitted, with a container admission made read-only at its root (an SCC's readOnlyRootFilesystem: it mutates a
    container that sets nothing, rather than refusing it): the launcher writes its files under /tmp there."""

    @property
    def agree(self) -> bool:
        if self.admitted is None:
            return False
        if self.admitted != (not self.refused_by_check):
            return False
        return not self.admitted or self.scc == self.predicted


@dataclass
class Verdict:
    case: Case
    templates: list[Template]
    errors: list[str]
    """Every admission error `check` found, `rule: object: message` (some are not on a pod template)."""
    others: list[str]
    """The other rules whose errors the config has (they would stop `render`/`up` too)."""
    warned: list[str] = field(default_factory=list)
    """The security rules' warnings that say admission may refuse (scc-grant: a use-role the stack does not make)."""

    @property
    def check_accepts(self) -> bool:
        return not self.errors

    @property
    def decided(self) -> bool:
        return all(t.admitted is not None for t in self.templates)

    @property
    def admission_admits(self) -> bool:
        return all(t.admitted for t in self.templates)

    @property
    def agree(self) -> bool:
        return self.decided and self.check_accepts == self.admission_admits and all(t.agree for t in self.templates)

    def line(self) -> str:
        check_said = (
            "accepts" if self.check_accepts else "refuses: " + " | ".join(self.errors[:3]) + (" ..." if len(self.errors) > 3 else "")
        )
        others = f" (other errors: {', '.join(self.others)})" if self.others else ""
        pods = "\n".join(
            f"      {t.ref}: check {'refuses' if t.refused_by_check else 'accepts'}, predicts {t.predicted}; admission "
            + ("(undecided)" if t.admitted is None else f"admits under {t.scc}" if t.admitted else f"refuses: {t.said}")
            for t in self.templates
        )
        return f"case {self.case.tag} {self.case.summary()}\n    check: {check_said}{others}\n    admission, per pod template:\n{pods}"


def preflight(case: Case, config: Any, objects: list[dict[str, Any]], patches: list[dict[str, Any]]) -> Verdict:
    """`policy.check` on the offline render: its admission errors, per pod template and in all."""
    import policy
    from components.outputs import stack_outputs

    findings = policy.check(config, objects, patches, others=[])
    outputs = stack_outputs(config)
    predicted = {("StatefulSet" if w["kind"] == "statefulset" else "Job", w["namespace"], w["object"]): w["scc"]
                 for w in outputs["workloads"].values()}  # fmt: skip
    predicted |= {("Job", c["namespace"], c["job"]): c["scc"] for c in outputs["bandwidth_checks"].values()}
    mine = [f for f in findings if admission_error(f)]
    templates = []
    for o in objects:
        if o["kind"] not in ("StatefulSet", "Job"):
            continue
        meta = o["metadata"]
        ref = f"{o['kind']} {meta['namespace']}/{meta['name']}"
        on_it = [f.message for f in mine if ref in (f.affects or (f.object,))]
        templates.append(Template(ref, o, predicted[(o["kind"], meta["namespace"], meta["name"])], on_it))
    warned = [f"{f.rule}: {f.message}" for f in findings if f.severity == "warning" and f.rule == "scc-grant"]
    others = sorted({f.rule for f in findings if f.severity == "error" and not admission_error(f)})
    return Verdict(case, templates, [f"{f.rule}: {f.object}: {f.message}" for f in mine], others, warned)


# --- the cluster's side --------------------------------------------------------------------------------------------


class Names:
    """The case's names on the shared control plane: its namespaces `TAG-NS`; an SCC that is the stack's or its admin's
    (not shipped) `TAG-NAME`, with its use-role; what OpenShift ships keeps its name (one copy serves every case)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def ns(self, namespace: str) -> str:
        return f"{self.tag}-{namespace}"

    def scc(self, name: str) -> str:
        return name if name in scc.shipped_sccs() else f"{self.tag}-{name}"

    def role(self, role: str) -> str:
        return SCC_USE_ROLE_PREFIX + self.scc(role.removeprefix(SCC_USE_ROLE_PREFIX)) if role.startswith(SCC_USE_ROLE_PREFIX) else role


def case_objects(case: Case, config: Any, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the case applies, in its own names: the rendered SCC, use-role, RoleBindings and ServiceAccounts (both tiers),
    the existing SCC and its use-role as the cluster has them (from the config's facts and the case's cluster edits),
    the grants made by hand, and its StatefulSets and Jobs (whose pods are only asked of admission)."""
    n = Names(case.tag)
    out = []
    for o in objects:
        kind = o["kind"]
        if kind not in ("SecurityContextConstraints", "ClusterRole", "RoleBinding", "ServiceAccount", "StatefulSet", "Job"):
            continue
        if kind == "ClusterRole" and not o["metadata"]["name"].startswith(SCC_USE_ROLE_PREFIX):
            continue
        o = copy.deepcopy(o)
        meta = o["metadata"]
        meta.pop("annotations", None) if kind in ("RoleBinding", "ServiceAccount") else None
        if meta.get("namespace"):
            meta["namespace"] = n.ns(meta["namespace"])
        if kind == "SecurityContextConstraints":
            meta["name"] = n.scc(meta["name"])
        elif kind == "ClusterRole":
            meta["name"] = n.role(meta["name"])
            for r in o["rules"]:
                r["resourceNames"] = [n.scc(x) for x in r.get("resourceNames", [])]
        elif kind == "RoleBinding":
            meta["name"] = n.role(meta["name"])
            o["roleRef"]["name"] = n.role(o["roleRef"]["name"])
            for s in o["subjects"]:
                if s.get("namespace"):
                    s["namespace"] = n.ns(s["namespace"])
        elif kind in ("StatefulSet", "Job"):
            annotations = o["spec"]["template"]["metadata"].setdefault("annotations", {})
            if REQUIRED_SCC in annotations:
                annotations[REQUIRED_SCC] = n.scc(annotations[REQUIRED_SCC])
        out.append(o)
    sec = config.security
    if sec.scc and not sec.create and sec.scc not in scc.shipped_sccs():
        out.append(existing_scc_object(config, case.cluster, n.scc(sec.scc)))
        if not case.cluster.no_use_role:
            out.append(use_role_object(n.scc(sec.scc)))
    for i, (name, kind, namespace, who) in enumerate(case.cluster.grants):
        subject = {"kind": "ServiceAccount", "name": who, "namespace": n.ns(namespace)} if kind == "ServiceAccount" else \
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": f"system:serviceaccounts:{n.ns(namespace)}"}  # fmt: skip
        out.append({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"by-hand-{i}", "namespace": n.ns(namespace)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SCC_USE_ROLE_PREFIX + n.scc(name)},
            "subjects": [subject],
        })  # fmt: skip
    return out


def use_role_object(name: str) -> dict[str, Any]:
    """What `oc adm policy add-scc-to-user NAME` makes once: the SCC's use-role."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": SCC_USE_ROLE_PREFIX + name},
        "rules": [{"apiGroups": [SAFE], "resources": ["securitycontextconstraints"], "resourceNames": [name], "verbs": ["use"]}],
    }  # fmt: skip


def existing_scc_object(config: Any, cluster: Cluster, name: str) -> dict[str, Any]:
    """The SCC the config says exists (security.existing_*), as its admin made it: what the facts state, and for what
    they do not state, an admin's copy of restricted-v2 loosened as the facts say (any seccomp profile, escalation
    allowed, restricted-v2's volume types, fsGroup, supplemental groups and SELinux from the namespace), unless a
    cluster edit says otherwise (Cluster.scc)."""
    sec = config.security
    caps = sec.existing_allowed_capabilities
    obj: dict[str, Any] = {
        "apiVersion": f"{SAFE}/v1", "kind": "SecurityContextConstraints", "metadata": {"name": name},
        "allowHostDirVolumePlugin": False, "allowHostIPC": False, "allowHostNetwork": False, "allowHostPID": False,
        "allowHostPorts": False, "allowPrivilegeEscalation": True, "allowPrivilegedContainer": sec.existing_allows_privileged,
        "allowedCapabilities": ["*"] if caps is None else list(caps), "defaultAddCapabilities": None,
        "fsGroup": {"type": "MustRunAs"}, "groups": [], "priority": None, "readOnlyRootFilesystem": False,
        "requiredDropCapabilities": None,
        "runAsUser": {"type": "RunAsAny" if sec.existing_allows_root else "MustRunAsRange"},
        "seLinuxContext": {"type": "MustRunAs"}, "seccompProfiles": ["*"], "supplementalGroups": {"type": "RunAsAny"},
        "users": [], "volumes": list(RESTRICTED_VOLUMES),
    }  # fmt: skip
    for k, v in cluster.scc.items():
        if v is None:
            obj.pop(k, None)
        else:
            obj[k] = copy.deepcopy(v)
    return obj


# --- one run: every case at once on one control plane with SCC admission ------------------------------------------

SYNC = "zz-sync"
"""The sentinel: an SCC, its use-role, a namespace and a grant made after every case's, so that once admission admits a
pod pinned to it, its informers (SCCs, namespaces) and the API server's RBAC have seen every case's objects too."""


def _sync_objects() -> list[dict[str, Any]]:
    restricted = copy.deepcopy(scc.shipped_sccs()["restricted-v2"])
    restricted["metadata"] = {"name": SYNC}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": SYNC, "namespace": SYNC},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SCC_USE_ROLE_PREFIX + SYNC},
        "subjects": [{"kind": "ServiceAccount", "name": SYNC, "namespace": SYNC}],
    }  # fmt: skip
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SYNC, "namespace": SYNC}}
    return [restricted, use_role_object(SYNC), account, binding]


def _sync_pod() -> dict[str, Any]:
    container = {"name": "c", "image": "registry.example/sync:1", "securityContext": {"capabilities": {"drop": ["ALL"]}}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": SYNC, "namespace": SYNC, "annotations": {REQUIRED_SCC: SYNC}},
        "spec": {"serviceAccountName": SYNC, "automountServiceAccountToken": False, "containers": [container]},
    }  # fmt: skip


def _allocated(api: Api, namespaces: set[str], timeout: float = 60) -> None:
    """Until the allocator has annotated every one of `namespaces` (one list per look)."""
    deadline = time.monotonic() + timeout
    while True:
        missing = {
            ns["metadata"]["name"]
            for ns in api.items("/api/v1/namespaces")
            if scc.UID_RANGE not in (ns["metadata"].get("annotations") or {})
        } & namespaces
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(missing)} namespaces have no {scc.UID_RANGE} after {timeout:.0f} s: {sorted(missing)[:5]}")
        time.sleep(0.2)


def _review(api: Api, pod: dict[str, Any]) -> scc.Verdict:
    path, body = scc.dry_run(pod)
    status, answer = api.call("POST", path, body)
    return scc.Verdict(status, answer)


def run(
    plane: Any, cases: list[Case], validate: Callable[[Data], Any], threads: int = 6, log: Callable[[str], None] = print
) -> list[Verdict]:
    """Every case on `plane` (with SCC admission started: live/scc.py Admission) at once: the preflight of each; its
    namespaces made and allocated, its SCCs, roles, grants and service accounts applied; then every pod template's pod
    asked of admission, as the controller that would create it, `threads` requests at a time."""
    from components.program import objects, patches

    started = time.monotonic()

    def said(what: str) -> None:
        log(f"scc differential: {time.monotonic() - started:5.1f} s {what}")

    configs = [validate(c.data) for c in cases]
    rendered = [objects(config) for config in configs]
    verdicts = [preflight(c, config, objs, patches(config)) for c, config, objs in zip(cases, configs, rendered, strict=True)]
    said(f"the preflight has judged {len(cases)} cases")
    applied = [case_objects(c, config, objs) for c, config, objs in zip(cases, configs, rendered, strict=True)]
    everything = [o for objs in applied for o in objs]
    namespaces = {o["metadata"]["namespace"] for o in everything if o["metadata"].get("namespace")}
    admin = Api(plane.port, plane.token)
    sync = _sync_objects()
    with ThreadPoolExecutor(threads) as pool:
        cluster_wide = [o for o in everything if o["kind"] in ("SecurityContextConstraints", "ClusterRole")]
        ns_objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in sorted(namespaces)]
        list(pool.map(admin.create, cluster_wide + ns_objects))
        _allocated(admin, namespaces)
        said(f"{len(cluster_wide)} SCCs and roles made, {len(namespaces)} namespaces made and allocated")
        list(pool.map(admin.create, [o for o in everything if o["kind"] in ("ServiceAccount", "RoleBinding")]))
        # The sentinel last of all: its SCC and role, its namespace (allocated after every case's), its grant.
        for o in sync[:2] + [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYNC}}]:
            admin.create(o)
        _allocated(admin, {SYNC})
        for o in sync[2:]:
            admin.create(o)
        said("the grants and service accounts are applied")
        apis = {"StatefulSet": Api(plane.port, scc.token_of(plane, scc.STATEFULSET_CONTROLLER)),
                "Job": Api(plane.port, scc.token_of(plane, scc.JOB_CONTROLLER))}  # fmt: skip
        deadline = time.monotonic() + 60
        while not (answer := _review(apis["StatefulSet"], _sync_pod())).admitted:
            if time.monotonic() > deadline:
                raise RuntimeError(f"admission never admitted the sentinel pod: {answer}")
            time.sleep(0.2)
        said("admission has seen every case's objects")
        jobs = []
        for c, v, objs in zip(cases, verdicts, applied, strict=True):
            n = Names(c.tag)
            mine = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs if o["kind"] in ("StatefulSet", "Job")}
            for t in v.templates:
                kind, rest = t.ref.split(" ", 1)
                ns, name = rest.split("/", 1)
                t.obj, t.predicted = mine[(kind, n.ns(ns), name)], n.scc(t.predicted)
                jobs.append(t)

        def ask(t: Template) -> None:
            answer = _review(apis[t.obj["kind"]], scc.pod_of(t.obj))
            t.admitted, t.scc, t.said = answer.admitted, answer.scc, answer.message
            containers = answer.pod.get("spec", {}).get("containers", []) if answer.admitted else []
            t.read_only = any((c.get("securityContext") or {}).get("readOnlyRootFilesystem") for c in containers)

        list(pool.map(ask, jobs))
    said(f"admission has judged {len(jobs)} pod templates")
    return verdicts


# --- the verdicts ----------------------------------------------------------------------------------------------------

# What each cluster edit changes, and the words of admission's refusal it explains.
EXPLAINS = {
    "seccomp": "seccomp",
    "escalation": "Allowing privilege escalation for containers is not allowed",
    "volume-types": "volumes are not allowed to be used",
    "use-role": "not usable by user or serviceaccount",
}


def limit(v: Verdict) -> str | None:
    """Why a disagreement is a documented limit (docs/preflight.md "What the security rules cannot see"), or None: a bug
    of the rules. Only a cluster edit explains one: what the cluster has beyond the config, the preflight cannot know."""
    if v.agree or not v.decided:
        return None
    unstated = ", ".join(d for _, d in v.case.cluster_edits)
    kinds = {k for k, _ in v.case.cluster_edits}
    wrong = [t for t in v.templates if not t.agree]
    # Admission refused what check accepted, for a reason a cluster edit put there (its words are in the refusal).
    if all(not t.refused_by_check and t.admitted is False for t in wrong) and all(
        any(EXPLAINS[k] in t.said for k in kinds if k in EXPLAINS) for t in wrong
    ):
        warned = f" (check warned: {v.warned[0]})" if v.warned and "use-role" in kinds else ""
        return f"the cluster has what the config does not state ({unstated}): the config is all the preflight knows of it{warned}"
    # Admission admitted what check refused for want of a grant, granted by hand to a group the config does not name.
    if (
        "group-grant" in kinds
        and all(t.admitted and t.refused_by_check for t in wrong)
        and all(all("may not use SCC" in m for m in t.refused_by_check) for t in wrong)
    ):
        return f"a grant made by hand ({unstated}): the preflight knows the grants the stack renders, not the cluster's"
    return None


def report(verdicts: list[Verdict], refused: int) -> str:
    """The summary the test prints: agreement overall and per edit class, then every disagreement."""
    agree = sum(v.agree for v in verdicts)
    limits = [v for v in verdicts if limit(v)]
    wrong = [v for v in verdicts if v.decided and not v.agree and not limit(v)]
    templates = sum(len(v.templates) for v in verdicts)
    lines = [
        f"security rules vs OpenShift's SCC admission: {len(verdicts)} cases, {templates} pod templates ({refused} drawn configs "
        f"refused by the model), {agree} agree, {len(limits)} documented limits, {len(wrong)} disagreements, "
        f"{sum(not v.decided for v in verdicts)} undecided; check accepts {sum(v.check_accepts for v in verdicts)}, "
        f"admission admits every pod of {sum(v.admission_admits for v in verdicts if v.decided)}",
        f"{'edit class':<20} {'cases':>5} {'agree':>5} {'limit':>5} {'wrong':>5}",
    ]
    for k in sorted(EDITS):
        mine = [v for v in verdicts if k in v.case.classes]
        lines.append(
            f"{k + (' *' if k in CLUSTER_EDITS else ''):<20} {len(mine):>5} {sum(v.agree for v in mine):>5} "
            f"{sum(1 for v in mine if limit(v)):>5} {sum(1 for v in mine if v.decided and not v.agree and not limit(v)):>5}"
        )
    lines.append("(* the cluster, not the config)")
    read_only = [v for v in verdicts if any(t.read_only for t in v.templates)]
    lines.append(
        f"admitted with a read-only root file system (an SCC's readOnlyRootFilesystem; the launcher writes /tmp there): "
        f"{sum(t.read_only for v in read_only for t in v.templates)} pod templates of {len(read_only)} cases "
        f"({', '.join(v.case.tag for v in read_only) or 'none'})"
    )
    lines += ["disagreements:"] + [
        v.line() + (f"\n    limit: {limit(v)}" if limit(v) else "") for v in verdicts if v.decided and not v.agree
    ]
    return "\n".join(lines)
