"""The decisions, pure functions of Config and Facts, gathered into a Plan; and its report, for people (stderr) and
for tools (one LAUNCHER_REPORT JSON line, the JSON file's object; docs/launcher.md)."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .contract import DEFAULT_BASH_ENV_FILE, Config, ConfigError, parse_decimal, shown
from .facts import Facts
from .memlock import bash_env_text, pinning_section, pinning_summary
from .nccl_env import NetworkDecision, decide_devices, decide_nccl, decide_network, describe_port

REPORT_PREFIX = "LAUNCHER_REPORT "  # the log line tools look for: this, then the report as compact JSON
REPORT_SCHEMA = "launcher-report/v1"
BANNER = "=" * 24
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "NPROC_PER_NODE", "WORLD_SIZE")
PYTHON_NOTES = {
    "PYTHONPATH": "torchrun and the training script import from it first",
    "PYTHONSTARTUP": "read by interactive interpreters only, not by torchrun or a training script",
    "PYTHONHOME": "empty or this interpreter's own prefix: changes nothing",
}


@dataclass
class Plan:
    env: Dict[str, str] = field(default_factory=dict)
    argv: List[str] = field(default_factory=list)
    sections: List[Tuple[str, List[str]]] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    hostfile: Optional[Tuple[str, str]] = None  # (path, text) of the DeepSpeed hostfile to write
    bash_env: Optional[Tuple[str, str]] = None  # (path, text) of the file BASH_ENV names
    summary: Dict[str, Any] = field(default_factory=dict)  # the JSON report, less verdict, errors, warnings
    unset: List[str] = field(default_factory=list)  # inherited variables removed: the command must not see them


def node_rank(cfg: Config) -> Tuple[int, str]:  # and where it came from
    if cfg.completion_index is not None:
        source, raw = "JOB_COMPLETION_INDEX", cfg.completion_index
    elif cfg.nnodes == 1:
        return 0, "single node"
    else:
        match = re.search(r"-([0-9]+)$", cfg.pod_name)
        if not match:
            unset = "has no trailing -N ordinal and JOB_COMPLETION_INDEX is unset"
            raise ConfigError(f"cannot tell the node rank: POD_NAME {shown(cfg.pod_name)} {unset}")
        source, raw = "POD_NAME", match.group(1)
    rank = parse_decimal(raw)
    if rank is None:
        raise ConfigError(f"{source} gives node rank {shown(raw)}, not a decimal integer below 2**63")
    if not 0 <= rank < cfg.nnodes:
        raise ConfigError(f"node rank {rank} (from {source}) is outside 0..{cfg.nnodes - 1} for LAUNCHER_NNODES={cfg.nnodes}")
    return rank, (f"POD_NAME {cfg.pod_name}" if source == "POD_NAME" else source)


def rendezvous(cfg: Config, plan: Plan) -> None:
    """Underscored flags: every torchrun reads them."""
    try:
        rank, source = node_rank(cfg)
    except ConfigError as exc:
        plan.errors.append(str(exc))
        return
    env = {"MASTER_ADDR": cfg.master_addr, "MASTER_PORT": str(cfg.master_port)}
    env.update(NNODES=str(cfg.nnodes), NODE_RANK=str(rank), NPROC_PER_NODE=str(cfg.gpus_per_node))
    plan.env.update(env, WORLD_SIZE=str(cfg.nnodes * cfg.gpus_per_node))
    flags = ("NNODES", "NPROC_PER_NODE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")  # --nnodes ... --master_port
    torchrun = ["torchrun", *(x for key in flags for x in ("--" + key.lower(), env[key]))]
    plan.argv = [*([] if cfg.run == "command" else torchrun), *cfg.args]
    ranks = f"node rank {rank} (from {source}) of {cfg.nnodes}; {cfg.gpus_per_node} processes per node"
    lines = [f"{ranks}; world size {plan.env['WORLD_SIZE']}", f"master {cfg.master_addr}:{cfg.master_port}"]
    plan.sections.append(("rendezvous", [*lines, "command: " + " ".join(shlex.quote(a) for a in plan.argv)]))


def describe_python(python_env: Mapping[str, str], isolated: bool, plan: Plan) -> None:
    isolation = "isolated (python3 -I): no PYTHON* variable, user site-packages or script directory reaches it"
    lines = ["launcher: " + (isolation if isolated else "NOT isolated (started without python3 -I, as the pod's command does it)")]
    for key, value in python_env.items():
        note = PYTHON_NOTES.get(key, "")
        lines.append(f"{key}={shown(value)}: passed on to the command" + (f"; {note}" if note else ""))
    plan.sections.append(("python", lines if python_env else [*lines, "no PYTHON* variable set"]))
    if not isolated and python_env.get("PYTHONPATH"):
        why = f"the launcher was started without python3 -I, so PYTHONPATH={shown(python_env['PYTHONPATH'])} was on its own import "
        plan.warnings.append(why + "path too: a module there named like a standard library one would replace it. Start it with python3 -I")


def decide(cfg: Config, facts: Facts, bash_env_file: str = DEFAULT_BASH_ENV_FILE) -> Plan:
    plan = Plan()
    sel = decide_devices(cfg, facts)
    net = decide_network(cfg, sel, facts.net_names)
    rdma = cfg.mode == "rdma" and not net.fell_back
    memlock, moot, unguarded = pinning_section(cfg.strategy, facts.memlock, facts.cgroup, cfg.proves_pinning, rdma)
    plan.sections.append(("memory pinning", memlock.lines))
    plan.errors += ([memlock.problem] if rdma and not memlock.ok else []) + net.errors
    plan.warnings += sel.warnings + net.warnings + ([unguarded] if unguarded else [])
    if not memlock.ok and not rdma:
        plan.warnings.append("pinning failed, which tcp mode does not need; continuing. " + memlock.problem)
    plan.sections.append(("rdma devices", [describe_port(p, sel) for p in facts.ports] + sel.lines or ["none found"]))
    nccl = decide_nccl(cfg, facts, net)
    plan.env.update(nccl.env)
    plan.sections.append(("nccl", nccl.lines or ["nothing decided (see the errors below)"]))
    plan.warnings += nccl.warnings
    plan.errors += nccl.errors
    plan.unset = [o["name"] for o in nccl.overrides if o["new"] is None]
    if moot:
        # The image's BASH_ENV is read first, unless it is this very file (a launcher run inside a launched pod).
        plan.bash_env = (bash_env_file, bash_env_text(moot, cfg.image_bash_env if cfg.image_bash_env != bash_env_file else ""))
        plan.env["BASH_ENV"] = bash_env_file
    describe_python(cfg.python_env, facts.isolated, plan)
    if cfg.deepspeed_hostfile:
        plan.hostfile = (cfg.deepspeed_hostfile, "".join(f"{host} slots={cfg.gpus_per_node}\n" for host in cfg.hosts))
        lines = [f"{cfg.deepspeed_hostfile}:", *(f"  {line}" for line in plan.hostfile[1].splitlines())]
        plan.sections.append(("deepspeed hostfile", lines))
    rendezvous(cfg, plan)
    plan.summary = summary(cfg, facts, net, nccl.overrides, pinning_summary(cfg.strategy, facts.memlock, memlock.ok, moot), plan)
    return plan


def summary(cfg: Config, facts: Facts, net: NetworkDecision, overrides: List[Any], pinning: Dict[str, Any], plan: Plan) -> Dict[str, Any]:
    gid_index, cgroup = plan.env.get("NCCL_IB_GID_INDEX"), facts.cgroup
    hostfile = {"path": cfg.deepspeed_hostfile, "hosts": list(cfg.hosts), "slots": cfg.gpus_per_node}
    return {
        "mode": cfg.mode,
        "transport": "tcp-fallback" if net.fell_back else cfg.mode,
        "devices": {
            "chosen": [p.name for p in net.selected],
            "host_not_attached": [p.name for p in net.sel.host_ports],
            "mapping": {i: list(ds) for i, ds in net.sel.mapping.items()},
            "every_active_port": not net.sel.mapping,  # nothing mapped: every ACTIVE port
            "link_layer": cfg.link_layer or None,
            "seen": [{"port": p.name, "state": p.state, "link_layer": p.link_layer} for p in facts.ports],
        },
        "gid_index": parse_decimal(gid_index) if gid_index else None,
        "interfaces": {
            "expected": list(cfg.rdma_interfaces),
            "missing": [i for i in cfg.rdma_interfaces if i not in facts.net_names],
            "in_pod": list(facts.net_names),
        },
        "socket_ifname": plan.env.get("NCCL_SOCKET_IFNAME"),
        "nccl": {k: v for k, v in sorted(plan.env.items()) if k.startswith("NCCL_")},
        "explicit_nccl": sorted(cfg.explicit_nccl),
        "overridden": overrides,
        "pinning": pinning,
        "container_memory": {
            "known": cgroup.known,
            "limit": None if not cgroup.known else "none" if cgroup.limit is None else cgroup.limit,
            "source": cgroup.source or None,
        },
        "python": {"isolated": facts.isolated, "passed_on": dict(cfg.python_env)},
        "bash_env": plan.bash_env[0] if plan.bash_env else None,
        "deepspeed_hostfile": hostfile if plan.hostfile else None,
        "rendezvous": {k: plan.env[k] for k in RENDEZVOUS} if plan.argv else None,
        "command": plan.argv,
    }


def render_report(cfg: Optional[Config], plan: Optional[Plan], errors: Sequence[str] = ()) -> str:
    out = [f"{BANNER} launcher report{f' ({cfg.mode} mode)' if cfg else ''} BEGIN {BANNER}"]
    for title, lines in plan.sections if plan else []:
        out += [f"{title}:", *(f"  {line}" for line in lines)]
    if plan and plan.warnings:
        out += ["warnings:", *("  WARNING: " + w.replace("\n", "\n  ") for w in plan.warnings)]
    errors = list(errors) + (plan.errors if plan else [])
    out += ["verdict: WOULD NOT START", *("  ERROR: " + e.replace("\n", "\n  ") for e in errors)] if errors else ["verdict: START"]
    return "\n".join([*out, f"{BANNER} launcher report END {BANNER}"]) + "\n"


def report_data(plan: Optional[Plan], errors: Sequence[str] = ()) -> Dict[str, Any]:
    errors = list(errors) + (plan.errors if plan else [])
    verdict = "would-not-start" if errors else "start"
    warnings = list(plan.warnings) if plan else []
    return {"schema": REPORT_SCHEMA, "verdict": verdict, "errors": errors, "warnings": warnings, **(plan.summary if plan else {})}


def report_line(data: Mapping[str, Any]) -> str:
    """One log line whatever the values hold: ensure_ascii escapes newlines, U+2028 and bytes that were not UTF-8."""
    return REPORT_PREFIX + json.dumps(data, separators=(",", ":"), ensure_ascii=True) + "\n"
