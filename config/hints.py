"""A stack module's Python mistake in the stack file's words: the line to change (the last clusters/ frame) and, for a
user who writes YAML, the fix (`nodes: 1` in a call, `true`, `null`, text or a constant without quotes)."""

import difflib
import linecache
import re
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

from config import project, provenance

_YAML_WORDS = {"true": "True", "yes": "True", "on": "True", "false": "False", "no": "False", "off": "False"}
_YAML_WORDS |= dict.fromkeys(("null", "none", "nil", "~"), "None")


def mistake(err: BaseException, path: Path, source: str, defined: dict[str, Any]) -> str:
    """The one line that says what went wrong in the module at `path` (`source` as messages name it), at its line."""
    at = failing_line(err.__traceback__, path) or source
    if isinstance(err, SyntaxError):
        line, hint = _syntax_hint(err)
        where = provenance.shown((err.filename, 0)).removesuffix(":0") if err.filename else source
        return f"{where}:{line}: not valid Python: {err.msg}" + (f": {hint}" if hint else "")
    if isinstance(err, SystemExit):
        code = err.code if isinstance(err.code, int) else 1 if err.code is not None else 0
        return (
            f"{at}: the module exited (code {code}) while it was loaded: a stack module only defines CONFIG (sys.exit ends the "
            "program that loads it)"
        )
    hint = _name_hint(err, at, defined) if isinstance(err, NameError) else ""
    return f"{at}: the stack module failed: " + ": ".join(part for part in (type(err).__name__, _text(err), hint) if part)


def _text(err: BaseException) -> str:
    """An exception's message; one whose __str__ fails is named by its class instead of failing in turn."""
    try:
        return str(err)
    except Exception:  # noqa: BLE001
        return "(its message cannot be shown)"


def failing_line(tb: TracebackType | None, path: Path) -> str:
    """The last line of a file of the module's folder on the traceback (with the stack's line that reached a helper)."""
    folder, own, last = path.parent.resolve(), None, None
    for frame, lineno in traceback.walk_tb(tb):
        file = Path(frame.f_code.co_filename).resolve()
        if file.parent == folder:
            last = (str(file), lineno)
            own = last if file == path.resolve() else own
    return "" if last is None else provenance.shown(last) + (f" (from {provenance.shown(own)})" if own is not None and own != last else "")


def _syntax_hint(err: SyntaxError) -> tuple[int | None, str]:
    """(the line, a hint or ""): `nodes: 1` in a call, on any line the error spans (Python may name the line before)."""
    lines = linecache.getlines(err.filename or "") if err.filename else []
    for number in range(err.lineno or 0, max(err.lineno or 0, err.end_lineno or 0) + 1):
        text = lines[number - 1] if 0 < number <= len(lines) else err.text or ""
        found = re.search(r"\b([A-Za-z_]\w*)\s*:\s*(?=[^,)\]}\s])", text)
        if found is not None and found.group(1) not in ("lambda", "else", "try", "finally", "class", "def"):
            key, value = found.group(1), _argument(text[found.end() :])
            return number, f"use `{key}={value}` (a keyword argument is written with =; `{key}: {value}` is how a YAML file writes it)"
    return err.lineno, ""


def _argument(text: str) -> str:
    """The value an argument starts with: up to the comma or bracket that ends it, its own brackets and quotes kept whole."""
    depth, quote = 0, ""
    for at, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}" and depth > 0:
            depth -= 1
        elif char in ",)]}#" and depth == 0:
            return text[:at].strip()
    return text.strip()


def _name_hint(err: NameError, at: str, defined: dict[str, Any]) -> str:
    """A bare word used as a value: a mistyped or undefined name (`H_KIM`, `NAMESPACE`), `true`, `null`, or bare text."""
    if not isinstance(name := getattr(err, "name", None), str):
        return ""
    file, _, line = at.split(" ")[0].rpartition(":")
    text = linecache.getline(str(project.ROOT / file), int(line)) if line.isdigit() else ""
    keyword = re.search(rf"\b([A-Za-z_]\w*)\s*=\s*{re.escape(name)}\b", text)
    if python := _YAML_WORDS.get(name.lower()):
        return f"Python writes {python}" + (f": `{keyword.group(1)}={python}`" if keyword else "")
    # `nccl-test` unquoted is `nccl - test` to Python, which names only `nccl`: the text is the whole dashed word.
    dashed = re.search(rf"(?<![\w.'\"-]){re.escape(name)}(?:-\w+)+", text)
    word = dashed.group(0) if dashed else name
    as_key = not keyword and re.search(rf"\b{re.escape(name)}\s*:", text)  # `{PATH: "/bin"}`: a key
    quoted = f'{keyword.group(1)}="{word}"' if keyword else f'"{word}"'
    quote = (
        f'quote a key (`"{word}": ...`), or write a keyword argument as `{name}=...`' if as_key else f"if it is text, quote it: `{quoted}`"
    )
    module = getattr(defined.get("__spec__"), "origin", None) or ""
    assigned = provenance.assignments(module) if module else {}
    close = [] if dashed else difflib.get_close_matches(name, [n for n in defined if not n.startswith("__")], n=3, cutoff=0.6)
    if not close and name.isupper() and not as_key:  # a constant's name, never text (quoted, `NAMESPACE` is no valid name)
        constants = [n for n in assigned if n.isupper()]
        also = f", or use one it defines: {', '.join(constants[:5])}" if constants else ""
        return f"the module defines no {name}: define it (`{name} = ...`) above its first use{also}"
    if not close:
        return quote
    meant = " or ".join(f"`{c}`" + (f" ({provenance.shown((module, assigned[c]))})" if c in assigned else "") for c in close)
    return f"did you mean {meant}, which the module defines? Else, {quote}"
