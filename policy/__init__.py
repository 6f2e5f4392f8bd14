"""The preflight: `policy.check(config, objects, patches)` reports what would fail on the cluster, with the object, the
field and the fix. core.py (findings, the registry, views) <- rules/ <- run.py (`check`); placement.py is the capacity
rule's search; gate.py, the only module that imports pulumi, runs it inside the Pulumi program."""

from policy.core import RULES
from policy.run import check, errors, summary

__all__ = ["RULES", "check", "errors", "summary"]
