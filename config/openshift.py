"""Facts of OpenShift that the config is judged by, not fields of it: the SCCs it ships and what each allows, the
registry, the service accounts of every project, the control plane, the platform's namespaces, the SR-IOV operator."""

import fnmatch
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple, Self

from config.text import escaped
from config.values import STRATEGY_CAPABILITIES, STRATEGY_RUNS_AS_ROOT

# The SCC fields that let a pod into the node's network, PID or IPC namespace, or bind the node's ports.
HOST_NAMESPACES = ("allowHostNetwork", "allowHostPID", "allowHostIPC", "allowHostPorts")
# The SCC fields SccFacts.from_object reads (of a live SCC too).
SCC_FIELDS = (
    "allowedCapabilities", "defaultAddCapabilities", "runAsUser", "allowPrivilegedContainer", "allowHostDirVolumePlugin",
    "volumes", *HOST_NAMESPACES, "allowPrivilegeEscalation", "seccompProfiles", "userNamespaceLevel",
)  # fmt: skip
# The facts a stack states of an SCC it neither creates nor knows (security.existing_*), as SccFacts judges them.
STATED_FACTS = ("capabilities", "root", "privileged", "host_paths", "host_namespaces")
SHOWN = 8  # a live SCC's list is the cluster's: at most this many of its items in a message


def _listed(items: Iterable[str]) -> str:
    names = sorted(escaped(i) for i in items)
    more = f" (and {len(names) - SHOWN} more)" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more if names else "none"


def _whole(value: object) -> bool:
    """An integer as a read gives it: Pulumi's outputs carry every number as a float."""
    return isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()


class SccNeeds(NamedTuple):
    """What the pods that run under an SCC need of it, from their memlock strategies (KNOWLEDGE.md)."""

    capabilities: frozenset[str] = frozenset()
    root: bool = False
    privileged: bool = False
    used: bool = False  # whether any pod runs under it (else only what is broad whatever the pods counts)

    @classmethod
    def of(cls, strategies: Iterable[str]) -> Self:
        chosen = set(strategies)
        caps = frozenset(c for s in chosen for c in STRATEGY_CAPABILITIES[s])
        return cls(caps, bool(chosen & STRATEGY_RUNS_AS_ROOT), "privileged" in chosen, bool(chosen))


class SccVerdict(NamedTuple):
    """SccFacts.judge's answer: each item names the fact it is about (STATED_FACTS, or user_namespace)."""

    refused: list[tuple[str, str]]  # what the pods need that the SCC does not admit (fact, the need)
    broad: list[tuple[str, str]]  # what the SCC allows beyond what its pods need (fact, what): a grant needs a reason
    unstated: list[str]  # the facts where the SCC allows more than the stated facts say


class SccFacts(NamedTuple):
    """What admission lets a pod do under an SCC, as apiserver-library-go's sccadmission judges it: the one reading of
    an SCC OpenShift ships, one a stack creates, the facts a config states of one, or the live object."""

    capabilities: frozenset[str] | None  # allowedCapabilities (and defaultAddCapabilities): what a container may add; None for `*` (any)
    run_as_user: str  # runAsUser.type: RunAsAny admits uid 0; MustRunAs(Range) where uid_range holds it; MustRunAsNonRoot never
    privileged: bool = False  # allowPrivilegedContainer
    host_paths: bool = False  # hostPath volumes: allowHostDirVolumePlugin, or hostPath or `*` in `volumes`
    escalation: bool = True  # allowPrivilegeEscalation (unset in a manifest means allowed)
    seccomp: frozenset[str] | None = frozenset()  # seccompProfiles a pod may set; None for `*`; empty refuses the program's pods
    user_namespace: bool = False  # userNamespaceLevel RequirePodLevel: only pods with `hostUsers: false`, which the program's never ask for
    uid_range: tuple[int, int] | None = None  # the uids runAsUser fixes (uidRangeMin..Max, MustRunAs's uid); None: never 0
    host_namespaces: frozenset[str] = frozenset()  # which of HOST_NAMESPACES it sets

    @property
    def allows_root(self) -> bool:
        held = self.uid_range is not None and self.uid_range[0] <= 0 <= self.uid_range[1]
        return self.run_as_user == "RunAsAny" or (self.run_as_user in ("MustRunAs", "MustRunAsRange") and held)

    def allows(self, capability: str) -> bool:
        return self.capabilities is None or capability in self.capabilities

    def allows_seccomp(self, profile: str) -> bool:
        """Whether admission lets a container set seccomp `profile` (runtime/default and docker/default are one)."""
        if self.seccomp is None or "*" in self.seccomp or profile in self.seccomp:
            return True
        defaults = {"runtime/default", "docker/default"}
        return profile in defaults and bool(defaults & self.seccomp)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Self:
        """The facts of an SCC object (the cluster's is untrusted: a field of another shape reads as unset)."""

        def names(key: str) -> frozenset[str]:
            return frozenset(map(str, value)) if isinstance(value := obj.get(key), list) else frozenset()

        run_as: Mapping[str, Any] = obj["runAsUser"] if isinstance(obj.get("runAsUser"), dict) else {}
        kind = str(run_as.get("type") or "")
        ends: list[Any] = [run_as.get("uid")] * 2 if kind == "MustRunAs" else [run_as.get("uidRangeMin"), run_as.get("uidRangeMax")]
        allowed, volumes, seccomp = names("allowedCapabilities"), names("volumes"), names("seccompProfiles")
        return cls(
            capabilities=None if "*" in allowed else allowed | names("defaultAddCapabilities"),
            run_as_user=kind,
            privileged=obj.get("allowPrivilegedContainer") is True,
            host_paths=obj.get("allowHostDirVolumePlugin") is True or bool(volumes & {"hostPath", "*"}),
            escalation=obj.get("allowPrivilegeEscalation") is not False,
            seccomp=None if "*" in seccomp else seccomp,
            user_namespace=obj.get("userNamespaceLevel") == "RequirePodLevel",
            uid_range=(int(ends[0]), int(ends[1])) if all(_whole(e) for e in ends) else None,
            host_namespaces=frozenset(f for f in HOST_NAMESPACES if obj.get(f) is True),
        )

    def to_object(self) -> dict[str, Any]:
        """The SCC fields that state these facts (from_object reads them back as these facts)."""
        run_as: dict[str, Any] = {"type": self.run_as_user}
        if self.uid_range is not None:
            low, high = self.uid_range
            run_as |= {"uid": low} if self.run_as_user == "MustRunAs" else {"uidRangeMin": low, "uidRangeMax": high}
        return {
            "allowedCapabilities": ["*"] if self.capabilities is None else sorted(self.capabilities),
            "allowPrivilegedContainer": self.privileged,
            "allowHostDirVolumePlugin": self.host_paths,
            **{f: f in self.host_namespaces for f in HOST_NAMESPACES},
            "allowPrivilegeEscalation": self.escalation,
            "runAsUser": run_as,
            "seccompProfiles": ["*"] if self.seccomp is None else sorted(self.seccomp),
            **({"userNamespaceLevel": "RequirePodLevel"} if self.user_namespace else {}),
        }

    def said(self, fact: str) -> str:
        """How the SCC's own fields say `fact` (escaped and bounded: a live SCC's fields are the cluster's)."""
        if fact == "capabilities":
            return "allowedCapabilities " + ("* (every capability)" if self.capabilities is None else _listed(self.capabilities))
        if fact == "root":
            uids = ""
            if self.uid_range is not None:
                low, high = self.uid_range
                uids = f" uid {low}" if self.run_as_user == "MustRunAs" else f" {low}-{high}"
            admitted = " (uid 0 admitted)" if self.allows_root else " (never uid 0)"
            return f"runAsUser {escaped(self.run_as_user) or '(unset)'}{uids}{admitted}"
        if fact == "host_namespaces":
            return f"{_listed(self.host_namespaces)} true" if self.host_namespaces else f"{', '.join(HOST_NAMESPACES)} false"
        if fact == "user_namespace":
            return f"userNamespaceLevel {'RequirePodLevel' if self.user_namespace else 'AllowHostLevel'}"
        return f"{self.field_of(fact)} {str(getattr(self, fact)).lower()}"

    def field_of(self, fact: str) -> str:
        """The SCC field that states `fact` (of the node's namespaces, the first it sets)."""
        if fact == "host_namespaces":
            return next((f for f in HOST_NAMESPACES if f in self.host_namespaces), HOST_NAMESPACES[0])
        return {"capabilities": "allowedCapabilities", "root": "runAsUser", "privileged": "allowPrivilegedContainer",
                "host_paths": "allowHostDirVolumePlugin", "user_namespace": "userNamespaceLevel"}[fact]  # fmt: skip

    def exceeds(self, other: "SccFacts", fact: str) -> bool:
        """Whether this SCC allows more than `other` in `fact` (one of STATED_FACTS)."""
        if fact == "capabilities":
            return other.capabilities is not None and (self.capabilities is None or not self.capabilities <= other.capabilities)
        if fact == "host_namespaces":
            return not self.host_namespaces <= other.host_namespaces
        if fact == "root":
            return self.allows_root and not other.allows_root
        return bool(getattr(self, fact)) and not getattr(other, fact)

    def judge(self, needs: "SccNeeds", stated: "SccFacts | None" = None) -> SccVerdict:
        """What of `needs` it refuses (of what `stated` admits), what it allows beyond them, where it exceeds `stated`."""
        refused = [r for r in self._refused(needs) if stated is None or r not in stated._refused(needs)]
        broad = [("privileged", "privileged containers")] if self.privileged else []
        broad += [("host_paths", "hostPath volumes (the node's file system)")] if self.host_paths else []
        broad += [("host_namespaces", f"the node's namespaces and ports ({_listed(self.host_namespaces)})")] if self.host_namespaces else []
        if needs.used and not needs.privileged:  # a privileged container holds every capability and uid anyway
            if self.capabilities is None:
                broad.append(("capabilities", "every capability (allowedCapabilities *)"))
            elif extra := self.capabilities - needs.capabilities:
                broad.append(("capabilities", f"capabilities no pod under it adds ({_listed(extra)})"))
            if self.allows_root and not needs.root:
                broad.append(("root", f"uid 0, which no pod under it runs as ({self.said('root')})"))
        return SccVerdict(refused, broad, [f for f in STATED_FACTS if stated is not None and self.exceeds(stated, f)])

    def _refused(self, needs: SccNeeds) -> list[tuple[str, str]]:
        out = [("privileged", "privileged containers")] if needs.privileged and not self.privileged else []
        out += [("capabilities", f"capability {c}") for c in sorted(needs.capabilities) if not self.allows(c)]
        out += [("root", "uid 0")] if needs.root and not self.allows_root else []
        return out + ([("user_namespace", "pods in the node's user namespace")] if needs.used and self.user_namespace else [])


_NET_BIND = frozenset({"NET_BIND_SERVICE"})
_NONE: frozenset[str] = frozenset()
_RUNTIME_DEFAULT = frozenset({"runtime/default"})
_ALL_HOST = frozenset(HOST_NAMESPACES)
_HOST_NETWORK = frozenset({"allowHostNetwork", "allowHostPorts"})
# The SCCs OpenShift ships, from their manifests (cluster-kube-apiserver-operator bindata/bootkube/scc-manifests/,
# machine-api-operator, node-exporter's): a stack that names one is judged by these, whatever security.existing_* says.
OPENSHIFT_SCCS: dict[str, SccFacts] = {
    "anyuid": SccFacts(_NONE, "RunAsAny"),
    "hostaccess": SccFacts(_NONE, "MustRunAsRange", host_paths=True, host_namespaces=_ALL_HOST),
    "hostmount-anyuid": SccFacts(_NONE, "RunAsAny", host_paths=True),
    "hostmount-anyuid-v2": SccFacts(_NONE, "RunAsAny", host_paths=True),
    "hostnetwork": SccFacts(_NONE, "MustRunAsRange", host_namespaces=_HOST_NETWORK),
    "hostnetwork-v2": SccFacts(_NET_BIND, "MustRunAsRange", escalation=False, seccomp=_RUNTIME_DEFAULT, host_namespaces=_HOST_NETWORK),
    # The two that require a user namespace: their uid ranges are inside it.
    "nested-container": SccFacts(
        frozenset({"SETUID", "SETGID"}), "MustRunAsRange", seccomp=None, user_namespace=True, uid_range=(0, 65534)
    ),
    "machine-api-termination-handler": SccFacts(_NONE, "RunAsAny", host_paths=True, host_namespaces=frozenset({"allowHostNetwork"})),
    "node-exporter": SccFacts(
        _NONE, "RunAsAny", host_paths=True, seccomp=_RUNTIME_DEFAULT, host_namespaces=_HOST_NETWORK | {"allowHostPID"}
    ),
    "nonroot": SccFacts(_NONE, "MustRunAsNonRoot"),
    "nonroot-v2": SccFacts(_NET_BIND, "MustRunAsNonRoot", escalation=False, seccomp=_RUNTIME_DEFAULT),
    "privileged": SccFacts(None, "RunAsAny", privileged=True, host_paths=True, seccomp=None, host_namespaces=_ALL_HOST),
    "restricted": SccFacts(_NONE, "MustRunAsRange"),
    "restricted-v2": SccFacts(_NET_BIND, "MustRunAsRange", escalation=False, seccomp=_RUNTIME_DEFAULT),
    "restricted-v3": SccFacts(
        _NET_BIND, "MustRunAsRange", escalation=False, seccomp=_RUNTIME_DEFAULT, user_namespace=True, uid_range=(1000, 65534)
    ),
}
BUILTIN_SCCS = frozenset(OPENSHIFT_SCCS)
INTERNAL_REGISTRY = "image-registry.openshift-image-registry.svc:5000"
# Service accounts OpenShift makes in every project (the value: which part of it does).
PROJECT_SERVICE_ACCOUNTS = {"default": "", "builder": "", "deployer": "", "pipeline": " that has OpenShift Pipelines"}
# Machine config pools of the control plane: a MachineConfig there drains and reboots the API server's nodes in turn.
CONTROL_PLANE_POOLS = frozenset({"master", "control-plane", "arbiter"})
# The node-role labels (and taint keys) of those nodes: a GPU pod that selects or tolerates them may load the API server's.
CONTROL_PLANE_ROLES = tuple(sorted(f"node-role.kubernetes.io/{pool}" for pool in CONTROL_PLANE_POOLS))
# Namespaces a stack never touches: what it declares there it owns, and its `pulumi destroy` deletes.
PLATFORM_NAMESPACES = ("kube-*", "openshift", "openshift-*", "default")


def platform_namespace(namespace: str) -> bool:
    return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in PLATFORM_NAMESPACES)


# The operator (v1.5.0) reconciles only its own namespace's objects: the one exception to PLATFORM_NAMESPACES.
SRIOV_OPERATOR_NAMESPACE = "openshift-sriov-network-operator"


def operator_namespace_problem(namespace: str) -> str:
    """Why `namespace` cannot be the SR-IOV network operator's, or ""."""
    if namespace == SRIOV_OPERATOR_NAMESPACE or not platform_namespace(namespace):
        return ""
    return (
        f"{namespace!r} is a namespace of the platform ({', '.join(PLATFORM_NAMESPACES)}), where no SR-IOV network operator "
        f"runs: the operator reconciles only the SriovNetworks and policies of its own namespace, {SRIOV_OPERATOR_NAMESPACE} on "
        "OpenShift (or the one its Helm chart was installed to, e.g. sriov-network-operator). Name it: "
        "`oc get sriovoperatorconfigs -A` shows where it runs"
    )


SRIOV_API = "sriovnetwork.openshift.io/v1"
SRIOV_OPERATOR_KINDS = frozenset({"SriovNetwork", "SriovNetworkNodePolicy"})
# The operator's RESOURCE_PREFIX on OpenShift: a resourceName is the resource without it, ^[a-zA-Z0-9_]+$ (its webhook).
SRIOV_RESOURCE_PREFIX = "openshift.io/"
SRIOV_RESOURCE_NAME = r"^[a-zA-Z0-9_]+$"
# Vendors and NVIDIA/Mellanox PF device IDs its webhook admits (the supported-nic-ids ConfigMap: ConnectX-4 to -8, BF-2/3).
SRIOV_VENDORS = frozenset({"8086", "15b3", "14e4", "1077", "177d", "1af4"})
SRIOV_MELLANOX_DEVICES = frozenset({"1013", "1015", "1017", "1019", "101b", "101d", "101f", "1021", "1023", "a2d6", "a2dc"})
SRIOV_MAX_VFS = 128  # the webhook's MlxMaxVFs: at most this many VFs per ConnectX PF
# CNI config key -> (the SriovNetwork field the NAD template, RenderNetAttDef, writes it from; what the CRD admits).
SRIOV_NETWORK_FIELDS: dict[str, tuple[str, Collection[object] | None]] = {
    "vlan": ("vlan", range(0, 4097)),
    "vlanQoS": ("vlanQoS", range(0, 8)),
    "vlanProto": ("vlanProto", ("802.1q", "802.1Q", "802.1ad", "802.1AD")),
    "spoofchk": ("spoofChk", ("on", "off")),
    "trust": ("trust", ("on", "off")),
    "link_state": ("linkState", ("auto", "enable", "disable")),
    "min_tx_rate": ("minTxRate", range(0, 2**31)),
    "max_tx_rate": ("maxTxRate", range(0, 2**31)),
    "logLevel": ("logLevel", ("panic", "error", "warning", "info", "debug")),
    "logFile": ("logFile", None),
}
SRIOV_CNI_OWN_KEYS = frozenset({"cniVersion", "name", "type", "mtu", "ipam", "capabilities"})


# The files the launcher writes in every pod (components/launcher/contract.py; tests hold them equal).
LAUNCHER_FILES = ("/tmp/launcher.env", "/tmp/launcher-bash-env.sh", "/tmp/launcher-report.json")
# A debugger's port (debugpy's name and default port): it runs whatever code its client sends.
DEBUGGER_PORT_NAMES = frozenset({"debugpy"})
DEBUGGER_PORTS = frozenset({5678})
