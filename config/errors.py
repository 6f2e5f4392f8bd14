"""Errors that name the object and the field (`workloads[h-kim].nodes`) and the line to change, whether the config
comes from a stack module or a YAML file; `Strict`, every model's base."""

import difflib
import re
import typing
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from config import provenance

FieldPath = tuple[str | int, ...]
LineOf = Callable[[FieldPath], str]
ConstantOf = Callable[[FieldPath], tuple[str, str] | None]


def named_path(path: FieldPath, root: Any) -> str:
    """A config path as a user reads it, with its line where known: `workloads[h-kim] at clusters/barcelona.py:160`."""
    line = provenance.shown(provenance.origin(root, path))
    return f"{located(path, root)} at {line}" if line else located(path, root)


class FieldError(ValueError):
    """A check across fields that knows which field is wrong: `path` is relative to the model that raises it."""

    def __init__(self, path: FieldPath, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class FieldErrors(ValueError):
    """Several FieldErrors of one model, reported together (every invalid value, not the first)."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(e.message for e in errors))
        self.errors = errors


def raise_all(found: list[FieldError]) -> None:
    if found:
        raise FieldErrors(found)  # one or several: a pydantic error's text is the same


def located(loc: FieldPath, data: Any) -> str:
    """A pydantic location as a user reads it: list items by `name` where they have one (`workloads[h-kim].nodes`)."""
    out, node = "", data
    for part in loc:
        if part == "[key]":
            continue  # pydantic's mark of a dict's key: the message says it is the key
        node = provenance.child(node, part)
        if isinstance(part, int):
            name = provenance.child(node, "name")
            out += f"[{name}]" if isinstance(name, str) and name else f"[{part}]"
        else:
            # A dict key that is not a plain name (`..data`, `kubernetes.io/hostname`) is quoted, so the path stays readable.
            shown = str(part) if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else f"[{str(part)!r}]"
            out += shown if shown.startswith("[") or not out else f".{shown}"
    return out


class Entry(NamedTuple):
    """One problem: the field, the line that writes it, the message, and the module constant it is (`NS`) with its line."""

    where: str
    written: str
    text: str
    constant: tuple[str, str] | None = None

    def line(self) -> str:
        where = f"{self.where} ({self.written})" if self.where and self.written else self.where or self.written
        return f"{where}: {self.text}" if where else self.text


def _messages(e: Any) -> list[tuple[FieldPath, str]]:
    """The (path, message) pairs one pydantic error stands for, in the words of a stack file."""
    loc = tuple(e["loc"])
    ctx = e.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, FieldError):
        return [(loc + cause.path, cause.message)]
    if isinstance(cause, FieldErrors):
        return [(loc + c.path, c.message) for c in cause.errors]
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        msg = "unknown field (check the spelling; `python -m stacks schema` lists the fields)"
    elif e["type"] == "int_type" and isinstance(e.get("input"), bool):
        msg = (
            f"Input should be a valid integer, not the boolean {str(e['input']).lower()} (YAML reads true, false, yes, "
            "no, on and off as booleans): write the number"
        )
    elif e["type"] == "int_type" and isinstance(e.get("input"), str):
        msg += ": write the number without quotes"
    elif e["type"] == "too_long" and isinstance(e.get("input"), (list, dict)):
        msg = f'{len(e["input"])} entries, at most {ctx.get("max_length")}: a bound of the program (docs/reference.md, "Bounds")'
    return [(loc, msg)]


def _model_in(annotation: Any) -> Any:
    """The model a field's type holds (X, X | None, list[X], dict[str, X], Annotated[X, ...]), or None."""
    if hasattr(annotation, "model_fields"):
        return annotation
    return next((m for m in map(_model_in, typing.get_args(annotation)) if m is not None), None)


def _fields_at(model: Any, loc: FieldPath) -> list[str]:
    """The fields of the model at `loc` under `model`: a list index or a dict key stays on the model its items are."""
    for part in loc:
        if model is not None and part in model.model_fields:
            model = _model_in(model.model_fields[part].annotation)
    return list(model.model_fields) if model is not None else []


def _misspelt(errors: list[Any], model: Any) -> list[Any]:
    """An unknown key close to a field is named with it; close to a required field missing beside it, it is one problem."""
    missing = [tuple(e["loc"]) for e in errors if e["type"] == "missing" and e["loc"] and isinstance(e["loc"][-1], str)]
    out, meant = [], set()
    for e in errors:
        loc = tuple(e["loc"])
        if e["type"] == "extra_forbidden" and loc:
            near = [m[-1] for m in missing if m[:-1] == loc[:-1] and m not in meant]
            if close := difflib.get_close_matches(str(loc[-1]), near, n=1):
                meant.add((*loc[:-1], close[0]))
                e = {**e, "type": "misspelt", "msg": f"unknown field: did you mean {close[0]}, a required field?"}
            elif close := difflib.get_close_matches(str(loc[-1]), _fields_at(model, loc[:-1]), n=1):
                e = {**e, "type": "misspelt", "msg": f"unknown field: did you mean {close[0]}?"}
        out.append(e)
    return [e for e in out if not (e["type"] == "missing" and tuple(e["loc"]) in meant)]


def _entries(err: ValidationError, data: Any, prefix: str, line_of: LineOf, constant_of: ConstantOf, model: Any) -> list[Entry]:
    out = []
    for e in _misspelt(err.errors(), model):
        for at, text in _messages(e):
            where = located(at, data)
            where = f"{prefix}.{where}" if prefix and where and not where.startswith("[") else f"{prefix}{where}"
            out.append(Entry(where, line_of(at), text, constant_of(at)))
    return out


def describe_errors(err: ValidationError, data: Any, model: type[BaseModel], line_of: LineOf | None = None) -> list[str]:
    """One `field: message` line per problem, with the line that writes it (`volumes[data] (clusters/nerc.py:95): ...`)."""
    return [entry.line() for entry in _entries(err, data, "", line_of or (lambda _: ""), lambda _: None, model)]


SHOWN_USES = 3  # the fields a bad constant fills that an error lists by name (the rest are counted)


def _grouped(entries: list[Entry]) -> list[str]:
    """Each entry once; those of one bad module constant (`NS = "Bad_NS"`) as one line at the line that sets it."""
    groups: dict[Any, dict[Entry, None]] = {}  # each group's entries as an ordered set
    for entry in entries:
        groups.setdefault(entry.line() if entry.constant is None else (entry.constant, entry.text), {})[entry] = None
    out = []
    for key, group in groups.items():
        if isinstance(key, str):
            out.append(key)
            continue
        (name, at), text = key
        used = sorted(group, key=_in_file_order)
        shown = [f"{u.where} at {u.written}" if u.written else u.where for u in used[:SHOWN_USES]]
        more = f" and {len(used) - SHOWN_USES} more" if len(used) > SHOWN_USES else ""
        out.append(f"{name} ({at}): {text} (the value of {name} in {', '.join(shown)}{more})")
    return list(dict.fromkeys(out))


def _in_file_order(entry: Entry) -> tuple[str, int]:
    file, _, line = entry.written.rpartition(":")
    return (file, int(line)) if line.isdigit() else (entry.written, 0)


class ModelError(ValueError):
    """A model a stack module built that failed validation, named as the config names it (`workloads[h-kim].nodes`)."""

    def __init__(self, model: type["Strict"], data: dict[str, Any], err: ValidationError, here: provenance.Site) -> None:
        # A Mount or ContainerPort fails before the Workload(...) around it exists: named by its class.
        prefix = "" if model.WHOLE_CONFIG else model.COLLECTION or model.__name__
        if isinstance(name := data.get("name"), str) and prefix:
            prefix += f"[{name}]"

        def line_of(loc: FieldPath) -> str:
            # The field's own line (its keyword, list item or dict key, or the helper's line that fills it), else the call's.
            return provenance.shown(provenance.origin(data, loc, (here, model.__name__)) or (here.file, here.line))

        def constant_of(loc: FieldPath) -> tuple[str, str] | None:
            found = provenance.constant(here, model.__name__, loc, provenance.walk(data, loc))
            return (found[0], provenance.shown(found[1])) if found is not None else None

        self.lines = _grouped(_entries(err, data, prefix, line_of, constant_of, model))
        super().__init__("\n".join(self.lines))


class Strict(BaseModel):
    """Unknown fields are errors, values are immutable, sets refused; each field is documented by its docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    COLLECTION: ClassVar[str] = ""  # where objects of this model live in a ClusterConfig, for error messages (`workloads`)
    WHOLE_CONFIG: ClassVar[bool] = False  # True on ClusterConfig: its fields are the config's own paths

    def __init__(self, **data: Any) -> None:
        # A model a stack module's code builds remembers its line, and fails naming it (config/provenance.py).
        here = provenance.written_here()
        try:
            super().__init__(**data)
        except ValidationError as err:
            if here is None:
                raise
            raise ModelError(type(self), data, err, here) from None
        if here is not None:
            provenance.remember(self, here)

    # Else pydantic calls __init__ for every nested model it validates: only a direct (the user's) call needs it.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @model_validator(mode="before")
    @classmethod
    def _no_sets(cls, data: Any) -> Any:
        # pydantic takes a set for a list, in an order that follows PYTHONHASHSEED (two renders would differ).
        if isinstance(data, dict):
            message = "a set has no order (it follows Python's hash seed, so two renders differ): write a list [...]"
            raise_all([FieldError((key,), message) for key, value in data.items() if isinstance(value, (set, frozenset))])
        return data
