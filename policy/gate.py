"""The preflight inside the Pulumi program: the same rules as `python -m stacks check`, run before
any resource is declared, so `pulumi preview` and `pulumi up` stop on what would fail on the cluster.

A warning goes to `pulumi.log.warn` (shown in the preview); errors raise `pulumi.RunError`, which
the Pulumi CLI prints as a plain message, without a traceback. Only the Pulumi program imports this
module: the rest of policy/ stays free of pulumi.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pulumi

import stacks
from policy.core import Finding, check, errors
from stacks.model import ClusterConfig

PROJECT = "gpu-training"
CONFIG_FILE_KEY = "configFile"
"""`pulumi config set gpu-training:configFile my-stack.yaml`: deploy a YAML config (the form
`python -m stacks config STACK` prints) instead of the stack's module in stacks/."""


def load_config() -> ClusterConfig:
    """The config of the running stack: the YAML file named by gpu-training:configFile, else the
    module in stacks/ named like the Pulumi stack. A bad config stops the program with its message."""
    path = pulumi.Config(PROJECT).get(CONFIG_FILE_KEY)
    try:
        return stacks.load_file(path) if path else stacks.load(pulumi.get_stack())
    except stacks.ConfigError as err:
        raise pulumi.RunError(str(err)) from None


def preflight(config: ClusterConfig, objects: Iterable[dict[str, Any]], patches: Iterable[dict[str, Any]] = ()) -> list[Finding]:
    """Log the warnings; on any error stop the program, naming every error."""
    findings = check(config, objects, patches)
    for f in findings:
        if f.severity == "warning":
            pulumi.log.warn(f.line())
    bad = errors(findings)
    if bad:
        lines = "\n".join(f.line() for f in bad)
        raise pulumi.RunError(
            f"preflight: stack {config.name} has {len(bad)} error(s); nothing was declared "
            f"(`python -m stacks check` shows the same findings):\n{lines}"
        )
    return findings
