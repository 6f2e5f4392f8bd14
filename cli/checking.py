"""`check`: the preflight over each stack's objects, the findings this change made marked new; and `preflight`, the
same rules over a rendering, which `render` runs before it writes (cli/rendering.py)."""

from __future__ import annotations

import argparse
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
from policy.run import project_stacks
from tools import diff

if TYPE_CHECKING:  # for the annotation only: check never renders, and tools.render loads Pulumi's mock runtime
    from tools.render import Rendering


def preflight(
    config: ClusterConfig,
    rendering: Rendering | None,
    previous: dict[str, object] | None,
    others: list[ClusterConfig] | None = None,
    whole: list[Declared] | None = None,
) -> list[Finding]:
    """The rules over a rendering (`render`), each finding located in the config by the provenance layout() carries
    (the entry each object is rendered from), as the Pulumi program's preflight does (__main__.py). Without a rendering
    (`check`), over the objects layout() declares, as that preflight reads them: the same objects the components register
    (tests/components/test_program.py, tests/test_properties.py), without the mock runtime, which is most of a render's time and
    would be most of a large stack's check (docs/performance.md, "Scale"). `others`: the stacks compared with (default:
    the project's others). `whole`: layout(config), where the caller has it already."""
    whole = layout(config) if whole is None else whole
    if rendering is None:
        objects = [d.object for d in whole if not d.patch]
        patches = [d.object for d in whole if d.patch]
    else:
        objects = [r.object for r in rendering.resources if not r.is_patch]
        patches = [r.object for r in rendering.resources if r.is_patch]
    return policy.check(config, objects, patches, previous=previous, others=others, sources=sources(whole))


def _previous(name: str, ref: str | None) -> dict[str, object] | None:
    """The stack outputs of the render committed at `ref` (what the cluster holds, as far as the
    repository knows), or None outside git or for a stack the ref does not have."""
    try:
        files = diff.committed(project.ROOT, ref or "HEAD", f"rendered/{name}")
    except diff.DiffError as err:
        if ref:
            raise stacks.ConfigError(f"--against {ref}: cannot read the committed render: {err}") from None
        return None
    out = (files or {}).get("outputs.json")
    return out if isinstance(out, dict) else None


def cmd_check(args: argparse.Namespace) -> int:
    """Run the preflight rules over each stack's objects, print each finding to act on (the warnings the stack accepts
    are counted; -v prints them too), the ones the committed stack's check did not have marked new; 1 on any error."""
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
            findings = stack_files(config, whole) + findings
        for f in findings:
            if args.verbose:
                print("\n".join(f.wrapped(f"{config.name}: ")))  # a long finding wraps: no line over policy.core.WIDTH
            elif not f.accepted:  # an info said on every run is said in brief (its head and gist): -v says it whole
                print("\n".join(f.briefly(f"{config.name}: ")))
        print(policy.summary(config.name, findings, accepted_listed=args.verbose))
        failed = failed or bool(policy.errors(findings))
    return 2 if broken else 1 if failed else 0


def stack_files(config: ClusterConfig, whole: list[Declared]) -> list[Finding]:
    """An error where the stack declares objects of a tier none of its Pulumi stack files deploys (a queued cluster's
    ClusterQueue on NERC, which has only the project tier's Pulumi.nerc.yaml): no `pulumi up` would declare them. Said
    by `check`, where a user turning a feature on runs first, not only by the tests of the committed stacks."""
    try:
        files = [s for s in stacks.pulumi_stacks() if s.cluster == config.name]
    except stacks.ConfigError:  # a broken stack file: the loading of the stack says so
        return []
    tiers = {s.tier for s in files}
    if not files or "all" in tiers:  # no stack file at all: `list --pulumi-stacks` and the tests say so
        return []
    found = []
    for tier in sorted({tier_of(d.object, config) for d in whole} - tiers):
        mine = [d for d in whole if tier_of(d.object, config) == tier]
        # Located at the config entry that makes most of them (`queueing`, `security`): what turned the tier on.
        tops = [d.source[:1] for d in mine if d.source]
        entry = max(tops, key=tops.count) if tops else ()
        shown = ", ".join(ref(d.object) + (" (patch)" if d.patch else "") for d in mine[:3]) + (
            f" and {len(mine) - 3} more" if len(mine) > 3 else ""
        )
        name = f"Pulumi.{config.name}-{tier}.yaml"
        finding = Finding(
            "error",
            f"Stack {config.name}",
            "Pulumi stack files",
            f"the stack declares {tier}-tier objects ({shown}), but its Pulumi stack files ({', '.join(s.path.name for s in files)}) "
            f"deploy only the {', '.join(sorted(tiers))} tier: no `pulumi up` would declare them",
            f"add {name} for whoever holds the {tier} tier's rights (`python -m stacks rights {config.name} --tier {tier}`), with "
            f"gpu-training:cluster: {config.name}, gpu-training:tier: {tier} and the kubernetes:context of {config.name}'s other "
            "stack files (docs/shared-clusters.md shows one)",
            rule="stack-files",
        )
        found.append(replace(finding, where=located(entry, config), origin=provenance.shown(provenance.origin(config, entry))))
    return found


def _marked_new(config: ClusterConfig, findings: list[Finding], ref: str, previous: dict[str, object] | None) -> tuple[list[Finding], str]:
    """The findings, each error or warning the check of the stack committed at `ref` did not have marked `new`: the ones
    this change made. A finding is the same one when its severity, rule, config path (else object) and value are: its
    line and wording may move with the edit. Accepted warnings are not marked (they are not printed). Nothing is marked
    when the committed stack cannot be checked (outside git, a module this program no longer runs), everything when
    `ref` has no such stack. The second value says why nothing could be compared ("" when it was)."""

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
            before = {key(f) for f in preflight(committed, None, previous, others)}
    except stacks.ConfigError as err:  # the committed module does not load (it exits, loops, is invalid)
        return findings, f"the stack at {ref} cannot be checked to compare with ({str(err).splitlines()[0]})"
    except Exception as err:  # noqa: BLE001 (the committed stack is only compared with: any failure means nothing can be told new)
        return findings, f"the stack at {ref} cannot be checked to compare with ({type(err).__name__})"
    return [replace(f, new=True) if f.severity != "info" and not f.accepted and key(f) not in before else f for f in findings], ""
