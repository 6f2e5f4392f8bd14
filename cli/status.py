"""`python -m stacks status PULUMI_STACK`: per workload, whether it runs and, if not, why, in the stack file's words
(tools/status/). Read only; `--live FILE` reads saved `oc get ... -o json` output instead of the cluster. Either way the
commands it prints name the stack's kube context, so a pasted one acts on the stack's cluster."""

from __future__ import annotations

import argparse
import shlex
import sys

import stacks
from cli.cluster import live_objects, pulumi_stack, require_context
from tools.status import report
from tools.status.cluster import read_cluster


def cmd_status(args: argparse.Namespace) -> int:
    target = pulumi_stack(args.pulumi_stack)
    if target.tier == "platform":
        raise stacks.ConfigError(
            f"{target.name} deploys the platform tier, which runs no pods: name the Pulumi stack of its projects "
            f"(python -m stacks list --pulumi-stacks)"
        )
    config = stacks.load(target.cluster)
    if not args.live:
        offline = (
            f"`python -m stacks status {shlex.quote(target.name)} --live FILE`, FILE saved by `oc get "
            "statefulsets,jobs,pods,events,nodes -o json -n NAMESPACE > FILE`"
        )
        require_context("status", target, config.api_host, offline)
        objects, logs, unreadable = read_cluster(config, target.context)
    else:
        objects, logs, unreadable = live_objects(args.live), {}, []
    source = args.live or "the objects read from the cluster"
    result = report.stack_status(config, target.name, target.context, objects, logs, unreadable, source, saved=bool(args.live))
    sys.stdout.write(result.model_dump_json(indent=2) + "\n" if args.json else report.report(result))
    return 0 if result.ok else 1


def cmd_status_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(report.schema_json())
    return 0
