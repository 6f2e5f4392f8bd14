"""The one escaping function for text from outside the program (config/text.py): what a terminal would act on is
shown as an escape, everything printable (non-ASCII letters too) as it is."""

from __future__ import annotations

import pytest

from config.text import escaped, escaped_lines


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[31mred", "\\x1b[31mred"),  # an escape sequence (recolours, clears, retitles)
        ("ring\x07", "ring\\x07"),
        ("a\r\nb", "a\\r\\nb"),  # a carriage return or newline would start a forged line
        ("\u202eevil", "\\u202eevil"),  # a bidi override reverses what follows
        ("\u2066x\u2069", "\\u2066x\\u2069"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("\u2028", "\\u2028"),
        ("\x85\x9b", "\\x85\\x9b"),  # C1 controls (CSI)
        ("tab\there", "tab\\there"),
        ("\x7f", "\\x7f"),
        ("\udcff", "\\udcff"),  # a byte that was not UTF-8, kept by surrogateescape
        ("nœud-été 東京 ok", "nœud-été 東京 ok"),
        ("", ""),
    ],
)
def test_what_a_terminal_would_act_on_is_shown_escaped(raw: str, shown: str) -> None:
    assert escaped(raw) == shown
    assert escaped(escaped(raw)) == shown and escaped(raw).isprintable()


def test_a_message_keeps_its_own_lines_and_escapes_the_rest() -> None:
    assert escaped_lines("first\n  second \x1b[2K\rforged") == "first\n  second \\x1b[2K\\rforged"
    assert escaped(3) == "3" and escaped(None) == "None"
