"""The commands about a cluster's objects: what you may declare (`rights`), adopting what was made by hand
(`import-plan`, `adopt-diff`), what was changed by hand since (`drift`), the way back after a killed `pulumi up`
(`recover`), and per workload whether it runs and, if not, why (`status`, tools/status/). Most name a Pulumi stack and
read the cluster unless given its objects as a file."""

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import stacks
from config.text import escaped, escaped_lines
from tools import adoption, drift, kubectl, recovery
from tools.status import report as status
from tools.status.cluster import read_cluster


def cmd_import_plan(args: argparse.Namespace) -> int:
    target = pulumi_stack(args.pulumi_stack, "that imports")
    config = stacks.load(target.cluster)
    kinds = [k.strip() for k in args.only.split(",") if k.strip()] if args.only else None
    plan = adoption.import_plan(config, target.name, target.tier, kinds)
    text = json.dumps(plan, indent=2) + "\n"
    # nad_mode operator: the hand-made NAD copies are not adopted; they go before the operator makes the networks.
    if deletions := adoption.operator_deletions(config):
        print(f"{target.name}: delete first (nad_mode operator; not in the plan):", file=sys.stderr)
        print("\n".join(f"  {escaped(line)}" for line in deletions), file=sys.stderr)
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as err:
            raise stacks.ConfigError(f"{escaped(args.out)}: cannot write the import file: {err.strerror or err}") from None
        objects = sum(1 for r in plan["resources"] if not r.get("component"))
        summary = f"{objects} object(s) to adopt under {len(plan['resources']) - objects} component(s)"
        print(f"{target.name} ({target.cluster}, tier {target.tier}): wrote {escaped(args.out)}: {summary}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_adopt_diff(args: argparse.Namespace) -> int:
    config = stacks.load(args.stack)
    report, narrowing = adoption.adopt_diff(config, stacks.read_yaml(Path(args.live), stacks.LIVE_LIMITS), str(args.live))
    sys.stdout.write(escaped_lines(report))
    return 1 if narrowing else 0


def pulumi_stack(name: str, role: str = "") -> stacks.PulumiStack:
    """The Pulumi stack a command names (held to Pulumi's grammar first: the name goes into the commands it prints)."""
    stacks.check_stack_name(name)
    files = {s.name: s for s in stacks.pulumi_stacks()}
    if (target := files.get(name)) is None:
        what = f"the Pulumi stack {role}" if role else "a Pulumi stack"
        raise stacks.ConfigError(
            f"no Pulumi.{name}.yaml: name {what} ({', '.join(files) or 'none'}); its file says which cluster, tier and context"
        )
    return target


def require_context(command: str, target: stacks.PulumiStack, api_host: str | None, offline: str = "") -> None:
    """Before a command reads the cluster: the stack file's kube context is in the kubeconfig; else one message with both
    ways on (log in and name the context, or give saved objects: `offline`), not one `oc` failure per kind read."""
    tool = shutil.which("oc") or shutil.which("kubectl")
    if tool is None or not target.context:  # no tool: the command's own read says so; no context: the current one
        return
    try:
        proc = kubectl.run([tool, "config", "get-contexts", "-o", "name"], command)
    except stacks.ConfigError:
        return  # the command's own read reports what is wrong with the tool
    if proc.returncode != 0 or target.context in proc.stdout.split():
        return
    server = f"https://{api_host}:6443" if api_host else "https://api.CLUSTER:6443"
    offline = offline or (
        f"`python -m stacks {command} {shlex.quote(target.name)} --live FILE`, FILE the objects as `oc get ... -o yaml` saved them"
    )
    raise stacks.ConfigError(
        f"{command} {target.name}: the kubeconfig has no context {target.context!r} ({target.path.name} names it in "
        f"kubernetes:context), so the cluster cannot be read. Log in and name the context: `oc login --server={server}`, then "
        f'`oc config rename-context "$(oc config current-context)" {shlex.quote(target.context)}` (docs/deploy.md). Or, without '
        f"the cluster: {offline}"
    )


def cmd_drift(args: argparse.Namespace) -> int:
    target = pulumi_stack(args.pulumi_stack)
    config = stacks.load(target.cluster)
    declared = drift.declared_for(config, target.tier)
    if not args.live:
        require_context("drift", target, config.api_host)
    found = drift.drift(config, declared, live_objects(args.live) if args.live else drift.read_live(declared, target.context))
    sys.stdout.write(escaped_lines(drift.report(config, found, target.name)))
    return 1 if found else 0


def live_objects(file: str) -> list[dict[str, Any]]:
    """The objects of a saved `oc get ... -o yaml` (or json), each of the shape the tools read (tools/kubectl.py)."""
    data = stacks.read_yaml(Path(file))
    # A List (`oc get ... -o yaml`), its items alone (`jq .items`), or one object (`oc get KIND NAME -o yaml`).
    if isinstance(data, dict) and str(data.get("kind", "")).endswith("List"):
        live = data.get("items", [])
    else:
        live = data if isinstance(data, list) else [data]
    if not isinstance(live, list):
        raise stacks.ConfigError(f"{escaped(file)}: items of the List is not a list: not the output of `oc get ... -o yaml`")
    kubectl.check(live, escaped(file))
    if not all(isinstance(o.get("metadata"), dict) for o in live):
        raise stacks.ConfigError(f"{escaped(file)}: not Kubernetes objects (the output of `oc get ... -o yaml`)")
    return live


def cmd_recover(args: argparse.Namespace) -> int:
    target = pulumi_stack(args.pulumi_stack)
    if (root := None if args.state else recovery.diy_root()) is not None:
        if half := recovery.half_written(root, target.name):  # nothing can read the state until these go: say so first
            print(f"{target.name}: the state backend cannot load the stack: a killed run left {len(half)} file(s) empty:")
            print("\n".join(f"  {escaped(p)}" for p in half))
            print("Each is the attributes file of a checkpoint or lock that is whole (a rename wrote it): remove them, then run")
            print("this again:\n")
            print("1. " + escaped(shlex.join(["rm", *map(str, half)])))
            print("2. " + shlex.join(["python", "-m", "stacks", "recover", target.name]))
            return 1
    if not args.state and shutil.which("pulumi") is None:
        raise stacks.ConfigError(
            "recover reads the stack's state with the Pulumi CLI, which is not on PATH: install it (`curl -fsSL "
            "https://get.pulumi.com | sh`, https://www.pulumi.com/docs/install/), or give a saved `pulumi stack export` "
            f"with `python -m stacks recover {shlex.quote(target.name)} --state FILE`"
        )
    ops = recovery.pending(recovery.exported(target.name, args.state))
    creates = [p.obj for p in ops if p.op == "creating" and p.obj is not None]
    if creates and not args.live:
        require_context("recover", target, stacks.load(target.cluster).api_host)
    keys = {drift.key_of(o) for o in live_objects(args.live)} if args.live else recovery.existing(creates, target.context)
    text, _ = recovery.plan(target.name, ops, keys, recovery.locks(root, target.name) if root is not None else None)
    sys.stdout.write(escaped_lines(text))
    return 0


def cmd_rights(args: argparse.Namespace) -> int:
    config = stacks.load(args.stack)
    if not args.run:
        sys.stdout.write(escaped_lines(adoption.rights_report(config, args.tier)))
        return 0
    if (tool := shutil.which("oc") or shutil.which("kubectl")) is None:
        raise stacks.ConfigError(
            "rights --run: neither oc nor kubectl is on PATH: install the OpenShift CLI (oc, from your cluster's console: "
            "? > Command line tools), or run the lines `python -m stacks rights` prints by hand"
        )
    files = {s.tier: s for s in stacks.pulumi_stacks() if s.cluster == config.name}
    offline = f"run the lines `python -m stacks rights {shlex.quote(config.name)}` prints by hand, logged in to the cluster"
    for target in files.values():
        require_context("rights", target, config.api_host, offline)
    said: dict[tuple[str | None, str], str] = {}

    def answer(tier: str, line: str) -> str:
        # A tier's lines are asked with its stack file's context; the reads (the preview's) with the project tier's.
        target = files.get(tier) or files.get("project") or files.get("all") or next(iter(files.values()), None)
        context = target.context if target is not None else None
        if (context, line) not in said:
            said[context, line] = can_i(tool, shlex.split(line)[3:], context)
        return said[context, line]

    sys.stdout.write(escaped_lines(adoption.rights_report(config, args.tier, answer)))
    no = [line for line in said.items() if line[1] != "yes"]
    where = ", ".join(f"context {c}" for c in sorted({c or "(current)" for c, _ in said}))
    print(f"{config.name}: {len(said) - len(no)} of {len(said)} answered yes ({where})" + (f"; {len(no)} did not: above" if no else ""))
    return 1 if no else 0


def can_i(tool: str, asked: list[str], context: str | None) -> str:
    """What `oc auth can-i` answers (yes, no), or why it did not."""
    cmd = [tool, "auth", "can-i", *asked, *(["--context", context] if context else [])]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return f"not asked: {err}"
    if (out := proc.stdout.strip()) in ("yes", "no"):
        return out
    return "not answered: " + ((proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0])[:200]


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
    # Either way the commands it prints name the stack's kube context, so a pasted one acts on the stack's cluster.
    source = args.live or "the objects read from the cluster"
    result = status.stack_status(config, target.name, target.context, objects, logs, unreadable, source, saved=bool(args.live))
    sys.stdout.write(result.model_dump_json(indent=2) + "\n" if args.json else status.report(result))
    return 0 if result.ok else 1


def cmd_status_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(status.schema_json())
    return 0
