"""What a stack relies on but does not own, read so that `pulumi preview` fails when `pulumi up` would (the provider's
preview swallows AlreadyExists, Forbidden and missing-namespace errors). Secrets are never read (the state would hold
them). `expected` is the state the stack assumes: the offline renderer answers each read with it."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from components.kube import NAD_API, NAD_KIND, SCC_API, SRIOV_OWNER_REF
from components.networks import operator_namespaces
from components.security import granted_accounts, use_binding, use_role_name
from config.cluster import PvcStorageClassFix, RdmaFabric, SriovAttachment
from config.kube import RESOURCE_NAME, operator_network_name
from config.openshift import BUILTIN_SCCS, SCC_FIELDS, SccFacts
from config.stack import ClusterConfig
from config.values import MAX_CNI_DEPTH, bounded_json

Check = Callable[[dict[str, Any]], "str | None"]


@dataclass(frozen=True)
class Requirement:
    api_version: str
    kind: str
    object_id: str
    """NAMESPACE/NAME, or NAME for a cluster-scoped object (the provider's read id)."""
    why: str
    fix: str
    expected: dict[str, Any]
    verify: Check | None = None
    # The fix in a few words, in the read's name: the engine's error for a missing object names only its id.
    hint: str = ""
    fields: tuple[str, ...] = ("metadata", "spec", "status")  # the top-level fields the check reads (an SCC has no spec)
    tier: str = "project"


def _namespace(config: ClusterConfig, ns: str, tier: str) -> Requirement:
    return Requirement(
        "v1", "Namespace", ns,
        why="the stack deploys into it; projects are made by their users or admins, not by this program",
        fix=f"create the project (`oc new-project {ns}`), or remove it from namespaces in clusters/{config.name}.py",
        expected={"metadata": {"name": ns}, "status": {"phase": "Active"}},
        verify=lambda s: "the project is being deleted (Terminating)" if (s.get("status") or {}).get("phase") == "Terminating" else None,
        hint=f"oc new-project {ns}, or remove it from namespaces in clusters/{config.name}.py",
        tier=tier,
    )  # fmt: skip


def _grant(config: ClusterConfig, ns: str, accounts: list[str]) -> Requirement:
    scc = config.security.scc
    assert scc is not None

    def verify(state: dict[str, Any]) -> str | None:
        have = {s.get("name") for s in state.get("subjects") or [] if s.get("kind") == "ServiceAccount" and s.get("namespace", ns) == ns}
        missing = sorted(set(accounts) - have)
        return f"it does not bind {', '.join(missing)}: their pods would be rejected by SCC admission" if missing else None

    return Requirement(
        "rbac.authorization.k8s.io/v1", "RoleBinding", f"{ns}/{use_role_name(scc)}",
        why=f"pods in {ns} run under SCC {scc!r}, which this project stack may not grant itself",
        fix=f"a cluster admin runs the platform tier of {config.name} (`pulumi up -s {config.name}-platform`), "
        f"or `oc adm policy add-scc-to-user {scc} -z SA -n {ns}` for each service account",
        expected=use_binding(scc, ns, accounts),
        verify=verify,
        hint=f"a cluster admin runs pulumi up -s {config.name}-platform",
        fields=("metadata", "subjects", "roleRef"),
    )  # fmt: skip


def _scc(config: ClusterConfig, scc: str, stated: SccFacts) -> Requirement:
    """The existing SCC the pods pin admits what they need and allows no more than its stated facts say."""
    sec = config.security
    needs = config.scc_needs(scc)

    def verify(state: dict[str, Any]) -> str | None:
        live = SccFacts.from_object(state)
        verdict = live.judge(needs, stated)
        refused: dict[str, list[str]] = {}
        for fact, need in verdict.refused:
            refused.setdefault(fact, []).append(need)
        problems = [f"it does not admit {', '.join(what)} (its {live.said(fact)})" for fact, what in refused.items()]
        for fact in verdict.unstated:
            said = f"OpenShift ships it with {stated.said(fact)} (security.scc)" if scc in BUILTIN_SCCS else sec.says(fact)
            problems.append(f"it has {live.said(fact)}, where {said}")
        return "; ".join(problems) or None

    return Requirement(
        SCC_API, "SecurityContextConstraints", scc,
        why="the stack's pods pin it (openshift.io/required-scc) and the stack does not create it",
        fix=f"state what it allows in security.existing_* of clusters/{config.name}.py (what it allows beyond what the pods "
        "need asks for security.broad_grant_reason), have its admin narrow it, or let the stack create a least-privilege one "
        "(security.create: true with another name)",
        expected={"metadata": {"name": scc}, **stated.to_object()},
        verify=verify,
        hint=f"create the SCC {scc}, or correct security in clusters/{config.name}.py",
        fields=("metadata", *SCC_FIELDS),
        tier="platform",
    )  # fmt: skip


def _fixed_claim(fix: PvcStorageClassFix) -> Requirement:
    pending = {"phase": "Pending"}

    def verify(state: dict[str, Any]) -> str | None:
        current = (state.get("spec") or {}).get("storageClassName")
        if current not in (None, "", fix.storage_class):
            refused = f"the patch to {fix.storage_class!r} would be refused (the class is immutable once set)"
            return f"it has storage class {current!r} already: {refused}"
        if not current and (state.get("status") or {}).get("phase") == "Bound":
            return "it is Bound without a storage class: Kubernetes sets a class only on an unbound claim, so the patch would be refused"
        return None

    return Requirement(
        "v1", "PersistentVolumeClaim", f"{fix.namespace}/{fix.pvc}",
        why=f"the stack sets its storage class ({fix.reason})",
        fix="remove the pvc_fixes entry if the claim is fixed another way, or ask the claim's owner to recreate it with "
        f"storageClassName {fix.storage_class}",
        expected={"metadata": {"name": fix.pvc, "namespace": fix.namespace}, "spec": {"storageClassName": None}, "status": pending},
        verify=verify,
        hint=f"remove the pvc_fixes entry of {fix.namespace}/{fix.pvc}",
        tier="platform",
    )  # fmt: skip


def _storage_class(config: ClusterConfig, name: str) -> Requirement:
    return Requirement(
        "storage.k8s.io/v1", "StorageClass", name,
        why="claims of the stack name it",
        fix=f"use a class `oc get storageclass` lists, and correct storage_classes in clusters/{config.name}.py",
        expected={"metadata": {"name": name}},
        hint=f"correct storage_classes in clusters/{config.name}.py (oc get storageclass)",
        fields=("metadata",),
        tier="platform",
    )  # fmt: skip


def _source_nad(fabric: RdmaFabric, att: SriovAttachment) -> Requirement:
    ns, copies = fabric.nad_source_namespace, fabric.nad_mode == "copy"
    owner = f"SriovNetwork.sriovnetwork.openshift.io/openshift-sriov-network-operator/{att.network}"
    meta = {"name": att.network, "namespace": ns, "annotations": {RESOURCE_NAME: att.resource, SRIOV_OWNER_REF: owner}}

    def verify(state: dict[str, Any]) -> str | None:
        problems = []
        if (resource := ((state.get("metadata") or {}).get("annotations") or {}).get(RESOURCE_NAME)) != att.resource:
            problems.append(f"its resourceName is {resource!r}, the stack's {att.resource!r}")
        if copies and att.cni_config:
            try:
                # Read as the stack's is: nested too deep (or NaN) is no config, and differs.
                live = bounded_json((state.get("spec") or {}).get("config") or "null", MAX_CNI_DEPTH)
                same = live == bounded_json(att.cni_config, MAX_CNI_DEPTH)
            except ValueError:
                same = False
            if not same:
                problems.append("its CNI config differs from fabric.attachments[].cni_config, which the copies carry")
        return "; ".join(problems) or None

    return Requirement(
        NAD_API, NAD_KIND, f"{ns}/{att.network}",
        why="the SR-IOV operator's network the RDMA pods attach" + (" (the copies carry its config)" if copies else ""),
        fix=f"check the SriovNetwork objects (`oc get net-attach-def -n {ns}`); set cni_config from "
        f"`oc get net-attach-def {att.network} -n {ns} -o jsonpath='{{.spec.config}}'` and resource from its resourceName annotation",
        expected={"metadata": meta, "spec": {"config": att.cni_config or "{}"}},
        verify=verify,
        hint=f"check the SriovNetwork objects (oc get net-attach-def -n {ns})",
        tier="platform",
    )  # fmt: skip


def _operator_nad(config: ClusterConfig, att: SriovAttachment, ns: str) -> Requirement:
    assert config.fabric is not None
    name = operator_network_name(ns, att.network)
    operator = config.fabric.operator_namespace

    def verify(state: dict[str, Any]) -> str | None:
        if (resource := ((state.get("metadata") or {}).get("annotations") or {}).get(RESOURCE_NAME)) != att.resource:
            return f"its resourceName is {resource!r}, the stack's {att.resource!r}: the operator made it from another SriovNetwork"
        return None

    return Requirement(
        NAD_API, NAD_KIND, f"{ns}/{name}",
        why=f"the RDMA pods attach it; the SR-IOV operator makes it from SriovNetwork {operator}/{name}, which the platform tier declares",
        fix=f"a cluster admin runs the platform tier of {config.name} (`pulumi up -s {config.name}-platform`), which declares "
        f"the SriovNetwork; then `oc get sriovnetwork {name} -n {operator}` and the operator's log say why no NAD appeared",
        expected={"metadata": {"name": name, "namespace": ns, "annotations": {RESOURCE_NAME: att.resource}}},
        verify=verify,
        hint=f"a cluster admin runs pulumi up -s {config.name}-platform",
    )  # fmt: skip


def _operator_namespace(config: ClusterConfig, ns: str) -> Requirement:
    return Requirement(
        "v1", "Namespace", ns,
        why="the platform tier declares SriovNetworks or node policies there, for the SR-IOV network operator to reconcile",
        fix=f"install the SR-IOV Network Operator (OperatorHub; it makes {ns}), or correct fabric.operator_namespace in "
        f"clusters/{config.name}.py (`oc get sriovnetworks -A`)",
        expected={"metadata": {"name": ns}, "status": {"phase": "Active"}},
        hint=f"install the SR-IOV Network Operator, or correct fabric.operator_namespace in clusters/{config.name}.py",
        fields=("metadata",),
        tier="platform",
    )  # fmt: skip


def _existing(api: str, kind: str, ns: str, name: str, fix: str) -> Requirement:
    return Requirement(
        api, kind, f"{ns}/{name}",
        why="workloads of the stack use it; its owner made it",
        fix=fix,
        hint=fix.split(" (`")[0],
        expected={"metadata": {"name": name, "namespace": ns}},
        fields=("metadata",),
    )  # fmt: skip


def requirements(config: ClusterConfig, tier: str) -> list[Requirement]:
    out: list[Requirement] = []
    sec = config.security
    grants = granted_accounts(config)
    if tier in ("all", "project"):
        out += [_namespace(config, ns, "project") for ns in config.namespaces]
        for o in config.existing.config_maps:
            fix = f"create it (`oc create configmap {o.name} --from-file=... -n {o.namespace}`) or drop it from existing.config_maps"
            out.append(_existing("v1", "ConfigMap", o.namespace, o.name, fix))
        for o in config.existing.image_streams:
            fix = f"build or import the image into {o.namespace}/{o.name}, or let the stack build it (images)"
            out.append(_existing("image.openshift.io/v1", "ImageStream", o.namespace, o.name, fix))
        fix = "the claim's owner creates it, or the volume is not existing: set existing: false and a size"
        out += [_existing("v1", "PersistentVolumeClaim", v.namespace, v.name, fix) for v in config.volumes if v.existing]
        if tier == "project":
            out += [_grant(config, ns, accounts) for ns, accounts in grants.items()]
            # In `all` the same run declares the SriovNetworks: their NADs cannot be read before it.
            served = operator_namespaces(config)
            out += [_operator_nad(config, a, ns) for a in config.fabric.attachments for ns in served] if config.fabric else []
    if tier in ("all", "platform"):
        if tier == "platform":
            # The grants it makes need their namespaces (in `all`, the project side reads every namespace).
            out += [_namespace(config, ns, "platform") for ns in sorted(grants)]
        if sec.scc and (stated := sec.stated_facts()) is not None and any(config.scc_of(w) == sec.scc for w in config.pod_specs()):
            out.append(_scc(config, sec.scc, stated))
        out += [_fixed_claim(f) for f in config.pvc_fixes]
        classes = sorted(
            {v.storage_class for v in config.volumes if v.storage_class and not v.existing} | {f.storage_class for f in config.pvc_fixes}
        )
        out += [_storage_class(config, c) for c in classes]
        fabric = config.fabric
        if fabric is not None and (operator_namespaces(config) or any(s.node_policies for s in config.node_sets)):
            out.append(_operator_namespace(config, fabric.operator_namespace))
        if fabric is not None and fabric.device_access == "sriov" and fabric.nad_mode != "operator" and config.rdma_namespaces():
            out += [_source_nad(fabric, a) for a in fabric.attachments]
    return list(_merged(out))


def _merged(reqs: list[Requirement]) -> Iterator[Requirement]:
    """One read per object (the engine rejects two reads of one URN): the merged read runs every check, names every reason."""
    by_id: dict[tuple[str, str, str], list[Requirement]] = {}
    for r in reqs:
        by_id.setdefault((r.api_version, r.kind, r.object_id), []).append(r)
    for group in by_id.values():
        checks = [r.verify for r in group if r.verify is not None]

        def verify(state: dict[str, Any], checks: list[Check] = checks) -> str | None:
            return "; ".join(p for p in (c(state) for c in checks) if p) or None

        yield replace(
            max(group, key=lambda r: len(r.fields)),
            why="; ".join(dict.fromkeys(r.why for r in group)),
            fix="; or ".join(dict.fromkeys(r.fix for r in group)),
            verify=verify if checks else None,
            hint="; ".join(dict.fromkeys(r.hint for r in group if r.hint)),
            fields=tuple(dict.fromkeys(f for r in group for f in r.fields)),
            tier="platform" if any(r.tier == "platform" for r in group) else group[0].tier,
        )
