"""The commands that read configs only (`list`, `config`, `schema`) and which stacks a command names (`from_args`).
Light on purpose: the loader and the config model only, never the program or pulumi, so `list` answers at once."""

import argparse
import json
import sys
import textwrap
from typing import Any

import stacks
from config.schema import schema
from config.stack import ClusterConfig
from config.text import escaped, escaped_lines


def from_args(args: argparse.Namespace) -> list[ClusterConfig]:
    """The configs a command names: its stacks (each once), --all or none (every stack), or --config FILE."""
    if args.config:
        if args.stacks or args.all:
            raise stacks.ConfigError("give either stack names/--all or --config FILE, not both")
        return [stacks.load_file(args.config)]
    if args.all and args.stacks:
        raise stacks.ConfigError(f"give either stack names ({' '.join(args.stacks)}) or --all, not both")
    return [stacks.load(n) for n in dict.fromkeys(args.stacks or stacks.names())]  # a name given twice is one stack (rendered once)


def each_from_args(args: argparse.Namespace) -> tuple[list[ClusterConfig], bool]:
    """(the configs that loaded, whether any did not): a stack that does not load is said on stderr and stops only itself."""
    if args.config or args.all and args.stacks or len(dict.fromkeys(args.stacks)) == 1:
        return from_args(args), False
    wanted = list(dict.fromkeys(args.stacks or stacks.names()))
    if not wanted:
        raise stacks.ConfigError(f"no stacks: a stack is a module {stacks.CLUSTERS}/NAME.py (python -m stacks list)")
    configs = []
    for name in wanted:
        try:
            configs.append(stacks.load(name))
        except stacks.ConfigError as err:
            print(f"error: {escaped_lines(str(err))}", file=sys.stderr)
            print(f"{name}: not checked or rendered: its config does not load (above)", file=sys.stderr)
    return configs, len(configs) < len(wanted)


def cmd_list(args: argparse.Namespace) -> int:
    if args.pulumi_stacks:
        rows: list[Any] = []
        for s in stacks.pulumi_stacks():
            secret = f"KUBECONFIG_{s.cluster.upper().replace('-', '_')}"
            rows.append(dict(stack=s.name, cluster=s.cluster, tier=s.tier, context=s.context or "", kubeconfig_secret=secret))
        # Tab-separated under a header line; a context's name is free text in a kubeconfig: escaped (a tab would shift).
        lines = ["STACK\tCLUSTER\tTIER\tCONTEXT", *(f"{r['stack']}\t{r['cluster']}\t{r['tier']}\t{escaped(r['context'])}" for r in rows)]
    else:
        rows = lines = stacks.names()
    print(json.dumps(rows) if args.json else "\n".join(lines))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    if args.config and args.stack:
        raise stacks.ConfigError("give either a stack name or --config FILE, not both")
    if not args.config and not args.stack:
        raise stacks.ConfigError(f"name a stack ({', '.join(stacks.names())}) or give --config FILE")
    sys.stdout.write(stacks.dump(stacks.load_file(args.config) if args.config else stacks.load(args.stack)))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(schema(), indent=2, sort_keys=True) if args.json else fields(schema()))
    return 0


def fields(body: dict[str, Any]) -> str:
    """Each model (ClusterConfig first, then as reached), each field with its type, bounds, default and description."""
    models, order = {"ClusterConfig": body, **body.get("$defs", {})}, ["ClusterConfig"]
    out = ["The fields of a stack's config (clusters/NAME.py's ClusterConfig; as JSON Schema: `python -m stacks schema --json`)."]
    for name in order:
        model = models[name]
        out += ["", flowed(f"{name}: {model.get('description') or ''}", 0, 4)]
        for field, spec in model.get("properties", {}).items():
            order += [r for r in refs(spec) if r not in order]
            said = [type_of(spec), *bounds(spec)]
            if field in model.get("required", []):
                said.append("required")
            elif "default" in spec:
                said.append(f"default {spec['default']!r}" if len(repr(spec["default"])) <= 40 else "default: see --json")
            out += [f"  {field}: {', '.join(said)}", *([flowed(spec["description"], 6, 6)] if spec.get("description") else [])]
    return "\n".join(out)


def flowed(text: str, first: int, rest: int) -> str:
    """A docstring's paragraphs, each re-wrapped: its first line indented by `first`, the others by `rest`."""
    return "\n".join(
        textwrap.fill(" ".join(p.split()), 116, initial_indent=" " * first, subsequent_indent=" " * rest)
        for p in text.strip().split("\n\n")
    )


def refs(spec: object) -> list[str]:
    if isinstance(spec, dict):
        own = [spec["$ref"].rsplit("/", 1)[1]] if "$ref" in spec else []
        return own + [r for v in spec.values() for r in refs(v)]
    return [r for v in spec for r in refs(v)] if isinstance(spec, list) else []


TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None", "object": "dict"}


def type_of(spec: dict[str, Any]) -> str:
    """A JSON Schema type written as in the stack module: list[NodeSet], dict[str, str], 'rdma' | 'tcp', int | None."""
    if "$ref" in spec:
        return str(spec["$ref"].rsplit("/", 1)[1])
    if "enum" in spec or "const" in spec:
        return " | ".join(repr(v) for v in spec.get("enum", [spec.get("const")]))
    if "anyOf" in spec:
        return " | ".join(dict.fromkeys(type_of(s) for s in spec["anyOf"]))
    if spec.get("type") == "array":
        return f"list[{type_of(spec.get('items', {}))}]"
    if spec.get("type") == "object" and isinstance(spec.get("additionalProperties"), dict):
        return f"dict[str, {type_of(spec['additionalProperties'])}]"
    return TYPES.get(str(spec.get("type")), "any")


BOUNDS = (("Items", "items"), ("Length", "characters"), ("Properties", "entries"))
LIMITS = {"minimum": ">= {}", "maximum": "<= {}", "exclusiveMinimum": "> {}", "exclusiveMaximum": "< {}"}


def bounds(spec: dict[str, Any]) -> list[str]:
    """The bounds the config holds a value to (of the value itself, or of the one type beside None)."""
    inner = [s for s in spec.get("anyOf", []) if s.get("type") != "null"]
    spec = {**(inner[0] if len(inner) == 1 else {}), **spec}
    out = []
    for suffix, unit in BOUNDS:
        low, high = spec.get(f"min{suffix}") or 0, spec.get(f"max{suffix}")  # at least 0: no bound
        if low and high is not None:
            out.append(f"{low} to {high} {unit}")
        elif low or high is not None:
            out.append(f"at least {low} {unit}" if low else f"at most {high} {unit}")
    return out + [text.format(spec[k]) for k, text in LIMITS.items() if k in spec]
