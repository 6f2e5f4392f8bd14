"""`python -m stacks`: the command-line front door (see README "Commands").

Parses arguments and hands off to render/ and policy/; the only module of stacks/ that imports
upward. Every expected failure is one message on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import stacks
from stacks.model import BandwidthCheck, ClusterConfig


def _configs(args: argparse.Namespace) -> list[ClusterConfig]:
    if getattr(args, "config", None):
        if args.stacks or args.all:
            raise stacks.ConfigError("give either stack names/--all or --config FILE, not both")
        return [stacks.load_file(args.config)]
    names = list(stacks.STACKS) if args.all or not args.stacks else args.stacks
    return [stacks.load(n) for n in names]


def cmd_list(args: argparse.Namespace) -> int:
    for name in stacks.STACKS:
        print(name)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    config = stacks.load_file(args.config) if args.config else stacks.load(args.stack or "")
    sys.stdout.write(stacks.dump(config))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(ClusterConfig.model_json_schema(), indent=2, sort_keys=True))
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from render.engine import run
    from render.writer import write

    for config in _configs(args):
        target = write(run(config), Path(args.out))
        print(f"{config.name}: wrote {target}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Render each stack offline, run the preflight rules, print one finding per line; 1 on any error."""
    import policy
    from render.engine import run

    failed = False
    for config in _configs(args):
        rendering = run(config)
        findings = policy.check(
            config,
            [r.object for r in rendering.resources if not r.is_patch],
            [r.object for r in rendering.resources if r.is_patch],
        )
        for f in findings:
            print(f"{config.name}: {f.line()}")
        print(policy.summary(config.name, findings))
        failed = failed or bool(policy.errors(findings))
    return 1 if failed else 0


def cmd_diff(args: argparse.Namespace) -> int:
    from render import diff

    root = Path(stacks.__file__).resolve().parent.parent  # the project folder, where rendered/ lives
    for config in _configs(args):
        try:
            before = diff.committed(root, args.against, f"rendered/{config.name}")
        except diff.DiffError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        after = diff.fresh(config)
        label = f"{args.against}:rendered/{config.name}"
        if before is None:
            label += " (absent: every object is new)"
        sys.stdout.write(diff.report(config.name, label, diff.diff_trees(before or {}, after), len(after)))
    return 0


def cmd_outputs_schema(args: argparse.Namespace) -> int:
    from render.outputs import schema_json

    sys.stdout.write(schema_json())
    return 0


def _bandwidth_check(config: ClusterConfig, name: str | None) -> BandwidthCheck:
    names = [c.name for c in config.bandwidth_checks]
    if not names:
        raise stacks.ConfigError(f"stack {config.name!r} has no bandwidth checks (bandwidth_checks is empty)")
    if name is None and len(names) == 1:
        return config.bandwidth_checks[0]
    for c in config.bandwidth_checks:
        if c.name == name:
            return c
    have = ", ".join(names)
    if name is None:
        raise stacks.ConfigError(f"stack {config.name!r} has several bandwidth checks ({have}): name one with --check")
    raise stacks.ConfigError(f"stack {config.name!r} has no bandwidth check {name!r} (bandwidth_checks: {have})")


def cmd_bandwidth_report(args: argparse.Namespace) -> int:
    """A bandwidth check's verdict from a saved log; the values come from the check unless given."""
    from components.launcher import bandwidth

    mode, rate, fraction = args.mode, args.line_rate_gbps, args.min_fraction
    if args.stack or args.config:
        if args.stack and args.config:
            raise stacks.ConfigError("give either --stack STACK or --config FILE, not both")
        config = stacks.load_file(args.config) if args.config else stacks.load(args.stack)
        check = _bandwidth_check(config, args.check)
        mode = mode or check.transport
        rate = config.bandwidth_line_rate_gbps(check) if rate is None else rate
        fraction = check.min_fraction if fraction is None else fraction
    elif args.check:
        raise stacks.ConfigError("--check names a check of a stack: give --stack STACK or --config FILE too")
    if mode is None:
        raise stacks.ConfigError("give --mode rdma|tcp, or --stack STACK (and --check NAME) to take it from a check")
    if rate is not None and not rate > 0:
        raise stacks.ConfigError(f"--line-rate-gbps must be a positive number of Gb/s, got {rate:g}")
    fraction = BandwidthCheck.model_fields["min_fraction"].default if fraction is None else fraction
    if not 0 < fraction <= 1:
        raise stacks.ConfigError(f"--min-fraction must be in (0, 1], got {fraction:g}")
    try:
        text = bandwidth.read_log(args.log)
    except OSError as err:
        raise stacks.ConfigError(f"{args.log}: cannot read the log: {err.strerror or err}") from None
    verdict = bandwidth.judge(text, mode, rate, fraction)
    sys.stdout.write(verdict.render())
    return 0 if verdict.ok else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m stacks", description="GPU training stacks for OpenShift: config, render, check.")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="print the stack names").set_defaults(func=cmd_list)

    c = sub.add_parser("config", help="print a stack's validated config as YAML (also an input: --config FILE)")
    c.add_argument("stack", nargs="?")
    c.add_argument("--config", metavar="FILE", help="validate and print this YAML file instead")
    c.set_defaults(func=cmd_config)

    sub.add_parser("schema", help="print the JSON Schema of the config").set_defaults(func=cmd_schema)

    r = sub.add_parser("render", help="write every object the program would create, and the stack outputs")
    r.add_argument("stacks", nargs="*", metavar="STACK")
    r.add_argument("--all", action="store_true", help="every stack (the default when none is named)")
    r.add_argument("--config", metavar="FILE", help="render this YAML config instead of a named stack")
    r.add_argument("--out", default="rendered", metavar="DIR", help="output folder (default: rendered)")
    r.set_defaults(func=cmd_render)

    k = sub.add_parser("check", help="run the preflight policy: one finding per line; exit 1 on any error")
    k.add_argument("stacks", nargs="*", metavar="STACK")
    k.add_argument("--all", action="store_true", help="every stack (the default when none is named)")
    k.add_argument("--config", metavar="FILE", help="check this YAML config instead of a named stack")
    k.set_defaults(func=cmd_check)

    d = sub.add_parser("diff", help="what changed, object by object, between the render committed at a git ref and the working tree")
    d.add_argument("stacks", nargs="*", metavar="STACK")
    d.add_argument("--all", action="store_true", help="every stack (the default when none is named)")
    d.add_argument("--against", default="HEAD", metavar="GIT_REF", help="compare with rendered/ at this commit (default: HEAD)")
    d.set_defaults(func=cmd_diff, config=None)

    o = sub.add_parser("outputs-schema", help="print the JSON Schema of the stack outputs (published as schemas/outputs.v1.json)")
    o.set_defaults(func=cmd_outputs_schema)

    b = sub.add_parser(
        "bandwidth-report",
        help="the verdict of a bandwidth check from a saved log (oc logs job/NAME); exit 1 when it fails",
    )
    b.add_argument("log", metavar="LOG", help="the saved log, or - for stdin")
    b.add_argument("--stack", help="take mode, line rate and fraction from this stack's check")
    b.add_argument("--config", metavar="FILE", help="... or from a check of this YAML config")
    b.add_argument("--check", metavar="NAME", help="which bandwidth check (needed when the stack has several)")
    b.add_argument("--mode", choices=("rdma", "tcp"), help="transport the run had to use (default: the check's)")
    b.add_argument("--line-rate-gbps", type=float, metavar="X", help="line rate in Gb/s (default: the check's; none: report only)")
    b.add_argument("--min-fraction", type=float, metavar="F", help="fraction of the line rate that passes (default: the check's, or 0.8)")
    b.set_defaults(func=cmd_bandwidth_report)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except stacks.ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
