"""Pulumi entry point: `pulumi up -s barcelona|cairo|nerc`. Only wires config to components."""

import pulumi

from components.program import build, objects, patches
from policy.gate import load_config, preflight

config = load_config()  # the stack's module, or the YAML file named by gpu-training:configFile
preflight(config, objects(config), patches(config))  # stops here, declaring nothing, on any error
for key, value in build(config).items():
    pulumi.export(key, value)
