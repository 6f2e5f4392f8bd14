"""The command line (`python -m stacks ...`, or the `stacks` console script): the top layer, the one package that
may import every other (docs/architecture.md)."""
