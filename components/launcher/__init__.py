"""What runs inside the pod: standard-library Python 3.8+, shipped verbatim (every module here but this one) as the
keys of one ConfigMap per namespace and run as `python3 -I /opt/launcher` (docs/launcher.md). In the order they run:
contract.py (the input), facts.py (the kernel), memlock.py, nccl_env.py (the decisions), plan.py (the
report), launch.py (the files, exec); bandwidth.py and allreduce.py: the bandwidth check the launcher execs."""

import functools
import pathlib

FOLDER = pathlib.Path(__file__).parent


@functools.cache
def shipped_files() -> dict[str, str]:
    """The ConfigMap's data: the tested files themselves, never a copy (read once per process)."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(FOLDER.glob("*.py")) if p.name != "__init__.py"}
