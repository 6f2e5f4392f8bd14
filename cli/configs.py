"""The commands that read configs and nothing more: `list`, `config`, `schema`; and which stacks a command names
(`from_args`, `each_from_args`, which check, render and diff use).

Light on purpose: these import the loader and the config model only, never the program or the tools (pulumi), so
that `list` answers at once; cli/main.py imports this module only when one of its commands runs.
"""

from __future__ import annotations

import argparse
import json
import sys

import stacks
from config.schema import schema
from config.stack import ClusterConfig
from config.text import escaped, escaped_lines


def from_args(args: argparse.Namespace) -> list[ClusterConfig]:
    """The configs a command names: its stacks (each once), --all or none (every stack), or --config FILE."""
    if getattr(args, "config", None):
        if args.stacks or args.all:
            raise stacks.ConfigError("give either stack names/--all or --config FILE, not both")
        return [stacks.load_file(args.config)]
    if args.all and args.stacks:
        raise stacks.ConfigError(f"give either stack names ({' '.join(args.stacks)}) or --all, not both")
    names = args.stacks or stacks.names()
    return [stacks.load(n) for n in dict.fromkeys(names)]  # a name given twice is one stack (rendered once)


def each_from_args(args: argparse.Namespace) -> tuple[list[ClusterConfig], bool]:
    """`from_args` for the commands that go through several stacks (render, check): a stack whose config does not load
    is reported (`error: ...` on stderr) and left out, so one broken stack stops only itself; (the configs that
    loaded, whether any did not). One stack, or --config FILE, fails as `from_args` does."""
    if getattr(args, "config", None) or args.all and args.stacks or len(dict.fromkeys(args.stacks)) == 1:
        return from_args(args), False
    wanted = list(dict.fromkeys(args.stacks or stacks.names()))
    if not wanted:
        raise stacks.ConfigError(f"no stacks: a stack is a module {stacks.CLUSTERS}/NAME.py (python -m stacks list)")
    configs = []
    for name in wanted:
        try:
            configs.append(stacks.load(name))
        except stacks.ConfigError as err:
            print(f"error: {escaped_lines(str(err))}", file=sys.stderr)
            print(f"{name}: not checked or rendered: its config does not load (above)", file=sys.stderr)
    return configs, len(configs) < len(wanted)


def cmd_list(args: argparse.Namespace) -> int:
    if args.pulumi_stacks:
        rows = [
            {
                "stack": s.name,
                "cluster": s.cluster,
                "tier": s.tier,
                "context": s.context or "",
                "kubeconfig_secret": f"KUBECONFIG_{s.cluster.upper().replace('-', '_')}",
            }
            for s in stacks.pulumi_stacks()
        ]
        if args.json:
            print(json.dumps(rows))
            return 0
        # Tab-separated under a header line naming the columns (`column -t` aligns them); --json for scripts.
        # A kube context's name is free text in a kubeconfig: shown escaped (a tab in it would shift the columns).
        lines = [f"{r['stack']}\t{r['cluster']}\t{r['tier']}\t{escaped(r['context'])}" for r in rows]
        print("\n".join(["STACK\tCLUSTER\tTIER\tCONTEXT", *lines]))
        return 0
    names = stacks.names()
    print(json.dumps(names) if args.json else "\n".join(names))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    if args.config and args.stack:
        raise stacks.ConfigError("give either a stack name or --config FILE, not both")
    if not args.config and not args.stack:
        raise stacks.ConfigError(f"name a stack ({', '.join(stacks.names())}) or give --config FILE")
    config = stacks.load_file(args.config) if args.config else stacks.load(args.stack)
    sys.stdout.write(stacks.dump(config))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(schema(), indent=2, sort_keys=True))
    return 0
