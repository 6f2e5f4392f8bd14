"""Security: each pod pins the SCC its memlock strategy needs and its service account may use it; the SCC admits
what the pod asks for (capabilities, root, privileged containers) and is what OpenShift ships when it is one of
OpenShift's; a container holds no more than its strategy needs; a NetworkPolicy fences every workload's pods.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from config.kube import REQUIRED_SCC, SCC_USE_ROLE_PREFIX
from config.openshift import BUILTIN_SCCS, OPENSHIFT_SCCS, SccFacts
from config.values import STRATEGY_CAPABILITIES, STRATEGY_RUNS_AS_ROOT
from policy.core import Finding, PodView, Stack, error, info, rule, warning

# OpenShift 4.11+ lets every authenticated user, service accounts included, use restricted-v2 (and, where it ships it,
# restricted-v3: the manifests bind both to system:authenticated): pods that run under them need no grant.
SCCS_FOR_EVERYONE = frozenset({"restricted-v2", "restricted-v3"})
# The default SCCs OpenShift ships a `system:openshift:scc:NAME` use-role for (all but its components' own).
SHIPPED_SCCS = BUILTIN_SCCS - {"machine-api-termination-handler", "node-exporter"}


def _security(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _added(container: dict[str, Any]) -> list[str]:
    return list((_security(container).get("capabilities") or {}).get("add") or [])


def _strategy(pod: PodView, container: dict[str, Any]) -> str | None:
    """A training container's memlock strategy (the launcher's default: none); None for any other container."""
    env = pod.env(container)
    return env.get("LAUNCHER_MEMLOCK_STRATEGY", "none") if "LAUNCHER_MODE" in env else None


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
                pod.at_annotation(REQUIRED_SCC),
                "the pod does not pin its SCC: admission takes whichever SCC the service account may use that admits the "
                "pod, so a missing grant shows up later as missing capabilities instead of a clear rejection",
                f"annotate the pod with {REQUIRED_SCC}: {want or config.security.unprivileged_scc}",
            )
        elif want is not None and got != want:
            yield error(
                pod.ref,
                pod.at_annotation(REQUIRED_SCC),
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
                pod.at_annotation(REQUIRED_SCC),
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


def _seccomp(pod: PodView, container: dict[str, Any]) -> str:
    """The seccomp profile admission reads for a container (the container's field, else the pod's), as its annotation
    value: runtime/default, unconfined, localhost/PATH; '' for none."""
    profile = _security(container).get("seccompProfile") or (pod.spec.get("securityContext") or {}).get("seccompProfile") or {}
    kind = profile.get("type")
    if kind == "RuntimeDefault":
        return "runtime/default"
    if kind == "Localhost":
        return f"localhost/{profile.get('localhostProfile', '')}"
    return "unconfined" if kind == "Unconfined" else ""


@rule(
    "scc-seccomp",
    "The SCC a pod runs under allows the seccomp profile its containers set: the program gives every container "
    "RuntimeDefault, which an SCC without seccompProfiles refuses ('seccomp may not be set': anyuid, restricted, nonroot, "
    "hostnetwork and hostaccess as OpenShift ships them).",
)
def scc_seccomp(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        name = stack.scc_of(pod)
        scc = stack.scc(name)
        if scc is None:
            continue  # scc-capabilities says the SCC is unknown
        for path, c in pod.containers():
            profile = _seccomp(pod, c)
            if not profile or scc.allows_seccomp(profile):
                continue
            allowed = ", ".join(sorted(scc.seccomp or ())) or "none"
            yield error(
                pod.ref,
                f"{path}.securityContext.seccompProfile",
                f"seccomp profile {profile} may not be set: SCC {name!r} allows {allowed} (its seccompProfiles"
                f"{', as OpenShift ships it' if scc.shipped else ''}), so admission refuses the pod ('seccomp may not be set')",
                "run the pods under an SCC that allows runtime/default: restricted-v2 or nonroot-v2 as OpenShift ships "
                "them, or the stack's own (security.create: true)",
                config=_shipped_cause(stack, name) if scc.shipped else None,
            )


@rule(
    "scc-user-namespace",
    "The SCC a pod runs under does not require a user namespace: restricted-v3 and nested-container (as OpenShift ships "
    "them, userNamespaceLevel RequirePodLevel) admit only pods with hostUsers: false, which the program's pods never set "
    "('Host Users must be set to false').",
)
def scc_user_namespace(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        name = stack.scc_of(pod)
        scc = stack.scc(name)
        if scc is None or not scc.user_namespace or pod.spec.get("hostUsers") is False:
            continue
        yield error(
            pod.ref,
            pod.at("spec.hostUsers"),
            f"SCC {name!r} admits only pods in a user namespace of their own (userNamespaceLevel RequirePodLevel"
            f"{', as OpenShift ships it' if scc.shipped else ''}) and the pod runs in the host's (hostUsers unset), so admission "
            "refuses it ('Host Users must be set to false')",
            "run the pods under restricted-v2 (every user may use it) or the stack's own SCC (security.create: true): the "
            "program runs no pod in a user namespace (a capability added there does not reach the host's memlock limit)",
            config=_shipped_cause(stack, name) if scc.shipped else None,
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
            brief=f"{len(pods)} pod template(s) run as root with {caps}, as memlock {strategy!r} needs (what checkov and such flag)",
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
    "judges such an SCC by the platform's facts (OPENSHIFT_SCCS in config/openshift.py), so a field claiming more (IPC_LOCK "
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
