"""The preflight rules, one module per area; importing this package registers them. A rule reads the config and the
rendered objects only: an error for what would break the deployment, a warning for what a stack may accept knowingly."""

from policy.rules import network, pods, queueing, scheduling, security, stack, storage  # noqa: F401  (each registers its rules)
