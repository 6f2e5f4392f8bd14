"""The preflight policy: rules that read a stack's config and the objects it renders and report
what would fail on the cluster, with the object, the field and the fix.

    findings = policy.check(config, objects, patches)

`python -m stacks check` runs it over the offline rendering; the Pulumi program runs it over the
same objects before it declares anything (policy/gate.py). Plain Python: it imports config/ and
stacks/, never components/, tools/ or pulumi (gate.py, which does import pulumi, is imported only by the
Pulumi program).

Inside, imports go one way: core.py (findings, the registry, the views the rules read) <- rules/ (one
module per area, each registering its rules) <- run.py (`check`: runs them). placement.py is the capacity
rule's search.
"""

from policy.core import RULES, Finding, Rule
from policy.run import check, errors, summary

__all__ = ["RULES", "Finding", "Rule", "check", "errors", "summary"]
