"""Security: the SCC each pod pins, its grant, what the SCC admits; a container holds no more than its memlock strategy
needs; a NetworkPolicy fences every workload's pods."""

from collections.abc import Iterator
from functools import partial
from typing import Any

from config.kube import REQUIRED_SCC, SCC_USE_ROLE_PREFIX
from config.openshift import BUILTIN_SCCS, OPENSHIFT_SCCS
from config.values import MIB, STRATEGY_CAPABILITIES, STRATEGY_RUNS_AS_ROOT, quantity_value
from config.workloads import Workload
from policy.core import Finding, PodView, SccView, Stack, error, grouped, info, pod_entries, rule, warning

# OpenShift 4.11+ binds restricted-v2 (and restricted-v3) to system:authenticated: pods under them need no grant.
SCCS_FOR_EVERYONE = frozenset({"restricted-v2", "restricted-v3"})
# The default SCCs OpenShift ships a `system:openshift:scc:NAME` use-role for (all but its components' own).
SHIPPED_SCCS = BUILTIN_SCCS - {"machine-api-termination-handler", "node-exporter"}
FIX_STRATEGY = "set the workload's memlock (or defaults.memlock_rdma) to root-ipc-lock, root-sys-resource, privileged or node-limit"


def _security(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _added(container: dict[str, Any]) -> list[str]:
    return list((_security(container).get("capabilities") or {}).get("add") or [])


def _strategy(pod: PodView, container: dict[str, Any]) -> str | None:
    """A training container's memlock strategy (the launcher's default: none); None for any other container."""
    env = pod.env(container)
    return env.get("LAUNCHER_MEMLOCK_STRATEGY", "none") if "LAUNCHER_MODE" in env else None


def _under_sccs(stack: Stack) -> Iterator[tuple[PodView, str, SccView | None]]:
    for pod in stack.pods():
        name = stack.scc_of(pod)
        yield pod, name, stack.scc(name)


@rule("required-scc", "every pod pins the SCC its memlock strategy needs (openshift.io/required-scc)")
def required_scc(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():
        spec = stack.spec_of(pod)
        want = stack.config.scc_of(spec) if spec is not None else None
        pin_error = partial(error, pod.ref, pod.at_annotation(REQUIRED_SCC))
        if (got := pod.annotations.get(REQUIRED_SCC)) is None:
            yield pin_error(
                "the pod does not pin its SCC: admission takes whichever SCC the service account may use that admits the "
                "pod, so a missing grant shows up later as missing capabilities instead of a clear rejection",
                f"annotate the pod with {REQUIRED_SCC}: {want or stack.config.security.unprivileged_scc}",
            )
        elif want is not None and got != want:
            yield pin_error(f"the pod pins SCC {got!r}, but its memlock strategy runs under {want!r}", f"pin {want!r}")


def _grants(stack: Stack, scc: str, namespace: str, account: str) -> bool:
    """Whether a RoleBinding in the namespace (or a ClusterRoleBinding) gives the account the SCC's use-role."""
    role = SCC_USE_ROLE_PREFIX + scc
    groups = {"system:authenticated", "system:serviceaccounts", f"system:serviceaccounts:{namespace}"}
    for b in stack.of_kind("RoleBinding") + stack.of_kind("ClusterRoleBinding"):
        meta, role_ref = b.get("metadata") or {}, b.get("roleRef") or {}
        in_scope = b["kind"] == "ClusterRoleBinding" or meta.get("namespace") == namespace
        if not in_scope or (role_ref.get("kind"), role_ref.get("name")) != ("ClusterRole", role):
            continue
        subjects = [(s.get("kind"), s.get("name"), s.get("namespace") or meta.get("namespace")) for s in b.get("subjects") or []]
        if ("ServiceAccount", account, namespace) in subjects or any(kind == "Group" and name in groups for kind, name, _ in subjects):
            return True
    return False


@rule("scc-grant", "each pod's service account exists and may use the SCC the pod pins (seed 003)")
def scc_grant(stack: Stack) -> Iterator[Finding]:
    for pod in stack.pods():  # the model refuses a service account security.service_accounts does not list
        scc = stack.scc_of(pod)
        account = pod.spec.get("serviceAccountName") or "default"
        if scc in SCCS_FOR_EVERYONE or _grants(stack, scc, pod.namespace, account):
            continue
        yield error(
            pod.ref,
            pod.at("spec.serviceAccountName"),
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


@rule("scc-capabilities", "the SCC a pod runs under allows every capability it adds (seed 003: IPC_LOCK)")
def scc_capabilities(stack: Stack) -> Iterator[Finding]:
    for pod, name, scc in _under_sccs(stack):
        if scc is None:
            yield error(
                pod.ref,
                pod.at_annotation(REQUIRED_SCC),
                f"the pod runs under SCC {name!r}, which this stack neither creates nor describes: what it allows is unknown",
                f"set security.scc: {name} with create: false and its existing_* fields",
            )
            continue
        for path, c in pod.containers():
            if denied := [cap for cap in _added(c) if not scc.facts.allows(cap)]:
                allowed = ", ".join(sorted(scc.facts.capabilities or ())) or "none"
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
                elif not scc.created and name == stack.config.security.scc:  # one cause for every pod under it: at the fact
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
    """The container's (else the pod's) seccomp profile as admission reads it: runtime/default, localhost/PATH, ..."""
    profile = _security(container).get("seccompProfile") or (pod.spec.get("securityContext") or {}).get("seccompProfile") or {}
    if (kind := profile.get("type")) == "Localhost":
        return f"localhost/{profile.get('localhostProfile', '')}"
    return {"RuntimeDefault": "runtime/default", "Unconfined": "unconfined"}.get(str(kind), "")


@rule("scc-seccomp", "the SCC a pod runs under allows the RuntimeDefault seccomp profile its containers set")
def scc_seccomp(stack: Stack) -> Iterator[Finding]:
    for pod, name, scc in _under_sccs(stack):
        if scc is None:
            continue  # scc-capabilities says the SCC is unknown
        for path, c in pod.containers():
            profile = _seccomp(pod, c)
            if not profile or scc.facts.allows_seccomp(profile):
                continue
            allowed = ", ".join(sorted(scc.facts.seccomp or ())) or "none"
            yield error(
                pod.ref,
                f"{path}.securityContext.seccompProfile",
                f"seccomp profile {profile} may not be set: SCC {name!r} allows {allowed} (its seccompProfiles"
                f"{', as OpenShift ships it' if scc.shipped else ''}), so admission refuses the pod ('seccomp may not be set')",
                "run the pods under an SCC that allows runtime/default: restricted-v2 or nonroot-v2 as OpenShift ships "
                "them, or the stack's own (security.create: true)",
                config=_shipped_cause(stack, scc),
            )


@rule("scc-user-namespace", "the SCC a pod runs under does not require a user namespace (hostUsers: false)")
def scc_user_namespace(stack: Stack) -> Iterator[Finding]:
    for pod, name, scc in _under_sccs(stack):
        if scc is None or not scc.facts.user_namespace or pod.spec.get("hostUsers") is False:
            continue
        yield error(
            pod.ref,
            pod.at("spec.hostUsers"),
            f"SCC {name!r} admits only pods in a user namespace of their own (userNamespaceLevel RequirePodLevel"
            f"{', as OpenShift ships it' if scc.shipped else ''}) and the pod runs in the host's (hostUsers unset), so admission "
            "refuses it ('Host Users must be set to false')",
            "run the pods under restricted-v2 (every user may use it) or the stack's own SCC (security.create: true): the "
            "program runs no pod in a user namespace (a capability added there does not reach the host's memlock limit)",
            config=_shipped_cause(stack, scc),
        )


@rule("memlock-strategy", "the way a pod pins memory can work (KNOWLEDGE.md's table); why root strategies run as root")
def memlock_strategy(stack: Stack) -> Iterator[Finding]:
    yield from _root_strategy_reason(stack)
    node_limit_real = stack.config.node_level.crio_memlock_unlimited
    for pod, _, scc in _under_sccs(stack):
        for path, c in pod.containers():
            if (mode := pod.env(c).get("LAUNCHER_MODE")) is None:
                continue  # not a training container: the launcher does not run it
            strategy = _strategy(pod, c) or "none"
            where = f"{path}.env[LAUNCHER_MEMLOCK_STRATEGY]"
            strategy_error = partial(error, pod.ref, where, fix=FIX_STRATEGY)
            if strategy not in STRATEGY_CAPABILITIES:
                yield strategy_error(f"unknown memlock strategy {strategy!r}")
                continue
            if mode == "rdma" and strategy == "none":
                yield strategy_error(
                    "an RDMA pod with memlock strategy 'none' can pin only CRI-O's default 8 MiB: memory registration fails "
                    "with 'Cannot allocate memory'"
                )
            if strategy in STRATEGY_RUNS_AS_ROOT:
                uid_error = partial(error, pod.ref, f"{path}.securityContext.runAsUser")
                if missing := [cap for cap in STRATEGY_CAPABILITIES[strategy] if cap not in _added(c)]:
                    yield error(
                        pod.ref,
                        f"{path}.securityContext.capabilities.add",
                        f"memlock strategy {strategy!r} needs {', '.join(missing)} added to the container",
                        f"add {', '.join(missing)} to securityContext.capabilities.add",
                    )
                if pod.run_as_user(c) != 0:
                    yield uid_error(
                        f"memlock strategy {strategy!r} needs uid 0: added capabilities reach the effective set only for "
                        "root (CRI-O sets no ambient capabilities), so a non-root uid cannot pin memory",
                        "set runAsUser: 0 on the container, or use memlock node-limit",
                    )
                if scc is not None and not scc.facts.allows_root:
                    yield uid_error(
                        f"memlock strategy {strategy!r} runs as uid 0, but SCC {scc.name!r} does not admit root "
                        f"({scc.where}): admission rejects the pod",
                        "run under an SCC with runAsUser RunAsAny (security.create: true makes one), or use memlock node-limit",
                        config=_shipped_cause(stack, scc),
                    )
            elif strategy == "privileged":
                privileged_error = partial(error, pod.ref, f"{path}.securityContext.privileged")
                if not _security(c).get("privileged"):
                    yield privileged_error(
                        "memlock strategy 'privileged' but the container is not privileged: it gets no capability to pin memory",
                        "set securityContext.privileged: true, or choose another memlock strategy",
                    )
                if scc is not None and not scc.facts.privileged:
                    yield privileged_error(
                        f"memlock strategy 'privileged' needs a privileged container, which SCC {scc.name!r} does not allow "
                        f"({scc.where}): admission rejects the pod",
                        "use memlock root-ipc-lock under an SCC that allows IPC_LOCK (security.create: true), or an SCC "
                        "allowing privileged containers (with security.broad_grant_reason)",
                        config=_shipped_cause(stack, scc),
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


@rule("pin-bytes", "an RDMA pod's memory limit holds the launcher's pin test (defaults.pin_bytes) and 512 MiB")
def pin_bytes(stack: Stack) -> Iterator[Finding]:
    pinned = stack.config.defaults.pin_bytes
    for _, w in pod_entries(stack.config):
        limit = quantity_value(w.mem_limit if isinstance(w, Workload) else w.memory)
        if w.uses_rdma and pinned + 512 * MIB > limit:
            what = "workload" if isinstance(w, Workload) else "bandwidth check"
            yield error(
                stack.owner(w),
                "spec.template.spec.containers[0].resources.limits.memory",
                f"the launcher pins {pinned} bytes to prove memory locking, but {what} {w.name!r} may use {limit} bytes in all: it "
                "would be OOM-killed at start",
                "Lower pin_bytes or raise the memory limit (leave 512Mi for the process)",
                config=("defaults", "pin_bytes"),
            )


def _shipped_cause(stack: Stack, scc: SccView) -> tuple[str | int, ...] | None:
    """The config field that names a shipped SCC the pods run under (one cause for every pod under it), if one does."""
    sec = stack.config.security
    field = {sec.unprivileged_scc: "unprivileged_scc", sec.scc: "scc"}.get(scc.name)  # security.scc where both name it
    return ("security", field) if scc.shipped and field else None


def _root_strategy_reason(stack: Stack) -> Iterator[Finding]:
    """Once per stack and root strategy: why its pods run as root with capabilities (what scanners such as checkov flag)."""
    by_strategy = grouped((s, pod.ref) for pod, _, c in stack.containers() if (s := _strategy(pod, c)) in STRATEGY_RUNS_AS_ROOT)
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


@rule("least-privilege", "a container holds no more than its memlock strategy needs; no unused API token")
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
            if (strategy := _strategy(pod, c)) is None or strategy == "privileged":
                continue  # privileged containers are the privileged-container rule's business
            ctx = _security(c)
            caps = ctx.get("capabilities") or {}
            extra = sorted(set(caps.get("add") or []) - set(STRATEGY_CAPABILITIES.get(strategy, ())))  # unknown: memlock-strategy says
            checks = [
                ("ALL" not in (caps.get("drop") or []), "does not drop ALL capabilities"),
                (bool(extra), f"adds {', '.join(extra)}, which memlock {strategy!r} does not need"),
                (ctx.get("allowPrivilegeEscalation") is not False, "allows privilege escalation"),
                ((ctx.get("seccompProfile") or {}).get("type") != "RuntimeDefault", "has no RuntimeDefault seccomp profile"),
                (
                    strategy not in STRATEGY_RUNS_AS_ROOT and ctx.get("runAsNonRoot") is not True,
                    f"may run as root, which memlock {strategy!r} does not need",
                ),
            ]
            if problems := [problem for bad, problem in checks if bad]:
                yield error(
                    pod.ref,
                    f"{path}.securityContext",
                    f"the container {'; '.join(problems)}",
                    "let the program render the securityContext from the memlock strategy (components/training.py container_security)",
                )


@rule("privileged-container", "no privileged container unless its workload says why (privileged_reason)")
def privileged_container(stack: Stack) -> Iterator[Finding]:
    for pod, path, c in stack.containers():
        if not _security(c).get("privileged"):
            continue
        reason = spec.privileged_reason if (spec := stack.spec_of(pod)) else None
        if reason:
            message = f"privileged container (every capability and host device); the workload's privileged_reason: {reason}"
            fix = "move to a device plugin and a least-privilege SCC when the cluster offers one"
        else:
            message = "privileged container (every capability and host device) without a stated reason"
            fix = f"set privileged_reason on {pod.instance!r} to say why, or use memlock root-ipc-lock under a least-privilege SCC"
        yield (warning if reason else error)(pod.ref, f"{path}.securityContext.privileged", message, fix, setting="privileged_reason")


@rule("privileged-scc", "the stack's SCC grants only what its pods need, or says why (broad_grant_reason)")
def privileged_scc(stack: Stack) -> Iterator[Finding]:
    sec = stack.config.security
    scc = stack.scc(sec.scc) if sec.scc and sec.scc not in SCCS_FOR_EVERYONE else None  # their grant gives nobody anything
    broad = scc.facts.judge(stack.config.scc_needs(scc.name)).broad if scc else []
    if scc is None or not broad:
        return
    obj = f"SecurityContextConstraints {scc.name}"
    allows = ", ".join(words for _, words in broad[:-1]) + (" and " if len(broad) > 1 else "") + broad[-1][1]
    allows += f" (OpenShift ships {scc.name!r} so)" if scc.shipped else ""
    fact = broad[0][0]  # the SCC's own field where it is on the cluster (created or shipped), else the config's fact
    where = scc.facts.field_of(fact) if scc.created or scc.shipped else f"security.{sec.FACT_FIELDS[fact]}"
    bound = sorted(
        f"{(b.get('metadata') or {}).get('namespace')}/{s.get('name')}"
        for b in stack.of_kind("RoleBinding")
        if (b.get("roleRef") or {}).get("name") == SCC_USE_ROLE_PREFIX + scc.name
        for s in b.get("subjects") or []
    )
    granted, reason = f"is granted to {', '.join(bound) or 'nobody'}", sec.broad_grant_reason
    if reason:
        message = f"SCC {scc.name!r} allows {allows} and {granted}; the stack's broad_grant_reason: {reason}"
        fix = "replace it with a least-privilege SCC (security.create: true) as soon as the reason no longer holds"
    else:
        message = f"SCC {scc.name!r} allows {allows}, more than its pods need, and {granted} without a stated reason"
        fix = (
            "set security.broad_grant_reason to say why this stack accepts it, or use a least-privilege SCC (security.create: "
            "true, with a name of your own)"
        )
    cause = None if scc.created else ("security", "scc") if scc.shipped and reason else ("security", "broad_grant_reason")
    yield (warning if reason else error)(obj, where, message, fix, config=cause)


@rule("shipped-scc", "the config's existing_* facts of an SCC OpenShift ships agree with what it ships")
def shipped_scc(stack: Stack) -> Iterator[Finding]:
    sec = stack.config.security
    if (facts := OPENSHIFT_SCCS.get(sec.scc or "")) is None or sec.create:
        return
    claimed = sec.existing_facts()
    for fact, name in sec.FACT_FIELDS.items():
        if fact == "host_namespaces":  # reported where they claim more than OpenShift ships; the others either way
            differs = bool(claimed.host_namespaces) and not facts.host_namespaces
        else:
            differs = claimed.exceeds(facts, fact) or (fact != "host_paths" and facts.exceeds(claimed, fact))
        if name not in sec.model_fields_set or not differs:
            continue  # a default nobody wrote claims nothing
        yield warning(
            f"SecurityContextConstraints {sec.scc}",
            f"security.{name}",
            f"{sec.says(fact)}, but OpenShift ships {sec.scc!r} with {facts.said(fact)}: the preflight uses OpenShift's facts, "
            "not this field",
            f"remove security.{name} (the existing_* fields describe only SCCs the program does not know), or name an SCC "
            "that allows what the pods need (security.create: true makes a least-privilege one)",
            config=("security", name),
        )


@rule("network-policy", "a NetworkPolicy of the stack selects every workload's pods (TCPStore, NCCL sockets)")
def network_policy(stack: Stack) -> Iterator[Finding]:
    # The ingress policies by namespace and one label they require (None: every pod): a pod reads only those it could match.
    selectors: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for p in stack.of_kind("NetworkPolicy"):
        spec = p.get("spec") or {}
        if "Ingress" in (spec.get("policyTypes") or []):
            match = (spec.get("podSelector") or {}).get("matchLabels") or {}
            selectors.setdefault(((p.get("metadata") or {}).get("namespace"), next(iter(match.items()), None)), []).append(match)
    for pod in stack.pods():
        labels = pod.meta.get("labels") or {}
        if not any(
            all(labels.get(k) == v for k, v in match.items())
            for label in [None, *labels.items()]
            for match in selectors.get((pod.namespace, label), ())
        ):
            yield error(
                pod.ref,
                pod.at("metadata.labels"),
                "no NetworkPolicy selects these pods: anyone on the pod network can reach the rendezvous port and inject "
                "into the training run",
                "render the workload's NetworkPolicy (components/training.py network_policy)",
            )
