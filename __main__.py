"""Pulumi entry point: `pulumi up -s STACK`. Only wires config to components."""

import pulumi

from components.program import layout, sources
from components.resources import build
from policy.gate import adopting, check_kube_context, load_stack, preflight

config, tier, context = load_stack()  # the cluster's module, or the YAML file named by gpu-training:configFile
check_kube_context(context, pulumi.get_stack())  # no deploying to whatever kube context is current
whole = layout(config)  # the whole stack's design, whichever tier runs: the preflight stops on any error in it
preflight(config, [d.object for d in whole if not d.patch], [d.object for d in whole if d.patch], sources(whole))
upsert, force = adopting()  # docs/adoption.md: one run each, then removed from the stack file
for key, value in build(config, tier, context, upsert, force).items():
    pulumi.export(key, value)
