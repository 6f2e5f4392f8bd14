"""`python -m stacks ...`: the documented command, kept where users know it. The command line itself is cli/ (the top
layer); this entry point is the one module of stacks/ that imports it (docs/architecture.md, held by
tests/test_layers.py). Importing the package first has already made Ctrl-C quiet (stacks/_process.py)."""

from cli.main import run

run()
