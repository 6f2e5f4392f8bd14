"""`check` runs every rule, marks the warnings the stack accepts, reports acceptances that accept nothing and speaks in
the stack file's words; `summary` is the line per stack `python -m stacks check` prints."""

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import policy.rules  # noqa: F401  (importing the package registers every rule)
from config import provenance
from config.errors import located
from config.kube import ConfigPath, ObjectKey
from config.stack import AcceptedWarning, ClusterConfig
from policy.core import RULES, Finding, Stack, explained, warning


def check(
    config: ClusterConfig,
    objects: Iterable[dict[str, Any]],
    patches: Iterable[dict[str, Any]] = (),
    previous: dict[str, Any] | None = None,
    others: Iterable[ClusterConfig] = (),
    sources: Mapping[ObjectKey, ConfigPath] | None = None,
) -> list[Finding]:
    """Every rule's findings over a config and the objects it renders, sorted. `sources` name each object's config entry:
    a finding then names the config path and its line, and one cause in several objects is one finding (`affects`)."""
    stack = Stack(config, list(objects), list(patches), previous, [o for o in others if o.name != config.name])
    findings = [replace(f, rule=r.id) for r in RULES.values() for f in r.run(stack)]
    accepted = config.accepted_warnings
    firsts = [next((k for k, a in enumerate(accepted) if f.severity == "warning" and _accepts(a, f)), None) for f in findings]
    findings = [f if k is None else replace(f, accepted=accepted[k].reason) for f, k in zip(findings, firsts, strict=True)]
    located_ = _in_config_terms(findings, config, sources or {})
    findings = explained(located_)
    # An acceptance whose warning an error explains is not stale: the warning comes back once the error is fixed.
    hidden = [f for f in located_ if f.severity == "warning" and f not in findings]
    unaccepted = [f for f in findings if f.severity == "warning" and not f.accepted]
    stale = [_stale(k, a, unaccepted) for k, a in enumerate(accepted) if k not in firsts and not any(_accepts(a, f, False) for f in hidden)]
    findings += _in_config_terms(stale, config, {})
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: (order[f.severity], f.rule, f.object, f.field, f.message))


def _accepts(a: AcceptedWarning, f: Finding, mind_value: bool = True) -> bool:
    """Whether acceptance `a` accepts warning `f`: its rule, its object (`*` any run of characters) and its value."""
    return a.rule == f.rule and fnmatch.fnmatchcase(f.object, a.object) and (not mind_value or (a.value or "") == f.value)


def _stale(k: int, a: AcceptedWarning, unaccepted: list[Finding]) -> Finding:
    """The `accepted-warnings` finding of an acceptance that accepts nothing, naming the value its warning has now."""
    what = f"warning {a.rule} on {a.object!r}" + (f" for the value {a.value!r}" if a.value else "")
    if not (values := sorted({f.value for f in unaccepted if _accepts(a, f, mind_value=False) and f.value})):
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
    return warning(f"accepted_warnings[{k}]", "rule/object/value", message, fix, rule="accepted-warnings", config=("accepted_warnings", k))


def _in_config_terms(findings: list[Finding], config: ClusterConfig, sources: Mapping[ObjectKey, ConfigPath]) -> list[Finding]:
    """Each finding located in the config (where, origin), and the findings of one cause merged into one."""
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
        # One line that writes a field of several entries (a helper's) is one error there, however many entries it fills. A
        # warning stays one per object: each is accepted by its object (accepted_warnings), and counted so.
        each = f.object if f.severity != "error" else ""
        line = (f.severity, f.rule, f.origin, each, tuple(p for p in path if isinstance(p, str)), f.message, f.fix, f.accepted)
        at = merged.get(key, merged.get(line) if f.origin else None)
        if at is not None:
            first = out[at]
            affects = first.affects or (first.object,)
            if f.object not in affects:
                out[at] = replace(first, affects=tuple(sorted((*affects, f.object))))
            continue
        merged[key] = merged[line] = len(out)
        out.append(f)
    return out


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def summary(name: str, findings: list[Finding], accepted_listed: bool = True) -> str:
    """`NAME: ok|FAIL: N errors, N warnings, N new, N accepted, N info`, the zero counts left out but the first two;
    `accepted_listed=False` (`check` without -v) says that -v lists the accepted warnings and the info lines."""
    n_err, n_warn = len(errors(findings)), sum(f.severity == "warning" for f in findings)
    more = {"new": sum(f.new for f in findings), "accepted": sum(bool(f.accepted) for f in findings)}
    more["info"] = sum(f.severity == "info" for f in findings)
    counted = [f"{n_err} error{'s' * (n_err != 1)}", f"{n_warn} warning{'s' * (n_warn != 1)}", *(f"{n} {k}" for k, n in more.items() if n)]
    unlisted = not accepted_listed and any(f.accepted or f.severity == "info" for f in findings)
    return f"{name}: {'FAIL' if n_err else 'ok'}: {', '.join(counted)}" + (" (-v lists them)" if unlisted else "")
