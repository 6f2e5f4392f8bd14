"""Facts of OpenShift that the config is judged by, not fields of it: the SCCs OpenShift ships and what each allows,
the internal registry, the service accounts of every project, the control plane's pools and roles, the platform's
namespaces, the files the launcher writes, a debugger's ports.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection
from typing import NamedTuple


class SccFacts(NamedTuple):
    """What admission lets a pod do under an SCC OpenShift ships (the fields of its manifest the rules judge)."""

    capabilities: frozenset[str] | None
    """allowedCapabilities: what a container may add; None for `*` (any)."""
    run_as_user: str
    """runAsUser.type: RunAsAny admits uid 0; MustRunAsRange and MustRunAsNonRoot never do."""
    privileged: bool
    """allowPrivilegedContainer."""
    host_paths: bool
    """allowHostDirVolumePlugin: hostPath volumes, the node's file system."""
    escalation: bool
    """allowPrivilegeEscalation (unset in a manifest means allowed)."""
    seccomp: frozenset[str] | None
    """seccompProfiles: the profiles a pod may set; None for `*` (any). Empty: none at all, so admission refuses a pod
    that sets one ("seccomp may not be set"), as the program's RuntimeDefault containers do."""
    user_namespace: bool = False
    """userNamespaceLevel RequirePodLevel: admission admits only pods in a user namespace of their own (`hostUsers:
    false`), which the program's pods never ask for ("Host Users must be set to false")."""
    uid_min: int | None = None
    """runAsUser.uidRangeMin where the manifest fixes the range (else MustRunAsRange takes the project's, never 0)."""

    @property
    def allows_root(self) -> bool:
        """Whether runAsUser admits uid 0: RunAsAny, or a range the manifest starts at 0 (inside a user namespace)."""
        return self.run_as_user == "RunAsAny" or (self.run_as_user == "MustRunAsRange" and self.uid_min == 0)


_NET_BIND = frozenset({"NET_BIND_SERVICE"})
_NONE: frozenset[str] = frozenset()
_RUNTIME_DEFAULT = frozenset({"runtime/default"})
# The SCCs OpenShift ships, and what each one allows: facts of the platform, not of a stack's config. Read from the
# manifests OpenShift installs them from: openshift/cluster-kube-apiserver-operator bindata/bootkube/scc-manifests/
# (0000_20_kube-apiserver-operator_00_scc-NAME.yaml), openshift/machine-api-operator
# install/0000_30_machine-api-operator_09_security_context_constraint.yaml (machine-api-termination-handler) and
# openshift/cluster-monitoring-operator assets/node-exporter/security-context-constraints.yaml (node-exporter); they
# agree with the OpenShift documentation's "Default security context constraints". A stack that `create`s one of them
# would own, and on destroy delete, the SCC every user of the cluster runs under; a stack that names one is judged by
# these facts, whatever its security.existing_* fields say (policy.core.Stack.scc).
OPENSHIFT_SCCS: dict[str, SccFacts] = {
    "anyuid": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=False, escalation=True, seccomp=_NONE),
    "hostaccess": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=True, escalation=True, seccomp=_NONE),
    "hostmount-anyuid": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True, seccomp=_NONE),
    "hostmount-anyuid-v2": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True, seccomp=_NONE),
    "hostnetwork": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=False, escalation=True, seccomp=_NONE),
    "hostnetwork-v2": SccFacts(_NET_BIND, "MustRunAsRange", privileged=False, host_paths=False, escalation=False, seccomp=_RUNTIME_DEFAULT),
    # The two that require a user namespace (restricted-v3, granted to every authenticated user as restricted-v2 is;
    # nested-container, for container engines in a pod; both in the manifests of 2026): their uid ranges are inside it.
    "nested-container": SccFacts(
        frozenset({"SETUID", "SETGID"}),
        "MustRunAsRange",
        privileged=False,
        host_paths=False,
        escalation=True,
        seccomp=None,
        user_namespace=True,
        uid_min=0,
    ),
    "machine-api-termination-handler": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True, seccomp=_NONE),
    "node-exporter": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True, seccomp=_RUNTIME_DEFAULT),
    "nonroot": SccFacts(_NONE, "MustRunAsNonRoot", privileged=False, host_paths=False, escalation=True, seccomp=_NONE),
    "nonroot-v2": SccFacts(_NET_BIND, "MustRunAsNonRoot", privileged=False, host_paths=False, escalation=False, seccomp=_RUNTIME_DEFAULT),
    "privileged": SccFacts(None, "RunAsAny", privileged=True, host_paths=True, escalation=True, seccomp=None),
    "restricted": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=False, escalation=True, seccomp=_NONE),
    "restricted-v2": SccFacts(_NET_BIND, "MustRunAsRange", privileged=False, host_paths=False, escalation=False, seccomp=_RUNTIME_DEFAULT),
    "restricted-v3": SccFacts(
        _NET_BIND,
        "MustRunAsRange",
        privileged=False,
        host_paths=False,
        escalation=False,
        seccomp=_RUNTIME_DEFAULT,
        user_namespace=True,
        uid_min=1000,
    ),
}
BUILTIN_SCCS = frozenset(OPENSHIFT_SCCS)
INTERNAL_REGISTRY = "image-registry.openshift-image-registry.svc:5000"
# Service accounts OpenShift makes in every project (the value: which part of it does).
PROJECT_SERVICE_ACCOUNTS = {"default": "", "builder": "", "deployer": "", "pipeline": " that has OpenShift Pipelines"}
# Machine config pools of the control plane: a MachineConfig there drains and reboots the API server's nodes in turn.
CONTROL_PLANE_POOLS = frozenset({"master", "control-plane", "arbiter"})
# The node-role labels (and taint keys) of the same nodes: a GPU pod that selects or tolerates them may land on, and
# load, the nodes the API server and etcd run on.
CONTROL_PLANE_ROLES = tuple(sorted(f"node-role.kubernetes.io/{pool}" for pool in CONTROL_PLANE_POOLS))
# Namespaces a stack never touches: the platform's own and `default`. What a stack declares there it owns, and its
# `pulumi destroy` deletes (a NAD copy, a RoleBinding, a claim); an import would adopt the platform's objects.
PLATFORM_NAMESPACES = ("kube-*", "openshift", "openshift-*", "default")


def platform_namespace(namespace: str) -> bool:
    return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in PLATFORM_NAMESPACES)


# The SR-IOV network operator (github.com/k8snetworkplumbingwg/sriov-network-operator v1.5.0): where OpenShift installs
# it, and the kinds of its API the platform tier declares there (fabric.nad_mode operator, node_sets[].node_policies).
# These kinds in that namespace are the one exception to PLATFORM_NAMESPACES: the operator reconciles only the objects of
# its own namespace (controllers/generic_network_controller.go sets the request's namespace to its own), so that is
# where a SriovNetwork or a SriovNetworkNodePolicy must be; the stack owns exactly the ones it names.
SRIOV_OPERATOR_NAMESPACE = "openshift-sriov-network-operator"
# The operator runs in the namespace it is installed to (its Deployment passes metadata.namespace as NAMESPACE,
# deploy/operator.yaml; pkg/vars reads it) and watches only that one (main.go's cache): on OpenShift OLM installs it
# in SRIOV_OPERATOR_NAMESPACE, elsewhere its Helm chart in a namespace of its own (the chart's README:
# sriov-network-operator). No namespace of the platform is one it is installed to but OpenShift's: `default`,
# `kube-system` or `openshift-config` there would hold SriovNetworks no operator reconciles.


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
# The operator's RESOURCE_PREFIX on OpenShift (hack/env.sh, the chart's resourcePrefix): a policy's and a network's
# resourceName is the device plugin resource without it, and its webhook admits only ^[a-zA-Z0-9_]+$ there.
SRIOV_RESOURCE_PREFIX = "openshift.io/"
SRIOV_RESOURCE_NAME = r"^[a-zA-Z0-9_]+$"
# Vendors the operator supports (its supported-nic-ids ConfigMap), and the NVIDIA/Mellanox PF device IDs in it
# (ConnectX-4 to -8, BlueField-2/3): its webhook refuses a policy naming another vendor, or another device of 15b3.
SRIOV_VENDORS = frozenset({"8086", "15b3", "14e4", "1077", "177d", "1af4"})
SRIOV_MELLANOX_DEVICES = frozenset({"1013", "1015", "1017", "1019", "101b", "101d", "101f", "1021", "1023", "a2d6", "a2dc"})
SRIOV_MAX_VFS = 128  # the webhook's MlxMaxVFs: at most this many VFs per ConnectX PF
# What the operator's NAD template (bindata/manifests/cni-config/sriov/sriov-cni-config.yaml, rendered by
# api/v1/helper.go RenderNetAttDef) writes into the CNI config, by the SriovNetwork spec field it takes it from: a CNI
# config key -> (spec field, the values the CRD admits). `ipam` and `capabilities` are JSON objects the spec holds as
# strings; `cniVersion` (1.0.0), `name` (the SriovNetwork's name) and `type` (sriov) the operator writes itself; `mtu` it
# never writes (a VF's MTU is its node policy's, checked by the preflight).
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


# The files components/launcher/launcher.py writes in every pod (DEFAULT_ENV_FILE, DEFAULT_BASH_ENV_FILE,
# DEFAULT_REPORT_JSON; tests hold them equal): a DeepSpeed hostfile must not be one of them, and /tmp must be writable.
LAUNCHER_FILES = ("/tmp/launcher.env", "/tmp/launcher-bash-env.sh", "/tmp/launcher-report.json")
# A debugger's port (debugpy's name and its default port): it runs whatever code its client sends.
DEBUGGER_PORT_NAMES = frozenset({"debugpy"})
DEBUGGER_PORTS = frozenset({5678})
