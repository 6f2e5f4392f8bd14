"""The preflight rules. Each one catches a failure the seed documents (or a real cluster) lived
through, reads the config and the rendered objects only, and says what to change.

One function per rule, registered with an id. A rule reports an error for what would break the
deployment and a warning for what the stack accepts knowingly (the warning says why, and a stack
lists the warnings it accepts with its reason in accepted_warnings).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from typing import Any

from config import provenance
from config.errors import located
from config.openshift import (
    BUILTIN_SCCS,
    CONTROL_PLANE_ROLES,
    DEBUGGER_PORT_NAMES,
    DEBUGGER_PORTS,
    INTERNAL_REGISTRY,
    OPENSHIFT_SCCS,
    SccFacts,
)
from config.stack import HandMade
from config.values import (
    MIB,
    OBJECT_MAX,
    STRATEGY_CAPABILITIES,
    STRATEGY_RUNS_AS_ROOT,
    is_label_value,
    qualified_name_problem,
    quantity_value,
)
from policy.core import (
    INSTANCE,
    NETWORKS,
    REQUIRED_SCC,
    RESOURCE_NAME,
    SCC_USE_ROLE_PREFIX,
    ConfigPath,
    Finding,
    PodView,
    Stack,
    error,
    info,
    pod_view,
    ref,
    rule,
    warning,
)
from policy.placement import Group, place

# OpenShift 4.11+ lets every authenticated user, service accounts included, use restricted-v2:
# pods that run under it need no grant.
SCCS_FOR_EVERYONE = frozenset({"restricted-v2"})
# The default SCCs OpenShift ships a `system:openshift:scc:NAME` use-role for (all but its components' own).
SHIPPED_SCCS = BUILTIN_SCCS - {"machine-api-termination-handler", "node-exporter"}
# Namespaces whose NADs a pod of any namespace may use (OpenShift Multus namespace isolation).
GLOBAL_NAD_NAMESPACES = frozenset({"default", "openshift-multus", "openshift-sriov-network-operator", "openshift-cnv"})
# Interfaces every pod has besides its Multus attachments (OVN-Kubernetes names the pod network eth0).
POD_INTERFACES = ("lo", "eth0")
GPU = "nvidia.com/gpu"
# What an image used by RDMA pods must install: NCCL's IB transport loads libibverbs, which needs the
# provider libraries of rdma-core (mlx5), or NCCL silently uses sockets.
RDMA_USERSPACE = ("rdma-core", "libibverbs")


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


def _strategy(pod: PodView, container: dict[str, Any]) -> str | None:
    """A training container's memlock strategy (the launcher's default: none); None for any other container."""
    env = pod.env(container)
    return env.get("LAUNCHER_MEMLOCK_STRATEGY", "none") if "LAUNCHER_MODE" in env else None


# --- security ------------------------------------------------------------------------------------


@rule(
    "required-scc",
    "Every pod pins the SCC its memlock strategy needs with openshift.io/required-scc (restricted-v2 "
    "when it needs no privilege), so a missing grant fails loudly instead of admission silently picking another SCC.",
)
def required_scc(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    for pod in stack.pods():
        spec = stack.spec_of(pod)
        want = config.scc_of(spec) if spec is not None else None
        got = pod.annotations.get(REQUIRED_SCC)
        if got is None:
            yield error(
                pod.ref,
                _annotation(pod, REQUIRED_SCC),
                "the pod does not pin its SCC: admission takes whichever SCC the service account may use that admits the "
                "pod, so a missing grant shows up later as missing capabilities instead of a clear rejection",
                f"annotate the pod with {REQUIRED_SCC}: {want or config.security.unprivileged_scc}",
            )
        elif want is not None and got != want:
            yield error(
                pod.ref,
                _annotation(pod, REQUIRED_SCC),
                f"the pod pins SCC {got!r}, but its memlock strategy runs under {want!r}",
                f"pin {want!r}",
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


@rule(
    "scc-grant",
    "Each pod's service account exists and may use the SCC the pod pins (seed 003: 'capability may not "
    "be added: IPC_LOCK' because the service account had no access to the SCC).",
)
def scc_grant(stack: Stack) -> Iterator[Finding]:
    accounts = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in stack.of_kind("ServiceAccount")}
    for pod in stack.pods():
        scc = stack.scc_of(pod)
        account = pod.spec.get("serviceAccountName") or "default"
        where = pod.at("spec.serviceAccountName")
        if (pod.namespace, account) not in accounts:
            yield error(
                pod.ref,
                where,
                f"service account {pod.namespace}/{account} is not created by this stack: the API server rejects the pod",
                f"list {account} in namespace {pod.namespace} under security.service_accounts",
            )
        if scc in SCCS_FOR_EVERYONE or _grants(stack, scc, pod.namespace, account):
            continue
        yield error(
            pod.ref,
            where,
            f"service account {pod.namespace}/{account} may not use SCC {scc!r}: no RoleBinding in {pod.namespace} binds "
            f"ClusterRole {SCC_USE_ROLE_PREFIX}{scc} to it, so admission rejects the pod",
            f"set security.grant: true (the stack then binds it, as `oc adm policy add-scc-to-user {scc} -z {account} -n "
            f"{pod.namespace}` would); grant: false is only right for SCCs every user may use ({', '.join(sorted(SCCS_FOR_EVERYONE))})",
        )
    sec = stack.config.security
    if sec.scc is None:
        return
    role = SCC_USE_ROLE_PREFIX + sec.scc
    bound = any((b.get("roleRef") or {}).get("name") == role for b in stack.of_kind("RoleBinding"))
    created = any(o["metadata"]["name"] == role for o in stack.of_kind("ClusterRole"))
    if bound and not created and sec.scc not in SHIPPED_SCCS:
        yield warning(
            f"ClusterRole {role}",
            "security.create",
            f"the stack binds ClusterRole {role} but neither creates it nor is {sec.scc!r} an SCC OpenShift ships a use-role "
            "for: if the role does not exist on the cluster the binding grants nothing",
            f"check `oc get clusterrole {role}`; `oc adm policy add-scc-to-user {sec.scc} -z SA -n NS` creates it once",
        )


@rule(
    "scc-capabilities",
    "The SCC a pod runs under allows every capability its containers add (seed 003: 'capability may not be added: IPC_LOCK').",
)
def scc_capabilities(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        name = stack.scc_of(pod)
        scc = stack.scc(name)
        if scc is None:
            yield error(
                pod.ref,
                _annotation(pod, REQUIRED_SCC),
                f"the pod runs under SCC {name!r}, which this stack neither creates nor describes: what it allows is unknown",
                f"set security.scc: {name} with create: false and its existing_* fields",
            )
            continue
        for path, c in pod.containers():
            denied = [cap for cap in _added(c) if not scc.allows(cap)]
            if denied:
                allowed = ", ".join(sorted(scc.allowed_capabilities or ())) or "none"
                fix = (
                    "run under an SCC that allows them (security.create: true makes one from the workloads' memlock "
                    "strategies), or choose a memlock strategy that adds none (node-limit; see KNOWLEDGE.md)"
                )
                cause: tuple[str | int, ...] | None = None
                if scc.shipped and name == stack.config.security.scc:
                    cause = ("security", "scc")
                    fix = (
                        f"{name!r} is an SCC OpenShift ships, and it allows {allowed} on every cluster (whatever "
                        "security.existing_allowed_capabilities says): let the stack create a least-privilege SCC (security.scc: "
                        "a name of your own, create: true), or use memlock node-limit (KNOWLEDGE.md)"
                    )
                elif not scc.created and name == stack.config.security.scc:
                    # The stack's facts about an SCC it does not own: the admission error of seed 003, before preview reads it.
                    # One cause for every pod under it: one finding, at the fact, listing the pods.
                    cause = ("security", "existing_allowed_capabilities")
                    fix = (
                        f"SCC {name!r} exists on the cluster and the stack says it allows {allowed} "
                        f"(security.existing_allowed_capabilities): have its admin add {', '.join(denied)} to its allowedCapabilities "
                        f"and list them there, or let the stack create a least-privilege SCC (security.scc: another name, "
                        "create: true), or use memlock node-limit (KNOWLEDGE.md)"
                    )
                yield error(
                    pod.ref,
                    f"{path}.securityContext.capabilities.add",
                    f"capability may not be added: {', '.join(denied)}: SCC {name!r} allows {allowed} ({scc.where})",
                    fix,
                    config=cause,
                )


@rule(
    "memlock-strategy",
    "The way the pod is meant to pin memory can work: added capabilities are effective only for "
    "uid 0, privileged needs an SCC allowing it, RDMA without any strategy pins at most 8 MiB (KNOWLEDGE.md's table). "
    "Once per stack, an info line says why a root strategy's pods run as root with capabilities (what scanners flag).",
)
def memlock_strategy(stack: Stack) -> Iterator[Finding]:
    yield from _root_strategy_reason(stack)
    node_limit_real = stack.config.node_level.crio_memlock_unlimited
    for pod in stack.pods():
        scc = stack.scc(stack.scc_of(pod))
        for path, c in pod.containers():
            env = pod.env(c)
            mode = env.get("LAUNCHER_MODE")
            if mode is None:
                continue  # not a training container: the launcher does not run it
            strategy = _strategy(pod, c) or "none"
            where = f"{path}.env[LAUNCHER_MEMLOCK_STRATEGY]"
            fix_strategy = (
                "set the workload's memlock (or defaults.memlock_rdma) to root-ipc-lock, root-sys-resource, privileged or node-limit"
            )
            if strategy not in STRATEGY_CAPABILITIES:
                yield error(pod.ref, where, f"unknown memlock strategy {strategy!r}", fix_strategy)
                continue
            if mode == "rdma" and strategy == "none":
                yield error(
                    pod.ref,
                    where,
                    "an RDMA pod with memlock strategy 'none' can pin only CRI-O's default 8 MiB: memory registration fails "
                    "with 'Cannot allocate memory'",
                    fix_strategy,
                )
            if strategy in STRATEGY_RUNS_AS_ROOT:
                missing = [cap for cap in STRATEGY_CAPABILITIES[strategy] if cap not in _added(c)]
                if missing:
                    yield error(
                        pod.ref,
                        f"{path}.securityContext.capabilities.add",
                        f"memlock strategy {strategy!r} needs {', '.join(missing)} added to the container",
                        f"add {', '.join(missing)} to securityContext.capabilities.add",
                    )
                if pod.run_as_user(c) != 0:
                    yield error(
                        pod.ref,
                        f"{path}.securityContext.runAsUser",
                        f"memlock strategy {strategy!r} needs uid 0: added capabilities reach the effective set only for "
                        "root (CRI-O sets no ambient capabilities), so a non-root uid cannot pin memory",
                        "set runAsUser: 0 on the container, or use memlock node-limit",
                    )
                if scc is not None and not scc.allows_root:
                    yield error(
                        pod.ref,
                        f"{path}.securityContext.runAsUser",
                        f"memlock strategy {strategy!r} runs as uid 0, but SCC {scc.name!r} does not admit root "
                        f"({scc.where}): admission rejects the pod",
                        "run under an SCC with runAsUser RunAsAny (security.create: true makes one), or use memlock node-limit",
                        config=_shipped_cause(stack, scc.name) if scc.shipped else None,
                    )
            elif strategy == "privileged":
                if not _security(c).get("privileged"):
                    yield error(
                        pod.ref,
                        f"{path}.securityContext.privileged",
                        "memlock strategy 'privileged' but the container is not privileged: it gets no capability to pin memory",
                        "set securityContext.privileged: true, or choose another memlock strategy",
                    )
                if scc is not None and not scc.allows_privileged:
                    yield error(
                        pod.ref,
                        f"{path}.securityContext.privileged",
                        f"memlock strategy 'privileged' needs a privileged container, which SCC {scc.name!r} does not allow "
                        f"({scc.where}): admission rejects the pod",
                        "use memlock root-ipc-lock under an SCC that allows IPC_LOCK (security.create: true), or an SCC "
                        "allowing privileged containers (with security.broad_grant_reason)",
                        config=_shipped_cause(stack, scc.name) if scc.shipped else None,
                    )
            elif strategy == "node-limit" and mode == "rdma" and not node_limit_real:
                yield warning(
                    pod.ref,
                    where,
                    "memlock strategy 'node-limit' relies on the cluster admin having raised CRI-O's memlock limit on the GPU "
                    "nodes; without it memory registration fails at 8 MiB (the launcher stops the pod at start and says so)",
                    "set node_level.crio_memlock_unlimited: true (a MachineConfig the platform tier applies; it reboots the "
                    'pool), or have the admin write /etc/crio/crio.conf.d/99-memlock with default_ulimits = ["memlock=-1:-1"]',
                )


def _shipped_cause(stack: Stack, scc: str) -> tuple[str | int, ...] | None:
    """The config path that names a shipped SCC the pods run under: security.scc or security.unprivileged_scc (one
    cause for every pod under it); None when the SCC comes from elsewhere (a pod's own annotation)."""
    sec = stack.config.security
    if scc == sec.scc:
        return ("security", "scc")
    return ("security", "unprivileged_scc") if scc == sec.unprivileged_scc else None


def _root_strategy_reason(stack: Stack) -> Iterator[Finding]:
    """Once per stack and root strategy: why its pods run as root with capabilities. Scanners (checkov's root-container
    and added-capability checks) flag every such pod; this is the answer, printed where they are reviewed."""
    by_strategy: dict[str, list[str]] = {}
    for pod in stack.pods():
        for _, c in pod.containers():
            strategy = _strategy(pod, c)
            if strategy in STRATEGY_RUNS_AS_ROOT:
                by_strategy.setdefault(strategy, []).append(pod.ref)
    for strategy, pods in sorted(by_strategy.items()):
        caps = " and ".join(STRATEGY_CAPABILITIES[strategy])
        why = (
            "with IPC_LOCK in its effective set a process may pin memory past RLIMIT_MEMLOCK (ibv_reg_mr, mlock), and added "
            "capabilities reach the effective set only for uid 0 (CRI-O sets no ambient capabilities)"
        )
        if "SYS_RESOURCE" in STRATEGY_CAPABILITIES[strategy]:
            why += "; SYS_RESOURCE lets `ulimit -l unlimited` raise the limit itself"
        yield info(
            f"Stack {stack.config.name}",
            "defaults.memlock_rdma / workloads[].memlock",
            f"{len(pods)} pod template(s) run as root with {caps} (memlock {strategy!r}: {', '.join(sorted(pods))}). Scanners "
            f"such as checkov flag root with added capabilities on each of them: that is the memlock strategy working "
            f"(KNOWLEDGE.md): {why}. Everything else is dropped (ALL), with no privilege escalation and RuntimeDefault seccomp.",
            "nothing, for this strategy; to run the pods non-root, use memlock node-limit with node_level.crio_memlock_unlimited: "
            "true (a MachineConfig that raises CRI-O's memlock limit on the GPU pool)",
            config=("defaults", "memlock_rdma"),
        )


@rule(
    "least-privilege",
    "A container holds no more than its memlock strategy needs: non-root with every capability "
    "dropped (none, node-limit), root with only the strategy's capabilities added back, no escalation, the runtime's "
    "seccomp profile; training pods mount no API token unless the workload asks for one.",
)
def least_privilege(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        spec = stack.workload(pod)
        wants_token = bool(spec and spec.service_account_token)
        if pod.spec.get("automountServiceAccountToken") is not False and not wants_token:
            yield error(
                pod.ref,
                pod.at("spec.automountServiceAccountToken"),
                "the pod mounts a service account token it never uses: anyone who gets into it may call the API as that account",
                "set automountServiceAccountToken: false (service_account_token: true on the workload if it does call the API)",
            )
        for path, c in pod.containers():
            strategy = _strategy(pod, c)
            if strategy is None or strategy == "privileged":
                continue  # privileged containers are the privileged-container rule's business
            ctx = _security(c)
            caps = ctx.get("capabilities") or {}
            problems = []
            if "ALL" not in (caps.get("drop") or []):
                problems.append("does not drop ALL capabilities")
            extra = sorted(set(caps.get("add") or []) - set(STRATEGY_CAPABILITIES.get(strategy, ())))  # unknown: memlock-strategy says
            if extra:
                problems.append(f"adds {', '.join(extra)}, which memlock {strategy!r} does not need")
            if ctx.get("allowPrivilegeEscalation") is not False:
                problems.append("allows privilege escalation")
            if (ctx.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
                problems.append("has no RuntimeDefault seccomp profile")
            if strategy not in STRATEGY_RUNS_AS_ROOT and ctx.get("runAsNonRoot") is not True:
                problems.append(f"may run as root, which memlock {strategy!r} does not need")
            if problems:
                yield error(
                    pod.ref,
                    f"{path}.securityContext",
                    f"the container {'; '.join(problems)}",
                    "let the program render the securityContext from the memlock strategy (components/training.py container_security)",
                )


@rule(
    "privileged-container",
    "No privileged container unless its workload says why (privileged_reason); the reason is printed with every check.",
)
def privileged_container(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        for path, c in pod.containers():
            if not _security(c).get("privileged"):
                continue
            reason = stack.privileged_reason(pod)
            if reason:
                yield warning(
                    pod.ref,
                    f"{path}.securityContext.privileged",
                    f"privileged container (every capability and host device); the workload's privileged_reason: {reason}",
                    "move to a device plugin and a least-privilege SCC when the cluster offers one",
                )
            else:
                yield error(
                    pod.ref,
                    f"{path}.securityContext.privileged",
                    "privileged container (every capability and host device) without a stated reason",
                    f"set privileged_reason on {pod.instance!r} to say why, or use memlock root-ipc-lock under a least-privilege SCC",
                )


@rule(
    "privileged-scc",
    "An SCC allowing privileged containers or hostPath volumes (privileged, hostaccess, hostmount-anyuid, ... as OpenShift "
    "ships them, whatever the config says) is granted only with a stated reason (security.broad_grant_reason), printed "
    "with every check.",
)
def privileged_scc(stack: Stack) -> Iterator[Finding]:
    sec = stack.config.security
    scc = stack.scc(sec.scc) if sec.scc else None
    if scc is None or not (scc.allows_privileged or scc.allows_host_paths):
        return
    obj = f"SecurityContextConstraints {scc.name}"
    broad = " and ".join(["privileged containers"] * scc.allows_privileged + ["hostPath volumes"] * scc.allows_host_paths)
    # The SCC's own field (it is on the cluster: created, or shipped), else the config's claim about it.
    where = "allowPrivilegedContainer" if scc.allows_privileged else "allowHostDirVolumePlugin"
    if not (scc.created or scc.shipped):
        where = "security.existing_allows_privileged"
    cause = ("security", "scc") if scc.shipped else None
    bound = sorted(
        f"{(b.get('metadata') or {}).get('namespace')}/{s.get('name')}"
        for b in stack.of_kind("RoleBinding")
        if (b.get("roleRef") or {}).get("name") == SCC_USE_ROLE_PREFIX + scc.name
        for s in b.get("subjects") or []
    )
    accounts = ", ".join(bound) or "nobody"
    if sec.broad_grant_reason:
        yield warning(
            obj,
            where,
            f"SCC {scc.name!r} allows {broad} and is granted to {accounts}; the stack's broad_grant_reason: {sec.broad_grant_reason}",
            "replace it with a least-privilege SCC (security.create: true) as soon as the reason no longer holds",
            config=cause,
        )
    else:
        yield error(
            obj,
            where,
            f"SCC {scc.name!r} allows {broad} and is granted to {accounts} without a stated reason",
            "set security.broad_grant_reason, or use a least-privilege SCC (security.create: true)",
            config=cause,
        )


def _shipped_facts(facts: SccFacts) -> dict[str, tuple[object, str]]:
    """What each security.existing_* field would say of a shipped SCC, and how its manifest says it."""
    caps = None if facts.capabilities is None else sorted(facts.capabilities)
    root = f"runAsUser {facts.run_as_user}" + (" (uid 0 admitted)" if facts.allows_root else " (never uid 0)")
    return {
        "existing_allowed_capabilities": (
            caps,
            "allowedCapabilities " + ("* (every capability)" if caps is None else ", ".join(caps) or "none"),
        ),
        "existing_allows_privileged": (facts.privileged, f"allowPrivilegedContainer {str(facts.privileged).lower()}"),
        "existing_allows_root": (facts.allows_root, root),
    }


@rule(
    "shipped-scc",
    "The config's security.existing_* facts of an SCC OpenShift ships agree with what OpenShift ships: the preflight "
    "judges such an SCC by the platform's facts (OPENSHIFT_SCCS in stacks/model.py), so a field claiming more (IPC_LOCK "
    "on restricted-v2, root on nonroot-v2) is reported where it is written, not believed.",
)
def shipped_scc(stack: Stack) -> Iterator[Finding]:
    sec = stack.config.security
    facts = OPENSHIFT_SCCS.get(sec.scc or "")
    if facts is None or sec.create:
        return
    for name, (actual, manifest) in _shipped_facts(facts).items():
        if name not in sec.model_fields_set:
            continue  # a default nobody wrote claims nothing
        claimed = getattr(sec, name)
        if isinstance(claimed, list):
            claimed = sorted(claimed)
        if claimed == actual:
            continue
        if claimed is None:
            said = "every capability"
        elif isinstance(claimed, list):
            said = ", ".join(claimed) or "none"
        else:
            said = str(claimed).lower()
        yield warning(
            f"SecurityContextConstraints {sec.scc}",
            f"security.{name}",
            f"security.{name} says {said}, but OpenShift ships {sec.scc!r} with {manifest}: the preflight uses OpenShift's facts, "
            "not this field",
            f"remove security.{name} (the existing_* fields describe only SCCs the program does not know), or name an SCC "
            "that allows what the pods need (security.create: true makes a least-privilege one)",
            config=("security", name),
        )


@rule(
    "network-policy",
    "Every workload's pods are selected by a NetworkPolicy of the stack: the unauthenticated torchrun "
    "rendezvous (TCPStore) and NCCL's sockets admit the workload's own pods only.",
)
def network_policy(stack: Stack) -> Iterator[Finding]:
    # The ingress policies by namespace and by one label they require (None: they select every pod): a pod reads only
    # those its own labels could satisfy, not every workload's policy.
    selectors: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for p in stack.of_kind("NetworkPolicy"):
        spec = p.get("spec") or {}
        if "Ingress" in (spec.get("policyTypes") or []):
            match = (spec.get("podSelector") or {}).get("matchLabels") or {}
            selectors.setdefault(((p.get("metadata") or {}).get("namespace"), next(iter(match.items()), None)), []).append(match)
    for pod in stack.pods():
        labels = pod.meta.get("labels") or {}
        covered = any(
            all(labels.get(k) == v for k, v in match.items())
            for label in [None, *labels.items()]
            for match in selectors.get((pod.namespace, label), ())
        )
        if not covered:
            yield error(
                pod.ref,
                pod.at("metadata.labels"),
                "no NetworkPolicy selects these pods: anyone on the pod network can reach the rendezvous port and inject "
                "into the training run",
                "render the workload's NetworkPolicy (components/training.py network_policy)",
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


@rule(
    "network-attachments",
    "Every network a pod attaches exists where the pod can see it (its namespace, or a global "
    "one), and an RDMA pod on an SR-IOV fabric attaches its networks (seed 003: net1-4 missing in the pod).",
)
def network_attachments(stack: Stack) -> Iterator[Finding]:
    nads = _visible_nads(stack)
    fabric = stack.config.fabric
    for pod in stack.pods():
        where = _annotation(pod, NETWORKS)
        refs = pod.network_refs()
        rdma = any(pod.env(c).get("LAUNCHER_MODE") == "rdma" for _, c in pod.containers())
        if rdma and not refs and fabric is not None and fabric.device_access == "sriov":
            yield error(
                pod.ref,
                where,
                "an RDMA pod on an SR-IOV fabric attaches no network: it gets no RDMA device and NCCL falls back to sockets",
                "list the SR-IOV networks in fabric.attachments",
            )
        for r in refs:
            if r.namespace != pod.namespace and r.namespace not in GLOBAL_NAD_NAMESPACES:
                yield error(
                    pod.ref,
                    where,
                    f"network {r.namespace}/{r.name}: OpenShift lets a pod use NADs of its own namespace ({pod.namespace}) "
                    f"and of {', '.join(sorted(GLOBAL_NAD_NAMESPACES))} only; the pod sandbox is not created",
                    f"copy the NAD into {pod.namespace} (fabric.nad_mode: copy), or reference it in default",
                )
            elif (r.namespace, r.name) not in nads:
                yield error(
                    pod.ref,
                    where,
                    f"network {r.namespace}/{r.name} does not exist where the pod looks for it: the stack does not create "
                    "it and fabric.attachments does not place it there; the pod sandbox is not created",
                    "create a copy in the pod's namespace (fabric.nad_mode: copy with device_access: sriov), or fix "
                    "fabric.nad_source_namespace",
                )


@rule(
    "sriov-resources",
    "A pod requests and limits the SR-IOV resource of every network it attaches, one per "
    "attachment (seed 003: 'Insufficient openshift.io/eno5np0rdma').",
)
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
                    pod.ref,
                    f'{first}.resources.limits["{resource}"]',
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


@rule(
    "socket-ifname",
    "NCCL_SOCKET_IFNAME (explicit, or the launcher's TCP setting) selects interfaces the pod will "
    "have (seed 003: 'Bootstrap: no socket interface found').",
)
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
                        pod.ref,
                        f"{path}.env[{var}]",
                        f"{var}={value!r} selects none of the interfaces the pod will have ({', '.join(interfaces)}"
                        f"{'; loopback cannot reach the other pods' if multi_node else ''}): NCCL stops with "
                        "'Bootstrap: no socket interface found'",
                        "name interfaces the pod has (eth0 is the pod network; net1.. are its SR-IOV attachments), "
                        "or leave it out and let the launcher choose",
                    )


@rule(
    "ib-hca",
    "A static NCCL_IB_HCA names only devices live on every node (fabric.devices), in exact-match form "
    "when an entry is a prefix of another known device (seeds 002/003 pinned mlx5_10 and mlx5_11, which were not ACTIVE).",
)
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
                    pod.ref,
                    where,
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
                        pod.ref,
                        where,
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


@rule(
    "storage-class",
    "Every claim names a storage class that exists on the cluster; one that names none relies on "
    "the cluster default, which is what left seed 004's NFS server Pending.",
)
def storage_class(stack: Stack) -> Iterator[Finding]:
    classes = {s.name for s in stack.config.storage_classes}
    known = ", ".join(sorted(classes)) or "none"
    claims = [(ref(o), path, spec, _volume_setting(stack, o, path)) for o, path, spec in _claims(stack)]
    # A patch sets the class of a claim that exists already (Cairo's NFS server volume): the class must exist too.
    claims += [
        (ref(p) + " (patch)", "spec", p.get("spec") or {}, _fix_setting(stack, p))
        for p in stack.patches
        if p.get("kind") == "PersistentVolumeClaim"
    ]
    for obj, path, spec, setting in claims:
        sc = spec.get("storageClassName")
        if sc is None:
            yield warning(
                obj,
                f"{path}.storageClassName",
                "no storage class: the claim relies on the cluster's default class; where there is none it stays Pending",
                "set the volume's storage_class to a class listed in storage_classes",
                config=setting,
            )
        elif sc not in classes:
            yield error(
                obj,
                f"{path}.storageClassName",
                f"storage class {sc!r} is not known on {stack.config.name} (storage_classes: {known}): the claim stays Pending",
                "use a class from storage_classes, or add it there if `oc get storageclass` shows it",
                config=setting,
            )


def _volume_setting(stack: Stack, obj: dict[str, Any], path: str, field: str = "storage_class") -> tuple[str | int, ...] | None:
    """The config path of `field` of the volume a claim comes from: a standalone claim's own volume, a volumeClaimTemplate's
    volume (its template is named after the volume); None for a claim of no volume of the config."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if path != "spec":  # spec.volumeClaimTemplates[i].spec
        index = int(path.split("[", 1)[1].split("]", 1)[0])
        name = (((obj.get("spec") or {}).get("volumeClaimTemplates") or [{}])[index].get("metadata") or {}).get("name")
    for i, v in enumerate(stack.config.volumes):
        if v.namespace == meta.get("namespace") and v.name == name:
            return ("volumes", i, field)
    return None


def _fix_setting(stack: Stack, patch: dict[str, Any]) -> tuple[str | int, ...] | None:
    meta = patch.get("metadata") or {}
    for i, f in enumerate(stack.config.pvc_fixes):
        if f.namespace == meta.get("namespace") and f.pvc == meta.get("name"):
            return ("pvc_fixes", i, "storage_class")
    return None


@rule(
    "access-mode",
    "A claim asks only for access modes its class provides, and a claim mounted by several pods is "
    "ReadWriteMany on an RWX-capable class (seed 004: RWX on nfs-csi, RWO only on ceph-rbd).",
)
def access_mode(stack: Stack) -> Iterator[Finding]:
    classes = {s.name: s for s in stack.config.storage_classes}
    users: Counter[tuple[str, str]] = Counter()  # (namespace, claim) -> pods mounting it
    for pod in stack.pods():
        for v in pod.spec.get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                users[(pod.namespace, claim)] += stack.pods_started(pod)
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
                        obj,
                        where,
                        f"storage class {sc.name!r} provides {', '.join(sc.access_modes)} only: a {m} claim stays Pending",
                        "use a class that provides it (storage_classes), or a per-pod volume (shared: false)",
                        config=_volume_setting(stack, o, path),
                    )
        elif sc_name is None and "ReadWriteMany" in modes:
            yield error(
                obj,
                where,
                "a ReadWriteMany claim on the cluster's default class, whose access modes the stack does not know: on a "
                "block-backed default it stays Pending",
                "name an RWX-capable class in the volume's storage_class (list it in storage_classes), or use shared: false",
                config=_volume_setting(stack, o, path),
            )
        if path != "spec":
            continue  # volumeClaimTemplates: one claim per pod
        meta = o.get("metadata") or {}
        n = users[(str(meta.get("namespace") or "default"), str(meta.get("name")))]
        if n > 1 and "ReadWriteMany" not in modes:
            yield error(
                obj,
                where,
                f"mounted by {n} pods, one per node, but not ReadWriteMany: all but the first stay ContainerCreating (Multi-Attach error)",
                "make the volume shared (ReadWriteMany) on an RWX-capable class, or per-pod (shared: false)",
                config=_volume_setting(stack, o, path, "shared"),
            )


# --- images, scripts, secrets, developer tools ------------------------------------------------------


@rule(
    "image",
    "Every container names an image, and an image from the internal registry comes from an ImageStream the stack "
    "builds or declares as existing (existing.image_streams); images RDMA pods use carry RDMA userspace (rdma-core, libibverbs). "
    "Warnings: an image not pinned by digest (a tag may move), and PYTHONPATH or PYTHONSTARTUP redirecting the image's Python.",
)
def image(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    built = {(b.namespace, b.name): b for b in config.images}
    declared = {(o.namespace, o.name) for o in config.existing.image_streams}
    for pod in stack.pods():
        for path, c in pod.containers():
            ref_ = str(c.get("image") or "")
            if not ref_:
                yield error(
                    pod.ref,
                    f"{path}.image",
                    "the container names no image: the pod is never created",
                    "set the workload's image",
                    setting="image",
                )
                continue
            yield from _mutable_image(pod, path, ref_, built)
            yield from _python_env(pod, path, c)
            if ref_.startswith(INTERNAL_REGISTRY + "/"):
                ns, _, rest = ref_[len(INTERNAL_REGISTRY) + 1 :].partition("/")
                stream = rest.split("@")[0].split(":")[0]
                if (ns, stream) not in built and (ns, stream) not in declared:
                    yield error(
                        pod.ref,
                        f"{path}.image",
                        f"ImageStream {ns}/{stream} is neither built by this stack (images) nor declared as existing: the pod "
                        "would stay in ImagePullBackOff if nobody made it",
                        f"add an image build for {stream} in {ns}, or list {ns}/{stream} in existing.image_streams",
                        setting="image",
                    )
                elif ns != pod.namespace:
                    yield warning(
                        pod.ref,
                        f"{path}.image",
                        f"the image comes from ImageStream {ns}/{stream} in another namespace: its service account needs "
                        f"system:image-puller in {ns}",
                        f"`oc policy add-role-to-user system:image-puller system:serviceaccount:{pod.namespace}:"
                        f"{pod.spec.get('serviceAccountName')} -n {ns}`, or build the image in {pod.namespace}",
                        setting="image",
                        value=ref_,
                    )
                b = built.get((ns, stream))
                if b is not None and pod.env(c).get("LAUNCHER_MODE") == "rdma":
                    lacking = [p for p in RDMA_USERSPACE if p not in b.dockerfile]
                    if lacking:
                        yield error(
                            pod.ref,
                            f"{path}.image",
                            f"an RDMA pod runs image {ns}/{stream}, whose Dockerfile does not install {', '.join(lacking)}: NCCL "
                            "finds no IB provider and silently uses sockets",
                            f"install {' and '.join(RDMA_USERSPACE)} in the Dockerfile of images[{stream}]",
                            setting="image",
                        )


def _mutable_image(pod: PodView, path: str, image: str, built: dict[tuple[str, str], Any]) -> Iterator[Finding]:
    """A tag without a digest may move (`:latest` does on every push): pods of one workload, restarted or rescheduled
    at different times, then run different code. An image the stack builds itself is left out: its tag is the one its
    own BuildConfig moves, and its digest cannot be known before the build."""
    if "@" in image:
        return  # pinned: IMAGE@sha256:<64 hex digits> (the model checks the digest's form)
    if image.startswith(INTERNAL_REGISTRY + "/"):
        ns, _, rest = image[len(INTERNAL_REGISTRY) + 1 :].partition("/")
        if (ns, rest.split(":")[0]) in built:
            return
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else None
    shown = f"the tag {tag!r}" if tag and tag != "latest" else "`latest`" + ("" if tag else " (no tag means latest)")
    yield warning(
        pod.ref,
        f"{path}.image",
        f"image {image} names {shown} without a digest: the registry may move it, so pods started at different times "
        "(a restart, a reschedule, a second node) may run different code",
        f"pin it: {image.split('@')[0]}@sha256:<digest> (`skopeo inspect docker://{image}` prints it), or accept the warning "
        f'in accepted_warnings with the reason and value="{image}"',
        setting="image",
        value=image,
    )


# Python's environment variables that reach the training process (the launcher itself runs isolated: python3 -I).
PYTHON_ENV = {
    "PYTHONPATH": "puts its folders before the image's site-packages for every Python the command starts (torchrun and each "
    "rank): a stray module there (a `torch/` or `json.py` in a workspace) shadows the image's, differently on each node",
    "PYTHONSTARTUP": "is read by interactive Python only (an `oc exec` session), never by the training: in a workload's "
    "environment it is almost certainly a leftover",
}


def _python_env(pod: PodView, path: str, container: dict[str, Any]) -> Iterator[Finding]:
    if "LAUNCHER_MODE" not in pod.env(container):
        return  # not a training container
    for e in container.get("env") or []:
        name = e.get("name")
        if name in PYTHON_ENV:
            yield warning(
                pod.ref,
                f"{path}.env[{name}]",
                f"{name} {PYTHON_ENV[name]}",
                "install the code into the image (or `pip install -e` it), or name paths in args; if it is meant, accept the "
                "warning in accepted_warnings with the reason and the variable's value",
                setting=f"env.{name}",
                value=str(e.get("value") or ""),
            )


@rule(
    "secret-ref",
    "Environment read from a Secret names one the stack declares as existing (existing.secrets): the "
    "pod would otherwise stop in CreateContainerConfigError.",
)
def secret_ref(stack: Stack) -> Iterator[Finding]:
    declared = {(o.namespace, o.name) for o in stack.config.existing.secrets}
    for pod in stack.pods():
        for path, c in pod.containers():
            for e in c.get("env") or []:
                ref_ = ((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                if ref_ and (pod.namespace, ref_) not in declared:
                    yield error(
                        pod.ref,
                        f"{path}.env[{e.get('name')}]",
                        f"Secret {pod.namespace}/{ref_} is not declared in existing.secrets: nothing says it exists",
                        f"create it (`oc create secret generic {ref_} -n {pod.namespace} ...`) and list it in existing.secrets",
                    )


@rule("route-port", "Every Route targets a port its Service has, and its Service selects pods that serve it.")
def route_port(stack: Stack) -> Iterator[Finding]:
    services = {((o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")): o for o in stack.of_kind("Service")}
    for r in stack.of_kind("Route"):
        meta = r.get("metadata") or {}
        spec = r.get("spec") or {}
        svc = services.get((meta.get("namespace"), (spec.get("to") or {}).get("name")))
        target = (spec.get("port") or {}).get("targetPort")
        if svc is None:
            yield error(
                ref(r),
                "spec.to.name",
                f"Route to Service {(spec.get('to') or {}).get('name')!r}, which the stack does not declare",
                "expose the port through the workload's ports (route: true)",
            )
            continue
        ports = (svc.get("spec") or {}).get("ports") or []
        if not any(p.get("name") == target or p.get("port") == target for p in ports):
            yield error(
                ref(r),
                "spec.port.targetPort",
                f"the Route targets port {target!r}, which Service {meta.get('namespace')}/{svc['metadata']['name']} does not have: "
                "the router answers 503",
                "name a port of the Service",
            )


@rule(
    "debugger-route",
    "No Route reaches a debugger's port (a port named debugpy, or 5678) unless the port says why (route_reason, printed "
    "with every check): a debugger runs whatever code its client sends, so a Route hands the pod, its GPUs, data and "
    "service account to anyone who reaches the router. `oc port-forward` reaches it from the user's own machine only.",
)
def debugger_route(stack: Stack) -> Iterator[Finding]:
    entries = {(w.namespace, w.name): path[:2] for path, w in stack.config.located_workloads()}  # a variant's ports are its source's
    for r in stack.of_kind("Route"):
        meta = r.get("metadata") or {}
        at = entries.get((str(meta.get("namespace")), str((meta.get("labels") or {}).get(INSTANCE))))
        if at is None:
            continue
        target = ((r.get("spec") or {}).get("port") or {}).get("targetPort")
        w = stack.config.workloads[int(at[1])]
        for k, p in enumerate(w.ports):
            if target not in (p.name, p.port) or not (p.name in DEBUGGER_PORT_NAMES or p.port in DEBUGGER_PORTS):
                continue
            if p.route_reason:
                yield info(
                    ref(r),
                    "spec.port.targetPort",
                    f"the Route exposes the debugger port {p.name} ({p.port}) outside the cluster; its route_reason: {p.route_reason}",
                    f"set route: false once the reason no longer holds (`oc port-forward POD {p.port}` reaches it from your machine)",
                    config=(*at, "ports", k, "route_reason"),
                )
            else:
                yield error(
                    ref(r),
                    "spec.port.targetPort",
                    f"the Route exposes the debugger port {p.name} ({p.port}) outside the cluster: whoever reaches the router can "
                    "run any code in the pod, with its GPUs, data and service account",
                    f"set route: false and reach it with `oc port-forward POD {p.port}`; if it must be routed, say why in the "
                    "port's route_reason (printed with every check)",
                    config=(*at, "ports", k, "route"),
                )


@rule(
    "shm-size",
    "/dev/shm (a memory emptyDir) fits in the container's memory limit: what is written there counts "
    "against it, and a larger size is an OOM kill waiting to happen. Below 64 MiB, the runtime's own size, it warns (NCCL).",
)
def shm_size(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        limits = [_limit(c) for _, c in pod.containers()]
        for i, v in enumerate(pod.spec.get("volumes") or []):
            size = ((v.get("emptyDir") or {}).get("medium") == "Memory") and (v.get("emptyDir") or {}).get("sizeLimit")
            limit = max((x for x in limits if x is not None), default=None)
            if size and limit is not None and quantity_value(str(size)) > limit:
                yield error(
                    pod.ref,
                    pod.at(f"spec.volumes[{i}].emptyDir.sizeLimit"),
                    f"/dev/shm may grow to {size}, more than the memory limit of the container: filling it gets the pod OOM-killed",
                    "set shm_size below the workload's memory limit",
                    setting="shm_size",
                )
            if size and v.get("name") == "dshm" and quantity_value(str(size)) < 64 * MIB:
                yield warning(
                    pod.ref,
                    pod.at(f"spec.volumes[{i}].emptyDir.sizeLimit"),
                    f"/dev/shm is {size}, less than the 64 MiB a container gets without it: NCCL's shared-memory transport and "
                    "DataLoader workers run out of it ('unhandled system error', bus errors)",
                    "set shm_size to 1Gi or more (the seeds ran with 4Gi to 32Gi), or accept the warning with the reason and "
                    f'value="{size}"',
                    setting="shm_size",
                    value=str(size),
                )


def _limit(container: dict[str, Any]) -> Any:
    value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    try:
        return quantity_value(str(value)) if value is not None else None
    except ValueError:
        return None


# --- scheduling ----------------------------------------------------------------------------------


_ANY_VALUE = ("Exists",)  # a toleration's value that matches any: no taint value is a tuple


def _tolerated(tolerations: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """What a pod's tolerations match, as (key, effect or None, value or _ANY_VALUE for Exists): built once per pod, so
    each taint is a lookup and the rule stays linear in tolerations and taints, not their product."""
    out = set()
    for t in tolerations:
        value = _ANY_VALUE if t.get("operator", "Equal") == "Exists" else t.get("value")
        out.add((t.get("key"), t.get("effect") or None, value))
    return out


def _tolerates(tolerated: set[tuple[Any, ...]], taint: Any) -> bool:
    # A toleration matches its key with any effect (none named) or the taint's, and any value (Exists) or the taint's.
    return any((taint.key, effect, value) in tolerated for effect in (None, taint.effect) for value in (_ANY_VALUE, taint.value))


@rule(
    "gpu-toleration",
    "Every GPU pod tolerates the taints the stack says its GPU nodes carry (gpu_tolerations), or it "
    "stays Pending forever (NERC's nvidia.com/gpu.product taint).",
)
def gpu_toleration(stack: Stack) -> Iterator[Finding]:
    taints = stack.config.gpu_tolerations
    for pod in stack.pods():
        if not any(_amount(c.get("resources") or {}, "limits", GPU) for _, c in pod.containers()):
            continue
        tolerated = _tolerated(pod.spec.get("tolerations") or [])
        for t in taints:
            if not _tolerates(tolerated, t):
                yield error(
                    pod.ref,
                    pod.at("spec.tolerations"),
                    f"the GPU nodes are tainted {t.key}{'=' + t.value if t.value else ''}:{t.effect or '*'} and this GPU pod does "
                    "not tolerate it: it stays Pending",
                    "let the program add gpu_tolerations to every GPU pod (components/training.py scheduling)",
                    config=("gpu_tolerations",),
                )


@rule(
    "control-plane-nodes",
    "No GPU pod selects or tolerates the control plane's nodes (node-role.kubernetes.io/master, control-plane, arbiter, "
    "in a node selector, node affinity or toleration; a toleration without key and with operator Exists tolerates every "
    "taint, theirs too): a training pod there takes the CPU, memory and network the API server and etcd need.",
)
def control_plane_nodes(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    entries = {(w.namespace, w.name): path[:2] for path, w in config.located_workloads()}  # a variant's fields are its source's
    fix = (
        "remove it: GPU pods belong on the GPU nodes (node_sets, gpu_node_selector) and tolerate their taints by key "
        "(gpu_tolerations). On a compact cluster the control-plane nodes are workers too: select them by their GPU label"
    )
    for pod in stack.pods():
        if not _gpus(pod):
            continue
        own = entries.get((pod.namespace, pod.instance))
        w = stack.workload(pod)
        # Where each rendered value comes from: the stack's GPU settings, then the workload's own (components/training.py).
        selectors: dict[str, tuple[str | int, ...]] = {key: ("gpu_node_selector", key) for key in config.gpu_node_selector}
        tolerations: list[tuple[str | int, ...]] = [("gpu_tolerations", i) for i in range(len(config.gpu_tolerations))]
        if own and w:
            selectors.update({key: (*own, "node_selector", key) for key in w.node_selector})
            tolerations += [(*own, "tolerations", i) for i in range(len(w.tolerations))]
        for key in pod.spec.get("nodeSelector") or {}:
            if key in CONTROL_PLANE_ROLES:
                yield error(
                    pod.ref,
                    pod.at(f"spec.nodeSelector[{key}]"),
                    f"the GPU pod selects the control plane's nodes ({key})",
                    fix,
                    config=selectors.get(key),
                )
        for i, t in enumerate(pod.spec.get("tolerations") or []):
            key = t.get("key") or ""
            if key not in CONTROL_PLANE_ROLES and (key or t.get("operator") != "Exists"):
                continue
            what = f"the control plane's taint {key}" if key else "every taint (no key, operator Exists), the control plane's included"
            at = tolerations[i] if i < len(tolerations) else None
            yield error(pod.ref, pod.at(f"spec.tolerations[{i}]"), f"the GPU pod tolerates {what}", fix, config=at)
        affinity = ((pod.spec.get("affinity") or {}).get("nodeAffinity")) or {}
        terms = ((affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or []
        terms = [*terms, *((p.get("preference") or {}) for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])]
        for term in terms:
            for e in term.get("matchExpressions") or []:
                if e.get("key") in CONTROL_PLANE_ROLES and e.get("operator") in ("In", "Exists"):
                    yield error(pod.ref, pod.at("spec.affinity.nodeAffinity"), f"the GPU pod's node affinity asks for {e['key']}", fix)


def _hostnames(pod: PodView) -> tuple[str, list[str]]:
    """('In'|'NotIn'|'', hostnames) of the pod's required node affinity on kubernetes.io/hostname."""
    aff = ((pod.spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in aff.get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            if e.get("key") == "kubernetes.io/hostname" and e.get("operator") in ("In", "NotIn"):
                return str(e["operator"]), list(e.get("values") or [])
    return "", []


def _gpus(pod: PodView) -> int:
    return sum(_amount(c.get("resources") or {}, "limits", GPU) for _, c in pod.containers())


@rule(
    "capacity",
    "Every running pod of the stack (workloads and enabled bandwidth checks) can be scheduled at once on the "
    "nodes the stack counts on (node_sets): GPUs per node, one pod of a workload per node, node pins. Pending pods "
    "never start, and an enabled check would wait out its deadline.",
)
def capacity(stack: Stack) -> Iterator[Finding]:
    config = stack.config
    # The nodes as the search takes them: a named node each (pods pin them by name), and a count set's nodes as one
    # entry standing for all of them (identical, and never pinned), so the setup grows with entries, not with 4,096 nodes.
    nodes: dict[str, int] = {}  # entry -> GPUs of each of its nodes
    counts: dict[str, int] = {}  # entry -> how many nodes it stands for, where more than one
    for s in config.node_sets:
        for n in s.nodes:
            nodes[n] = s.gpus_per_node
        if not s.nodes:
            nodes[f"{s.name}#"] = s.gpus_per_node  # `#` is in no node name (a label value)
            counts[f"{s.name}#"] = s.count or 0
    named = {n for s in config.node_sets for n in s.nodes}
    everywhere = tuple(nodes)
    pinned: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}  # a pin -> its candidates, once per distinct pin
    groups: list[Group] = []
    changed: dict[str, str] = {}  # group -> how this change (against the committed render) made it run, or more of it
    for pod in stack.pods():
        if pod.replicas <= 0:
            continue
        op, hosts = _hostnames(pod)
        if op == "In":
            unknown = [h for h in hosts if h not in named]
            if unknown:
                yield error(
                    pod.ref,
                    pod.at("spec.affinity.nodeAffinity"),
                    f"pinned to {', '.join(unknown)}, which are not among the nodes the stack counts on (node_sets)",
                    "pin only nodes listed in node_sets (names as `oc get nodes` shows them)",
                )
        pin = (op, tuple(hosts))
        if pin not in pinned:
            if op == "In":
                pinned[pin] = tuple(h for h in hosts if h in named)
            elif op == "NotIn":
                avoided = set(hosts)
                pinned[pin] = tuple(n for n in everywhere if n not in avoided)
            else:
                pinned[pin] = everywhere
        spread = bool((pod.spec.get("affinity") or {}).get("podAntiAffinity")) or pod.replicas == 1
        groups.append(Group(pod.ref, pod.replicas, _gpus(pod), pinned[pin], spread))
        how = _started_by_this_change(stack, pod, groups[-1])
        if how:
            changed[pod.ref] = how
    result = place(nodes, groups, counts=counts)
    if result.placed:
        return
    if result.exhausted:
        yield warning(
            f"Stack {config.name}",
            "node_sets",
            "the placement search gave up before deciding whether every running pod fits at once",
            "run fewer workloads at once, or check the placement by hand",
            config=("node_sets",),
        )
        return
    culprits = _unplaceable(nodes, counts, groups, changed) or [result.unplaced.name if result.unplaced else f"Stack {config.name}"]

    def short(group: str) -> str:  # `StatefulSet ns/name` -> name: the workload's name in the stack file
        return group.rsplit("/", 1)[-1]

    demand = "; ".join(f"{short(g.name)}: {g.pods} x {g.gpus} GPUs" for g in sorted(groups, key=lambda g: g.name))
    supply = "; ".join(f"{s.name}: {s.size} node(s) x {s.gpus_per_node} GPUs" for s in config.node_sets)
    named_culprits = ", ".join(short(c) + (f" ({changed[c]})" if c in changed else "") for c in culprits)
    yield error(
        culprits[0],
        "spec.replicas",
        f"the running workloads cannot all be scheduled at once: no placement fits {named_culprits} beside the others, so "
        f"{'its' if len(culprits) == 1 else 'their'} pods would stay Pending. They ask for {demand}, and the stack counts on {supply}",
        "stop a workload (state: stopped), disable a bandwidth check, shrink one (nodes), or count more nodes in node_sets",
        setting="state" if changed.get(culprits[0], "").startswith(("started", "added")) else "",
    )


def _started_by_this_change(stack: Stack, pod: PodView, group: Group) -> str:
    """How the change against the committed render (stack.previous) makes this pod group ask for more: `started by this
    change`, `N pods, was M`, ...; "" when it asked for as much before, or when there is no committed render."""
    if not stack.previous:
        return ""
    before = (stack.previous.get("workloads") or {}).get(pod.instance) or (stack.previous.get("bandwidth_checks") or {}).get(pod.instance)
    if not isinstance(before, dict):
        return "added by this change"
    if before.get("state", "running") != "running" or not before.get("replicas", group.pods):
        return "started by this change"
    if before.get("replicas") != group.pods:
        return f"{group.pods} pods, was {before.get('replicas')}"
    if before.get("gpus_per_node") != group.gpus:
        return f"{group.gpus} GPUs per pod, was {before.get('gpus_per_node')}"
    return ""


def _unplaceable(nodes: dict[str, int], counts: dict[str, int], groups: list[Group], changed: dict[str, str]) -> list[str]:
    """The groups this change made ask for more that do not fit beside what ran before, in the order of the config:
    the workloads to name first. Empty when what ran before no longer fits on its own (a node set shrank), or when
    nothing changed: the search's own culprit is named then."""
    before = [g for g in groups if g.name not in changed]
    if not changed or not place(nodes, before, counts=counts).placed:
        return []
    fitting: list[Group] = []
    out = []
    for g in (g for g in groups if g.name in changed):
        if place(nodes, [*before, *fitting, g], counts=counts).placed:
            fitting.append(g)
        else:
            out.append(g.name)
    return out


# --- the whole stack ------------------------------------------------------------------------------


# The API server's limits on what an object carries (k8s.io/apimachinery ValidateAnnotations: TotalAnnotationSizeLimitB).
ANNOTATIONS_MAX = 256 * 1024


@rule(
    "api-limits",
    "Every rendered object passes the API server's own validation of what it carries: its annotations (a reason written "
    "into one, say) take at most 256 KiB in all, every label key is a qualified name and every label value at most 63 "
    "characters of the label grammar, and the whole object fits etcd's request limit (1.5 MiB). Otherwise `pulumi up` "
    "stops half-way, on the first object refused.",
)
def api_limits(stack: Stack) -> Iterator[Finding]:
    for obj, shown in [*((o, ref(o)) for o in stack.objects), *((p, ref(p) + " (patch)") for p in stack.patches)]:
        pod = pod_view(obj)
        metas = [("metadata", obj.get("metadata") or {})] + ([(pod.at("metadata"), pod.meta)] if pod and pod.base else [])
        for where, meta in metas:
            annotations = meta.get("annotations") or {}
            size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
            if size > ANNOTATIONS_MAX:
                yield error(
                    shown,
                    f"{where}.annotations",
                    f"its annotations take {size} bytes, over the {ANNOTATIONS_MAX} the API server takes (the object is refused)",
                    "shorten the text the config writes into it (a reason, a description): keep long text in the stack's notes",
                )
            for key, value in (meta.get("labels") or {}).items():
                problem = qualified_name_problem(str(key))
                if not problem and not is_label_value(str(value)):
                    problem = f"its value {str(value)[:80]!r} is not a label value"
                if problem:
                    yield error(
                        shown,
                        f"{where}.labels[{key}]",
                        f"the label {str(key)[:80]!r} is refused by the API server: {problem}",
                        "a label key is [DNS subdomain/]name with a name of at most 63 characters, a value at most 63 letters, "
                        "digits, '-', '_' and '.', starting and ending with a letter or digit: name what the label comes from so",
                    )
        size = len(json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > OBJECT_MAX:
            yield error(
                shown,
                "",
                f"the object takes {size} bytes, over the {OBJECT_MAX} the API server takes in one request (etcd's limit)",
                "move long text (scripts, environment values) into a volume or several ConfigMaps",
            )


# Characters that make text display otherwise than it reads to a program (Trojan Source, CVE-2021-42574): the bidi
# embeddings and overrides (U+202A..U+202E) and isolates (U+2066..U+2069), and the zero-width ones.
HIDDEN = frozenset([*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"])
_HIDDEN_PATTERN = re.compile("[" + "".join(sorted(HIDDEN)) + "]")


@rule(
    "hidden-characters",
    "No text of the config (a script, a Dockerfile, a command, an environment value, a name) holds a bidi override or "
    "isolate or a zero-width character: they make the text display otherwise than it runs (a warning, since text in a "
    "right-to-left language may need them).",
)
def hidden_characters(stack: Stack) -> Iterator[Finding]:
    dumped = stack.config.model_dump()
    # One search of the whole text first: a stack without them (nearly every one) is not walked string by string.
    if not _HIDDEN_PATTERN.search(json.dumps(dumped, ensure_ascii=False)):
        return
    for path, text in _texts(dumped, ()):
        found = sorted({c for c in text if c in HIDDEN})
        if not found:
            continue
        first = min(text.index(c) for c in found)
        names = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, '')}".strip() for c in found)
        yield warning(
            f"Stack {stack.config.name}",
            located(path, stack.config),
            f"the text holds {names} (first at character {first + 1}): it displays otherwise than it runs, so a reviewer "
            "does not see what it does",
            "retype the text without them (`grep -nP '[\\x{200B}-\\x{200D}\\x{202A}-\\x{202E}\\x{2060}\\x{2066}-\\x{2069}\\x{FEFF}]'` "
            "finds them); if they are meant (right-to-left text), accept the warning in accepted_warnings with the reason",
            config=path,
        )


def _texts(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string of a dumped config with its path (dict keys are names the model's grammars already restrict)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _texts(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _texts(v, (*path, i))


@rule(
    "unique-objects",
    "No object is declared twice: `pulumi up` refuses a program with two resources of one type and "
    "name, and the API server keeps only one of two objects with one name.",
)
def unique_objects(stack: Stack) -> Iterator[Finding]:
    seen: dict[tuple[Any, ...], list[str]] = {}
    for o in stack.objects:
        meta = o.get("metadata") or {}
        key = (o.get("apiVersion"), o.get("kind"), meta.get("namespace"), meta.get("name"))
        # The source of a derived object is its workload's instance label (NAME-PORT Routes, NAME-dev Services, ...).
        seen.setdefault(key, []).append(str((meta.get("labels") or {}).get(INSTANCE) or "the stack"))
    for (_, kind, ns, name), sources in sorted(seen.items(), key=str):
        if len(sources) > 1:
            yield error(
                f"{kind} {ns}/{name}" if ns else f"{kind} {name}",
                "metadata.name",
                f"declared {len(sources)} times (from {', '.join(sources)}): `pulumi up` stops with a duplicate URN",
                "give each workload, port, volume and script a name whose derived names (NAME-PORT, NAME-headless, "
                "VOLUME-WORKLOAD-ORDINAL) are unique in its namespace",
            )


@rule(
    "orphaned-claims",
    "A change that would detach a StatefulSet's per-pod claims (renaming the workload, its volume, "
    "or moving it) is flagged: the old claims stay with their data, unused, and the pods start on new, empty ones.",
)
def orphaned_claims(stack: Stack) -> Iterator[Finding]:
    if not stack.previous:
        return
    before: dict[str, str] = {}
    for name, w in (stack.previous.get("workloads") or {}).items():
        for claim in w.get("per_pod_claims") or []:
            before[claim] = name
    now = {c for p in stack.pods() for c in _claims_of(p, stack.pods_started(p))}
    lost = sorted(c for c in before if c not in now and _ordinal_kept(c, before[c], stack))
    by_workload: dict[str, list[str]] = {}
    for c in lost:
        by_workload.setdefault(before[c], []).append(c)
    for name, claims in sorted(by_workload.items()):
        entry, because = _orphaned_by(stack, name)
        yield warning(
            f"Workload {name}",
            "name / mounts[].volume",
            f"the committed render gives {name!r} the per-pod claims {', '.join(claims)}; after this change{because} no pod "
            "mounts them: they keep their data but the pods start on new, empty claims",
            "keep the workload's and the volume's names (and namespace), or move the data into the new claims first "
            "(e.g. a pod that mounts both); delete the old claims by hand when they are no longer needed",
            config=entry,
            value=", ".join(claims),
        )


def _orphaned_by(stack: Stack, name: str) -> tuple[ConfigPath | None, str]:
    """The config entry whose change left a workload's claims unmounted, and how, as far as the config tells: the workload
    itself where it is still there (moved, or its volume renamed), else the workload of its namespace whose switch to TCP
    dropped it as a TCP variant (named like its source). None for a workload renamed or removed: no entry is left."""
    entries = stack.config.located_workloads()
    for path, w in entries:
        if w.name == name:
            return path, ""
    was = ((stack.previous or {}).get("workloads") or {}).get(name) or {}
    if was.get("mode") != "tcp":
        return None, ""  # not a TCP variant: renamed or removed
    rdma_before = set(_was(stack, str(was.get("namespace")), "mode", "rdma"))
    switched = [(p, w) for p, w in entries if w.name in rdma_before and w.transport == "tcp" and not w.tcp_variants]
    switched.sort(key=lambda pw: not name.startswith(pw[1].name + "-"))  # its source first: variants are named after it
    if switched and (len(switched) == 1 or name.startswith(switched[0][1].name + "-")):
        path, w = switched[0]
        return (*path, "transport"), f" (the TCP switch of {w.name!r}, which drops its tcp_variants)"
    return None, ""


def _claims_of(pod: PodView, pods: int) -> list[str]:
    """The per-pod claims of a StatefulSet's `pods` pods (they exist whether it runs or is stopped)."""
    if pod.owner.get("kind") != "StatefulSet":
        return []
    templates = (pod.owner.get("spec") or {}).get("volumeClaimTemplates") or []
    return [f"{pod.namespace}/{t['metadata']['name']}-{pod.name}-{r}" for t in templates for r in range(pods)]


def _ordinal_kept(claim: str, workload: str, stack: Stack) -> bool:
    """A claim is orphaned by a rename or a move, not by scaling the same workload down (the
    retention policy keeps those, and scaling up again reattaches them)."""
    for pod in stack.pods():
        if pod.owner.get("kind") == "StatefulSet" and pod.name == workload:
            prefix = [
                f"{pod.namespace}/{t['metadata']['name']}-{pod.name}-"
                for t in (pod.owner.get("spec") or {}).get("volumeClaimTemplates") or []
            ]
            if any(claim.startswith(p) for p in prefix):
                return False
    return True


@rule(
    "hand-made",
    "Every object the stack lists as made by hand (hand_made) is one it declares, so the import plan adopts what is really there.",
)
def hand_made(stack: Stack) -> Iterator[Finding]:
    """The finding names the line of the HandMade(...) call in the stack module where it is known (a stack built in
    Python), says which change of the config left the object undeclared (a workload's switch to TCP, a namespace
    without RDMA pods, ...), and gives a fix that fits a list comprehension, as the committed stacks write them."""
    declared = {(o.get("kind"), (o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")) for o in stack.objects}
    entries: list[HandMade] = list(getattr(stack.config, "hand_made", []) or [])
    origins = [provenance.call_line(stack.config, ("hand_made", i)) for i in range(len(entries))]
    missing = {i for i, h in enumerate(entries) if (h.kind, h.namespace, h.name) not in declared}
    for i in sorted(missing):
        h, origin = entries[i], origins[i]
        where = f"{h.namespace}/{h.name}" if h.namespace else h.name
        at = _shown(origin)
        because, temporary = _undeclared_because(stack, h)
        listed = f"listed as made by hand at {at} (HandMade)" if at else "listed as made by hand (hand_made)"
        yield warning(
            f"{h.kind} {where}",
            f"hand_made[{i}]",
            f"{listed}, but the stack does not declare it: {because}. The import plan leaves it out, and Pulumi neither "
            "adopts nor deletes it",
            _hand_made_fix(entries, origins, missing, i)
            + (", or, if the switch is temporary, accept this warning in accepted_warnings with that reason" if temporary else ""),
            config=("hand_made", i),
        )


def _shown(origin: tuple[str, int] | None) -> str:
    """A source line as `clusters/NAME.py:N` (relative to the project when it is inside it)."""
    return provenance.shown(origin)


def _hand_made_fix(entries: list[HandMade], origins: list[tuple[str, int] | None], missing: set[int], i: int) -> str:
    h, origin = entries[i], origins[i]
    at = _shown(origin)
    if origin is None:
        return f"remove hand_made[{i}], or correct its kind, namespace or name"
    loop = [j for j, o in enumerate(origins) if o == origin]
    if len(loop) == 1:
        return f"remove the HandMade(...) at {at}, or correct its kind, namespace or name"
    # One call makes several entries: a comprehension (or a loop). Say what to leave out of what it iterates.
    same_ns = [j for j in loop if entries[j].namespace == h.namespace]
    same_name = [j for j in loop if entries[j].name == h.name]
    if h.namespace and len({entries[j].namespace for j in loop}) > 1 and all(j in missing for j in same_ns):
        return (
            f"drop {h.namespace} from the namespaces the comprehension at {at} iterates (it makes {len(loop)} entries, "
            f"{len(same_ns)} of them in {h.namespace}, none declared)"
        )
    if len({entries[j].name for j in loop}) > 1 and all(j in missing for j in same_name):
        return f"drop what makes the name {h.name} from what the comprehension at {at} iterates (it makes {len(loop)} entries)"
    return (
        f"leave this one out of the comprehension at {at} (an `if` on its kind, namespace and name; it makes "
        f"{len(loop)} entries), or correct its kind, namespace or name"
    )


def _undeclared_because(stack: Stack, h: HandMade) -> tuple[str, bool]:
    """Why the stack does not declare a hand-made object, as far as its config says; and whether a workload's
    transport switch is the reason (a switch back would declare it again)."""
    c = stack.config
    ns = h.namespace
    if ns and ns not in c.namespaces:
        return f"{ns} is not one of the stack's namespaces ({', '.join(c.namespaces)})", False
    sec = c.security
    if h.kind == "NetworkAttachmentDefinition" and ns:
        fabric = c.fabric
        if fabric is None:
            return "the stack has no fabric, so no pod attaches an SR-IOV network", False
        if h.name not in {a.network for a in fabric.attachments}:
            return f"fabric.attachments names no network {h.name}", False
        if fabric.device_access != "sriov" or fabric.nad_mode != "copy":
            return f"fabric.nad_mode is {fabric.nad_mode} (device_access {fabric.device_access}): the stack makes no NAD copies", False
        return _without_rdma(stack, ns, "the NAD copies")
    scc = h.name.removeprefix(SCC_USE_ROLE_PREFIX)
    if h.kind == "SecurityContextConstraints" or (h.kind == "ClusterRole" and h.name.startswith(SCC_USE_ROLE_PREFIX)):
        if scc != sec.scc:
            return f"the stack's SCC is {sec.scc or 'none'} (security.scc), not {scc}", False
        if not sec.create:
            return f"security.create is false: the stack uses the existing SCC {scc} and declares neither it nor its use-role", False
    if h.kind == "RoleBinding" and h.name.startswith(SCC_USE_ROLE_PREFIX) and ns:
        if scc != sec.scc:
            return f"the stack grants its own SCC {sec.scc or '(none)'} (security.scc), not {scc}", False
        if not sec.grant:
            return "security.grant is false: the stack grants no SCC", False
        return _without_scc(stack, ns, scc)
    if h.kind == "ServiceAccount" and ns:
        return f"security.service_accounts lists no {h.name} in {ns}", False
    if h.kind == "PersistentVolumeClaim" and ns:
        return f"volumes has no volume {h.name} in {ns}", False
    return "nothing in its config renders this object (check its kind, namespace and name)", False


def _was(stack: Stack, ns: str, key: str, value: str) -> list[str]:
    """The workloads the committed render ran in `ns` with that output value (mode rdma, scc NAME)."""
    before = (stack.previous or {}).get("workloads") or {}
    return sorted(n for n, w in before.items() if isinstance(w, dict) and w.get("namespace") == ns and w.get(key) == value)


def _names(kind: str, names: list[str]) -> str:
    return f"{kind}{'s' * (len(names) != 1)} {', '.join(names)}"


def _without_rdma(stack: Stack, ns: str, what: str) -> tuple[str, bool]:
    """Why no pod in `ns` attaches the SR-IOV networks any more."""
    specs = [w for w in stack.config.pod_specs() if w.namespace == ns]
    tcp = sorted(w.name for w in specs if w.transport == "tcp")
    now = {w.name for w in stack.config.all_workloads()}
    was_rdma = _was(stack, ns, "mode", "rdma")
    switched = [n for n in was_rdma if n in tcp]
    if switched:
        return f"the TCP switch of {_names('workload', switched)} no longer needs {what} in namespace {ns} (no RDMA pod left there)", True
    gone = [n for n in was_rdma if n not in now]
    if gone:
        return f"{_names('workload', gone)}, the RDMA pods of namespace {ns} in the committed render, no longer exist", False
    if tcp:
        return f"no RDMA pod runs in namespace {ns}: {_names('workload', tcp)} use{'s' * (len(tcp) == 1)} transport tcp", True
    off = sorted(b.name for b in stack.config.bandwidth_checks if b.namespace == ns and b.transport == "rdma" and not b.enabled)
    if off:
        return f"no RDMA pod runs in namespace {ns}: {_names('bandwidth check', off)} {'is' if len(off) == 1 else 'are'} disabled", False
    return f"no workload or enabled bandwidth check runs in namespace {ns}", False


def _without_scc(stack: Stack, ns: str, scc: str) -> tuple[str, bool]:
    """Why no pod in `ns` runs under the stack's SCC any more (its use-grant is declared only where one does)."""
    specs = [w for w in stack.config.pod_specs() if w.namespace == ns]
    was = _was(stack, ns, "scc", scc)
    tcp = {w.name for w in specs if w.transport == "tcp"}
    switched = [n for n in was if n in tcp]
    if switched:
        return f"the TCP switch of {_names('workload', switched)} no longer needs the grant of SCC {scc} in namespace {ns}", True
    if specs:
        under = sorted({stack.config.scc_of(w) for w in specs})
        why = f" ({_names('workload', sorted(tcp))} use{'s' * (len(tcp) == 1)} transport tcp)" if tcp else ""
        return f"no pod in namespace {ns} runs under SCC {scc}: its pods run under {', '.join(under)}{why}", bool(tcp)
    return f"no workload or enabled bandwidth check runs in namespace {ns}", False


def cluster_host(api_host: str | None) -> str | None:
    """The host an api_host names, compared between stacks: without scheme, path, port, case and trailing dot
    (`https://API.example.org:6443/` and `api.example.org` are one API server); None when the stack names none."""
    host = (api_host or "").strip().lower().split("://", 1)[-1].split("/", 1)[0]
    if host.startswith("["):  # an IPv6 address, [::1]:6443
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".") or None


@rule(
    "shared-projects",
    "No two stacks of the project deploy to one API server (api_host), nor into one project on it: a copied stack "
    "module that still names the cluster and the projects it was copied from declares its objects over another "
    "team's, and each `pulumi up` (and `destroy`) acts on what it declares, whoever else declared it too.",
)
def shared_projects(stack: Stack) -> Iterator[Finding]:
    """Two stacks are on the same cluster when both name an api_host and it is the same host (`cluster_host`). A
    stack without api_host is compared with no other: the config alone cannot tell which cluster it reaches (its
    Pulumi stack file's kubernetes:context decides), and a project name alone proves nothing, since project names
    are per cluster: Barcelona and Cairo both deploy into a project named nccl-test, on two clusters, with two
    API servers. So a shared namespace warns only on the same cluster; a shared api_host warns whatever the
    namespaces (two stacks may share a cluster knowingly: accept the warning, with the reason)."""
    host = cluster_host(stack.config.api_host)
    if host is None:
        return
    name = stack.config.name
    for other in sorted(stack.others, key=lambda c: c.name):
        if other.name == name or cluster_host(other.api_host) != host:
            continue
        yield warning(
            f"Stack {name}",
            "api_host",
            f"stack {other.name} deploys to the same API server ({host}): either this stack was copied from it and "
            "still names that cluster, or both share the cluster and must keep out of each other's projects",
            f"set api_host (and namespaces, node_sets, storage_classes, the Pulumi stack file's kubernetes:context: README "
            f"'Add a cluster') to this stack's own cluster; if both really deploy to {host}, accept the warning in "
            "accepted_warnings with the reason",
            config=("api_host",),
        )
        theirs = set(other.namespaces)
        for i, ns in enumerate(stack.config.namespaces):
            if ns in theirs:
                yield warning(
                    f"Namespace {ns}",
                    f"namespaces[{i}]",
                    f"stack {other.name} deploys into project {ns} on the same cluster ({host}) too: an object of one kind "
                    "and name there is one object for both stacks, so the second stack's `pulumi up` fails on AlreadyExists "
                    "(or, taking it over, both stacks own it), and either stack's destroy deletes it for both",
                    "deploy this stack into its own projects: change namespaces and every namespace= of its service "
                    "accounts, volumes, workloads, scripts, images, bandwidth checks, existing objects and hand_made entries",
                    config=("namespaces", i),
                )


@rule(
    "accepted-warnings",
    "Every warning a stack accepts (accepted_warnings) still matches a finding, and the value it names (an image) is still the "
    "one the warning is about, so acceptances do not outlive what they accepted.",
)
def accepted_warnings(stack: Stack) -> Iterator[Finding]:
    return iter(())  # `check` reports stale acceptances under this id
