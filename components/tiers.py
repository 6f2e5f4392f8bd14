"""Who may declare what: the platform tier (cluster-admin: cluster-scoped objects, RoleBindings to an SCC's use-role,
the SR-IOV operator's objects, anything outside the stack's projects) or the project tier (everything else)."""

import shlex
from collections.abc import Callable
from typing import Any

from components.kube import CLUSTER_SCOPED_KINDS, NAD_KIND
from config.kube import SCC_USE_ROLE_PREFIX
from config.openshift import SRIOV_OPERATOR_KINDS
from config.stack import ClusterConfig

Keep = Callable[[dict[str, Any]], bool]  # which objects a run of a tier declares

PLATFORM = "platform"
PROJECT = "project"


def resource(kind: str, api_version: str = "v1") -> str:
    """The resource `oc auth can-i` names, PLURAL.GROUP: Kubernetes' plural of every kind this program declares or reads."""
    plural = kind.lower()
    if kind == NAD_KIND:
        plural = "network-attachment-definitions"
    elif plural.endswith("y"):
        plural = plural[:-1] + "ies"
    elif plural.endswith("ss") or not plural.endswith("s"):
        plural += "es" if plural.endswith("ss") else "s"
    group = api_version.rpartition("/")[0]
    return f"{plural}.{group}" if group else plural


def tier_of(obj: dict[str, Any], config: ClusterConfig) -> str:
    namespace = (obj.get("metadata") or {}).get("namespace")
    if obj["kind"] in CLUSTER_SCOPED_KINDS or obj["kind"] in SRIOV_OPERATOR_KINDS or namespace not in config.namespaces:
        return PLATFORM
    scc_grant = obj["kind"] == "RoleBinding" and str((obj.get("roleRef") or {}).get("name", "")).startswith(SCC_USE_ROLE_PREFIX)
    return PLATFORM if scc_grant else PROJECT


def keep_for(config: ClusterConfig, tier: str) -> Keep:
    return (lambda obj: True) if tier == "all" else (lambda obj: tier_of(obj, config) == tier)


def can_i(obj: dict[str, Any], patch: bool = False) -> list[str]:
    """The `oc auth can-i` lines that tell whether the current user may declare the object (quoted, ready to paste)."""
    meta = obj.get("metadata") or {}
    kind = resource(obj["kind"], obj.get("apiVersion", "v1"))
    ns = ["-n", meta["namespace"]] if meta.get("namespace") else []
    if patch:
        return [shlex.join(["oc", "auth", "can-i", "patch", f"{kind}/{meta['name']}", *ns])]
    lines = [shlex.join(["oc", "auth", "can-i", "create", kind, *ns])]
    if obj["kind"] == "BuildConfig" and (obj.get("spec") or {}).get("strategy", {}).get("type") == "Docker":
        # Admission checks that the builds may use the Docker strategy (system:build-strategy-docker).
        lines.append(shlex.join(["oc", "auth", "can-i", "create", "builds.build.openshift.io", "--subresource=docker", *ns]))
    role = str((obj.get("roleRef") or {}).get("name", ""))
    if obj["kind"] == "RoleBinding" and role.startswith(SCC_USE_ROLE_PREFIX):
        # Binding a role needs `bind` on it, or every permission it grants (here: `use` of the SCC).
        lines.append(shlex.join(["oc", "auth", "can-i", "bind", f"clusterroles.rbac.authorization.k8s.io/{role}", *ns]))
    return lines


def can_i_read(kind: str, object_id: str, api_version: str = "v1") -> str:
    """The `oc auth can-i` line for a read of an object the stack relies on (quoted, ready to paste)."""
    namespace, _, name = object_id.rpartition("/")
    if kind == "Namespace":
        # The API server authorizes `GET /api/v1/namespaces/NAME` inside NAME; without -n, can-i asks the cluster scope.
        namespace = name
    ns = ["-n", namespace] if namespace else []
    return shlex.join(["oc", "auth", "can-i", "get", f"{resource(kind, api_version)}/{name}", *ns])
