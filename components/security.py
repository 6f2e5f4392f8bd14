"""Who may run training pods, and with which privileges: the SCC, its `use` grant, the ServiceAccounts.

Least privilege: the SCC this program creates allows no privileged container, no host namespaces,
no hostPath, no privilege escalation, and only the capabilities the workloads' memlock strategies
add (KNOWLEDGE.md). Its runAsUser is RunAsAny because added capabilities are effective only for uid
0, and the root strategies need them effective.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.kube import MANAGED_BY, SCC_API, declare
from stacks.model import STRATEGY_CAPABILITIES, ClusterConfig

SCC_VOLUMES = ["configMap", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"]


def use_role_name(scc: str) -> str:
    """The ClusterRole `oc adm policy add-scc-to-user` ensures for an SCC."""
    return f"system:openshift:scc:{scc}"


def needed_capabilities(config: ClusterConfig) -> list[str]:
    """Union of the capabilities the workloads' memlock strategies add, sorted."""
    caps = {c for w in config.all_workloads() for c in STRATEGY_CAPABILITIES[config.memlock_of(w)]}
    return sorted(caps)


def scc_object(config: ClusterConfig) -> dict[str, Any]:
    """The SCC this stack creates: every key the upstream schema requires, nothing broad."""
    return {
        "apiVersion": SCC_API,
        "kind": "SecurityContextConstraints",
        "metadata": {
            "name": config.security.scc,
            "labels": dict(MANAGED_BY),
            "annotations": {
                "kubernetes.io/description": "GPU training with RDMA: root with only the capabilities the memlock "
                "strategy needs; no privileged containers, host namespaces or host paths.",
            },
        },
        "allowHostDirVolumePlugin": False,
        "allowHostIPC": False,
        "allowHostNetwork": False,
        "allowHostPID": False,
        "allowHostPorts": False,
        "allowPrivilegeEscalation": False,
        "allowPrivilegedContainer": False,
        "allowedCapabilities": needed_capabilities(config),
        # Required keys (schemas/README.md). Pulumi drops null inputs, so the empty values are spelled out.
        "defaultAddCapabilities": [],
        "defaultAllowPrivilegeEscalation": False,
        "fsGroup": {"type": "RunAsAny"},
        "groups": [],
        # Pods pin this SCC with openshift.io/required-scc, so it need not win on priority (0 sorts as unset).
        "priority": 0,
        "readOnlyRootFilesystem": False,
        # What the `restricted` SCC drops; IPC_LOCK and SYS_RESOURCE are not among them.
        "requiredDropCapabilities": ["KILL", "MKNOD", "SETUID", "SETGID"],
        "runAsUser": {"type": "RunAsAny"},
        "seLinuxContext": {"type": "MustRunAs"},
        "seccompProfiles": ["runtime/default"],
        "supplementalGroups": {"type": "RunAsAny"},
        "users": [],
        "volumes": SCC_VOLUMES,
    }


def use_role(scc: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": use_role_name(scc), "labels": dict(MANAGED_BY)},
        "rules": [
            {
                "apiGroups": ["security.openshift.io"],
                "resources": ["securitycontextconstraints"],
                "resourceNames": [scc],
                "verbs": ["use"],
            }
        ],
    }


def use_binding(scc: str, namespace: str, accounts: list[str]) -> dict[str, Any]:
    """What `oc adm policy add-scc-to-user SCC -z SA -n NS` creates: a RoleBinding in NS."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": use_role_name(scc), "namespace": namespace, "labels": dict(MANAGED_BY)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": use_role_name(scc)},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace} for sa in sorted(accounts)],
    }


def service_account(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)}}


def security_objects(config: ClusterConfig) -> list[dict[str, Any]]:
    """SCC and its use-role (when created), the ServiceAccounts, and one use-binding per namespace."""
    sec = config.security
    objs: list[dict[str, Any]] = []
    if sec.create:
        # An existing SCC's use-role exists already (OpenShift ships one per default SCC).
        objs += [scc_object(config), use_role(sec.scc)]
    accounts_by_ns: dict[str, list[str]] = {}
    for sa in sec.service_accounts:
        objs.append(service_account(sa.namespace, sa.name))
        accounts_by_ns.setdefault(sa.namespace, []).append(sa.name)
    if sec.grant:
        objs += [use_binding(sec.scc, ns, accounts) for ns, accounts in sorted(accounts_by_ns.items())]
    return objs


class ClusterSecurity(pulumi.ComponentResource):
    """The SCC (created, or an existing one referenced), its use-grant, and the ServiceAccounts."""

    scc_name: pulumi.Output[str]
    service_accounts: pulumi.Output[list[str]]

    def __init__(self, name: str, config: ClusterConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-training:index:ClusterSecurity", name, None, opts)
        # The grant follows the SCC and its role, so a binding never names a role that is not there yet.
        declared: list[pulumi.Resource] = []
        for obj in security_objects(config):
            after = [d for d in declared if obj["kind"] in ("ClusterRole", "RoleBinding")]
            res = declare(obj, pulumi.ResourceOptions(parent=self, depends_on=after))
            if obj["kind"] in ("SecurityContextConstraints", "ClusterRole"):
                declared.append(res)
        sec = config.security
        self.scc_name = pulumi.Output.from_input(sec.scc)
        self.service_accounts = pulumi.Output.from_input([f"{sa.namespace}/{sa.name}" for sa in sec.service_accounts])
        self.register_outputs({"scc_name": self.scc_name, "service_accounts": self.service_accounts})
