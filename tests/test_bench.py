"""The benchmarks (`make bench`, bench/): each runs what it says it measures, checked here without timing anything."""

from __future__ import annotations

import pytest

from bench import scale
from config.values import MAX_CLUSTER_NODES, MAX_POD_TEMPLATES


def test_curve_rows_cover_the_sizes_the_bench_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's curve runs each size it names (checked here without timing it: check and render stubbed)."""
    seen: list[str] = []
    monkeypatch.setattr(scale, "check", lambda stack: (seen.append(stack["name"]), (0.0, 0.0, 1))[1])
    monkeypatch.setattr(scale, "render", lambda stack: 0.0)
    rows = scale.curve(repeats=1)
    sizes = {(row[1], row[2]) for row in rows}
    assert {n for _, n in sizes} >= {16, 512, 4096}
    assert any(name.startswith("scale-200-4096") for name in seen) and len(rows) == len(seen) == 12
    assert (MAX_POD_TEMPLATES, MAX_CLUSTER_NODES) in sizes
