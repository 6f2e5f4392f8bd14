"""The launcher's input: the environment the program renders (components/training.py `launcher_env`), parsed and
checked in one place, every problem at once. What the launcher does with it: docs/launcher.md.

  LAUNCHER_MODE               rdma | tcp (required)
  LAUNCHER_MEMLOCK_STRATEGY   node-limit | root-ipc-lock | root-sys-resource | privileged | none (default)
  LAUNCHER_PIN_BYTES          the mlock proof's size (default 256 MiB; 1 byte .. 16 GiB)
  LAUNCHER_TCP_FALLBACK       true | false (default): rdma mode without an ACTIVE port runs over TCP instead of failing
  LAUNCHER_RDMA_INTERFACES    the pod's SR-IOV interfaces (net1,net2,...); the RDMA devices behind them are the pod's
  LAUNCHER_LINK_LAYER         InfiniBand | Ethernet, or the stack's infiniband | roce-v2 (any case); unset: any
  LAUNCHER_TCP_SOCKET_IFNAME  NCCL_SOCKET_IFNAME in tcp mode (default ^lo,docker0)
  LAUNCHER_SYSFS_ROOT         default /sys (`--sysfs-root` wins); the container's memory limit is read under it too
  LAUNCHER_NNODES             pods (default 1);  LAUNCHER_GPUS_PER_NODE: processes per pod (default 1)
  MASTER_ADDR, MASTER_PORT    the rendezvous (pod 0; default 127.0.0.1:29500)
  JOB_COMPLETION_INDEX        an Indexed Job pod's rank; else POD_NAME's trailing -N; a single pod is rank 0
  LAUNCHER_RUN                torchrun (default) | command
  LAUNCHER_ARGS               a JSON list of strings: torchrun's script and arguments, or the whole command
  LAUNCHER_DEEPSPEED_HOSTFILE an absolute path: written at start, one `HOST slots=GPUS_PER_NODE` line per pod
  LAUNCHER_HOSTS              the pods' DNS names in rank order (with the hostfile)
  LAUNCHER_EXPLICIT_NCCL      the NCCL_* names the workload sets on purpose; any other NCCL_* came from the image
  LAUNCHER_STRICT             true | false (default): a harmful inherited NCCL_* stops the pod instead of an override
  LAUNCHER_REPORT_JSON        where the JSON report goes (default /tmp/launcher-report.json)
  NCCL_*, BASH_ENV, PYTHON*   checked and passed on; a PYTHONHOME that is not this interpreter's prefix is refused
  every variable              a value naming $PATH, ${PATH}, $(PATH) or its own variable is refused (not LAUNCHER_ARGS)

Numbers are ASCII decimal integers below 2**63."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import List, Mapping, Optional, Sequence, Tuple

EXIT_OK = 0
EXIT_WOULD_NOT_START = 2
EXIT_OUTPUT_FAILED = 3
EXIT_EXEC_FAILED = 127

MIB = 1024 * 1024
MAX_PIN_BYTES = 16 * 1024 * MIB  # the proof only has to beat CRI-O's 8 MiB; more is likely a unit mistake
INT64_MAX = (1 << 63) - 1
DEFAULT_ENV_FILE = "/tmp/launcher.env"
DEFAULT_BASH_ENV_FILE = "/tmp/launcher-bash-env.sh"
DEFAULT_REPORT_JSON = "/tmp/launcher-report.json"
# LAUNCHER_LINK_LAYER: sysfs's names, and the stacks' fabric.link_layer names (roce-v2 is Ethernet).
LINK_LAYER_NAMES = {"infiniband": "InfiniBand", "ethernet": "Ethernet", "roce-v2": "Ethernet"}


class ConfigError(Exception):  # the environment is unusable; the message names the variables, one problem a line
    pass


def shown(value: str, limit: int = 60) -> str:  # a value for a message: repr'd, and cut
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"


def parse_decimal(text: str) -> Optional[int]:  # int() would take '1_000', '٣' or ' 5'
    return int(text) if re.fullmatch(r"-?[0-9]{1,19}", text) and abs(int(text)) <= INT64_MAX else None


# A reference Kubernetes left unexpanded: it expands only $(NAME), and only for a NAME set earlier in the same env list.
REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]{0,200}\}?|\(([A-Za-z_][A-Za-z0-9_]*)\)|([A-Za-z_][A-Za-z0-9_]*))")
NOT_EXPANDED = "Kubernetes never expands $NAME or ${NAME} in an env value, and $(NAME) only for a NAME set earlier "
NOT_EXPANDED += "in the same env list (never the image's ENV), so the literal text reaches the command"


def reference_problems(environ: Mapping[str, str]) -> List[str]:
    """`PATH=/opt/venv/bin:$PATH` replaces the image's PATH. Another name may be a template a script expands."""
    problems = []
    for key, value in sorted(environ.items()):
        found = ((m.group(0), m.group(1) or m.group(2) or m.group(3)) for m in REFERENCE.finditer(value if key != "LAUNCHER_ARGS" else ""))
        refs = {text: name for text, name in found if name in ("PATH", key)}  # the text as written -> the name it references
        if refs:
            names = " and ".join(sorted(set(refs.values()), key=lambda n: (n != key, n)))
            problems.append(
                f"{key} is {shown(value)}, with {', '.join(refs)} as text: {NOT_EXPANDED}, in place of the image's {names}. "
                f"Fix: write the value out in full in the workload's env (the image's {names} included), or let a shell "
                f"expand it in the command (LAUNCHER_ARGS: bash -c 'export {key}=...; exec ...')"
            )
    return problems


def pythonhome_problem(value: str) -> List[str]:
    """-I keeps PYTHONHOME from the launcher, not from the command's Pythons. Empty is unset, as Python reads it."""
    prefix, _, exec_prefix = value.partition(":")
    same = os.path.realpath(prefix) == os.path.realpath(sys.base_prefix)
    if not value or (same and os.path.realpath(exec_prefix or prefix) == os.path.realpath(sys.base_exec_prefix)):
        return []
    problem = f"PYTHONHOME is {shown(value)}: the launcher (python3 -I) ignores it, but torchrun and the training script do not, "
    problem += f"and a PYTHONHOME other than their interpreter's own prefix ({sys.base_prefix} here) makes every Python they start "
    problem += "die before running a line (\"No module named 'encodings'\"). Fix: remove PYTHONHOME from the workload's env and the "
    problem += "image's ENV, or set it to an empty value in the workload's env (Python reads that as unset); choose the "
    return [problem + "interpreter with PATH or a virtualenv instead"]


def command_args(raw: str, run: str, problems: List[str]) -> Tuple[str, ...]:
    try:
        args = json.loads(raw)
    except ValueError as exc:
        args, why = None, f"not valid JSON ({exc})"
    else:
        why = "" if isinstance(args, list) and all(isinstance(v, str) for v in args) else shown(raw)
    if why:
        problems.append(f"LAUNCHER_ARGS is {why}; expected a JSON list of strings")
    elif args == []:
        problems.append(f"LAUNCHER_ARGS is empty; it must name {'the training script' if run == 'torchrun' else 'the command to run'}")
    return tuple(args) if not why else ()


class Config:
    """The contract read from `environ`: ConfigError with every problem, so a stack is fixed once."""

    def __init__(self, environ: Mapping[str, str], sysfs_root_arg: Optional[str] = None) -> None:
        problems = pythonhome_problem(environ.get("PYTHONHOME", "")) + reference_problems(environ)

        def get(name: str, default: str = "") -> str:
            return environ.get(name, default).strip()

        def choice(name: str, allowed: Sequence[str], default: str = "") -> str:
            value = get(name, default)
            if value not in allowed:
                problems.append(f"{name} is {shown(value) if value else 'unset'}; expected one of: {', '.join(allowed)}")
            return value

        def integer(name: str, default: int, minimum: int, maximum: int = INT64_MAX) -> int:
            raw = get(name)
            value = parse_decimal(raw) if raw else default
            if value is None or not minimum <= value <= maximum:
                bound = f">= {minimum}" if maximum == INT64_MAX else f"in {minimum}..{maximum}"
                what = f"{shown(raw)}; expected a decimal" if value is None else f"{value}; expected an"
                problems.append(f"{name} is {what} integer {bound}")
                return minimum
            return value

        def boolean(name: str) -> bool:
            raw = get(name).lower()
            if raw not in ("", "true", "1", "yes", "false", "0", "no"):
                problems.append(f"{name} is {shown(raw)}; expected true or false")
            return raw in ("true", "1", "yes")

        def listed(name: str) -> Tuple[str, ...]:
            return tuple(v.strip() for v in get(name).split(",") if v.strip())

        self.run = choice("LAUNCHER_RUN", ("torchrun", "command"), "torchrun")
        self.args = command_args(get("LAUNCHER_ARGS") or "[]", self.run, problems)
        self.sysfs_root = sysfs_root_arg or get("LAUNCHER_SYSFS_ROOT") or "/sys"
        if not os.path.isdir(self.sysfs_root):
            problems.append(f"sysfs root {shown(self.sysfs_root)} is not a directory (LAUNCHER_SYSFS_ROOT / --sysfs-root)")
        self.link_layer = LINK_LAYER_NAMES.get(get("LAUNCHER_LINK_LAYER").lower(), "")  # "InfiniBand" or "Ethernet"; "": any
        if get("LAUNCHER_LINK_LAYER") and not self.link_layer:
            expected = "InfiniBand, Ethernet (or the stack's fabric.link_layer: infiniband, roce-v2), or unset"
            problems.append(f"LAUNCHER_LINK_LAYER is {shown(get('LAUNCHER_LINK_LAYER'))}; expected one of: {expected}")
        self.mode = choice("LAUNCHER_MODE", ("rdma", "tcp"))
        strategies = ("node-limit", "root-ipc-lock", "root-sys-resource", "privileged", "none")
        self.strategy = choice("LAUNCHER_MEMLOCK_STRATEGY", strategies, "none")
        self.pin_bytes = integer("LAUNCHER_PIN_BYTES", 256 * MIB, 1, MAX_PIN_BYTES)
        self.tcp_fallback = boolean("LAUNCHER_TCP_FALLBACK")
        self.rdma_interfaces = listed("LAUNCHER_RDMA_INTERFACES")
        self.tcp_socket_ifname = get("LAUNCHER_TCP_SOCKET_IFNAME") or "^lo,docker0"
        self.nnodes = integer("LAUNCHER_NNODES", 1, 1)
        self.gpus_per_node = integer("LAUNCHER_GPUS_PER_NODE", 1, 1)
        self.master_addr = get("MASTER_ADDR") or "127.0.0.1"
        self.master_port = integer("MASTER_PORT", 29500, 1, 65535)
        self.pod_name = get("POD_NAME")
        self.completion_index = get("JOB_COMPLETION_INDEX") or None
        self.nccl = {k: v for k, v in environ.items() if k.startswith("NCCL_")}  # every NCCL_* present at start
        self.deepspeed_hostfile = get("LAUNCHER_DEEPSPEED_HOSTFILE")
        self.hosts = listed("LAUNCHER_HOSTS")
        self.explicit_nccl = frozenset(listed("LAUNCHER_EXPLICIT_NCCL"))
        self.strict = boolean("LAUNCHER_STRICT")
        self.report_json = get("LAUNCHER_REPORT_JSON") or DEFAULT_REPORT_JSON
        self.image_bash_env = environ.get("BASH_ENV", "")  # the launcher's own file reads the image's first
        self.python_env = {k: v for k, v in sorted(environ.items()) if k.startswith("PYTHON")}  # passed on, reported
        if problems:
            raise ConfigError("\n".join(problems))

    @property
    def proves_pinning(self) -> bool:  # an RDMA pod always proves it can pin; a TCP pod declaring "none" does not pin
        return not (self.mode == "tcp" and self.strategy == "none")
