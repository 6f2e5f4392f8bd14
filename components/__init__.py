"""The Pulumi program: each concern's objects as plain data (one module per concern, `program.layout` the whole stack),
one ComponentResource per concern that declares them (components/resources.py `build`, the only module that imports
Pulumi); the stack outputs (components/outputs.py); and what runs inside the pods (components/launcher/, plain Python)."""
