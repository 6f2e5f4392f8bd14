"""The preflight rules. Each one catches a failure the seed documents lived through on a cluster,
reads the config and the rendered objects only, and says what to change.

One function per rule, registered with an id; `check` runs them in the order of this file. A rule
reports an error for what would break the deployment and a warning for what the stack accepts
knowingly (the warning says why, so the reason shows up in every check and every preview).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from policy.core import (
    NETWORKS,
    REQUIRED_SCC,
    RESOURCE_NAME,
    SCC_USE_ROLE_PREFIX,
    Finding,
    PodView,
    Stack,
    error,
    ref,
    rule,
    warning,
)
from stacks.model import STRATEGY_CAPABILITIES, STRATEGY_RUNS_AS_ROOT

# OpenShift 4.11+ lets every authenticated user, service accounts included, use restricted-v2:
# pods that run under it need no grant.
SCCS_FOR_EVERYONE = frozenset({"restricted-v2"})
# The default SCCs; OpenShift ships a `system:openshift:scc:NAME` use-role for each of them.
SHIPPED_SCCS = frozenset(
    {
        "anyuid", "hostaccess", "hostmount-anyuid", "hostnetwork", "hostnetwork-v2",
        "nonroot", "nonroot-v2", "privileged", "restricted", "restricted-v2",
    }
)
# Namespaces whose NADs a pod of any namespace may use (OpenShift Multus namespace isolation).
GLOBAL_NAD_NAMESPACES = frozenset({"default", "openshift-multus", "openshift-sriov-network-operator", "openshift-cnv"})
# Interfaces every pod has besides its Multus attachments (OVN-Kubernetes names the pod network eth0).
POD_INTERFACES = ("lo", "eth0")
GPU = "nvidia.com/gpu"


def _annotation(pod: PodView, key: str) -> str:
    return pod.at("metadata.annotations") + f'["{key}"]'


def _security(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _added(container: dict[str, Any]) -> list[str]:
    return list((_security(container).get("capabilities") or {}).get("add") or [])


def _amount(resources: dict[str, Any], kind: str, name: str) -> int:
    value = (resources.get(kind) or {}).get(name)
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


# --- security ------------------------------------------------------------------------------------


@rule("required-scc", "Every pod pins the stack's SCC with openshift.io/required-scc, so a missing grant fails loudly "
      "instead of admission silently picking another SCC.")
def required_scc(stack: Stack) -> Iterator[Finding]:
    want = stack.config.security.scc
    for pod in stack.pods():
        got = pod.annotations.get(REQUIRED_SCC)
        if got is None:
            yield error(
                pod.ref, _annotation(pod, REQUIRED_SCC),
                "the pod does not pin its SCC: admission takes whichever SCC the service account may use that admits the "
                "pod, so a missing grant shows up later as missing capabilities instead of a clear rejection",
                f"annotate the pod with {REQUIRED_SCC}: {want}",
            )
        elif got != want:
            yield error(
                pod.ref, _annotation(pod, REQUIRED_SCC),
                f"the pod pins SCC {got!r}, but the stack grants {want!r}: admission rejects it",
                f"pin {want!r}, or set security.scc to {got!r}",
            )


def _grants(stack: Stack, scc: str, namespace: str, account: str) -> bool:
    """Whether a rendered RoleBinding in the pod's namespace (or a ClusterRoleBinding) gives the
    service account the SCC's use-role, the way `oc adm policy add-scc-to-user` does."""
    role = SCC_USE_ROLE_PREFIX + scc
    groups = {"system:authenticated", "system:serviceaccounts", f"system:serviceaccounts:{namespace}"}
    for b in stack.of_kind("RoleBinding") + stack.of_kind("ClusterRoleBinding"):
        meta = b.get("metadata") or {}
        if b["kind"] == "RoleBinding" and meta.get("namespace") != namespace:
            continue
        role_ref = b.get("roleRef") or {}
        if role_ref.get("kind") != "ClusterRole" or role_ref.get("name") != role:
            continue
        for s in b.get("subjects") or []:
            subject_ns = s.get("namespace") or meta.get("namespace")
            if s.get("kind") == "ServiceAccount" and s.get("name") == account and subject_ns == namespace:
                return True
            if s.get("kind") == "Group" and s.get("name") in groups:
                return True
    return False


@rule("scc-grant", "Each pod's service account exists and may use the SCC the pod pins (seed 003: 'capability may not "
      "be added: IPC_LOCK' because the service account had no access to the SCC).")
def scc_grant(stack: Stack) -> Iterator[Finding]:
    accounts = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in stack.of_kind("ServiceAccount")}
    for pod in stack.pods():
        scc = stack.scc_of(pod)
        account = pod.spec.get("serviceAccountName") or "default"
        where = pod.at("spec.serviceAccountName")
        if (pod.namespace, account) not in accounts:
            yield error(
                pod.ref, where,
                f"service account {pod.namespace}/{account} is not created by this stack: the API server rejects the pod",
                f"list {account} in namespace {pod.namespace} under security.service_accounts",
            )
        if scc in SCCS_FOR_EVERYONE or _grants(stack, scc, pod.namespace, account):
            continue
        yield error(
            pod.ref, where,
            f"service account {pod.namespace}/{account} may not use SCC {scc!r}: no RoleBinding in {pod.namespace} binds "
            f"ClusterRole {SCC_USE_ROLE_PREFIX}{scc} to it, so admission rejects the pod",
            f"set security.grant: true (the stack then binds it, as `oc adm policy add-scc-to-user {scc} -z {account} -n "
            f"{pod.namespace}` would); grant: false is only right for SCCs every user may use ({', '.join(sorted(SCCS_FOR_EVERYONE))})",
        )
    sec = stack.config.security
    role = SCC_USE_ROLE_PREFIX + sec.scc
    bound = any((b.get("roleRef") or {}).get("name") == role for b in stack.of_kind("RoleBinding"))
    created = any(o["metadata"]["name"] == role for o in stack.of_kind("ClusterRole"))
    if bound and not created and sec.scc not in SHIPPED_SCCS:
        yield warning(
            f"ClusterRole {role}", "security.create",
            f"the stack binds ClusterRole {role} but neither creates it nor is {sec.scc!r} an SCC OpenShift ships a use-role "
            "for: if the role does not exist on the cluster the binding grants nothing",
            f"check `oc get clusterrole {role}`; `oc adm policy add-scc-to-user {sec.scc} -z SA -n NS` creates it once",
        )


@rule("scc-capabilities", "The SCC a pod runs under allows every capability its containers add (seed 003: 'capability "
      "may not be added: IPC_LOCK').")
def scc_capabilities(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        name = stack.scc_of(pod)
        scc = stack.scc(name)
        if scc is None:
            yield error(
                pod.ref, _annotation(pod, REQUIRED_SCC),
                f"the pod runs under SCC {name!r}, which this stack neither creates nor describes: what it allows is unknown",
                f"set security.scc: {name} with create: false and its existing_* fields, or pin {stack.config.security.scc!r}",
            )
            continue
        for path, c in pod.containers():
            denied = [cap for cap in _added(c) if not scc.allows(cap)]
            if denied:
                allowed = ", ".join(sorted(scc.allowed_capabilities or ())) or "none"
                yield error(
                    pod.ref, f"{path}.securityContext.capabilities.add",
                    f"capability may not be added: {', '.join(denied)}: SCC {name!r} allows {allowed} ({scc.where})",
                    "run under an SCC that allows them (security.create: true makes one from the workloads' memlock "
                    "strategies), or choose a memlock strategy that adds none (node-limit; see KNOWLEDGE.md)",
                )


@rule("memlock-strategy", "The way the pod is meant to pin memory can work: added capabilities are effective only for "
      "uid 0, privileged needs an SCC allowing it, RDMA without any strategy pins at most 8 MiB (KNOWLEDGE.md's table).")
def memlock_strategy(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        scc = stack.scc(stack.scc_of(pod))
        for path, c in pod.containers():
            env = pod.env(c)
            mode = env.get("LAUNCHER_MODE")
            if mode is None:
                continue  # not a training container: the launcher does not run it
            strategy = env.get("LAUNCHER_MEMLOCK_STRATEGY", "none")
            where = f"{path}.env[LAUNCHER_MEMLOCK_STRATEGY]"
            fix_strategy = (
                "set the workload's memlock (or defaults.memlock_rdma) to root-ipc-lock, root-sys-resource, privileged or node-limit"
            )
            if strategy not in STRATEGY_CAPABILITIES:
                yield error(pod.ref, where, f"unknown memlock strategy {strategy!r}", fix_strategy)
                continue
            if mode == "rdma" and strategy == "none":
                yield error(
                    pod.ref, where,
                    "an RDMA pod with memlock strategy 'none' can pin only CRI-O's default 8 MiB: memory registration fails "
                    "with 'Cannot allocate memory'",
                    fix_strategy,
                )
            if strategy in STRATEGY_RUNS_AS_ROOT:
                missing = [cap for cap in STRATEGY_CAPABILITIES[strategy] if cap not in _added(c)]
                if missing:
                    yield error(
                        pod.ref, f"{path}.securityContext.capabilities.add",
                        f"memlock strategy {strategy!r} needs {', '.join(missing)} added to the container",
                        f"add {', '.join(missing)} to securityContext.capabilities.add",
                    )
                if pod.run_as_user(c) != 0:
                    yield error(
                        pod.ref, f"{path}.securityContext.runAsUser",
                        f"memlock strategy {strategy!r} needs uid 0: added capabilities reach the effective set only for "
                        "root (CRI-O sets no ambient capabilities), so a non-root uid cannot pin memory",
                        "set runAsUser: 0 on the container, or use memlock node-limit",
                    )
                if scc is not None and not scc.allows_root:
                    yield error(
                        pod.ref, f"{path}.securityContext.runAsUser",
                        f"memlock strategy {strategy!r} runs as uid 0, but SCC {scc.name!r} does not admit root "
                        f"({scc.where}): admission rejects the pod",
                        "run under an SCC with runAsUser RunAsAny (security.create: true makes one), or use memlock node-limit",
                    )
            elif strategy == "privileged":
                if not _security(c).get("privileged"):
                    yield error(
                        pod.ref, f"{path}.securityContext.privileged",
                        "memlock strategy 'privileged' but the container is not privileged: it gets no capability to pin memory",
                        "set securityContext.privileged: true, or choose another memlock strategy",
                    )
                if scc is not None and not scc.allows_privileged:
                    yield error(
                        pod.ref, f"{path}.securityContext.privileged",
                        f"memlock strategy 'privileged' needs a privileged container, which SCC {scc.name!r} does not allow "
                        f"({scc.where}): admission rejects the pod",
                        "use memlock root-ipc-lock under an SCC that allows IPC_LOCK (security.create: true), or an SCC "
                        "allowing privileged containers (with security.broad_grant_reason)",
                    )
            elif strategy == "node-limit" and mode == "rdma":
                yield warning(
                    pod.ref, where,
                    "memlock strategy 'node-limit' relies on the cluster admin having raised CRI-O's memlock limit on the GPU "
                    "nodes; without it memory registration fails at 8 MiB (the launcher stops the pod at start and says so)",
                    "have the admin apply a MachineConfig to the GPU pool that writes /etc/crio/crio.conf.d/99-memlock with "
                    '[crio.runtime] default_ulimits = ["memlock=-1:-1"]',
                )


@rule("privileged-container", "No privileged container unless its workload says why (privileged_reason); the reason "
      "is printed with every check.")
def privileged_container(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        for path, c in pod.containers():
            if not _security(c).get("privileged"):
                continue
            reason = stack.privileged_reason(pod)
            if reason:
                yield warning(
                    pod.ref, f"{path}.securityContext.privileged",
                    f"privileged container (every capability and host device), accepted because: {reason}",
                    "move to a device plugin and a least-privilege SCC when the cluster offers one",
                )
            else:
                yield error(
                    pod.ref, f"{path}.securityContext.privileged",
                    "privileged container (every capability and host device) without a stated reason",
                    f"set privileged_reason on {pod.name!r} to say why, or use memlock root-ipc-lock under a "
                    "least-privilege SCC",
                )


@rule("privileged-scc", "An SCC allowing privileged containers is granted only with a stated reason "
      "(security.broad_grant_reason), printed with every check.")
def privileged_scc(stack: Stack) -> Iterator[Finding]:
    sec = stack.config.security
    scc = stack.scc(sec.scc)
    if scc is None or not scc.allows_privileged:
        return
    obj = f"SecurityContextConstraints {scc.name}"
    where = "allowPrivilegedContainer" if scc.created else "security.existing_allows_privileged"
    accounts = ", ".join(f"{a.namespace}/{a.name}" for a in sec.service_accounts) or "nobody"
    if sec.broad_grant_reason:
        yield warning(
            obj, where,
            f"SCC {scc.name!r} allows privileged containers and is granted to {accounts}; accepted because: {sec.broad_grant_reason}",
            "replace it with a least-privilege SCC (security.create: true) as soon as the reason no longer holds",
        )
    else:
        yield error(
            obj, where,
            f"SCC {scc.name!r} allows privileged containers and is granted to {accounts} without a stated reason",
            "set security.broad_grant_reason, or use a least-privilege SCC (security.create: true)",
        )


# --- networks ------------------------------------------------------------------------------------


def _visible_nads(stack: Stack) -> dict[tuple[str, str], str | None]:
    """(namespace, name) -> resourceName of every NAD the stack knows exists: its own copies, and
    the SR-IOV operator's in the fabric's source namespace."""
    nads: dict[tuple[str, str], str | None] = {}
    fabric = stack.config.fabric
    for a in fabric.attachments if fabric else []:
        nads[(fabric.nad_source_namespace, a.network)] = a.resource  # type: ignore[union-attr]
    for o in stack.of_kind("NetworkAttachmentDefinition"):
        meta = o.get("metadata") or {}
        nads[(meta.get("namespace") or "default", meta["name"])] = (meta.get("annotations") or {}).get(RESOURCE_NAME)
    return nads


@rule("network-attachments", "Every network a pod attaches exists where the pod can see it (its namespace, or a global "
      "one), and an RDMA pod on an SR-IOV fabric attaches its networks (seed 003: net1-4 missing in the pod).")
def network_attachments(stack: Stack) -> Iterator[Finding]:
    nads = _visible_nads(stack)
    fabric = stack.config.fabric
    for pod in stack.pods():
        where = _annotation(pod, NETWORKS)
        refs = pod.network_refs()
        rdma = any(pod.env(c).get("LAUNCHER_MODE") == "rdma" for _, c in pod.containers())
        if rdma and not refs and fabric is not None and fabric.device_access == "sriov":
            yield error(
                pod.ref, where,
                "an RDMA pod on an SR-IOV fabric attaches no network: it gets no RDMA device and NCCL falls back to sockets",
                "list the SR-IOV networks in fabric.attachments",
            )
        for r in refs:
            if r.namespace != pod.namespace and r.namespace not in GLOBAL_NAD_NAMESPACES:
                yield error(
                    pod.ref, where,
                    f"network {r.namespace}/{r.name}: OpenShift lets a pod use NADs of its own namespace ({pod.namespace}) "
                    f"and of {', '.join(sorted(GLOBAL_NAD_NAMESPACES))} only; the pod sandbox is not created",
                    f"copy the NAD into {pod.namespace} (fabric.nad_mode: copy), or reference it in default",
                )
            elif (r.namespace, r.name) not in nads:
                yield error(
                    pod.ref, where,
                    f"network {r.namespace}/{r.name} does not exist where the pod looks for it: the stack does not create "
                    "it and fabric.attachments does not place it there; the pod sandbox is not created",
                    "create a copy in the pod's namespace (fabric.nad_mode: copy with device_access: sriov), or fix "
                    "fabric.nad_source_namespace",
                )


@rule("sriov-resources", "A pod requests and limits the SR-IOV resource of every network it attaches, one per "
      "attachment (seed 003: 'Insufficient openshift.io/eno5np0rdma').")
def sriov_resources(stack: Stack) -> Iterator[Finding]:
    nads = _visible_nads(stack)
    for pod in stack.pods():
        needed = Counter(nads[(r.namespace, r.name)] for r in pod.network_refs() if nads.get((r.namespace, r.name)))
        containers = list(pod.containers())
        for resource, count in sorted(needed.items()):
            assert resource is not None
            limit = sum(_amount(c.get("resources") or {}, "limits", resource) for _, c in containers)
            request = sum(
                _amount(c.get("resources") or {}, "requests", resource) or _amount(c.get("resources") or {}, "limits", resource)
                for _, c in containers
            )
            if limit < count or request < count:
                first = containers[0][0] if containers else pod.at("spec.containers[0]")
                yield error(
                    pod.ref, f'{first}.resources.limits["{resource}"]',
                    f"the pod attaches {count} network(s) backed by {resource} but requests {request} and limits {limit}: "
                    f"no VF is allocated, the scheduler reports 'Insufficient {resource}' or the attachment fails",
                    f"request and limit {resource}: {count} on the training container",
                )


def _select_interfaces(value: str, interfaces: list[str]) -> list[str]:
    """The interfaces an NCCL_SOCKET_IFNAME value selects: comma-separated prefixes, `=` exact,
    `^` excludes (NCCL's rules)."""
    exclude = value.startswith("^")
    body = value[1:] if exclude else value
    exact = body.startswith("=")
    body = body[1:] if exact else body
    names = [n.strip() for n in body.split(",") if n.strip()]

    def hit(iface: str) -> bool:
        return any(iface == n if exact else iface.startswith(n) for n in names)

    return [i for i in interfaces if hit(i) != exclude]


@rule("socket-ifname", "NCCL_SOCKET_IFNAME (explicit, or the launcher's TCP setting) selects interfaces the pod will "
      "have (seed 003: 'Bootstrap: no socket interface found').")
def socket_ifname(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        interfaces = list(POD_INTERFACES) + [r.interface for r in pod.network_refs()]
        for path, c in pod.containers():
            env = pod.env(c)
            checks = []
            if "NCCL_SOCKET_IFNAME" in env:
                checks.append(("NCCL_SOCKET_IFNAME", env["NCCL_SOCKET_IFNAME"]))
            elif "LAUNCHER_TCP_SOCKET_IFNAME" in env and (env.get("LAUNCHER_MODE") == "tcp" or env.get("LAUNCHER_TCP_FALLBACK") == "true"):
                checks.append(("LAUNCHER_TCP_SOCKET_IFNAME", env["LAUNCHER_TCP_SOCKET_IFNAME"]))
            multi_node = int(env.get("LAUNCHER_NNODES", "1") or 1) > 1
            for var, value in checks:
                chosen = [i for i in _select_interfaces(value, interfaces) if i != "lo" or not multi_node]
                if not chosen:
                    yield error(
                        pod.ref, f"{path}.env[{var}]",
                        f"{var}={value!r} selects none of the interfaces the pod will have ({', '.join(interfaces)}"
                        f"{'; loopback cannot reach the other pods' if multi_node else ''}): NCCL stops with "
                        "'Bootstrap: no socket interface found'",
                        "name interfaces the pod has (eth0 is the pod network; net1.. are its SR-IOV attachments), "
                        "or leave it out and let the launcher choose",
                    )


@rule("ib-hca", "A static NCCL_IB_HCA names only devices live on every node (fabric.devices), in exact-match form "
      "when an entry is a prefix of another known device (seeds 002/003 pinned mlx5_10 and mlx5_11, which were not ACTIVE).")
def ib_hca(stack: Stack) -> Iterator[Finding]:
    fabric = stack.config.fabric
    for pod in stack.pods():
        for path, c in pod.containers():
            env = pod.env(c)
            value = env.get("NCCL_IB_HCA")
            if value is None or env.get("NCCL_IB_DISABLE") == "1":
                continue  # with IB disabled NCCL never reads the list
            where = f"{path}.env[NCCL_IB_HCA]"
            if fabric is None:
                yield error(pod.ref, where, "NCCL_IB_HCA is set on a cluster without an RDMA fabric", "remove it, or set NCCL_IB_DISABLE=1")
                continue
            exclude = value.startswith("^")
            body = value[1:] if exclude else value
            exact = body.startswith("=")
            body = body[1:] if exact else body
            names = [e.strip().partition(":")[0] for e in body.split(",") if e.strip()]
            unknown = [n for n in names if n not in fabric.devices]
            if unknown and not exclude:
                seen = [o.source for o in fabric.device_observations if set(unknown) & set(o.devices)]
                yield error(
                    pod.ref, where,
                    f"NCCL_IB_HCA names {', '.join(unknown)}, which are not among the devices live on every node "
                    f"(fabric.devices: {', '.join(fabric.devices)})"
                    + (f"; they appear in {'; '.join(seen)}" if seen else "")
                    + ": NCCL uses only the listed devices that exist and are up, or none",
                    "name only devices from fabric.devices, or leave NCCL_IB_HCA unset and let the launcher detect the ACTIVE ports",
                )
            if not exact:
                known = set(fabric.devices) | {d for o in fabric.device_observations for d in o.devices}
                clashes = {n: sorted(k for k in known if k != n and k.startswith(n)) for n in names}
                clashes = {n: ks for n, ks in clashes.items() if ks}
                if clashes:
                    listed = "; ".join(f"{n} also selects {', '.join(ks)}" for n, ks in sorted(clashes.items()))
                    yield error(
                        pod.ref, where,
                        f"NCCL_IB_HCA entries are prefix matches: {listed}",
                        f"write the exact form: {'^' if exclude else ''}={body}",
                    )


# --- storage -------------------------------------------------------------------------------------


def _claims(stack: Stack) -> Iterator[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(object, path of the claim spec, claim spec) of every claim the stack creates: standalone
    PVCs and StatefulSet volumeClaimTemplates."""
    for o in stack.of_kind("PersistentVolumeClaim"):
        yield o, "spec", o.get("spec") or {}
    for o in stack.of_kind("StatefulSet"):
        for i, t in enumerate((o.get("spec") or {}).get("volumeClaimTemplates") or []):
            yield o, f"spec.volumeClaimTemplates[{i}].spec", t.get("spec") or {}


@rule("storage-class", "Every claim names a storage class that exists on the cluster; one that names none relies on "
      "the cluster default, which is what left seed 004's NFS server Pending.")
def storage_class(stack: Stack) -> Iterator[Finding]:
    classes = {s.name for s in stack.config.storage_classes}
    known = ", ".join(sorted(classes)) or "none"
    claims = [(ref(o), path, spec) for o, path, spec in _claims(stack)]
    # A patch sets the class of a claim that exists already (Cairo's NFS server volume): the class must exist too.
    claims += [(ref(p) + " (patch)", "spec", p.get("spec") or {}) for p in stack.patches if p.get("kind") == "PersistentVolumeClaim"]
    for obj, path, spec in claims:
        sc = spec.get("storageClassName")
        if sc is None:
            yield warning(
                obj, f"{path}.storageClassName",
                "no storage class: the claim relies on the cluster's default class; where there is none it stays Pending",
                "set the volume's storage_class to a class listed in storage_classes",
            )
        elif sc not in classes:
            yield error(
                obj, f"{path}.storageClassName",
                f"storage class {sc!r} is not known on {stack.config.name} (storage_classes: {known}): the claim stays Pending",
                "use a class from storage_classes, or add it there if `oc get storageclass` shows it",
            )


@rule("access-mode", "A claim asks only for access modes its class provides, and a claim mounted by several pods is "
      "ReadWriteMany on an RWX-capable class (seed 004: RWX on nfs-csi, RWO only on ceph-rbd).")
def access_mode(stack: Stack) -> Iterator[Finding]:
    classes = {s.name: s for s in stack.config.storage_classes}
    users: Counter[tuple[str, str]] = Counter()  # (namespace, claim) -> pods mounting it
    for pod in stack.pods():
        for v in pod.spec.get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                users[(pod.namespace, claim)] += pod.replicas
    for o, path, spec in _claims(stack):
        obj = ref(o)
        modes = list(spec.get("accessModes") or [])
        sc_name = spec.get("storageClassName")
        sc = classes.get(sc_name) if sc_name else None
        where = f"{path}.accessModes"
        if sc is not None:
            for m in modes:
                if m not in sc.access_modes:
                    yield error(
                        obj, where,
                        f"storage class {sc.name!r} provides {', '.join(sc.access_modes)} only: a {m} claim stays Pending",
                        "use a class that provides it (storage_classes), or a per-pod volume (shared: false)",
                    )
        elif sc_name is None and "ReadWriteMany" in modes:
            yield error(
                obj, where,
                "a ReadWriteMany claim on the cluster's default class, whose access modes the stack does not know: on a "
                "block-backed default it stays Pending",
                "name an RWX-capable class in the volume's storage_class (list it in storage_classes), or use shared: false",
            )
        if path != "spec":
            continue  # volumeClaimTemplates: one claim per pod
        meta = o.get("metadata") or {}
        n = users[(str(meta.get("namespace") or "default"), str(meta.get("name")))]
        if n > 1 and "ReadWriteMany" not in modes:
            yield error(
                obj, where,
                f"mounted by {n} pods, one per node, but not ReadWriteMany: all but the first stay ContainerCreating "
                "(Multi-Attach error)",
                "make the volume shared (ReadWriteMany) on an RWX-capable class, or per-pod (shared: false)",
            )


# --- scheduling ----------------------------------------------------------------------------------


def _pinned_nodes(pod: PodView) -> list[str]:
    """Hostnames a pod's required node affinity allows (empty: not pinned)."""
    aff = ((pod.spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    names: list[str] = []
    for term in aff.get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            if e.get("key") == "kubernetes.io/hostname" and e.get("operator") == "In":
                names += list(e.get("values") or [])
    return names


def _gpus(pod: PodView) -> int:
    return sum(_amount(c.get("resources") or {}, "limits", GPU) for _, c in pod.containers())


@rule("gpu-fit", "The GPUs a pod asks for fit on one node.")
def gpu_fit(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    for pod in stack.pods():
        gpus = _gpus(pod)
        pinned = set(_pinned_nodes(pod))
        nodes = [n for n in config.nodes if not pinned or n.name in pinned]
        capacity = max((n.gpus for n in nodes), default=config.gpus_per_node)
        if gpus > capacity:
            yield error(
                pod.ref, pod.at(f'spec.containers[0].resources.limits["{GPU}"]'),
                f"the pod asks for {gpus} GPUs but a node offers at most {capacity}: it stays Pending (Insufficient {GPU})",
                f"set gpus_per_node to at most {capacity} and spread the training over more nodes",
            )


@rule("replica-fit", "Pods of a multi-node workload, one per node, fit the known nodes.")
def replica_fit(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    known = {n.name: n for n in config.nodes}
    for pod in stack.pods():
        pinned = _pinned_nodes(pod)
        where = pod.at("spec.affinity.nodeAffinity")
        strangers = [n for n in pinned if known and n not in known]
        if strangers:
            yield error(
                pod.ref, where,
                f"pinned to {', '.join(strangers)}, which are not among the known nodes ({', '.join(known)})",
                "pin only nodes listed in the config's nodes (node names as `oc get nodes` shows them)",
            )
        if pod.replicas <= 1:
            continue
        if known:
            gpus = _gpus(pod)
            fit = [n.name for n in config.nodes if (not pinned or n.name in pinned) and n.gpus >= gpus]
        elif pinned:
            fit = pinned
        else:
            continue  # the nodes are not known: nothing to count against
        if pod.replicas > len(fit):
            count = "spec.replicas" if pod.owner.get("kind") == "StatefulSet" else "spec.parallelism"
            yield error(
                pod.ref, count,
                f"{pod.replicas} pods, one per node, but only {len(fit)} node(s) can take one ({', '.join(fit) or 'none'}): "
                "the rest stay Pending",
                f"set the workload's nodes to at most {len(fit)}, or list (and pin) more nodes",
            )
