"""The Pulumi program: one ComponentResource per concern, built from a stack's config (components/program.py `build`);
the stack outputs (components/outputs.py); and what runs inside the pods (components/launcher/, plain Python)."""
