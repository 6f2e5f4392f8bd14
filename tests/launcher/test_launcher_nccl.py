"""The launcher trusts what it sees, not what the image says: which RDMA devices are the pod's, and
NCCL_* values that are inherited (baked into the image) or explicit (LAUNCHER_EXPLICIT_NCCL)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any

import pytest

from tests.launcher.test_launcher import L, contract_env, fake, plan_for, run_launcher, tcp_env

# What ml-dev-env's BuildConfig bakes into the image (CLUSTER-FACTS.md).
IMAGE_NCCL = {
    "NCCL_IB_HCA": "mlx5_6,mlx5_7,mlx5_10,mlx5_11",
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_SOCKET_IFNAME": "net1,net2,net3,net4",
    "NCCL_NET_GDR_LEVEL": "5",
    "NCCL_IB_DISABLE": "0",
}
POD_HCA = "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"


def overrides_by_name(plan: Any) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in plan.summary["overridden"]}


# --------------------------------------------------------------------------------------------
# Devices that are not the pod's
# --------------------------------------------------------------------------------------------


def test_shared_netns_selects_only_the_devices_behind_the_pods_interfaces(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.shared_netns(tmp_path))
    assert plan.errors == [], plan.errors
    # Without the mapping the host's mlx5_0 (GID index 3) and another pod's mlx5_12 would be in the
    # list, and no single GID index would hold.
    assert plan.env["NCCL_IB_HCA"] == POD_HCA
    assert plan.env["NCCL_IB_GID_INDEX"] == "5"
    assert "net1 -> mlx5_6 (through PCI function 0000:3b:00.2)" in report
    assert "host devices not attached to this pod, left out: mlx5_0:1 ACTIVE, mlx5_12:1 ACTIVE" in report
    assert "mlx5_0:1 ACTIVE RoCE, RoCE v2 IPv4 GID index 3  [host device, not attached to this pod]" in report
    assert "mlx5_6:1 ACTIVE RoCE, RoCE v2 IPv4 GID index 5  [net1]" in report
    devices = plan.summary["devices"]
    assert devices["chosen"] == ["mlx5_6:1", "mlx5_7:1", "mlx5_8:1", "mlx5_9:1"]
    assert devices["host_not_attached"] == ["mlx5_0:1", "mlx5_12:1"]
    assert devices["mapping"] == {"net1": ["mlx5_6"], "net2": ["mlx5_7"], "net3": ["mlx5_8"], "net4": ["mlx5_9"]}
    assert devices["every_active_port"] is False
    assert plan.summary["gid_index"] == 5


def test_gid_table_netdevs_map_interfaces_when_there_is_no_pci_link(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.shared_netns(tmp_path, link=False, other_pod=False))
    assert plan.errors == []
    assert plan.env["NCCL_IB_HCA"] == POD_HCA
    assert plan.env["NCCL_IB_GID_INDEX"] == "5"
    assert "net1 -> mlx5_6 (through its GID table entries (gid_attrs/ndevs))" in report


def test_a_netdev_name_several_devices_claim_maps_to_none_of_them(tmp_path: pathlib.Path) -> None:
    # Another pod's VF names its own net1 too: the name alone cannot tell which is ours.
    plan, _ = plan_for(fake.shared_netns(tmp_path, link=False, other_pod=True))
    assert plan.errors == []
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_7:1,mlx5_8:1,mlx5_9:1"
    assert any("the GID tables of mlx5_6, mlx5_12 all name it" in w for w in plan.warnings)
    assert any("no RDMA device could be tied to net1" in w for w in plan.warnings)


def test_nothing_maps_falls_back_to_every_active_port_and_says_so(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.shared_netns(tmp_path, link=False, ndevs=False))
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1,mlx5_12:1"
    assert "NCCL_IB_GID_INDEX" not in plan.env  # 3 on the host NIC, 5 on the VFs
    (warning,) = [w for w in plan.warnings if "could not map" in w]
    assert "could not map net1, net2, net3, net4 to RDMA devices" in warning
    assert "a host's own NIC may be among them" in warning
    assert plan.summary["devices"]["every_active_port"] is True


def test_infiniband_without_sriov_uses_the_active_ports(tmp_path: pathlib.Path) -> None:
    # Cairo: no SR-IOV interfaces to map from.
    plan, report = plan_for(fake.cairo(tmp_path), LAUNCHER_RDMA_INTERFACES="")
    assert plan.errors == []
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    assert "LAUNCHER_RDMA_INTERFACES is empty (InfiniBand without SR-IOV)" in report
    assert not any("could not map" in w for w in plan.warnings)


def test_pod_devices_down_while_host_devices_are_active_stops_the_pod(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_0", gids=fake.roce_gids(3, (192, 168, 77, 15)))
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.link_interface(tmp_path, "net1", "mlx5_6", "0000:3b:00.2")
    fake.add_netdevs(tmp_path, ["lo", "eth0"])
    plan, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1")
    (error,) = plan.errors
    assert "no ACTIVE RDMA port of this pod" in error
    assert "found: mlx5_6:1 DOWN" in error
    assert "ACTIVE, but host devices not attached to this pod: mlx5_0:1" in error


def test_gid_index_is_the_pods_interfaces_not_another_netdevs_on_a_shared_port(tmp_path: pathlib.Path) -> None:
    # net1 is a macvlan on the host's PF: mlx5_0 is found through its GID table, which also holds the
    # node's own address (eno1np0) at index 3. The lowest RoCE v2 IPv4 index would name eno1np0.
    root = fake.macvlan_shared_port(tmp_path)
    plan, report = plan_for(root, LAUNCHER_RDMA_INTERFACES="net1")
    assert plan.errors == [], plan.errors
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert plan.env["NCCL_IB_GID_INDEX"] == "5"
    assert plan.summary["gid_index"] == 5
    assert "mlx5_0:1 ACTIVE RoCE, RoCE v2 IPv4 GID index 5 (index 3 is eno1np0's, not this pod's)  [net1]" in report

    # The image's 3 (the usual index) is the node's address here: overridden, and why.
    plan, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_GID_INDEX="3")
    override = overrides_by_name(plan)["NCCL_IB_GID_INDEX"]
    assert override["new"] == "5"
    assert "is not a RoCE v2 IPv4 GID of the pod's interfaces (net1) on mlx5_0:1 (index 3 is eno1np0's)" in override["reason"]

    # The same value set on purpose stops the pod; 5 set on purpose is right.
    plan, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_GID_INDEX="3", LAUNCHER_EXPLICIT_NCCL="NCCL_IB_GID_INDEX")
    (error,) = plan.errors
    assert "explicit NCCL_IB_GID_INDEX=3 is not a RoCE v2 IPv4 GID of the pod's interfaces" in error
    plan, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_GID_INDEX="5", LAUNCHER_EXPLICIT_NCCL="NCCL_IB_GID_INDEX")
    assert plan.errors == []


def test_active_ports_of_both_link_layers_without_a_mapping_are_reported(tmp_path: pathlib.Path) -> None:
    # Cairo (InfiniBand, nothing to map by) as a privileged pod sees it: the host's RoCE NIC is ACTIVE too.
    root = fake.cairo(tmp_path, host_nic_active=True)
    plan, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="")
    assert plan.errors == []
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    (warning,) = [w for w in plan.warnings if "link layers" in w]
    assert "the ACTIVE ports mix link layers (Ethernet: mlx5_0:1; InfiniBand: mlx5_2:1, mlx5_3:1, mlx5_4:1, mlx5_5:1)" in warning
    assert "set LAUNCHER_LINK_LAYER" in warning


@pytest.mark.parametrize("value", ["InfiniBand", "infiniband"])
def test_link_layer_keeps_only_the_ports_of_the_fabric(tmp_path: pathlib.Path, value: str) -> None:
    root = fake.cairo(tmp_path, host_nic_active=True)
    plan, report = plan_for(root, LAUNCHER_RDMA_INTERFACES="", LAUNCHER_LINK_LAYER=value)
    assert plan.errors == []
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    assert "NCCL_IB_GID_INDEX" not in plan.env  # no longer taken from the host's RoCE NIC
    assert "link layer Ethernet, not LAUNCHER_LINK_LAYER InfiniBand, left out: mlx5_0:1" in report
    assert not any("link layers" in w for w in plan.warnings)
    assert plan.summary["devices"]["link_layer"] == "InfiniBand"
    # An image's list reaching the RoCE NIC is wrong here.
    plan, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="", LAUNCHER_LINK_LAYER=value, NCCL_IB_HCA="mlx5_0,mlx5_2")
    reason = overrides_by_name(plan)["NCCL_IB_HCA"]["reason"]
    assert "selects mlx5_0:1: link layer Ethernet, not LAUNCHER_LINK_LAYER InfiniBand" in reason


def test_link_layer_roce_v2_is_the_stacks_name_for_ethernet(tmp_path: pathlib.Path) -> None:
    root = fake.cairo(tmp_path, host_nic_active=True)
    plan, _ = plan_for(root, LAUNCHER_RDMA_INTERFACES="", LAUNCHER_LINK_LAYER="roce-v2")
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert plan.env["NCCL_IB_GID_INDEX"] == "3"


def test_link_layer_without_a_matching_active_port_stops_the_pod(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.cairo(tmp_path), LAUNCHER_RDMA_INTERFACES="", LAUNCHER_LINK_LAYER="Ethernet")
    (error,) = plan.errors
    assert "no ACTIVE RDMA port with link layer Ethernet (LAUNCHER_LINK_LAYER)" in error
    assert "ACTIVE, but another link layer: mlx5_2:1 InfiniBand" in error


def test_link_layer_is_validated(tmp_path: pathlib.Path) -> None:
    with pytest.raises(L.ConfigError, match="LAUNCHER_LINK_LAYER is 'roce'; expected one of: InfiniBand, Ethernet"):
        L.load_config(contract_env(LAUNCHER_LINK_LAYER="roce"), str(tmp_path))


def test_read_interface_links_follows_the_pci_symlink(tmp_path: pathlib.Path) -> None:
    fake.shared_netns(tmp_path)
    (link,) = L.read_interface_links(str(tmp_path), ["net3"])
    assert (link.interface, link.pci, link.devices) == ("net3", "0000:5e:00.2", ("mlx5_8",))
    (missing,) = L.read_interface_links(str(tmp_path), ["eth0"])
    assert (missing.pci, missing.devices) == ("", ())


# --------------------------------------------------------------------------------------------
# Inherited NCCL_* values: checked, and overridden when wrong
# --------------------------------------------------------------------------------------------


def test_image_baked_values_in_rdma_mode_are_overridden_where_wrong(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.shared_netns(tmp_path), **IMAGE_NCCL)
    assert plan.errors == []
    assert plan.env["NCCL_IB_HCA"] == POD_HCA
    assert plan.env["NCCL_IB_GID_INDEX"] == "5"
    # Right here, so kept as the image has them.
    assert plan.env["NCCL_SOCKET_IFNAME"] == "net1,net2,net3,net4"
    assert plan.env["NCCL_NET_GDR_LEVEL"] == "5"
    assert plan.env["NCCL_IB_DISABLE"] == "0"
    overridden = overrides_by_name(plan)
    assert set(overridden) == {"NCCL_IB_HCA", "NCCL_IB_GID_INDEX"}
    hca = overridden["NCCL_IB_HCA"]
    assert (hca["inherited"], hca["new"], hca["explicit"]) == (IMAGE_NCCL["NCCL_IB_HCA"], POD_HCA, False)
    assert "names mlx5_10, which does not exist here" in hca["reason"]
    assert "is not a RoCE v2 IPv4 GID on mlx5_6:1, mlx5_7:1, mlx5_8:1, mlx5_9:1" in overridden["NCCL_IB_GID_INDEX"]["reason"]
    assert "NCCL_IB_HCA=" + POD_HCA + "  OVERRIDDEN: inherited 'mlx5_6,mlx5_7,mlx5_10,mlx5_11' names mlx5_10" in report
    assert "NCCL_SOCKET_IFNAME=net1,net2,net3,net4  kept: inherited" in report
    assert any(w.startswith("overrode inherited NCCL_IB_HCA=") for w in plan.warnings)


def test_image_baked_values_on_seed_002s_node_name_down_devices(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.barcelona(tmp_path), **IMAGE_NCCL)
    reason = overrides_by_name(plan)["NCCL_IB_HCA"]["reason"]
    assert "names mlx5_10, which is not an ACTIVE RDMA device here (mlx5_10:1 DOWN)" in reason
    assert "names mlx5_11, which is not an ACTIVE RDMA device here (mlx5_11:1 DOWN)" in reason
    assert "NCCL_IB_GID_INDEX" not in overrides_by_name(plan)  # 3 is right on this node


def test_image_baked_values_in_tcp_mode_are_replaced_or_removed(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.empty(tmp_path), LAUNCHER_MODE="tcp", LAUNCHER_RDMA_INTERFACES="", **IMAGE_NCCL)
    assert plan.errors == []
    nccl = {k: v for k, v in plan.env.items() if k.startswith("NCCL_")}
    assert nccl == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "^lo,docker0"}
    overridden = overrides_by_name(plan)
    assert set(overridden) == set(IMAGE_NCCL)
    assert overridden["NCCL_IB_DISABLE"]["new"] == "1"
    assert "keeps NCCL's IB transport on in tcp mode" in overridden["NCCL_IB_DISABLE"]["reason"]
    assert overridden["NCCL_SOCKET_IFNAME"]["new"] == "^lo,docker0"
    assert "matches no interface in the pod (eth0, lo)" in overridden["NCCL_SOCKET_IFNAME"]["reason"]
    for name in ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL"):
        assert overridden[name]["new"] is None
        assert "is an RDMA-only setting, ignored in tcp mode" in overridden[name]["reason"]
    assert "NCCL_IB_HCA REMOVED: inherited 'mlx5_6,mlx5_7,mlx5_10,mlx5_11'" in report


def test_strict_mode_stops_instead_of_overriding(tmp_path: pathlib.Path) -> None:
    env = contract_env(LAUNCHER_STRICT="true", LAUNCHER_PIN_BYTES="65536", **IMAGE_NCCL)
    result = run_launcher(env, "--print-env", "--sysfs-root", str(fake.shared_netns(tmp_path)))
    assert result.returncode == 2, result.stderr
    assert "inherited NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11 names mlx5_10, which does not exist here" in result.stderr
    assert "LAUNCHER_STRICT=true stops the pod instead of overriding it" in result.stderr
    assert "inherited NCCL_IB_GID_INDEX=3 is not a RoCE v2 IPv4 GID" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_strict_mode_keeps_inherited_values_that_are_right(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.shared_netns(tmp_path), LAUNCHER_STRICT="true", NCCL_SOCKET_IFNAME="net1,net2,net3,net4", NCCL_DEBUG="INFO")
    assert plan.errors == []
    assert plan.env["NCCL_SOCKET_IFNAME"] == "net1,net2,net3,net4"


def test_strict_mode_does_not_stop_for_what_nccl_ignores(tmp_path: pathlib.Path) -> None:
    # The image's GDR level means nothing in tcp mode (NCCL_IB_DISABLE=1): removed, with a warning.
    tcp = dict(LAUNCHER_MODE="tcp", LAUNCHER_RDMA_INTERFACES="", LAUNCHER_STRICT="true")
    plan, _ = plan_for(fake.empty(tmp_path), NCCL_NET_GDR_LEVEL="5", **tcp)
    assert plan.errors == []
    assert "NCCL_NET_GDR_LEVEL" not in plan.env
    assert overrides_by_name(plan)["NCCL_NET_GDR_LEVEL"]["new"] is None
    assert any(w.startswith("overrode inherited NCCL_NET_GDR_LEVEL=5") for w in plan.warnings)
    # A harmful one still stops it.
    plan, _ = plan_for(fake.empty(tmp_path), NCCL_IB_DISABLE="0", **tcp)
    (error,) = plan.errors
    assert "inherited NCCL_IB_DISABLE=0 keeps NCCL's IB transport on in tcp mode" in error


def test_strict_mode_does_not_stop_for_what_the_tcp_fallback_overrides(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.add_netdevs(tmp_path, ["lo", "eth0", "net1"])
    settings = dict(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_TCP_FALLBACK="true", LAUNCHER_STRICT="true")
    plan, _ = plan_for(tmp_path, NCCL_IB_HCA="mlx5_6", NCCL_IB_DISABLE="0", **settings)
    assert plan.errors == [], plan.errors
    assert plan.env["NCCL_IB_DISABLE"] == "1"
    assert "NCCL_IB_HCA" not in plan.env
    assert set(overrides_by_name(plan)) == {"NCCL_IB_HCA", "NCCL_IB_DISABLE"}
    # What the fallback does not cover still stops the pod.
    plan, _ = plan_for(tmp_path, NCCL_SOCKET_IFNAME="ib", **settings)
    (error,) = plan.errors
    assert "inherited NCCL_SOCKET_IFNAME=ib matches no interface in the pod" in error


def test_unset_explicit_list_means_every_nccl_value_is_inherited(tmp_path: pathlib.Path) -> None:
    plan, report = plan_for(fake.barcelona(tmp_path), NCCL_DEBUG="INFO", NCCL_IB_HCA="mlx5_10")
    assert plan.errors == []
    assert "NCCL_DEBUG=INFO  kept: inherited (not in LAUNCHER_EXPLICIT_NCCL: the image's)" in report
    assert overrides_by_name(plan)["NCCL_IB_HCA"]["new"] == "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"


@pytest.mark.parametrize(
    "hca, problem",
    [
        ("mlx5_0,mlx5_6", "selects mlx5_0:1: host devices not attached to this pod"),
        ("mlx5_1", "selects mlx5_12:1: host devices not attached to this pod"),  # a prefix reaching another pod's VF
        ("^mlx5_0", "selects mlx5_12:1: host devices not attached to this pod"),
        ("", "selects mlx5_0:1, mlx5_12:1: host devices not attached to this pod"),  # empty: NCCL takes every device
        ("=mlx5_6:2", "names mlx5_6:2, which does not exist here"),
    ],
)
def test_inherited_hca_reaching_host_devices_is_overridden(tmp_path: pathlib.Path, hca: str, problem: str) -> None:
    plan, _ = plan_for(fake.shared_netns(tmp_path), NCCL_IB_HCA=hca)
    assert plan.env["NCCL_IB_HCA"] == POD_HCA
    assert problem in overrides_by_name(plan)["NCCL_IB_HCA"]["reason"]


def test_inherited_subset_of_the_pods_devices_is_kept_with_a_warning(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.shared_netns(tmp_path), NCCL_IB_HCA="=mlx5_6,mlx5_7")
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_6,mlx5_7"
    assert plan.summary["overridden"] == []
    assert any("leaves out mlx5_8:1, mlx5_9:1, ACTIVE ports of this pod" in w for w in plan.warnings)


@pytest.mark.parametrize(
    "name, value, new, problem",
    [
        ("NCCL_IB_DISABLE", "1", "0", "turns NCCL's IB transport off in rdma mode"),
        ("NCCL_NET", "Socket", None, "selects NCCL's socket transport in rdma mode"),
        ("NCCL_SOCKET_IFNAME", "lo", "net1,net2,net3,net4", "selects only lo, which cannot reach the other pods"),
        ("NCCL_SOCKET_IFNAME", "ib", "net1,net2,net3,net4", "matches no interface in the pod"),
        ("NCCL_IB_GID_INDEX", "three", "5", "is not a GID index"),
    ],
)
def test_other_inherited_values_that_cannot_work_in_rdma_mode(
    tmp_path: pathlib.Path, name: str, value: str, new: str | None, problem: str
) -> None:
    plan, _ = plan_for(fake.shared_netns(tmp_path), **{name: value})
    assert plan.errors == []
    (override,) = plan.summary["overridden"]
    assert (override["name"], override["new"]) == (name, new)
    assert problem in override["reason"]
    assert plan.env.get(name) == new


# --------------------------------------------------------------------------------------------
# Explicit values: the workload meant them
# --------------------------------------------------------------------------------------------


def test_explicit_host_device_stops_an_rdma_pod(tmp_path: pathlib.Path) -> None:
    plan, _ = plan_for(fake.shared_netns(tmp_path), NCCL_IB_HCA="=mlx5_0,mlx5_6", LAUNCHER_EXPLICIT_NCCL="NCCL_IB_HCA")
    (error,) = plan.errors
    assert "explicit NCCL_IB_HCA==mlx5_0,mlx5_6 selects mlx5_0:1: host devices not attached to this pod" in error
    assert "fix it in the workload's env, or leave it out and let the launcher choose" in error
    assert plan.summary["overridden"] == []


def test_explicit_rdma_only_settings_in_tcp_mode_are_kept_with_a_warning(tmp_path: pathlib.Path) -> None:
    explicit = "NCCL_IB_HCA,NCCL_NET_GDR_LEVEL,NCCL_IB_TIMEOUT"
    plan, _ = plan_for(
        fake.empty(tmp_path),
        LAUNCHER_MODE="tcp",
        LAUNCHER_RDMA_INTERFACES="",
        NCCL_IB_HCA="=mlx5_6",
        NCCL_NET_GDR_LEVEL="SYS",
        NCCL_IB_TIMEOUT="22",
        LAUNCHER_EXPLICIT_NCCL=explicit,
    )
    assert plan.errors == []
    assert (plan.env["NCCL_IB_HCA"], plan.env["NCCL_NET_GDR_LEVEL"], plan.env["NCCL_IB_TIMEOUT"]) == ("=mlx5_6", "SYS", "22")
    assert any("explicit NCCL_IB_TIMEOUT=22 is an RDMA-only setting, ignored in tcp mode" in w for w in plan.warnings)


@pytest.mark.parametrize(
    "name, value, problem",
    [
        ("NCCL_IB_DISABLE", "0", "keeps NCCL's IB transport on in tcp mode"),
        ("NCCL_NET", "IB", "selects NCCL's IB transport in tcp mode"),
        ("NCCL_SOCKET_IFNAME", "net1,net2", "matches no interface in the pod"),
    ],
)
def test_explicit_values_that_break_tcp_stop_a_tcp_pod(tmp_path: pathlib.Path, name: str, value: str, problem: str) -> None:
    plan, _ = plan_for(fake.empty(tmp_path), LAUNCHER_MODE="tcp", LAUNCHER_RDMA_INTERFACES="", LAUNCHER_EXPLICIT_NCCL=name, **{name: value})
    (error,) = plan.errors
    assert f"explicit {name}={value} {problem}" in error


def test_fallback_overrides_the_explicit_rdma_switch_and_keeps_the_rest(tmp_path: pathlib.Path) -> None:
    # What the program renders for an rdma workload (NCCL_IB_DISABLE=0, NCCL_NET_GDR_LEVEL) meets a
    # node without ACTIVE ports, and the workload allowed the fallback.
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.add_netdevs(tmp_path, ["lo", "eth0", "net1"])
    plan, _ = plan_for(
        tmp_path,
        LAUNCHER_RDMA_INTERFACES="net1",
        LAUNCHER_TCP_FALLBACK="true",
        NCCL_IB_DISABLE="0",
        NCCL_NET_GDR_LEVEL="PHB",
        LAUNCHER_EXPLICIT_NCCL="NCCL_IB_DISABLE,NCCL_NET_GDR_LEVEL",
    )
    assert plan.errors == []
    assert plan.env["NCCL_IB_DISABLE"] == "1"
    assert plan.env["NCCL_NET_GDR_LEVEL"] == "PHB"
    (override,) = plan.summary["overridden"]
    assert override["name"] == "NCCL_IB_DISABLE" and override["explicit"] is True
    assert "overridden although explicit: rdma mode fell back to tcp (LAUNCHER_TCP_FALLBACK=true)" in override["reason"]
    assert plan.summary["transport"] == "tcp-fallback"


def test_explicit_names_are_validated_and_unset_ones_reported(tmp_path: pathlib.Path) -> None:
    with pytest.raises(L.ConfigError, match="LAUNCHER_EXPLICIT_NCCL has 'NCCL IB'; expected NCCL_\\* variable names"):
        L.load_config(contract_env(LAUNCHER_EXPLICIT_NCCL="NCCL_IB_HCA,NCCL IB"), str(tmp_path))
    _, report = plan_for(fake.barcelona(tmp_path), LAUNCHER_EXPLICIT_NCCL="NCCL_IB_HCA, NCCL_DEBUG")
    assert "listed in LAUNCHER_EXPLICIT_NCCL but not set: NCCL_DEBUG, NCCL_IB_HCA" in report


# --------------------------------------------------------------------------------------------
# End to end: the image's values through the command line
# --------------------------------------------------------------------------------------------


def test_print_env_exports_the_overridden_values(tmp_path: pathlib.Path) -> None:
    result = run_launcher(tcp_env(NCCL_DEBUG="INFO", **IMAGE_NCCL), "--print-env", "--sysfs-root", str(fake.empty(tmp_path)))
    assert result.returncode == 0, result.stderr
    env = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert {k: v for k, v in env.items() if k.startswith("NCCL_")} == {
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "^lo,docker0",
    }
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("LAUNCHER_REPORT ")]
    report = json.loads(line[len("LAUNCHER_REPORT ") :])
    assert sorted(o["name"] for o in report["overridden"]) == sorted(IMAGE_NCCL)


def test_removed_values_do_not_reach_the_command_or_oc_exec_sessions(tmp_path: pathlib.Path) -> None:
    env_file = tmp_path / "launcher.env"
    script = 'echo "hca=${NCCL_IB_HCA-unset} gdr=${NCCL_NET_GDR_LEVEL-unset} ifname=$NCCL_SOCKET_IFNAME debug=$NCCL_DEBUG"'
    env = tcp_env(LAUNCHER_RUN="command", LAUNCHER_ARGS=json.dumps(["sh", "-c", script]), NCCL_DEBUG="INFO", **IMAGE_NCCL)
    env["LAUNCHER_REPORT_JSON"] = str(tmp_path / "report.json")
    result = run_launcher(env, "--sysfs-root", str(fake.empty(tmp_path / "sys")), "--env-file", str(env_file))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hca=unset gdr=unset ifname=^lo,docker0 debug=INFO\n"
    # An oc exec session starts from the image's environment; sourcing the file undoes the image.
    sourced = subprocess.run(
        ["sh", "-c", f'. "{env_file}"; {script}'],
        env={"PATH": os.environ["PATH"], **IMAGE_NCCL, "NCCL_DEBUG": "INFO"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert sourced.stdout == result.stdout
