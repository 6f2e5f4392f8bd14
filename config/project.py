"""The project folder: the checkout whose `clusters/` modules and `Pulumi.<stack>.yaml` files the program reads, and the
folder every message's file is shown relative to. Read at each use: the tests point it at a copy of the project."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
