"""`python -m stacks`: the command-line front door (see README "Commands"), the top layer.

Parses arguments and hands off to the tools (tools/), the preflight (policy/) and the program (components/).
Every expected failure is one message on stderr and a non-zero exit, never a traceback.
A stack named on the command line is loaded the way `pulumi up -s STACK` loads it: from the YAML
file its stack files name in gpu-training:configFile, else from its module.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import stacks
from cli import status
from config import project
from config.stack import ClusterConfig
from config.workloads import BandwidthCheck
from stacks import _process

if TYPE_CHECKING:  # the command line imports the program (tools/, policy/) only in the commands that use it
    from policy.core import Finding
    from tools.render import Rendering

STACK_HELP = "a stack name (python -m stacks list); none, or --all, means every stack"


def _configs(args: argparse.Namespace) -> list[ClusterConfig]:
    if getattr(args, "config", None):
        if args.stacks or args.all:
            raise stacks.ConfigError("give either stack names/--all or --config FILE, not both")
        return [stacks.load_file(args.config)]
    if args.all and args.stacks:
        raise stacks.ConfigError(f"give either stack names ({' '.join(args.stacks)}) or --all, not both")
    names = args.stacks or stacks.names()
    return [stacks.load(n) for n in dict.fromkeys(names)]  # a name given twice is one stack (rendered once)


def _each_config(args: argparse.Namespace) -> tuple[list[ClusterConfig], bool]:
    """`_configs` for the commands that go through several stacks (render, check): a stack whose config does not load
    is reported (`error: ...` on stderr) and left out, so one broken stack stops only itself; (the configs that
    loaded, whether any did not). One stack, or --config FILE, fails as `_configs` does."""
    if getattr(args, "config", None) or args.all and args.stacks or len(dict.fromkeys(args.stacks)) == 1:
        return _configs(args), False
    wanted = list(dict.fromkeys(args.stacks or stacks.names()))
    if not wanted:
        raise stacks.ConfigError(f"no stacks: a stack is a module {stacks.CLUSTERS}/NAME.py (python -m stacks list)")
    configs = []
    for name in wanted:
        try:
            configs.append(stacks.load(name))
        except stacks.ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            print(f"{name}: not checked or rendered: its config does not load (above)", file=sys.stderr)
    return configs, len(configs) < len(wanted)


def _previous(name: str, ref: str | None) -> dict[str, object] | None:
    """The stack outputs of the render committed at `ref` (what the cluster holds, as far as the
    repository knows), or None outside git or for a stack the ref does not have."""
    from tools import diff

    try:
        files = diff.committed(project.ROOT, ref or "HEAD", f"rendered/{name}")
    except diff.DiffError as err:
        if ref:
            raise stacks.ConfigError(f"--against {ref}: cannot read the committed render: {err}") from None
        return None
    out = (files or {}).get("outputs.json")
    return out if isinstance(out, dict) else None


def _rendered_outputs(path: Path) -> dict[str, object] | None:
    """The stack outputs of the render on disk that a render replaces, or None where there is none. Read as the
    committed render is (a rendered file's limits): a file that is not one is a message naming it, not a crash."""
    if path.is_symlink() or not path.is_file():  # the writer refuses the folder, naming what is wrong with it
        return None
    data = stacks.parse_json(stacks.read_text(path, stacks.RENDERED_LIMITS), str(path), stacks.RENDERED_LIMITS)
    return data if isinstance(data, dict) else None


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
        print("\n".join(["STACK\tCLUSTER\tTIER\tCONTEXT", *(f"{r['stack']}\t{r['cluster']}\t{r['tier']}\t{r['context']}" for r in rows)]))
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
    from config.schema import schema

    print(json.dumps(schema(), indent=2, sort_keys=True))
    return 0


def _preflight(
    config: ClusterConfig, rendering: Rendering | None, previous: dict[str, object] | None, others: list[ClusterConfig] | None = None
) -> list[Finding]:
    """The rules over a rendering (`render`), each finding located in the config by the provenance layout() carries
    (the entry each object is rendered from), as the Pulumi program's preflight does (__main__.py). Without a rendering
    (`check`), over the objects layout() declares, as that preflight reads them: the same objects the components register
    (tests/test_program.py, tests/test_properties.py), without the mock runtime, which is most of a render's time and
    would be most of a large stack's check (docs/performance.md, "Scale"). `others`: the stacks compared with (default:
    the project's others)."""
    import policy
    from components.program import layout, sources

    whole = layout(config)
    if rendering is None:
        objects = [d.object for d in whole if not d.patch]
        patches = [d.object for d in whole if d.patch]
    else:
        objects = [r.object for r in rendering.resources if not r.is_patch]
        patches = [r.object for r in rendering.resources if r.is_patch]
    return policy.check(config, objects, patches, previous=previous, others=others, sources=sources(whole))


def _render_one(config: ClusterConfig, tier: str, out: str, previous: dict[str, object] | None) -> str:
    """Render one stack and run the preflight on it (as `pulumi preview` would); write it only when the preflight
    finds no error. Answers "wrote\tFOLDER", or "refused\tFINDINGS" (its folder left as it was)."""
    import policy
    from tools.render import run
    from tools.writer import WriteError, write

    rendering = run(config, tier)
    bad = policy.errors(_preflight(config, rendering, previous))
    if bad:
        return "refused\t" + "\n".join(line for f in bad for line in f.wrapped(f"{config.name}: "))
    try:
        return "wrote\t" + str(write(rendering, Path(out)))
    except WriteError as err:
        raise stacks.ConfigError(str(err)) from None


def _in_children(jobs: list[Callable[[], str]]) -> list[str]:
    """Run each job in a child forked from this process (imports and configs already loaded), at most one
    per core, the parent taking the first; a job's answer, or its error message, comes back over a pipe."""
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
        _process.CHILDREN.add(pid)  # an interrupted command ends them too, and waits for them
    try:
        answers = [jobs[0]()]
    finally:  # the children are always waited for, even when the parent's own job failed
        replies = []
        for pid, read in children:
            with os.fdopen(read, encoding="utf-8") as pipe:
                replies.append(pipe.read())
            os.waitpid(pid, 0)
            _process.CHILDREN.discard(pid)
    for answer in replies:
        if not answer.startswith("0"):
            raise stacks.ConfigError(answer[1:] or "a render worker died without an answer")
        answers.append(answer[1:])
    return answers


def cmd_render(args: argparse.Namespace) -> int:
    import tools.render  # noqa: F401  (imported before any fork, so each child starts warm)
    import tools.writer  # noqa: F401

    if not args.out:
        raise stacks.ConfigError("--out '' names no folder: give the folder to render into (default: rendered/)")
    configs, broken = _each_config(args)
    if not configs:
        return 2
    cores = os.cpu_count() or 1
    # Stacks render independently, and a fresh `render --all` runs on every pull request and in `make test`:
    # one process per core, the stacks dealt out so that each process gets a similar number of workloads.
    lanes: list[list[ClusterConfig]] = [[] for _ in range(min(cores, len(configs)) if hasattr(os, "fork") else 1)]
    for config in sorted(configs, key=lambda c: -len(c.all_workloads())):
        min(lanes, key=lambda lane: sum(len(c.all_workloads()) for c in lane)).append(config)

    # What the render being replaced says ran (the capacity rule names what a change started), read from the folder
    # itself: no git process, which a signal to the command could leave running.
    previous = {c.name: _rendered_outputs(Path(args.out) / c.name / "outputs.json") for c in configs}

    def lane_job(lane: list[ClusterConfig]) -> Callable[[], str]:
        return lambda: "\0".join(_render_one(c, args.tier, args.out, previous[c.name]) for c in lane)

    answers = _in_children([lane_job(lane) for lane in lanes])
    results = {c.name: t for lane, answer in zip(lanes, answers, strict=True) for c, t in zip(lane, answer.split("\0"), strict=True)}
    refused = 0
    for config in configs:
        verdict, detail = results[config.name].split("\t", 1)
        if verdict == "wrote":
            print(f"{config.name}: wrote {detail}")
            continue
        refused += 1
        print(detail, file=sys.stderr)
        print(f"{config.name}: not written: the preflight found errors (above; `python -m stacks check {config.name}`)", file=sys.stderr)
    return 2 if broken else 1 if refused else 0


def cmd_check(args: argparse.Namespace) -> int:
    """Run the preflight rules over each stack's objects, print each finding to act on (the warnings the stack accepts
    are counted; -v prints them too), the ones the committed stack's check did not have marked new; 1 on any error."""
    import policy

    configs, broken = _each_config(args)
    failed = False
    for config in configs:
        previous = _previous(config.name, args.against)
        findings = _preflight(config, None, previous)
        if not args.config and any(f.severity != "info" and not f.accepted for f in findings):
            findings, unmarked = _marked_new(config, findings, args.against or "HEAD", previous)
            if unmarked:
                print(f"{config.name}: nothing is marked new: {unmarked}")
        for f in findings:
            if args.verbose or not f.accepted:
                print("\n".join(f.wrapped(f"{config.name}: ")))  # a long finding wraps: no line over policy.core.WIDTH
        print(policy.summary(config.name, findings, accepted_listed=args.verbose))
        failed = failed or bool(policy.errors(findings))
    return 2 if broken else 1 if failed else 0


def _marked_new(config: ClusterConfig, findings: list[Finding], ref: str, previous: dict[str, object] | None) -> tuple[list[Finding], str]:
    """The findings, each error or warning the check of the stack committed at `ref` did not have marked `new`: the ones
    this change made. A finding is the same one when its severity, rule, config path (else object) and value are: its
    line and wording may move with the edit. Accepted warnings are not marked (they are not printed). Nothing is marked
    when the committed stack cannot be checked (outside git, a module this program no longer runs), everything when
    `ref` has no such stack. The second value says why nothing could be compared ("" when it was)."""
    from dataclasses import replace

    from policy.run import project_stacks

    def key(f: Finding) -> tuple[str, ...]:
        return (f.severity, f.rule, f.where or f.object, f.value)

    try:  # nothing to compare with, and nothing to say: outside git, an unknown ref, a stack deployed from a YAML file
        if stacks.config_file_of(config.name)[0]:
            return findings, ""
        stacks.committed_names(ref)
    except stacks.ConfigError:
        return findings, ""
    try:
        committed = stacks.load_committed(config.name, ref)
        before: set[tuple[str, ...]] = set()
        if committed is not None:  # compared with the stacks committed beside it (a stack copied since is new there)
            others = [o for o in project_stacks(config.name) if o.name in stacks.committed_names(ref)]
            before = {key(f) for f in _preflight(committed, None, previous, others)}
    except stacks.ConfigError as err:  # the committed module does not load (it exits, loops, is invalid)
        return findings, f"the stack at {ref} cannot be checked to compare with ({str(err).splitlines()[0]})"
    except Exception as err:  # noqa: BLE001 (the committed stack is only compared with: any failure means nothing can be told new)
        return findings, f"the stack at {ref} cannot be checked to compare with ({type(err).__name__})"
    return [replace(f, new=True) if f.severity != "info" and not f.accepted and key(f) not in before else f for f in findings], ""


def cmd_diff(args: argparse.Namespace) -> int:
    from tools import diff

    for config in _configs(args):
        try:
            before = diff.committed(project.ROOT, args.against, f"rendered/{config.name}")
        except diff.DiffError as err:
            raise stacks.ConfigError(str(err)) from None
        after = diff.fresh(config)
        label = f"{args.against}:rendered/{config.name}"
        if before is None:
            label += " (absent: every object is new)"
        source = args.config or "working tree"
        sys.stdout.write(diff.report(config.name, label, diff.diff_trees(before or {}, after), len(after), source))
    return 0


def cmd_outputs_schema(args: argparse.Namespace) -> int:
    from components.outputs import schema_json

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
    sys.stdout.write(verdict.render())
    return 0 if verdict.ok else 1


def cmd_import_plan(args: argparse.Namespace) -> int:
    from tools import adoption

    files = {s.name: s for s in stacks.pulumi_stacks()}
    target = files.get(args.pulumi_stack)
    if target is None:
        raise stacks.ConfigError(
            f"no Pulumi.{args.pulumi_stack}.yaml: name the Pulumi stack that imports ({', '.join(files) or 'none'}); "
            "its file says which cluster and which tier it deploys"
        )
    config = stacks.load(target.cluster)
    kinds = [k.strip() for k in args.only.split(",") if k.strip()] if args.only else None
    plan = adoption.import_plan(config, target.name, target.tier, kinds)
    text = json.dumps(plan, indent=2) + "\n"
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as err:
            raise stacks.ConfigError(f"{args.out}: cannot write the import file: {err.strerror or err}") from None
        summary = adoption.plan_summary(plan)
        print(f"{target.name} ({target.cluster}, tier {target.tier}): wrote {args.out}: {summary}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_adopt_diff(args: argparse.Namespace) -> int:
    from tools import adoption

    config = stacks.load(args.stack)
    live = stacks.read_yaml(Path(args.live), stacks.LIVE_LIMITS)
    report, narrowing = adoption.adopt_diff(config, live, str(args.live))
    sys.stdout.write(report)
    return 1 if narrowing else 0


def _pulumi_stack(name: str) -> stacks.PulumiStack:
    files = {s.name: s for s in stacks.pulumi_stacks()}
    target = files.get(name)
    if target is None:
        raise stacks.ConfigError(
            f"no Pulumi.{name}.yaml: name a Pulumi stack ({', '.join(files) or 'none'}); its file says which cluster, tier and context"
        )
    return target


def cmd_drift(args: argparse.Namespace) -> int:
    from tools import drift

    target = _pulumi_stack(args.pulumi_stack)
    config = stacks.load(target.cluster)
    declared = drift.declared_for(config, target.tier)
    live = _live_objects(args.live) if args.live else drift.read_live(declared, target.context)
    found = drift.drift(config, declared, live)
    sys.stdout.write(drift.report(config, found, target.name))
    return 1 if found else 0


def _live_objects(file: str) -> list[dict[str, Any]]:
    data = stacks.read_yaml(Path(file))
    live = data.get("items", []) if isinstance(data, dict) and str(data.get("kind", "")).endswith("List") else [data]
    if not all(isinstance(o, dict) and isinstance(o.get("metadata"), dict) for o in live):
        raise stacks.ConfigError(f"{file}: not Kubernetes objects (the output of `oc get ... -o yaml`)")
    return live


def cmd_recover(args: argparse.Namespace) -> int:
    import shlex

    from tools import recovery

    target = _pulumi_stack(args.pulumi_stack)
    root = None if args.state else recovery.diy_root()
    if root is not None:
        half = recovery.half_written(root, target.name)
        if half:  # nothing can read the state until these go: say so first
            print(f"{target.name}: the state backend cannot load the stack: a killed run left {len(half)} file(s) empty:")
            print("\n".join(f"  {p}" for p in half))
            print("Each is the attributes file of a checkpoint or lock that is whole (a rename wrote it): remove them, then run")
            print("this again:\n")
            print("1. rm " + " ".join(shlex.quote(str(p)) for p in half))
            print(f"2. python -m stacks recover {target.name}")
            return 1
    ops = recovery.pending(recovery.exported(target.name, args.state))
    creates = [p.obj for p in ops if p.op == "creating" and p.obj is not None]
    if args.live:
        keys = recovery.keys_of(_live_objects(args.live))
    else:
        keys = recovery.existing(creates, target.context)
    text, _ = recovery.plan(target.name, ops, keys, recovery.locks(root, target.name) if root is not None else None)
    sys.stdout.write(text)
    return 0


def cmd_rights(args: argparse.Namespace) -> int:
    from tools import adoption

    sys.stdout.write(adoption.rights_report(stacks.load(args.stack), args.tier))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m stacks", description="GPU training stacks for OpenShift: config, render, check.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ls = sub.add_parser("list", help="print the stack names")
    ls.add_argument(
        "--pulumi-stacks", action="store_true", help="list the Pulumi stack files instead (header line, then stack, cluster, tier, context)"
    )
    ls.add_argument("--json", action="store_true", help="as JSON (the pull-request workflow's preview matrix reads it)")
    ls.set_defaults(func=cmd_list)

    c = sub.add_parser("config", help="print a stack's validated config as YAML (also an input: --config FILE)")
    c.add_argument("stack", nargs="?", metavar="STACK", help="the stack to print (python -m stacks list)")
    c.add_argument("--config", metavar="FILE", help="validate and print this YAML file instead")
    c.set_defaults(func=cmd_config)

    sub.add_parser("schema", help="print the JSON Schema of the config").set_defaults(func=cmd_schema)

    r = sub.add_parser("render", help="write every object the program would create, and the stack outputs")
    r.add_argument("stacks", nargs="*", metavar="STACK", help=STACK_HELP)
    r.add_argument("--all", action="store_true", help="every stack (the default when none is named)")
    r.add_argument("--config", metavar="FILE", help="render this YAML config instead of a named stack")
    r.add_argument("--out", default=str(project.ROOT / "rendered"), metavar="DIR", help="output folder (default: rendered/)")
    r.add_argument("--tier", choices=stacks.TIERS, default="all", help="render one tier only (default: all)")
    r.set_defaults(func=cmd_render)

    k = sub.add_parser("check", help="run the preflight policy: one finding per line; exit 1 on any error")
    k.add_argument("stacks", nargs="*", metavar="STACK", help=STACK_HELP)
    k.add_argument("--all", action="store_true", help="every stack (the default when none is named)")
    k.add_argument("--config", metavar="FILE", help="check this YAML config instead of a named stack")
    k.add_argument(
        "--against", metavar="GIT_REF", help="compare with the stack and render committed at this ref: what is new, claims (default: HEAD)"
    )
    k.add_argument("-v", "--verbose", action="store_true", help="print the warnings the stack accepts too, each with its reason")
    k.set_defaults(func=cmd_check)

    d = sub.add_parser("diff", help="what changed, object by object, between the render committed at a git ref and now")
    d.add_argument("stacks", nargs="*", metavar="STACK", help=STACK_HELP)
    d.add_argument("--all", action="store_true", help="every stack (the default when none is named)")
    d.add_argument("--config", metavar="FILE", help="compare this YAML config's render with the committed render of its stack")
    d.add_argument("--against", default="HEAD", metavar="GIT_REF", help="compare with rendered/ at this commit (default: HEAD)")
    d.set_defaults(func=cmd_diff)

    o = sub.add_parser("outputs-schema", help="print the JSON Schema of the stack outputs (published as schemas/outputs.v2.json)")
    o.set_defaults(func=cmd_outputs_schema)

    b = sub.add_parser(
        "bandwidth-report", help="the verdict of a bandwidth check from a saved log (oc logs job/NAME); exit 1 when it fails"
    )
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
    b.set_defaults(func=cmd_bandwidth_report)

    i = sub.add_parser("import-plan", help="a `pulumi import --file` plan that adopts the hand-made objects a Pulumi stack declares")
    i.add_argument(
        "pulumi_stack",
        metavar="PULUMI_STACK",
        help="the Pulumi stack that imports (e.g. barcelona-platform): its file names cluster and tier",
    )
    i.add_argument("--only", metavar="KIND,...", help="only objects of these kinds (e.g. ServiceAccount,PersistentVolumeClaim)")
    i.add_argument("--out", metavar="FILE", help="write the plan here (default: stdout)")
    i.set_defaults(func=cmd_import_plan)

    a = sub.add_parser("adopt-diff", help="what adopting a live object (oc get -o yaml) would change or remove; exit 1 when it narrows it")
    a.add_argument("stack", metavar="STACK", help="the stack that declares the object")
    a.add_argument("live", metavar="LIVE.yaml", help="the live object as `oc get KIND NAME -o yaml` prints it")
    a.set_defaults(func=cmd_adopt_diff)

    dr = sub.add_parser("drift", help="what was changed by hand on the cluster, in the stack file's words; exit 1 on drift")
    dr.add_argument("pulumi_stack", metavar="PULUMI_STACK", help="the Pulumi stack (its file names the cluster, tier and kube context)")
    dr.add_argument("--live", metavar="FILE", help="compare with these objects (`oc get ... -o yaml`) instead of the cluster")
    dr.set_defaults(func=cmd_drift)

    rc = sub.add_parser("recover", help="after a killed `pulumi up`: the refresh that settles its pending operations (reads the cluster)")
    rc.add_argument("pulumi_stack", metavar="PULUMI_STACK", help="the Pulumi stack whose run was killed")
    rc.add_argument("--state", metavar="FILE", help="a saved `pulumi stack export` (default: run it)")
    rc.add_argument("--live", metavar="FILE", help="the objects on the cluster (`oc get ... -o yaml`) instead of reading it")
    rc.set_defaults(func=cmd_recover)

    g = sub.add_parser("rights", help="per object: its tier and the `oc auth can-i` line that checks you may declare it")
    g.add_argument("stack", metavar="STACK", help="the stack to list")
    g.add_argument("--tier", choices=stacks.TIERS, default="all", help="list one tier only (default: all)")
    g.set_defaults(func=cmd_rights)
    status.register(sub, _pulumi_stack, _live_objects)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except stacks.ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def run() -> None:
    """The process around main(): `python -m stacks` (stacks/__main__.py) and the `stacks` console script."""
    import gc
    import signal

    # A short-lived command: the collector would only walk the SDK's and pydantic's long-lived objects again
    # and again, and tearing the interpreter down after everything is written costs as much as a stack's render.
    gc.disable()
    # Output piped into `head` ends quietly, as any command line tool's does, instead of a BrokenPipeError traceback.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # Likewise Ctrl-C (exit 130) and SIGTERM (143) end it with one line, and a terminal that cannot show
    # non-ASCII gets it escaped, never a UnicodeEncodeError (stacks/_process.py; already set up under -m).
    _process.setup()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
