"""The preflight rules, one module per area. Each rule catches a failure the seed documents (or a real cluster)
lived through, reads the config and the rendered objects only, and says what to change.

One function per rule, registered with an id (policy.core.rule). A rule reports an error for what would break the
deployment and a warning for what the stack accepts knowingly (the warning says why, and a stack lists the warnings
it accepts with its reason in accepted_warnings).

Importing this package registers every rule. The order of the imports below is the order of registration, and so of
policy.RULES and of the rules `check` runs (the findings themselves come sorted, whatever the order). A new rule goes
in the module of its area; a new area is a module here and a line below.
"""

# Kept in this order, not the alphabet's (isort would sort them).
# isort: off
from policy.rules import security
from policy.rules import network
from policy.rules import storage
from policy.rules import pods
from policy.rules import scheduling
from policy.rules import stack

# isort: on

__all__ = ["security", "network", "storage", "pods", "scheduling", "stack"]
