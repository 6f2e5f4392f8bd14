"""Build fake sysfs trees shaped like the real ones, for the launcher's tests.

Real layout (what the launcher reads):
  class/infiniband/<dev>/ports/<p>/state               "4: ACTIVE", "1: DOWN"
  class/infiniband/<dev>/ports/<p>/link_layer          "InfiniBand" or "Ethernet" (RoCE)
  class/infiniband/<dev>/ports/<p>/gids/<i>            "0000:0000:0000:0000:0000:ffff:0a00:6a07"
  class/infiniband/<dev>/ports/<p>/gid_attrs/types/<i> "RoCE v2" or "IB/RoCE v1"; reading an
                                                       unpopulated entry fails with EINVAL
  class/infiniband/<dev>/ports/<p>/gid_attrs/ndevs/<i> the netdev of a RoCE GID ("net1"), as named in
                                                       the namespace that owns it
  class/net/<ifname>/                                  one entry per interface in the pod's namespace
  class/net/<ifname>/device -> ../../devices/...       the PCI function, whose infiniband/<dev> names the
                                                       interface's RDMA device
  fs/cgroup/memory.max                                 the container's memory limit, cgroup v2 ("max": none)
  fs/cgroup/memory/memory.limit_in_bytes               the same, cgroup v1
"""

from __future__ import annotations

import os
import pathlib
from typing import Dict, Iterable, Optional, Tuple

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
STATES = {"ACTIVE": "4: ACTIVE", "DOWN": "1: DOWN", "INIT": "2: INIT"}

# One GID table entry: (gid, type); type None means "exists but unreadable" like the kernel's EINVAL.
GidTable = Dict[int, Tuple[str, Optional[str]]]


def ipv4_gid(a: int, b: int, c: int, d: int) -> str:
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def link_local_gid(suffix: str = "f08e:cbff:fe95:29dc") -> str:
    return "fe80:0000:0000:0000:" + suffix


def roce_gids(v2_ipv4_index: int = 3, ip: Tuple[int, int, int, int] = (10, 0, 106, 7), size: int = 8) -> GidTable:
    """The usual RoCE layout: 0/1 link-local v1/v2, 2/3 IPv4 v1/v2 - but with the IPv4 v2 entry
    wherever the test says, and v1 just before it. Other entries are unpopulated (zero GID,
    unreadable type)."""
    table: GidTable = {i: (ZERO_GID, None) for i in range(size)}
    table[0] = (link_local_gid(), "IB/RoCE v1")
    table[1] = (link_local_gid(), "RoCE v2")
    table[v2_ipv4_index - 1] = (ipv4_gid(*ip), "IB/RoCE v1")
    table[v2_ipv4_index] = (ipv4_gid(*ip), "RoCE v2")
    return table


def ib_gids() -> GidTable:
    return {0: ("fe80:0000:0000:0000:a088:c203:0045:1a2c", "IB/RoCE v1"), 1: (ZERO_GID, None)}


def add_port(
    root: pathlib.Path,
    device: str,
    port: int = 1,
    state: str = "ACTIVE",
    link_layer: str = "Ethernet",
    gids: Optional[GidTable] = None,
    ndev: Optional[str] = None,
    ndevs: Optional[Dict[int, str]] = None,
) -> pathlib.Path:
    """One port; `ndev`: the netdev every populated RoCE GID names (gid_attrs/ndevs), None for none;
    `ndevs`: one per GID index instead (indexes left out name none)."""
    pdir = root / "class" / "infiniband" / device / "ports" / str(port)
    (pdir / "gids").mkdir(parents=True, exist_ok=True)
    (pdir / "gid_attrs" / "types").mkdir(parents=True, exist_ok=True)
    (pdir / "state").write_text(STATES.get(state, state) + "\n")
    (pdir / "link_layer").write_text(link_layer + "\n")
    if gids is None:
        gids = roce_gids() if link_layer == "Ethernet" else ib_gids()
    for index, (gid, gid_type) in gids.items():
        (pdir / "gids" / str(index)).write_text(gid + "\n")
        type_path = pdir / "gid_attrs" / "types" / str(index)
        if gid_type is None:
            # A directory where a file should be: open() fails with an OSError (IsADirectoryError),
            # standing in for the kernel's EINVAL even when the tests run as root.
            type_path.mkdir()
        else:
            type_path.write_text(gid_type + "\n")
            name = ndevs.get(index) if ndevs is not None else ndev
            if name is not None:
                (pdir / "gid_attrs" / "ndevs").mkdir(exist_ok=True)
                (pdir / "gid_attrs" / "ndevs" / str(index)).write_text(name + "\n")
    return pdir


def link_interface(root: pathlib.Path, ifname: str, device: str, pci: str) -> None:
    """The pod's interface and its RDMA device as sysfs ties them: class/net/<if>/device is a relative
    symlink to the PCI function's directory, which holds infiniband/<device> and net/<if>."""
    function = root / "devices" / "pci0000:00" / pci
    (function / "infiniband" / device).mkdir(parents=True, exist_ok=True)
    (function / "net" / ifname).mkdir(parents=True, exist_ok=True)
    netdir = root / "class" / "net" / ifname
    netdir.mkdir(parents=True, exist_ok=True)
    (netdir / "device").symlink_to(os.path.relpath(function, netdir))


def add_netdevs(root: pathlib.Path, names: Iterable[str]) -> None:
    for name in names:
        (root / "class" / "net" / name).mkdir(parents=True, exist_ok=True)


def empty(root: pathlib.Path, netdevs: Iterable[str] = ("lo", "eth0")) -> pathlib.Path:
    add_netdevs(root, netdevs)
    return root


def barcelona(
    root: pathlib.Path, netdevs: Iterable[str] = ("lo", "eth0", "net1", "net2", "net3", "net4"), gid_index: int = 3
) -> pathlib.Path:
    """Seed 002: mlx5_6..mlx5_9 ACTIVE RoCE, mlx5_10 and mlx5_11 (named in its NCCL_IB_HCA) DOWN."""
    for n, dev in enumerate(["mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]):
        add_port(root, dev, gids=roce_gids(gid_index, (10, 0, 103 + n, 7)))
    for dev in ["mlx5_10", "mlx5_11"]:
        add_port(root, dev, state="DOWN", gids={0: (link_local_gid(), "IB/RoCE v1"), 1: (ZERO_GID, None)})
    add_netdevs(root, netdevs)
    return root


def cairo(
    root: pathlib.Path, netdevs: Iterable[str] = ("lo", "eth0", "net1", "net2", "net3", "net4"), host_nic_active: bool = False
) -> pathlib.Path:
    """Seed 004: InfiniBand mlx5_2..mlx5_5 ACTIVE at 400 Gb/s; mlx5_0/1 are the hosts' Ethernet ports,
    down inside the pod. `host_nic_active`: mlx5_0 is ACTIVE RoCE with the node's IPv4 GID at index 3,
    as a privileged pod in shared netns mode sees it."""
    if host_nic_active:
        add_port(root, "mlx5_0", gids=roce_gids(3, (192, 168, 77, 15)), ndev="eno1np0")
    for dev in ["mlx5_1"] if host_nic_active else ["mlx5_0", "mlx5_1"]:
        add_port(root, dev, state="DOWN", gids={0: (ZERO_GID, None)})
    for dev in ["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"]:
        add_port(root, dev, link_layer="InfiniBand")
    add_netdevs(root, netdevs)
    return root


def cgroup_v2(root: pathlib.Path, memory_max: str) -> pathlib.Path:
    """The container's memory limit as cgroup v2 shows it inside the container ("max" or bytes)."""
    path = root / "fs" / "cgroup" / "memory.max"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(memory_max + "\n")
    return path


def cgroup_v1(root: pathlib.Path, limit_in_bytes: str) -> pathlib.Path:
    path = root / "fs" / "cgroup" / "memory" / "memory.limit_in_bytes"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(limit_in_bytes + "\n")
    return path


POD_VFS = {
    "net1": ("mlx5_6", "0000:3b:00.2"),
    "net2": ("mlx5_7", "0000:3b:00.3"),
    "net3": ("mlx5_8", "0000:5e:00.2"),
    "net4": ("mlx5_9", "0000:5e:00.3"),
}


def shared_netns(root: pathlib.Path, link: bool = True, ndevs: bool = True, other_pod: bool = True) -> pathlib.Path:
    """A privileged pod on a Barcelona node with the RDMA subsystem in shared netns mode: it sees
    every RDMA device of the host. Its own VFs mlx5_6..mlx5_9 back net1..net4 (RoCE v2 IPv4 GID at
    index 5, as inside pods); mlx5_0 is the host's own ACTIVE NIC with the node's IPv4 GID at index 3;
    mlx5_12 is another pod's VF, ACTIVE, whose GIDs name that pod's own net1."""
    add_port(root, "mlx5_0", gids=roce_gids(3, (192, 168, 77, 15)), ndev="eno1np0" if ndevs else None)
    for n, (ifname, (device, pci)) in enumerate(POD_VFS.items()):
        add_port(root, device, gids=roce_gids(5, (10, 0, 103 + n, 7)), ndev=ifname if ndevs else None)
        if link:
            link_interface(root, ifname, device, pci)
    if other_pod:
        add_port(root, "mlx5_12", gids=roce_gids(5, (10, 0, 103, 9)), ndev="net1" if ndevs else None)
    add_netdevs(root, ["lo", "eth0", *POD_VFS])
    return root


def macvlan_shared_port(root: pathlib.Path) -> pathlib.Path:
    """A pod whose net1 is a macvlan on the host's PF (no SR-IOV VF, so no class/net/net1/device link):
    it shares mlx5_0 with the host, and mlx5_0's GID table holds both. Index 3 is the node's address on
    eno1np0, index 5 the pod's on net1, both RoCE v2 IPv4."""
    gids = roce_gids(3, (192, 168, 77, 15))
    gids[4] = (ipv4_gid(10, 0, 103, 7), "IB/RoCE v1")
    gids[5] = (ipv4_gid(10, 0, 103, 7), "RoCE v2")
    ndevs = {0: "eno1np0", 1: "eno1np0", 2: "eno1np0", 3: "eno1np0", 4: "net1", 5: "net1"}
    add_port(root, "mlx5_0", gids=gids, ndevs=ndevs)
    add_netdevs(root, ["lo", "eth0", "net1"])
    return root
