"""Can the command pin memory (KNOWLEDGE.md's memlock table): the verdict, its causes and the fix for the declared
strategy, and the bash shim that makes a script's refused `ulimit -l` a no-op once pinning is proven."""

from __future__ import annotations

import errno
import os
import shlex
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .facts import INFINITY, PIN_HEADROOM, UNGUARDED_PIN_BYTES, CgroupMemory, MemlockFacts, fmt_bytes, fmt_limit, limit_value

CRIO_DEFAULT_MEMLOCK = 8 * 1024 * 1024  # what a container inherits when the node's default_ulimits is empty
LOC_PROT_ERR_NOTE = "if NCCL later reports IBV_WC_LOC_PROT_ERR, that is not a memlock symptom (a memlock shortfall makes ibv_reg_mr "
LOC_PROT_ERR_NOTE += "fail with 'Cannot allocate memory'); NCCL's own hint for it is PCI ACS breaking GPUDirect RDMA"
STRATEGY_HOWTO = {
    "node-limit": "node-limit: the cluster admin applies a MachineConfig to the GPU node pool that writes /etc/crio/crio.conf.d/99-memlock "
    'with [crio.runtime] default_ulimits = ["memlock=-1:-1"]; works for any uid with no capabilities (there is no CRI-O ulimit annotation)',
    "root-ipc-lock": "root-ipc-lock: an SCC with runAsUser RunAsAny that allows IPC_LOCK, granted to "
    "the service account; the pod sets runAsUser: 0 and adds IPC_LOCK; the limit then does not apply",
    "root-sys-resource": "root-sys-resource: as root-ipc-lock, plus SYS_RESOURCE allowed and added, "
    "so the launcher raises RLIMIT_MEMLOCK to unlimited (the seeds' `ulimit -l unlimited`)",
    "privileged": "privileged: securityContext.privileged: true with the privileged SCC (or one with "
    "allowPrivilegedContainer); grants every capability, least safe",
}
# Added capabilities never reach a non-root uid's effective set (KNOWLEDGE.md): these two work for one.
NON_ROOT_HOWTO = "; or ".join(STRATEGY_HOWTO[s] for s in ("node-limit", "privileged"))


@dataclass
class MemlockVerdict:
    ok: bool
    lines: List[str]
    problem: str = ""  # causes and fix, when not ok


def effective_pin_limit(f: MemlockFacts) -> Tuple[Optional[int], str]:  # None: no limit; and why
    soft = f.limit_after[0]
    if f.ipc_lock_survives_exec:
        return None, f"unlimited: CAP_IPC_LOCK is effective, so the RLIMIT_MEMLOCK of {fmt_limit(soft)} is moot"
    return (None, "unlimited (RLIMIT_MEMLOCK)") if soft == INFINITY else (soft, f"{fmt_limit(soft)} (the soft RLIMIT_MEMLOCK)")


def judge_memlock(strategy: str, f: MemlockFacts) -> MemlockVerdict:
    soft, hard = f.limit_after
    lines = [
        f"strategy: {strategy}",
        f"uid: {f.uid}",
        f"CapEff: {f.cap_eff:#018x} (IPC_LOCK {'effective' if f.ipc_lock else 'not effective'}, "
        f"SYS_RESOURCE {'effective' if f.sys_resource else 'not effective'})",
        f"RLIMIT_MEMLOCK: soft {fmt_limit(f.limit_before[0])}, hard {fmt_limit(f.limit_before[1])}",
    ]
    if limit_value(f.limit_before[0]) < limit_value(f.limit_before[1]):  # soft below hard: gather_memlock raised it
        raised = f"raised the soft RLIMIT_MEMLOCK to the hard limit, {fmt_limit(f.limit_before[1])} (needs no privilege)"
        lines.append(f"could not raise the soft RLIMIT_MEMLOCK to the hard limit: {f.soft_raise_error}" if f.soft_raise_error else raised)
    if f.raise_target is not None:
        wanted = "/".join(fmt_limit(v) for v in f.raise_target)
        raised = f"raised RLIMIT_MEMLOCK to {wanted} (soft/hard)"
        lines.append(f"could not raise RLIMIT_MEMLOCK to {wanted}: {f.raise_error}" if f.raise_error else raised)
    if f.limit_after != f.limit_before:
        lines.append(f"RLIMIT_MEMLOCK now: soft {fmt_limit(soft)}, hard {fmt_limit(hard)}")
    lines.append("effective pinning limit: " + effective_pin_limit(f)[1])
    size = fmt_bytes(f.proof_bytes)
    if f.proof_bytes != f.pin_bytes:
        unknown = "the container's memory limit is unknown, so nothing guards a bigger mlock against the OOM killer"
        lines.append(f"proof buffer: {size}, not LAUNCHER_PIN_BYTES {fmt_bytes(f.pin_bytes)}: {unknown}")
    if f.pin_blocked:
        lines.append(f"mlock of {size}: not attempted (the container's memory limit cannot hold it)")
        return MemlockVerdict(False, lines, "cannot prove memory pinning: " + f.pin_blocked)
    if f.pin_errno is None:
        return MemlockVerdict(True, [*lines, "pinning not checked (strategy none in tcp mode)"])
    if f.proof_bytes <= CRIO_DEFAULT_MEMLOCK:
        lines.append(f"warning: a {size} proof buffer fits CRI-O's 8 MiB default and proves nothing; raise LAUNCHER_PIN_BYTES")
    if f.pin_errno != 0:
        lines.append(f"mlock of {size}: FAILED ({errno.errorcode.get(f.pin_errno, f.pin_errno)}: {os.strerror(f.pin_errno)})")
        return MemlockVerdict(False, lines, diagnose_pinning(strategy, f))
    how = "IPC_LOCK is effective, so RLIMIT_MEMLOCK does not apply" if f.ipc_lock else f"within RLIMIT_MEMLOCK ({fmt_limit(soft)})"
    lines.append(f"mlock of {size}: ok ({how})")
    if f.ipc_lock and not f.ipc_lock_survives_exec and limit_value(soft) < f.pin_bytes:
        lost = f"IPC_LOCK is effective in the launcher but not ambient, and a non-root uid ({f.uid}) loses it at exec; "
        return MemlockVerdict(False, lines, lost + f"the training process would be held to {fmt_limit(soft)}. Fix: " + NON_ROOT_HOWTO)
    if not f.ipc_lock and soft != INFINITY:
        lines.append(f"note: the limit is finite ({fmt_limit(soft)}); NCCL may register more than the proof buffer; unlimited is safer")
    return MemlockVerdict(True, lines + strategy_notes(strategy, f))


def strategy_notes(strategy: str, f: MemlockFacts) -> List[str]:  # pinning works, maybe not for the declared reason
    notes = []
    if strategy == "node-limit" and f.limit_before[1] != INFINITY:  # CRI-O's default_ulimits sets the hard limit
        instead = "; pinning works through IPC_LOCK instead" if f.ipc_lock else ""
        notes.append(f"note: strategy node-limit, but this node's hard limit is {fmt_limit(f.limit_before[1])}{instead}")
    if strategy in ("root-ipc-lock", "root-sys-resource", "privileged") and f.uid != 0:
        notes.append(f"note: strategy {strategy} expects uid 0, but the container runs as uid {f.uid}")
    if strategy == "root-sys-resource" and f.raise_error:
        through = "IPC_LOCK" if f.ipc_lock else "the existing limit"
        notes.append(f"note: strategy root-sys-resource, but the limit could not be raised; pinning works through {through}")
    if strategy == "none":
        note = "note: memlock strategy none in rdma mode; pinning works here, but declare the strategy that makes it work"
        notes.append(note + " so the preflight can check it")
    if strategy == "privileged" and not f.holds_every_cap:
        notes.append("note: strategy privileged, but the container does not hold every capability")
    return notes


def diagnose_pinning(strategy: str, f: MemlockFacts) -> str:
    soft, hard = f.limit_after
    header = "cannot pin memory, which RDMA needs (ibv_reg_mr would fail with 'Cannot allocate memory'):\n"
    if f.ipc_lock or limit_value(soft) >= f.proof_bytes:
        # Neither the limit nor the strategy is at fault; blaming them would send the user the wrong way.
        moot = "IPC_LOCK is effective" if f.ipc_lock else f"RLIMIT_MEMLOCK ({fmt_limit(soft)}) covers the {fmt_bytes(f.proof_bytes)} buffer"
        refused = f"the kernel refused with {errno.errorcode.get(f.pin_errno or 0, f.pin_errno)}"
        if f.pin_errno in (errno.ENOMEM, errno.EAGAIN):
            refused += ", so memory itself is short: the container's memory cgroup (its limit, or what it already uses) or the node's "
            refused += "free memory"
        fix = "give the pod more memory, or lower LAUNCHER_PIN_BYTES well below its memory limit"
        return header + f"  cause: the memlock limit is not the cause ({moot}): {refused}\n  fix: {fix}"
    if f.uid != 0:
        cause = f"the container runs as non-root uid {f.uid}: capabilities added in securityContext.capabilities.add reach the "
        cause += f"effective set only for uid 0 (CapEff={f.cap_eff:#x}), so IPC_LOCK cannot lift the limit"
    else:
        cause = f"CAP_IPC_LOCK is not effective (CapEff={f.cap_eff:#x}): the container does not add IPC_LOCK, or the SCC that "
        cause += "admitted it (annotation openshift.io/scc) does not allow it"
    crio = " (CRI-O's default)" if soft == CRIO_DEFAULT_MEMLOCK else ""
    below = f"below the {f.proof_bytes // 1024} KB the launcher tried to pin"
    causes = [cause, f"RLIMIT_MEMLOCK is {fmt_limit(soft)}{crio}, hard {fmt_limit(hard)}, {below}"]
    if f.raise_target is not None and f.raise_error is not None:
        raise_failed = f"the limit could not be raised to unlimited ({f.raise_error}): raising a hard limit needs CAP_SYS_RESOURCE, "
        causes.append(raise_failed + f"which is {'effective' if f.sys_resource else 'not effective'}")
    # The fix for the declared strategy, now that the memlock limit is known to be the cause.
    if strategy == "none":
        fix = "the workload declares memlock strategy none but runs in rdma mode: choose one"
    elif strategy == "node-limit":
        fix = f"strategy node-limit, but this node's hard memlock limit is {fmt_limit(f.limit_before[1])}: the CRI-O default_ulimits "
        fix += "MachineConfig is not applied here, or the pod was scheduled outside the node pool that has it"
    elif strategy == "privileged" and not f.holds_every_cap:
        fix = f"strategy privileged, but the container does not hold every capability (CapEff={f.cap_eff:#x}): set "
        fix += "securityContext.privileged: true and grant an SCC that allows privileged containers"
    elif f.uid != 0:
        fix = f"strategy {strategy} needs uid 0: set the pod's runAsUser: 0 and grant an SCC with runAsUser RunAsAny"
    elif strategy == "root-ipc-lock" or f.sys_resource:
        fix = "strategy root-ipc-lock needs IPC_LOCK in capabilities.add and allowed by the SCC"
    else:
        fix = "strategy root-sys-resource needs SYS_RESOURCE in capabilities.add and allowed by the SCC; "
        fix += "or use root-ipc-lock, which needs IPC_LOCK only"
    others = "for a non-root uid only node-limit or privileged work: " + NON_ROOT_HOWTO
    fixes = [fix, others if f.uid != 0 else "strategies that work: " + "; or ".join(STRATEGY_HOWTO.values())]
    return header + "\n".join("  cause: " + c for c in causes) + "\n" + "\n".join("  fix: " + x for x in fixes)


def ulimit_moot_reason(f: MemlockFacts) -> str:  # why a script's failing `ulimit -l` does not matter; "": it does
    if f.pin_errno != 0 or f.pin_blocked:
        return ""
    (soft, hard), pinned = f.limit_after, fmt_bytes(f.proof_bytes)
    if f.ipc_lock_survives_exec:
        return f"CAP_IPC_LOCK is effective, so RLIMIT_MEMLOCK ({fmt_limit(soft)}) does not limit pinning; the launcher pinned {pinned}"
    within = f"RLIMIT_MEMLOCK (soft {fmt_limit(soft)}, hard {fmt_limit(hard)})"
    return f"the launcher pinned {pinned} within {within}; raising the hard limit needs CAP_SYS_RESOURCE"


BASH_ENV_SHIM = """\
# True for a memlock change: -l (with -H/-S) and a number, unlimited, hard or soft.
__launcher_memlock_change() {
    local __arg __memlock=0 __value=0
    for __arg in "$@"; do
        case "$__arg" in
            -*[!HSl]*) return 1 ;;
            -*l*) __memlock=1 ;;
            -?*) ;;
            unlimited|hard|soft) __value=1 ;;
            ''|*[!0-9]*) return 1 ;;
            *) __value=1 ;;
        esac
    done
    [ "$__memlock" = 1 ] && [ "$__value" = 1 ]
}
ulimit() {
    if __launcher_memlock_change "$@"; then
        builtin ulimit "$@" 2>/dev/null && return 0
        printf 'launcher: `ulimit %s` %s\\n' "$*" MESSAGE >&2
        return 0
    fi
    builtin ulimit "$@"
}
fi
"""


def bash_env_text(reason: str, chained: str) -> str:
    """Every non-interactive bash reads BASH_ENV first: a script's `set -e; ulimit -l unlimited` meets this `ulimit`."""
    message = shlex.quote(f"could not change the memlock limit, which is moot here: {reason}; continuing")
    head = "# Written by the launcher at container start; BASH_ENV names it (docs/launcher.md).\n"
    head += 'if [ -z "${__launcher_bash_env_read-}" ]; then\n__launcher_bash_env_read=1\n'
    if chained:
        head += f"if [ -r {shlex.quote(chained)} ]; then . {shlex.quote(chained)}; fi\n"
    return head + BASH_ENV_SHIM.replace("MESSAGE", message)


def pinning_section(strategy: str, f: MemlockFacts, cgroup: CgroupMemory, proves: bool, rdma: bool) -> Tuple[MemlockVerdict, str, str]:
    """The report's section; why `ulimit -l` is moot ("": it is not); the warning for a proof with no memory limit known."""
    verdict = judge_memlock(strategy, f)
    if proves and not cgroup.known:
        guard = f"unknown ({cgroup.note}); no out-of-memory guard, so the proof pins at most {fmt_bytes(UNGUARDED_PIN_BYTES)}"
        verdict.lines.insert(0, "container memory limit: " + guard)
    elif proves:
        limit = "none" if cgroup.limit is None else fmt_bytes(cgroup.limit)
        guard = "" if cgroup.limit is None else f"; the proof buffer plus {fmt_bytes(PIN_HEADROOM)} must fit"
        verdict.lines.insert(0, f"container memory limit: {limit} ({cgroup.source}){guard}")
    moot = ulimit_moot_reason(f) if verdict.ok else ""
    if moot:
        scripts = "`ulimit -l` in the workload's bash scripts: a failing raise is moot and does not stop them (BASH_ENV): "
        verdict.lines.append(scripts + moot)
    if rdma:
        verdict.lines.append("note: " + LOC_PROT_ERR_NOTE)
    unguarded = ""
    if not cgroup.known and f.pin_errno is not None:
        size = fmt_bytes(f.proof_bytes)
        if f.proof_bytes != f.pin_bytes:
            what = f"the proof pinned {size} instead of LAUNCHER_PIN_BYTES {fmt_bytes(f.pin_bytes)}, so it proves less than asked"
        else:
            what = f"LAUNCHER_PIN_BYTES ({size}) is within the {fmt_bytes(UNGUARDED_PIN_BYTES)} the launcher pins unguarded"
        unguarded = f"memory pinning ran without the out-of-memory guard: the container's memory limit is unknown ({cgroup.note}); {what}. "
        unguarded += "Fix: make the container's own cgroup readable where the launcher looks (memory.max, cgroup v2, or "
        unguarded += "memory/memory.limit_in_bytes, v1, under <sysfs>/fs/cgroup)"
    return verdict, moot, unguarded


def json_limit(value: int) -> Any:
    return "unlimited" if value == INFINITY else value


def pinning_summary(strategy: str, f: MemlockFacts, ok: bool, moot: str) -> Dict[str, Any]:  # the report's "pinning"
    effective, _ = effective_pin_limit(f)
    result = "not-attempted" if f.pin_blocked else "not-checked" if f.pin_errno is None else "failed" if f.pin_errno else "ok"
    return {
        "strategy": strategy,
        "ok": ok,
        "uid": f.uid,
        "cap_eff": f"{f.cap_eff:#x}",
        "ipc_lock": f.ipc_lock,
        "sys_resource": f.sys_resource,
        "limit_at_start": {"soft": json_limit(f.limit_before[0]), "hard": json_limit(f.limit_before[1])},
        "limit": {"soft": json_limit(f.limit_after[0]), "hard": json_limit(f.limit_after[1])},
        "effective_limit": "unlimited" if effective is None else effective,
        "limit_moot_by_ipc_lock": f.ipc_lock_survives_exec,
        "pin_bytes": f.pin_bytes,
        "proof_bytes": f.proof_bytes,
        "result": result,
        "ulimit_moot": moot or None,
    }
