"""Running the preflight: `check` runs the registered rules over a stack, marks the warnings the stack accepts,
reports acceptances that accept nothing, speaks in the stack file's words (config path and line), and sorts the
findings; `summary` is the one line per stack `python -m stacks check` prints.

It imports the rules (policy/rules/), which register themselves in policy.core.RULES as they are imported, so a
caller of `check` (through `policy.check`) always runs every rule.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import policy.rules  # noqa: F401  (importing the package registers every rule)
import stacks
from config import provenance
from config.errors import located
from config.kube import ConfigPath, ObjectKey
from config.stack import AcceptedWarning, ClusterConfig
from policy.core import RULES, Finding, Stack
from policy.rules.stack import cluster_host


def check(
    config: ClusterConfig,
    objects: Iterable[dict[str, Any]],
    patches: Iterable[dict[str, Any]] = (),
    only: Iterable[str] | None = None,
    previous: dict[str, Any] | None = None,
    others: Iterable[ClusterConfig] | None = None,
    sources: Mapping[ObjectKey, ConfigPath] | None = None,
) -> list[Finding]:
    """Run the rules (all, or the ids in `only`) over a config and the objects it renders. Warnings
    the config accepts carry its reason; an acceptance that matches nothing is itself a warning.
    Findings come sorted (severity, rule, object, field), so their order never depends on the order
    of the config's lists. `others` are the stacks the config is compared with (shared-projects); by
    default the project's other stacks (`project_stacks`), so every caller (`python -m stacks check` and
    `render`, the Pulumi program) compares with the same ones without passing them.

    `sources` (components.program.sources: the provenance `layout()` carries) name the config entry each object is
    rendered from: a finding then speaks the stack file's words (`where`: the config path, `origin`: its file and
    line; the object and its field stay as the secondary detail), and one cause found in several objects (a volume
    three StatefulSets claim from) is one finding listing them (`affects`)."""
    wanted = set(only) if only is not None else None
    unknown = (wanted or set()) - set(RULES)
    if unknown:
        raise KeyError(f"unknown rule ids: {', '.join(sorted(unknown))} (known: {', '.join(RULES)})")
    if others is None:  # loaded only for the rule that reads them, and only where it compares (a stack with an api_host)
        compares = (wanted is None or "shared-projects" in wanted) and cluster_host(config.api_host) is not None
        others = project_stacks(config.name) if compares else []
    stack = Stack(config, list(objects), list(patches), previous, [o for o in others if o.name != config.name])
    findings: list[Finding] = []
    for r in RULES.values():
        if wanted is None or r.id in wanted:
            findings += [replace(f, rule=r.id) for f in r.run(stack)]
    accepted = list(getattr(config, "accepted_warnings", []) or [])
    used: set[int] = set()
    for i, f in enumerate(findings):
        if f.severity != "warning":
            continue
        for k, a in enumerate(accepted):
            if _accepts(a, f):
                findings[i] = replace(f, accepted=a.reason)
                used.add(k)
                break
    if wanted is None:
        unaccepted = [f for f in findings if f.severity == "warning" and not f.accepted]
        findings += [_stale(k, a, unaccepted) for k, a in enumerate(accepted) if k not in used]
    findings = _in_config_terms(findings, config, sources or {})
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: (order[f.severity], f.rule, f.object, f.field, f.message))


def _accepts(a: AcceptedWarning, f: Finding, mind_value: bool = True) -> bool:
    """Whether acceptance `a` accepts warning `f`: its rule, its object (`*` a run of any characters) and, for a warning
    about a value, that very value (an acceptance without one accepts only warnings about none)."""
    return a.rule == f.rule and fnmatch.fnmatchcase(f.object, a.object) and (not mind_value or (a.value or "") == f.value)


def _stale(k: int, a: AcceptedWarning, unaccepted: list[Finding]) -> Finding:
    """The `accepted-warnings` finding of an acceptance that accepts nothing, located at its AcceptedWarning(...) line.
    When a warning of its rule and object remains with another value (a new image tag, a copied module's new
    workload), it says which, so the stack accepts the new value only if the reason holds for it."""
    what = f"warning {a.rule} on {a.object!r}" + (f" for the value {a.value!r}" if a.value else "")
    values = sorted({f.value for f in unaccepted if _accepts(a, f, mind_value=False) and f.value})
    if not values:
        message = f"the stack accepts {what}, but no such warning remains"
        fix = "remove the entry from accepted_warnings"
    elif a.value is None:
        message = (
            f"the stack accepts {what} without naming the value it accepts, and that warning is about one "
            f"({', '.join(map(repr, values))}): it stays unaccepted"
        )
        fix = f"if the reason holds for it, name it: value={values[0]!r} (one entry per value); else fix the warning"
    else:
        message = (
            f"the stack accepts {what}, but the warning is now about {', '.join(map(repr, values))}: the value changed, so the "
            "reason written for the old one may no longer hold"
        )
        fix = f"fix the warning, or, if the reason holds for the new value, write value={values[0]!r} in this entry"
    where = ("accepted_warnings", k)
    return Finding("warning", f"accepted_warnings[{k}]", "rule/object/value", message, fix, rule="accepted-warnings", config=where)


def _in_config_terms(findings: list[Finding], config: ClusterConfig, sources: Mapping[ObjectKey, ConfigPath]) -> list[Finding]:
    """Each finding located in the config (Finding.where, .origin), and the findings of one cause merged into one."""
    by_ref = {(f"{k} {ns}/{n}" if ns else f"{k} {n}") + (" (patch)" if patch else ""): path for (k, ns, n, patch), path in sources.items()}
    out: list[Finding] = []
    merged: dict[tuple[Any, ...], int] = {}
    for f in findings:
        path = f.config
        if path is None and f.object in by_ref:
            path = (*by_ref[f.object], *(f.setting.split(".") if f.setting else ()))
        if path is None:
            out.append(f)
            continue
        # Located by names (`volumes[data]`), not indexes: the findings do not depend on the order of the config's lists.
        f = replace(f, where=located(path, config), origin=provenance.shown(provenance.origin(config, path)), config=None, setting="")
        key = (f.severity, f.rule, f.where, f.message, f.fix, f.accepted)
        if key in merged:
            first = out[merged[key]]
            affects = first.affects or (first.object,)
            if f.object not in affects:
                out[merged[key]] = replace(first, affects=tuple(sorted((*affects, f.object))))
            continue
        merged[key] = len(out)
        out.append(f)
    return out


def project_stacks(exclude: str) -> list[ClusterConfig]:
    """The configs of the project's stacks but `exclude`, each as `pulumi up` deploys it (`stacks.load`: its
    gpu-training:configFile, else its module). A stack that does not load is left out: its own check reports why,
    and one broken stack must not stop the check of another."""
    try:
        files = stacks.pulumi_stacks()  # read once: what each cluster's stack files deploy (stacks.config_file_of)
    except stacks.ConfigError:
        files = []
    out = []
    for name in stacks.names():
        deployed = {(s.config_file, s.path.name) for s in files if s.cluster == name}
        if name == exclude or len({f for f, _ in deployed}) > 1:  # stack files that disagree: its own check says so
            continue
        config_file, stack_file = min(deployed, default=(None, ""), key=str)
        try:
            out.append(stacks.load_deployed(name, config_file, stack_file))
        except stacks.ConfigError:
            continue
    return out


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def summary(name: str, findings: list[Finding], accepted_listed: bool = True) -> str:
    """`NAME: ok|FAIL: N errors, N warnings, N accepted, N new, N info (N rules)`; the parts that are 0 left out but the
    errors and warnings. `accepted_listed=False` (`check` without -v) says that -v lists the accepted warnings."""
    n_err = len(errors(findings))
    n_warn = sum(1 for f in findings if f.severity == "warning")
    n_acc = sum(1 for f in findings if f.accepted)
    n_new = sum(1 for f in findings if f.new)
    n_info = sum(1 for f in findings if f.severity == "info")
    verdict = "FAIL" if n_err else "ok"
    accepted = f", {n_acc} accepted" + ("" if accepted_listed else " (-v lists them)") if n_acc else ""
    new = f", {n_new} new" if n_new else ""
    infos = f", {n_info} info" if n_info else ""
    return (
        f"{name}: {verdict}: {n_err} error{'s' * (n_err != 1)}, {n_warn} warning{'s' * (n_warn != 1)}{accepted}{new}{infos} "
        f"({len(RULES)} rules)"
    )
