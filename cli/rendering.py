"""`render` (every object the program would create, and the stack outputs, written only past the preflight) and
`diff` (object by object, the render committed at a git ref against a fresh one)."""

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import policy
import stacks
from cli import checking, configs, process
from config import project
from config.stack import ClusterConfig
from tools import diff
from tools.render import run  # imported here, before any fork, so each render worker starts warm (_in_children)
from tools.writer import write


def _rendered_outputs(path: Path) -> dict[str, object] | None:
    """The stack outputs of the render a render replaces (None: none), read with a rendered file's limits."""
    if path.is_symlink() or not path.is_file():  # the writer refuses the folder, naming what is wrong with it
        return None
    data = stacks.parse_json(stacks.read_text(path, stacks.RENDERED_LIMITS), str(path), stacks.RENDERED_LIMITS)
    return data if isinstance(data, dict) else None


def _render_one(config: ClusterConfig, tier: str, out: str, previous: dict[str, object] | None) -> str:
    """Render one stack, written only past the preflight: "wrote\tFOLDER\tWARNINGS\tCOUNT", or "refused\tFINDINGS"."""
    rendering = run(config, tier)
    findings = checking.preflight(config, rendering, previous)
    if bad := policy.errors(findings):
        return "refused\t" + "\n".join(line for f in bad for line in f.wrapped(f"{config.name}: "))
    # The warnings the stack does not accept, shown where the user looks after `make render`; `check` gives the fixes.
    warned = [f for f in findings if f.severity == "warning" and not f.accepted]
    folder = write(rendering, Path(out))
    return "\t".join(["wrote", str(folder), "\n".join(line for f in warned for line in f.stated(f"{config.name}: ")), str(len(warned))])


def _in_children(jobs: list[Callable[[], str]]) -> list[str]:
    """Run each job in a child forked from this process, the parent taking the first; the answers come back over pipes."""
    children = []
    for job in jobs[1:]:
        read, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(read)
            try:
                answer = "0" + job()
            except stacks.ConfigError as err:
                answer = "1" + str(err)
            except BaseException as err:  # anything else too: the child must answer and exit here, never return
                answer = f"1a render worker failed: {type(err).__name__}: {err}"
            with os.fdopen(write_end, "w", encoding="utf-8") as pipe:
                pipe.write(answer)
            os._exit(0)
        os.close(write_end)
        children.append((pid, read))
        process.CHILDREN.add(pid)  # an interrupted command ends them too, and waits for them
    try:
        answers = [jobs[0]()]
    finally:  # the children are always waited for, even when the parent's own job failed
        replies = []
        for pid, read in children:
            with os.fdopen(read, encoding="utf-8") as pipe:
                replies.append(pipe.read())
            os.waitpid(pid, 0)
            process.CHILDREN.discard(pid)
    for answer in replies:
        if not answer.startswith("0"):
            raise stacks.ConfigError(answer[1:] or "a render worker died without an answer")
        answers.append(answer[1:])
    return answers


def cmd_render(args: argparse.Namespace) -> int:
    if args.out is None:  # the project's, as it is when the command runs
        args.out = str(project.ROOT / "rendered")
    if not args.out:
        raise stacks.ConfigError("--out '' names no folder: give the folder to render into (default: rendered/)")
    chosen, broken = configs.each_from_args(args)
    if not chosen:
        return 2
    # One process per core, each dealt a similar number of workloads.
    lanes: list[list[ClusterConfig]] = [[] for _ in range(min(os.cpu_count() or 1, len(chosen)) if hasattr(os, "fork") else 1)]
    for config in sorted(chosen, key=lambda c: -len(c.all_workloads())):
        min(lanes, key=lambda lane: sum(len(c.all_workloads()) for c in lane)).append(config)

    # What the replaced render says ran (the capacity rule's "started"): from the folder, no git process to outlive a signal.
    previous = {c.name: _rendered_outputs(Path(args.out) / c.name / "outputs.json") for c in chosen}

    def lane_job(lane: list[ClusterConfig]) -> Callable[[], str]:
        return lambda: "\0".join(_render_one(c, args.tier, args.out, previous[c.name]) for c in lane)

    answers = _in_children([lane_job(lane) for lane in lanes])
    results = {c.name: t for lane, answer in zip(lanes, answers, strict=True) for c, t in zip(lane, answer.split("\0"), strict=True)}
    refused = 0
    for config in chosen:
        verdict, detail = results[config.name].split("\t", 1)
        if verdict == "wrote":
            folder, warnings, count = detail.split("\t")
            if warnings:
                print(warnings)
                folder += f" ({count} warning{'s' * (count != '1')} above: `python -m stacks check {config.name}` gives the fix)"
            print(f"{config.name}: wrote {folder}")
            continue
        refused += 1
        print(detail, file=sys.stderr)
        print(f"{config.name}: not written: the preflight found errors (above; `python -m stacks check {config.name}`)", file=sys.stderr)
    return 2 if broken else 1 if refused else 0


def cmd_diff(args: argparse.Namespace) -> int:
    for config in configs.from_args(args):
        before = diff.committed(project.ROOT, args.against, f"rendered/{config.name}")
        after = diff.fresh(config)
        label = f"{args.against}:rendered/{config.name}" + (" (absent: every object is new)" if before is None else "")
        sys.stdout.write(diff.report(config.name, label, diff.diff_trees(before or {}, after), len(after), args.config or "working tree"))
    return 0
