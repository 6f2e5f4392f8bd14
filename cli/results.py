"""What a deployed stack reports back, read offline: the schema of its stack outputs (`outputs-schema`) and the
verdict of a bandwidth check from its saved log (`bandwidth-report`). Neither needs the program or the tools: this
module imports no pulumi, so both answer as fast as `list`."""

import argparse
import sys

import stacks
from components.launcher import bandwidth
from components.outputs import schema_json
from config.stack import ClusterConfig
from config.text import escaped_lines
from config.workloads import BandwidthCheck


def cmd_outputs_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(schema_json())
    return 0


def _bandwidth_check(config: ClusterConfig, name: str | None) -> BandwidthCheck:
    names = [c.name for c in config.bandwidth_checks]
    if not names:
        raise stacks.ConfigError(f"stack {config.name!r} has no bandwidth checks (bandwidth_checks is empty)")
    if name is None and len(names) == 1:
        return config.bandwidth_checks[0]
    if found := next((c for c in config.bandwidth_checks if c.name == name), None):
        return found
    have = ", ".join(names)
    if name is None:
        raise stacks.ConfigError(f"stack {config.name!r} has several bandwidth checks ({have}): name one with --check")
    raise stacks.ConfigError(f"stack {config.name!r} has no bandwidth check {name!r} (bandwidth_checks: {have})")


def cmd_bandwidth_report(args: argparse.Namespace) -> int:
    """A bandwidth check's verdict from a saved log; the values come from the check unless given."""
    mode, rate, fraction = args.mode, args.line_rate_gbps, args.min_fraction
    nodes, gpus = args.nodes, args.gpus_per_node
    if args.stack or args.config:
        if args.stack and args.config:
            raise stacks.ConfigError("give either --stack STACK or --config FILE, not both")
        config = stacks.load_file(args.config) if args.config else stacks.load(args.stack)
        check = _bandwidth_check(config, args.check)
        mode = mode or check.transport
        rate = config.bandwidth_line_rate_gbps(check) if rate is None else rate
        fraction = check.min_fraction if fraction is None else fraction
        nodes = check.nodes if nodes is None else nodes
        gpus = check.gpus_per_node if gpus is None else gpus
    elif args.check:
        raise stacks.ConfigError("--check names a check of a stack: give --stack STACK or --config FILE too")
    if mode is None:
        raise stacks.ConfigError("give --mode rdma|tcp, or --stack STACK (and --check NAME) to take it from a check")
    if rate is not None and not rate > 0:
        raise stacks.ConfigError(f"--line-rate-gbps must be a positive number of Gb/s, got {rate:g}")
    fraction = BandwidthCheck.model_fields["min_fraction"].default if fraction is None else fraction
    if not 0 < fraction <= 1:
        raise stacks.ConfigError(f"--min-fraction must be in (0, 1], got {fraction:g}")
    for flag, value in (("--nodes", nodes), ("--gpus-per-node", gpus)):
        if value is not None and value < 1:
            raise stacks.ConfigError(f"{flag} must be a positive number of {flag[2:].replace('-', ' ')}, got {value}")
    try:
        text = bandwidth.read_log(args.log)
    except bandwidth.LogError as err:
        raise stacks.ConfigError(f"{args.log}: cannot read the log: {err}") from None
    verdict = bandwidth.judge(text, mode, rate, fraction, nodes=nodes, gpus_per_node=gpus)
    sys.stdout.write(escaped_lines(verdict.render()))  # it quotes the log: a host name, a network, a line
    return 0 if verdict.ok else 1
