"""The JSON Schema of the config (`python -m stacks schema`), every field described by its docstring.

The docstrings under each field of stacks/model.py are the documentation. pydantic can read them at
class creation (use_attribute_docstrings), but that costs every import, and so every `pulumi
preview`, tens of milliseconds; they are read here instead, from the module's source, only when the
schema is asked for.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from config import model
from config.model import ClusterConfig


def field_docs() -> dict[str, dict[str, str]]:
    """{class name: {field name: docstring}} of the models in stacks/model.py."""
    tree = ast.parse(inspect.getsource(model))
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
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


def schema() -> dict[str, Any]:
    """ClusterConfig's JSON Schema with every model's fields described."""
    body = ClusterConfig.model_json_schema()
    docs = field_docs()

    def describe(name: str, node: dict[str, Any]) -> None:
        for field, spec in (node.get("properties") or {}).items():
            doc = docs.get(name, {}).get(field)
            if doc and isinstance(spec, dict):
                spec.setdefault("description", doc)

    describe("ClusterConfig", body)
    for name, node in (body.get("$defs") or {}).items():
        describe(name, node)
    return body
