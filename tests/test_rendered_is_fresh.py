"""rendered/ is exactly what the code renders: a pull request's rendered/ diff is then the true change to
what each cluster gets. Stale files fail `make test` (and `.ci/run`), naming the stacks to re-render."""

from __future__ import annotations

from pathlib import Path

import pytest

import stacks
from tests.helpers import ROOT, rendered_stack
from tools.writer import write


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_rendered_is_what_the_code_renders(tmp_path: Path) -> None:
    committed = ROOT / "rendered"
    stale = []
    for name in stacks.names():
        fresh = _files(write(rendered_stack(name), tmp_path))
        if not (committed / name).is_dir() or _files(committed / name) != fresh:
            stale.append(name)
    orphans = sorted(p.name for p in committed.iterdir() if p.is_dir() and p.name not in stacks.names()) if committed.is_dir() else []
    assert not problems(stale, orphans), (
        f"{problems(stale, orphans)}. Run `make render`, read `git diff rendered/`, and commit it with the change."
    )


def problems(stale: list[str], orphans: list[str]) -> str:
    """What is wrong with rendered/, naming only what is (a "stale for: -" read as if a stack named "-" were stale); ""
    when nothing is."""
    found = [f"rendered/ is stale for: {', '.join(stale)}"] if stale else []
    found += [f"rendered/ has folders left over from removed stacks: {', '.join(orphans)} (remove them)"] if orphans else []
    return "; ".join(found)


# --- the message names only what is wrong ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "stale,orphans,says,never",
    [
        ([], [], "", "rendered/"),
        (["nerc"], [], "rendered/ is stale for: nerc", "left over"),
        ([], ["mylab"], "left over from removed stacks: mylab", "stale"),
        (["a", "b"], ["c"], "stale for: a, b; rendered/ has folders left over from removed stacks: c", ": -"),
    ],
)
def test_the_freshness_message_names_only_what_is_wrong(stale: list[str], orphans: list[str], says: str, never: str) -> None:
    message = problems(stale, orphans)
    assert says in message and (never not in message)
    assert ": -" not in message
