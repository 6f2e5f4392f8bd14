"""Errors that name the object and the field (`workloads[h-kim].nodes`), whether the config comes from a stack
module or a YAML file (`located`, `describe_errors`, `ModelError`), and the stand-in machinery that lets a stack
module run on past a model it gets wrong, so that all its errors are reported together (`DEFERRED`,
`IN_STACK_MODULE`).

`Strict` is the base of every model: unknown fields are errors, values immutable, sets refused.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from config import provenance

# --- errors that name the object ----------------------------------------------------------------


def named_path(path: tuple[str | int, ...], root: Any) -> str:
    """A config path as a user reads it, with the line that writes it where one is known:
    `workloads[h-kim] at clusters/barcelona.py:160`."""
    line = provenance.shown(provenance.origin(root, path))
    return f"{located(path, root)} at {line}" if line else located(path, root)


class FieldError(ValueError):
    """A check across fields that knows which field is wrong: `path` is relative to the model
    that raises it (a tuple of field names and list indexes), so the message can be located."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class FieldErrors(ValueError):
    """Several FieldErrors of one model, reported together (every invalid value, not the first)."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(e.message for e in errors))
        self.errors = errors


class Problems:
    """Collects the FieldErrors of a model's cross-field checks, so each entry is checked whatever another's errors."""

    def __init__(self) -> None:
        self.found: list[FieldError] = []

    @contextmanager
    def collect(self) -> Iterator[None]:
        try:
            yield
        except FieldError as err:
            if all(e.path != err.path for e in self.found):  # a TCP variant failing as its source does: one cause, one error
                self.found.append(err)
        except (KeyError, StopIteration, ValueError):
            if not self.found:
                raise  # not a consequence of an error already reported: a defect, shown as one
            # else a check tripping over a value an earlier error already names: that error is the report

    def raise_all(self) -> None:
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise FieldErrors(self.found)


def _item_name(container: Any, index: int) -> str | None:
    try:
        item = container[index]
    except (IndexError, KeyError, TypeError):
        return None
    name = item.get("name") if isinstance(item, dict) else getattr(item, "name", None)
    return name if isinstance(name, str) and name else None


def located(loc: tuple[str | int, ...], data: Any) -> str:
    """A pydantic location as a user reads it: list items by their `name` where they have one
    (`workloads[h-kim].nodes`), by index otherwise (`mounts[0].volume`)."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            name = _item_name(node, part)
            out += f"[{name}]" if name else f"[{part}]"
            try:
                node = node[part]
            except (IndexError, KeyError, TypeError):
                node = None
        elif part == "[key]":
            continue  # pydantic's mark of a dict's key: the message says it is the key
        else:
            # A dict key that is not a plain name (`..data`, `kubernetes.io/hostname`) is quoted, so the path stays readable.
            shown = str(part) if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else f"[{str(part)!r}]"
            out += shown if shown.startswith("[") or not out else f".{shown}"
            node = node.get(part) if isinstance(node, dict) else getattr(node, str(part), None)
    return out


class Entry(NamedTuple):
    """One problem of a model: the field as the user reads it, the file and line that write it, the message, and, where the
    field's value is a module-level constant of the stack module (`namespace=NS`), that name and the line that sets it."""

    where: str
    written: str
    text: str
    constant: tuple[str, str] | None = None

    def line(self) -> str:
        where = f"{self.where} ({self.written})" if self.where and self.written else self.where or self.written
        return f"{where}: {self.text}" if where else self.text


def _entries(
    err: ValidationError,
    data: Any,
    prefix: str = "",
    line_of: Callable[[tuple[str | int, ...]], str] | None = None,
    skip: Callable[[tuple[str | int, ...]], bool] | None = None,
    constant_of: Callable[[tuple[str | int, ...]], tuple[str, str] | None] | None = None,
) -> list[Entry]:
    out = []
    for e in err.errors():
        loc = tuple(e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        cause = (e.get("ctx") or {}).get("error")
        found = [(loc, msg)]
        if isinstance(cause, FieldError):
            found = [(loc + cause.path, cause.message)]
        elif isinstance(cause, FieldErrors):
            found = [(loc + c.path, c.message) for c in cause.errors]
        elif e["type"] == "extra_forbidden":
            found = [(loc, "unknown field (check the spelling; `python -m stacks schema` lists the fields)")]
        elif e["type"] == "int_type" and isinstance(e.get("input"), bool):
            found = [
                (
                    loc,
                    f"Input should be a valid integer, not the boolean {str(e['input']).lower()} (YAML reads true, false, yes, "
                    "no, on and off as booleans): write the number",
                )
            ]
        elif e["type"] == "int_type" and isinstance(e.get("input"), str):
            found = [(loc, msg + ": write the number without quotes")]
        elif e["type"] == "too_long" and isinstance(e.get("input"), (list, dict)):
            limit, actual = (e.get("ctx") or {}).get("max_length"), len(e["input"])
            found = [(loc, f'{actual} entries, at most {limit}: a bound of the program (docs/reference.md, "Bounds")')]
        for at, text in found:
            if skip is not None and skip(at):
                continue
            where = located(at, data)
            where = f"{prefix}.{where}" if prefix and where and not where.startswith("[") else f"{prefix}{where}"
            written = line_of(at) if line_of is not None else ""
            out.append(Entry(where, written, text, constant_of(at) if constant_of is not None else None))
    return out


def describe_errors(
    err: ValidationError,
    data: Any,
    prefix: str = "",
    line_of: Callable[[tuple[str | int, ...]], str] | None = None,
    skip: Callable[[tuple[str | int, ...]], bool] | None = None,
) -> list[str]:
    """One `field: message` line per problem (a check across fields may find several), located by names in `data`;
    with `line_of`, the file and line that write the field follow its path (`volumes[data] (clusters/nerc.py:95): ...`)."""
    return [entry.line() for entry in _entries(err, data, prefix, line_of, skip)]


SHOWN_USES = 3
"""How many of the fields a bad constant fills an error lists by name (the rest are counted)."""


def _grouped(entries: list[Entry]) -> list[str]:
    """Each entry once; the entries of one bad module constant (`NS = "Bad_NS"`, used by eight fields) as one line at the
    line that sets it, the line to change, listing the fields it fills."""
    lines: list[str] = []
    uses: dict[tuple[tuple[str, str], str], list[Entry]] = {}
    for entry in entries:
        if entry.constant is None:
            lines.append(entry.line())
            continue
        key = (entry.constant, entry.text)
        if key not in uses:
            uses[key] = []
            lines.append("\0" + str(len(uses) - 1))  # a place held for the group, where its first entry was
        if entry not in uses[key]:
            uses[key].append(entry)
    groups = list(uses.items())
    out = []
    for line in lines:
        if not line.startswith("\0"):
            out.append(line)
            continue
        ((name, at), text), used = groups[int(line[1:])]
        used = sorted(used, key=_in_file_order)
        shown = [f"{u.where} at {u.written}" if u.written else u.where for u in used[:SHOWN_USES]]
        more = f" and {len(used) - SHOWN_USES} more" if len(used) > SHOWN_USES else ""
        out.append(f"{name} ({at}): {text} (the value of {name} in {', '.join(shown)}{more})")
    return list(dict.fromkeys(out))


def _in_file_order(entry: Entry) -> tuple[str, int]:
    file, _, line = entry.written.rpartition(":")
    return (file, int(line)) if line.isdigit() else (entry.written, 0)


class ModelError(Exception):
    """A model built in Python (a stack module) that failed validation, with its name: pydantic
    alone reports `nodes: ...` for `Workload(name="h-kim", nodes=0)`."""

    @classmethod
    def of(cls, errors: list[ModelError]) -> ModelError:
        """Several models' errors as one, each line once, and a bad module constant's errors as one line."""
        combined = cls.__new__(cls)
        combined.entries = [entry for e in errors for entry in e.entries]
        combined.lines = _grouped(combined.entries)
        Exception.__init__(combined, "\n".join(combined.lines))
        return combined

    def __init__(
        self,
        model: type[Strict],
        data: dict[str, Any],
        err: ValidationError,
        skip: Callable[[Any, tuple[str | int, ...]], bool] | None = None,
    ) -> None:
        name = data.get("name")
        # A model with no place of its own (a Mount, a ContainerPort) is named by its class: it fails when
        # Python builds it, before the Workload(...) around it exists.
        # A ClusterConfig's fields are the config's own paths (`workloads[h-kim].nodes`).
        prefix = "" if model.WHOLE_CONFIG else model.COLLECTION or model.__name__
        if isinstance(name, str) and prefix:
            prefix += f"[{name}]"
        here = provenance.written_here()  # the failing call: the line of a field whose value holds no line of its own
        call = (here, model.__name__) if here is not None else None

        def line_of(loc: tuple[str | int, ...]) -> str:
            # The field's own line (its keyword, list item or dict key), else the call's. Always the file with the line
            # (`clusters/x.py:12`), the form editors and terminals link, even where the message opens with the same file.
            return provenance.shown(provenance.origin(data, loc, call) or here)

        def constant_of(loc: tuple[str | int, ...]) -> tuple[str, str] | None:
            if here is None:
                return None
            found = provenance.constant(here, model.__name__, loc, _value_at(data, loc))
            return (found[0], provenance.shown(found[1])) if found is not None else None

        self.entries = _entries(err, data, prefix, line_of, (lambda loc: skip(data, loc)) if skip else None, constant_of)
        self.lines = _grouped(self.entries)
        super().__init__("\n".join(self.lines))


def _value_at(data: Any, loc: tuple[str | int, ...]) -> Any:
    node: Any = data
    for part in loc:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list | tuple) and isinstance(part, int):
            node = node[part] if -len(node) <= part < len(node) else None
        else:
            node = getattr(node, str(part), None)
    return node


DEFERRED: ContextVar[list[ModelError] | None] = ContextVar("deferred", default=None)
"""While a stack module runs (stacks.load_module): the models it built that failed, each replaced by a stand-in so the
module runs on; the ClusterConfig(...) raises them all together (ModelError.of)."""
_INVALID: dict[int, weakref.ReferenceType[Any]] = {}  # by id: a model with a list field is not hashable


def _mark_invalid(model: Any) -> None:
    key = id(model)
    _INVALID[key] = weakref.ref(model)
    weakref.finalize(model, _INVALID.pop, key, None).atexit = False


def _is_invalid(model: Any) -> bool:
    known = _INVALID.get(id(model))
    return known is not None and known() is model


def _built_from_invalid(data: Any, loc: tuple[str | int, ...]) -> bool:
    """Whether a location runs through a stand-in of an invalid model (its own error says what is wrong there)."""
    node = data
    for part in loc:
        if isinstance(part, int):
            try:
                node = node[part]
            except (IndexError, KeyError, TypeError):
                return False
        else:
            node = node.get(part) if isinstance(node, dict) else getattr(node, str(part), None)
        if node is None:
            return False
        if _is_invalid(node):
            return True
    return False


IN_STACK_MODULE: ContextVar[bool] = ContextVar("in_stack_module", default=False)
"""Set while a stack module runs (stacks.load_module): its models' errors then name their object."""
_CONSTRUCTING: ContextVar[int] = ContextVar("constructing", default=0)


class Strict(BaseModel):
    """Unknown fields are errors, values are immutable. Field documentation is each field's
    docstring (read by config/schema.py for `python -m stacks schema`, not at import: extracting it
    costs every `pulumi preview` tens of milliseconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    COLLECTION: ClassVar[str] = ""
    """Where objects of this model live in a ClusterConfig, for error messages (`workloads`)."""
    WHOLE_CONFIG: ClassVar[bool] = False
    """True on ClusterConfig: its fields are the config's own paths, and it raises its stand-ins' errors together. A flag,
    because the model is defined above this module (config/stack.py)."""

    def __init__(self, **data: Any) -> None:
        # Only a model built by a stack module's code gets a ModelError: pydantic validates nested data
        # through __init__ as well, and a nested error must reach the outer model as a ValidationError,
        # which pydantic locates (workloads.0.tcp_variants.0.name) and the outermost model names.
        depth = _CONSTRUCTING.get()
        by_module = depth == 0 and IN_STACK_MODULE.get()
        if by_module:
            provenance.remember(self)  # errors and findings name the line that wrote it (config/provenance.py)
        deferred = DEFERRED.get() if by_module else None
        token = _CONSTRUCTING.set(depth + 1)
        try:
            super().__init__(**data)
        except ValidationError as err:
            if not by_module:
                raise
            error = ModelError(type(self), data, err, skip=_built_from_invalid)
            if deferred is None:
                raise error from None
            deferred.append(error)
            if not self.WHOLE_CONFIG:
                self._stand_in(data)  # the module runs on, so every model it gets wrong is reported, not the first
                return
        except Exception:
            if not deferred:
                raise
            # A check across the config tripping over a model already reported as invalid: that report is the answer.
        finally:
            _CONSTRUCTING.reset(token)
        if deferred and self.WHOLE_CONFIG:
            raise ModelError.of(deferred) from None

    # pydantic calls a model's own __init__ for every nested model it validates from data (`custom_init`), one Python call
    # per workload, mount, port...: a tenth of a second for the largest config. This one does something only for a model a
    # stack module's code builds itself (a direct call, depth 0), never for one validated inside another, which is what it
    # would be called for: pydantic may treat it as its own, and validate nested data in one pass (a direct call still
    # comes here, as any Python call does).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @model_validator(mode="before")
    @classmethod
    def _no_sets(cls, data: Any) -> Any:
        # pydantic's lax mode takes a set where a list is expected, in the set's iteration order, which follows the hash
        # seed (PYTHONHASHSEED) for strings and for the models hashed from them: two renders of one stack would differ.
        # No field of the model is a set, so a set or frozenset is refused wherever it is written (a module's or YAML's !!set).
        if not isinstance(data, dict):
            return data
        found = [
            FieldError((key,), "a set has no order (it follows Python's hash seed, so two renders differ): write a list [...]")
            for key, value in data.items()
            if isinstance(value, (set, frozenset))
        ]
        if len(found) == 1:
            raise found[0]
        if found:
            raise FieldErrors(found)
        return data

    def _stand_in(self, data: dict[str, Any]) -> None:
        """Become an unvalidated stand-in with the values given (pydantic's model_construct), marked invalid: what is
        built on it is reported only where its own fields are not (`_built_from_invalid`)."""
        fresh = type(self).model_construct(**{k: v for k, v in data.items() if k in type(self).model_fields})
        for slot in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
            object.__setattr__(self, slot, getattr(fresh, slot, None))
        _mark_invalid(self)
