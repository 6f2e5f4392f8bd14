"""Pulumi entry point: `pulumi up -s barcelona|cairo|nerc`. Only wires config to components."""

import pulumi

import stacks
from components.program import build

config = stacks.load(pulumi.get_stack())
for key, value in build(config).items():
    pulumi.export(key, value)
