"""What the kernel says: RDMA ports and interfaces, the container's memory limit, the process's capabilities and
memlock limit, the mlock proof. All the reading is here; the decisions read only these facts.

sysfs as the launcher reads it (<root> is /sys or --sysfs-root):
  class/infiniband/DEV/ports/P/state, link_layer      "4: ACTIVE"; "InfiniBand" or "Ethernet" (RoCE)
  class/infiniband/DEV/ports/P/gids/I                 "0000:0000:0000:0000:0000:ffff:0a00:6a07"
  class/infiniband/DEV/ports/P/gid_attrs/types/I      "RoCE v2" or "IB/RoCE v1" (EINVAL for an unpopulated entry)
  class/infiniband/DEV/ports/P/gid_attrs/ndevs/I      the netdev of a RoCE GID
  class/net/IF/device -> the PCI function             whose infiniband/DEV names the interface's RDMA device
  fs/cgroup/memory.max (v2), fs/cgroup/memory/memory.limit_in_bytes (v1)   the container's memory limit"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import re
import resource
import sys
from dataclasses import dataclass
from typing import FrozenSet, List, Optional, Sequence, Tuple

from .contract import MIB, Config, parse_decimal, shown

CAP_IPC_LOCK = 14
CAP_SYS_RESOURCE = 24
DEFAULT_CAP_LAST = 40  # CAP_CHECKPOINT_RESTORE (Linux 5.9+), when /proc/sys/kernel/cap_last_cap cannot be read
INFINITY = resource.RLIM_INFINITY
# What the container needs besides the pinned buffer while it is pinned: the interpreter, page tables, page cache.
PIN_HEADROOM = 64 * MIB
# The most the proof pins with no memory limit known (no OOM guard): twice CRI-O's 8 MiB default, so a pass still counts.
UNGUARDED_PIN_BYTES = 16 * MIB
CGROUP_NO_LIMIT = 1 << 62  # cgroup v1 writes "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712)


@dataclass(frozen=True)
class Gid:
    index: int
    ndev: str  # the netdev a RoCE GID belongs to; "" for InfiniBand or unknown
    v2_ipv4: bool  # RoCE v2 over IPv4 (::ffff:a.b.c.d): the GIDs NCCL can use for RoCE


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state: str  # "ACTIVE", "DOWN", "INIT", ... or "unknown"
    link_layer: str  # "InfiniBand" or "Ethernet" (RoCE)
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

    def roce_v2_ipv4(self, ndevs: Optional[FrozenSet[str]], ours: bool = True) -> List[Gid]:
        """Those of `ndevs` (the pod's interfaces) or of no netdev: a device shared with the host has its GIDs too."""
        return [g for g in self.gids if g.v2_ipv4 and (ndevs is None or not g.ndev or g.ndev in ndevs) == ours]


@dataclass(frozen=True)
class MemlockFacts:
    uid: int
    cap_eff: int
    cap_amb: int
    limit_before: Tuple[int, int]  # RLIMIT_MEMLOCK (soft, hard) at start; a soft limit below the hard one is raised to it
    limit_after: Tuple[int, int]  # after the raises
    pin_bytes: int  # LAUNCHER_PIN_BYTES: what the workload asked to be proven
    proof_bytes: int  # what mlock was tried with: less when the container's memory limit is unknown
    pin_errno: Optional[int]  # None: not attempted; 0: mlock succeeded; else the errno
    soft_raise_error: Optional[str] = None
    raise_target: Optional[Tuple[int, int]] = None  # unlimited, asked by root-sys-resource and privileged
    raise_error: Optional[str] = None
    cap_last: int = DEFAULT_CAP_LAST  # the highest capability this kernel knows
    pin_blocked: str = ""  # why the proof was not attempted (the container's memory limit), with the fix

    @property
    def ipc_lock(self) -> bool:
        return has_cap(self.cap_eff, CAP_IPC_LOCK)

    @property
    def sys_resource(self) -> bool:
        return has_cap(self.cap_eff, CAP_SYS_RESOURCE)

    @property
    def ipc_lock_survives_exec(self) -> bool:  # root keeps its bounding set across execve, another uid only its ambient set
        return self.ipc_lock and (self.uid == 0 or has_cap(self.cap_amb, CAP_IPC_LOCK))

    @property
    def holds_every_cap(self) -> bool:
        every = (1 << (self.cap_last + 1)) - 1
        return self.cap_eff & every == every


@dataclass(frozen=True)
class CgroupMemory:
    limit: Optional[int]  # bytes; None: no limit, or unknown (then source, the file it was read from, is "")
    source: str
    note: str = ""  # why it is unknown

    @property
    def known(self) -> bool:
        return bool(self.source)


@dataclass(frozen=True)
class InterfaceLink:
    interface: str
    pci: str  # the PCI function behind the interface; "" when there is no link
    devices: Tuple[str, ...]  # the RDMA devices of that function (an SR-IOV VF has one)


@dataclass(frozen=True)
class Facts:
    memlock: MemlockFacts
    ports: Tuple[RdmaPort, ...]
    net_names: Tuple[str, ...]  # the interfaces in <sysfs>/class/net: the pod's network namespace
    cgroup: CgroupMemory = CgroupMemory(None, "", "not read")
    links: Tuple[InterfaceLink, ...] = ()  # one per LAUNCHER_RDMA_INTERFACES entry present in the pod
    isolated: bool = True  # python3 -I


def natural_key(name: str) -> List[object]:  # mlx5_2 before mlx5_10
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"([0-9]+)", name))]


def read(path: str) -> Optional[str]:  # a sysfs or /proc attribute; None when it cannot be read (EINVAL: an unpopulated GID)
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("ascii", "replace").strip()
    except OSError:
        return None


def listdir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path), key=natural_key)
    except OSError:
        return []


def read_gids(pdir: str) -> Tuple[Gid, ...]:
    gids = []
    for index in listdir(os.path.join(pdir, "gids")):
        groups = (read(os.path.join(pdir, "gids", index)) or "").split(":")  # ::ffff:a.b.c.d is 0000:...:ffff:0a00:6a07
        ipv4 = len(groups) == 8 and groups[:6] == ["0000"] * 5 + ["ffff"] and groups[6:] != ["0000", "0000"]
        v2 = read(os.path.join(pdir, "gid_attrs", "types", index)) == "RoCE v2"
        gids.append(Gid(int(index), read(os.path.join(pdir, "gid_attrs", "ndevs", index)) or "", ipv4 and v2))
    return tuple(gids)


def read_rdma_ports(sysfs_root: str) -> List[RdmaPort]:  # every port of every RDMA device the pod sees
    base = os.path.join(sysfs_root, "class", "infiniband")
    ports = []
    for device in listdir(base):
        for port in listdir(os.path.join(base, device, "ports")):
            pdir = os.path.join(base, device, "ports", port)
            state = (read(os.path.join(pdir, "state")) or "").rpartition(":")[2].strip()  # "4: ACTIVE"
            layer = read(os.path.join(pdir, "link_layer")) or "unknown"
            ports.append(RdmaPort(device, int(port), state or "unknown", layer, read_gids(pdir)))
    return ports


def read_interface_links(sysfs_root: str, interfaces: Sequence[str]) -> Tuple[InterfaceLink, ...]:
    """class/net shows only the pod's network namespace, so this tells the pod's devices from the host's."""
    links = []
    for interface in interfaces:
        device = os.path.join(sysfs_root, "class", "net", interface, "device")
        try:
            pci = os.path.basename(os.readlink(device).rstrip("/"))
        except OSError:
            pci = ""
        links.append(InterfaceLink(interface, pci, tuple(listdir(os.path.join(device, "infiniband")))))
    return tuple(links)


def read_cgroup_memory(sysfs_root: str) -> CgroupMemory:  # inside a container /sys/fs/cgroup is its own cgroup
    base = os.path.join(sysfs_root, "fs", "cgroup")
    for path in (os.path.join(base, "memory.max"), os.path.join(base, "memory", "memory.limit_in_bytes")):
        if (text := read(path)) is None:
            continue
        if text == "max":
            return CgroupMemory(None, path)
        value = parse_decimal(text)
        if value is None or value < 0:
            return CgroupMemory(None, "", f"{path} reads {shown(text)}, not a memory limit")
        return CgroupMemory(None if value >= CGROUP_NO_LIMIT else value, path)
    return CgroupMemory(None, "", f"neither {base}/memory.max (cgroup v2) nor {base}/memory/memory.limit_in_bytes (v1) is readable")


def parse_caps(status: str) -> Tuple[int, int]:  # (CapEff, CapAmb) from /proc/self/status
    caps = dict(line.split(":", 1) for line in status.splitlines() if line.startswith("Cap"))
    return int(caps.get("CapEff", "0"), 16), int(caps.get("CapAmb", "0"), 16)


def has_cap(mask: int, bit: int) -> bool:
    return bool(mask >> bit & 1)


def memlock_raise_target(strategy: str, limit: Tuple[int, int]) -> Optional[Tuple[int, int]]:  # raising needs SYS_RESOURCE
    return (INFINITY, INFINITY) if strategy in ("root-sys-resource", "privileged") and limit != (INFINITY, INFINITY) else None


def raise_memlock(target: Tuple[int, int]) -> Optional[str]:
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, target)
        return None
    except (OSError, ValueError) as exc:  # EPERM: "not allowed to raise maximum limit"
        return str(exc)


def pin_blocked_reason(pin_bytes: int, cgroup: CgroupMemory) -> str:  # mlock faults every page in: past the limit, OOM
    if cgroup.limit is None or pin_bytes + PIN_HEADROOM <= cgroup.limit:
        return ""
    return (
        f"the proof buffer does not fit the container's memory limit: LAUNCHER_PIN_BYTES is {fmt_bytes(pin_bytes)} and the limit is "
        f"{fmt_bytes(cgroup.limit)} ({cgroup.source}); with the {fmt_bytes(PIN_HEADROOM)} the launcher keeps for itself, mlock would "
        "fault in more than the limit, and the OOM killer would end the container with exit 137 and no message. Fix: lower "
        f"LAUNCHER_PIN_BYTES (the stack's defaults.pin_bytes) to at most {fmt_bytes(max(cgroup.limit - PIN_HEADROOM, 0))}, or raise "
        f"the pod's memory limit (resources.limits.memory) to at least {fmt_bytes(pin_bytes + PIN_HEADROOM)}"
    )


def prove_pinning(nbytes: int) -> int:  # mlock pins as ibv_reg_mr does (RLIMIT_MEMLOCK unless IPC_LOCK); 0, or the errno
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mlock.argtypes = libc.munlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    try:
        buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as exc:
        return exc.errno or errno.ENOMEM
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


def gather_memlock(cfg: Config, cgroup: CgroupMemory) -> MemlockFacts:  # soft raised to hard first: no privilege needed
    cap_eff, cap_amb = parse_caps(read("/proc/self/status") or "")
    before = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    soft_error = raise_memlock((before[1], before[1])) if limit_value(before[0]) < limit_value(before[1]) else None
    target = memlock_raise_target(cfg.strategy, resource.getrlimit(resource.RLIMIT_MEMLOCK))
    raise_error = raise_memlock(target) if target else None
    prove = cfg.proves_pinning
    proof = cfg.pin_bytes if cgroup.known or not prove else min(cfg.pin_bytes, UNGUARDED_PIN_BYTES)
    blocked = pin_blocked_reason(proof, cgroup) if prove else ""
    cap_last = parse_decimal(read("/proc/sys/kernel/cap_last_cap") or "")
    return MemlockFacts(
        uid=os.geteuid(),
        cap_eff=cap_eff,
        cap_amb=cap_amb,
        limit_before=before,
        limit_after=resource.getrlimit(resource.RLIMIT_MEMLOCK),
        pin_bytes=cfg.pin_bytes,
        proof_bytes=proof,
        pin_errno=prove_pinning(proof) if prove and not blocked else None,
        soft_raise_error=soft_error,
        raise_target=target,
        raise_error=raise_error,
        cap_last=cap_last if cap_last is not None and 0 <= cap_last < 64 else DEFAULT_CAP_LAST,
        pin_blocked=blocked,
    )


def gather_facts(cfg: Config) -> Facts:
    cgroup = read_cgroup_memory(cfg.sysfs_root)  # first: it decides whether the proof may run
    net_names = tuple(listdir(os.path.join(cfg.sysfs_root, "class", "net")))
    return Facts(
        memlock=gather_memlock(cfg, cgroup),
        ports=tuple(read_rdma_ports(cfg.sysfs_root)),
        net_names=net_names,
        cgroup=cgroup,
        links=read_interface_links(cfg.sysfs_root, [i for i in cfg.rdma_interfaces if i in net_names]),
        isolated=bool(sys.flags.isolated),
    )


def limit_value(value: int) -> float:
    return float("inf") if value == INFINITY else float(value)


def fmt_limit(value: int) -> str:
    return "unlimited" if value == INFINITY else f"{value // 1024} KB"


def fmt_bytes(value: int) -> str:
    return f"{value // MIB} MiB" if value >= MIB and value % MIB == 0 else f"{value} bytes"
