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
from stacks.model import ClusterConfig


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
