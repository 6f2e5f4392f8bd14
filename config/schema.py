"""The config's JSON Schema (`python -m stacks schema`), each field described by its docstring, read from the source when
asked for (pydantic's use_attribute_docstrings costs every `pulumi preview` tens of milliseconds)."""

import ast
import inspect
from types import ModuleType
from typing import Any

from config import cluster, stack, workloads
from config.stack import ClusterConfig


def field_docs(modules: tuple[ModuleType, ...] = (cluster, workloads, stack)) -> dict[str, dict[str, str]]:
    """{class name: {field name: docstring}} of the models of `modules` (class names are unique across them)."""
    out: dict[str, dict[str, str]] = {}
    for node in [node for module in modules for node in ast.parse(inspect.getsource(module)).body]:
        if isinstance(node, ast.ClassDef):
            out[node.name] = {
                stmt.target.id: inspect.cleandoc(after.value.value)
                for stmt, after in zip(node.body, node.body[1:], strict=False)
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                if isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)
            }
    return out


def described(body: dict[str, Any], root: str, docs: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A model's JSON Schema (`root` its class) with each field's docstring as its description, where it has none."""
    for name, node in [(root, body), *(body.get("$defs") or {}).items()]:
        for field, spec in (node.get("properties") or {}).items():
            if (doc := docs.get(name, {}).get(field)) and isinstance(spec, dict):
                spec.setdefault("description", doc)
    return body


def schema() -> dict[str, Any]:
    return described(ClusterConfig.model_json_schema(), "ClusterConfig", field_docs())
