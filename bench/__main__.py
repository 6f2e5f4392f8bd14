"""`python -m bench`: wall time to render each stack and synthetic stacks of 25/50/100 workloads,
next to the time a fresh interpreter takes to `import pulumi_kubernetes` alone; `check` of generated stacks of
10/50/200 workloads on 16/512/4,096 nodes up to the largest the config's bounds accept, of queued stacks of 10 to 200
workloads (Kueue's combinations), and the placement search on large stacks (bench/scale.py), each also as a multiple of
that import; the phases of `make test`.

Two views, because `pulumi preview` pays both:
- end to end: a fresh `python -m stacks render --all` process (interpreter, imports, program, YAML);
- in process: the program's own work per stack once the imports are done (median of repeats).
The synthetic stacks copy Barcelona's h-kim workload N times, so the cost per workload shows whether
the program stays linear.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

import stacks
from bench import scale
from config.stack import ClusterConfig
from tools.render import run
from tools.writer import write

ROOT = Path(__file__).resolve().parent.parent


IMPORT_FLOOR = [sys.executable, "-c", "import pulumi_kubernetes"]
"""The reference every fresh-process figure is a ratio to: a fresh interpreter importing the kubernetes provider's SDK,
which any Pulumi program for Kubernetes pays. Measured in the same run, interleaved, so the machine's load (others
share its two cores) weighs on both sides alike."""


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh process, its children's CPU included."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def paired(cmd: list[str], repeats: int) -> tuple[float, float, float, float]:
    """The command and the import floor in turn, `repeats` pairs: (median wall, median CPU, median of the pairs' wall
    ratios, median of their CPU ratios). A ratio taken pair by pair stays meaningful while the machine's speed drifts."""
    pairs = [(timed(cmd), timed(IMPORT_FLOOR)) for _ in range(repeats)]
    return (
        statistics.median(a[0] for a, _ in pairs),
        statistics.median(a[1] for a, _ in pairs),
        statistics.median(a[0] / b[0] for a, b in pairs),
        statistics.median(a[1] / b[1] for a, b in pairs),
    )


def fresh(commands: list[list[str]], repeats: int) -> list[float]:
    """Median wall time of each command in a fresh process, the commands interleaved so that a slow moment
    of the machine weighs on all of them alike."""
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(repeats):
        for i, cmd in enumerate(commands):
            times[i].append(timed(cmd)[0])
    return [statistics.median(t) for t in times]


def in_process(config: ClusterConfig, out: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        write(run(config), out)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def synthetic(n: int) -> ClusterConfig:
    base = stacks.load("barcelona")
    (template,) = [w for w in base.workloads if w.name == "h-kim"]
    workloads = [template.model_copy(update={"name": f"w-{i:03d}", "tcp_variants": []}) for i in range(n)]
    # validate again so the synthetic stack is as checked as a real one
    return ClusterConfig.model_validate({**base.model_dump(), "name": f"synthetic-{n}", "workloads": [w.model_dump() for w in workloads]})


def main() -> int:
    py = sys.executable
    # What a user's second run has: the program's bytecode (the first run writes it, unless PYTHONDONTWRITEBYTECODE).
    subprocess.run([py, "-m", "compileall", "-q", "config", "stacks", "components", "policy", "tools", "cli"], cwd=ROOT, check=True)
    # Fresh processes are noisy on a 2-core machine: medians of several pairs, each with the import floor beside it.
    imp = statistics.median(timed(IMPORT_FLOOR)[0] for _ in range(3))
    e2e, e2e_cpu, ratio, cpu_ratio = paired([py, "-m", "stacks", "render", "--all", "--out", tempfile.mkdtemp()], 11)
    out = Path(tempfile.mkdtemp())
    run(stacks.load("nerc"))  # warm-up: lazy imports and first-run caches
    rows = []
    for name in stacks.names():
        config = stacks.load(name)
        t = in_process(config, out, 5)
        rows.append((name, len(config.all_workloads()), len(run(config).resources), t))
    stacks_total = sum(r[3] for r in rows)
    for n in (25, 50, 100):
        config = synthetic(n)
        rows.append((config.name, n, len(run(config).resources), in_process(config, out, 3)))

    print(f"import pulumi_kubernetes (fresh interpreter, median of 3): {imp * 1000:7.0f} ms")
    print(
        f"python -m stacks render --all (fresh process, 11 pairs with the import): {e2e * 1000:7.0f} ms wall, {e2e_cpu * 1000:.0f} ms "
        f"CPU = {ratio:.2f}x the import's wall (goal: at most 1.8x), {cpu_ratio:.2f}x its CPU (goal: at most 2.0x)"
    )
    print()
    print(f"{'stack':<14}{'workloads':>10}{'resources':>10}{'ms':>9}{'ms/resource':>13}{'x import':>10}")
    for name, workloads, resources, t in rows:
        print(f"{name:<14}{workloads:>10}{resources:>10}{t * 1000:>9.0f}{t * 1000 / resources:>13.2f}{t / imp:>10.2f}")
    print()
    print(f"three stacks in process: {stacks_total * 1000:.0f} ms = {stacks_total / imp:.2f}x import (target: within 2x)")
    per = {n: t / res for name, n, res, t in rows if name.startswith("synthetic")}
    print(
        f"cost per resource, 25 -> 100 workloads: {per[25] * 1000:.2f} -> {per[100] * 1000:.2f} ms "
        f"({per[100] / per[25]:.2f}x; 1.0 is linear)"
    )
    print()
    print_scale(imp)
    print()
    loop = edit_loop()
    print("the edit loop, `make test` warm (its phases in fresh processes, once each; goal: 45 s on a quiet 2-core machine):")
    for phase, seconds in loop:
        print(f"  {phase:<44}{seconds:7.1f} s")
    print(f"  {'make test':<44}{sum(s for _, s in loop):7.1f} s")
    return 0


def print_scale(imp: float) -> None:
    """The scale curve (bench/scale.py): `check` of generated stacks up to the largest the bounds accept, in process, then
    the largest in a fresh process as a user runs it; the placement search on the large stacks the tests count the steps
    of. Each time also as a multiple of `imp`, a fresh `import pulumi_kubernetes` measured in the same run: the machine's
    speed and load weigh on both alike (the tests bound this work by counting, never by seconds)."""
    print(f"reference: import pulumi_kubernetes, fresh interpreter: {imp * 1000:.0f} ms")
    print("check of generated stacks, in process (medians of 3; the render under mocks, which check skips, once, beside it):")
    head = f"{'stack':<22}{'templates':>10}{'nodes':>7}{'objects':>9}{'validate ms':>13}{'preflight ms':>14}{'check ms':>10}"
    print(f"{head}{'x import':>10}{'CPU ms':>8}{'render ms':>11}")
    for name, templates, nodes, objects, validated, preflight, cpu, rendered in scale.curve():
        row = f"{name:<22}{templates:>10}{nodes:>7}{objects:>9}{validated * 1000:>13.0f}{preflight * 1000:>14.0f}"
        check = validated + preflight
        print(f"{row}{check * 1000:>10.0f}{check / imp:>10.2f}{cpu * 1000:>8.0f}{rendered * 1000:>11.0f}")
    # End to end: interpreter, imports, the YAML file read with its lines, the preflight, the report.
    path = Path(tempfile.mkdtemp()) / "largest.yaml"
    path.write_text(yaml.safe_dump(scale.largest(), sort_keys=False), encoding="utf-8")
    wall, cpu, ratio, cpu_ratio = paired([sys.executable, "-m", "stacks", "check", "--config", str(path)], 5)
    floor_cpu = cpu / cpu_ratio
    print(
        f"python -m stacks check --config LARGEST.yaml, fresh process (5 pairs with the import): {wall * 1000:.0f} ms wall = "
        f"{ratio:.2f}x the import's, CPU {cpu * 1000:.0f} ms = {cpu_ratio:.2f}x the import's (goal: under 2 s of CPU, "
        f"{2 / floor_cpu:.1f}x the import's here)"
    )
    print(
        "check's preflight of queued stacks, all running on 16 nodes, Kueue admitting by quota (tests/policy/test_queue_placement.py "
        "counts the steps; medians of 3):"
    )
    print(f"{'stack':<22}{'workloads':>10}{'ms':>8}{'x import':>10}{'CPU ms':>8}  capacity")
    for name, workloads, wall, cpu, said in scale.queue_curve():
        print(f"{name:<22}{workloads:>10}{wall * 1000:>8.0f}{wall / imp:>10.2f}{cpu * 1000:>8.0f}  {said}")
    print("the placement search on large stacks (tests/policy/test_placement.py counts its steps; medians of 5):")
    print(f"{'case':<34}{'groups':>7}{'steps':>7}{'ms':>8}{'x import':>10}")
    for name, groups, steps, seconds in scale.placement_times():
        print(f"{name:<34}{groups:>7}{steps:>7}{seconds * 1000:>8.1f}{seconds / imp:>10.3f}")


def edit_loop() -> list[tuple[str, float]]:
    """Wall time of each phase of `make test` (Makefile): the preflight, the lint, the tests. Run here rather than
    through make, so a phase that fails still shows its time; the tests as `make test` runs them (their cached recipe
    replay included: a new commit replays the README recipes once)."""
    py = sys.executable
    phases = [
        ("make check (the preflight of every stack)", ["make", "-s", "check"]),
        ("make lint (ruff, mypy, the workflow schema)", ["make", "-s", "lint"]),
        (
            'pytest -q -rs -n auto --dist worksteal -m "not torch"',
            [py, "-m", "pytest", "-q", "-rs", "-n", "auto", "--dist", "worksteal", "-m", "not torch"],
        ),
    ]
    out = []
    for name, cmd in phases:
        t = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append((name, time.perf_counter() - t))
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["scale"]:  # the scale curve alone: `python -m bench scale`
        print_scale(fresh([[sys.executable, "-c", "import pulumi_kubernetes"]], 5)[0])
        sys.exit(0)
    sys.exit(main())
