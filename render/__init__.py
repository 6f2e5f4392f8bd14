"""The offline engine: runs the real program under Pulumi's mock runtime and writes what `pulumi up`
would send, one YAML document per object, plus the stack outputs."""
