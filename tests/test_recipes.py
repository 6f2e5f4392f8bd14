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


def in_workload(text: str, name: str, old: str, new: str) -> str:
    match = re.search(rf'Workload\(\s*name="{re.escape(name)}",', text)
    assert match, name
    start = match.start()
    end = text.index("Workload(", start + 1) if "Workload(" in text[start + 1 :] else len(text)
    body = text[start:end]
    assert old in body, (name, old)
    return text[:start] + body.replace(old, new, 1) + text[end:]


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
    text = insert_after(text, "        service_accounts=[", add[0])
    text = insert_after(text, "    workloads=[", add[1])
    assert 'replace `transport="rdma",` with `transport="tcp",`' in recipe("Switch a workload to TCP.")
    text = in_workload(text, "h-kim", 'transport="rdma",', 'transport="tcp",')
    assert 'Add `state="stopped",` to its `Workload(...)`' in recipe("Stop a workload.")
    text = in_workload(text, "tsfm-node", 'kind="statefulset",', 'kind="statefulset",\n            state="stopped",')
    stack.write_text(text, encoding="utf-8")

    (script,) = blocks(recipe("Add a cluster."), "sh")
    commands = [line for line in script.splitlines() if line.strip() and not line.startswith("make ")]
    for line in commands:
        subprocess.run(["bash", "-c", line], cwd=project, check=True)

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    render = subprocess.run(
        [sys.executable, "-m", "stacks", "render", "--all"], cwd=project, capture_output=True, text=True, env=env, timeout=300
    )
    assert render.returncode == 0, render.stderr
    assert "mylab: wrote" in render.stdout
    listed = subprocess.run([sys.executable, "-m", "stacks", "list"], cwd=project, capture_output=True, text=True, env=env, timeout=120)
    assert "mylab" in listed.stdout.split()

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
    assert touched == {"stacks/barcelona.py", "stacks/mylab.py", "Pulumi.mylab.yaml", "rendered"}, touched
