"""NCCL_* values the launcher finds at start, inherited (baked into the image) or explicit (LAUNCHER_EXPLICIT_NCCL):
checked against what it sees, kept, overridden or stopping the pod (components/launcher/nccl_env.py)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any

import pytest

from tests.launcher import launcher_sysfs as fake
from tests.launcher.pod import contract_env, plan_for, report_of, run_launcher, tcp_env

# What ml-dev-env's BuildConfig bakes into the image (CLUSTER-FACTS.md).
IMAGE_NCCL = {
    "NCCL_IB_HCA": "mlx5_6,mlx5_7,mlx5_10,mlx5_11",
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_SOCKET_IFNAME": "net1,net2,net3,net4",
    "NCCL_NET_GDR_LEVEL": "5",
    "NCCL_IB_DISABLE": "0",
}
POD_HCA = "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"


def overrides_by_name(p: Any) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in p.summary["overridden"]}


# --------------------------------------------------------------------------------------------
# Inherited values: checked, and overridden when wrong
# --------------------------------------------------------------------------------------------


def test_image_baked_values_in_rdma_mode_are_overridden_where_wrong(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.shared_netns(tmp_path), **IMAGE_NCCL)
    assert p.errors == []
    assert p.env["NCCL_IB_HCA"] == POD_HCA
    assert p.env["NCCL_IB_GID_INDEX"] == "5"
    # Right here, so kept as the image has them.
    assert p.env["NCCL_SOCKET_IFNAME"] == "net1,net2,net3,net4"
    assert p.env["NCCL_NET_GDR_LEVEL"] == "5"
    assert p.env["NCCL_IB_DISABLE"] == "0"
    overridden = overrides_by_name(p)
    assert set(overridden) == {"NCCL_IB_HCA", "NCCL_IB_GID_INDEX"}
    hca = overridden["NCCL_IB_HCA"]
    assert (hca["inherited"], hca["new"], hca["explicit"]) == (IMAGE_NCCL["NCCL_IB_HCA"], POD_HCA, False)
    assert "names mlx5_10, which does not exist here" in hca["reason"]
    assert "is not a RoCE v2 IPv4 GID on mlx5_6:1, mlx5_7:1, mlx5_8:1, mlx5_9:1" in overridden["NCCL_IB_GID_INDEX"]["reason"]
    assert "NCCL_IB_HCA=" + POD_HCA + "  OVERRIDDEN: inherited 'mlx5_6,mlx5_7,mlx5_10,mlx5_11' names mlx5_10" in report
    assert "NCCL_SOCKET_IFNAME=net1,net2,net3,net4  kept: inherited" in report
    assert any(w.startswith("overrode inherited NCCL_IB_HCA=") for w in p.warnings)


def test_image_baked_values_on_seed_002s_node_name_down_devices(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.barcelona(tmp_path), **IMAGE_NCCL)
    reason = overrides_by_name(p)["NCCL_IB_HCA"]["reason"]
    assert "names mlx5_10, which is not an ACTIVE RDMA device here (mlx5_10:1 DOWN)" in reason
    assert "names mlx5_11, which is not an ACTIVE RDMA device here (mlx5_11:1 DOWN)" in reason
    assert "NCCL_IB_GID_INDEX" not in overrides_by_name(p)  # 3 is right on this node


def test_image_baked_values_in_tcp_mode_are_replaced_or_removed(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.empty(tmp_path), LAUNCHER_MODE="tcp", LAUNCHER_RDMA_INTERFACES="", **IMAGE_NCCL)
    assert p.errors == []
    nccl = {k: v for k, v in p.env.items() if k.startswith("NCCL_")}
    assert nccl == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "^lo,docker0"}
    overridden = overrides_by_name(p)
    assert set(overridden) == set(IMAGE_NCCL)
    assert overridden["NCCL_IB_DISABLE"]["new"] == "1"
    assert "keeps NCCL's IB transport on in tcp mode" in overridden["NCCL_IB_DISABLE"]["reason"]
    assert overridden["NCCL_SOCKET_IFNAME"]["new"] == "^lo,docker0"
    assert "matches no interface in the pod (eth0, lo)" in overridden["NCCL_SOCKET_IFNAME"]["reason"]
    for name in ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL"):
        assert overridden[name]["new"] is None
        assert "is an RDMA-only setting, ignored in tcp mode" in overridden[name]["reason"]
    assert "NCCL_IB_HCA REMOVED: inherited 'mlx5_6,mlx5_7,mlx5_10,mlx5_11'" in report


def test_inherited_gid_index_that_is_wrong_is_overridden(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.barcelona(tmp_path, gid_index=5), NCCL_IB_GID_INDEX="3")
    assert p.errors == []
    assert p.env["NCCL_IB_GID_INDEX"] == "5"
    assert "NCCL_IB_GID_INDEX=5  OVERRIDDEN: inherited '3' is not a RoCE v2 IPv4 GID on mlx5_6:1" in report


def test_unset_explicit_list_means_every_nccl_value_is_inherited(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.barcelona(tmp_path), NCCL_DEBUG="INFO", NCCL_IB_HCA="mlx5_10")
    assert p.errors == []
    assert "NCCL_DEBUG=INFO  kept: inherited (not in LAUNCHER_EXPLICIT_NCCL: the image's)" in report
    assert overrides_by_name(p)["NCCL_IB_HCA"]["new"] == "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"


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
    p, _ = plan_for(fake.shared_netns(tmp_path), NCCL_IB_HCA=hca)
    assert p.env["NCCL_IB_HCA"] == POD_HCA
    assert problem in overrides_by_name(p)["NCCL_IB_HCA"]["reason"]


def test_inherited_subset_of_the_pods_devices_is_kept_with_a_warning(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.shared_netns(tmp_path), NCCL_IB_HCA="=mlx5_6,mlx5_7")
    assert p.env["NCCL_IB_HCA"] == "=mlx5_6,mlx5_7"
    assert p.summary["overridden"] == []
    assert any("leaves out mlx5_8:1, mlx5_9:1, ACTIVE ports of this pod" in w for w in p.warnings)


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
    p, _ = plan_for(fake.shared_netns(tmp_path), **{name: value})
    assert p.errors == []
    (override,) = p.summary["overridden"]
    assert (override["name"], override["new"]) == (name, new)
    assert problem in override["reason"]
    assert p.env.get(name) == new


def test_strict_mode_stops_instead_of_overriding(tmp_path: pathlib.Path) -> None:
    env = contract_env(LAUNCHER_STRICT="true", LAUNCHER_PIN_BYTES="65536", **IMAGE_NCCL)
    result = run_launcher(env, "--print-env", "--sysfs-root", str(fake.shared_netns(tmp_path)))
    assert result.returncode == 2, result.stderr
    assert "inherited NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11 names mlx5_10, which does not exist here" in result.stderr
    assert "LAUNCHER_STRICT=true stops the pod instead of overriding it" in result.stderr
    assert "inherited NCCL_IB_GID_INDEX=3 is not a RoCE v2 IPv4 GID" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_strict_mode_keeps_inherited_values_that_are_right(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.shared_netns(tmp_path), LAUNCHER_STRICT="true", NCCL_SOCKET_IFNAME="net1,net2,net3,net4", NCCL_DEBUG="INFO")
    assert p.errors == []
    assert p.env["NCCL_SOCKET_IFNAME"] == "net1,net2,net3,net4"


def test_strict_mode_does_not_stop_for_what_nccl_ignores(tmp_path: pathlib.Path) -> None:
    # The image's GDR level means nothing in tcp mode (NCCL_IB_DISABLE=1): removed, with a warning.
    tcp = dict(LAUNCHER_MODE="tcp", LAUNCHER_RDMA_INTERFACES="", LAUNCHER_STRICT="true")
    p, _ = plan_for(fake.empty(tmp_path), NCCL_NET_GDR_LEVEL="5", **tcp)
    assert p.errors == []
    assert "NCCL_NET_GDR_LEVEL" not in p.env
    assert overrides_by_name(p)["NCCL_NET_GDR_LEVEL"]["new"] is None
    assert any(w.startswith("overrode inherited NCCL_NET_GDR_LEVEL=5") for w in p.warnings)
    # A harmful one still stops it.
    p, _ = plan_for(fake.empty(tmp_path), NCCL_IB_DISABLE="0", **tcp)
    (error,) = p.errors
    assert "inherited NCCL_IB_DISABLE=0 keeps NCCL's IB transport on in tcp mode" in error


def test_strict_mode_does_not_stop_for_what_the_tcp_fallback_overrides(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.add_netdevs(tmp_path, ["lo", "eth0", "net1"])
    settings = dict(LAUNCHER_RDMA_INTERFACES="net1", LAUNCHER_TCP_FALLBACK="true", LAUNCHER_STRICT="true")
    p, _ = plan_for(tmp_path, NCCL_IB_HCA="mlx5_6", NCCL_IB_DISABLE="0", **settings)
    assert p.errors == [], p.errors
    assert p.env["NCCL_IB_DISABLE"] == "1"
    assert "NCCL_IB_HCA" not in p.env
    assert set(overrides_by_name(p)) == {"NCCL_IB_HCA", "NCCL_IB_DISABLE"}
    # What the fallback does not cover still stops the pod.
    p, _ = plan_for(tmp_path, NCCL_SOCKET_IFNAME="ib", **settings)
    (error,) = p.errors
    assert "inherited NCCL_SOCKET_IFNAME=ib matches no interface in the pod" in error


# --------------------------------------------------------------------------------------------
# Explicit values: the workload meant them
# --------------------------------------------------------------------------------------------


def test_explicit_nccl_values_are_kept_and_a_wrong_one_stops_an_rdma_pod(tmp_path: pathlib.Path) -> None:
    seed_hca = "mlx5_6,mlx5_7,mlx5_10,mlx5_11"
    explicit = "NCCL_IB_HCA,NCCL_NET_GDR_LEVEL"
    p, report = plan_for(fake.barcelona(tmp_path), NCCL_IB_HCA=seed_hca, NCCL_NET_GDR_LEVEL="SYS", LAUNCHER_EXPLICIT_NCCL=explicit)
    assert p.env["NCCL_IB_HCA"] == seed_hca  # never overridden: the workload meant it
    assert p.env["NCCL_NET_GDR_LEVEL"] == "SYS"
    assert "NCCL_NET_GDR_LEVEL=SYS  kept: set explicitly by the workload" in report
    assert "detection would choose NCCL_IB_HCA='=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1'" in report
    # Two of the four names are not live here, so the pod stops and says which.
    (error,) = p.errors
    assert "explicit NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11 names mlx5_10, which is not an ACTIVE" in error
    assert "names mlx5_11, which is not an ACTIVE" in error
    assert "WOULD NOT START" in report


def test_explicit_prefix_hca_is_flagged(tmp_path: pathlib.Path) -> None:
    fake.add_port(tmp_path, "mlx5_1")
    fake.add_port(tmp_path, "mlx5_10", state="DOWN")
    fake.add_netdevs(tmp_path, ["net1"])
    p, _ = plan_for(tmp_path, LAUNCHER_RDMA_INTERFACES="net1", NCCL_IB_HCA="mlx5_1")
    assert p.env["NCCL_IB_HCA"] == "mlx5_1"
    assert any("also selects mlx5_10" in w for w in p.warnings)


def test_explicit_gid_index_that_is_wrong_stops_the_pod(tmp_path: pathlib.Path) -> None:
    p, report = plan_for(fake.barcelona(tmp_path, gid_index=5), NCCL_IB_GID_INDEX="3", LAUNCHER_EXPLICIT_NCCL="NCCL_IB_GID_INDEX")
    assert p.env["NCCL_IB_GID_INDEX"] == "3"
    assert "detection would choose NCCL_IB_GID_INDEX='5'" in report
    assert any("explicit NCCL_IB_GID_INDEX=3 is not a RoCE v2 IPv4 GID on mlx5_6:1" in e for e in p.errors)


def test_explicit_host_device_stops_an_rdma_pod(tmp_path: pathlib.Path) -> None:
    p, _ = plan_for(fake.shared_netns(tmp_path), NCCL_IB_HCA="=mlx5_0,mlx5_6", LAUNCHER_EXPLICIT_NCCL="NCCL_IB_HCA")
    (error,) = p.errors
    assert "explicit NCCL_IB_HCA==mlx5_0,mlx5_6 selects mlx5_0:1: host devices not attached to this pod" in error
    assert "fix it in the workload's env, or leave it out and let the launcher choose" in error
    assert p.summary["overridden"] == []


def test_explicit_rdma_only_settings_in_tcp_mode_are_kept_with_a_warning(tmp_path: pathlib.Path) -> None:
    explicit = "NCCL_IB_HCA,NCCL_NET_GDR_LEVEL,NCCL_IB_TIMEOUT"
    p, _ = plan_for(
        fake.empty(tmp_path),
        LAUNCHER_MODE="tcp",
        LAUNCHER_RDMA_INTERFACES="",
        NCCL_IB_HCA="=mlx5_6",
        NCCL_NET_GDR_LEVEL="SYS",
        NCCL_IB_TIMEOUT="22",
        LAUNCHER_EXPLICIT_NCCL=explicit,
    )
    assert p.errors == []
    assert (p.env["NCCL_IB_HCA"], p.env["NCCL_NET_GDR_LEVEL"], p.env["NCCL_IB_TIMEOUT"]) == ("=mlx5_6", "SYS", "22")
    assert any("explicit NCCL_IB_TIMEOUT=22 is an RDMA-only setting, ignored in tcp mode" in w for w in p.warnings)


@pytest.mark.parametrize(
    "name, value, problem",
    [
        ("NCCL_IB_DISABLE", "0", "keeps NCCL's IB transport on in tcp mode"),
        ("NCCL_NET", "IB", "selects NCCL's IB transport in tcp mode"),
        ("NCCL_SOCKET_IFNAME", "net1,net2", "matches no interface in the pod"),
    ],
)
def test_explicit_values_that_break_tcp_stop_a_tcp_pod(tmp_path: pathlib.Path, name: str, value: str, problem: str) -> None:
    p, _ = plan_for(fake.empty(tmp_path), LAUNCHER_MODE="tcp", LAUNCHER_RDMA_INTERFACES="", LAUNCHER_EXPLICIT_NCCL=name, **{name: value})
    (error,) = p.errors
    assert f"explicit {name}={value} {problem}" in error


def test_fallback_overrides_the_explicit_rdma_switch_and_keeps_the_rest(tmp_path: pathlib.Path) -> None:
    # What the program renders for an rdma workload (NCCL_IB_DISABLE=0, NCCL_NET_GDR_LEVEL) meets a
    # node without ACTIVE ports, and the workload allowed the fallback.
    fake.add_port(tmp_path, "mlx5_6", state="DOWN")
    fake.add_netdevs(tmp_path, ["lo", "eth0", "net1"])
    p, _ = plan_for(
        tmp_path,
        LAUNCHER_RDMA_INTERFACES="net1",
        LAUNCHER_TCP_FALLBACK="true",
        NCCL_IB_DISABLE="0",
        NCCL_NET_GDR_LEVEL="PHB",
        LAUNCHER_EXPLICIT_NCCL="NCCL_IB_DISABLE,NCCL_NET_GDR_LEVEL",
    )
    assert p.errors == []
    assert p.env["NCCL_IB_DISABLE"] == "1"
    assert p.env["NCCL_NET_GDR_LEVEL"] == "PHB"
    (override,) = p.summary["overridden"]
    assert override["name"] == "NCCL_IB_DISABLE" and override["explicit"] is True
    assert "overridden although explicit: rdma mode fell back to tcp (LAUNCHER_TCP_FALLBACK=true)" in override["reason"]
    assert p.summary["transport"] == "tcp-fallback"


def test_explicit_names_not_set_are_reported(tmp_path: pathlib.Path) -> None:
    _, report = plan_for(fake.barcelona(tmp_path), LAUNCHER_EXPLICIT_NCCL="NCCL_IB_HCA, NCCL_DEBUG")
    assert "listed in LAUNCHER_EXPLICIT_NCCL but not set: NCCL_DEBUG, NCCL_IB_HCA" in report


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("name, value", [("NCCL_IB_HCA", "mlx5_6:one"), ("NCCL_IB_HCA", "=mlx5_6:-1"), ("NCCL_SOCKET_IFNAME", "net1:x")])
def test_a_port_that_is_not_a_number_is_an_invalid_entry(tmp_path: pathlib.Path, name: str, value: str, explicit: bool) -> None:
    fake.add_port(tmp_path, "mlx5_6")
    fake.add_netdevs(tmp_path, ["lo", "eth0", "net1"])
    settings = {"LAUNCHER_RDMA_INTERFACES": "net1", "LAUNCHER_EXPLICIT_NCCL": name if explicit else "", name: value}
    p, _ = plan_for(tmp_path, **settings)
    problem = f"has entry {value.lstrip('=')!r}, whose port is not a port number"
    if explicit:
        (error,) = p.errors
        assert problem in error
    else:
        assert p.errors == []
        (override,) = p.summary["overridden"]
        assert override["name"] == name and problem in override["reason"]


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
    assert sorted(o["name"] for o in report_of(result.stderr)["overridden"]) == sorted(IMAGE_NCCL)


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
