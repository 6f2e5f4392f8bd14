"""`check`: the preflight over each stack's objects, the findings this change made marked new; and `preflight`, the
same rules over a rendering, which `render` runs before it writes (cli/rendering.py)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

import policy
import stacks
from cli import configs
from components.program import layout, sources
from config import project
from config.stack import ClusterConfig
from policy.core import Finding
from policy.run import project_stacks
from tools import diff

if TYPE_CHECKING:  # for the annotation only: check never renders, and tools.render loads Pulumi's mock runtime
    from tools.render import Rendering


def preflight(
    config: ClusterConfig, rendering: Rendering | None, previous: dict[str, object] | None, others: list[ClusterConfig] | None = None
) -> list[Finding]:
    """The rules over a rendering (`render`), each finding located in the config by the provenance layout() carries
    (the entry each object is rendered from), as the Pulumi program's preflight does (__main__.py). Without a rendering
    (`check`), over the objects layout() declares, as that preflight reads them: the same objects the components register
    (tests/components/test_program.py, tests/test_properties.py), without the mock runtime, which is most of a render's time and
    would be most of a large stack's check (docs/performance.md, "Scale"). `others`: the stacks compared with (default:
    the project's others)."""
    whole = layout(config)
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
        findings = preflight(config, None, previous)
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
