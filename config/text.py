"""Text from outside the program (the cluster's messages, a log, a file name) as a terminal may show it: printed as it is,
an escape sequence recolours the screen, a newline forges a line, a bidi override reverses what follows. JSON keeps it raw."""


def escaped(text: object) -> str:
    """`text` as one line a terminal shows as it is: every character Python does not call printable (controls, bidi
    overrides, format characters, separators, unassigned code points) written as its escape (`\\x1b`, `\\n`, `\\u202e`)."""
    line = str(text)
    if line.isprintable():  # the common case: one pass in C
        return line
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in line)


def escaped_lines(text: str) -> str:
    """A message of several lines the program wrote, each line `escaped`: the newlines it means stay."""
    return "\n".join(escaped(line) for line in text.split("\n"))
