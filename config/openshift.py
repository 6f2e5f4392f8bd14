"""Facts of OpenShift that the config is judged by, not fields of it: the SCCs OpenShift ships and what each allows,
the internal registry, the service accounts of every project, the control plane's pools and roles, the platform's
namespaces, the files the launcher writes, a debugger's ports.
"""

from __future__ import annotations

import fnmatch
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

    @property
    def allows_root(self) -> bool:
        return self.run_as_user == "RunAsAny"


_NET_BIND = frozenset({"NET_BIND_SERVICE"})
_NONE: frozenset[str] = frozenset()
# The SCCs OpenShift ships, and what each one allows: facts of the platform, not of a stack's config. Read from the
# manifests OpenShift installs them from: openshift/cluster-kube-apiserver-operator bindata/bootkube/scc-manifests/
# (0000_20_kube-apiserver-operator_00_scc-NAME.yaml), openshift/machine-api-operator
# install/0000_30_machine-api-operator_09_security_context_constraint.yaml (machine-api-termination-handler) and
# openshift/cluster-monitoring-operator assets/node-exporter/security-context-constraints.yaml (node-exporter); they
# agree with the OpenShift documentation's "Default security context constraints". A stack that `create`s one of them
# would own, and on destroy delete, the SCC every user of the cluster runs under; a stack that names one is judged by
# these facts, whatever its security.existing_* fields say (policy.core.Stack.scc).
OPENSHIFT_SCCS: dict[str, SccFacts] = {
    "anyuid": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=False, escalation=True),
    "hostaccess": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=True, escalation=True),
    "hostmount-anyuid": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True),
    "hostmount-anyuid-v2": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True),
    "hostnetwork": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=False, escalation=True),
    "hostnetwork-v2": SccFacts(_NET_BIND, "MustRunAsRange", privileged=False, host_paths=False, escalation=False),
    "machine-api-termination-handler": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True),
    "node-exporter": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True),
    "nonroot": SccFacts(_NONE, "MustRunAsNonRoot", privileged=False, host_paths=False, escalation=True),
    "nonroot-v2": SccFacts(_NET_BIND, "MustRunAsNonRoot", privileged=False, host_paths=False, escalation=False),
    "privileged": SccFacts(None, "RunAsAny", privileged=True, host_paths=True, escalation=True),
    "restricted": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=False, escalation=True),
    "restricted-v2": SccFacts(_NET_BIND, "MustRunAsRange", privileged=False, host_paths=False, escalation=False),
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


# The files components/launcher/launcher.py writes in every pod (DEFAULT_ENV_FILE, DEFAULT_BASH_ENV_FILE,
# DEFAULT_REPORT_JSON; tests hold them equal): a DeepSpeed hostfile must not be one of them, and /tmp must be writable.
LAUNCHER_FILES = ("/tmp/launcher.env", "/tmp/launcher-bash-env.sh", "/tmp/launcher-report.json")
# A debugger's port (debugpy's name and its default port): it runs whatever code its client sends.
DEBUGGER_PORT_NAMES = frozenset({"debugpy"})
DEBUGGER_PORTS = frozenset({5678})
