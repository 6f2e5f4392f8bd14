"""The offline engine: runs the real program under Pulumi's mock runtime and writes what `pulumi up`
would send, one YAML document per object, plus the stack outputs."""

MANIFEST = ".render-manifest"
"""The list `python -m stacks render` keeps of the files it wrote in a stack's folder (render/writer.py); not an object."""
