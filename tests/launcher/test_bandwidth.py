"""The bandwidth check: log parsers, verdict, rendered Job, both command lines, and the torch loop.

The fixtures (tests/bandwidth_logs/) are logs in the real formats: nccl-tests' all_reduce_perf table (current columns with
`root` and `#wrong`, and the older ones with a float `error`), NCCL's INFO lines for RoCE,
InfiniBand, an IB plugin and the socket fallback (as NVIDIA/nccl issue logs show them), and the
table allreduce.py's torch loop prints. The last test runs that loop for real, two gloo processes on
loopback, where torch is installed (not in the project's environment: torch lives in the images).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import stacks
from cli.main import main as stacks_main
from components.launcher import allreduce, shipped_files
from components.launcher import bandwidth as bw
from components.outputs import stack_outputs
from components.program import objects
from components.training import LAUNCHER_DIR
from tests import fixtures
from tests.helpers import ROOT, container, env_of, find, free_port, rendered_fixture

BENCH = ROOT / "components" / "launcher" / "bandwidth.py"
LOGS = Path(__file__).with_name("bandwidth_logs")
GIB = 1024**3


def _log(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


# all_reduce_perf -g 4 on one Barcelona node with P2P and SHM disabled (every hop through a RoCE NIC),
# as `oc logs` shows it: nccl-tests' header, NCCL's INFO lines, the table, the trailer.
NCCL_TESTS_ROCE = _log("nccl_tests_roce.log")

# The pod log of rank 0 of a two-node check on Cairo (InfiniBand): the check's first line, NCCL's
# INFO lines of the local ranks (P2P inside the node, NET/IB between nodes), bandwidth.py's table.
TORCH_IB_TWO_NODES = _log("torch_ib_two_nodes.log")

# The same check where the pods lost their SR-IOV devices: NCCL finds no RDMA device and quietly
# runs over TCP sockets, at a hundredth of the speed.
TORCH_SOCKET_FALLBACK = _log("torch_socket_fallback.log")

# An IB plugin (nccl-rdma-sharp-plugins' IBext) with NCCL 2.20+'s merged-port listing.
IB_PLUGIN_LINES = _log("ib_plugin.log")

# nccl-tests before 2.11 (no root column, a float `error`), through mpirun --tag-output.
OLD_NCCL_TESTS_MPIRUN = _log("old_nccl_tests_mpirun.log")

# Made up in nccl-tests' format (the numbers consistent: algbw = size / time, busbw = algbw x 2(n-1)/n):
# all_reduce_perf -g 8 on one node of 8 H100s up to -e 8G, every hop over NVLink (P2P): 347 GB/s, the figure
# that says nothing about the NICs; and all_reduce_perf under mpirun over two hosts, two ranks each, over IB.
NVLINK_ONE_NODE = _log("made_up_nvlink_one_node.log")
MPIRUN_TWO_HOSTS = _log("made_up_mpirun_two_hosts.log")

BARCELONA_LINE = 4 * 400.0  # Gb/s per node: 4 ports of 400 Gb/s, 200 GB/s


# --- parsers ---------------------------------------------------------------------------------------


def test_nccl_tests_table_rows_and_average():
    res = bw.parse_results(NCCL_TESTS_ROCE)
    assert len(res.runs) == 1
    assert [r.size for r in res.rows] == [2**20 * 2**k for k in range(11)]
    top = res.rows[-1]
    assert (top.size, top.count) == (GIB, GIB // 4)
    oop, inplace = top.measures
    assert (oop.time_us, oop.algbw, oop.busbw, oop.wrong) == (34562.5, 31.07, 46.60, 0)
    assert inplace.busbw == 46.90 and top.best_busbw() == 46.90
    assert res.avg_busbw == [37.4773]


def test_old_nccl_tests_columns_behind_mpirun_tags():
    res = bw.parse_results(OLD_NCCL_TESTS_MPIRUN)
    assert [r.size for r in res.rows] == [2**26, 2**27, 2**28, 2**29]
    assert res.rows[-1].best_busbw() == 178.60
    # the old float `error` is a rounding figure, not a count of wrong values: never judged
    assert all(m.wrong is None for r in res.rows for m in r.measures)
    assert res.avg_busbw == [155.075]


def test_log_collector_prefixes_are_stripped():
    lines = NCCL_TESTS_ROCE.splitlines()
    prefixed = "\n".join(f"[pod/rdma-bandwidth-0/training] 2026-01-05T10:00:00.123456789Z {line}" for line in lines)
    assert [r.best_busbw() for r in bw.parse_results(prefixed).rows] == [r.best_busbw() for r in bw.parse_results(NCCL_TESTS_ROCE).rows]


def test_torch_table_out_of_place_is_na():
    res = bw.parse_results(TORCH_IB_TWO_NODES)
    assert len(res.rows) == 11
    assert all(r.measures[0] == bw.Measure(None, None, None, None) for r in res.rows)
    assert res.rows[-1].best_busbw() == 188.40


def test_rows_outside_a_table_are_not_results():
    text = "  1073741824     268435456     float     sum      -1  1.0  2.0  3.0  0  1.0  2.0  3.0  0\n"
    assert bw.parse_results(text).rows == []


def test_roce_lines():
    net = bw.parse_nccl(NCCL_TESTS_ROCE)
    assert net.networks == {"IB": 2}
    assert net.ib_ports == ["mlx5_6:1/RoCE", "mlx5_7:1/RoCE", "mlx5_8:1/RoCE", "mlx5_9:1/RoCE"]
    assert net.channels == {"IB": 5} and net.gdr_channels == 5
    assert set(net.families()) == {"ib"}  # the Bootstrap line's socket is not NCCL's transport


def test_infiniband_lines():
    net = bw.parse_nccl(TORCH_IB_TWO_NODES)
    assert net.ib_ports == ["mlx5_2:1/IB", "mlx5_3:1/IB", "mlx5_4:1/IB", "mlx5_5:1/IB"]
    assert net.channels == {"IB": 3}  # the P2P/CUMEM hop inside the node is not a network channel
    assert set(net.families()) == {"ib"}


def test_ib_plugin_counts_as_ib():
    net = bw.parse_nccl(IB_PLUGIN_LINES)
    assert net.networks == {"IBext_v8": 1} and net.channels == {"IBext_v8": 1}
    assert net.ib_ports == ["mlx5_2:1/RoCE", "mlx5_3:1/RoCE", "mlx5_0:1/RoCE", "mlx5_1:1/RoCE"]
    assert set(net.families()) == {"ib"}


def test_socket_fallback_lines():
    net = bw.parse_nccl(TORCH_SOCKET_FALLBACK)
    assert net.ib_not_found == 1
    assert net.socket_ifaces == ["eth0:10.131.0.22<0>"]
    assert net.networks == {"Socket": 1} and net.channels == {"Socket": 3}
    assert set(net.families()) == {"socket"}


# --- verdict ---------------------------------------------------------------------------------------


def test_rdma_passes_at_the_fraction_of_the_line_rate():
    v = bw.judge(TORCH_IB_TWO_NODES, "rdma", BARCELONA_LINE, 0.8)  # needs 160 GB/s, has 188.4
    assert v.ok, v.render()
    text = v.render()
    assert "bandwidth check: PASS" in text and "160.00 GB/s" in text and "188.40" in text


def test_rdma_fails_below_the_fraction():
    v = bw.judge(TORCH_IB_TWO_NODES, "rdma", BARCELONA_LINE, 0.95)  # needs 190 GB/s
    assert not v.ok
    assert "188.40 GB/s at 1073741824 B is below 190.00 GB/s" in v.failures[0]


def test_only_the_largest_message_decides():
    # 46.9 GB/s at 1 GiB; smaller sizes are lower. One GPU's share of Barcelona's ports is 400 Gb/s.
    # The log is a one-node NIC test (P2P disabled, every hop over RoCE): nodes=1 is the check it belongs to.
    assert bw.judge(NCCL_TESTS_ROCE, "rdma", 400.0, 0.9, nodes=1).ok  # 45.0 needed
    assert not bw.judge(NCCL_TESTS_ROCE, "rdma", 400.0, 0.95, nodes=1).ok  # 47.5 needed
    # The largest size of a table decides, even where a smaller one was faster.
    faster_midway = NCCL_TESTS_ROCE.replace("17281.3   31.07   46.60", "17281.3   31.07   49.60")  # 512 MiB
    v = bw.judge(faster_midway, "rdma", 400.0, 0.9, nodes=1)
    assert v.ok and "measured: 46.90 GB/s at the largest message, 1073741824 B" in v.render()


# --- a benchmark that did not finish (made-up logs in nccl-tests' format) ----------------------------


def _without_rows_from(text: str, size: int) -> str:
    """The log as if the benchmark died at `size`: no row from there on, no trailer."""
    lines = text.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if bw.strip_prefix(line).split()[:1] == [str(size)])
    return "".join(lines[:cut])


def test_a_table_that_stops_below_max_bytes_fails():
    # The header asks for up to maxBytes 8589934592; the log ends after 2 GiB (the 4 GiB size never ran).
    cut = _without_rows_from(NVLINK_ONE_NODE, 4294967296) + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 333.0 \n"
    v = bw.judge(cut, "rdma", 1600.0, nodes=1)
    assert not v.ok
    assert any(
        "did not finish: its largest message is 2147483648 B, but the header asks for sizes up to maxBytes 8589934592 B" in f
        for f in v.failures
    ), v.failures
    # the old verdict read 342 GB/s at 2 GiB as the result; now the missing sizes fail it whatever the bandwidth
    assert bw.parse_results(cut).runs[0].expected_largest() == 8589934592


def test_a_table_without_the_summary_trailer_fails():
    complete = MPIRUN_TWO_HOSTS
    assert bw.judge(complete, "rdma", 800.0, 0.8).ok  # 88.05 GB/s needed 80: two hosts over IB, finished
    no_trailer = "".join(line for line in complete.splitlines(keepends=True) if "Avg bus bandwidth" not in line)
    v = bw.judge(no_trailer, "rdma", 800.0, 0.8)
    assert not v.ok and len(v.failures) == 1 and "no summary trailer (`# Avg bus bandwidth" in v.failures[0], v.failures
    cut = _without_rows_from(complete, 1073741824)  # died in the last size: both
    assert [f.split(":")[0] for f in bw.judge(cut, "rdma", 800.0, 0.8).failures] == ["the benchmark did not finish"] * 2


def test_max_bytes_the_steps_do_not_reach_and_reduced_max_bytes():
    # -e 1500000000 with -f 2 from 128 MiB: the last size nccl-tests runs is 1 GiB (2 GiB is past it); no false failure.
    short = MPIRUN_TWO_HOSTS.replace("maxBytes 1073741824", "maxBytes 1500000000")
    assert bw.parse_results(short).runs[0].expected_largest() == 1073741824
    assert bw.judge(short, "rdma", 800.0).ok
    beyond = MPIRUN_TWO_HOSTS.replace("maxBytes 1073741824", "maxBytes 2147483648")
    assert not bw.judge(beyond, "rdma", 800.0).ok
    # nccl-tests lowers maxBytes to fit GPU memory, and says so: the lowered value counts.
    reduced = beyond.replace("# Using devices", "#\n# Reducing maxBytes to 1073741824 due to memory limitation\n# Using devices", 1)
    assert bw.judge(reduced, "rdma", 800.0).ok
    # -i (a step in bytes): 128 MiB + k x 300 MiB up to 1 GiB ends at 728 MiB; a table that reaches it has finished.
    bytes_step = MPIRUN_TWO_HOSTS.replace("step: 2(factor)", f"step: {300 * 2**20}(bytes)")
    assert bw.parse_results(bytes_step).runs[0].expected_largest() == 134217728 + 2 * 300 * 2**20
    assert bw.judge(bytes_step, "rdma", 800.0).ok


# --- one node does not test the fabric ----------------------------------------------------------------


def test_a_one_node_nvlink_result_is_intra_node_and_fails_a_fabric_check():
    # 347 GB/s clears 0.8 x 1600 Gb/s (160 GB/s) twice over, and measures NVLink, not a NIC.
    for nodes in (None, 2):
        v = bw.judge(NVLINK_ONE_NODE, "rdma", 1600.0, 0.8, nodes=nodes)
        assert not v.ok, v.render()
        [f] = [f for f in v.failures if f.startswith("intra-node: does not test the fabric")]
        assert "nccl-tests' device list puts all 8 rank(s) on gpu-node-3" in f and "NCCL's communicator spans 1 node" in f
        assert ("--nodes 1" in f) is (nodes is None)
    # a check configured for one node (a NIC test) is failed too: NCCL went over P2P, not through the NICs
    v = bw.judge(NVLINK_ONE_NODE, "rdma", 1600.0, 0.8, nodes=1)
    assert not v.ok and "3 channel(s) via P2P" in v.failures[0] and "NCCL_P2P_DISABLE=1" in v.failures[0]


def test_a_one_node_nic_test_passes_a_one_node_check_marked_intra_node():
    v = bw.judge(NCCL_TESTS_ROCE, "rdma", 400.0, nodes=1)  # P2P and SHM disabled: every hop over RoCE
    assert v.ok, v.render()
    mark = "intra-node: does not test the fabric between nodes (nccl-tests' device list puts all 4 rank(s) on rdma-bandwidth-0)"
    assert mark in v.render()
    v = bw.judge(NCCL_TESTS_ROCE, "rdma", 400.0)  # nodes unknown: a check that gates the fabric
    assert not v.ok and v.failures[0].startswith("intra-node: does not test the fabric")


def test_single_node_from_the_torch_report_and_from_the_world_size():
    two = bw.judge(TORCH_IB_TWO_NODES, "rdma", BARCELONA_LINE, nodes=2, gpus_per_node=4)
    assert two.ok and "placement: several nodes (NCCL's communicator spans 2 nodes)" in two.render()
    title = "backend nccl world size 8 minBytes"
    one_title = TORCH_IB_TWO_NODES.replace(title, "backend nccl world size 4 nodes 1 ranks per node 4 minBytes")
    one_title = "".join(line for line in one_title.splitlines(keepends=True) if "nNodes" not in line)
    v = bw.judge(one_title, "rdma", BARCELONA_LINE, nodes=2)
    assert not v.ok and "the torch loop reports 1 node (world size 4)" in v.failures[0]
    # an older table (world size only): the world size of one node's GPUs is one node
    world = TORCH_IB_TWO_NODES.replace(title, "backend nccl world size 4 minBytes")
    world = "".join(line for line in world.splitlines(keepends=True) if "nNodes" not in line)
    assert bw.judge(world, "rdma", BARCELONA_LINE, nodes=2).ok  # GPUs per node unknown: not judged
    v = bw.judge(world, "rdma", BARCELONA_LINE, nodes=2, gpus_per_node=4)
    assert not v.ok and "world size 4, and a node has 4 GPUs" in v.failures[0]
    assert bw.placement(bw.parse_results(MPIRUN_TWO_HOSTS), bw.parse_nccl(MPIRUN_TWO_HOSTS), 2) == (
        False, "nccl-tests' device list names 2 hosts; NCCL's communicator spans 2 nodes"
    )  # fmt: skip


def test_socket_transport_fails_rdma_mode_whatever_the_bandwidth():
    v = bw.judge(TORCH_SOCKET_FALLBACK, "rdma", None)
    assert not v.ok
    assert any("socket transport in rdma mode" in f and "No device found" in f for f in v.failures)


def test_tcp_mode_accepts_sockets_and_reports_without_a_line_rate():
    v = bw.judge(TORCH_SOCKET_FALLBACK, "tcp", None)
    assert v.ok, v.render()
    assert "threshold: none" in v.render()


def test_tcp_mode_fails_when_nccl_used_ib():
    v = bw.judge(TORCH_IB_TWO_NODES, "tcp", None)
    assert not v.ok and "NCCL_IB_DISABLE=1" in v.failures[0]


def test_rdma_mode_without_nccl_lines_fails():
    table_only = "\n".join(line for line in TORCH_IB_TWO_NODES.splitlines() if "NCCL INFO" not in line)
    v = bw.judge(table_only, "rdma", BARCELONA_LINE)
    assert not v.ok and "NCCL_DEBUG=INFO" in v.failures[0]


def test_wrong_values_fail():
    corrupt = NCCL_TESTS_ROCE.replace("31.27   46.90      0", "31.27   46.90      3")
    v = bw.judge(corrupt, "rdma", 400.0)
    assert not v.ok and "3 wrong value(s)" in v.failures[0]


def test_no_results_fail():
    v = bw.judge("rdma-bandwidth-0:57:71 [0] NCCL INFO Using network IB\n", "rdma", BARCELONA_LINE)
    assert not v.ok and "no all-reduce results" in v.failures[0]


def test_a_failed_benchmark_fails_the_check():
    v = bw.judge(TORCH_IB_TWO_NODES, "rdma", BARCELONA_LINE, exit_code=1)
    assert not v.ok and "exited with status 1" in v.failures[0]


def test_torch_table_lines_read_back():
    # allreduce.py's table, as bandwidth.py reads it.
    lines = [allreduce.table_row(s, s // 4, [None, (12.5, 3.0, 5.25, 0)]) for s in (4096, 8192)]
    text = "\n".join(allreduce.table_header("title") + lines + allreduce.table_trailer([5.25, 5.25], 0))
    rows = [bw.Row(s, s // 4, [bw.Measure(None, None, None, None), bw.Measure(12.5, 3.0, 5.25, 0)]) for s in (4096, 8192)]
    assert bw.parse_results(text).rows == rows
    assert bw.parse_results(text).avg_busbw == [5.25]


def test_message_sizes():
    assert allreduce.message_sizes(1 << 20, 1 << 23) == [1 << 20, 1 << 21, 1 << 22, 1 << 23]
    assert allreduce.message_sizes(6, 30) == [4, 12, 24]  # whole float32 elements, doubling from 6


# --- config (on the fixture the tests own) -----------------------------------------------------------


def _check(**fields) -> fixtures.Edit:
    return lambda d: d["bandwidth_checks"][0].update(fields)


def _rate(**fields) -> float | None:
    c = fixtures.config("roce", _check(**fields))
    return c.bandwidth_line_rate_gbps(c.bandwidth_checks[0])


def test_line_rates_from_the_fabric():
    assert _rate() == 800.0  # two SR-IOV ports x 400 Gb/s across nodes
    ib_check = {
        **fixtures.roce()["bandwidth_checks"][0],
        "namespace": "lab",
        "service_account": "runner",
        "image": "nvcr.io/nvidia/pytorch:25.08-py3",
        "privileged_reason": "no device plugin",
    }
    ib = fixtures.config("ib", lambda d: d.update(bandwidth_checks=[ib_check]))
    assert ib.bandwidth_line_rate_gbps(ib.bandwidth_checks[0]) == 800.0  # no attachments: its two devices are the ports
    assert _rate(gpus_per_node=1) == 400.0  # one GPU drives one port
    assert _rate(nodes=1) == 200.0  # one node: each GPU's share of the ports
    assert _rate(transport="tcp") is None  # no Ethernet line rate known: report only
    assert _rate(transport="tcp", line_rate_gbps=100) == 100.0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tool": "nccl-tests", "nodes": 2}, "bandwidth_checks[fabric].tool: tool 'nccl-tests' runs"),
        ({"min_bytes": 8, "max_bytes": 4}, "bandwidth_checks[fabric].min_bytes: min_bytes (8) is larger than max_bytes (4)"),
        ({"service_account": "nobody"}, "bandwidth_checks[fabric].service_account: "),
        ({"name": "dev"}, "bandwidth_checks[dev].name: duplicate workload name 'dev'"),
        ({"min_fraction": 1.5}, "bandwidth_checks[fabric].min_fraction"),
        ({"env": {"LAUNCHER_MODE": "tcp"}}, "LAUNCHER_MODE is set by the program for the launcher"),
    ],
)
def test_bad_checks_are_config_errors_naming_the_field(fields, message):
    with pytest.raises(stacks.ConfigError) as err:
        fixtures.config("roce", _check(**fields))
    assert message in str(err.value) and str(err.value).startswith("fixture roce: invalid configuration")


def test_a_check_of_rdma_needs_a_fabric():
    def edit(d):
        d["bandwidth_checks"] = [
            {**fixtures.roce()["bandwidth_checks"][0], "namespace": "proj", "service_account": "sa", "image": "quay.io/x/y:1"}
        ]

    with pytest.raises(stacks.ConfigError, match=r"bandwidth_checks\[fabric\]\.transport: .*has no fabric"):
        fixtures.config("tcp", edit)


# --- the rendered Job ------------------------------------------------------------------------------


def _check_job(r):
    (job,) = [o for o in r.objects() if o["kind"] == "Job" and o["metadata"]["name"].startswith("fabric-")]
    return job


def test_check_pods_have_the_training_network_setup():
    r = rendered_fixture("roce")
    job = _check_job(r)
    train = find(r, "StatefulSet", "dev", "team-a")
    pod, train_pod = job["spec"]["template"], train["spec"]["template"]
    assert pod["metadata"]["annotations"] == train_pod["metadata"]["annotations"]  # networks + required SCC
    c, t = container(job), container(train)
    sriov = {k: v for k, v in t["resources"]["limits"].items() if k.startswith("openshift.io/")}
    assert len(sriov) == 2 and all(c["resources"][side][k] == 1 for k in sriov for side in ("requests", "limits"))
    assert c["securityContext"] == t["securityContext"] and c["command"] == t["command"]
    env, train_env = env_of(job), env_of(train)
    for key in ("LAUNCHER_MODE", "LAUNCHER_MEMLOCK_STRATEGY", "LAUNCHER_RDMA_INTERFACES", "NCCL_IB_DISABLE", "NCCL_NET_GDR_LEVEL"):
        assert env[key] == train_env[key], key


def test_check_job_runs_the_bench_with_a_deadline():
    r = rendered_fixture("roce")
    job = _check_job(r)
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == ("Indexed", 2, 2, 0)
    assert spec["activeDeadlineSeconds"] == 1800 and "ttlSecondsAfterFinished" not in spec
    assert "pulumi.com/replaceUnready" not in job["metadata"].get("annotations", {})  # a failed check fails fast; no replace loop
    env = env_of(job)
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"], env["LAUNCHER_RUN"]) == ("INFO", "INIT,NET", "command")
    assert "NCCL_P2P_DISABLE" not in env  # across nodes NVLink stays on, as in training
    args = json.loads(env["LAUNCHER_ARGS"])
    assert args[:3] == ["python3", f"{LAUNCHER_DIR}/bandwidth.py", "check"]
    assert args[args.index("--line-rate-gbps") + 1] == "800" and args[args.index("--mode") + 1] == "rdma"
    cm = find(r, "ConfigMap", "gpu-training-launcher", "team-a")
    assert cm["data"]["bandwidth.py"] == BENCH.read_text(encoding="utf-8") == shipped_files()["bandwidth.py"]
    rec = next(x for x in r.resources if x.type == "kubernetes:batch/v1:Job" and x.name == f"team-a/{job['metadata']['name']}")
    assert rec.options["delete_before_replace"]
    deps = " ".join(rec.options["depends_on"])
    for needed in ("Service::team-a/fabric-headless", "ConfigMap::team-a/gpu-training-launcher", "RoleBinding"):
        assert needed in deps, needed


def test_check_outputs_give_threshold_and_job():
    out = rendered_fixture("roce").outputs["bandwidth_checks"]["fabric"]
    assert out["job"].startswith("fabric-") and out["namespace"] == "team-a"
    assert out["min_busbw_gbytes_per_s"] == 80 and out["line_rate_gbps"] == 800
    assert f"job/{out['job']}" in out["report"] and "--check fabric" in out["report"]
    assert stack_outputs(fixtures.config("tcp"))["bandwidth_checks"] == {}


def test_single_node_check_forces_nccl_onto_the_network():
    config = fixtures.config("roce", _check(nodes=1, tool="nccl-tests"))
    job = next(o for o in objects(config) if o["kind"] == "Job" and o["metadata"]["name"].startswith("fabric-"))
    env = env_of(job)
    assert (env["NCCL_P2P_DISABLE"], env["NCCL_SHM_DISABLE"]) == ("1", "1")
    assert '"--line-rate-gbps", "200"' in env["LAUNCHER_ARGS"]


# --- command lines ---------------------------------------------------------------------------------


@pytest.fixture
def logs(tmp_path: Path) -> dict[str, str]:
    import yaml

    out = {"config": str(tmp_path / "roce.yaml"), "tcp": str(tmp_path / "tcp.yaml")}
    Path(out["config"]).write_text(yaml.safe_dump(fixtures.roce()), encoding="utf-8")
    Path(out["tcp"]).write_text(yaml.safe_dump(fixtures.tcp()), encoding="utf-8")
    for name, text in {"ib": TORCH_IB_TWO_NODES, "socket": TORCH_SOCKET_FALLBACK, "roce1": NCCL_TESTS_ROCE}.items():
        (tmp_path / f"{name}.log").write_text(text, encoding="utf-8")
        out[name] = str(tmp_path / f"{name}.log")
    return out


def test_report_takes_the_checks_values_from_the_stack(logs, capsys):
    assert stacks_main(["bandwidth-report", logs["ib"], "--config", logs["config"], "--line-rate-gbps", "1600"]) == 0
    assert "threshold: 160.00 GB/s" in capsys.readouterr().out
    assert (
        stacks_main(["bandwidth-report", logs["ib"], "--config", logs["config"], "--line-rate-gbps", "1600", "--min-fraction", "0.95"]) == 1
    )
    assert stacks_main(["bandwidth-report", logs["socket"], "--config", logs["config"], "--check", "fabric"]) == 1
    assert "socket transport in rdma mode" in capsys.readouterr().out


def test_report_without_a_stack(logs, capsys):
    assert stacks_main(["bandwidth-report", logs["socket"], "--mode", "tcp"]) == 0  # no line rate: reported only
    assert stacks_main(["bandwidth-report", logs["socket"], "--mode", "tcp", "--line-rate-gbps", "100"]) == 1  # 2.3 < 10 GB/s
    assert stacks_main(["bandwidth-report", logs["roce1"], "--mode", "rdma", "--line-rate-gbps", "400", "--nodes", "1"]) == 0
    capsys.readouterr()
    # without --nodes a report gates the fabric: a one-node log fails, marked intra-node
    assert stacks_main(["bandwidth-report", logs["roce1"], "--mode", "rdma", "--line-rate-gbps", "400"]) == 1
    assert "FAIL: intra-node: does not test the fabric" in capsys.readouterr().out


def test_report_takes_nodes_and_gpus_from_the_check(logs, capsys, tmp_path):
    # the fixture's check runs on 2 nodes: the one-node log fails it
    assert stacks_main(["bandwidth-report", logs["roce1"], "--config", logs["config"], "--line-rate-gbps", "400"]) == 1
    assert "FAIL: intra-node: does not test the fabric" in capsys.readouterr().out
    import yaml

    one = fixtures.roce()
    one["bandwidth_checks"][0].update(nodes=1)
    path = tmp_path / "one-node.yaml"
    path.write_text(yaml.safe_dump(one), encoding="utf-8")
    assert stacks_main(["bandwidth-report", logs["roce1"], "--config", str(path), "--line-rate-gbps", "400"]) == 0
    assert "intra-node: does not test the fabric between nodes" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.log", "--mode", "rdma"], "missing.log: cannot read the log"),
        (["{ib}", "--config", "{config}", "--check", "nope"], "has no bandwidth check 'nope' (bandwidth_checks: fabric)"),
        (["{ib}", "--config", "{tcp}"], "stack 'tcp' has no bandwidth checks"),
        (["{ib}"], "give --mode rdma|tcp"),
        (["{ib}", "--check", "rdma-bandwidth"], "give --stack STACK or --config FILE too"),
        (["{ib}", "--mode", "rdma", "--min-fraction", "2"], "--min-fraction must be in (0, 1]"),
        (["{ib}", "--mode", "rdma", "--nodes", "0"], "--nodes must be a positive number of nodes"),
        (["/dev/zero", "--mode", "rdma"], "/dev/zero: cannot read the log: a character device, not a log file"),
        (["{dir}", "--mode", "rdma"], "cannot read the log: a directory, not a log file"),
    ],
)
def test_report_input_errors_exit_2(logs, capsys, argv, message):
    argv = [a.format(ib=logs["ib"], config=logs["config"], tcp=logs["tcp"], dir=str(Path(logs["ib"]).parent)) for a in argv]
    assert stacks_main(["bandwidth-report", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_report_reads_stdin_through_the_real_entry_point(logs):
    log = Path(logs["socket"]).read_text(encoding="utf-8")
    cmd = [sys.executable, "-m", "stacks", "bandwidth-report", "-", "--config", logs["config"]]
    done = subprocess.run(cmd, input=log, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 1 and "bandwidth check: FAIL (mode rdma)" in done.stdout


# --- bounded reads ---------------------------------------------------------------------------------


def test_a_fifo_is_refused_at_once_never_waited_on(tmp_path):
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)  # nobody writes: opening it for reading would wait forever
    cmd = [sys.executable, "-m", "stacks", "bandwidth-report", str(fifo), "--mode", "rdma"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 2 and "cannot read the log: a FIFO (named pipe), not a log file" in done.stderr
    assert "oc logs job/NAME > run.log" in done.stderr and "Traceback" not in done.stderr


def test_a_huge_file_is_refused_without_reading_it(tmp_path):
    huge = tmp_path / "huge.log"
    with open(huge, "wb") as f:
        f.truncate(bw.MAX_LOG_BYTES + 1)  # sparse: nothing on disk, nothing read
    with pytest.raises(bw.LogError, match=rf"^{bw.MAX_LOG_BYTES + 1} bytes, more than the {bw.MAX_LOG_BYTES} a benchmark log holds"):
        bw.read_log(str(huge))
    assert bw.read_log(str(LOGS / "ib_plugin.log")) == IB_PLUGIN_LINES  # a regular file under the limit is read


def test_stdin_is_read_up_to_the_limit(monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(NCCL_TESTS_ROCE.encode())))
    assert bw.read_log("-") == NCCL_TESTS_ROCE
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * 101)))
    with pytest.raises(bw.LogError, match="more than 100 bytes on stdin"):
        bw.read_log("-", limit=100)


def test_an_endless_stdin_ends_in_a_refusal(tmp_path):
    # `yes | bandwidth-report -`: read up to the limit, then refused; no hang, no unbounded memory
    cmd = f"yes | {sys.executable} -m stacks bandwidth-report - --mode rdma"
    done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and f"more than {bw.MAX_LOG_BYTES} bytes on stdin" in done.stderr


def _bench(args: list[str], env: dict[str, str] | None = None, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    """bandwidth.py as the pod runs it: `-I -S` leaves the standard library only, no project imports."""
    return subprocess.run([sys.executable, "-I", "-S", str(BENCH), *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture
def fake_all_reduce_perf(tmp_path: Path) -> dict[str, str]:
    """An all_reduce_perf on PATH that prints its arguments and a real all_reduce_perf log: the
    check's orchestration (tool choice, flags, echo, verdict, exit code) without GPUs."""
    (tmp_path / "run.log").write_text(NCCL_TESTS_ROCE, encoding="utf-8")
    script = tmp_path / "bin" / "all_reduce_perf"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\necho "# args: $*"\ncat "{tmp_path / "run.log"}"\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {
        "PATH": f"{script.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "NNODES": "1",
        "NPROC_PER_NODE": "4",
        "NODE_RANK": "0",
    }


def test_check_runs_all_reduce_perf_on_one_node(fake_all_reduce_perf):
    args = ["check", "--mode", "rdma", "--min-bytes", "1048576", "--max-bytes", "1073741824", "--iters", "20", "--warmup", "5"]
    passed = _bench([*args, "--line-rate-gbps", "400"], env=fake_all_reduce_perf)
    assert passed.returncode == 0, passed.stdout
    assert "tool nccl-tests (one node and " in passed.stdout
    assert "# args: -b 1048576 -e 1073741824 -f 2 -g 4 -n 20 -w 5 -c 1" in passed.stdout
    assert "NCCL INFO Using network IB" in passed.stdout  # the benchmark's log is in the pod log
    assert "bandwidth check: PASS (mode rdma)" in passed.stdout
    slow = _bench([*args, "--line-rate-gbps", "800"], env=fake_all_reduce_perf)
    assert slow.returncode == 1 and "FAIL: bus bandwidth 46.90 GB/s" in slow.stdout


def test_check_refuses_nccl_tests_across_nodes(fake_all_reduce_perf):
    done = _bench(["check", "--mode", "rdma", "--tool", "nccl-tests"], env={**fake_all_reduce_perf, "NNODES": "2"})
    assert done.returncode == 1 and "spans nodes only under mpirun" in done.stdout
    assert "# args:" not in done.stdout


# --- the torch loop, for real ----------------------------------------------------------------------


@pytest.mark.torch
def test_torch_loop_on_gloo_prints_a_table_the_parser_reads():
    pytest.importorskip("torch", reason="torch is only in the training images (and a throwaway venv); the project's env has none")
    env = {
        **os.environ,
        "NNODES": "1",
        "NPROC_PER_NODE": "2",
        "NODE_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, str(BENCH), "check", "--tool", "torch", "--backend", "gloo", "--mode", "tcp"]
    cmd += ["--min-bytes", "4096", "--max-bytes", "65536", "--iters", "3", "--warmup", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bandwidth check: PASS (mode tcp)" in done.stdout
    res = bw.parse_results(done.stdout)
    assert len(res.runs) == 1  # local rank 0 prints, rank 1 does not
    assert [r.size for r in res.rows] == [4096, 8192, 16384, 32768, 65536]
    for r in res.rows:
        oop, inplace = r.measures
        assert oop.busbw is None and inplace.wrong == 0 and inplace.time_us > 0
        assert inplace.busbw == pytest.approx(inplace.algbw, abs=0.01)  # 2 ranks: busbw = algbw
        assert inplace.algbw == pytest.approx(r.size / inplace.time_us / 1e3, rel=0.01, abs=0.01)
    assert not bw.judge(done.stdout, "tcp", line_rate_gbps=1e9).ok  # same output, an impossible threshold
