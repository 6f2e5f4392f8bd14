"""`python -m stacks ...`: the documented command; the command line itself is cli/ (the top layer)."""

from cli.main import run

run()
