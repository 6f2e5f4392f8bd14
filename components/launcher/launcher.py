#!/usr/bin/env python3
"""Start a multi-node PyTorch training container: prove memory can be pinned, find the live RDMA
devices that are the pod's own, set NCCL's environment, then exec torchrun (or the workload's own
command).

It replaces the seeds' init-container detection scripts, `ulimit`/`prlimit` wrappers and hostfile
loops, whose failures were silent: an 8 MiB memlock limit found only when training crashed, an
NCCL_IB_HCA naming devices that were down, a GID index that was only the usual one, a TCP fallback
nobody noticed. Here each of those stops the pod at start with a message a user can act on. It
trusts what it sees, not what the image says: NCCL settings baked into the image are checked too.

Standard library only, Python 3.8+: the program ships this file verbatim in a ConfigMap and runs
`python3 -I /opt/launcher/launcher.py` in whatever PyTorch image the workload uses. -I (isolated mode,
Python 3.4+) keeps the user's Python environment away from the launcher: every PYTHON* variable
(PYTHONPATH, PYTHONHOME and PYTHONSTARTUP included; checked on 3.8 and 3.11), the user's site-packages
and the script's directory. What it cannot keep away is what the launcher passes on to the command
(see "Python and unexpanded variables").

Environment contract (rendered by the program; nothing else is read except sysfs, /proc and the
kernel):

  LAUNCHER_MODE              rdma | tcp (required)
  LAUNCHER_MEMLOCK_STRATEGY  how the pod is meant to be allowed to pin memory (default none):
                               node-limit         admin raised CRI-O default_ulimits; no capabilities
                               root-ipc-lock      uid 0 with IPC_LOCK effective; the limit does not apply
                               root-sys-resource  uid 0 with SYS_RESOURCE effective; the launcher
                                                  raises RLIMIT_MEMLOCK to unlimited (`ulimit -l unlimited`)
                               privileged         privileged container: every capability
                               none               nothing (TCP workloads; pinning is not checked)
  LAUNCHER_PIN_BYTES         size of the mlock proof buffer (default 268435456 = 256 MiB, at most
                             17179869184 = 16 GiB); it must be well above CRI-O's 8 MiB default to
                             prove anything, and fit the container's memory limit with 64 MiB to
                             spare (see "Memory pinning")
  LAUNCHER_TCP_FALLBACK      true | false (default false): in rdma mode with no ACTIVE RDMA port, run
                             over TCP (loudly) instead of failing
  LAUNCHER_RDMA_INTERFACES   comma list of the SR-IOV interfaces the pod should have (net1,net2,...);
                             the RDMA devices behind them are the pod's (see "RDMA devices")
  LAUNCHER_LINK_LAYER        InfiniBand | Ethernet, or the stack's fabric.link_layer spelling infiniband |
                             roce-v2 (any case; unset or empty: any): only ports of this link layer are
                             used, and NCCL_IB_HCA may select no other (see "RDMA devices")
  LAUNCHER_TCP_SOCKET_IFNAME NCCL_SOCKET_IFNAME for tcp mode (default ^lo,docker0)
  LAUNCHER_SYSFS_ROOT        default /sys; `--sysfs-root DIR` wins. The container's memory limit is
                             read under it too (<root>/fs/cgroup/...)
  LAUNCHER_NNODES            number of pods (default 1)
  LAUNCHER_GPUS_PER_NODE     processes per pod (default 1)
  MASTER_ADDR, MASTER_PORT   rendezvous endpoint (pod 0 behind the headless Service); required when
                             LAUNCHER_NNODES > 1, else 127.0.0.1:29500
  JOB_COMPLETION_INDEX       node rank of an Indexed Job pod (wins over POD_NAME)
  POD_NAME                   node rank = the trailing -N ordinal of a StatefulSet pod; a single pod
                             (LAUNCHER_NNODES=1) is rank 0
  LAUNCHER_RUN               torchrun | command (default torchrun)
  LAUNCHER_ARGS              JSON list of strings (at most 1 MiB of JSON, no NUL bytes): the script
                             and its arguments for torchrun, or the whole command (e.g.
                             ["sleep","infinity"] for a development pod)
  LAUNCHER_DEEPSPEED_HOSTFILE  absolute path of a DeepSpeed hostfile to write at start, one
                             `HOST slots=LAUNCHER_GPUS_PER_NODE` line per pod (unset or empty: none).
                             Parent directories are created. A failed write stops the pod: DeepSpeed
                             would fail later, far from the cause
  LAUNCHER_HOSTS             comma list of the workload's pod DNS names in rank order; required with
                             LAUNCHER_DEEPSPEED_HOSTFILE, and then exactly LAUNCHER_NNODES names
  LAUNCHER_EXPLICIT_NCCL     comma list of the NCCL_* names the workload sets on purpose (the program
                             renders it). Unset or empty: nothing is explicit, and every NCCL_* present
                             at start is treated as inherited from the image (see "NCCL variables")
  LAUNCHER_STRICT            true | false (default false): an inherited NCCL_* value that would break the
                             run here stops the pod (exit 2) instead of being overridden (see "NCCL
                             variables")
  LAUNCHER_REPORT_JSON       where the report is written as JSON (default /tmp/launcher-report.json;
                             parent directories are created; a failed write is a warning)
  NCCL_*                     explicit or inherited, checked either way (see "NCCL variables")
  BASH_ENV                   an image's own BASH_ENV keeps working: the file the launcher exports in
                             its place reads it first (see "ulimit in the workload's scripts")
  PYTHON*                    passed on to the command and reported; a PYTHONHOME that is not this
                             interpreter's own prefix is refused (see "Python and unexpanded variables")
  every variable             a value that names $PATH, ${PATH} or $(PATH), or its own variable, is
                             refused (see "Python and unexpanded variables"); LAUNCHER_ARGS is exempt

Numbers are plain ASCII decimal integers below 2**63. A NUL byte anywhere in the environment, or text
the OS cannot encode, is a configuration error (exec could not pass it on).

NCCL variables. An NCCL_* present at start is explicit when LAUNCHER_EXPLICIT_NCCL names it, else
inherited: in practice baked into the image with ENV (ml-dev-env's images set NCCL_IB_HCA=mlx5_6,
mlx5_7,mlx5_10,mlx5_11 NCCL_IB_GID_INDEX=3 NCCL_SOCKET_IFNAME=net1,net2,net3,net4 NCCL_NET_GDR_LEVEL=5
NCCL_IB_DISABLE=0). Both kinds are checked against what the launcher sees:
  rdma mode  NCCL_IB_HCA must name only devices that exist and are ACTIVE, with ports that are numbers,
             select no device that is not the pod's nor of another link layer than LAUNCHER_LINK_LAYER,
             and select at least one of the pod's ACTIVE ports; NCCL_IB_GID_INDEX must be a RoCE v2 IPv4
             GID on every chosen RoCE port (of the pod's interfaces, where the GID table names netdevs;
             not checked on a port whose link layer is unknown); NCCL_IB_DISABLE must be 0; NCCL_NET not
             Socket
  tcp mode   NCCL_IB_DISABLE must be 1 and NCCL_NET not IB; every other NCCL_IB_* and
             NCCL_NET_GDR_LEVEL/NCCL_NET_GDR_READ are RDMA-only settings
  both       NCCL_SOCKET_IFNAME must select an interface of the pod, and more than lo when
             LAUNCHER_NNODES > 1 (not judged when <root>/class/net cannot be listed)
An inherited value that fails is replaced by the detected value, or removed where the launcher sets
none (RDMA-only settings in tcp mode, a GID index that differs per port), and reported as overridden
with the reason. With LAUNCHER_STRICT=true the pod stops instead, except for what is harmless (an
RDMA-only setting in tcp mode, which NCCL ignores) or what the TCP fallback replaces anyway (settings
that would keep RDMA on): those are still overridden, with a warning. An explicit value that fails stops
the pod, in either mode, except an RDMA-only setting in tcp mode, which NCCL ignores under
NCCL_IB_DISABLE=1 (kept, with a warning). One case overrides explicit values: when rdma mode falls back
to TCP (LAUNCHER_TCP_FALLBACK=true), explicit NCCL_IB_DISABLE/NCCL_NET values that would keep RDMA on
are replaced, the fallback being the workload's choice too. Values that pass, and NCCL_* the launcher has
no check for, are kept as they are; a valid selection that leaves some of the pod's ports out, or a
prefix entry that also catches other devices, is a warning.

RDMA devices. With the RDMA subsystem in shared netns mode (the SR-IOV default) a pod, certainly a
privileged one, sees every RDMA device of the host, the host's own ACTIVE NIC with the node's IPv4 GID
included. The pod's devices are the ones behind its LAUNCHER_RDMA_INTERFACES: <root>/class/net/IF/device
links to the interface's PCI function, whose infiniband/ folder names the device. Without that link, a
device whose GID table names IF (ports/P/gid_attrs/ndevs/I) counts if it is the only one (another pod's
VF can have an interface of the same name). NCCL_IB_HCA lists exactly the pod's ACTIVE ports, the GID
index is chosen from them only, and every other device is reported as a host device not attached to
this pod. A device the pod shares with the host (a macvlan on its PF) holds the host's addresses too:
where a GID names its netdev, only GIDs of the mapped interfaces count, for the chosen index and for
checking NCCL_IB_GID_INDEX. Where nothing maps (LAUNCHER_RDMA_INTERFACES empty, as with InfiniBand
without SR-IOV on Cairo, or no link and no unique GID), every ACTIVE port is used and the report says
so. LAUNCHER_LINK_LAYER, when set, leaves out ports of another link layer (or an unknown one); unset,
ACTIVE ports of both link layers are used, with a warning. A port whose link_layer cannot be read is
"unknown": used (unless LAUNCHER_LINK_LAYER is set), its GID index not checked, and reported.

Memory pinning. The soft RLIMIT_MEMLOCK is first raised to the hard limit, which needs no privilege;
root-sys-resource and privileged then ask for unlimited. Before mlock, the proof buffer is checked
against the container's memory limit (<root>/fs/cgroup/memory.max, cgroup v2, "max" = none; else
<root>/fs/cgroup/memory/memory.limit_in_bytes, cgroup v1): LAUNCHER_PIN_BYTES plus 64 MiB of headroom
(the launcher's own interpreter and page tables) must fit, else the pod stops without pinning. mlock
faults every page in, and the OOM killer would end the container with exit 137 and no message. When
the limit cannot be known (neither file exists or is readable, or it holds no number) that guard has
nothing to check against: the proof then pins at most 16 MiB (twice CRI-O's 8 MiB default, so it still
proves that default is not what limits pinning; far below what any PyTorch container holds), and a
warning says the pinning ran without the out-of-memory guard.

Python and unexpanded variables. -I protects the launcher only; the command it execs (torchrun, the
training script) inherits the environment. Refused (a configuration error, exit 2), because they break
every run and the cause is then far from the symptom:
  PYTHONHOME set to anything but this interpreter's own prefix (empty counts as unset, as Python
    reads it): every Python the command starts dies before running a line ("No module named
    'encodings'"); the launcher ignores it under -I, so without this check the pod would get past it
  a value naming $PATH, ${PATH} or $(PATH), or its own variable (LD_LIBRARY_PATH=/x:$LD_LIBRARY_PATH):
    Kubernetes expands only $(NAME), and only for a NAME set earlier in the same env list, never the
    image's ENV, so the literal text arrives and the image's directories are lost. LAUNCHER_ARGS is
    exempt: it is the command line, where a `bash -c` expands it as meant
Reported, and passed on unchanged (the "python" section and report key): every other PYTHON*. PYTHONPATH
and PYTHONSTARTUP cannot reach an isolated launcher, and are the workload's to set: PYTHONPATH is how
many trainings find their code, PYTHONSTARTUP is read by interactive interpreters only. A launcher
started without -I says so (a warning when PYTHONPATH was on its own import path too).

ulimit in the workload's scripts. Once pinning is proven (mlock succeeded, with IPC_LOCK effective and
kept across exec, or within the current limit), the launcher writes a small bash file (--bash-env-file,
default /tmp/launcher-bash-env.sh) and exports BASH_ENV naming it. Every non-interactive bash the
command starts (scripts, `bash -c`) reads it first, so a `ulimit` function stands in for the builtin:
a memlock change (`ulimit -l N`, -Hl, -Sl; N a number, unlimited, hard or soft) that fails prints one
line saying why the limit is moot and returns 0, so `set -e; ulimit -l unlimited` (the seeds'
lm-train.sh) no longer stops the pod. Queries, other limits and malformed values behave as the builtin
does. The image's BASH_ENV, if any, is sourced first (as a plain path). sh/dash do not read BASH_ENV,
and bash run as sh does not either: such scripts are not covered. Not written, and BASH_ENV left as
the image set it, when pinning is not proven or the file cannot be written (a warning).

Reading sysfs and /proc. Only regular files are read (sysfs attributes are; a FIFO would block and a
device such as /dev/zero never ends), opened non-blocking, at most 4096 bytes: a longer file, a
value of the wrong shape or a name that is not a device, port, GID index or interface name is
"unknown" and reported, never a crash. Listings stop at 1024 entries.

Exported to the command (and, for `oc exec` sessions, written as `export KEY='VALUE'` lines to
/tmp/launcher.env, or --env-file PATH): NCCL_IB_DISABLE, NCCL_IB_HCA, NCCL_IB_GID_INDEX (only when one
index is right on every chosen port), NCCL_SOCKET_IFNAME, every other NCCL_* kept, BASH_ENV (see
above), MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, NPROC_PER_NODE, WORLD_SIZE.

Report. A human report on stderr, then one line `LAUNCHER_REPORT {...}`: the report as compact JSON
(ASCII, one line whatever the values hold), the same object LAUNCHER_REPORT_JSON holds. Keys (schema
launcher-report/v1): verdict (start | would-not-start), errors, warnings, mode, transport (rdma | tcp |
tcp-fallback), devices (chosen ports, pod devices, host_not_attached, mapping interface -> devices,
mapped_through, every_active_port, link_layer: LAUNCHER_LINK_LAYER or null, seen), gid_index,
interfaces (expected, missing, in_pod), socket_ifname, nccl (the exported NCCL_*), explicit_nccl,
overridden (name, inherited: the value found, new: null when removed, reason, explicit), pinning
(strategy, ok, uid, cap_eff, ipc_lock, sys_resource, limit_at_start, limit, soft_raised_to_hard,
raised_to_unlimited, effective_limit, limit_moot_by_ipc_lock, pin_bytes: LAUNCHER_PIN_BYTES, proof_bytes:
what mlock was tried with, memory_guard: whether the container's memory limit was known, result: ok |
failed | not-checked | not-attempted, errno, ulimit_moot), container_memory, python (isolated: started
with -I, passed_on: the PYTHON* the command gets), bash_env, deepspeed_hostfile, rendezvous, command. A
configuration error gives only schema, verdict, errors and warnings. --print-env logs the line but
writes no file.

Usage:
  launcher.py [--sysfs-root DIR] [--env-file PATH] [--bash-env-file PATH]
                                                 check, write the files, report on stderr, exec
  launcher.py --print-env [--sysfs-root DIR]     check, print KEY=VALUE lines on stdout (what exec
                                                 would export), exit; writes no file

Exit codes: 0 the pod would start (--print-env); 2 a check failed or the configuration is invalid
(the diagnosis is on stderr); 3 the report (stderr), the --print-env output or --help (stdout) could
not be written: the stream is closed (`>&-`), full (/dev/full) or a broken pipe. One line then says
so on the other stream, with the verdict, if that one works; nothing is executed (the JSON report, when
written, may say start); 127 the command could not be executed. Otherwise the process becomes the
command, so signals reach the training process directly.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import mmap
import os
import re
import resource
import shlex
import stat
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, NoReturn, Optional, Sequence, Tuple

EXIT_OK = 0
EXIT_WOULD_NOT_START = 2
EXIT_OUTPUT_FAILED = 3
EXIT_EXEC_FAILED = 127

CAP_IPC_LOCK = 14
CAP_SYS_RESOURCE = 24
DEFAULT_CAP_LAST = 40  # CAP_CHECKPOINT_RESTORE, Linux 5.9+; the kernel says in /proc/sys/kernel/cap_last_cap

MIB = 1024 * 1024
GIB = 1024 * MIB
CRIO_DEFAULT_MEMLOCK = 8 * MIB  # what a container inherits when the node's default_ulimits is empty
DEFAULT_PIN_BYTES = 256 * MIB
# The proof only has to exceed CRI-O's 8 MiB; a bigger buffer costs start time and memory, and one
# beyond this is more likely a unit mistake than a wish.
MAX_PIN_BYTES = 16 * GIB
# What the container needs besides the pinned proof buffer while it is pinned: the launcher's own
# interpreter, its page tables, the first pages of the image's files in the page cache.
PIN_HEADROOM = 64 * MIB
# The most the proof pins when the container's memory limit cannot be read, so nothing guards it
# against the OOM killer. Twice CRI-O's 8 MiB default: a pass still proves that default is not what
# limits pinning (and IPC_LOCK proves itself at any size); with the headroom, 80 MiB, which no container
# that can import torch lacks. Refusing to pin at all would stop every RDMA pod on such a node for a
# risk this size does not carry; pinning all of LAUNCHER_PIN_BYTES (up to 16 GiB) blind is the risk.
UNGUARDED_PIN_BYTES = 16 * MIB
# cgroup v1 writes "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712 with 4 KiB pages).
CGROUP_NO_LIMIT = 1 << 62
INFINITY = resource.RLIM_INFINITY
INT64_MAX = (1 << 63) - 1

DEFAULT_TCP_SOCKET_IFNAME = "^lo,docker0"
DEFAULT_ENV_FILE = "/tmp/launcher.env"
DEFAULT_BASH_ENV_FILE = "/tmp/launcher-bash-env.sh"
DEFAULT_REPORT_JSON = "/tmp/launcher-report.json"
# The log line other tools look for: this prefix, then the report as compact one-line JSON.
REPORT_PREFIX = "LAUNCHER_REPORT "
REPORT_SCHEMA = "launcher-report/v1"
DEFAULT_MASTER_PORT = 29500

# Bounds on everything read from sysfs, /proc and the environment: the launcher is PID 1 of a
# training pod, and a hang or a traceback there is a pod that never says why it did not start.
READ_LIMIT = 4096  # a sysfs attribute is at most one page
PROC_STATUS_LIMIT = 64 * 1024
MAX_DIR_ENTRIES = 1024
MAX_PORTS = 512  # every port of every device a privileged pod on a big host can see, with room
MAX_GIDS = 256  # the lowest indexes: the kernel fills a GID table from its first free entry
MAX_ARGS_JSON = MIB  # the kernel caps one environment string at 128 KiB anyway

# Names the launcher accepts from sysfs and the contract. Anything else is "unknown": never an int()
# that raises (isdigit() accepts '²'), never a path component that climbs out of sysfs, never a
# character NCCL's list syntax (',', ':', '=', '^') would read.
DEVICE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
IFNAME = re.compile(r"[A-Za-z0-9_.-]{1,15}")  # IFNAMSIZ - 1
NCCL_NAME = re.compile(r"NCCL_[A-Za-z0-9_]{1,100}")
NUMBER_NAME = re.compile(r"[0-9]{1,5}")  # port numbers and GID indexes
DECIMAL = re.compile(r"-?[0-9]{1,19}")  # int() would also take '٣', '1_000' and 5000-digit strings
DNS_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
GID_TEXT = re.compile(r"[0-9a-fA-F:]{1,64}")
PCI_NAME = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
PORT_STATE = re.compile(r"(?:[0-9]{1,3}:\s*)?([A-Z_]{1,32})")
LINK_LAYERS = ("InfiniBand", "Ethernet")
# LAUNCHER_LINK_LAYER: the sysfs names, and the stacks' fabric.link_layer names (roce-v2 is Ethernet).
LINK_LAYER_NAMES = {"infiniband": "InfiniBand", "ethernet": "Ethernet", "roce-v2": "Ethernet"}
GID_TYPES = ("RoCE v2", "IB/RoCE v1")

MODES = ("rdma", "tcp")
STRATEGIES = ("node-limit", "root-ipc-lock", "root-sys-resource", "privileged", "none")
RUNS = ("torchrun", "command")

# The NCCL variables the launcher detects values for. Any NCCL_* present at start is checked where the
# launcher can judge it (see nccl_problems) and otherwise passed through as it is.
MANAGED_NCCL = ("NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME")

LOC_PROT_ERR_NOTE = (
    "if NCCL later reports IBV_WC_LOC_PROT_ERR, that is not a memlock symptom (a memlock shortfall "
    "makes ibv_reg_mr fail with 'Cannot allocate memory'); NCCL's own hint for it is PCI ACS "
    "breaking GPUDirect RDMA"
)

STRATEGY_HOWTO = {
    "node-limit": "node-limit: the cluster admin applies a MachineConfig to the GPU node pool that "
    "writes /etc/crio/crio.conf.d/99-memlock with [crio.runtime] default_ulimits = "
    '["memlock=-1:-1"]; works for any uid with no capabilities (there is no CRI-O ulimit annotation)',
    "root-ipc-lock": "root-ipc-lock: an SCC with runAsUser RunAsAny that allows IPC_LOCK, granted to "
    "the service account; the pod sets runAsUser: 0 and adds IPC_LOCK; the limit then does not apply",
    "root-sys-resource": "root-sys-resource: as root-ipc-lock, plus SYS_RESOURCE allowed and added, "
    "so the launcher raises RLIMIT_MEMLOCK to unlimited (the seeds' `ulimit -l unlimited`)",
    "privileged": "privileged: securityContext.privileged: true with the privileged SCC (or one with "
    "allowPrivilegedContainer); grants every capability, least safe",
}
# The strategies that work for a non-root uid (KNOWLEDGE.md: added capabilities never reach it).
NON_ROOT_HOWTO = "; or ".join(STRATEGY_HOWTO[s] for s in ("node-limit", "privileged"))


class ConfigError(Exception):
    """The rendered environment is unusable; the message names the variables."""


# ---------------------------------------------------------------------------------------------
# Configuration: the environment contract, parsed and validated in one place.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    mode: str
    strategy: str
    pin_bytes: int
    tcp_fallback: bool
    rdma_interfaces: Tuple[str, ...]
    tcp_socket_ifname: str
    sysfs_root: str
    nnodes: int
    gpus_per_node: int
    master_addr: str
    master_port: Optional[int]
    pod_name: str
    completion_index: Optional[str]
    run: str
    args: Tuple[str, ...]
    nccl: Dict[str, str] = field(default_factory=dict)  # every NCCL_* present at start
    deepspeed_hostfile: str = ""  # "" : none requested
    hosts: Tuple[str, ...] = ()  # the workload's pod DNS names in rank order
    explicit_nccl: FrozenSet[str] = frozenset()  # the NCCL_* names the workload set on purpose
    strict: bool = False  # stop instead of overriding a wrong inherited NCCL_* value
    report_json: str = DEFAULT_REPORT_JSON
    image_bash_env: str = ""  # the BASH_ENV the image set; the launcher's own file reads it first
    link_layer: str = ""  # "InfiniBand" or "Ethernet": only ports of this link layer are used; "": any
    python_env: Dict[str, str] = field(default_factory=dict)  # every PYTHON* present: passed on, reported


def shown(value: str, limit: int = 60) -> str:
    """A value for a message: repr'd (NUL bytes and odd characters visible) and cut, since an
    environment value can be megabytes long."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def parse_decimal(text: str) -> Optional[int]:
    """A plain ASCII decimal integer that fits in 64 bits, else None. Not int(): it accepts
    underscores and any Unicode digit, and Python 3.11+ raises ValueError for more than 4300 digits."""
    if not DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if -INT64_MAX - 1 <= value <= INT64_MAX else None


def is_dns_name(name: str) -> bool:
    labels = name[:-1].split(".") if name.endswith(".") else name.split(".")
    return len(name) <= 253 and all(DNS_LABEL.fullmatch(label) for label in labels)


def unpassable(text: str) -> str:
    """Why execve could not pass `text` on: "nul" (a NUL byte), "encoding" (text the OS cannot
    encode, such as a lone surrogate), or "" when it can."""
    if "\0" in text:
        return "nul"
    try:
        os.fsencode(text)
    except (UnicodeError, ValueError):
        return "encoding"
    return ""


def environment_problems(environ: Mapping[str, str]) -> List[str]:
    """exec passes the whole environment on; a NUL byte, or text the OS cannot encode, would make
    execve raise after every check has passed. The real environment cannot hold either, but the
    launcher is also called with mappings built elsewhere."""
    problems = []
    for key, value in environ.items():
        for what, text in (("name", key), ("value", value)):
            why = unpassable(text)
            if why:
                problems.append(
                    f"environment variable {shown(key)} has a NUL byte in its {what}"
                    if why == "nul"
                    else f"environment variable {shown(key)} has a {what} the OS cannot encode"
                )
                break
    return problems


# What the launcher refuses in the environment it passes on, and what it only reports (the module
# docstring's "Python and unexpanded variables"). The line between them: refused is what breaks every
# run of the command whatever the workload meant, far from its cause, and what the isolated launcher
# would otherwise walk past (it ignores PYTHONHOME itself); reported is what cannot reach the launcher
# under -I and is a working training's own business (PYTHONPATH is how many trainings find their code;
# PYTHONSTARTUP is read by interactive interpreters only), so refusing it would stop working pods.
REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]{0,200}\}?|\(([A-Za-z_][A-Za-z0-9_]*)\)|([A-Za-z_][A-Za-z0-9_]*))")
# The command line, not a value the command reads: `bash -c "export PATH=/x:$PATH; ..."` there is
# expanded by the shell, as meant.
REFERENCES_EXEMPT = ("LAUNCHER_ARGS",)
NOT_EXPANDED = (
    "Kubernetes never expands $NAME or ${NAME} in an env value, and $(NAME) only for a NAME set earlier "
    "in the same env list (never the image's ENV), so the literal text reaches the command"
)


def unexpanded_references(key: str, value: str) -> List[Tuple[str, str]]:
    """(text, name) of each reference to PATH, or to `key` itself, that `value` holds as text:
    `PATH=/opt/venv/bin:$PATH` meant to extend the image's PATH, and replaces it with directories
    that do not exist. Other names are left alone: a value may be a template some script expands."""
    if key in REFERENCES_EXEMPT or "$" not in value:
        return []
    found: List[Tuple[str, str]] = []
    for match in REFERENCE.finditer(value):
        name = match.group(1) or match.group(2) or match.group(3)
        if name in ("PATH", key) and (match.group(0), name) not in found:
            found.append((match.group(0), name))
    return found


def reference_problems(environ: Mapping[str, str]) -> List[str]:
    problems = []
    for key, value in sorted(environ.items()):
        refs = unexpanded_references(key, value)
        if refs:
            texts = ", ".join(text for text, _ in refs)
            names = " and ".join(sorted({name for _, name in refs}, key=lambda n: (n != key, n)))
            problems.append(
                f"{key} is {shown(value)}, with {texts} as text: {NOT_EXPANDED}, in place of the image's {names}. "
                f"Fix: write the value out in full in the workload's env (the image's {names} included), or let a shell "
                f"expand it in the command (LAUNCHER_ARGS: bash -c 'export {key}=...; exec ...')"
            )
    return problems


def _same_path(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def pythonhome_problem(value: Optional[str]) -> str:
    """PYTHONHOME, unless unset, empty (Python reads that as unset) or this interpreter's own
    prefix[:exec_prefix], where it changes nothing."""
    if not value:
        return ""
    prefix, _, exec_prefix = value.partition(":")
    if _same_path(prefix, sys.base_prefix) and _same_path(exec_prefix or prefix, sys.base_exec_prefix):
        return ""
    return (
        f"PYTHONHOME is {shown(value)}: the launcher (python3 -I) ignores it, but torchrun and the training script do not, "
        f"and a PYTHONHOME other than their interpreter's own prefix ({sys.base_prefix} here) makes every Python they start "
        "die before running a line (\"No module named 'encodings'\"). Fix: remove PYTHONHOME from the workload's env and the "
        "image's ENV, or set it to an empty value in the workload's env (Python reads that as unset); choose the "
        "interpreter with PATH or a virtualenv instead"
    )


def load_config(environ: Mapping[str, str], sysfs_root_arg: Optional[str] = None) -> Config:
    """Read the contract from `environ`; collect every problem before failing, so a user fixes
    the stack once rather than once per variable."""
    problems: List[str] = environment_problems(environ)
    home = pythonhome_problem(environ.get("PYTHONHOME"))
    if home:
        problems.append(home)
    problems += reference_problems(environ)

    def get(name: str, default: str = "") -> str:
        return environ.get(name, default).strip()

    def choice(name: str, allowed: Sequence[str], default: Optional[str]) -> str:
        value = get(name, default or "")
        if value not in allowed:
            shown_value = shown(value) if value else "unset"
            problems.append(f"{name} is {shown_value}; expected one of: {', '.join(allowed)}")
        return value

    def integer(name: str, default: Optional[int], minimum: int, maximum: int = INT64_MAX) -> int:
        raw = get(name)
        if not raw:
            if default is None:
                problems.append(f"{name} is unset; expected an integer")
                return minimum
            return default
        bound = f">= {minimum}" if maximum == INT64_MAX else f"in {minimum}..{maximum}"
        value = parse_decimal(raw)
        if value is None:
            problems.append(f"{name} is {shown(raw)}; expected a decimal integer {bound}")
            return minimum
        if not minimum <= value <= maximum:
            problems.append(f"{name} is {value}; expected an integer {bound}")
            return minimum
        return value

    def boolean(name: str, default: bool) -> bool:
        raw = get(name).lower()
        if not raw:
            return default
        if raw in ("true", "1", "yes"):
            return True
        if raw in ("false", "0", "no"):
            return False
        problems.append(f"{name} is {shown(raw)}; expected true or false")
        return default

    def names(name: str, pattern: re.Pattern[str], what: str) -> Tuple[str, ...]:
        values = tuple(v.strip() for v in get(name).split(",") if v.strip())
        bad = [v for v in values if not pattern.fullmatch(v)]
        if bad:
            problems.append(f"{name} has {', '.join(shown(b) for b in bad[:5])}; expected {what}")
        return values

    mode = choice("LAUNCHER_MODE", MODES, None)
    strategy = choice("LAUNCHER_MEMLOCK_STRATEGY", STRATEGIES, "none")
    run = choice("LAUNCHER_RUN", RUNS, "torchrun")
    pin_bytes = integer("LAUNCHER_PIN_BYTES", DEFAULT_PIN_BYTES, 1, MAX_PIN_BYTES)
    nnodes = integer("LAUNCHER_NNODES", 1, 1)
    gpus = integer("LAUNCHER_GPUS_PER_NODE", 1, 1)

    master_addr = get("MASTER_ADDR")
    master_port = integer("MASTER_PORT", 0, 1, 65535) if get("MASTER_PORT") else None
    if nnodes > 1 and not master_addr:
        problems.append("MASTER_ADDR is unset; a multi-node job needs pod 0's DNS name")
    if nnodes > 1 and master_port is None:
        problems.append("MASTER_PORT is unset; a multi-node job needs the rendezvous port")

    args = _parse_args_json(get("LAUNCHER_ARGS") or "[]", problems)
    if args == []:
        what = "the training script" if run == "torchrun" else "the command to run"
        problems.append(f"LAUNCHER_ARGS is empty; it must name {what}")

    sysfs_root = sysfs_root_arg or get("LAUNCHER_SYSFS_ROOT", "/sys") or "/sys"
    if not os.path.isdir(sysfs_root):
        problems.append(f"sysfs root {shown(sysfs_root)} is not a directory (LAUNCHER_SYSFS_ROOT / --sysfs-root)")

    completion = environ.get("JOB_COMPLETION_INDEX", "").strip() or None
    tcp_fallback = boolean("LAUNCHER_TCP_FALLBACK", False)
    # Interface names become paths under <sysfs>/class/net and entries of NCCL_SOCKET_IFNAME.
    interfaces = names("LAUNCHER_RDMA_INTERFACES", IFNAME, "interface names (letters, digits, '_', '.', '-'; at most 15)")
    # Unset or empty: nothing is explicit, so every NCCL_* present is the image's and is checked.
    explicit = names("LAUNCHER_EXPLICIT_NCCL", NCCL_NAME, "NCCL_* variable names")
    strict = boolean("LAUNCHER_STRICT", False)
    raw_link_layer = get("LAUNCHER_LINK_LAYER")
    link_layer = LINK_LAYER_NAMES.get(raw_link_layer.lower(), "")
    if raw_link_layer and not link_layer:
        problems.append(
            f"LAUNCHER_LINK_LAYER is {shown(raw_link_layer)}; expected one of: {', '.join(LINK_LAYERS)} "
            "(or the stack's fabric.link_layer: infiniband, roce-v2), or unset"
        )

    hostfile = get("LAUNCHER_DEEPSPEED_HOSTFILE")
    hosts = tuple(h.strip() for h in get("LAUNCHER_HOSTS").split(",") if h.strip())
    bad_hosts = [h for h in hosts if not is_dns_name(h)]
    if bad_hosts:
        problems.append(f"LAUNCHER_HOSTS has {', '.join(shown(h) for h in bad_hosts[:5])}; expected DNS names")
    if hostfile:
        if not os.path.isabs(hostfile):
            problems.append(f"LAUNCHER_DEEPSPEED_HOSTFILE is {shown(hostfile)}; expected an absolute path")
        if not hosts:
            problems.append("LAUNCHER_HOSTS is empty; LAUNCHER_DEEPSPEED_HOSTFILE needs the pods' DNS names in rank order")
        elif len(hosts) != nnodes:
            problems.append(f"LAUNCHER_HOSTS names {len(hosts)} hosts but LAUNCHER_NNODES is {nnodes}; the hostfile needs one per pod")

    if problems:
        raise ConfigError("\n".join(problems))
    return Config(
        mode=mode,
        strategy=strategy,
        pin_bytes=pin_bytes,
        tcp_fallback=tcp_fallback,
        rdma_interfaces=interfaces,
        tcp_socket_ifname=get("LAUNCHER_TCP_SOCKET_IFNAME") or DEFAULT_TCP_SOCKET_IFNAME,
        sysfs_root=sysfs_root,
        nnodes=nnodes,
        gpus_per_node=gpus,
        master_addr=master_addr,
        master_port=master_port,
        pod_name=get("POD_NAME"),
        completion_index=completion,
        run=run,
        args=tuple(args or ()),
        nccl={k: v for k, v in environ.items() if k.startswith("NCCL_")},
        deepspeed_hostfile=hostfile,
        hosts=hosts,
        explicit_nccl=frozenset(explicit),
        strict=strict,
        report_json=get("LAUNCHER_REPORT_JSON") or DEFAULT_REPORT_JSON,
        image_bash_env=environ.get("BASH_ENV", ""),
        link_layer=link_layer,
        python_env={k: v for k, v in sorted(environ.items()) if k.startswith("PYTHON")},
    )


def _parse_args_json(raw: str, problems: List[str]) -> Optional[List[str]]:
    """None (and a problem recorded) when LAUNCHER_ARGS is not a JSON list of strings."""
    if len(raw) > MAX_ARGS_JSON:
        problems.append(f"LAUNCHER_ARGS is {len(raw)} characters long; at most {MAX_ARGS_JSON} are accepted")
        return None
    try:
        value = json.loads(raw)
    except RecursionError:
        # Python's JSON decoder recurses once per nesting level: `[[[[...` runs out of stack.
        problems.append("LAUNCHER_ARGS is nested too deeply to be read; expected a flat JSON list of strings")
        return None
    except MemoryError:
        problems.append("LAUNCHER_ARGS is too large to be read; expected a JSON list of strings")
        return None
    except ValueError as exc:
        problems.append(f"LAUNCHER_ARGS is not valid JSON ({exc}); expected a JSON list of strings")
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"LAUNCHER_ARGS is {shown(raw)}; expected a JSON list of strings")
        return None
    for position, arg in enumerate(value):
        # "\u0000" is valid JSON, but execve cannot pass it; neither can a lone surrogate.
        why = unpassable(arg)
        if why:
            problems.append(
                f"LAUNCHER_ARGS item {position} ({shown(arg)}) "
                + ("has a NUL byte, which no command line can hold" if why == "nul" else "cannot be encoded for the command line")
            )
            return None
    return value


# ---------------------------------------------------------------------------------------------
# Facts: what the kernel and sysfs say. Gathering them is all the reading; main writes and execs.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str  # "" when unreadable
    gid_type: str  # "RoCE v2", "IB/RoCE v1", or "" (reads fail with EINVAL for unpopulated entries)
    ndev: str = ""  # the netdev this RoCE GID belongs to (gid_attrs/ndevs/<i>); "" for InfiniBand or unknown


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state: str  # "ACTIVE", "DOWN", "INIT", ... ("unknown" if unreadable)
    link_layer: str  # "InfiniBand", "Ethernet" (RoCE), or "unknown"
    gids: Tuple[Gid, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"

    @property
    def roce(self) -> bool:
        return self.link_layer == "Ethernet"

    def roce_v2_ipv4_gids(self) -> List[Gid]:
        return [g for g in self.gids if g.gid_type == "RoCE v2" and is_ipv4_mapped(g.gid)]

    def roce_v2_ipv4_indexes(self, ndevs: Optional[FrozenSet[str]] = None) -> List[int]:
        """The GID indexes NCCL can use for RoCE v2 over IPv4 (KNOWLEDGE: 3 is only the usual one).
        With `ndevs` (the pod's mapped interfaces), a GID whose netdev is readable counts only if it is
        one of them: a device the pod shares with the host also holds the host's addresses."""
        return [g.index for g in self.roce_v2_ipv4_gids() if ndevs is None or not g.ndev or g.ndev in ndevs]

    def foreign_gids(self, ndevs: Optional[FrozenSet[str]]) -> List[Gid]:
        """The RoCE v2 IPv4 GIDs that roce_v2_ipv4_indexes(ndevs) leaves out: other netdevs' addresses."""
        return [g for g in self.roce_v2_ipv4_gids() if ndevs is not None and g.ndev and g.ndev not in ndevs]


@dataclass(frozen=True)
class MemlockFacts:
    uid: int
    cap_eff: int
    cap_amb: int
    limit_before: Tuple[int, int]
    raise_target: Optional[Tuple[int, int]]  # the raise to unlimited setrlimit was asked for; None if not asked
    raise_error: Optional[str]  # the kernel's refusal; None if accepted or not asked
    limit_after: Tuple[int, int]
    pin_bytes: int  # the proof buffer mlock is tried with
    pin_errno: Optional[int]  # None: not attempted; 0: mlock succeeded; else errno
    cap_last: int = DEFAULT_CAP_LAST  # highest capability this kernel knows; privileged holds 0..cap_last
    soft_raise_target: Optional[Tuple[int, int]] = None  # soft up to hard, asked first; None if soft was at hard
    soft_raise_error: Optional[str] = None
    pin_blocked: str = ""  # why the proof was not attempted (the container's memory limit), with the fix
    requested_bytes: Optional[int] = None  # LAUNCHER_PIN_BYTES when the proof is smaller (limit unknown)

    @property
    def asked_bytes(self) -> int:
        """What the workload asked to be proven (LAUNCHER_PIN_BYTES)."""
        return self.pin_bytes if self.requested_bytes is None else self.requested_bytes

    @property
    def holds_every_cap(self) -> bool:
        every = (1 << (self.cap_last + 1)) - 1
        return self.cap_eff & every == every


@dataclass(frozen=True)
class CgroupMemory:
    limit: Optional[int]  # bytes; None: no limit, or unknown (then source is "")
    source: str  # the file it was read from
    note: str = ""  # why it is unknown

    @property
    def known(self) -> bool:
        return bool(self.source)


@dataclass(frozen=True)
class InterfaceLink:
    """What <sysfs>/class/net/<interface>/device says: the PCI function behind the interface and the
    RDMA devices in its infiniband/ folder (an SR-IOV VF has exactly one)."""

    interface: str
    pci: str  # "0000:3b:00.2"; "" when the link cannot be read
    devices: Tuple[str, ...]


@dataclass(frozen=True)
class Facts:
    memlock: MemlockFacts
    ports: Tuple[RdmaPort, ...]
    net_names: Tuple[str, ...]  # interfaces in <sysfs>/class/net
    cgroup: CgroupMemory = CgroupMemory(None, "", "not read")
    odd_entries: Tuple[str, ...] = ()  # sysfs entries ignored because their names are not plausible
    links: Tuple[InterfaceLink, ...] = ()  # one per LAUNCHER_RDMA_INTERFACES entry present in the pod
    isolated: bool = True  # the launcher runs under python3 -I (sys.flags.isolated)


def natural_key(name: str) -> List[object]:
    """Sort mlx5_2 before mlx5_10. Digit runs compare by length, then text: no int(), which a
    5000-digit name would make raise."""
    key: List[object] = []
    for position, part in enumerate(re.split(r"([0-9]+)", name)):
        if position % 2:
            digits = part.lstrip("0")
            key.append((len(digits), digits))
        else:
            key.append((0, part))
    return key


def _read(path: str, limit: int = READ_LIMIT) -> Optional[str]:
    """The stripped text of a small regular file, or None ("unknown").

    Real sysfs has files that exist but cannot be read (gid_attrs of unpopulated GID entries give
    EINVAL). A FIFO would block open() forever and a character device such as /dev/zero never ends,
    so only regular files are opened (sysfs attributes and /proc files are regular), non-blocking,
    and at most `limit` bytes are read: a longer file is not an attribute.
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    data = b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between stat and open
            return None
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    return data.decode("ascii", errors="replace").strip()


def _scan(path: str) -> List[str]:
    """At most MAX_DIR_ENTRIES names in a directory; none when it cannot be listed."""
    found: List[str] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                found.append(entry.name)
                if len(found) >= MAX_DIR_ENTRIES:
                    break
    except (OSError, ValueError):
        pass
    return found


def _listdir(path: str, pattern: re.Pattern[str], odd: Optional[List[str]] = None) -> List[str]:
    """The entries whose names fit `pattern`, naturally sorted; the others go to `odd`."""
    good = []
    for name in _scan(path):
        if pattern.fullmatch(name):
            good.append(name)
        elif odd is not None:
            odd.append(os.path.join(path, name))
    return sorted(good, key=natural_key)


def parse_port_state(text: Optional[str]) -> str:
    """`4: ACTIVE` -> `ACTIVE`; anything else is "unknown"."""
    match = PORT_STATE.fullmatch(text or "")
    return match.group(1) if match else "unknown"


def is_ipv4_mapped(gid: str) -> bool:
    """True for ::ffff:a.b.c.d written as sysfs does: 0000:0000:0000:0000:0000:ffff:0a00:6a07."""
    groups = gid.strip().split(":")
    if len(groups) != 8 or not all(GID_TEXT.fullmatch(g) and len(g) <= 4 for g in groups):
        return False
    words = [int(g, 16) for g in groups]
    return words[:5] == [0] * 5 and words[5] == 0xFFFF and (words[6] or words[7]) != 0


def is_zero_gid(gid: str) -> bool:
    return set(gid) <= {"0", ":"}


def read_gids(pdir: str, odd: Optional[List[str]] = None) -> Tuple[Gid, ...]:
    gids = []
    for index in _listdir(os.path.join(pdir, "gids"), NUMBER_NAME, odd)[:MAX_GIDS]:
        text = _read(os.path.join(pdir, "gids", index)) or ""
        gid = text if GID_TEXT.fullmatch(text) else ""
        if not gid or is_zero_gid(gid):
            # An unpopulated entry has no type or netdev to read; reading them fails with EINVAL anyway.
            gids.append(Gid(int(index), gid, ""))
            continue
        gid_type = _read(os.path.join(pdir, "gid_attrs", "types", index)) or ""
        ndev = _read(os.path.join(pdir, "gid_attrs", "ndevs", index)) or ""
        gids.append(Gid(int(index), gid, gid_type if gid_type in GID_TYPES else "", ndev if IFNAME.fullmatch(ndev) else ""))
    return tuple(gids)


def read_rdma_ports(sysfs_root: str, odd: Optional[List[str]] = None, own: Sequence[str] = ()) -> List[RdmaPort]:
    """Every port of the RDMA devices the pod sees, at most MAX_PORTS, naturally sorted. The pod's own devices
    (`own`: those behind its interfaces, read_interface_links) are read first, by name: on a host showing more
    ports than the bound (or more devices than a listing holds), the ports left out are the host's, never the pod's."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    first = sorted({d for d in own if DEVICE_NAME.fullmatch(d)}, key=natural_key)
    ports: List[RdmaPort] = []
    for device in first + [d for d in _listdir(base, DEVICE_NAME, odd) if d not in first]:
        ports_dir = os.path.join(base, device, "ports")
        for port in _listdir(ports_dir, NUMBER_NAME, odd):
            if len(ports) >= MAX_PORTS:
                return sorted(ports, key=lambda p: (natural_key(p.device), p.port))
            pdir = os.path.join(ports_dir, port)
            link_layer = _read(os.path.join(pdir, "link_layer")) or ""
            ports.append(
                RdmaPort(
                    device=device,
                    port=int(port),
                    state=parse_port_state(_read(os.path.join(pdir, "state"))),
                    link_layer=link_layer if link_layer in LINK_LAYERS else "unknown",
                    gids=read_gids(pdir, odd),
                )
            )
    return sorted(ports, key=lambda p: (natural_key(p.device), p.port))


def read_net_names(sysfs_root: str, odd: Optional[List[str]] = None) -> List[str]:
    return _listdir(os.path.join(sysfs_root, "class", "net"), IFNAME, odd)


def read_interface_links(sysfs_root: str, interfaces: Sequence[str]) -> Tuple[InterfaceLink, ...]:
    """<sysfs>/class/net/<if>/device is a symlink to the interface's PCI function directory, which
    holds infiniband/<dev> for an RDMA-capable function. /sys/class/net shows only the pod's network
    namespace, so this is how the pod's own RDMA devices are told from the host's."""
    links = []
    for interface in interfaces:
        device = os.path.join(sysfs_root, "class", "net", interface, "device")
        try:
            pci = os.path.basename(os.readlink(device).rstrip("/"))
        except (OSError, ValueError):
            pci = ""
        links.append(
            InterfaceLink(
                interface, pci if PCI_NAME.fullmatch(pci) else "", tuple(_listdir(os.path.join(device, "infiniband"), DEVICE_NAME))
            )
        )
    return tuple(links)


def read_cgroup_memory(sysfs_root: str) -> CgroupMemory:
    """The container's memory limit. Inside a container /sys/fs/cgroup is the container's own cgroup
    (cgroup namespace on v2, a bind mount of its directory on v1)."""
    base = os.path.join(sysfs_root, "fs", "cgroup")
    for path in (os.path.join(base, "memory.max"), os.path.join(base, "memory", "memory.limit_in_bytes")):
        text = _read(path)
        if text is None:
            continue
        if text == "max":
            return CgroupMemory(None, path)
        value = parse_decimal(text)
        if value is None or value < 0:
            return CgroupMemory(None, "", f"{path} reads {shown(text)}, not a memory limit")
        return CgroupMemory(None if value >= CGROUP_NO_LIMIT else value, path)
    return CgroupMemory(None, "", f"neither {base}/memory.max (cgroup v2) nor {base}/memory/memory.limit_in_bytes (v1) is readable")


def parse_caps(status_text: str) -> Tuple[int, int]:
    """(CapEff, CapAmb) from /proc/self/status; 0 when a line is missing."""
    caps = {"CapEff": 0, "CapAmb": 0}
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        if key in caps:
            try:
                caps[key] = int(value.strip()[:16], 16)
            except ValueError:
                pass
    return caps["CapEff"], caps["CapAmb"]


def has_cap(mask: int, bit: int) -> bool:
    return bool(mask >> bit & 1)


def limit_value(value: int) -> float:
    return float("inf") if value == INFINITY else float(value)


def errno_name(code: int) -> str:
    return errno.errorcode.get(code, str(code))


def fmt_limit(value: int) -> str:
    return "unlimited" if value == INFINITY else f"{value // 1024} KB"


def fmt_bytes(value: int) -> str:
    return f"{value // MIB} MiB" if value >= MIB and value % MIB == 0 else f"{value} bytes"


def should_prove_pinning(mode: str, strategy: str) -> bool:
    # An RDMA pod always proves it can pin, whatever it declares; a TCP pod declaring "none" is not
    # expected to pin at all.
    return not (mode == "tcp" and strategy == "none")


def soft_raise_target(limit: Tuple[int, int]) -> Optional[Tuple[int, int]]:
    """Lifting the soft limit up to the hard one needs no privilege, and without it a pod whose
    hard limit would allow pinning is refused. Done first, whatever the strategy."""
    soft, hard = limit
    return (hard, hard) if limit_value(soft) < limit_value(hard) else None


def memlock_raise_target(strategy: str, limit: Tuple[int, int]) -> Optional[Tuple[int, int]]:
    """Whether to ask setrlimit for unlimited (after the soft-to-hard step). The kernel decides:
    raising the hard limit needs SYS_RESOURCE (kernel/sys.c), which only root-sys-resource and
    privileged containers are meant to have."""
    if strategy in ("root-sys-resource", "privileged") and limit != (INFINITY, INFINITY):
        return (INFINITY, INFINITY)
    return None


def pin_blocked_reason(pin_bytes: int, cgroup: CgroupMemory) -> str:
    """Why the proof must not run: mlock faults every page of the buffer in, so a buffer the
    container's memory limit cannot hold gets the container OOM-killed (exit 137, no message)."""
    if cgroup.limit is None or pin_bytes + PIN_HEADROOM <= cgroup.limit:
        return ""
    return (
        f"the proof buffer does not fit the container's memory limit: LAUNCHER_PIN_BYTES is {fmt_bytes(pin_bytes)} and the "
        f"limit is {fmt_bytes(cgroup.limit)} ({cgroup.source}); with the {fmt_bytes(PIN_HEADROOM)} the launcher keeps for "
        "itself, mlock would fault in more than the limit, and the OOM killer would end the container with exit 137 "
        "and no message. Fix: lower LAUNCHER_PIN_BYTES (the stack's defaults.pin_bytes) to at most "
        f"{fmt_bytes(max(cgroup.limit - PIN_HEADROOM, 0))}, or raise the pod's memory limit (resources.limits.memory) "
        f"to at least {fmt_bytes(pin_bytes + PIN_HEADROOM)}"
    )


def proof_bytes(pin_bytes: int, cgroup: CgroupMemory) -> int:
    """The size of the mlock proof: LAUNCHER_PIN_BYTES, which pin_blocked_reason checks against the
    container's memory limit; at most UNGUARDED_PIN_BYTES when that limit is unknown, since a blind
    mlock of more could get the container OOM-killed (exit 137, no message) before it says anything."""
    return pin_bytes if cgroup.known else min(pin_bytes, UNGUARDED_PIN_BYTES)


def raise_memlock(target: Tuple[int, int]) -> Optional[str]:
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, target)
        return None
    except (OSError, ValueError) as exc:  # Python reports EPERM as "not allowed to raise maximum limit"
        return str(exc)


def prove_pinning(nbytes: int) -> int:
    """mlock an anonymous buffer the way ibv_reg_mr pins pages; 0 on success, else the errno.
    The kernel applies the same rule to both: RLIMIT_MEMLOCK unless IPC_LOCK is effective."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mlock.argtypes = libc.munlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    try:
        # fileno -1 makes Python add MAP_ANONYMOUS itself.
        buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError, OverflowError) as exc:
        return getattr(exc, "errno", None) or errno.ENOMEM
    try:
        anchor = ctypes.c_char.from_buffer(buf)
        address = ctypes.addressof(anchor)
        del anchor  # the mmap cannot be closed while a ctypes view of it is alive
        if libc.mlock(address, nbytes) != 0:
            return ctypes.get_errno() or errno.ENOMEM
        libc.munlock(address, nbytes)
        return 0
    finally:
        buf.close()


def gather_memlock(cfg: Config, cgroup: CgroupMemory) -> MemlockFacts:
    cap_eff, cap_amb = parse_caps(_read("/proc/self/status", PROC_STATUS_LIMIT) or "")
    before = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    soft_target = soft_raise_target(before)
    soft_error = raise_memlock(soft_target) if soft_target else None
    target = memlock_raise_target(cfg.strategy, resource.getrlimit(resource.RLIMIT_MEMLOCK))
    raise_error = raise_memlock(target) if target else None
    after = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    prove = should_prove_pinning(cfg.mode, cfg.strategy)
    size = proof_bytes(cfg.pin_bytes, cgroup) if prove else cfg.pin_bytes
    blocked = pin_blocked_reason(size, cgroup) if prove else ""
    pin = prove_pinning(size) if prove and not blocked else None
    cap_last = parse_decimal(_read("/proc/sys/kernel/cap_last_cap") or "")
    return MemlockFacts(
        os.geteuid(),
        cap_eff,
        cap_amb,
        before,
        target,
        raise_error,
        after,
        size,
        pin,
        cap_last if cap_last is not None and 0 <= cap_last < 64 else DEFAULT_CAP_LAST,
        soft_target,
        soft_error,
        blocked,
        cfg.pin_bytes if size != cfg.pin_bytes else None,
    )


def gather_facts(cfg: Config) -> Facts:
    # The memory limit first: it decides whether the pinning proof may run at all.
    cgroup = read_cgroup_memory(cfg.sysfs_root)
    odd: List[str] = []
    net_names = tuple(read_net_names(cfg.sysfs_root, odd))
    # The pod's interfaces first: the devices behind them are read before any other (read_rdma_ports' bound).
    links = read_interface_links(cfg.sysfs_root, [i for i in cfg.rdma_interfaces if i in net_names])
    return Facts(
        memlock=gather_memlock(cfg, cgroup),
        ports=tuple(read_rdma_ports(cfg.sysfs_root, odd, [d for link in links for d in link.devices])),
        net_names=net_names,
        cgroup=cgroup,
        odd_entries=tuple(odd),
        links=links,
        isolated=bool(sys.flags.isolated),
    )


# ---------------------------------------------------------------------------------------------
# Decisions: pure functions over Config and Facts.
# ---------------------------------------------------------------------------------------------


@dataclass
class MemlockVerdict:
    ok: bool
    lines: List[str]
    problem: str = ""  # causes and fix, when not ok


def ipc_lock_survives_exec(f: MemlockFacts) -> bool:
    """IPC_LOCK effective in the launcher and still effective in the command it execs: root keeps its
    bounding set across execve; any other uid keeps only ambient capabilities."""
    return has_cap(f.cap_eff, CAP_IPC_LOCK) and (f.uid == 0 or has_cap(f.cap_amb, CAP_IPC_LOCK))


def effective_pin_limit(f: MemlockFacts) -> Tuple[Optional[int], str]:
    """How much the command may pin (None: no limit), and why."""
    soft = f.limit_after[0]
    if ipc_lock_survives_exec(f):
        return None, f"unlimited: CAP_IPC_LOCK is effective, so the RLIMIT_MEMLOCK of {fmt_limit(soft)} is moot"
    if soft == INFINITY:
        return None, "unlimited (RLIMIT_MEMLOCK)"
    return soft, f"{fmt_limit(soft)} (the soft RLIMIT_MEMLOCK)"


def judge_memlock(strategy: str, f: MemlockFacts) -> MemlockVerdict:
    ipc = has_cap(f.cap_eff, CAP_IPC_LOCK)
    sysres = has_cap(f.cap_eff, CAP_SYS_RESOURCE)
    soft, hard = f.limit_after
    lines = [
        f"strategy: {strategy}",
        f"uid: {f.uid}",
        f"CapEff: {f.cap_eff:#018x} (IPC_LOCK {'effective' if ipc else 'not effective'}, "
        f"SYS_RESOURCE {'effective' if sysres else 'not effective'})",
        f"RLIMIT_MEMLOCK: soft {fmt_limit(f.limit_before[0])}, hard {fmt_limit(f.limit_before[1])}",
    ]
    if f.soft_raise_target is not None:
        if f.soft_raise_error is None:
            lines.append(f"raised the soft RLIMIT_MEMLOCK to the hard limit, {fmt_limit(f.soft_raise_target[1])} (needs no privilege)")
        else:
            lines.append(f"could not raise the soft RLIMIT_MEMLOCK to the hard limit: {f.soft_raise_error}")
    if f.raise_target is not None:
        wanted = "/".join(fmt_limit(v) for v in f.raise_target)
        if f.raise_error is None:
            lines.append(f"raised RLIMIT_MEMLOCK to {wanted} (soft/hard)")
        else:
            lines.append(f"could not raise RLIMIT_MEMLOCK to {wanted}: {f.raise_error}")
    if f.limit_after != f.limit_before:
        lines.append(f"RLIMIT_MEMLOCK now: soft {fmt_limit(soft)}, hard {fmt_limit(hard)}")
    lines.append("effective pinning limit: " + effective_pin_limit(f)[1])
    size = fmt_bytes(f.pin_bytes)
    if f.requested_bytes is not None:
        lines.append(
            f"proof buffer: {size}, not LAUNCHER_PIN_BYTES {fmt_bytes(f.requested_bytes)}: the container's memory limit is "
            "unknown, so nothing guards a bigger mlock against the OOM killer"
        )
    if f.pin_blocked:
        lines.append(f"mlock of {size}: not attempted (the container's memory limit cannot hold it)")
        return MemlockVerdict(False, lines, "cannot prove memory pinning: " + f.pin_blocked)
    if f.pin_errno is None:
        lines.append("pinning not checked (strategy none in tcp mode)")
        return MemlockVerdict(True, lines)

    if f.pin_bytes <= CRIO_DEFAULT_MEMLOCK:
        lines.append(f"warning: a {size} proof buffer fits CRI-O's 8 MiB default and proves nothing; raise LAUNCHER_PIN_BYTES")
    if f.pin_errno != 0:
        lines.append(f"mlock of {size}: FAILED ({errno_name(f.pin_errno)}: {os.strerror(f.pin_errno)})")
        return MemlockVerdict(False, lines, diagnose_pinning(strategy, f))

    how = "IPC_LOCK is effective, so RLIMIT_MEMLOCK does not apply" if ipc else f"within RLIMIT_MEMLOCK ({fmt_limit(soft)})"
    lines.append(f"mlock of {size}: ok ({how})")
    if f.uid != 0 and ipc and not has_cap(f.cap_amb, CAP_IPC_LOCK) and limit_value(soft) < f.asked_bytes:
        # A non-root process keeps only ambient capabilities across execve: torchrun would lose
        # IPC_LOCK and fall back to the low limit.
        problem = (
            f"IPC_LOCK is effective in the launcher but not ambient, and a non-root uid "
            f"({f.uid}) loses it at exec; the training process would be held to "
            f"{fmt_limit(soft)}. Fix: " + NON_ROOT_HOWTO
        )
        return MemlockVerdict(False, lines, problem)
    if not ipc and soft != INFINITY:
        lines.append(f"note: the limit is finite ({fmt_limit(soft)}); NCCL may register more than the proof buffer; unlimited is safer")
    lines.extend(strategy_consistency_notes(strategy, f, ipc))
    return MemlockVerdict(True, lines)


def strategy_consistency_notes(strategy: str, f: MemlockFacts, ipc: bool) -> List[str]:
    """Pinning works, but maybe not for the reason the stack declares; say so, since a later change
    (another node pool, another SCC) would then break it."""
    notes = []
    # The node's limit is the hard one: CRI-O's default_ulimits sets both, and soft is raised to hard.
    if strategy == "node-limit" and f.limit_before[1] != INFINITY:
        notes.append(
            f"note: strategy node-limit, but this node's hard limit is {fmt_limit(f.limit_before[1])}"
            + ("; pinning works through IPC_LOCK instead" if ipc else "")
        )
    if strategy in ("root-ipc-lock", "root-sys-resource", "privileged") and f.uid != 0:
        notes.append(f"note: strategy {strategy} expects uid 0, but the container runs as uid {f.uid}")
    if strategy == "root-sys-resource" and f.raise_error:
        notes.append(
            "note: strategy root-sys-resource, but the limit could not be raised; "
            "pinning works through " + ("IPC_LOCK" if ipc else "the existing limit")
        )
    if strategy == "none":
        notes.append(
            "note: memlock strategy none in rdma mode; pinning works here, but declare the "
            "strategy that makes it work so the preflight can check it"
        )
    if strategy == "privileged" and not f.holds_every_cap:
        notes.append("note: strategy privileged, but the container does not hold every capability")
    return notes


def diagnose_pinning(strategy: str, f: MemlockFacts) -> str:
    """Why mlock failed, and which strategy (KNOWLEDGE.md's table) would make it work."""
    ipc = has_cap(f.cap_eff, CAP_IPC_LOCK)
    sysres = has_cap(f.cap_eff, CAP_SYS_RESOURCE)
    soft, hard = f.limit_after
    header = "cannot pin memory, which RDMA needs (ibv_reg_mr would fail with 'Cannot allocate memory'):\n"
    if ipc or limit_value(soft) >= f.pin_bytes:
        # Neither the limit nor the strategy is at fault; blaming them would send the user the wrong way.
        moot = "IPC_LOCK is effective" if ipc else f"RLIMIT_MEMLOCK ({fmt_limit(soft)}) covers the {fmt_bytes(f.pin_bytes)} buffer"
        refused = f"the kernel refused with {errno_name(f.pin_errno or 0)}"
        if f.pin_errno in (errno.ENOMEM, errno.EAGAIN):
            refused += (
                ", so memory itself is short: the container's memory cgroup (its limit, or what it already uses) or the node's free memory"
            )
        return (
            header
            + f"  cause: the memlock limit is not the cause ({moot}): {refused}\n"
            + "  fix: give the pod more memory, or lower LAUNCHER_PIN_BYTES well below its memory limit"
        )
    causes = []
    if f.uid != 0:
        causes.append(
            f"the container runs as non-root uid {f.uid}: capabilities added in "
            f"securityContext.capabilities.add reach the effective set only for uid 0 "
            f"(CapEff={f.cap_eff:#x}), so IPC_LOCK cannot lift the limit"
        )
    else:
        causes.append(
            f"CAP_IPC_LOCK is not effective (CapEff={f.cap_eff:#x}): the container does not "
            "add IPC_LOCK, or the SCC that admitted it (annotation openshift.io/scc) does not "
            "allow it"
        )
    crio = " (CRI-O's default)" if soft == CRIO_DEFAULT_MEMLOCK else ""
    causes.append(
        f"RLIMIT_MEMLOCK is {fmt_limit(soft)}{crio}, hard {fmt_limit(hard)}, below the {f.pin_bytes // 1024} KB the launcher tried to pin"
    )
    if f.raise_target is not None and f.raise_error is not None:
        causes.append(
            f"the limit could not be raised to unlimited ({f.raise_error}): raising a hard "
            f"limit needs CAP_SYS_RESOURCE, which is "
            f"{'effective' if sysres else 'not effective'}"
        )
    fixes = [declared_strategy_fix(strategy, f, sysres)]
    if f.uid != 0:
        fixes.append("for a non-root uid only node-limit or privileged work: " + NON_ROOT_HOWTO)
    else:
        fixes.append("strategies that work: " + "; or ".join(STRATEGY_HOWTO.values()))
    return header + "\n".join("  cause: " + c for c in causes) + "\n" + "\n".join("  fix: " + x for x in fixes)


def declared_strategy_fix(strategy: str, f: MemlockFacts, sysres: bool) -> str:
    """The fix for the declared strategy, once the memlock limit is known to be the cause."""
    if strategy == "none":
        return "the workload declares memlock strategy none but runs in rdma mode: choose one"
    if strategy == "node-limit":
        return (
            f"strategy node-limit, but this node's hard memlock limit is {fmt_limit(f.limit_before[1])}: "
            "the CRI-O default_ulimits MachineConfig is not applied here, or the pod was scheduled "
            "outside the node pool that has it"
        )
    if strategy == "privileged" and not f.holds_every_cap:
        return (
            "strategy privileged, but the container does not hold every capability "
            f"(CapEff={f.cap_eff:#x}): set securityContext.privileged: true and grant an SCC "
            "that allows privileged containers"
        )
    if f.uid != 0:
        return f"strategy {strategy} needs uid 0: set the pod's runAsUser: 0 and grant an SCC with runAsUser RunAsAny"
    if strategy == "root-ipc-lock" or sysres:
        return "strategy root-ipc-lock needs IPC_LOCK in capabilities.add and allowed by the SCC"
    return (
        "strategy root-sys-resource needs SYS_RESOURCE in capabilities.add and allowed by the SCC; "
        "or use root-ipc-lock, which needs IPC_LOCK only"
    )


def hca_value(ports: Sequence[RdmaPort]) -> str:
    """Exact-match form: without the leading '=', NCCL treats `mlx5_1` as a prefix of mlx5_10.."""
    return "=" + ",".join(p.name for p in ports)


def unknown_link_layer(ports: Sequence[RdmaPort]) -> List[str]:
    return [p.name for p in ports if p.link_layer not in LINK_LAYERS]


def choose_gid_index(ports: Sequence[RdmaPort], ndevs: Optional[FrozenSet[str]] = None) -> Tuple[Optional[int], str]:
    """One GID index valid (RoCE v2, IPv4-mapped, of one of `ndevs` where the GID names its netdev) on
    every selected RoCE port, else None and why."""
    roce = [p for p in ports if p.roce]
    unknown = unknown_link_layer(ports)
    unchecked = f"the link layer of {', '.join(unknown)} is unknown (link_layer unreadable), so no GID index is checked there"
    if not roce:
        if unknown:
            return None, unchecked + "; left unset so NCCL >= 2.21.5 picks one itself"
        return None, "no RoCE port selected; InfiniBand uses GID index 0, NCCL needs no setting"
    per_port = {p.name: p.roce_v2_ipv4_indexes(ndevs) for p in roce}
    foreign = {p.name: p.foreign_gids(ndevs) for p in roce}
    counted = f"counting only GIDs of the pod's interfaces ({', '.join(sorted(ndevs or (), key=natural_key))})"
    common = set.intersection(*(set(v) for v in per_port.values()))
    if common:
        index = min(common)
        reason = f"the RoCE v2 IPv4 GID is at index {index} on every selected RoCE port"
        if any(foreign.values()):
            reason += f", {counted}"
        return index, reason + (f"; {unchecked}" if unknown else "")
    table = ", ".join(f"{name} -> {','.join(map(str, v)) or 'none'}" for name, v in per_port.items())
    if any(foreign.values()):
        table += f"; {counted}"
    return None, (f"no single RoCE v2 IPv4 GID index holds on every port ({table}); left unset so NCCL >= 2.21.5 picks one per port itself")


def parse_nccl_list(spec: str) -> Tuple[bool, bool, List[Tuple[str, Optional[int]]], List[str]]:
    """NCCL's interface/HCA list syntax: optional '^' (exclude), then optional '=' (exact),
    then comma-separated `name[:port]` entries. Returns (exclude, exact, entries, invalid): an entry
    whose port is not a plain number (NCCL would read '²' as port 0) goes to `invalid`."""
    exclude = spec.startswith("^")
    rest = spec[1:] if exclude else spec
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    entries: List[Tuple[str, Optional[int]]] = []
    invalid: List[str] = []
    for item in rest.split(","):
        item = item.strip()
        if not item:
            continue
        name, colon, port = item.partition(":")
        if colon and not NUMBER_NAME.fullmatch(port):
            invalid.append(item)
            continue
        entries.append((name, int(port) if colon else None))
    return exclude, exact, entries, invalid


def invalid_entry_problems(invalid: Sequence[str]) -> List[NcclProblem]:
    return [NcclProblem(f"has entry {shown(item)}, whose port is not a port number") for item in invalid]


def entry_matches(name: str, entry: str, exact: bool) -> bool:
    """NCCL's list rule: an entry is the whole name in the exact ('=') form, else a prefix of it."""
    return name == entry if exact else name.startswith(entry)


def nccl_list_matches(spec: str, names: Sequence[str]) -> List[str]:
    """The names an NCCL_SOCKET_IFNAME-style list selects (ports ignored, invalid entries skipped)."""
    exclude, exact, entries, _ = parse_nccl_list(spec)
    return [n for n in names if any(entry_matches(n, e, exact) for e, _ in entries) != exclude]


@dataclass
class DeviceSelection:
    """Which RDMA ports are this pod's. With the RDMA subsystem in shared netns mode (the SR-IOV
    default) a pod, certainly a privileged one, sees every RDMA device of the host, the host's own
    ACTIVE NIC with the node's IPv4 GID included."""

    pod_ports: List[RdmaPort]  # ports of the devices behind the pod's interfaces (every port if nothing maps)
    host_ports: List[RdmaPort]  # ports of the devices not attached to this pod (none if nothing maps)
    mapping: Dict[str, List[str]]  # interface -> the RDMA devices behind it (never an empty list)
    via: Dict[str, str]  # interface -> how it was mapped
    lines: List[str]
    warnings: List[str]

    @property
    def mapped(self) -> bool:
        """False: nothing mapped, every port is considered."""
        return bool(self.mapping)

    @property
    def gid_ndevs(self) -> Optional[FrozenSet[str]]:
        """The netdevs a GID of the pod's ports may name (the mapped interfaces); None: any."""
        return frozenset(self.mapping) if self.mapping else None

    @property
    def pod_devices(self) -> List[str]:
        return sorted({p.device for p in self.pod_ports}, key=natural_key)


def decide_devices(cfg: Config, facts: Facts) -> DeviceSelection:
    known = {p.device for p in facts.ports}
    links = {link.interface: link for link in facts.links}
    present = [i for i in cfg.rdma_interfaces if i in facts.net_names]
    mapping: Dict[str, List[str]] = {}
    via: Dict[str, str] = {}
    unmapped: List[str] = []
    warnings: List[str] = []
    for interface in present:
        link = links.get(interface)
        behind = [d for d in (link.devices if link else ()) if d in known]
        if link and behind:
            mapping[interface] = behind
            via[interface] = f"PCI function {link.pci}" if link.pci else "PCI function"
            continue
        # No PCI link: a device whose GID table names the interface, but only if it is the only one.
        # In shared mode another pod's VF can carry an interface of the same name in its namespace.
        claims = sorted({p.device for p in facts.ports if any(g.ndev == interface for g in p.gids)}, key=natural_key)
        if len(claims) == 1:
            mapping[interface] = claims
            via[interface] = "its GID table entries (gid_attrs/ndevs)"
            continue
        unmapped.append(interface)
        if claims:
            warnings.append(
                f"{interface} has no PCI link to an RDMA device, and the GID tables of {', '.join(claims)} all name it "
                "(other pods' interfaces can have the same name); it is mapped to none of them"
            )
    lines = [f"{interface} -> {', '.join(devices)} (through {via[interface]})" for interface, devices in mapping.items()]
    pod_devices = {d for devices in mapping.values() for d in devices}
    if pod_devices:
        pod_ports = [p for p in facts.ports if p.device in pod_devices]
        host_ports = [p for p in facts.ports if p.device not in pod_devices]
        if unmapped and cfg.mode == "rdma":
            warnings.append(
                f"no RDMA device could be tied to {', '.join(unmapped)} (no {cfg.sysfs_root}/class/net/IF/device/infiniband, "
                "no unique GID naming it): NCCL_IB_HCA leaves them out"
            )
        if host_ports:
            lines.append("host devices not attached to this pod, left out: " + ", ".join(f"{p.name} {p.state}" for p in host_ports))
        return DeviceSelection(pod_ports, host_ports, mapping, via, lines, warnings)

    if cfg.mode == "rdma":
        if not cfg.rdma_interfaces:
            lines.append(
                "LAUNCHER_RDMA_INTERFACES is empty (InfiniBand without SR-IOV): no interface to find the pod's devices by; "
                "every ACTIVE port is used"
            )
        elif unmapped:
            warnings.append(
                f"could not map {', '.join(unmapped)} to RDMA devices (no {cfg.sysfs_root}/class/net/IF/device/infiniband, "
                "no unique GID naming them): every ACTIVE port is used, and with the RDMA subsystem in shared netns mode "
                "a host's own NIC may be among them"
            )
        elif not present:
            lines.append("none of LAUNCHER_RDMA_INTERFACES exists in the pod: no interface to find the pod's devices by")
    return DeviceSelection(list(facts.ports), [], mapping, via, lines, warnings)


@dataclass
class NetworkDecision:
    detected: Dict[str, Optional[str]]  # None: deliberately left unset
    why: Dict[str, str]
    warnings: List[str]
    errors: List[str]
    fell_back: bool = False
    selected: List[RdmaPort] = field(default_factory=list)  # the ports NCCL_IB_HCA names


def decide_network(cfg: Config, sel: DeviceSelection, net_names: Sequence[str]) -> NetworkDecision:
    if cfg.mode == "tcp":
        d = tcp_settings(cfg, "tcp mode")
        if any(p.active for p in sel.pod_ports):
            d.warnings.append("RDMA ports are ACTIVE but the workload runs in tcp mode")
        return d

    every_active = [p for p in sel.pod_ports if p.active]
    active = [p for p in every_active if not cfg.link_layer or p.link_layer == cfg.link_layer]
    other_layer = [p for p in every_active if p not in active]
    if not active:
        found = ", ".join(f"{p.name} {p.state}" for p in sel.pod_ports) or "none"
        whose = "of this pod " if sel.mapped else ""
        layer = f"with link layer {cfg.link_layer} (LAUNCHER_LINK_LAYER) " if cfg.link_layer else ""
        reason = f"no ACTIVE RDMA port {whose}{layer}under {cfg.sysfs_root}/class/infiniband (found: {found})"
        if other_layer:
            reason += f"; ACTIVE, but another link layer: {', '.join(f'{p.name} {p.link_layer}' for p in other_layer)}"
        host_active = [p.name for p in sel.host_ports if p.active]
        if host_active:
            reason += f"; ACTIVE, but host devices not attached to this pod: {', '.join(host_active)}"
        reason += "; check that the pod requests the SR-IOV RDMA resources and that the links are up"
        if other_layer:
            reason += ", and that LAUNCHER_LINK_LAYER (the stack's fabric.link_layer) is right"
        if not cfg.tcp_fallback:
            return NetworkDecision({}, {}, [], [reason + "; set LAUNCHER_TCP_FALLBACK=true to run over TCP instead"])
        d = tcp_settings(cfg, "FELL BACK TO TCP")
        d.fell_back = True
        d.warnings.append("!!! RDMA MODE FELL BACK TO TCP: " + reason + ". Training runs over sockets, roughly 10x less bandwidth. !!!")
        return d

    detected: Dict[str, Optional[str]] = {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": hca_value(active)}
    why = {
        "NCCL_IB_DISABLE": "rdma mode",
        "NCCL_IB_HCA": ("the ACTIVE ports behind LAUNCHER_RDMA_INTERFACES" if sel.mapped else "the ACTIVE ports") + ", exact-match form",
    }
    down = [p.name for p in sel.pod_ports if not p.active]
    if down:
        why["NCCL_IB_HCA"] += f"; not ACTIVE, left out: {', '.join(down)}"
    if sel.host_ports:
        why["NCCL_IB_HCA"] += f"; host devices not attached to this pod, left out: {', '.join(p.name for p in sel.host_ports)}"
    for layer, ports in by_link_layer(other_layer).items():
        why["NCCL_IB_HCA"] += f"; link layer {layer}, not LAUNCHER_LINK_LAYER {cfg.link_layer}, left out: {', '.join(ports)}"
    index, reason = choose_gid_index(active, sel.gid_ndevs)
    detected["NCCL_IB_GID_INDEX"] = None if index is None else str(index)
    why["NCCL_IB_GID_INDEX"] = reason

    warnings: List[str] = []
    layers = by_link_layer([p for p in active if p.link_layer in LINK_LAYERS])
    if len(layers) > 1:
        unmapped = "" if sel.mapped else ", and nothing ties them to the pod's interfaces, so a host's own NIC may be among them"
        mix = "; ".join(f"{layer}: " + ", ".join(ports) for layer, ports in layers.items())
        warnings.append(
            f"the ACTIVE ports mix link layers ({mix}): "
            f"NCCL_IB_HCA names all of them and the GID index is chosen from the Ethernet (RoCE) ones{unmapped}; "
            "set LAUNCHER_LINK_LAYER (the stack's fabric.link_layer) to use one fabric only"
        )
    unknown = unknown_link_layer(active)
    if unknown:
        warnings.append(
            f"the link layer of {', '.join(unknown)} is unknown (its link_layer file cannot be read): used in NCCL_IB_HCA, "
            "GID index not checked there"
        )
    errors: List[str] = []
    socket, socket_why, problem = rdma_socket_ifname(cfg, net_names)
    detected["NCCL_SOCKET_IFNAME"] = socket
    why["NCCL_SOCKET_IFNAME"] = socket_why
    if problem and socket is None:
        errors.append(problem)
    elif problem:
        warnings.append(problem)
    return NetworkDecision(detected, why, warnings, errors, selected=active)


def by_link_layer(ports: Sequence[RdmaPort]) -> Dict[str, List[str]]:
    """Port names grouped by link layer, the layers in alphabetical order."""
    groups: Dict[str, List[str]] = {}
    for p in sorted(ports, key=lambda p: p.link_layer):
        groups.setdefault(p.link_layer, []).append(p.name)
    return groups


# NCCL variables checked against what the launcher sees. Besides MANAGED_NCCL: NCCL_NET (which
# transport), NCCL_IB_* and these GPUDirect RDMA settings, which only RDMA uses.
RDMA_ONLY = ("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ")


@dataclass(frozen=True)
class NcclProblem:
    text: str  # continues "<name>=<value> ...": "names mlx5_10, which ..."
    harmful: bool = True  # False: NCCL ignores the value here (an RDMA-only setting under NCCL_IB_DISABLE=1)
    transport: bool = False  # it contradicts the transport (rdma vs tcp), not the pod's devices or interfaces


@dataclass(frozen=True)
class NcclContext:
    rdma: bool  # rdma mode that did not fall back
    fell_back: bool
    selected: Tuple[RdmaPort, ...]  # the ports the launcher chose (the pod's ACTIVE ports)
    pod_devices: FrozenSet[str]  # every device when nothing maps
    ports: Tuple[RdmaPort, ...]  # every port the pod can see
    net_names: Tuple[str, ...]
    nnodes: int
    gid_ndevs: Optional[FrozenSet[str]] = None  # the netdevs a GID of the pod's ports may name; None: any
    link_layer: str = ""  # LAUNCHER_LINK_LAYER: NCCL_IB_HCA may select no port of another


def nccl_problems(key: str, value: str, ctx: NcclContext) -> Tuple[List[NcclProblem], List[str]]:
    """What makes `value` wrong here, and advisories (it works, but not as well as it could)."""
    spec = value.strip()
    if key == "NCCL_SOCKET_IFNAME":
        return socket_problems(spec, ctx), []
    if not ctx.rdma:
        mode = "rdma mode that fell back to tcp" if ctx.fell_back else "tcp mode"
        if key == "NCCL_IB_DISABLE":
            return ([] if spec == "1" else [NcclProblem(f"keeps NCCL's IB transport on in {mode}", transport=True)]), []
        if key == "NCCL_NET":
            return ([NcclProblem(f"selects NCCL's IB transport in {mode}", transport=True)] if spec.lower() == "ib" else []), []
        if key.startswith("NCCL_IB_") or key in RDMA_ONLY:
            return [NcclProblem(f"is an RDMA-only setting, ignored in {mode} (NCCL_IB_DISABLE=1)", harmful=False, transport=True)], []
        return [], []
    if key == "NCCL_IB_DISABLE":
        return ([] if spec in ("", "0") else [NcclProblem("turns NCCL's IB transport off in rdma mode", transport=True)]), []
    if key == "NCCL_NET":
        return ([NcclProblem("selects NCCL's socket transport in rdma mode", transport=True)] if spec.lower() == "socket" else []), []
    if key == "NCCL_IB_HCA":
        return hca_problems(spec, ctx)
    if key == "NCCL_IB_GID_INDEX":
        return gid_index_problems(spec, ctx)
    return [], []


def hca_problems(spec: str, ctx: NcclContext) -> Tuple[List[NcclProblem], List[str]]:
    """Seed 002 shipped NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11 while mlx5_6..9 were the ACTIVE ones;
    images bake the same list. Entries that name nothing ACTIVE, and selections that reach a host
    device, are wrong; a prefix that also catches other devices, or a subset of the pod's ports,
    only deserves a warning."""
    exclude, exact, entries, invalid = parse_nccl_list(spec)

    def hit(p: RdmaPort, name: str, port: Optional[int]) -> bool:
        return entry_matches(p.device, name, exact) and (port is None or p.port == port)

    def selects(p: RdmaPort) -> bool:
        # An empty list is no list: NCCL then takes every device it finds.
        return not (entries or invalid) or any(hit(p, n, q) for n, q in entries) != exclude

    problems = invalid_entry_problems(invalid)
    advisories: List[str] = []
    if not exclude:
        for name, port in entries:
            label = name if port is None else f"{name}:{port}"
            hits = [p for p in ctx.ports if hit(p, name, port)]
            if not hits:
                problems.append(NcclProblem(f"names {label}, which does not exist here"))
            elif not any(p.active for p in hits):
                states = ", ".join(f"{p.name} {p.state}" for p in hits)
                problems.append(NcclProblem(f"names {label}, which is not an ACTIVE RDMA device here ({states})"))
            elif not exact and any(p.device != name for p in hits):
                others = ", ".join(sorted({p.device for p in hits if p.device != name}, key=natural_key))
                advisories.append(f"entry {name} is a prefix and also selects {others}; use the exact form with a leading '='")
    picked = [p for p in ctx.ports if p.active and selects(p)]  # NCCL skips ports that are not ACTIVE
    host = [p.name for p in picked if p.device not in ctx.pod_devices]
    if host:
        problems.append(NcclProblem(f"selects {', '.join(host)}: host devices not attached to this pod"))
    if ctx.link_layer:
        for layer, names in by_link_layer([p for p in picked if p.link_layer != ctx.link_layer]).items():
            problems.append(NcclProblem(f"selects {', '.join(names)}: link layer {layer}, not LAUNCHER_LINK_LAYER {ctx.link_layer}"))
    if not problems:
        if not any(p in ctx.selected for p in picked):
            problems.append(NcclProblem("selects no ACTIVE port of this pod"))
        else:
            missing = [p.name for p in ctx.selected if p not in picked]
            if missing:
                advisories.append(f"leaves out {', '.join(missing)}, ACTIVE ports of this pod")
    return problems, advisories


def gid_index_problems(spec: str, ctx: NcclContext) -> Tuple[List[NcclProblem], List[str]]:
    index = parse_decimal(spec)
    if index is None or index < 0:
        return [NcclProblem("is not a GID index (a decimal integer >= 0)")], []
    unknown = unknown_link_layer(ctx.selected)
    advisories = [f"cannot be checked on {', '.join(unknown)} (link layer unknown)"] if unknown else []
    wrong = [p for p in ctx.selected if p.roce and index not in p.roce_v2_ipv4_indexes(ctx.gid_ndevs)]
    if not wrong:
        return [], advisories
    # The index may be a good GID of another netdev (the host's, on a device the pod shares): say whose.
    others = sorted({g.ndev for p in wrong for g in p.foreign_gids(ctx.gid_ndevs) if g.index == index}, key=natural_key)
    ours = f" of the pod's interfaces ({', '.join(sorted(ctx.gid_ndevs or (), key=natural_key))})" if others else ""
    text = f"is not a RoCE v2 IPv4 GID{ours} on {', '.join(p.name for p in wrong)}"
    if others:
        text += f" (index {index} is {', '.join(others)}'s)"
    return [NcclProblem(text)], advisories


def socket_problems(spec: str, ctx: NcclContext) -> List[NcclProblem]:
    if not spec or not ctx.net_names:  # empty: NCCL's own default; no interface list: nothing to judge by
        return []
    invalid = parse_nccl_list(spec)[3]
    if invalid:
        return invalid_entry_problems(invalid)
    chosen = nccl_list_matches(spec, ctx.net_names)
    if not chosen:
        return [
            NcclProblem(
                f"matches no interface in the pod ({', '.join(ctx.net_names)}); NCCL would fail with 'Bootstrap: no socket interface found'"
            )
        ]
    if ctx.nnodes > 1 and all(name == "lo" for name in chosen):
        return [NcclProblem("selects only lo, which cannot reach the other pods")]
    return []


@dataclass
class NcclDecision:
    env: Dict[str, str]
    lines: List[str]
    overrides: List[Dict[str, Any]]  # name, inherited (the value found), new (None: removed), reason, explicit
    warnings: List[str]
    errors: List[str]


def decide_nccl(cfg: Config, net: NetworkDecision, ctx: NcclContext) -> NcclDecision:
    """Detected values for what is unset; every NCCL_* found at start checked (see the docstring:
    explicit values stop the pod when wrong, inherited ones are overridden unless LAUNCHER_STRICT)."""
    d = NcclDecision({}, [], [], [], [])
    for key in list(MANAGED_NCCL) + sorted(k for k in cfg.nccl if k not in MANAGED_NCCL):
        detected = net.detected.get(key)
        why = net.why.get(key, "")
        if key not in cfg.nccl:
            if detected is not None:
                d.env[key] = detected
                d.lines.append(f"{key}={detected}  ({why})")
            elif why:
                d.lines.append(f"{key} unset: {why}")
            continue

        value = cfg.nccl[key]
        explicit = key in cfg.explicit_nccl
        origin = "explicit" if explicit else "inherited"
        managed = key in MANAGED_NCCL
        would = ""
        if managed and detected != value and (detected is not None or why):
            choice = f"choose {key}={detected!r}" if detected is not None else "leave it unset"
            would = f"; detection would {choice}" + (f" ({why})" if why else "")
        problems, advisories = nccl_problems(key, value, ctx)
        d.warnings += [f"{origin} {key}={value}: {a}" for a in advisories]
        harmful = [p for p in problems if p.harmful]
        text = "; ".join(p.text for p in problems)

        if not problems or (explicit and not harmful):
            d.env[key] = value
            kept = "set explicitly by the workload" if explicit else "inherited (not in LAUNCHER_EXPLICIT_NCCL: the image's)"
            d.lines.append(f"{key}={value}  kept: {kept}{would}")
            if problems:  # harmless here, and the workload meant it
                d.warnings.append(f"explicit {key}={value} {text}")
            continue
        # A value that would keep RDMA on after the fallback the workload itself allowed
        # (LAUNCHER_TCP_FALLBACK=true) is overridden, explicit or not: the fallback is the later,
        # deliberate choice.
        covered = ctx.fell_back and bool(harmful) and all(p.transport for p in harmful)
        fallback_override = explicit and covered
        if explicit and not fallback_override:
            d.env[key] = value
            d.lines.append(f"{key}={value}  set explicitly by the workload, and wrong here{would}")
            d.errors.append(
                f"explicit {key}={value} {text}. The workload sets it on purpose (LAUNCHER_EXPLICIT_NCCL), so the launcher "
                f"does not override it: fix it in the workload's env, or leave it out and let the launcher choose{would}"
            )
            continue
        # Strict mode stops the pod only for what would break the run; what NCCL ignores here, or what
        # the fallback replaces anyway, is overridden as without it.
        if not explicit and cfg.strict and harmful and not covered:
            d.env[key] = value
            d.lines.append(f"{key}={value}  inherited, and wrong here{would}")
            d.errors.append(
                f"inherited {key}={value} {text}. It is not in LAUNCHER_EXPLICIT_NCCL, so it comes from the image, and "
                "LAUNCHER_STRICT=true stops the pod instead of overriding it: remove it from the image's ENV, or set the "
                f"right value in the workload's env{would}"
            )
            continue

        new = detected if managed else None
        reason = text
        if fallback_override:
            reason += "; overridden although explicit: rdma mode fell back to tcp (LAUNCHER_TCP_FALLBACK=true)"
        elif cfg.strict and not explicit:
            reason += "; LAUNCHER_STRICT does not stop the pod for it: " + (
                "the TCP fallback replaces it anyway" if covered else "NCCL ignores it here"
            )
        if new is None and why:
            reason += f"; the launcher leaves it unset: {why}"
        d.overrides.append({"name": key, "inherited": value, "new": new, "reason": reason, "explicit": explicit})
        if new is None:
            d.lines.append(f"{key} REMOVED: {origin} {value!r} {reason}")
        else:
            d.env[key] = new
            d.lines.append(f"{key}={new}  OVERRIDDEN: {origin} {value!r} {reason}")
        d.warnings.append(f"overrode {origin} {key}={value}: it {reason}; now " + (f"{key}={new}" if new is not None else "unset"))
    unset = sorted(cfg.explicit_nccl - set(cfg.nccl))
    if unset:
        d.lines.append(f"listed in LAUNCHER_EXPLICIT_NCCL but not set: {', '.join(unset)}")
    return d


def tcp_settings(cfg: Config, reason: str) -> NetworkDecision:
    return NetworkDecision(
        {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": cfg.tcp_socket_ifname},
        {"NCCL_IB_DISABLE": reason, "NCCL_SOCKET_IFNAME": f"{reason}: LAUNCHER_TCP_SOCKET_IFNAME"},
        [],
        [],
    )


def rdma_socket_ifname(cfg: Config, net_names: Sequence[str]) -> Tuple[Optional[str], str, str]:
    """(value, why, problem). NCCL bootstraps over these sockets; naming interfaces the pod lacks is
    seed 003's 'Bootstrap: no socket interface found'."""
    if not cfg.rdma_interfaces:
        return (cfg.tcp_socket_ifname, "LAUNCHER_RDMA_INTERFACES is empty: LAUNCHER_TCP_SOCKET_IFNAME", "")
    present = [i for i in cfg.rdma_interfaces if i in net_names]
    missing = [i for i in cfg.rdma_interfaces if i not in net_names]
    have = ", ".join(net_names) or "none"
    if not present:
        return (
            None,
            "",
            f"none of the SR-IOV interfaces {', '.join(missing)} exist in the pod "
            f"(interfaces: {have}); NCCL would fail with 'Bootstrap: no socket interface found'. "
            "The cause is the pod's k8s.v1.cni.cncf.io/networks annotation or the "
            "NetworkAttachmentDefinitions it names (missing in this namespace, or not attached)",
        )
    # Plain names are prefixes to NCCL (net1 also matches net10); go exact only when that matters.
    clash = any(n not in present and n.startswith(p) for n in net_names for p in present)
    value = ("=" if clash else "") + ",".join(present)
    problem = ""
    if missing:
        problem = (
            f"SR-IOV interfaces missing from the pod: {', '.join(missing)} (interfaces: {have}); "
            "check the networks annotation and the NetworkAttachmentDefinitions"
        )
    return value, "the LAUNCHER_RDMA_INTERFACES that exist in the pod", problem


def node_rank(cfg: Config) -> Tuple[int, str]:
    """The node rank, and where it came from (for the report)."""
    if cfg.completion_index is not None:
        source, raw = "JOB_COMPLETION_INDEX", cfg.completion_index
    elif cfg.nnodes == 1:
        return 0, "single node"
    else:
        match = re.search(r"-([0-9]+)$", cfg.pod_name)
        if not match:
            raise ConfigError(
                f"cannot tell the node rank: POD_NAME {shown(cfg.pod_name)} has no trailing -N ordinal and JOB_COMPLETION_INDEX is unset"
            )
        source, raw = "POD_NAME", match.group(1)
    rank = parse_decimal(raw)
    if rank is None:
        raise ConfigError(f"{source} gives node rank {shown(raw)}, not a decimal integer below 2**63")
    if not 0 <= rank < cfg.nnodes:
        raise ConfigError(f"node rank {rank} (from {source}) is outside 0..{cfg.nnodes - 1} for LAUNCHER_NNODES={cfg.nnodes}")
    return rank, (f"POD_NAME {cfg.pod_name}" if source == "POD_NAME" else source)


def rendezvous_env(cfg: Config, rank: int) -> Dict[str, str]:
    return {
        "MASTER_ADDR": cfg.master_addr or "127.0.0.1",
        "MASTER_PORT": str(cfg.master_port or DEFAULT_MASTER_PORT),
        "NNODES": str(cfg.nnodes),
        "NODE_RANK": str(rank),
        "NPROC_PER_NODE": str(cfg.gpus_per_node),
        "WORLD_SIZE": str(cfg.nnodes * cfg.gpus_per_node),
    }


def build_argv(cfg: Config, env: Mapping[str, str]) -> List[str]:
    if cfg.run == "command":
        return list(cfg.args)
    # Underscore spellings: accepted by every torchrun, old images included.
    return [
        "torchrun",
        "--nnodes",
        env["NNODES"],
        "--nproc_per_node",
        env["NPROC_PER_NODE"],
        "--node_rank",
        env["NODE_RANK"],
        "--master_addr",
        env["MASTER_ADDR"],
        "--master_port",
        env["MASTER_PORT"],
        *cfg.args,
    ]


@dataclass
class Plan:
    env: Dict[str, str]
    argv: List[str]
    sections: List[Tuple[str, List[str]]]
    warnings: List[str]
    errors: List[str]
    hostfile: Optional[Tuple[str, str]] = None  # (path, text) of the DeepSpeed hostfile to write
    bash_env: Optional[Tuple[str, str]] = None  # (path, text) of the file BASH_ENV names
    summary: Dict[str, Any] = field(default_factory=dict)  # the JSON report, less verdict, errors, warnings
    unset: List[str] = field(default_factory=list)  # inherited variables removed: the command must not see them


def cgroup_line(cgroup: CgroupMemory) -> str:
    if not cgroup.known:
        return (
            f"container memory limit: unknown ({cgroup.note}); no out-of-memory guard, so the proof pins at most "
            f"{fmt_bytes(UNGUARDED_PIN_BYTES)}"
        )
    if cgroup.limit is None:
        return f"container memory limit: none ({cgroup.source})"
    return f"container memory limit: {fmt_bytes(cgroup.limit)} ({cgroup.source}); the proof buffer plus {fmt_bytes(PIN_HEADROOM)} must fit"


def hostfile_text(cfg: Config) -> str:
    """DeepSpeed's hostfile: one `HOST slots=N` line per pod, in rank order."""
    return "".join(f"{host} slots={cfg.gpus_per_node}\n" for host in cfg.hosts)


def ulimit_moot_reason(f: MemlockFacts) -> str:
    """Why a failing `ulimit -l` in the workload's own scripts does not matter; "" unless proven."""
    if f.pin_errno != 0 or f.pin_blocked:
        return ""
    size = fmt_bytes(f.pin_bytes)
    soft, hard = f.limit_after
    if ipc_lock_survives_exec(f):
        return f"CAP_IPC_LOCK is effective, so RLIMIT_MEMLOCK ({fmt_limit(soft)}) does not limit pinning; the launcher pinned {size}"
    return (
        f"the launcher pinned {size} within RLIMIT_MEMLOCK (soft {fmt_limit(soft)}, hard {fmt_limit(hard)}); "
        "raising the hard limit needs CAP_SYS_RESOURCE"
    )


def bash_env_text(reason: str, chained: str) -> str:
    """The file BASH_ENV names. bash reads it before running any non-interactive script or `bash -c`,
    so a script's `set -e; ulimit -l unlimited` (the seeds' lm-train.sh) meets this `ulimit` function
    instead of the builtin. Only a memlock change that fails is let through, with one line saying
    why; a query, another limit, or a malformed value behaves exactly as the builtin does."""
    message = f"could not change the memlock limit, which is moot here: {reason}; continuing"
    lines = [
        "# Written by the launcher at container start; BASH_ENV names it. See launcher.py.",
        'if [ -z "${__launcher_bash_env_read-}" ]; then',
        "__launcher_bash_env_read=1",
    ]
    if chained:
        # The image's own BASH_ENV, which this file replaces in the environment (used as a path).
        lines.append(f"if [ -r {shlex.quote(chained)} ]; then . {shlex.quote(chained)}; fi")
    lines += [
        "# True for a memlock change: -l (with -H/-S) and a number, unlimited, hard or soft.",
        "__launcher_memlock_change() {",
        "    local __arg __memlock=0 __value=0",
        '    for __arg in "$@"; do',
        '        case "$__arg" in',
        "            -*[!HSl]*) return 1 ;;",
        "            -*l*) __memlock=1 ;;",
        "            -?*) ;;",
        "            unlimited|hard|soft) __value=1 ;;",
        "            ''|*[!0-9]*) return 1 ;;",
        "            *) __value=1 ;;",
        "        esac",
        "    done",
        '    [ "$__memlock" = 1 ] && [ "$__value" = 1 ]',
        "}",
        "ulimit() {",
        '    if __launcher_memlock_change "$@"; then',
        '        builtin ulimit "$@" 2>/dev/null && return 0',
        f"        printf 'launcher: `ulimit %s` %s\\n' \"$*\" {shlex.quote(message)} >&2",
        "        return 0",
        "    fi",
        '    builtin ulimit "$@"',
        "}",
        "fi",
    ]
    return "\n".join(lines) + "\n"


def json_limit(value: int) -> Any:
    return "unlimited" if value == INFINITY else value


def unguarded_warning(f: MemlockFacts, cgroup: CgroupMemory) -> str:
    """Said whenever the proof runs with the container's memory limit unknown."""
    if cgroup.known or f.pin_errno is None:
        return ""
    size = fmt_bytes(f.pin_bytes)
    if f.requested_bytes is not None:
        what = f"the proof pinned {size} instead of LAUNCHER_PIN_BYTES {fmt_bytes(f.requested_bytes)}, so it proves less than asked"
    elif f.pin_bytes <= UNGUARDED_PIN_BYTES:
        what = f"LAUNCHER_PIN_BYTES ({size}) is within the {fmt_bytes(UNGUARDED_PIN_BYTES)} the launcher pins unguarded"
    else:
        what = f"the {size} proof was not checked against it"
    return (
        f"memory pinning ran without the out-of-memory guard: the container's memory limit is unknown ({cgroup.note}); {what}. "
        "Fix: make the container's own cgroup readable where the launcher looks (memory.max, cgroup v2, or "
        "memory/memory.limit_in_bytes, v1, under <sysfs>/fs/cgroup)"
    )


def pinning_summary(strategy: str, f: MemlockFacts, ok: bool, moot: str, memory_guard: bool = True) -> Dict[str, Any]:
    effective, _ = effective_pin_limit(f)
    if f.pin_blocked:
        result = "not-attempted"
    elif f.pin_errno is None:
        result = "not-checked"
    else:
        result = "ok" if f.pin_errno == 0 else "failed"
    return {
        "strategy": strategy,
        "ok": ok,
        "uid": f.uid,
        "cap_eff": f"{f.cap_eff:#x}",
        "ipc_lock": has_cap(f.cap_eff, CAP_IPC_LOCK),
        "sys_resource": has_cap(f.cap_eff, CAP_SYS_RESOURCE),
        "limit_at_start": {"soft": json_limit(f.limit_before[0]), "hard": json_limit(f.limit_before[1])},
        "limit": {"soft": json_limit(f.limit_after[0]), "hard": json_limit(f.limit_after[1])},
        "soft_raised_to_hard": f.soft_raise_target is not None and f.soft_raise_error is None,
        "raised_to_unlimited": None if f.raise_target is None else f.raise_error is None,
        "effective_limit": "unlimited" if effective is None else effective,
        "limit_moot_by_ipc_lock": ipc_lock_survives_exec(f),
        "pin_bytes": f.asked_bytes,
        "proof_bytes": f.pin_bytes,
        "memory_guard": memory_guard,
        "result": result,
        "errno": errno_name(f.pin_errno) if f.pin_errno else None,
        "ulimit_moot": moot or None,
    }


def decide(cfg: Config, facts: Facts, bash_env_file: str = DEFAULT_BASH_ENV_FILE) -> Plan:
    sections: List[Tuple[str, List[str]]] = []
    warnings: List[str] = []
    errors: List[str] = []

    sel = decide_devices(cfg, facts)
    net = decide_network(cfg, sel, facts.net_names)
    warnings += sel.warnings + net.warnings
    errors += net.errors
    rdma = cfg.mode == "rdma" and not net.fell_back

    memlock = judge_memlock(cfg.strategy, facts.memlock)
    if should_prove_pinning(cfg.mode, cfg.strategy):
        memlock.lines.insert(0, cgroup_line(facts.cgroup))
    unguarded = unguarded_warning(facts.memlock, facts.cgroup)
    if unguarded:
        warnings.append(unguarded)
    moot = ulimit_moot_reason(facts.memlock) if memlock.ok else ""
    if moot:
        memlock.lines.append(
            f"`ulimit -l` in the workload's bash scripts: a failing raise is moot and does not stop them (BASH_ENV): {moot}"
        )
    if rdma:
        memlock.lines.append("note: " + LOC_PROT_ERR_NOTE)
    sections.append(("memory pinning", memlock.lines))
    if not memlock.ok:
        if rdma:
            errors.insert(0, memlock.problem)
        else:
            warnings.append("pinning failed, which tcp mode does not need; continuing. " + memlock.problem)

    sections.append(("rdma devices", [describe_port(p, sel) for p in facts.ports] + sel.lines or ["none found"]))
    if facts.odd_entries:
        shown_entries = ", ".join(shown(e, 80) for e in facts.odd_entries[:5])
        more = f" and {len(facts.odd_entries) - 5} more" if len(facts.odd_entries) > 5 else ""
        warnings.append(f"ignored sysfs entries whose names are not device, port, GID or interface names: {shown_entries}{more}")

    ctx = NcclContext(
        rdma,
        net.fell_back,
        tuple(net.selected),
        frozenset(sel.pod_devices),
        facts.ports,
        facts.net_names,
        cfg.nnodes,
        sel.gid_ndevs,
        cfg.link_layer,
    )
    nccl = decide_nccl(cfg, net, ctx)
    env = dict(nccl.env)
    sections.append(("nccl", nccl.lines or ["nothing decided (see the errors below)"]))
    warnings += nccl.warnings
    errors += nccl.errors

    bash_env = None
    if moot:
        # Chain the image's BASH_ENV, unless it is this very file (a launcher run inside a launched pod).
        chained = cfg.image_bash_env if cfg.image_bash_env != bash_env_file else ""
        bash_env = (bash_env_file, bash_env_text(moot, chained))
        env["BASH_ENV"] = bash_env_file

    python_lines, python_warnings = describe_python(cfg.python_env, facts.isolated)
    sections.append(("python", python_lines))
    warnings += python_warnings

    hostfile = None
    if cfg.deepspeed_hostfile:
        hostfile = (cfg.deepspeed_hostfile, hostfile_text(cfg))
        sections.append(("deepspeed hostfile", [f"{cfg.deepspeed_hostfile}:", *(f"  {line}" for line in hostfile[1].splitlines())]))

    argv: List[str] = []
    rendezvous: Optional[Dict[str, Any]] = None
    try:
        ranked: Optional[Tuple[int, str]] = node_rank(cfg)
    except ConfigError as exc:
        errors.append(str(exc))
        ranked = None
    if ranked is not None:
        rank, source = ranked
        env.update(rendezvous_env(cfg, rank))
        argv = build_argv(cfg, env)
        ranks = f"node rank {rank} (from {source}) of {cfg.nnodes}; {cfg.gpus_per_node} processes per node"
        sections.append(
            (
                "rendezvous",
                [
                    f"{ranks}; world size {env['WORLD_SIZE']}",
                    f"master {env['MASTER_ADDR']}:{env['MASTER_PORT']}",
                    "command: " + " ".join(shlex.quote(a) for a in argv),
                ],
            )
        )
        rendezvous = {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "NPROC_PER_NODE", "WORLD_SIZE")}

    gid_index = env.get("NCCL_IB_GID_INDEX")
    summary: Dict[str, Any] = {
        "mode": cfg.mode,
        "transport": "tcp-fallback" if net.fell_back else cfg.mode,
        "devices": {
            "chosen": [p.name for p in net.selected],
            "pod": sel.pod_devices if sel.mapped else [],
            "host_not_attached": [p.name for p in sel.host_ports],
            "mapping": {i: list(ds) for i, ds in sel.mapping.items()},
            "mapped_through": dict(sel.via),
            "every_active_port": not sel.mapped,  # nothing mapped: the fallback to every ACTIVE port
            "link_layer": cfg.link_layer or None,
            "seen": [{"port": p.name, "state": p.state, "link_layer": p.link_layer} for p in facts.ports],
        },
        "gid_index": parse_decimal(gid_index) if gid_index else None,
        "interfaces": {
            "expected": list(cfg.rdma_interfaces),
            "missing": [i for i in cfg.rdma_interfaces if i not in facts.net_names],
            "in_pod": list(facts.net_names),
        },
        "socket_ifname": env.get("NCCL_SOCKET_IFNAME"),
        "nccl": {k: v for k, v in sorted(env.items()) if k.startswith("NCCL_")},
        "explicit_nccl": sorted(cfg.explicit_nccl),
        "overridden": nccl.overrides,
        "pinning": pinning_summary(cfg.strategy, facts.memlock, memlock.ok, moot, facts.cgroup.known),
        "container_memory": {
            "known": facts.cgroup.known,
            "limit": None if not facts.cgroup.known else "none" if facts.cgroup.limit is None else facts.cgroup.limit,
            "source": facts.cgroup.source or None,
        },
        "python": {"isolated": facts.isolated, "passed_on": dict(cfg.python_env)},
        "bash_env": bash_env_file if bash_env else None,
        "deepspeed_hostfile": {"path": cfg.deepspeed_hostfile, "hosts": list(cfg.hosts), "slots": cfg.gpus_per_node} if hostfile else None,
        "rendezvous": rendezvous,
        "command": argv,
    }
    removed = [o["name"] for o in nccl.overrides if o["new"] is None]
    return Plan(env, argv, sections, warnings, errors, hostfile, bash_env, summary, removed)


PYTHON_NOTES = {
    "PYTHONPATH": "torchrun and the training script import from it first",
    "PYTHONSTARTUP": "read by interactive interpreters only, not by torchrun or a training script",
    "PYTHONHOME": "empty or this interpreter's own prefix: changes nothing",
}


def describe_python(python_env: Mapping[str, str], isolated: bool) -> Tuple[List[str], List[str]]:
    """The PYTHON* variables the command inherits (refused ones never get here), and whether the
    launcher itself was kept out of their reach."""
    if isolated:
        lines = ["launcher: isolated (python3 -I): no PYTHON* variable, user site-packages or script directory reaches it"]
    else:
        lines = ["launcher: NOT isolated (started without python3 -I, as the pod's command does it)"]
    warnings = []
    for key, value in python_env.items():
        note = PYTHON_NOTES.get(key, "")
        lines.append(f"{key}={shown(value)}: passed on to the command" + (f"; {note}" if note else ""))
    if not python_env:
        lines.append("no PYTHON* variable set")
    if not isolated and python_env.get("PYTHONPATH"):
        warnings.append(
            f"the launcher was started without python3 -I, so PYTHONPATH={shown(python_env['PYTHONPATH'])} was on its own import "
            "path too: a module there named like a standard library one would replace it. Start it with python3 -I"
        )
    return lines, warnings


def describe_port(p: RdmaPort, sel: DeviceSelection) -> str:
    kind = "RoCE" if p.roce else "unknown link layer" if p.link_layer not in LINK_LAYERS else p.link_layer
    text = f"{p.name} {p.state} {kind}"
    if p.roce:
        # A pod's port counts only the GIDs of the pod's interfaces; a host device's are shown as they are.
        ndevs = sel.gid_ndevs if p.device in sel.pod_devices else None
        indexes = p.roce_v2_ipv4_indexes(ndevs)
        text += f", RoCE v2 IPv4 GID index {','.join(map(str, indexes))}" if indexes else ", no RoCE v2 IPv4 GID"
        foreign = ", ".join(f"{g.index} is {g.ndev}'s" for g in p.foreign_gids(ndevs))
        if foreign:
            text += f" (index {foreign}, not this pod's)"
    if sel.mapped:
        behind = [i for i, devices in sel.mapping.items() if p.device in devices]
        text += f"  [{', '.join(behind)}]" if behind else "  [host device, not attached to this pod]"
    return text


# ---------------------------------------------------------------------------------------------
# Output and the thin main.
# ---------------------------------------------------------------------------------------------

BANNER = "=" * 24


def render_report(cfg: Optional[Config], plan: Optional[Plan], errors: Sequence[str] = ()) -> str:
    mode = f" ({cfg.mode} mode)" if cfg else ""
    out = [f"{BANNER} launcher report{mode} BEGIN {BANNER}"]
    for title, lines in plan.sections if plan else []:
        out.append(f"{title}:")
        out.extend(f"  {line}" for line in lines)
    warnings = plan.warnings if plan else []
    if warnings:
        out.append("warnings:")
        out.extend("  WARNING: " + w.replace("\n", "\n  ") for w in warnings)
    errors = list(errors) + (plan.errors if plan else [])
    if errors:
        out.append("verdict: WOULD NOT START")
        out.extend("  ERROR: " + e.replace("\n", "\n  ") for e in errors)
    else:
        out.append("verdict: START")
    out.append(f"{BANNER} launcher report END {BANNER}")
    return "\n".join(out) + "\n"


def report_data(plan: Optional[Plan], errors: Sequence[str] = ()) -> Dict[str, Any]:
    """The report for other tools: what was decided, and whether the pod starts."""
    all_errors = list(errors) + (plan.errors if plan else [])
    data: Dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "verdict": "would-not-start" if all_errors else "start",
        "errors": all_errors,
        "warnings": list(plan.warnings) if plan else [],
    }
    if plan:
        data.update(plan.summary)
    return data


def report_line(data: Mapping[str, Any]) -> str:
    """One log line: the fixed prefix, then compact JSON. ensure_ascii keeps it one line whatever the
    values hold (newlines, U+2028, bytes that were not UTF-8 are all escaped)."""
    return REPORT_PREFIX + json.dumps(data, separators=(",", ":"), ensure_ascii=True) + "\n"


def env_file_text(env: Mapping[str, str], argv: Sequence[str], unset: Sequence[str] = ()) -> str:
    lines = [
        "# Written by the launcher at container start. In an `oc exec` session: source this file, then run torchrun as below.",
        "# " + " ".join(shlex.quote(a) for a in argv),
    ]
    # An oc exec session starts with the image's environment, so what the launcher removed is unset.
    lines += [f"unset {key}" for key in sorted(unset)]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    return "\n".join(lines) + "\n"


def child_environment(environ: Mapping[str, str], plan: Plan) -> Dict[str, str]:
    """The command's environment: the launcher's own, less what it removed, plus what it decided."""
    child = {k: v for k, v in environ.items() if k not in plan.unset}
    child.update(plan.env)
    return child


def write_file(path: str, text: str, make_parents: bool = False) -> Optional[str]:
    """Write `text` to `path` atomically (a reader never sees half a file); the error, or None.
    surrogateescape: environment values that were not UTF-8 are written back as the bytes they were."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        parent = os.path.dirname(path)
        if make_parents and parent:
            os.makedirs(parent, exist_ok=True)
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(text)
        os.replace(tmp, path)
        return None
    except (OSError, ValueError) as exc:
        try:
            os.unlink(tmp)
        except (OSError, ValueError):
            pass
        return str(exc)


class OutputFailed(Exception):
    """stdout or stderr cannot take what the launcher has to say: closed (`>&-`; Python then sets
    sys.stdout or sys.stderr to None), full (/dev/full: ENOSPC), a pipe nobody reads (EPIPE)."""

    def __init__(self, stream: str, what: str, reason: str) -> None:
        super().__init__(f"could not write {what} to {stream} ({reason})")
        self.stream = stream


def _stream(name: str, what: str) -> Any:
    stream = getattr(sys, name)
    if stream is None:
        raise OutputFailed(name, what, "it is closed")
    return stream


def _drain(stream: Any) -> None:
    """After a failed write, point the stream's descriptor at /dev/null: what is still buffered would
    otherwise fail again when Python flushes at exit, print "Exception ignored" and exit 120."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    except (OSError, ValueError, AttributeError):  # no descriptor (a replaced stream), or none to open
        return
    try:
        os.dup2(null, fd)
    except OSError:
        pass
    finally:
        os.close(null)


def _failed(name: str, what: str, stream: Any, exc: Exception) -> OutputFailed:
    _drain(stream)
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    return OutputFailed(name, what, reason)


def write_stderr(text: str, what: str = "the report") -> None:
    """The report. A process's stderr escapes what it cannot encode; a replaced sys.stderr (tests,
    embedding) may not, and a report must never become a traceback. OutputFailed when stderr is
    closed or full."""
    stream = _stream("stderr", what)
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:
            stream.write(text.encode("ascii", errors="backslashreplace").decode("ascii"))
        stream.flush()
    except (OSError, ValueError) as exc:  # ValueError: a closed file object
        raise _failed("stderr", what, stream, exc) from None


def write_stdout(text: str, what: str = "the environment (--print-env)") -> None:
    """Print --print-env output; values that were not UTF-8 go out as the bytes they were, where a
    plain write would raise UnicodeEncodeError. OutputFailed when stdout is closed or full."""
    stream = _stream("stdout", what)
    try:
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            stream.write(text)
        else:
            stream.flush()
            buffer.write(text.encode("utf-8", errors="surrogateescape"))
        stream.flush()
    except (OSError, ValueError) as exc:
        raise _failed("stdout", what, stream, exc) from None


def write_either(name: str, text: str) -> bool:
    """Best effort, for the line that says the other stream failed: False when this one fails too."""
    try:
        (write_stderr if name == "stderr" else write_stdout)(text, "")
        return True
    except OutputFailed:
        return False


def flush_stdout() -> None:
    """Before exec, whatever is buffered goes out; a closed or full stdout is the command's to meet."""
    if sys.stdout is not None:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            _drain(sys.stdout)


class Parser(argparse.ArgumentParser):
    """argparse writes --help and usage errors itself, and Python 3.8's does not catch a closed or full
    stream (3.9+ drops the text silently, and exits 0 or 2 as if it had been read): both go through the
    launcher's writers instead, so a failed write is OutputFailed like any other. error() is replaced
    whole: argparse hands print_usage sys.stderr, which is None when stderr is closed, and None there
    means stdout."""

    def print_help(self, file: Any = None) -> None:
        (write_stderr if file is not None and file is sys.stderr else write_stdout)(self.format_help(), "the help")

    def print_usage(self, file: Any = None) -> None:
        (write_stderr if file is not None and file is sys.stderr else write_stdout)(self.format_usage(), "the usage")

    def error(self, message: str) -> NoReturn:
        write_stderr(f"{self.format_usage()}{self.prog}: error: {message}\n", "the usage error")
        sys.exit(2)

    def exit(self, status: int = 0, message: Optional[str] = None) -> NoReturn:
        if message:
            write_stderr(message, "argparse's message")
        sys.exit(status)


def parse_cli(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = Parser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--print-env", action="store_true", help="run every check, print the exported environment (KEY=VALUE) and exit")
    parser.add_argument("--sysfs-root", help="sysfs to read RDMA devices and interfaces from (default LAUNCHER_SYSFS_ROOT or /sys)")
    parser.add_argument(
        "--env-file", default=DEFAULT_ENV_FILE, help=f"where to write the environment for oc exec sessions (default {DEFAULT_ENV_FILE})"
    )
    parser.add_argument(
        "--bash-env-file",
        default=DEFAULT_BASH_ENV_FILE,
        help=f"where to write the file BASH_ENV names, the `ulimit` shim (default {DEFAULT_BASH_ENV_FILE})",
    )
    return parser.parse_args(argv)


def write_outputs(cli: argparse.Namespace, plan: Plan) -> None:
    """The files the command and oc exec sessions read. A missing hostfile would fail DeepSpeed
    later, far from the cause, so it stops the pod; the environment file is a convenience."""
    if plan.hostfile is not None:
        path, text = plan.hostfile
        problem = write_file(path, text, make_parents=True)
        if problem:
            plan.errors.append(
                f"could not write the DeepSpeed hostfile {path} (LAUNCHER_DEEPSPEED_HOSTFILE): {problem}; DeepSpeed would fail without it"
            )
            return
    if plan.bash_env is not None:
        path, text = plan.bash_env
        problem = write_file(path, text, make_parents=True)
        if problem:
            # Without the file BASH_ENV would name nothing; the image's own BASH_ENV stays in force.
            plan.env.pop("BASH_ENV", None)
            plan.summary["bash_env"] = None
            plan.warnings.append(
                f"could not write {path} (BASH_ENV): {problem}; a script's failing `ulimit -l` under `set -e` will stop the pod"
            )
    problem = write_file(cli.env_file, env_file_text(plan.env, plan.argv, plan.unset))
    plan.sections.append(
        (
            "environment file",
            [f"could not write {cli.env_file}: {problem}" if problem else f"{cli.env_file} (`source {cli.env_file}` in oc exec sessions)"],
        )
    )
    if problem:
        plan.warnings.append(f"oc exec sessions will not see the launcher's environment: {problem}")


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    context: List[str] = []  # what the line about a failed write adds: the verdict, where the JSON report is
    try:
        return run(argv, os.environ if environ is None else environ, context)
    except OutputFailed as exc:
        # The report (or --print-env's output, or --help) is what the launcher owes whoever started it;
        # not delivered, nothing runs. One line on the other stream, if that one works; else the exit code.
        other = "stdout" if exc.stream == "stderr" else "stderr"
        write_either(other, f"launcher: {exc}" + "".join(f"; {c}" for c in context) + f"; exit {EXIT_OUTPUT_FAILED}\n")
        return EXIT_OUTPUT_FAILED


def run(argv: Optional[Sequence[str]], environ: Mapping[str, str], context: List[str]) -> int:
    cli = parse_cli(argv)
    try:
        cfg = load_config(environ, cli.sysfs_root)
    except ConfigError as exc:
        errors = str(exc).splitlines()
        data = report_data(None, errors)
        context.append("verdict: would not start (the configuration is invalid)")
        if not cli.print_env:
            # Best effort: the configuration that names the path is what failed.
            path = environ.get("LAUNCHER_REPORT_JSON", "").strip() or DEFAULT_REPORT_JSON
            if write_file(path, json.dumps(data, indent=2) + "\n", make_parents=True) is None:
                context.append(f"the report is in {path}")
        write_stderr(render_report(None, None, errors) + report_line(data))
        return EXIT_WOULD_NOT_START

    plan = decide(cfg, gather_facts(cfg), cli.bash_env_file)
    if not plan.errors and not cli.print_env:
        write_outputs(cli, plan)
    data = report_data(plan)
    context.append(f"verdict: {'would not start' if plan.errors else 'start'}" + ("" if cli.print_env else ", but nothing was executed"))
    if not cli.print_env:
        problem = write_file(cfg.report_json, json.dumps(data, indent=2) + "\n", make_parents=True)
        if problem:
            plan.warnings.append(
                f"could not write the JSON report {cfg.report_json} (LAUNCHER_REPORT_JSON): {problem}; the LAUNCHER_REPORT log line has it"
            )
        else:
            plan.sections.append(("json report", [f"{cfg.report_json}; the same as the LAUNCHER_REPORT line below"]))
            context.append(f"the report is in {cfg.report_json}")
    write_stderr(render_report(cfg, plan) + report_line(report_data(plan)))
    if plan.errors:
        return EXIT_WOULD_NOT_START
    if cli.print_env:
        write_stdout("".join(f"{k}={v}\n" for k, v in sorted(plan.env.items())))
        return EXIT_OK

    child_env = child_environment(environ, plan)
    flush_stdout()
    try:
        # exec, not a child: the command keeps the launcher's PID (PID 1 in the container), so the
        # kubelet's SIGTERM reaches torchrun, which forwards it to the training processes.
        os.execvpe(plan.argv[0], plan.argv, child_env)
    except (OSError, ValueError) as exc:
        write_either("stderr", f"launcher: cannot execute {plan.argv[0]}: {exc}\n")
        return EXIT_EXEC_FAILED


if __name__ == "__main__":
    sys.exit(main())
