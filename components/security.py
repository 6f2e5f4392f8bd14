"""Who may run training pods, and with which privileges: the SCC, its `use` grants, the ServiceAccounts. The SCC this
program creates drops ALL capabilities and allows only those the stack's memlock strategies need (KNOWLEDGE.md); its
runAsUser is RunAsAny because added capabilities are effective only for uid 0. Other pods run under restricted-v2."""

from typing import Any

from components.kube import SCC_API, Sourced, managed
from config.kube import SCC_USE_ROLE_PREFIX
from config.stack import ClusterConfig

RBAC_API = "rbac.authorization.k8s.io/v1"
SCC_VOLUMES = ["configMap", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"]


def use_role_name(scc: str) -> str:
    """The ClusterRole `oc adm policy add-scc-to-user` ensures for an SCC."""
    return SCC_USE_ROLE_PREFIX + scc


def granted_accounts(config: ClusterConfig) -> dict[str, list[str]]:
    """namespace -> service accounts whose pods run under the stack's SCC (those need its grant)."""
    sec = config.security
    if sec.scc is None or not sec.grant:
        return {}
    pods = [w for w in config.pod_specs() if config.scc_of(w) == sec.scc]
    return {ns: sorted({w.service_account for w in pods if w.namespace == ns}) for ns in sorted({w.namespace for w in pods})}


def scc_object(config: ClusterConfig) -> dict[str, Any]:
    """Every key the upstream schema requires, nothing broad."""
    assert config.security.scc is not None
    description = "GPU training with RDMA: root with only the capabilities the memlock strategies need; every other capability "
    description += "dropped; no privileged containers, host namespaces or host paths."
    return managed(SCC_API, "SecurityContextConstraints", config.security.scc, annotations={"kubernetes.io/description": description}) | {
        "allowHostDirVolumePlugin": False,
        "allowHostIPC": False,
        "allowHostNetwork": False,
        "allowHostPID": False,
        "allowHostPorts": False,
        "allowPrivilegeEscalation": False,
        "allowPrivilegedContainer": False,
        "allowedCapabilities": sorted(config.scc_needs(config.security.scc).capabilities),
        # Required keys (schemas/README.md). Pulumi drops null inputs, so the empty values are spelled out.
        "defaultAddCapabilities": [],
        "defaultAllowPrivilegeEscalation": False,
        "fsGroup": {"type": "RunAsAny"},
        "groups": [],
        # Pods pin this SCC with openshift.io/required-scc, so it need not win on priority (0 sorts as unset).
        "priority": 0,
        "readOnlyRootFilesystem": False,
        # Like restricted-v2: every capability dropped; allowedCapabilities may still be added back.
        "requiredDropCapabilities": ["ALL"],
        "runAsUser": {"type": "RunAsAny"},
        "seLinuxContext": {"type": "MustRunAs"},
        "seccompProfiles": ["runtime/default"],
        "supplementalGroups": {"type": "RunAsAny"},
        "users": [],
        "volumes": SCC_VOLUMES,
    }


def use_role(scc: str) -> dict[str, Any]:
    rule = {"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"], "resourceNames": [scc], "verbs": ["use"]}
    return managed(RBAC_API, "ClusterRole", use_role_name(scc), rules=[rule])


def use_binding(scc: str, namespace: str, accounts: list[str]) -> dict[str, Any]:
    """What `oc adm policy add-scc-to-user SCC -z SA -n NS` creates: a RoleBinding in NS."""
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": use_role_name(scc)}
    subjects = [{"kind": "ServiceAccount", "name": sa, "namespace": namespace} for sa in accounts]
    return managed(RBAC_API, "RoleBinding", use_role_name(scc), namespace, roleRef=role, subjects=subjects)


def security_objects(config: ClusterConfig) -> list[Sourced]:
    sec = config.security
    objs: list[Sourced] = []
    if sec.create and sec.scc:
        # An existing SCC's use-role exists already (OpenShift ships one per default SCC).
        objs += [(("security", "scc"), scc_object(config)), (("security", "scc"), use_role(sec.scc))]
    # Pods mount a token only where a workload asks for one (Workload.service_account_token).
    made = [managed("v1", "ServiceAccount", sa.name, sa.namespace, automountServiceAccountToken=False) for sa in sec.service_accounts]
    objs += [(("security", "service_accounts", i), account) for i, account in enumerate(made)]
    if sec.scc:
        objs += [(("security", "scc"), use_binding(sec.scc, ns, accounts)) for ns, accounts in granted_accounts(config).items()]
    return objs
