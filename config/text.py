"""Text that comes from outside the program, as a terminal may show it: the one escaping function.

What the cluster says (a container's termination message, a waiting reason, an image, an env value added by hand, a
Kueue message), what a log holds (a bandwidth check's lines), what a state file or a file name holds: anyone who can
write one of those (a container, a colleague with edit rights in a namespace) chooses its characters. Printed as they
are, an escape sequence recolours or clears the screen, a carriage return or a newline forges a whole line
("everything declared running runs", "no drift"), a bidi override reverses what follows. So every human-readable
output shows such text through `escaped`, where it is printed; JSON output keeps the raw value (its own escaping is
JSON's).
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escaped(text: object) -> str:
    """`text` as one line a terminal shows as it is: every character Python does not call printable (the C0 and C1
    controls: ESC, BEL, CR, LF, TAB, DEL; the bidi overrides, embeddings and isolates; zero-width and other format
    characters; line and paragraph separators; unassigned code points and surrogates) written as its escape (`\\x1b`,
    `\\n`, `\\u202e`). Printable text, non-ASCII letters included, is unchanged."""
    line = text if isinstance(text, str) else str(text)
    if line.isprintable():  # the common case: one pass in C
        return line
    return "".join(c if c.isprintable() else _escape(c) for c in line)


def escaped_lines(text: str) -> str:
    """A message of several lines the program wrote (an error's continuation lines), each line `escaped`: the newlines
    it means stay, anything else a foreign part brought is shown escaped."""
    return "\n".join(escaped(line) for line in text.split("\n"))
