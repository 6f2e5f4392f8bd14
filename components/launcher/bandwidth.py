#!/usr/bin/env python3
"""The bandwidth check inside the pod (docs/bandwidth.md): run an all-reduce benchmark across the nodes, echo it into the
pod log, and judge what it measured and which network NCCL used; `python -m stacks bandwidth-report` judges a saved log
with it. A log holds whatever its processes wrote: every line is cut at MAX_LINE, every number is ASCII and bounded,
every pattern runs in time linear in the line. Exit codes: 0 pass; 1 fail; 2 bad arguments."""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

EXIT_PASS, EXIT_FAIL = 0, 1
NCCL_TESTS_BINARY = "all_reduce_perf"
MAX_LINE = 64 * 1024  # characters of a log line that are read: a table row or an NCCL INFO line is a few hundred
MAX_LOG_BYTES = 64 * 1024 * 1024  # a check's pod log is well under a megabyte

# Collectors' prefixes: oc logs --prefix/--timestamps, mpirun --tag-output ([1,0]<stdout>:), torchrun --tee ([default0]:).
_LINE_PREFIX = re.compile(r"^(?:\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:?\d\d)\s+|\[[^\]]*\](?:<std(?:out|err)>)?:?[ \t]*)+")
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
# A cell is ASCII digits of a sane length (\d also matches other scripts' digits, which float() accepts) or N/A.
_COUNT = re.compile(r"[0-9]{1,20}")
_MEASURE = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,20})?(?:[eE][-+]?[0-9]{1,3})?")  # 34562.5, the old error column's 5e-07
# The sizes asked for (`minBytes 8 maxBytes 8589934592 step: 2(factor)`); nccl-tests lowers maxBytes to fit GPU memory.
_SIZES = re.compile(r"\bminBytes (\d+) maxBytes (\d+)(?: step: (\d+)\((factor|bytes)\))?", re.ASCII)
_REDUCED_MAX = re.compile(r"^#\s*Reducing maxBytes to (\d+)", re.ASCII)
# `validation: 1` (-c 1): every #wrong is a count, and the trailer `# Out of bounds values : 0 OK` sums them.
_VALIDATION = re.compile(r"\bvalidation: ([0-9]+)\b")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:(.*)$")
# nccl-tests' device list: `#  Rank  0 Group  0 Pid     57 on rdma-bandwidth-0 device  0 [0x18] NVIDIA H100 80GB HBM3`.
_RANK_ON = re.compile(r"^#\s*Rank\s+(\d{1,20})\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\b", re.ASCII)
# The torch loop's title: `... world size 8 nodes 2 ranks per node 4 minBytes ...` (older ones: world size only).
_TORCH_TITLE = re.compile(r"^#\s*torch\.distributed all_reduce\b")
_TORCH_WORLD = re.compile(r"\bworld size (\d{1,20})\b", re.ASCII)
_TORCH_NODES = re.compile(r"\bnodes (\d{1,20}) ranks per node (\d{1,20})\b", re.ASCII)


@dataclass
class Measure:  # one half of a row, out-of-place or in-place; None where the table says N/A
    time_us: Optional[float]
    algbw: Optional[float]
    busbw: Optional[float]
    wrong: Optional[int]  # #wrong; None for N/A and for old versions' float "error"


@dataclass
class Row:
    size: int
    count: int
    measures: List[Measure]

    def best_busbw(self) -> Optional[float]:
        return max((m.busbw for m in self.measures if m.busbw is not None), default=None)


@dataclass
class Run:  # one table of results, what its header asked for and whether the benchmark finished it
    rows: List[Row] = field(default_factory=list)
    min_bytes: Optional[int] = None
    max_bytes: Optional[int] = None
    step: Optional[int] = None
    step_kind: str = "factor"  # nccl-tests -f (sizes multiply) or -i (sizes add)
    finished: bool = False  # the trailer (`# Avg bus bandwidth : X`) followed the rows
    validated: bool = False
    after_trailer: int = 0  # rows after the trailer: no benchmark prints them

    def expected_largest(self) -> Optional[int]:
        """The largest message the header's sizes reach, in whole elements as the table prints sizes."""
        if self.max_bytes is None:
            return None
        last, low, step = self.max_bytes, self.min_bytes, self.step
        if low is not None and step is not None and 0 < low <= self.max_bytes:
            if self.step_kind == "bytes" and step > 0:
                last = low + (self.max_bytes - low) // step * step
            elif self.step_kind == "factor" and step > 1:
                last = low
                while last * step <= self.max_bytes:
                    last *= step
        top = max(self.rows, key=lambda r: r.size) if self.rows else None
        element = top.size // top.count if top is not None and top.count > 0 and top.size >= top.count else 1
        return last - last % element


@dataclass
class Results:
    rows: List[Row] = field(default_factory=list)
    avg_busbw: List[float] = field(default_factory=list)
    runs: List[Run] = field(default_factory=list)
    rank_hosts: Dict[int, str] = field(default_factory=dict)  # nccl-tests' device list: rank -> host
    torch_world: Optional[int] = None
    torch_nodes: Optional[int] = None
    malformed: List[str] = field(default_factory=list)  # rows whose numbers are not numbers
    unchecked: List[str] = field(default_factory=list)  # rows of a validated run whose #wrong is N/A
    out_of_bounds: List[str] = field(default_factory=list)  # trailers that say anything but `0 OK`


def log_lines(text: str) -> List[str]:
    return [line[:MAX_LINE] for line in text.splitlines()]


def strip_prefix(line: str) -> str:
    return _LINE_PREFIX.sub("", line.rstrip("\r\n"), count=1)


def shown(text: str, limit: int = 80) -> str:  # text from a log, cut to a line's worth
    return repr(text if len(text) <= limit else text[:limit] + "...")


class Malformed(ValueError):  # a table cell that is neither a number nor N/A
    pass


def _number(token: str) -> Optional[float]:
    """A cell's value; None for N/A. NaN, inf, 1e999 or other scripts' digits are no measurement: Malformed."""
    if token == "N/A":
        return None
    value = float(token) if _MEASURE.fullmatch(token) else math.inf
    if not math.isfinite(value):
        raise Malformed(token)
    return value


def _count(token: str) -> int:  # a size, a count or #wrong: anything but digits is no count
    if not _COUNT.fullmatch(token):
        raise Malformed(token)
    return int(token)


def _row(tokens: List[str], columns: List[str]) -> Row:
    size, count = _count(tokens[0]), _count(tokens[1])
    measures = []
    for at in range(columns.index("time"), len(columns), 4):
        if columns[at + 3] != "#wrong":
            _number(tokens[at + 3])  # the old float error: never judged, but a number
        wrong = _count(tokens[at + 3]) if columns[at + 3] == "#wrong" and tokens[at + 3] != "N/A" else None
        measures.append(Measure(_number(tokens[at]), _number(tokens[at + 1]), _number(tokens[at + 2]), wrong))
    return Row(size, count, measures)


def parse_results(text: str) -> Results:
    """Every nccl-tests-format table: its column header (`# size count ... time algbw busbw #wrong ...`) fixes the columns."""
    out = Results()
    columns: List[str] = []
    header = Run()  # what the lines before the next table say about it
    for raw in log_lines(text):
        line = strip_prefix(raw).strip()
        if line.startswith("#"):
            if avg := _AVG_BUSBW.match(line):
                if _MEASURE.fullmatch(avg.group(1)) and math.isfinite(float(avg.group(1))):
                    out.avg_busbw.append(float(avg.group(1)))
                if out.runs:
                    out.runs[-1].finished = True
            if (bounds := _OUT_OF_BOUNDS.match(line)) and bounds.group(1).split() != ["0", "OK"]:
                out.out_of_bounds.append(shown(line))
            _read_header(line, header, out)
            names = line[1:].split()
            if {"size", "count", "time", "busbw"} <= set(names) and (len(names) - names.index("time")) % 4 == 0:
                columns = names
                out.runs.append(header)
                header = Run()
            continue
        tokens = line.split()
        # A row: as many cells as the header, the first two digits of any script (str.isdigit), refused below if not ASCII.
        if not columns or len(tokens) != len(columns) or not (tokens[0].isdigit() and tokens[1].isdigit()):
            continue
        try:
            row = _row(tokens, columns)
        except Malformed as bad:
            out.malformed.append(f"{shown(str(bad))} in the row {shown(line)}")
            continue
        run = out.runs[-1]
        out.rows.append(row)
        run.rows.append(row)
        run.after_trailer += run.finished
        if run.validated and any(c == "#wrong" and t == "N/A" for c, t in zip(columns, tokens)):
            out.unchecked.append(shown(line))
    return out


def _read_header(line: str, header: Run, out: Results) -> None:  # the sizes asked for, the ranks' hosts, the torch world
    sizes = _SIZES.search(line)
    reduced = _REDUCED_MAX.match(line)
    if any(len(digits) > 20 for m in (sizes, reduced) if m for digits in m.groups() if digits):
        out.malformed.append(f"a size of thousands of digits in the line {shown(line)}")  # no run asks for 10^20 bytes
        return
    if sizes:
        header.min_bytes, header.max_bytes = int(sizes.group(1)), int(sizes.group(2))
        if sizes.group(3):
            header.step, header.step_kind = int(sizes.group(3)), sizes.group(4)
    if validation := _VALIDATION.search(line):
        header.validated = validation.group(1) != "0"
    if reduced:
        header.max_bytes = int(reduced.group(1))
    if rank := _RANK_ON.match(line):
        out.rank_hosts[int(rank.group(1))] = rank.group(2)
    if _TORCH_TITLE.match(line):
        world, nodes = _TORCH_WORLD.search(line), _TORCH_NODES.search(line)
        out.torch_world = int(world.group(1)) if world else out.torch_world
        out.torch_nodes = int(nodes.group(1)) if nodes else out.torch_nodes


_NCCL_INFO = re.compile(r"NCCL INFO (.*)$")
# Linear in the line: no lazy group before `\s*$`, no pattern findall retries at every position of a run of letters.
_USING_NETWORK = re.compile(r"^Using network (.+)$")  # IB | IBext_v8 | Socket
_NET_IB_USING = re.compile(r"^NET/IB ?: Using (.*)$")  # [0]mlx5_6:1/RoCE [1]... [RO]; OOB ...
_IB_PORT = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]+:\d+/(?:IB|RoCE))")
_NET_IB_NONE = re.compile(r"^NET/IB ?: No device found")
_NET_SOCKET_USING = re.compile(r"^NET/Socket ?: Using (.*)$")  # [0]eth0:10.0.0.1<0>
_SOCKET_IFACE = re.compile(r"\[\d+\]([^\s\[]+)")
_VIA_NET = re.compile(r"via NET/([A-Za-z][A-Za-z0-9_]*)(\S*)")  # NET/IB/0/GDRDMA, NET/Socket/0
_VIA_LOCAL = re.compile(r"via (P2P|SHM)/")  # inside a node: P2P/CUMEM/read, P2P/IPC, SHM/direct/direct
_COMM = re.compile(r"\bnRanks (\d{1,20}) nNodes (\d{1,20}) localRanks (\d{1,20})\b", re.ASCII)


def net_family(name: str) -> str:  # ib: NCCL's IB transport and IB plugins (InfiniBand and RoCE alike)
    return "ib" if name.lower().startswith("ib") else "socket" if name.lower() == "socket" else "other"


@dataclass
class NcclNet:  # what NCCL's INIT and NET lines say about the network it used
    networks: Counter[str] = field(default_factory=Counter)  # `Using network NAME`, counted
    channels: Counter[str] = field(default_factory=Counter)  # `via NET/NAME/...`, counted
    gdr_channels: int = 0
    ib_ports: List[str] = field(default_factory=list)  # mlx5_6:1/RoCE
    socket_ifaces: List[str] = field(default_factory=list)  # eth0:10.0.0.1<0>
    ib_not_found: int = 0
    local_channels: Counter[str] = field(default_factory=Counter)  # `via P2P/...`, `via SHM/...`, counted
    comms: List[Tuple[int, int, int]] = field(default_factory=list)  # (nRanks, nNodes, localRanks) of each communicator

    def families(self) -> Dict[str, List[str]]:  # each transport family with the evidence for it
        seen: Dict[str, List[str]] = {}
        for name, n in self.networks.items():
            seen.setdefault(net_family(name), []).append(f"'Using network {name}' x{n}")
        for name, n in self.channels.items():
            seen.setdefault(net_family(name), []).append(f"{n} channel(s) via NET/{name}")
        if self.socket_ifaces and not self.networks:  # old NCCL: no `Using network`; NET/Socket starts only when chosen
            seen.setdefault("socket", []).append("NET/Socket : Using " + " ".join(self.socket_ifaces))
        if self.ib_ports and not self.networks:
            seen.setdefault("ib", []).append("NET/IB : Using " + " ".join(self.ib_ports))
        return seen


def parse_nccl(text: str) -> NcclNet:
    net = NcclNet()
    for info in filter(None, (_NCCL_INFO.search(raw) for raw in log_lines(text))):
        msg = info.group(1).strip()
        if m := _USING_NETWORK.match(msg):
            net.networks[m.group(1)] += 1
        elif m := _NET_IB_USING.match(msg):
            net.ib_ports += [p for p in dict.fromkeys(_IB_PORT.findall(m.group(1))) if p not in net.ib_ports]
        elif _NET_IB_NONE.match(msg):
            net.ib_not_found += 1
        elif m := _NET_SOCKET_USING.match(msg):
            net.socket_ifaces += [i for i in dict.fromkeys(_SOCKET_IFACE.findall(m.group(1))) if i not in net.socket_ifaces]
        elif m := _VIA_NET.search(msg):
            net.channels[m.group(1)] += 1
            net.gdr_channels += "GDRDMA" in m.group(2)
        elif m := _VIA_LOCAL.search(msg):
            net.local_channels[m.group(1)] += 1
        elif m := _COMM.search(msg):
            net.comms.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return net


def placement(results: Results, net: NcclNet, gpus_per_node: Optional[int] = None) -> Tuple[Optional[bool], str]:
    """(True: every rank ran on one node, False: on several, None: the log does not say; the evidence)."""
    single: List[str] = []
    several: List[str] = []
    hosts = sorted(set(results.rank_hosts.values()))
    if len(hosts) == 1:
        single.append(f"nccl-tests' device list puts all {len(results.rank_hosts)} rank(s) on {hosts[0]}")
    elif hosts:
        several.append(f"nccl-tests' device list names {len(hosts)} hosts")
    if results.torch_nodes == 1:
        single.append(f"the torch loop reports 1 node (world size {results.torch_world})")
    elif results.torch_nodes:
        several.append(f"the torch loop reports {results.torch_nodes} nodes")
    nodes = sorted({c[1] for c in net.comms})
    if nodes == [1]:
        single.append(f"NCCL's communicator spans 1 node (nRanks {net.comms[0][0]})")
    elif nodes:
        several.append(f"NCCL's communicator spans {nodes[-1]} nodes")
    if single:
        return True, "; ".join(single)
    world = results.torch_world or len(results.rank_hosts) or None
    if not several and world and gpus_per_node and world <= gpus_per_node:
        return True, f"world size {world}, and a node has {gpus_per_node} GPUs"
    return (False, "; ".join(several)) if several else (None, "")


def threshold_gbytes(line_rate_gbps: float, min_fraction: float) -> float:  # in GB/s, nccl-tests' unit (1e9 bytes/s)
    return line_rate_gbps / 8.0 * min_fraction


@dataclass
class Verdict:
    ok: bool
    lines: List[str]
    failures: List[str]

    def render(self) -> str:
        return "\n".join(self.lines) + "\n"


def judge(
    text: str,
    mode: str,
    line_rate_gbps: Optional[float] = None,
    min_fraction: float = 0.8,
    exit_code: Optional[int] = None,
    nodes: Optional[int] = None,
    gpus_per_node: Optional[int] = None,
) -> Verdict:
    """Pass or fail a benchmark log. `exit_code`: the benchmark's, where it ran here. `nodes`: the check's (1: a test of
    one node's NICs; None or 2+: it gates the fabric); `gpus_per_node`: a world size of one node's GPUs is one node."""
    results, net = parse_results(text), parse_nccl(text)
    failures = [f"the benchmark exited with status {exit_code} (its output is above)"] if exit_code else []
    failures += result_failures(results)
    top = max((r.size for r in results.rows), default=None)
    largest = [r for r in results.rows if r.size == top]
    measured = min((v for r in largest if (v := r.best_busbw()) is not None), default=None)
    notes: List[str] = []
    if line_rate_gbps is None:
        notes.append("threshold: none (no line rate for this check), so the bandwidth is reported, not judged")
    else:
        need = threshold_gbytes(line_rate_gbps, min_fraction)
        notes.append(f"threshold: {need:.2f} GB/s = {min_fraction:g} x line rate {line_rate_gbps:g} Gb/s ({line_rate_gbps / 8.0:.2f} GB/s)")
        if measured is not None and measured < need:
            share = f"{measured / (line_rate_gbps / 8.0):.0%} of the line rate, {min_fraction:.0%} required"
            failures.append(f"bus bandwidth {measured:.2f} GB/s at {largest[0].size} B is below {need:.2f} GB/s ({share})")
        elif results.rows and measured is None:
            failures.append(f"no bus bandwidth at the largest message size ({largest[0].size} B)")
    single, where = placement(results, net, gpus_per_node)
    failures += placement_failures(single, where, net, nodes, notes)
    families = net.families()
    evidence = "; ".join(e for es in families.values() for e in es)
    failures += transport_failures(mode, families, evidence, net, notes)

    lines = [f"bandwidth check: {'FAIL' if failures else 'PASS'} (mode {mode})"]
    if results.rows:
        lines.append("  bus bandwidth by message size (GB/s, best of out-of-place and in-place):")
        lines += [f"    {r.size:>14} B  {'N/A' if r.best_busbw() is None else format(r.best_busbw(), '.2f'):>9}" for r in results.rows]
    if measured is not None:
        avg = f"; nccl-tests' average over all sizes: {results.avg_busbw[-1]:.2f}" if results.avg_busbw else ""
        lines.append(f"  measured: {measured:.2f} GB/s at the largest message, {largest[0].size} B{avg}")
    lines += ["  " + n for n in notes]
    if single is False:
        lines.append(f"  placement: several nodes ({where})")
    if families:
        lines.append(f"  transport: {', '.join(sorted(families))} ({evidence})")
    elif mode == "tcp":
        lines.append("  transport: not in the log (no NCCL network lines); not checked")
    if net.ib_ports:
        lines.append(f"  rdma ports NCCL opened: {' '.join(net.ib_ports)}")
    if net.channels:
        lines.append(f"  network channels: {sum(net.channels.values())}, with GPUDirect RDMA: {net.gdr_channels}")
    return Verdict(not failures, lines + ["  FAIL: " + f for f in failures], failures)


def result_failures(results: Results) -> List[str]:  # no number, no rows, wrong values, unchecked, unfinished
    failures = []
    if results.malformed:
        what = "a value that is not a number (NaN, inf, a digit of another script, a size of thousands of digits)"
        failures.append(f"{len(results.malformed)} line(s) of the results hold {what}: {results.malformed[0]}; no benchmark prints one")
    if not results.rows:
        none = "no all-reduce results in the log: no nccl-tests table (a `# size count ... busbw` header and its rows)"
        failures.append(none + "; the benchmark did not get as far as the first message size")
    else:
        if wrong := sum(m.wrong or 0 for r in results.rows for m in r.measures):
            failures.append(f"{wrong} wrong value(s) in the all-reduce results (#wrong): the data was corrupted")
        if results.unchecked:
            rows = f"{len(results.unchecked)} row(s) of a run whose header asks for validation (validation: 1) have no #wrong count"
            failures.append(f"{rows} (N/A), so their data was not checked: the row {results.unchecked[0]}")
        failures += unfinished(results)
    return failures + [f"the trailer {t} reports values out of bounds: the benchmark found wrong results" for t in results.out_of_bounds]


def unfinished(results: Results) -> List[str]:  # per table: sizes missing at the end, or no summary trailer
    out: List[str] = []
    for i, run in enumerate(results.runs):
        which = f"table {i + 1} of {len(results.runs)}: " if len(results.runs) > 1 else ""
        if not run.rows:
            out.append(f"{which}the benchmark did not finish: a table header with no rows")
            continue
        top = max(r.size for r in run.rows)
        expected = run.expected_largest()
        trailer = "summary trailer (`# Avg bus bandwidth : ...`)"
        if expected is not None and top < expected:
            asked = f"the header asks for sizes up to maxBytes {run.max_bytes} B (the last one {expected} B)"
            late = "the log ends before the sizes that decide the verdict"
            out.append(f"{which}the benchmark did not finish: its largest message is {top} B, but {asked}: {late}")
        if run.after_trailer:
            edited = "which the benchmark prints after its last size: the log was edited or joins two runs"
            out.append(f"{which}{run.after_trailer} row(s) after the {trailer}, {edited}")
        if not run.finished:
            after = "which nccl-tests and the torch loop print after the last size: the run died or the log was cut"
            out.append(f"{which}the benchmark did not finish: no {trailer} after the table, {after}")
    return out


def placement_failures(single: Optional[bool], where: str, net: NcclNet, nodes: Optional[int], notes: List[str]) -> List[str]:
    """Between the GPUs of one node NCCL uses NVLink/PCIe and shared memory: such a result says nothing about the NICs."""
    if not single:
        return []
    if nodes is None or nodes > 1:
        return [
            f"intra-node: does not test the fabric ({where}): between the GPUs of one node NCCL uses NVLink/PCIe and "
            "shared memory, whose bandwidth says nothing about the NICs, so this result cannot gate the fabric; run the "
            "check on 2 or more nodes" + (" (or give --nodes 1 for a test of one node's NICs)" if nodes is None else "")
        ]
    if local := ", ".join(f"{n} channel(s) via {name}" for name, n in sorted(net.local_channels.items())):
        fix = "set NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 (the rendered check does)"
        inside = f"NCCL connected ranks inside the node ({local}): a one-node check must send every hop through the NICs: {fix}"
        return [f"intra-node: does not test the fabric ({where}), and {inside}"]
    nics = "no P2P or SHM channel, so every hop went through the node's NICs (a one-node NIC test)"
    notes.append(f"intra-node: does not test the fabric between nodes ({where}); {nics}")
    return []


def transport_failures(mode: str, families: Dict[str, List[str]], evidence: str, net: NcclNet, notes: List[str]) -> List[str]:
    if mode == "tcp":
        used_ib = f"NCCL used InfiniBand/RoCE in tcp mode ({evidence}): the result does not measure TCP; set NCCL_IB_DISABLE=1"
        return [used_ib] if "ib" in families else []
    if "socket" in families:
        why = " NCCL found no RDMA device in the pod (NET/IB : No device found): check the SR-IOV networks annotation, "
        why += "the openshift.io/... resources and /dev/infiniband (the launcher's report at the top of the pod log)."
        return [f"NCCL used the socket transport in rdma mode ({evidence}).{why if net.ib_not_found else ''}"]
    if "ib" not in families and families:
        return [f"NCCL used no IB transport in rdma mode ({evidence})"]
    if "ib" not in families:
        debug = "run with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET (the rendered check sets both)"
        return ["the log does not show which network NCCL used: " + debug]
    if net.channels and not net.gdr_channels:
        staged = "note: no network channel used GPUDirect RDMA (no /GDRDMA): data is staged through host memory"
        notes.append(staged + "; NCCL_NET_GDR_LEVEL and the nvidia-peermem module decide that")
    return []


def benchmark_argv(tool: str, binary: str, environ: Dict[str, str], a: argparse.Namespace) -> List[str]:  # with the launcher's rendezvous
    if tool == "nccl-tests":
        return [
            binary, "-b", str(a.min_bytes), "-e", str(a.max_bytes), "-f", "2", "-g", environ.get("NPROC_PER_NODE", "1"),
            "-n", str(a.iters), "-w", str(a.warmup), "-c", "1",
        ]  # fmt: skip
    return [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", environ.get("NNODES", "1"),
        "--nproc_per_node", environ.get("NPROC_PER_NODE", "1"), "--node_rank", environ.get("NODE_RANK", "0"),
        "--master_addr", environ.get("MASTER_ADDR", "127.0.0.1"), "--master_port", environ.get("MASTER_PORT", "29500"),
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "allreduce.py"), "--min-bytes", str(a.min_bytes),
        "--max-bytes", str(a.max_bytes), "--iters", str(a.iters), "--warmup", str(a.warmup), "--backend", a.backend,
    ]  # fmt: skip


def run_and_echo(argv: Sequence[str], environ: Dict[str, str]) -> Tuple[int, str]:
    """Run the benchmark, its output echoed line by line; a SIGTERM (the Job deleted, the pod evicted) is passed on."""
    try:
        child = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environ)
    except OSError as exc:
        message = f"bandwidth check: cannot run {argv[0]}: {exc}\n"
        sys.stdout.write(message)
        return 127, message
    previous = signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    captured: List[str] = []
    try:
        assert child.stdout is not None
        for chunk in iter(child.stdout.readline, b""):
            captured.append(chunk.decode("utf-8", errors="replace"))
            print(captured[-1], end="", flush=True)
        code = child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    return code, "".join(captured)


def cmd_check(a: argparse.Namespace) -> int:
    environ = {**os.environ, "PYTHONUNBUFFERED": "1"}  # table rows reach the log as they are measured
    nnodes = int(environ.get("NNODES", "1"))
    binary = shutil.which(NCCL_TESTS_BINARY)
    tool, why = a.tool, "asked for"
    if tool == "auto" and nnodes > 1:
        tool, why = "torch", f"{nnodes} nodes: all_reduce_perf spans nodes only under mpirun"
    elif tool == "auto" and binary:
        tool, why = "nccl-tests", f"one node and {binary} is in the image"
    elif tool == "auto":
        tool, why = "torch", f"one node, but {NCCL_TESTS_BINARY} is not on PATH"
    if tool == "nccl-tests" and nnodes > 1:
        print(f"bandwidth check: FAIL: tool nccl-tests on {nnodes} nodes: all_reduce_perf spans nodes only under mpirun")
        return EXIT_FAIL
    if tool == "nccl-tests" and not binary:
        print(f"bandwidth check: FAIL: tool nccl-tests, but {NCCL_TESTS_BINARY} is not on PATH in this image; use tool torch or auto")
        return EXIT_FAIL
    argv = benchmark_argv(tool, binary or "", environ, a)
    print(f"bandwidth check: tool {tool} ({why}): {' '.join(argv)}", flush=True)
    code, output = run_and_echo(argv, environ)
    gpus = int(environ.get("NPROC_PER_NODE", "0")) or None
    verdict = judge(output, a.mode, a.line_rate_gbps, a.min_fraction, exit_code=code, nodes=nnodes, gpus_per_node=gpus)
    print(verdict.render(), end="", flush=True)
    return EXIT_PASS if verdict.ok else EXIT_FAIL


class LogError(Exception):  # a log that cannot be read, or is refused (not a regular file, too large)
    pass


FILE_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}
FILE_KINDS.update({stat.S_IFDIR: "a directory", stat.S_IFSOCK: "a socket"})


def read_log(path: str, limit: int = MAX_LOG_BYTES) -> str:
    """A saved log ('-': stdin), at most `limit` bytes. A path is read only when it is a regular file of at most that
    size (a FIFO would wait for a writer, /dev/zero never ends); stdin is read up to the limit. Raises LogError."""
    if path == "-":
        if sys.stdin.buffer.isatty():
            raise LogError("stdin is a terminal: pipe the log in (oc logs job/NAME | ... -), or name the file")
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit:
            raise LogError(f"more than {limit} bytes on stdin, more than a benchmark log holds: pipe in the check's pod log")
        return data.decode("utf-8", errors="replace")
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            kind = FILE_KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise LogError(f"{kind}, not a log file: save the log first (oc logs job/NAME > run.log), or pipe it to -")
        if st.st_size > limit:
            raise LogError(f"{st.st_size} bytes, more than the {limit} a benchmark log holds: give the check's pod log (oc logs job/NAME)")
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", errors="replace")
    except OSError as exc:
        raise LogError(exc.strerror or str(exc)) from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    # The options are the program's own (components/bandwidth.py renders the command): argparse's types suffice.
    p = argparse.ArgumentParser(prog="bandwidth.py", description="All-reduce bandwidth check (see the module docstring).")
    c = p.add_subparsers(dest="command", required=True).add_parser("check", help="run the benchmark on this node and judge it")
    c.add_argument("--tool", choices=("auto", "torch", "nccl-tests"), default="auto")
    c.add_argument("--mode", choices=("rdma", "tcp"), required=True)
    c.add_argument("--line-rate-gbps", type=float, help="line rate the bus bandwidth is held against (none: report only)")
    c.add_argument("--min-fraction", type=float, default=0.8)
    for size, default in (("--min-bytes", 1024 * 1024), ("--max-bytes", 1024 * 1024 * 1024), ("--iters", 20), ("--warmup", 5)):
        c.add_argument(size, type=int, default=default)
    c.add_argument("--backend", choices=("nccl", "gloo"), default="nccl", help="gloo: CPU tensors, for tests")
    return cmd_check(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
