"""`python -m stacks`: the command-line front door (see README "Commands"), the top layer. The parser is here; each
command runs in its group's module (GROUPS). Every expected failure is one message on stderr and a non-zero exit, never
a traceback. A stack is loaded as `pulumi up -s STACK` loads it: the YAML file its stack files name, else its module."""

import argparse
import functools
import gc
import importlib
import os
import signal
import sys

import stacks
from cli import process
from config.text import escaped_lines

# Each command's module in cli/ (its function there, cmd_NAME, takes the parsed arguments and answers the exit code).
GROUPS = {
    "configs": ("list", "config", "schema"),
    "checking": ("check",),
    "rendering": ("render", "diff"),
    "results": ("outputs-schema", "bandwidth-report"),
    "cluster": ("rights", "import-plan", "adopt-diff", "drift", "recover", "status", "status-schema"),
}
COMMANDS = {command: (group, "cmd_" + command.replace("-", "_")) for group, commands in GROUPS.items() for command in commands}


def _stacks(p: argparse.ArgumentParser, config_help: str) -> None:  # the stacks render, check and diff take
    p.add_argument("stacks", nargs="*", metavar="STACK", help="a stack name (python -m stacks list); none, or --all, means every stack")
    p.add_argument("--all", action="store_true", help="every stack (the default when none is named)")
    p.add_argument("--config", metavar="FILE", help=config_help)


@functools.cache
def parser() -> argparse.ArgumentParser:
    """The command line, built once per process (its 90 arguments cost more than parsing): no default may vary."""
    p = argparse.ArgumentParser(prog="python -m stacks", description="GPU training stacks for OpenShift: config, render, check.")
    add = p.add_subparsers(dest="command", required=True, metavar="COMMAND").add_parser

    # The commands that read a stack: list, config, schema, render, check, diff.
    ls = add("list", help="print the stack names")
    ls.add_argument(
        "--pulumi-stacks", action="store_true", help="list the Pulumi stack files instead (header line, then stack, cluster, tier, context)"
    )
    ls.add_argument("--json", action="store_true", help="as JSON (the pull-request workflow's preview matrix reads it)")

    c = add("config", help="print a stack's validated config as YAML (also an input: --config FILE)")
    c.add_argument("stack", nargs="?", metavar="STACK", help="the stack to print (python -m stacks list)")
    c.add_argument("--config", metavar="FILE", help="validate and print this YAML file instead")

    sc = add("schema", help="describe each field of the config: its type, bounds, default and what it is")
    sc.add_argument("--json", action="store_true", help="the config's JSON Schema instead, every field described")

    r = add("render", help="write every object the program would create, and the stack outputs")
    _stacks(r, "render this YAML config instead of a named stack")
    r.add_argument("--out", metavar="DIR", help="output folder (default: rendered/)")
    r.add_argument("--tier", choices=stacks.TIERS, default="all", help="render one tier only (default: all)")

    k = add("check", help="run the preflight policy: one finding per line; exit 1 on any error")
    _stacks(k, "check this YAML config instead of a named stack")
    k.add_argument(
        "--against", metavar="GIT_REF", help="compare with the stack and render committed at this ref: what is new, claims (default: HEAD)"
    )
    k.add_argument("-v", "--verbose", action="store_true", help="print the warnings the stack accepts too, each with its reason")

    d = add("diff", help="what changed, object by object, between the render committed at a git ref and now")
    _stacks(d, "compare this YAML config's render with the committed render of its stack")
    d.add_argument("--against", default="HEAD", metavar="GIT_REF", help="compare with rendered/ at this commit (default: HEAD)")

    # The commands about what a stack produces: its outputs' schema, a bandwidth check's verdict.
    add("outputs-schema", help="print the JSON Schema of the stack outputs (published as schemas/outputs.v2.json)")

    b = add("bandwidth-report", help="the verdict of a bandwidth check from a saved log (oc logs job/NAME); exit 1 when it fails")
    b.add_argument("log", metavar="LOG", help="the saved log, or - for stdin")
    b.add_argument("--stack", help="take mode, line rate and fraction from this stack's check")
    b.add_argument("--config", metavar="FILE", help="... or from a check of this YAML config")
    b.add_argument("--check", metavar="NAME", help="which bandwidth check (needed when the stack has several)")
    b.add_argument("--mode", choices=("rdma", "tcp"), help="transport the run had to use (default: the check's)")
    b.add_argument("--line-rate-gbps", type=float, metavar="X", help="line rate in Gb/s (default: the check's; none: report only)")
    b.add_argument("--min-fraction", type=float, metavar="F", help="fraction of the line rate that passes (default: the check's, or 0.8)")
    b.add_argument(
        "--nodes", type=int, metavar="N", help="nodes the check ran on (default: the check's; none: it gates the fabric, one node fails)"
    )
    b.add_argument("--gpus-per-node", type=int, metavar="N", help="GPUs per node (default: the check's): a world that size is one node")

    # The commands that work with a cluster: import, adopt, drift, recover, rights, status.
    i = add("import-plan", help="a `pulumi import --file` plan that adopts the hand-made objects a Pulumi stack declares")
    i.add_argument(
        "pulumi_stack",
        metavar="PULUMI_STACK",
        help="the Pulumi stack that imports (e.g. barcelona-platform): its file names cluster and tier",
    )
    i.add_argument("--only", metavar="KIND,...", help="only objects of these kinds (e.g. ServiceAccount,PersistentVolumeClaim)")
    i.add_argument("--out", metavar="FILE", help="write the plan here (default: stdout)")

    a = add("adopt-diff", help="what adopting a live object (oc get -o yaml) would change or remove; exit 1 when it narrows it")
    a.add_argument("stack", metavar="STACK", help="the stack that declares the object")
    a.add_argument("live", metavar="LIVE.yaml", help="the live object as `oc get KIND NAME -o yaml` prints it")

    dr = add("drift", help="what was changed by hand on the cluster, in the stack file's words; exit 1 on drift")
    dr.add_argument("pulumi_stack", metavar="PULUMI_STACK", help="the Pulumi stack (its file names the cluster, tier and kube context)")
    dr.add_argument("--live", metavar="FILE", help="compare with these objects (`oc get ... -o yaml`) instead of the cluster")

    rc = add("recover", help="after a killed `pulumi up`: the refresh that settles its pending operations (reads the cluster)")
    rc.add_argument("pulumi_stack", metavar="PULUMI_STACK", help="the Pulumi stack whose run was killed")
    rc.add_argument("--state", metavar="FILE", help="a saved `pulumi stack export` (default: run it)")
    rc.add_argument("--live", metavar="FILE", help="the objects on the cluster (`oc get ... -o yaml`) instead of reading it")

    g = add("rights", help="per object: its tier and the `oc auth can-i` line that checks you may declare it")
    g.add_argument("stack", metavar="STACK", help="the stack to list")
    g.add_argument("--tier", choices=stacks.TIERS, default="all", help="list one tier only (default: all)")
    g.add_argument("--run", action="store_true", help="run each line (oc, the stack files' contexts) and say its answer; exit 1 on a no")

    st = add("status", help="per workload: running, or why not, in the stack file's words (reads the cluster); exit 1 when not")
    st.add_argument("pulumi_stack", metavar="PULUMI_STACK", help="the Pulumi stack (its file names the cluster, tier and kube context)")
    st.add_argument("--json", action="store_true", help="as JSON (schemas/status.v1.json)")
    st.add_argument("--live", metavar="FILE", help="read these objects (`oc get ... -o json`, a List) instead of the cluster")

    add("status-schema", help="print the JSON Schema of `status --json` (schemas/status.v1.json)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    group, name = COMMANDS[args.command]
    # Imported only now: only the commands that render pay for importing pulumi (most of a second).
    try:
        return int(getattr(importlib.import_module(f"cli.{group}"), name)(args))
    except stacks.ConfigError as err:
        # A message may quote what a file, the cluster or a log holds: whatever it brought is shown escaped.
        print(f"error: {escaped_lines(str(err))}", file=sys.stderr)
        return 2


def run() -> None:
    """The process around main(): `python -m stacks` (stacks/__main__.py) and the `stacks` console script."""
    # A short-lived command: collecting long-lived objects and tearing the interpreter down cost as much as a render.
    gc.disable()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # output piped into `head` ends quietly, no BrokenPipeError
    process.setup()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
