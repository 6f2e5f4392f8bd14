"""Which RDMA devices are the pod's, over fake sysfs trees shaped like the seeds' clusters (tests/launcher/launcher_sysfs.py),
and the NCCL_IB_HCA, NCCL_IB_GID_INDEX and NCCL_SOCKET_IFNAME they give (components/launcher/nccl_env.py)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from components.launcher import facts, nccl_env
from tests.launcher import launcher_sysfs as fake
from tests.launcher.pod import memlock_facts, plan_for

POD_HCA = "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"


def overrides_by_name(p: Any) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in p.summary["overridden"]}


def test_barcelona_selects_only_active_ports_exactly(tmp_path: pathlib.Path) -> None:
    # Seed 002 shipped NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11 while mlx5_6..9 were ACTIVE.
    p, report = plan_for(fake.barcelona(tmp_path))
    assert p.errors == []
    assert p.env["NCCL_IB_HCA"] == "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"
    assert p.env["NCCL_IB_GID_INDEX"] == "3"
    assert p.env["NCCL_IB_DISABLE"] == "0"
    assert p.env["NCCL_SOCKET_IFNAME"] == "net1,net2,net3,net4"
    assert "left out: mlx5_10:1, mlx5_11:1" in report


def test_cairo_infiniband_needs_no_gid_index(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.cairo(tmp_path))
    assert p.errors == []
    assert p.env["NCCL_IB_HCA"] == "=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    assert "NCCL_IB_GID_INDEX" not in p.env
    assert "InfiniBand uses GID index 0" in report


@pytest.mark.parametrize("active, expected", [("mlx5_1", "=mlx5_1:1"), ("mlx5_10", "=mlx5_10:1")])
def test_prefix_named_devices_use_exact_form(tmp_path: pathlib.Path, active: str, expected: str) -> None:
    for dev in ("mlx5_1", "mlx5_10"):
        fake.add_port(tmp_path, dev, state="ACTIVE" if dev == active else "DOWN")
    fake.add_netdevs(tmp_path, ["eth0", "net1"])
    p, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    assert p.env["NCCL_IB_HCA"] == expected
    # What NCCL will select under its own list rules: the exact form names one device only.
    assert nccl_env.nccl_list_matches(p.env["NCCL_IB_HCA"].split(":")[0], ["mlx5_1", "mlx5_10"]) == [active]


def test_gid_index_is_found_where_the_roce_v2_ipv4_entry_is(tmp_path: pathlib.Path) -> None:
    # Index 3 is a RoCE v2 entry, but link-local; 4 is the IPv4 address as RoCE v1; 5 is the one.
    table: dict[int, tuple[str, str | None]] = {i: (fake.ZERO_GID, None) for i in range(8)}
    table.update(
        {
            0: (fake.link_local_gid(), "IB/RoCE v1"),
            3: (fake.link_local_gid(), "RoCE v2"),
            4: (fake.ipv4_gid(10, 0, 103, 7), "IB/RoCE v1"),
            5: (fake.ipv4_gid(10, 0, 103, 7), "RoCE v2"),
        }
    )
    for dev in ("mlx5_6", "mlx5_7"):
        fake.add_port(tmp_path, dev, gids=table)
    fake.add_netdevs(tmp_path, ["eth0", "net1", "net2"])
    p, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1,net2")
    assert p.env["NCCL_IB_GID_INDEX"] == "5"


def test_barcelona_layout_with_gid_index_shifted(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.barcelona(tmp_path, gid_index=5))
    assert p.env["NCCL_IB_GID_INDEX"] == "5"


def test_ports_disagreeing_on_gid_index_leave_it_to_nccl(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", gids=fake.roce_gids(3))
    fake.add_port(tmp_path, "mlx5_7", gids=fake.roce_gids(5))
    fake.add_netdevs(tmp_path, ["net1", "net2"])
    p, report = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1,net2")
    assert p.errors == []
    assert "NCCL_IB_GID_INDEX" not in p.env
    assert "mlx5_6:1 -> 3, mlx5_7:1 -> 5" in report


def test_roce_port_without_ipv4_gid_leaves_index_unset(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", gids=fake.roce_gids(3))
    fake.add_port(tmp_path, "mlx5_7", gids={0: (fake.link_local_gid(), "RoCE v2"), 1: (fake.ZERO_GID, None)})
    fake.add_netdevs(tmp_path, ["net1"])
    p, report = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    assert "NCCL_IB_GID_INDEX" not in p.env
    assert "mlx5_7:1 -> none" in report


def test_unreadable_gid_attrs_are_tolerated(tmp_path: pathlib.Path) -> None:
    fake.barcelona(tmp_path)
    # roce_gids() leaves unpopulated entries whose type cannot be read (EINVAL), as the kernel does.
    ports = facts.read_rdma_ports(str(tmp_path))
    assert [g.index for g in ports[0].gids if g.v2_ipv4] == [3]
    assert [p.name for p in ports][:2] == ["mlx5_6:1", "mlx5_7:1"]  # natural order: mlx5_10 last
    assert ports[-1].name == "mlx5_11:1" and ports[-1].state == "DOWN"


def test_some_rdma_interfaces_missing_uses_the_rest_and_warns(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.barcelona(tmp_path, netdevs=["lo", "eth0", "net1", "net2"]))
    assert p.errors == []
    assert p.env["NCCL_SOCKET_IFNAME"] == "net1,net2"
    assert "SR-IOV interfaces missing from the pod: net3, net4" in report


def test_no_rdma_interface_present_fails_with_bootstrap_diagnosis(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.barcelona(tmp_path, netdevs=["lo", "eth0"]))
    assert len(p.errors) == 1
    error = p.errors[0]
    assert "net1, net2, net3, net4" in error
    assert "Bootstrap: no socket interface found" in error
    assert "networks annotation" in error and "NetworkAttachmentDefinitions" in error
    assert "WOULD NOT START" in report


def test_socket_ifname_goes_exact_when_a_prefix_would_catch_another_interface(tmp_path: pathlib.Path) -> None:
    fake.barcelona(tmp_path, netdevs=["lo", "eth0", "net1", "net2", "net10"])
    p, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1,net2")
    assert p.env["NCCL_SOCKET_IFNAME"] == "=net1,net2"


def test_no_active_port_fails_without_fallback(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.add_netdevs(tmp_path, ["net1"])
    p, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    assert len(p.errors) == 1
    assert "no ACTIVE RDMA port" in p.errors[0] and "mlx5_6:1 DOWN" in p.errors[0]
    assert "LAUNCHER_TCP_FALLBACK=true" in p.errors[0]


def test_no_active_port_falls_back_to_tcp_loudly_when_allowed(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.add_netdevs(tmp_path, ["eth0", "net1"])
    # Pinning failing does not stop a pod that has fallen back to TCP.
    p, report = plan_for(
        tmp_path, memlock=memlock_facts(cap_eff=0, pin_errno=12), LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_TCP_FALLBACK="true"
    )
    assert p.errors == []
    assert p.env["NCCL_IB_DISABLE"] == "1"
    assert p.env["NCCL_SOCKET_IFNAME"] == "^lo,docker0"
    assert "NCCL_IB_HCA" not in p.env
    assert "RDMA MODE FELL BACK TO TCP" in report


def test_tcp_mode_uses_the_configured_socket_list(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(
        fake.empty(tmp_path),
        LAUNCHER_MODE="tcp",
        LAUNCHER_MEMLOCK_STRATEGY="none",
        LAUNCHER_RDMA_INTERFACES="",
        LAUNCHER_TCP_SOCKET_IFNAME="eth0",
        memlock=memlock_facts(pin_errno=None),
    )
    assert p.errors == []
    assert p.env["NCCL_IB_DISABLE"] == "1"
    assert p.env["NCCL_SOCKET_IFNAME"] == "eth0"


# --------------------------------------------------------------------------------------------
# Devices that are not the pod's
# --------------------------------------------------------------------------------------------


def test_shared_netns_selects_only_the_devices_behind_the_pods_interfaces(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.shared_netns(tmp_path))
    assert p.errors == [], p.errors
    # Without the mapping the host's mlx5_0 (GID index 3) and another pod's mlx5_12 would be in the
    # list, and no single GID index would hold.
    assert p.env["NCCL_IB_HCA"] == POD_HCA
    assert p.env["NCCL_IB_GID_INDEX"] == "5"
    assert "net1 -> mlx5_6 (through PCI function 0000:3b:00.2)" in report
    assert "host devices not attached to this pod, left out: mlx5_0:1 ACTIVE, mlx5_12:1 ACTIVE" in report
    assert "mlx5_0:1 ACTIVE RoCE, RoCE v2 IPv4 GID index 3  [host device, not attached to this pod]" in report
    assert "mlx5_6:1 ACTIVE RoCE, RoCE v2 IPv4 GID index 5  [net1]" in report
    devices = p.summary["devices"]
    assert devices["chosen"] == ["mlx5_6:1", "mlx5_7:1", "mlx5_8:1", "mlx5_9:1"]
    assert devices["host_not_attached"] == ["mlx5_0:1", "mlx5_12:1"]
    assert devices["mapping"] == {"net1": ["mlx5_6"], "net2": ["mlx5_7"], "net3": ["mlx5_8"], "net4": ["mlx5_9"]}
    assert devices["every_active_port"] is False
    assert p.summary["gid_index"] == 5


def test_gid_table_netdevs_map_interfaces_when_there_is_no_pci_link(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.shared_netns(tmp_path, link=False, other_pod=False))
    assert p.errors == []
    assert p.env["NCCL_IB_HCA"] == POD_HCA
    assert p.env["NCCL_IB_GID_INDEX"] == "5"
    assert "net1 -> mlx5_6 (through its GID table entries (gid_attrs/ndevs))" in report


def test_a_netdev_name_several_devices_claim_maps_to_none_of_them(tmp_path: pathlib.Path) -> None:
    # Another pod's VF names its own net1 too: the name alone cannot tell which is ours.
    p, _ = plan_for(fake.shared_netns(tmp_path, link=False, other_pod=True))
    assert p.errors == []
    assert p.env["NCCL_IB_HCA"] == "=mlx5_7:1,mlx5_8:1,mlx5_9:1"
    assert any("the GID tables of mlx5_6, mlx5_12 all name it" in w for w in p.warnings)
    assert any("no RDMA device could be tied to net1" in w for w in p.warnings)


def test_nothing_maps_falls_back_to_every_active_port_and_says_so(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.shared_netns(tmp_path, link=False, ndevs=False))
    assert p.env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1,mlx5_12:1"
    assert "NCCL_IB_GID_INDEX" not in p.env  # 3 on the host NIC, 5 on the VFs
    (warning,) = [w for w in p.warnings if "could not map" in w]
    assert "could not map net1, net2, net3, net4 to RDMA devices" in warning
    assert "a host's own NIC may be among them" in warning
    assert p.summary["devices"]["every_active_port"] is True


def test_infiniband_without_sriov_uses_the_active_ports(tmp_path: pathlib.Path) -> None:
    # Cairo: no SR-IOV interfaces to map from.
    p, report = plan_for(fake.cairo(tmp_path), LAUNCHER_RDMA_INTERFACES="")
    assert p.errors == []
    assert p.env["NCCL_IB_HCA"] == "=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    assert "LAUNCHER_RDMA_INTERFACES is empty (InfiniBand without SR-IOV)" in report
    assert not any("could not map" in w for w in p.warnings)


def test_pod_devices_down_while_host_devices_are_active_stops_the_pod(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_0", gids=fake.roce_gids(3, (192, 168, 77, 15)))
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.link_interface(tmp_path, "net1", "mlx5_6", "0000:3b:00.2")
    fake.add_netdevs(tmp_path, ["lo", "eth0"])
    p, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    (error,) = p.errors
    assert "no ACTIVE RDMA port of this pod" in error
    assert "found: mlx5_6:1 DOWN" in error
    assert "ACTIVE, but host devices not attached to this pod: mlx5_0:1" in error


def test_gid_index_is_the_pods_interfaces_not_another_netdevs_on_a_shared_port(tmp_path: pathlib.Path) -> None:
    # net1 is a macvlan on the host's PF: mlx5_0 is found through its GID table, which also holds the
    # node's own address (eno1np0) at index 3. The lowest RoCE v2 IPv4 index would name eno1np0.
    root = fake.macvlan_shared_port(tmp_path)
    p, report = plan_for(root, LAUNCHER_RDMA_INTERFACES="net1")
    assert p.errors == [], p.errors
    assert p.env["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert p.env["NCCL_IB_GID_INDEX"] == "5"
    assert p.summary["gid_index"] == 5
    assert "mlx5_0:1 ACTIVE RoCE, RoCE v2 IPv4 GID index 5 (index 3 is eno1np0's, not this pod's)  [net1]" in report

    # The image's 3 (the usual index) is the node's address here: overridden, and why.
    p, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_GID_INDEX="3")
    override = overrides_by_name(p)["NCCL_IB_GID_INDEX"]
    assert override["new"] == "5"
    assert "is not a RoCE v2 IPv4 GID of the pod's interfaces (net1) on mlx5_0:1 (index 3 is eno1np0's)" in override["reason"]

    # The same value set on purpose stops the pod; 5 set on purpose is right.
    p, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_GID_INDEX="3", LAUNCHER_EXPLICIT_NCCL="NCCL_IB_GID_INDEX")
    (error,) = p.errors
    assert "explicit NCCL_IB_GID_INDEX=3 is not a RoCE v2 IPv4 GID of the pod's interfaces" in error
    p, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_GID_INDEX="5", LAUNCHER_EXPLICIT_NCCL="NCCL_IB_GID_INDEX")
    assert p.errors == []


def test_active_ports_of_both_link_layers_without_a_mapping_are_reported(tmp_path: pathlib.Path) -> None:
    # Cairo (InfiniBand, nothing to map by) as a privileged pod sees it: the host's RoCE NIC is ACTIVE too.
    root = fake.cairo(tmp_path, host_nic_active=True)
    p, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="")
    assert p.errors == []
    assert p.env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    (warning,) = [w for w in p.warnings if "link layers" in w]
    assert "the ACTIVE ports mix link layers (Ethernet: mlx5_0:1; InfiniBand: mlx5_2:1, mlx5_3:1, mlx5_4:1, mlx5_5:1)" in warning
    assert "set LAUNCHER_LINK_LAYER" in warning


@pytest.mark.parametrize("value", ["InfiniBand", "infiniband"])
def test_link_layer_keeps_only_the_ports_of_the_fabric(tmp_path: pathlib.Path, value: str) -> None:
    root = fake.cairo(tmp_path, host_nic_active=True)
    p, report = plan_for(root, LAUNCHER_RDMA_INTERFACES="", LAUNCHER_LINK_LAYER=value)
    assert p.errors == []
    assert p.env["NCCL_IB_HCA"] == "=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    assert "NCCL_IB_GID_INDEX" not in p.env  # no longer taken from the host's RoCE NIC
    assert "link layer Ethernet, not LAUNCHER_LINK_LAYER InfiniBand, left out: mlx5_0:1" in report
    assert not any("link layers" in w for w in p.warnings)
    assert p.summary["devices"]["link_layer"] == "InfiniBand"
    # An image's list reaching the RoCE NIC is wrong here.
    p, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="", LAUNCHER_LINK_LAYER=value, NCCL_IB_HCA="mlx5_0,mlx5_2")
    reason = overrides_by_name(p)["NCCL_IB_HCA"]["reason"]
    assert "selects mlx5_0:1: link layer Ethernet, not LAUNCHER_LINK_LAYER InfiniBand" in reason


def test_link_layer_roce_v2_is_the_stacks_name_for_ethernet(tmp_path: pathlib.Path) -> None:
    root = fake.cairo(tmp_path, host_nic_active=True)
    p, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="", LAUNCHER_LINK_LAYER="roce-v2")
    assert p.env["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert p.env["NCCL_IB_GID_INDEX"] == "3"


def test_link_layer_without_a_matching_active_port_stops_the_pod(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.cairo(tmp_path), LAUNCHER_RDMA_INTERFACES="", LAUNCHER_LINK_LAYER="Ethernet")
    (error,) = p.errors
    assert "no ACTIVE RDMA port with link layer Ethernet (LAUNCHER_LINK_LAYER)" in error
    assert "ACTIVE, but another link layer: mlx5_2:1 InfiniBand" in error


def test_read_interface_links_follows_the_pci_symlink(tmp_path: pathlib.Path) -> None:
    fake.shared_netns(tmp_path)
    (link,) = facts.read_interface_links(str(tmp_path), ["net3"])
    assert (link.interface, link.pci, link.devices) == ("net3", "0000:5e:00.2", ("mlx5_8",))
    (missing,) = facts.read_interface_links(str(tmp_path), ["eth0"])
    assert (missing.pci, missing.devices) == ("", ())
