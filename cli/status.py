"""`python -m stacks status PULUMI_STACK`: per workload, whether it runs and, if not, why, in the stack file's words
(tools/status.py). Read only; `--live FILE` reads saved `oc get ... -o json` output instead of the cluster."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

import stacks


def cmd_status(
    args: argparse.Namespace, pulumi_stack: Callable[[str], stacks.PulumiStack], live_objects: Callable[[str], list[dict[str, Any]]]
) -> int:
    from tools import status

    target = pulumi_stack(args.pulumi_stack)
    if target.tier == "platform":
        raise stacks.ConfigError(
            f"{target.name} deploys the platform tier, which runs no pods: name the Pulumi stack of its projects "
            f"(python -m stacks list --pulumi-stacks)"
        )
    config = stacks.load(target.cluster)
    logs: dict[str, str] = {}
    unreadable: list[str] = []
    if args.live:
        objects = live_objects(args.live)
    else:
        objects, logs, unreadable = status.read_cluster(config, target.context)
    result = status.stack_status(config, target.name, None if args.live else target.context, objects, logs, unreadable)
    sys.stdout.write(result.model_dump_json(indent=2) + "\n" if args.json else status.report(result))
    return 0 if result.ok else 1


def cmd_status_schema(args: argparse.Namespace) -> int:
    from tools.status import schema_json

    sys.stdout.write(schema_json())
    return 0


def register(sub: Any, pulumi_stack: Callable[[str], stacks.PulumiStack], live_objects: Callable[[str], list[dict[str, Any]]]) -> None:
    """The `status` and `status-schema` commands; the command line's readers of a Pulumi stack file and of saved objects
    are passed in (they live in cli/main.py, which imports this module)."""
    st = sub.add_parser("status", help="per workload: running, or why not, in the stack file's words (reads the cluster); exit 1 when not")
    st.add_argument("pulumi_stack", metavar="PULUMI_STACK", help="the Pulumi stack (its file names the cluster, tier and kube context)")
    st.add_argument("--json", action="store_true", help="as JSON (schemas/status.v1.json)")
    st.add_argument("--live", metavar="FILE", help="read these objects (`oc get ... -o json`, a List) instead of the cluster")
    st.set_defaults(func=functools.partial(cmd_status, pulumi_stack=pulumi_stack, live_objects=live_objects))
    sub.add_parser("status-schema", help="print the JSON Schema of `status --json` (schemas/status.v1.json)").set_defaults(
        func=cmd_status_schema
    )
