"""The project folder: the checkout whose `clusters/` modules and `Pulumi.<stack>.yaml` files the program reads, and
the folder every message's file is shown relative to (`clusters/nerc.py:12`).

One variable, read at each use (never copied at import): the tests point it at a copy of the project, and a spawned
loader at the folder its parent names. The package is installed editable (`pip install -e .`, as the Makefile does),
so the default is the checkout this file is in."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
