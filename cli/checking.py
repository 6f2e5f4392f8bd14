"""`check`: the preflight over each stack's objects, the findings this change made marked new; and `preflight`, the
same rules over a rendering, which `render` runs before it writes (cli/rendering.py)."""

import argparse
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import policy
import stacks
from cli import configs
from components.kube import Declared
from components.program import layout, sources
from components.tiers import tier_of
from config import project, provenance
from config.errors import located
from config.stack import ClusterConfig
from policy.core import Finding, ref
from tools import diff

if TYPE_CHECKING:  # for the annotation only: check never renders, and tools.render loads Pulumi's mock runtime
    from tools.render import Rendering


def preflight(
    config: ClusterConfig,
    rendering: "Rendering | None",
    previous: dict[str, object] | None,
    others: list[ClusterConfig] | None = None,
    whole: list[Declared] | None = None,
) -> list[Finding]:
    """The rules over a rendering (`render`) or, without one (`check`), over what layout() declares (no mock runtime)."""
    whole = layout(config) if whole is None else whole
    made = [(d.object, d.patch) for d in whole] if rendering is None else [(r.object, r.is_patch) for r in rendering.resources]
    objects, patches = [o for o, patch in made if not patch], [o for o, patch in made if patch]
    others = stacks.others(config.name) if others is None else others
    return policy.check(config, objects, patches, previous=previous, others=others, sources=sources(whole))


def _previous(name: str, ref: str | None) -> dict[str, object] | None:
    """The stack outputs of the render committed at `ref`; None outside git or for a stack the ref does not have."""
    try:
        files = diff.committed(project.ROOT, ref or "HEAD", f"rendered/{name}")
    except diff.DiffError as err:
        if ref:
            raise stacks.ConfigError(f"--against {ref}: cannot read the committed render: {err}") from None
        return None
    out = (files or {}).get("outputs.json")
    return out if isinstance(out, dict) else None


def cmd_check(args: argparse.Namespace) -> int:
    """Print each stack's findings to act on (-v: all), the ones the committed stack's check lacks marked new."""
    chosen, broken = configs.each_from_args(args)
    failed = False
    for config in chosen:
        previous = _previous(config.name, args.against)
        whole = layout(config)
        findings = preflight(config, None, previous, whole=whole)
        if not args.config and any(f.severity != "info" and not f.accepted for f in findings):
            findings, unmarked = _marked_new(config, findings, args.against or "HEAD", previous)
            if unmarked:
                print(f"{config.name}: nothing is marked new: {unmarked}")
        if not args.config:  # about the stack files beside the module, not its config: never compared with a commit
            findings = [*stack_files(config, whole), *findings]
        # The accepted warnings and the info lines are the same on every run: counted, and printed by -v.
        for f in findings if args.verbose else [f for f in findings if f.severity != "info" and not f.accepted]:
            print("\n".join(f.wrapped(f"{config.name}: ")))  # a long finding wraps: no line over policy.core.WIDTH
        print(policy.summary(config.name, findings, accepted_listed=args.verbose))
        failed = failed or bool(policy.errors(findings))
    return 2 if broken else 1 if failed else 0


def stack_files(config: ClusterConfig, whole: list[Declared]) -> Iterator[Finding]:
    """An error where the stack declares objects of a tier none of its Pulumi stack files deploys (a ClusterQueue on a
    cluster with only a project tier's stack file): no `pulumi up` would declare them."""
    try:
        files = [s for s in stacks.pulumi_stacks() if s.cluster == config.name]
    except stacks.ConfigError:  # a broken stack file: the loading of the stack says so
        return
    tiers = {s.tier for s in files}
    if not files or "all" in tiers:  # no stack file at all: `list --pulumi-stacks` and the tests say so
        return
    for tier in sorted({tier_of(d.object, config) for d in whole} - tiers):
        mine = [d for d in whole if tier_of(d.object, config) == tier]
        # Located at the config entry that makes most of them (`queueing`, `security`): what turned the tier on.
        tops = [d.source[:1] for d in mine if d.source]
        entry = max(tops, key=tops.count) if tops else ()
        more = f" and {len(mine) - 3} more" if len(mine) > 3 else ""
        shown = ", ".join(ref(d.object) + (" (patch)" if d.patch else "") for d in mine[:3]) + more
        name = f"Pulumi.{config.name}-{tier}.yaml"
        message = (
            f"the stack declares {tier}-tier objects ({shown}), but its Pulumi stack files ({', '.join(s.path.name for s in files)}) "
            f"deploy only the {', '.join(sorted(tiers))} tier: no `pulumi up` would declare them"
        )
        fix = (
            f"add {name} for whoever holds the {tier} tier's rights (`python -m stacks rights {config.name} --tier {tier}`), with "
            f"gpu-training:cluster: {config.name}, gpu-training:tier: {tier} and the kubernetes:context of {config.name}'s other "
            "stack files (docs/shared-clusters.md shows one)"
        )
        where, origin = located(entry, config), provenance.shown(provenance.origin(config, entry))
        yield Finding("error", f"Stack {config.name}", "Pulumi stack files", message, fix, rule="stack-files", where=where, origin=origin)


def _marked_new(config: ClusterConfig, findings: list[Finding], ref: str, previous: dict[str, object] | None) -> tuple[list[Finding], str]:
    """The findings, each error or warning the stack at `ref` lacks (same severity, rule, path or object, value) marked
    `new` (none outside git or for a YAML config); and why nothing could be compared ("" when it was)."""

    def key(f: Finding) -> tuple[str, ...]:
        return (f.severity, f.rule, f.where or f.object, f.value)

    try:
        if stacks.config_file_of(config.name)[0]:
            return findings, ""
        committed_names = stacks.committed_names(ref)
    except stacks.ConfigError:  # outside git, an unknown ref
        return findings, ""
    try:
        committed = stacks.load_committed(config.name, ref)
    except stacks.ConfigError as err:  # the committed module does not load
        return findings, f"the stack at {ref} cannot be checked to compare with ({str(err).splitlines()[0]})"
    before: set[tuple[str, ...]] = set()
    if committed is not None:  # compared with the stacks committed beside it (a stack copied since is new there)
        others = [o for o in stacks.others(config.name) if o.name in committed_names]
        before = {key(f) for f in preflight(committed, None, previous, others)}
    return [replace(f, new=True) if f.severity != "info" and not f.accepted and key(f) not in before else f for f in findings], ""
