"""The JSON Schema of the config (`python -m stacks schema`), every field described by its docstring.

The docstrings under each field of the models (config/cluster.py, workloads.py, stack.py) are the documentation.
pydantic can read them at class creation (use_attribute_docstrings), but that costs every import, and so every
`pulumi preview`, tens of milliseconds; they are read here instead, from the modules' source, only when the schema
is asked for.
"""

from __future__ import annotations

import ast
import inspect
from types import ModuleType
from typing import Any

from config import cluster, stack, workloads
from config.stack import ClusterConfig


def field_docs(modules: tuple[ModuleType, ...] = (cluster, workloads, stack)) -> dict[str, dict[str, str]]:
    """{class name: {field name: docstring}} of the models of `modules` (by default config/'s; class names are unique
    across them)."""
    out: dict[str, dict[str, str]] = {}
    nodes = [node for module in modules for node in ast.parse(inspect.getsource(module)).body]
    for node in nodes:
        if not isinstance(node, ast.ClassDef):
            continue
        docs: dict[str, str] = {}
        body = node.body
        for stmt, after in zip(body, body[1:] + [None], strict=True):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[stmt.target.id] = inspect.cleandoc(after.value.value)
        out[node.name] = docs
    return out


def described(body: dict[str, Any], root: str, docs: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A model's JSON Schema (`root` its class) with each field's docstring as its description, where it has none."""

    def describe(name: str, node: dict[str, Any]) -> None:
        for field, spec in (node.get("properties") or {}).items():
            doc = docs.get(name, {}).get(field)
            if doc and isinstance(spec, dict):
                spec.setdefault("description", doc)

    describe(root, body)
    for name, node in (body.get("$defs") or {}).items():
        describe(name, node)
    return body


def schema() -> dict[str, Any]:
    """ClusterConfig's JSON Schema with every model's fields described."""
    return described(ClusterConfig.model_json_schema(), "ClusterConfig", field_docs())
