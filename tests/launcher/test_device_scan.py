"""The launcher's scan of the pod's RDMA devices: with more devices and ports on the host than it scans, the pod's own
VFs are still found, and the NCCL_IB_HCA it sets names them."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from tests.launcher.test_launcher import LAUNCHER_FILE, L, contract_env, fake

POD_VFS = {"net1": ("mlx5_900", "0000:d8:00.2"), "net2": ("mlx5_901", "0000:d8:00.3")}


POD_HCA = "=mlx5_900:1,mlx5_901:1"


def crowded_host(root: pathlib.Path, devices: int, ports: int) -> pathlib.Path:
    """A privileged pod in shared netns mode on a host showing `devices` RDMA devices of `ports` ports each (ACTIVE
    RoCE, the host's addresses), with the pod's own VFs named so that they sort after all of them."""
    for d in range(devices):
        for p in range(1, ports + 1):
            fake.add_port(root, f"mlx5_{d}", port=p, gids={0: (fake.ipv4_gid(192, 168, d % 250, p), "RoCE v2")}, ndev="eno1np0")
    for n, (ifname, (device, pci)) in enumerate(POD_VFS.items()):
        fake.add_port(root, device, gids=fake.roce_gids(5, (10, 0, 103 + n, 7)), ndev=ifname)
        fake.link_interface(root, ifname, device, pci)
    fake.add_netdevs(root, ["lo", "eth0"])
    return root


def empty_devices(root: pathlib.Path, count: int) -> None:
    """Device folders without ports: enough of them to fill a directory listing (MAX_DIR_ENTRIES)."""
    for d in range(count):
        (root / "class" / "infiniband" / f"mlx4_{d}").mkdir(parents=True)


# case: (the tree, whether the scan without the pod's devices first leaves them out for sure: a directory listing
# past MAX_DIR_ENTRIES stops in the file system's order, which may or may not reach them)
SCANS: dict[str, tuple[Callable[[pathlib.Path], Any], bool]] = {
    "300 devices of 2 ports (600 ports)": (lambda root: crowded_host(root, 300, 2), True),
    "600 devices of 1 port": (lambda root: crowded_host(root, 600, 1), True),
    "more devices than a listing holds": (lambda root: (crowded_host(root, 4, 1), empty_devices(root, L.MAX_DIR_ENTRIES + 100)), False),
}


class TestLauncherFindsThePodsOwnDevices:
    @pytest.mark.parametrize("case", SCANS)
    def test_the_pods_vfs_are_read_first(self, case: str, tmp_path: pathlib.Path) -> None:
        build, crowded = SCANS[case]
        build(tmp_path)
        links = L.read_interface_links(str(tmp_path), list(POD_VFS))
        own = [d for link in links for d in link.devices]
        assert own == [device for device, _ in POD_VFS.values()]
        ports = L.read_rdma_ports(str(tmp_path), own=own)
        assert len(ports) <= L.MAX_PORTS
        assert {"mlx5_900", "mlx5_901"} <= {p.device for p in ports}, "the pod's VFs were left out of the scan"
        assert ports == sorted(ports, key=lambda p: (L.natural_key(p.device), p.port))  # the order reports and NCCL_IB_HCA use
        if crowded:
            without = L.read_rdma_ports(str(tmp_path))  # what the scan read before: the host's devices first
            assert not {"mlx5_900", "mlx5_901"} <= {p.device for p in without}, "the case does not crowd the scan"

    @pytest.mark.parametrize("case", [case for case, (_, crowded) in SCANS.items() if crowded])
    def test_the_launcher_chooses_them_end_to_end(self, case: str, tmp_path: pathlib.Path) -> None:
        SCANS[case][0](tmp_path)
        env = contract_env(LAUNCHER_RDMA_INTERFACES=",".join(POD_VFS), LAUNCHER_PIN_BYTES=str(64 * 1024))
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        done = subprocess.run(
            [sys.executable, str(LAUNCHER_FILE), "--print-env", "--sysfs-root", str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in done.stderr, done.stderr
        assert f"NCCL_IB_HCA={POD_HCA}" in done.stdout, done.stderr[-2000:]
        assert "NCCL_IB_GID_INDEX=5" in done.stdout
