#!/usr/bin/env python3
"""The fabric check inside the pod: run an all-reduce benchmark across the nodes, read what it
measured and which network NCCL used, and fail unless the bus bandwidth reaches the configured
fraction of the line rate over the transport the workload asked for.

The seeds fought for RDMA and never measured it; a pod whose NCCL quietly fell back to sockets trains
at a tenth of the speed and looks healthy. This turns both into a failed Job, which `pulumi up`
reports (components/bandwidth.py), and into a verdict a user can get again from a saved log
(`python -m stacks bandwidth-report LOG`).

Standard library only, Python 3.8+: it ships in the launcher ConfigMap next to launcher.py and runs
in whatever image the check names. torch is imported only by the benchmark loop.

Commands:
  bandwidth.py check --mode rdma|tcp [--tool auto|torch|nccl-tests] [--line-rate-gbps X]
                     [--min-fraction F] [--min-bytes N] [--max-bytes N] [--iters N] [--warmup N]
                     [--backend nccl|gloo]
      The pod's command (the launcher execs it with NNODES, NODE_RANK, NPROC_PER_NODE, MASTER_ADDR
      and MASTER_PORT set). Starts the benchmark as a child process, echoes its output (the pod log
      then holds the table and NCCL's INFO lines of every local rank), prints the verdict.
        torch       torchrun with this node's rendezvous settings runs `bench` on every GPU.
        nccl-tests  all_reduce_perf -g NPROC_PER_NODE in one process: one node only, because
                    all_reduce_perf spans hosts only under MPI (mpirun), which is not deployed.
        auto        nccl-tests on one node where the image has all_reduce_perf, torch otherwise.
  bandwidth.py bench [--min-bytes N] [--max-bytes N] [--iters N] [--warmup N] [--backend nccl|gloo]
      One process per GPU under torchrun: the torch.distributed all_reduce loop. Local rank 0 of
      every node prints the results in nccl-tests' table format, so one parser reads both tools.
  bandwidth.py report LOG|- --mode rdma|tcp [--line-rate-gbps X] [--min-fraction F] [--nodes N]
                     [--gpus-per-node N]
      The same verdict from a saved log (`python -m stacks bandwidth-report` fills in the values
      from a stack's config). A log is read only when it is a regular file (or stdin) of at most
      MAX_LOG_BYTES: a FIFO, a device or a huge file is refused with a message, never read.

The verdict (judge): the bus bandwidth at the largest message size (best of out-of-place and
in-place; the lowest where several tables are in the log) must reach min_fraction x line rate
(Gb/s / 8 = GB/s, the unit of nccl-tests' busbw). In rdma mode NCCL must have used its IB transport
(InfiniBand or RoCE; plugins such as IBext count) and no socket transport; in tcp mode it must not
have used IB. Wrong values in the results, or no results at all, fail too, and so does a benchmark that
did not finish: a table whose largest message is below the size its header promised (maxBytes; the
last size the header's steps reach), or one without nccl-tests' summary trailer (`# Avg bus bandwidth`).

A result from one node (nccl-tests' device list puts every rank on one host, the torch loop reports
one node, NCCL's communicator spans one node, or the world size is the GPUs of one node) is marked
"intra-node: does not test the fabric": between the GPUs of a node NCCL uses NVLink/PCIe and shared
memory, hundreds of GB/s that say nothing about the NICs. It fails a check meant to gate the fabric
(nodes unknown or 2+); a check configured for one node (nodes 1: a test of the node's own NICs) passes
it only when NCCL connected no two ranks over P2P or SHM, i.e. every hop went through the network.

Exit codes: 0 pass; 1 fail; 2 bad arguments or an unreadable log.
"""

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
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2

MODES = ("rdma", "tcp")
TOOLS = ("auto", "torch", "nccl-tests")
NCCL_TESTS_BINARY = "all_reduce_perf"
FLOAT_BYTES = 4  # both tools reduce float32 sums

# --- nccl-tests' table ---------------------------------------------------------------------------

# Log collectors put things before a line: `oc logs --prefix` ([pod/NAME/CONTAINER]),
# `--timestamps` (RFC 3339), mpirun --tag-output ([1,0]<stdout>:), torchrun --tee ([default0]:).
_LINE_PREFIX = re.compile(r"^(?:\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:?\d\d)\s+|\[[^\]]*\](?:<std(?:out|err)>)?:?[ \t]*)+")
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
# Every number read from a log is ASCII and of a sane length (\d alone also matches Arabic-Indic or fullwidth digits,
# which int() and float() accept, and int() raises on 5,000 digits); a cell of the table is one of these or N/A.
_COUNT = re.compile(r"[0-9]{1,20}")
_MEASURE = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,20})?(?:[eE][-+]?[0-9]{1,3})?")  # 34562.5, the old error column's 5e-07
# nccl-tests' first line (`# nThread 1 nGpus 4 minBytes 8 maxBytes 8589934592 step: 2(factor) ...`) and the torch
# loop's title carry the sizes the run was asked for; nccl-tests lowers maxBytes to fit GPU memory, and says so.
_SIZES = re.compile(r"\bminBytes (\d+) maxBytes (\d+)(?: step: (\d+)\((factor|bytes)\))?", re.ASCII)
_REDUCED_MAX = re.compile(r"^#\s*Reducing maxBytes to (\d+)", re.ASCII)
# The same line says whether the run checks its results (`validation: 1`, nccl-tests' -c 1): then every #wrong is a count,
# and the trailer (`# Out of bounds values : 0 OK`) sums them; `-c 0` prints N/A and checks nothing.
_VALIDATION = re.compile(r"\bvalidation: ([0-9]+)\b")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:(.*)$")
# nccl-tests' device list: `#  Rank  0 Group  0 Pid     57 on rdma-bandwidth-0 device  0 [0x18] NVIDIA H100 80GB HBM3`
# (versions before 2.13 print no Group).
_RANK_ON = re.compile(r"^#\s*Rank\s+(\d{1,20})\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\b", re.ASCII)
# The torch loop's title: `... world size 8 nodes 2 ranks per node 4 minBytes ...` (before it reported nodes: world size only).
_TORCH_TITLE = re.compile(r"^#\s*torch\.distributed all_reduce\b")
_TORCH_WORLD = re.compile(r"\bworld size (\d{1,20})\b", re.ASCII)
_TORCH_NODES = re.compile(r"\bnodes (\d{1,20}) ranks per node (\d{1,20})\b", re.ASCII)


@dataclass
class Measure:
    """One half of a row: out-of-place or in-place. None where the table says N/A."""

    time_us: Optional[float]
    algbw: Optional[float]
    busbw: Optional[float]
    wrong: Optional[int]  # nccl-tests' #wrong; None for N/A and for old versions' float "error"


@dataclass
class Row:
    size: int
    count: int
    measures: List[Measure]

    def best_busbw(self) -> Optional[float]:
        values = [m.busbw for m in self.measures if m.busbw is not None]
        return max(values) if values else None

    def wrong(self) -> int:
        return sum(m.wrong or 0 for m in self.measures)


@dataclass
class Run:
    """One table of results, with what its header asked for and whether the benchmark finished it."""

    rows: List[Row] = field(default_factory=list)
    min_bytes: Optional[int] = None
    max_bytes: Optional[int] = None
    step: Optional[int] = None
    step_kind: str = "factor"  # nccl-tests -f (sizes multiply) or -i (sizes add)
    finished: bool = False  # nccl-tests' trailer (`# Avg bus bandwidth : X`) followed the rows
    validated: bool = False  # the header says `validation: 1`: every #wrong must be a count
    after_trailer: int = 0  # rows that came after the trailer: no benchmark prints them

    def expected_largest(self) -> Optional[int]:
        """The largest message the header's sizes reach (nccl-tests: from minBytes by the step while
        at most maxBytes), in whole elements as the table prints sizes; None without a header."""
        if self.max_bytes is None:
            return None
        last = self.max_bytes
        low, step = self.min_bytes, self.step
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
    tables: int = 0
    avg_busbw: List[float] = field(default_factory=list)
    runs: List[Run] = field(default_factory=list)
    rank_hosts: Dict[int, str] = field(default_factory=dict)  # nccl-tests' device list: rank -> host
    torch_world: Optional[int] = None  # the torch loop's title
    torch_nodes: Optional[int] = None
    torch_ranks_per_node: Optional[int] = None
    malformed: List[str] = field(default_factory=list)  # rows of a table whose numbers are not numbers
    unchecked: List[str] = field(default_factory=list)  # rows of a validated run whose #wrong is N/A
    out_of_bounds: List[str] = field(default_factory=list)  # trailers that say anything but `0 OK`

    def largest(self) -> List[Row]:
        if not self.rows:
            return []
        top = max(r.size for r in self.rows)
        return [r for r in self.rows if r.size == top]


MAX_LINE = 64 * 1024
"""Characters of a log line that are read: a table row or an NCCL INFO line is a few hundred (a row whose number has
thousands of digits is still read whole, and refused as no number); a process may write megabytes on one line, and no
pattern runs on more than this."""


def log_lines(text: str) -> List[str]:
    """The lines of a log, each cut at MAX_LINE."""
    return [line[:MAX_LINE] for line in text.splitlines()]


def strip_prefix(line: str) -> str:
    return _LINE_PREFIX.sub("", line.rstrip("\r\n"), count=1)


class Malformed(ValueError):
    """A table cell that is neither a number nor N/A."""


def _number(token: str) -> Optional[float]:
    """A cell's value; None for N/A. NaN, inf, 1e999 (inf), '١٢' or '１２' are not a measurement: Malformed."""
    if token == "N/A":
        return None
    value = float(token) if _MEASURE.fullmatch(token) else math.inf
    if not math.isfinite(value):
        raise Malformed(token)
    return value


def _row(tokens: List[str], columns: List[str]) -> Row:
    """One row of a table whose header is `columns`; Malformed names the first cell that is not a number."""
    for token in tokens[:2]:
        if not _COUNT.fullmatch(token):
            raise Malformed(token)
    first = columns.index("time")
    measures = []
    for at in range(first, len(columns), 4):
        wrong_col, wrong_raw = columns[at + 3], tokens[at + 3]
        wrong = None
        if wrong_col == "#wrong" and wrong_raw != "N/A":  # a count: anything but digits is no count (and no zero)
            if not _COUNT.fullmatch(wrong_raw):
                raise Malformed(wrong_raw)
            wrong = int(wrong_raw)
        elif wrong_col != "#wrong":
            _number(wrong_raw)  # the old float error: read, never judged, but a number
        measures.append(Measure(_number(tokens[at]), _number(tokens[at + 1]), _number(tokens[at + 2]), wrong))
    return Row(int(tokens[0]), int(tokens[1]), measures)


def parse_results(text: str) -> Results:
    """Every nccl-tests-format table in the text: the column header line (`# size count type redop
    [root] time algbw busbw #wrong time ...`) fixes the columns; rows follow until a `#` line that is
    not a header. Old versions' `error` column (a float) is read but not judged."""
    out = Results()
    columns: List[str] = []
    header = Run()  # what the lines before the next table say about it
    for raw in log_lines(text):
        line = strip_prefix(raw).strip()
        if line.startswith("#"):
            avg = _AVG_BUSBW.match(line)
            if avg:
                if _MEASURE.fullmatch(avg.group(1)) and math.isfinite(float(avg.group(1))):
                    out.avg_busbw.append(float(avg.group(1)))
                if out.runs:
                    out.runs[-1].finished = True
            bounds = _OUT_OF_BOUNDS.match(line)
            if bounds and bounds.group(1).split() != ["0", "OK"]:  # FAILED, a count above 0, or no count at all
                out.out_of_bounds.append(shown(line))
            _read_header(line, header, out)
            names = line[1:].split()
            if "size" in names and "count" in names and "time" in names and "busbw" in names:
                first = names.index("time")
                if (len(names) - first) % 4 == 0:
                    columns = names
                    out.tables += 1
                    out.runs.append(header)
                    header = Run()
            continue
        tokens = line.split()
        # A row: as many cells as the header, the first two digits of any script (str.isdigit: '٣' and '１' are
        # digits too, and are refused below, as the row they start, never skipped).
        if not columns or len(tokens) != len(columns) or not (tokens[0].isdigit() and tokens[1].isdigit()):
            continue
        try:
            row = _row(tokens, columns)
        except Malformed as bad:
            out.malformed.append(f"{shown(str(bad))} in the row {shown(line)}")
            continue
        out.rows.append(row)
        out.runs[-1].rows.append(row)
        if out.runs[-1].validated and any(c == "#wrong" and t == "N/A" for c, t in zip(columns, tokens)):
            out.unchecked.append(shown(line))
        if out.runs[-1].finished:
            out.runs[-1].after_trailer += 1
    return out


def shown(text: str, limit: int = 80) -> str:
    """Text from a log, cut to a line's worth."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _read_header(line: str, header: Run, out: Results) -> None:
    """What a `#` line before a table says: the sizes asked for, the ranks' hosts, the torch loop's world."""
    sizes = _SIZES.search(line) or _REDUCED_MAX.match(line)
    if sizes and any(len(digits) > 20 for digits in sizes.groups() if digits):
        out.malformed.append(f"a size of thousands of digits in the line {shown(line)}")  # no run asks for 10^20 bytes
        return
    sizes = _SIZES.search(line)
    if sizes:
        header.min_bytes, header.max_bytes = int(sizes.group(1)), int(sizes.group(2))
        if sizes.group(3):
            header.step, header.step_kind = int(sizes.group(3)), sizes.group(4)
    validation = _VALIDATION.search(line)
    if validation:
        header.validated = validation.group(1) != "0"
    reduced = _REDUCED_MAX.match(line)
    if reduced:
        header.max_bytes = int(reduced.group(1))
    rank = _RANK_ON.match(line)
    if rank:
        out.rank_hosts[int(rank.group(1))] = rank.group(2)
    if _TORCH_TITLE.match(line):
        world = _TORCH_WORLD.search(line)
        nodes = _TORCH_NODES.search(line)
        if world:
            out.torch_world = int(world.group(1))
        if nodes:
            out.torch_nodes, out.torch_ranks_per_node = int(nodes.group(1)), int(nodes.group(2))


# --- NCCL's INFO lines ---------------------------------------------------------------------------

_NCCL_INFO = re.compile(r"NCCL INFO (.*)$")
# Each pattern on a log's text is linear in the line: a log holds whatever a process wrote (a lazy group before `\s*$`
# rescans a run of spaces at every step; a pattern `findall` tries at every position must not rescan a run of letters).
_USING_NETWORK = re.compile(r"^Using network (.+)$")  # Using network IB | IBext_v8 | Socket (the message is stripped)
_NET_IB_USING = re.compile(r"^NET/IB ?: Using (.*)$")  # [0]mlx5_6:1/RoCE [1]... [RO]; OOB ...
_IB_PORT = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]+:\d+/(?:IB|RoCE))")  # from the start of a name only
_NET_IB_NONE = re.compile(r"^NET/IB ?: No device found")
_NET_SOCKET_USING = re.compile(r"^NET/Socket ?: Using (.*)$")  # [0]eth0:10.0.0.1<0>
_SOCKET_IFACE = re.compile(r"\[\d+\]([^\s\[]+)")
_VIA_NET = re.compile(r"via NET/([A-Za-z][A-Za-z0-9_]*)(\S*)")  # NET/IB/0/GDRDMA, NET/Socket/0
_VIA_LOCAL = re.compile(r"via (P2P|SHM)/")  # inside a node: P2P/CUMEM/read, P2P/IPC, SHM/direct/direct
# comm 0x... rank 0 nRanks 8 nNodes 2 localRanks 4
_COMM = re.compile(r"\bnRanks (\d{1,20}) nNodes (\d{1,20}) localRanks (\d{1,20})\b", re.ASCII)


def net_family(name: str) -> str:
    """ib for NCCL's IB transport and IB plugins (IB, IBext, IBext_v8: InfiniBand and RoCE alike),
    socket for its TCP sockets, other for anything else (vendor plugins)."""
    lowered = name.lower()
    if lowered.startswith("ib"):
        return "ib"
    return "socket" if lowered == "socket" else "other"


@dataclass
class NcclNet:
    """What NCCL's INIT and NET lines say about the network it used."""

    info_lines: int = 0
    networks: Dict[str, int] = field(default_factory=dict)  # `Using network NAME`, counted
    channels: Dict[str, int] = field(default_factory=dict)  # `via NET/NAME/...`, counted
    gdr_channels: int = 0
    ib_ports: List[str] = field(default_factory=list)  # mlx5_6:1/RoCE
    socket_ifaces: List[str] = field(default_factory=list)  # eth0:10.0.0.1<0>
    ib_not_found: int = 0
    local_channels: Dict[str, int] = field(default_factory=dict)  # `via P2P/...`, `via SHM/...`, counted
    comms: List[tuple[int, int, int]] = field(default_factory=list)  # (nRanks, nNodes, localRanks) of each rank's communicator

    def families(self) -> Dict[str, List[str]]:
        """Each transport family with the evidence for it."""
        seen: Dict[str, List[str]] = {}
        for name, n in self.networks.items():
            seen.setdefault(net_family(name), []).append(f"'Using network {name}' x{n}")
        for name, n in self.channels.items():
            seen.setdefault(net_family(name), []).append(f"{n} channel(s) via NET/{name}")
        if self.socket_ifaces and not self.networks:
            # NCCL before 2.x printed no `Using network` line; NET/Socket initialises only when chosen.
            seen.setdefault("socket", []).append("NET/Socket : Using " + " ".join(self.socket_ifaces))
        if self.ib_ports and not self.networks:
            seen.setdefault("ib", []).append("NET/IB : Using " + " ".join(self.ib_ports))
        return seen


def _add_unique(items: List[str], new: Sequence[str]) -> None:
    for item in new:
        if item not in items:
            items.append(item)


def parse_nccl(text: str) -> NcclNet:
    net = NcclNet()
    for raw in log_lines(text):
        match = _NCCL_INFO.search(raw)
        if not match:
            continue
        net.info_lines += 1
        msg = match.group(1).strip()
        m = _USING_NETWORK.match(msg)
        if m:
            net.networks[m.group(1)] = net.networks.get(m.group(1), 0) + 1
            continue
        m = _NET_IB_USING.match(msg)
        if m:
            _add_unique(net.ib_ports, _IB_PORT.findall(m.group(1)))
            continue
        if _NET_IB_NONE.match(msg):
            net.ib_not_found += 1
            continue
        m = _NET_SOCKET_USING.match(msg)
        if m:
            _add_unique(net.socket_ifaces, _SOCKET_IFACE.findall(m.group(1)))
            continue
        m = _VIA_NET.search(msg)
        if m:
            net.channels[m.group(1)] = net.channels.get(m.group(1), 0) + 1
            if "GDRDMA" in m.group(2):
                net.gdr_channels += 1
            continue
        m = _VIA_LOCAL.search(msg)
        if m:
            net.local_channels[m.group(1)] = net.local_channels.get(m.group(1), 0) + 1
            continue
        m = _COMM.search(msg)
        if m:
            net.comms.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return net


# --- where the ranks ran -------------------------------------------------------------------------


def placement(results: Results, net: NcclNet, gpus_per_node: Optional[int] = None) -> tuple[Optional[bool], str]:
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
    if several:
        return False, "; ".join(several)
    return None, ""


# --- the verdict ---------------------------------------------------------------------------------


def threshold_gbytes(line_rate_gbps: float, min_fraction: float) -> float:
    """min_fraction of the line rate, in GB/s (nccl-tests' unit: 1e9 bytes/s)."""
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
    """Pass or fail a benchmark log. `exit_code` is the benchmark's, where it was run here. `nodes`: the nodes
    the check runs on (1: a test of one node's NICs; None or 2+: it gates the fabric between nodes);
    `gpus_per_node`: its GPUs per node, so a world size of one node's GPUs reads as one node."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    results = parse_results(text)
    net = parse_nccl(text)
    failures: List[str] = []
    notes: List[str] = []

    if exit_code:
        failures.append(f"the benchmark exited with status {exit_code} (its output is above)")

    largest = results.largest()
    measured: Optional[float] = None
    if results.malformed:
        failures.append(
            f"{len(results.malformed)} line(s) of the results hold a value that is not a number (NaN, inf, a digit of "
            f"another script, a size of thousands of digits): {results.malformed[0]}; no benchmark prints one"
        )
    if not results.rows:
        failures.append(
            "no all-reduce results in the log: no nccl-tests table (a `# size count ... busbw` header "
            "and its rows); the benchmark did not get as far as the first message size"
        )
    else:
        values = [v for v in (r.best_busbw() for r in largest) if v is not None]
        measured = min(values) if values else None
        wrong = sum(r.wrong() for r in results.rows)
        if wrong:
            failures.append(f"{wrong} wrong value(s) in the all-reduce results (#wrong): the data was corrupted")
        if results.unchecked:
            failures.append(
                f"{len(results.unchecked)} row(s) of a run whose header asks for validation (validation: 1) have no "
                f"#wrong count (N/A), so their data was not checked: the row {results.unchecked[0]}"
            )
        failures += unfinished(results)
    for trailer in results.out_of_bounds:
        failures.append(f"the trailer {trailer} reports values out of bounds: the benchmark found wrong results")

    if line_rate_gbps is None:
        notes.append("threshold: none (no line rate for this check), so the bandwidth is reported, not judged")
    else:
        need = threshold_gbytes(line_rate_gbps, min_fraction)
        notes.append(f"threshold: {need:.2f} GB/s = {min_fraction:g} x line rate {line_rate_gbps:g} Gb/s ({line_rate_gbps / 8.0:.2f} GB/s)")
        if measured is not None and measured < need:
            failures.append(
                f"bus bandwidth {measured:.2f} GB/s at {largest[0].size} B is below {need:.2f} GB/s "
                f"({measured / (line_rate_gbps / 8.0):.0%} of the line rate, {min_fraction:.0%} required)"
            )
        elif results.rows and measured is None:
            failures.append(f"no bus bandwidth at the largest message size ({largest[0].size} B)")

    single, where = placement(results, net, gpus_per_node)
    local = ", ".join(f"{n} channel(s) via {name}" for name, n in sorted(net.local_channels.items()))
    if single:
        if nodes is None or nodes > 1:
            failures.append(
                f"intra-node: does not test the fabric ({where}): between the GPUs of one node NCCL uses NVLink/PCIe and "
                "shared memory, whose bandwidth says nothing about the NICs, so this result cannot gate the fabric; run the "
                "check on 2 or more nodes" + (" (or give --nodes 1 for a test of one node's NICs)" if nodes is None else "")
            )
        elif local:
            failures.append(
                f"intra-node: does not test the fabric ({where}), and NCCL connected ranks inside the node ({local}): a "
                "one-node check must send every hop through the NICs: set NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 "
                "(the rendered check does)"
            )
        else:
            notes.append(
                f"intra-node: does not test the fabric between nodes ({where}); no P2P or SHM channel, so every hop went "
                "through the node's NICs (a one-node NIC test)"
            )

    families = net.families()
    evidence = "; ".join(e for es in families.values() for e in es)
    if mode == "rdma":
        if "socket" in families:
            why = (
                " NCCL found no RDMA device in the pod (NET/IB : No device found): check the SR-IOV networks "
                "annotation, the openshift.io/... resources and /dev/infiniband (the launcher's report at the "
                "top of the pod log)."
                if net.ib_not_found
                else ""
            )
            failures.append(f"NCCL used the socket transport in rdma mode ({evidence}).{why}")
        elif "ib" not in families:
            if families:
                failures.append(f"NCCL used no IB transport in rdma mode ({evidence})")
            else:
                failures.append(
                    "the log does not show which network NCCL used: run with NCCL_DEBUG=INFO and "
                    "NCCL_DEBUG_SUBSYS=INIT,NET (the rendered check sets both)"
                )
        elif net.channels and not net.gdr_channels:
            notes.append(
                "note: no network channel used GPUDirect RDMA (no /GDRDMA): data is staged through host "
                "memory; NCCL_NET_GDR_LEVEL and the nvidia-peermem module decide that"
            )
    elif "ib" in families:
        failures.append(f"NCCL used InfiniBand/RoCE in tcp mode ({evidence}): the result does not measure TCP; set NCCL_IB_DISABLE=1")

    lines = [f"bandwidth check: {'FAIL' if failures else 'PASS'} (mode {mode})"]
    if results.rows:
        lines.append("  bus bandwidth by message size (GB/s, best of out-of-place and in-place):")
        for r in results.rows:
            best = r.best_busbw()
            lines.append(f"    {r.size:>14} B  {'N/A' if best is None else format(best, '.2f'):>9}")
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
        total = sum(net.channels.values())
        lines.append(f"  network channels: {total}, with GPUDirect RDMA: {net.gdr_channels}")
    lines += ["  FAIL: " + f for f in failures]
    return Verdict(not failures, lines, failures)


def unfinished(results: Results) -> List[str]:
    """Why the benchmark did not finish, per table: sizes missing at the end, or no summary trailer."""
    out: List[str] = []
    for i, run in enumerate(results.runs):
        which = f"table {i + 1} of {len(results.runs)}: " if len(results.runs) > 1 else ""
        if not run.rows:
            out.append(f"{which}the benchmark did not finish: a table header with no rows")
            continue
        top = max(r.size for r in run.rows)
        expected = run.expected_largest()
        if expected is not None and top < expected:
            out.append(
                f"{which}the benchmark did not finish: its largest message is {top} B, but the header asks for sizes up to "
                f"maxBytes {run.max_bytes} B (the last one {expected} B): the log ends before the sizes that decide the verdict"
            )
        if run.after_trailer:
            out.append(
                f"{which}{run.after_trailer} row(s) after the summary trailer (`# Avg bus bandwidth : ...`), which the benchmark "
                "prints after its last size: the log was edited or joins two runs"
            )
        if not run.finished:
            out.append(
                f"{which}the benchmark did not finish: no summary trailer (`# Avg bus bandwidth : ...`) after the table, "
                "which nccl-tests and the torch loop print after the last size: the run died or the log was cut"
            )
    return out


# --- the torch.distributed benchmark -------------------------------------------------------------


def message_sizes(min_bytes: int, max_bytes: int) -> List[int]:
    """Doubling sizes from min to max (all_reduce_perf -f 2), whole float32 elements."""
    sizes: List[int] = []
    size = max(min_bytes, FLOAT_BYTES)
    while size <= max_bytes:
        whole = size - size % FLOAT_BYTES
        if whole not in sizes:
            sizes.append(whole)
        size *= 2
    return sizes


def bus_factor(ranks: int) -> float:
    """nccl-tests' all-reduce busbw = algbw x 2(n-1)/n: the share of the data each rank's link carries
    in a ring, so busbw compares with a link's speed whatever the number of ranks."""
    return 2.0 * (ranks - 1) / ranks


def table_header(title: str) -> List[str]:
    return [
        f"# {title}",
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]


def _cell(value: Optional[float], width: int) -> str:
    return f"{'N/A':>{width}}" if value is None else f"{value:{width}.2f}"


def table_row(row: Row) -> str:
    cells = [f"{row.size:12d}", f"{row.count:13d}", f"{'float':>9}", f"{'sum':>7}", f"{-1:7d}"]
    for m in row.measures:
        wrong = "N/A" if m.wrong is None else str(m.wrong)
        cells += [_cell(m.time_us, 8), _cell(m.algbw, 7), _cell(m.busbw, 7), f"{wrong:>6}"]
    return " ".join(cells)


def table_trailer(rows: Sequence[Row]) -> List[str]:
    values = [m.busbw for r in rows for m in r.measures if m.busbw is not None]
    wrong = sum(r.wrong() for r in rows)
    avg = sum(values) / len(values) if values else 0.0
    return [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}", f"# Avg bus bandwidth    : {avg:.4f}", "#"]


def torch_allreduce_benchmark(
    sizes: Sequence[int],
    iters: int,
    warmup: int,
    backend: str = "nccl",
    emit: Optional[Callable[[str], None]] = None,
) -> List[Row]:
    """Time dist.all_reduce (sum of float32) per message size on every rank of the process group
    torchrun set up (env:// rendezvous). Local rank 0 of each node emits the table.

    torch.distributed.all_reduce works in place, so the out-of-place columns are N/A. The first
    all-reduce of each size is checked (every element must equal the world size) and fills #wrong;
    the timed ones run on zeros, which stay finite. The time is the slowest rank's."""
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)

        def sync() -> None:
            torch.cuda.synchronize(device)

    else:
        device = torch.device("cpu")

        def sync() -> None:
            pass

    dist.init_process_group(backend=backend)
    try:
        world = dist.get_world_size()
        say = emit if (emit is not None and local_rank == 0) else (lambda _line: None)
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "0"))  # torchrun's nproc_per_node
        placed = f"nodes {world // per_node} ranks per node {per_node} " if per_node > 0 and world % per_node == 0 else ""
        title = (
            f"torch.distributed all_reduce (bandwidth.py bench): backend {backend} world size {world} {placed}"
            f"minBytes {sizes[0] if sizes else 0} maxBytes {sizes[-1] if sizes else 0} step: 2(factor) "
            f"warmup iters: {warmup} iters: {iters}; all_reduce works in place: out-of-place is N/A"
        )
        for line in table_header(title):
            say(line)
        rows: List[Row] = []
        for size in sizes:
            count = size // FLOAT_BYTES
            buf = torch.ones(count, dtype=torch.float32, device=device)
            dist.all_reduce(buf)
            wrong = int((buf != float(world)).sum().item())
            buf.zero_()
            for _ in range(warmup):
                dist.all_reduce(buf)
            sync()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf)
            sync()
            elapsed = time.perf_counter() - start
            # Every rank reports the slowest rank's time and the most wrong values any rank saw.
            agreed = torch.tensor([elapsed, float(wrong)], dtype=torch.float64, device=device)
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
            seconds = float(agreed[0].item()) / iters
            algbw = size / seconds / 1e9
            inplace = Measure(seconds * 1e6, algbw, algbw * bus_factor(world), int(agreed[1].item()))
            row = Row(size, count, [Measure(None, None, None, None), inplace])
            rows.append(row)
            say(table_row(row))
        for line in table_trailer(rows):
            say(line)
        return rows
    finally:
        dist.destroy_process_group()


# --- running the check in the pod ----------------------------------------------------------------


def resolve_tool(tool: str, nnodes: int, binary: Optional[str]) -> tuple[str, str]:
    """The tool to run and why."""
    if tool != "auto":
        return tool, "asked for"
    if nnodes > 1:
        return "torch", f"{nnodes} nodes: all_reduce_perf spans nodes only under mpirun"
    if binary:
        return "nccl-tests", f"one node and {binary} is in the image"
    return "torch", f"one node, but {NCCL_TESTS_BINARY} is not on PATH"


def torchrun_argv(environ: Dict[str, str], a: argparse.Namespace) -> List[str]:
    """torchrun for this node, from the rendezvous settings the launcher exported."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", environ.get("NNODES", "1"),
        "--nproc_per_node", environ.get("NPROC_PER_NODE", "1"),
        "--node_rank", environ.get("NODE_RANK", "0"),
        "--master_addr", environ.get("MASTER_ADDR", "127.0.0.1"),
        "--master_port", environ.get("MASTER_PORT", "29500"),
        os.path.abspath(__file__), "bench",
        "--min-bytes", str(a.min_bytes), "--max-bytes", str(a.max_bytes),
        "--iters", str(a.iters), "--warmup", str(a.warmup), "--backend", a.backend,
    ]  # fmt: skip


def nccl_tests_argv(binary: str, environ: Dict[str, str], a: argparse.Namespace) -> List[str]:
    return [
        binary, "-b", str(a.min_bytes), "-e", str(a.max_bytes), "-f", "2",
        "-g", environ.get("NPROC_PER_NODE", "1"),
        "-n", str(a.iters), "-w", str(a.warmup), "-c", "1",
    ]  # fmt: skip


def run_and_echo(argv: Sequence[str], environ: Dict[str, str]) -> tuple[int, str]:
    """Run the benchmark, copying its output (stdout and stderr) to ours line by line; return its
    exit status and the output. A SIGTERM (the Job deleted, the pod evicted) is passed on."""
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
            line = chunk.decode("utf-8", errors="replace")
            captured.append(line)
            sys.stdout.write(line)
            sys.stdout.flush()
        code = child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    return code, "".join(captured)


def cmd_check(a: argparse.Namespace) -> int:
    environ = dict(os.environ)
    environ["PYTHONUNBUFFERED"] = "1"  # table rows reach the log as they are measured
    nnodes = int(environ.get("NNODES", "1"))
    binary = shutil.which(NCCL_TESTS_BINARY)
    tool, why = resolve_tool(a.tool, nnodes, binary)
    if tool == "nccl-tests":
        if nnodes > 1:
            print(f"bandwidth check: FAIL: tool nccl-tests on {nnodes} nodes: all_reduce_perf spans nodes only under mpirun")
            return EXIT_FAIL
        if not binary:
            print(f"bandwidth check: FAIL: tool nccl-tests, but {NCCL_TESTS_BINARY} is not on PATH in this image; use tool torch or auto")
            return EXIT_FAIL
        argv = nccl_tests_argv(binary, environ, a)
    else:
        argv = torchrun_argv(environ, a)
    print(f"bandwidth check: tool {tool} ({why}): {' '.join(argv)}", flush=True)
    code, output = run_and_echo(argv, environ)
    gpus = int(environ.get("NPROC_PER_NODE", "0")) or None
    verdict = judge(output, a.mode, a.line_rate_gbps, a.min_fraction, exit_code=code, nodes=nnodes, gpus_per_node=gpus)
    sys.stdout.write(verdict.render())
    sys.stdout.flush()
    return EXIT_PASS if verdict.ok else EXIT_FAIL


def cmd_bench(a: argparse.Namespace) -> int:
    def emit(line: str) -> None:
        print(line, flush=True)

    torch_allreduce_benchmark(message_sizes(a.min_bytes, a.max_bytes), a.iters, a.warmup, a.backend, emit)
    return EXIT_PASS


MAX_LOG_BYTES = 64 * 1024 * 1024
"""The largest log read: a check's pod log (NCCL's INIT and NET lines of every local rank and one table) is
well under a megabyte; more is not a benchmark log, and is never read into memory."""


class LogError(Exception):
    """A log that cannot be read, or is refused (not a regular file, too large)."""


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_unless_regular(st: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise LogError(f"{_file_kind(st.st_mode)}, not a log file: save the log first (oc logs job/NAME > run.log), or pipe it to -")
    if st.st_size > limit:
        raise LogError(f"{st.st_size} bytes, more than the {limit} a benchmark log holds: give the check's pod log (oc logs job/NAME)")


def read_log(path: str, limit: Optional[int] = None) -> str:
    """The text of a saved log ('-' is stdin), at most `limit` bytes (MAX_LOG_BYTES). A path is opened only
    when it is a regular file of at most that size, so a FIFO, a device (/dev/zero) or a huge file is refused
    at once, never read; stdin is read up to the limit and refused past it. Raises LogError."""
    limit = MAX_LOG_BYTES if limit is None else limit
    if path == "-":
        stream = sys.stdin.buffer
        if stream.isatty():
            raise LogError("stdin is a terminal: pipe the log in (oc logs job/NAME | ... -), or name the file")
        data = stream.read(limit + 1)
        if len(data) > limit:
            raise LogError(f"more than {limit} bytes on stdin, more than a benchmark log holds: pipe in the check's pod log")
        return data.decode("utf-8", errors="replace")
    try:
        _refuse_unless_regular(os.stat(path), limit)
        # O_NONBLOCK: should the path have become a FIFO since, opening it does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise LogError(exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb") as f:
        _refuse_unless_regular(os.fstat(f.fileno()), limit)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise LogError(f"it grew past {limit} bytes while being read, more than a benchmark log holds")
    return data.decode("utf-8", errors="replace")


def cmd_report(a: argparse.Namespace) -> int:
    try:
        text = read_log(a.log)
    except LogError as exc:
        sys.stderr.write(f"bandwidth report: cannot read {a.log}: {exc}\n")
        return EXIT_USAGE
    verdict = judge(text, a.mode, a.line_rate_gbps, a.min_fraction, nodes=a.nodes, gpus_per_node=a.gpus_per_node)
    sys.stdout.write(verdict.render())
    return EXIT_PASS if verdict.ok else EXIT_FAIL


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of Gb/s")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction in (0, 1]")
    return value


def _sizes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-bytes", type=_positive_int, default=1024 * 1024)
    p.add_argument("--max-bytes", type=_positive_int, default=1024 * 1024 * 1024)
    p.add_argument("--iters", type=_positive_int, default=20)
    p.add_argument("--warmup", type=_count, default=5)
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl", help="gloo: CPU tensors, for tests")


def _verdict_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--line-rate-gbps", type=_rate, help="line rate the bus bandwidth is held against (none: report only)")
    p.add_argument("--min-fraction", type=_fraction, default=0.8)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bandwidth.py", description="All-reduce bandwidth check (see the module docstring).")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="run the benchmark on this node and judge it")
    c.add_argument("--tool", choices=TOOLS, default="auto")
    _verdict_args(c)
    _sizes(c)
    c.set_defaults(func=cmd_check)
    b = sub.add_parser("bench", help="the torch.distributed loop (one process per GPU, under torchrun)")
    _sizes(b)
    b.set_defaults(func=cmd_bench)
    r = sub.add_parser("report", help="the verdict from a saved log")
    r.add_argument("log", metavar="LOG", help="log file, or - for stdin")
    _verdict_args(r)
    r.add_argument("--nodes", type=_positive_int, help="nodes the check ran on (1: a one-node NIC test; default: it gates the fabric)")
    r.add_argument("--gpus-per-node", type=_positive_int, help="GPUs per node (a world size of one node's GPUs is one node)")
    r.set_defaults(func=cmd_report)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = parser().parse_args(argv)
    return int(a.func(a))


if __name__ == "__main__":
    sys.exit(main())
