"""The README's recipes, walked through as a user would, on a copy of the project: add a user's workload,
switch another to TCP, stop one, add a cluster by copying a stack module and its stack file. Afterwards
`python -m stacks render --all` (what `make render` runs) and the test suite pass, with no edit outside the
stack files and rendered/. The snippets applied are the README's own, so the README cannot drift from what
works."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SHARED

README = (ROOT / "README.md").read_text(encoding="utf-8")


def recipe(title: str) -> str:
    return README.split(f"**{title}**", 1)[1].split("\n**", 1)[0]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def insert_after(text: str, anchor: str, block: str) -> str:
    assert anchor in text, anchor
    head, tail = text.split(anchor, 1)
    return head + anchor + "\n" + block.rstrip("\n") + tail


def workload_blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of each `Workload(` call in a stack module."""
    starts = [m.start() for m in re.finditer(r"\bWorkload\(", text)]
    return list(zip(starts, [*starts[1:], len(text)], strict=True))


def edit_first(text: str, want: str, old: str, new: str) -> str:
    """Apply `old` -> `new` in the first workload whose block holds `want` (and `old`)."""
    for start, end in workload_blocks(text):
        body = text[start:end]
        if want in body and old in body and "state=" not in body:
            return text[:start] + body.replace(old, new, 1) + text[end:]
    raise AssertionError(f"no workload with {want!r} and {old!r} to apply the recipe to")


def unused(name: str, taken: str) -> str:
    """`name`, or name-2, name-3 ... if the project already has it (a clone where the recipes were followed)."""
    candidates = [name] + [f"{name}{i}" for i in range(2, 100)]
    return next(c for c in candidates if f'"{c}"' not in taken and f'"{c}-sa"' not in taken)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("recipes") / "project"
    # What a clone holds: the tracked files (and new ones not yet committed), nothing ignored.
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        if (ROOT / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, root / rel)
    if SHARED.exists():
        (root.parent / "shared").symlink_to(SHARED)
    # A clone: the diff and check commands read the committed render.
    for git in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clone"]):
        subprocess.run(["git", *git], cwd=root, check=True)
    return root


def test_the_readme_recipes_need_no_test_edit(project: Path) -> None:
    stack = project / "stacks" / "barcelona.py"
    text = stack.read_text(encoding="utf-8")
    add = blocks(recipe("Add a user's workload."), "python")
    assert len(add) == 2, "the recipe shows the service account and the workload"
    user = unused("alice", text)
    text = insert_after(text, "        service_accounts=[", add[0].replace("alice", user))
    text = insert_after(text, "    workloads=[", add[1].replace("alice", user))
    assert 'replace `transport="rdma",` with `transport="tcp",`' in recipe("Switch a workload to TCP.")
    text = edit_first(text, 'transport="rdma",', 'transport="rdma",', 'transport="tcp",')
    assert 'Add `state="stopped",` to its `Workload(...)`' in recipe("Stop a workload.")
    text = edit_first(text, 'kind="statefulset",', 'kind="statefulset",', 'kind="statefulset",\n            state="stopped",')
    stack.write_text(text, encoding="utf-8")

    cluster = next(c for c in ["mylab"] + [f"mylab{i}" for i in range(2, 100)] if not (project / "stacks" / f"{c}.py").exists())
    (script,) = blocks(recipe("Add a cluster."), "sh")
    for line in (line for line in script.splitlines() if line.strip() and not line.startswith("make ")):
        subprocess.run(["bash", "-c", line.replace("mylab", cluster)], cwd=project, check=True)

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    render = subprocess.run(
        [sys.executable, "-m", "stacks", "render", "--all"], cwd=project, capture_output=True, text=True, env=env, timeout=300
    )
    assert render.returncode == 0, render.stderr
    assert f"{cluster}: wrote" in render.stdout
    listed = subprocess.run([sys.executable, "-m", "stacks", "list"], cwd=project, capture_output=True, text=True, env=env, timeout=120)
    assert cluster in listed.stdout.split()

    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not torch", "--ignore=tests/test_recipes.py"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]

    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=project, capture_output=True, text=True, check=True
    )
    touched = {line[3:].split("/", 1)[0] if line[3:].startswith("rendered/") else line[3:] for line in status.stdout.splitlines()}
    assert touched == {"stacks/barcelona.py", f"stacks/{cluster}.py", f"Pulumi.{cluster}.yaml", "rendered"}, touched
