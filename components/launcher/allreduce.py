#!/usr/bin/env python3
"""The bandwidth check's torch.distributed all-reduce loop, run under torchrun by `bandwidth.py check --tool torch`.
Local rank 0 of every node prints nccl-tests' all_reduce_perf table format, so bandwidth.py reads both tools alike."""

from __future__ import annotations

import argparse
import os
import time
from typing import Callable, List, Optional, Sequence, Tuple

FLOAT_BYTES = 4  # a float32 sum, as all_reduce_perf's default
Half = Optional[Tuple[float, float, float, int]]  # time (us), algbw, busbw (GB/s), #wrong; None: N/A


def message_sizes(min_bytes: int, max_bytes: int) -> List[int]:  # doubling (all_reduce_perf -f 2), whole float32 elements
    sizes: List[int] = []
    size = max(min_bytes, FLOAT_BYTES)
    while size <= max_bytes:  # from FLOAT_BYTES up, doubling always reaches the next whole element: no size twice
        sizes.append(size - size % FLOAT_BYTES)
        size *= 2
    return sizes


def table_header(title: str) -> List[str]:
    return [
        f"# {title}",
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]


def table_row(size: int, count: int, halves: Sequence[Half]) -> str:  # out-of-place, then in-place
    cells = [f"{size:12d}", f"{count:13d}", f"{'float':>9}", f"{'sum':>7}", f"{-1:7d}"]
    for half in halves:  # time, algbw, busbw, #wrong in all_reduce_perf's widths
        texts = ["N/A"] * 4 if half is None else [f"{half[0]:.2f}", f"{half[1]:.2f}", f"{half[2]:.2f}", str(half[3])]
        cells += [f"{text:>{width}}" for text, width in zip(texts, (8, 7, 7, 6))]
    return " ".join(cells)


def table_trailer(busbw: Sequence[float], wrong: int) -> List[str]:
    avg = sum(busbw) / len(busbw) if busbw else 0.0
    return [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}", f"# Avg bus bandwidth    : {avg:.4f}", "#"]


def benchmark(sizes: Sequence[int], iters: int, warmup: int, backend: str, emit: Callable[[str], None]) -> None:
    """The first all-reduce of each size fills #wrong; the timed ones run on zeros; the slowest rank's time counts."""
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(local_rank)

    def sync() -> None:
        if backend == "nccl":
            torch.cuda.synchronize(device)

    dist.init_process_group(backend=backend)
    try:
        world = dist.get_world_size()
        say = emit if local_rank == 0 else (lambda _line: None)
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "0"))  # torchrun's nproc_per_node
        placed = f"nodes {world // per_node} ranks per node {per_node} " if per_node > 0 and world % per_node == 0 else ""
        title = f"torch.distributed all_reduce (allreduce.py): backend {backend} world size {world} {placed}"
        title += f"minBytes {sizes[0] if sizes else 0} maxBytes {sizes[-1] if sizes else 0} step: 2(factor) "
        title += f"warmup iters: {warmup} iters: {iters}; all_reduce works in place: out-of-place is N/A"
        say("\n".join(table_header(title)))
        busbw: List[float] = []
        total_wrong = 0
        for size in sizes:
            buf = torch.ones(size // FLOAT_BYTES, dtype=torch.float32, device=device)
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
            agreed = torch.tensor([time.perf_counter() - start, float(wrong)], dtype=torch.float64, device=device)
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
            seconds = float(agreed[0].item()) / iters
            algbw = size / seconds / 1e9
            busbw.append(algbw * 2.0 * (world - 1) / world)  # nccl-tests' busbw: what each rank's link carries in a ring
            total_wrong += int(agreed[1].item())
            say(table_row(size, size // FLOAT_BYTES, [None, (seconds * 1e6, algbw, busbw[-1], int(agreed[1].item()))]))
        say("\n".join(table_trailer(busbw, total_wrong)))
    finally:
        dist.destroy_process_group()


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="allreduce.py", description="The bandwidth check's torch.distributed loop, under torchrun.")
    for size, default in (("--min-bytes", 1024 * 1024), ("--max-bytes", 1024 * 1024 * 1024), ("--iters", 20), ("--warmup", 5)):
        p.add_argument(size, type=int, default=default)
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl", help="gloo: CPU tensors, for tests")
    a = p.parse_args(argv)
    benchmark(message_sizes(a.min_bytes, a.max_bytes), a.iters, a.warmup, a.backend, lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
