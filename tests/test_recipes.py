"""The README's recipes, replayed as a user would follow them, on a copy of the committed project (HEAD, never
the working tree: a user's own edits of a stack module are theirs, and must not fail this test): add a user's
workload, switch a workload to TCP, stop one, add a cluster by copying a stack module and its stack file. The
snippets and edits are the README's own, so the README cannot drift from what works.

Afterwards, in the copy, `python -m stacks check --all` and `python -m stacks render --all` (what `make check` and
`make render` run) pass, and so do the copy's tests that read the committed stacks (found by reading the test
files, below): "no test needs an edit". The rest of the suite runs on configs the tests own and cannot see a
stack edit, so it is not run again here. Every failure says what was replayed: recipe, file and workload.
The docs' own switches (operator networks on Barcelona, queueing on NERC) are followed the same way, with the same
tests run after them, by tests/test_doc_examples.py.

HEAD may be where a user followed the recipes (or a page of docs) and committed: each recipe establishes what it
starts from (a new name where alice or mylab exists, a running workload to stop), so that following them never turns
this test red. A replay that passed is not run again on the same inputs: the files it reads (`read_by_replay`), not
the commit, key it in pytest's cache."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

import stacks
from tests.helpers import ROOT, SHARED, export_head

# --- reading the README -----------------------------------------------------------------------------------


def recipe(readme: str, title: str) -> str:
    assert f"**{title}**" in readme, f"README.md (HEAD) has no recipe **{title}**: update tests/test_recipes.py with the README"
    return readme.split(f"**{title}**", 1)[1].split("\n**", 1)[0]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


# --- editing a stack module the way the README says ----------------------------------------------------------


@dataclass
class WorkloadCall:
    """One `Workload(...)` call in a stack module's source."""

    name: str
    node: ast.Call

    def keyword(self, arg: str) -> ast.keyword | None:
        return next((k for k in self.node.keywords if k.arg == arg), None)

    def literal(self, arg: str) -> object:
        kw = self.keyword(arg)
        return kw.value.value if kw is not None and isinstance(kw.value, ast.Constant) else None


def offset(text: str, line: int, col: int) -> int:
    """The character offset of an AST position (1-based line, UTF-8 byte column)."""
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[: line - 1]) + len(lines[line - 1].encode()[:col].decode())


def span(text: str, node: ast.AST) -> tuple[int, int]:
    return offset(text, node.lineno, node.col_offset), offset(text, node.end_lineno or node.lineno, node.end_col_offset or 0)  # type: ignore[attr-defined]


def workload_calls(text: str) -> list[WorkloadCall]:
    """The `Workload(name="...", ...)` calls a user edits as the README says (not a helper's `Workload(**fields)`)."""
    calls = []
    for node in ast.walk(ast.parse(text)):
        called = getattr(node, "func", None)
        if isinstance(node, ast.Call) and getattr(called, "id", getattr(called, "attr", None)) == "Workload":
            name = next((k.value for k in node.keywords if k.arg == "name"), None)
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and node.keywords[0].arg is not None:
                calls.append(WorkloadCall(name.value, node))
    return sorted(calls, key=lambda c: (c.node.lineno, c.node.col_offset))


def list_keyword(text: str, arg: str) -> ast.List | None:
    """The first `arg=[...]` in the module, written as a list."""
    found = [k.value for k in ast.walk(ast.parse(text)) if isinstance(k, ast.keyword) and k.arg == arg and isinstance(k.value, ast.List)]
    return min(found, key=lambda n: (n.lineno, n.col_offset), default=None)


def insert_into_list(text: str, arg: str, block: str) -> str:
    """`block` (lines, as the README shows them) as the first item of the module's `arg=[...]`."""
    node = list_keyword(text, arg)
    assert node is not None, f"no `{arg}=[...]` to add to"
    if node.elts:
        first = offset(text, node.elts[0].lineno, node.elts[0].col_offset)
        line_start = text.rfind("\n", 0, first) + 1
        if not text[line_start:first].strip():
            return text[:line_start] + block.rstrip("\n") + "\n" + text[line_start:]
    start, _ = span(text, node)
    return text[: start + 1] + "\n" + block.rstrip("\n") + "\n" + text[start + 1 :]


def replace_in(text: str, call: WorkloadCall, old: str, new: str) -> str:
    start, end = span(text, call.node)
    body = text[start:end]
    assert old in body, f"workload {call.name} has no `{old}`"
    return text[:start] + body.replace(old, new, 1) + text[end:]


def drop_keyword(text: str, call: WorkloadCall, arg: str) -> str:
    """Remove `arg=...,` from the call (its whole lines when it stands on lines of its own)."""
    kw = call.keyword(arg)
    assert kw is not None, f"workload {call.name} has no {arg}"
    start, end = span(text, kw)
    comma = re.compile(r"[ \t]*,?[ \t]*(#[^\n]*)?(\n|(?=\)))").match(text, end)
    assert comma is not None, f"workload {call.name}: {arg}=... is followed by more than a comma and a comment on its line"
    end = comma.end()
    line_start = text.rfind("\n", 0, start) + 1
    if not text[line_start:start].strip() and text[end - 1] == "\n":
        start = line_start
    return text[:start] + text[end:]


def add_keyword_line(text: str, call: WorkloadCall, line: str) -> str:
    """`line` (e.g. `state="stopped",`) added to the call, after its first keyword."""
    first = call.node.keywords[0]
    _, end = span(text, first)
    comma = re.compile(r"[ \t]*,").match(text, end)
    assert comma is not None, f"workload {call.name}: its first keyword is not followed by a comma"
    line_start = text.rfind("\n", 0, end) + 1
    indent = re.match(r"[ \t]*", text[line_start:]).group(0)  # type: ignore[union-attr]
    sep = "\n" + indent if first.lineno != call.node.lineno else " "
    return text[: comma.end()] + sep + line + text[comma.end() :]


def unused(name: str, taken: str) -> str:
    """`name`, or name2, name3 ... if the module already has it (HEAD where the recipe was followed and committed)."""
    candidates = [name] + [f"{name}{i}" for i in range(2, 100)]
    return next(c for c in candidates if f'"{c}"' not in taken and f'"{c}-sa"' not in taken)


# --- the copy of HEAD -------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args], cwd=cwd, capture_output=True
    )


def copy_of_head(dest: Path) -> str:
    """The committed project in `dest` (written by git itself), itself a one-commit repository: `check` marks what an edit
    made new against its HEAD, `diff` reads its committed render. Its short sha."""
    rev = git("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=ROOT)
    if rev.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout with a commit: there is no committed project to replay on")
    export_head(ROOT, dest)
    if SHARED.exists():
        (dest.parent / "shared").symlink_to(SHARED)
    commit(dest, f"HEAD {rev.stdout.decode()[:12]}", first=True)
    return rev.stdout.decode()[:12]


def commit(project: Path, message: str, first: bool = False) -> None:
    for args in ([["init", "-q"]] if first else []) + [["add", "-A"], ["commit", "-qm", message]]:
        done = git(*args, cwd=project)
        assert done.returncode == 0, f"git {' '.join(args)} in the copy: {done.stderr.decode()}"


# --- replaying the recipes --------------------------------------------------------------------------------------


@dataclass
class Replay:
    """What was replayed on the copy: every assertion message starts with it."""

    sha: str
    done: list[str]
    not_replayed: list[str]
    edited: set[str]
    added: str = ""
    """The user's workload the first recipe added (alice, or alice2 where HEAD has an alice already)."""
    image: str = ""
    """The image it runs, as the README writes it."""

    def __str__(self) -> str:
        lines = [f"on a copy of HEAD ({self.sha}), after the README recipes:", *(f"  - {d}" for d in self.done)]
        return "\n".join(lines + [f"  - not replayed: {n}" for n in self.not_replayed])


@contextmanager
def context(log: Replay, doing: str) -> Iterator[None]:
    """A failed edit says what was replayed before it, and which recipe, file and workload it was editing."""
    try:
        yield
    except AssertionError as err:
        raise AssertionError(f"{log}\nthen, replaying {doing}: {err}") from None


def stack_modules(project: Path) -> list[Path]:
    """The stack modules (as `stacks.names()` finds them) that hold `Workload(...)` calls, clusters/barcelona.py (the
    README's) first."""
    found = [
        p for p in sorted((project / stacks.CLUSTERS).glob("*.py")) if not p.stem.startswith("_") and "Workload(" in p.read_text("utf-8")
    ]
    return sorted(found, key=lambda p: p.stem != "barcelona")


def replay(project: Path, sha: str) -> tuple[Replay, str]:
    """Apply the four recipes to the copy as the README writes them; returns what was done and the new cluster."""
    readme = (project / "README.md").read_text(encoding="utf-8")
    log = Replay(sha, [], [], set())
    add_users_workload(project, readme, log)
    switched = switch_workload_to_tcp(project, readme, log)
    stop_workload(project, readme, log, switched)
    return log, add_cluster(project, readme, log)


def add_users_workload(project: Path, readme: str, log: Replay) -> None:
    """README "Add a user's workload.": its service account and workload blocks, into clusters/barcelona.py."""
    title = "Add a user's workload."
    stack = project / stacks.CLUSTERS / "barcelona.py"
    add = blocks(recipe(readme, title), "python")
    assert len(add) == 2, f"README {title!r} shows the service account and the workload: found {len(add)} python blocks"
    text = stack.read_text(encoding="utf-8")
    if list_keyword(text, "service_accounts") is None or list_keyword(text, "workloads") is None:
        log.not_replayed.append(f"{title} HEAD's clusters/barcelona.py writes no `service_accounts=[...]` and `workloads=[...]` to add to")
    else:
        user = unused("alice", text)
        with context(log, f"{title} clusters/barcelona.py, workload {user}"):
            text = insert_into_list(text, "service_accounts", add[0].replace("alice", user))
            text = insert_into_list(text, "workloads", add[1].replace("alice", user))
        stack.write_text(text, encoding="utf-8")
        log.edited.add("clusters/barcelona.py")
        log.added, log.image = user, re.search(r'image="([^"]+)"', add[1]).group(1)  # type: ignore[union-attr]
        log.done.append(f"{title} clusters/barcelona.py: service account {user}-sa, workload {user} (the README's blocks)")


def switch_workload_to_tcp(project: Path, readme: str, log: Replay) -> tuple[Path, str] | None:
    """README "Switch a workload to TCP.": the file and name of the workload switched, None if none was."""
    title = "Switch a workload to TCP."
    how = recipe(readme, title)
    assert 'replace `transport="rdma",` with `transport="tcp",`' in how and "drop its `tcp_variants`" in how, (
        f"README {title!r} no longer says what tests/test_recipes.py replays: update the test with the README:\n{how}"
    )
    # A running RDMA workload, one with TCP variants first (the recipe drops them); the added one if none is left.
    rdma = [
        (path, c) for path in stack_modules(project) for c in workload_calls(path.read_text("utf-8")) if c.literal("transport") == "rdma"
    ]
    rdma = [(p, c) for p, c in rdma if 'transport="rdma",' in (ast.get_source_segment(p.read_text("utf-8"), c.node) or "")]
    ranked = sorted(rdma, key=lambda pc: (pc[1].literal("state") not in (None, "running"), pc[1].keyword("tcp_variants") is None))
    switched = None
    if ranked:
        path, call = ranked[0]
        rel = path.relative_to(project).as_posix()
        with context(log, f"{title} {rel}, workload {call.name}"):
            text = replace_in(path.read_text("utf-8"), call, 'transport="rdma",', 'transport="tcp",')
            dropped = call.keyword("tcp_variants") is not None
            if dropped:
                (call,) = [c for c in workload_calls(text) if c.node.lineno == call.node.lineno]
                text = drop_keyword(text, call, "tcp_variants")
        path.write_text(text, encoding="utf-8")
        switched = (path, call.name)
        log.edited.add(rel)
        log.done.append(f'{title} {rel}: workload {call.name}, transport="tcp"' + (", its tcp_variants dropped" if dropped else ""))
    else:
        log.not_replayed.append(f'{title} no committed workload writes `transport="rdma",`')
    return switched


def stop_workload(project: Path, readme: str, log: Replay, switched: tuple[Path, str] | None) -> None:
    """README "Stop a workload.": a running one, not the one just switched to TCP."""
    title = "Stop a workload."
    assert 'Add `state="stopped",` to its `Workload(...)`' in recipe(readme, title), (
        f"README {title!r} no longer says what tests/test_recipes.py replays: update the test with the README"
    )
    # A workload that runs and sets no state (adding the keyword twice would not be Python), not the switched one; where
    # every one sets its state (HEAD where this recipe was followed), one that says `state="running",`, the keyword
    # dropped first (running is the default: the same config), so that the recipe is followed as written.
    calls = [(path, c) for path in stack_modules(project) for c in workload_calls(path.read_text("utf-8"))]
    running = [(p, c) for p, c in calls if c.keyword("state") is None] or [(p, c) for p, c in calls if c.literal("state") == "running"]
    running.sort(key=lambda pc: (pc[0], pc[1].name) == switched)
    if running:
        path, call = running[0]
        rel = path.relative_to(project).as_posix()
        with context(log, f"{title} {rel}, workload {call.name}"):
            text = path.read_text("utf-8")
            if call.keyword("state") is not None:
                text = drop_keyword(text, call, "state")
                (call,) = [c for c in workload_calls(text) if c.node.lineno == call.node.lineno]
            path.write_text(add_keyword_line(text, call, 'state="stopped",'), encoding="utf-8")
        log.edited.add(rel)
        log.done.append(f'{title} {rel}: workload {call.name}, state="stopped"')
    else:
        log.not_replayed.append(f"{title} every committed workload is stopped already")


def add_cluster(project: Path, readme: str, log: Replay) -> str:
    """README "Add a cluster.": the README's commands, run in the copy; returns the new cluster, "" when not replayed."""
    title = "Add a cluster."
    cluster = next(c for c in ["mylab"] + [f"mylab{i}" for i in range(2, 100)] if not (project / stacks.CLUSTERS / f"{c}.py").exists())
    (script,) = blocks(recipe(readme, title), "sh")
    commands = [line for line in script.splitlines() if line.strip() and not line.startswith("make ")]
    source = re.search(r"cp clusters/(\w+)\.py", script)
    assert source, f"README {title!r}: no `cp clusters/NAME.py` in\n{script}"
    if f'name="{source.group(1)}"' not in (project / stacks.CLUSTERS / f"{source.group(1)}.py").read_text("utf-8"):
        log.not_replayed.append(f'{title} HEAD\'s clusters/{source.group(1)}.py writes no `name="{source.group(1)}"` for its sed to change')
        return ""
    for line in commands:
        done = subprocess.run(["bash", "-c", line.replace("mylab", cluster)], cwd=project, capture_output=True, text=True)
        assert done.returncode == 0, f"{log}\n{title} `{line}` failed: {done.stderr}"
    log.edited |= {f"clusters/{cluster}.py", f"Pulumi.{cluster}.yaml"}
    log.done.append(f"{title} clusters/{cluster}.py and Pulumi.{cluster}.yaml, copied from {source.group(1)} by the README's commands")
    # Its table: a copy of a stack with a platform tier (a queued NERC, where docs/shared-clusters.md was followed) gets
    # its Pulumi.mylab-platform.yaml too, naming the new cluster and context.
    for other in sorted(project.glob(f"Pulumi.{source.group(1)}-*.yaml")):
        tier = project / other.name.replace(f"Pulumi.{source.group(1)}-", f"Pulumi.{cluster}-")
        tier.write_text(other.read_text(encoding="utf-8").replace(f": {source.group(1)}\n", f": {cluster}\n"), encoding="utf-8")
        log.edited.add(tier.name)
        log.done.append(f"{title} {tier.name}, from {other.name} (the README's table: the copy's other tiers)")
    return cluster


# --- the tests that read the committed stacks ---------------------------------------------------------------------

READERS = {"rendered_stack", "stack_rendering"}  # conftest: a committed stack's rendering
STACKS_READS = {"names", "load", "load_module", "pulumi_stacks"}  # stacks.X(): the committed modules and stack files


def _signals(node: ast.AST) -> bool:
    """Whether it interrupts processes (os.kill, os.killpg): such a test checks timing whatever the stacks hold, and under
    the load of a parallel `make test` its timing is not this test's to judge (the suite runs it)."""
    return any(isinstance(n, ast.Attribute) and n.attr in ("kill", "killpg") and getattr(n.value, "id", "") == "os" for n in ast.walk(node))


def _reads_directly(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in READERS or isinstance(n, ast.arg) and n.arg in READERS:
            return True
        if isinstance(n, ast.Attribute) and n.attr in STACKS_READS and isinstance(n.value, ast.Name) and n.value.id == "stacks":
            return True
        if isinstance(n, ast.List | ast.Tuple):  # `python -m stacks list|... --all` in the project
            words = [e.value for e in n.elts if isinstance(e, ast.Constant)]
            after = next((words[i + 2 :] for i in range(len(words)) if words[i : i + 2] == ["-m", "stacks"]), [])
            if ("--all" in after or "list" in after) and "--config" not in after:
                return True
    return False


def _points_the_project_elsewhere(node: ast.AST) -> bool:
    """Whether a fixture sets config.project.ROOT (`monkeypatch.setattr(project, "ROOT", folder)`): the stacks a test
    that requests it loads, lists or renders are the ones the fixture wrote, never the committed ones."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "setattr" and len(n.args) > 1
        and isinstance(n.args[1], ast.Constant) and n.args[1].value == "ROOT"
        for n in ast.walk(node)
    )  # fmt: skip


def _own_project_fixtures(module: ast.Module) -> set[str]:
    return {
        node.name for node in module.body
        if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list)
        and _points_the_project_elsewhere(node)
    }  # fmt: skip


def committed_stack_tests(tests: Path) -> list[str]:
    """Node ids of the tests that read the committed stacks, directly or through a helper of their module. Not those
    that request a fixture giving them a project of their own (conftest's `fixture_project`, a module's `project` or
    `lab`): the program tests of containment, preloading or line numbers run on stacks they write, whatever the
    committed ones hold (they are half of the cases, and their processes most of the time, of a copy's run)."""
    ids = []
    conftest = tests / "conftest.py"
    shared = _own_project_fixtures(ast.parse(conftest.read_text(encoding="utf-8"))) if conftest.is_file() else set()
    for path in sorted(p for p in tests.rglob("test_*.py") if p.name != "test_recipes.py"):  # not this test again
        module = ast.parse(path.read_text(encoding="utf-8"))
        own = shared | _own_project_fixtures(module)
        defs: dict[str, ast.AST] = {}
        for node in module.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                defs[node.name] = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name):
                        defs[target.id] = node
        reading = {name for name, node in defs.items() if _reads_directly(node)}
        while True:
            more = {name for name, node in defs.items() if name not in reading and any(
                isinstance(n, ast.Name) and n.id in reading for n in ast.walk(node))}  # fmt: skip
            if not more:
                break
            reading |= more
        for name in sorted(reading, key=lambda n: defs[n].lineno):  # type: ignore[attr-defined]
            node = defs[name]
            test = (
                isinstance(node, ast.FunctionDef) and name.startswith("test_") or isinstance(node, ast.ClassDef) and name.startswith("Test")
            )
            requests = {a.arg for a in node.args.args} if isinstance(node, ast.FunctionDef) else set()
            if test and not _signals(node) and not requests & own:
                ids.append(f"{path.relative_to(tests.parent).as_posix()}::{name}")
    return ids


# --- the test ---------------------------------------------------------------------------------------------------------


# --- what a replay reads, its key in the cache -------------------------------------------------------------------

PASSED = "replays/passed"
"""The .pytest_cache entry of each replay: what it read the last time it passed."""
NAMED_ONLY = ("tests/", "docs/", "live/", "README.md", ".git/")
"""What a replay reads only where named: the pages it follows, the tests it runs and the pages they read."""
REPLAYING = ("test_recipes.py", "test_doc_examples.py", "helpers.py")
"""The modules of this checkout's tests/ that do the replaying."""


def _imported(module: Path, tests: Path) -> set[Path]:
    """The modules of tests/ a test module imports (`from tests.x import`, `from tests import x`, `import tests.x`)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in names:
            parts = name.split(".")[1:]
            if parts and name.startswith("tests."):
                found |= {p for p in (tests.joinpath(*parts).with_suffix(".py"), tests.joinpath(*parts, "__init__.py")) if p.is_file()}
    return found


def files_the_tests_read(tests: Path, selected: list[str]) -> set[Path]:
    """The files of the copy's tests/ its run of `selected` reads: those modules, the ones they import (transitively),
    the conftest and package files, and the pages of docs/ (or the README) they name."""
    todo = {tests.parent / s.split("::")[0] for s in selected} | set(tests.rglob("conftest.py")) | set(tests.rglob("__init__.py"))
    done: set[Path] = set()
    while todo:
        module = todo.pop()
        done.add(module)
        todo |= _imported(module, tests) - done
    pages = {tests.parent / "docs" / name for m in done for name in re.findall(r"[\w-]+\.md", m.read_text(encoding="utf-8"))}
    readme = [tests.parent / "README.md"] if any("README" in m.read_text(encoding="utf-8") for m in done) else []
    return done | {p for p in pages if p.is_file()} | set(readme)


def read_by_replay(project: Path, followed: list[str], runs_tests: bool) -> str:
    """A digest of what a replay on the copy reads: every file of the program and the project (all but NAMED_ONLY),
    the pages it follows, and, where it runs the copy's tests that read the committed stacks, the files those read; then
    this checkout's modules that replay, the Python and whether ../shared is there. Not the commit: a commit that changes
    none of these (another page, a test of a config of its own, the live tier) is not replayed again."""
    files = {p for p in project.rglob("*") if p.is_file() and not p.relative_to(project).as_posix().startswith(NAMED_ONLY)}
    files |= {project / f for f in followed}
    if runs_tests:
        files |= files_the_tests_read(project / "tests", committed_stack_tests(project / "tests"))
    digest = hashlib.sha256(f"{sys.version}\n{SHARED.exists()}\n".encode())
    for path in sorted(files):
        digest.update(f"{path.relative_to(project).as_posix()}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    for name in REPLAYING:
        digest.update(hashlib.sha256((ROOT / "tests" / name).read_bytes()).digest())
    return digest.hexdigest()


def passed_before(request: pytest.FixtureRequest, replay: str, key: str) -> bool:
    """Whether this replay passed on these very inputs (a run with the cache off, `-p no:cacheprovider`, replays)."""
    cache: pytest.Cache | None = getattr(request.config, "cache", None)
    return cache is not None and cache.get(f"{PASSED}/{replay}", None) == key


def passed(request: pytest.FixtureRequest, replay: str, key: str) -> None:
    cache: pytest.Cache | None = getattr(request.config, "cache", None)
    if cache is not None:
        cache.set(f"{PASSED}/{replay}", key)


def run_committed_stack_tests(project: Path) -> subprocess.CompletedProcess[str]:
    """The copy's tests that read the committed stacks, run on the copy (its program, its stacks)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    selected = committed_stack_tests(project / "tests")
    assert any("test_rendered_is_fresh.py" in s for s in selected), f"found no test that reads the committed stacks: {selected}"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider", "-m", "not torch", *selected],
        cwd=project, capture_output=True, text=True, env=env, timeout=1200,
    )  # fmt: skip


# --- the test ---------------------------------------------------------------------------------------------------------


def test_the_readme_recipes_need_no_test_edit(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    project = tmp_path / "project"
    sha = copy_of_head(project)
    key = read_by_replay(project, ["README.md"], runs_tests=True)
    if passed_before(request, "README.md", key):
        return
    before = (project / stacks.CLUSTERS / "barcelona.py").read_text(encoding="utf-8")
    log, cluster = replay(project, sha)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}

    def run(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *argv], cwd=project, capture_output=True, text=True, env=env, timeout=timeout)

    check = run("-m", "stacks", "check", "--all")
    assert check.returncode == 0, (
        f"{log}\n`python -m stacks check --all` exited {check.returncode}:\n{check.stdout[-3000:]}{check.stderr[-2000:]}"
    )
    # README: "It prints one `new warning`, `image` on `workloads[alice].image` with the line of its `image=`" (unless
    # HEAD accepts that image already).
    if log.added and log.image not in before:
        text = (project / stacks.CLUSTERS / "barcelona.py").read_text(encoding="utf-8")
        (image,) = [c.keyword("image") for c in workload_calls(text) if c.name == log.added]
        at = f"barcelona: new warning image workloads[{log.added}].image (clusters/barcelona.py:{image and image.lineno}): "
        assert at in check.stdout, f"{log}\nno `{at}` in what `check --all` printed:\n{check.stdout[-3000:]}"
    render = run("-m", "stacks", "render", "--all")
    assert render.returncode == 0, f"{log}\n`python -m stacks render --all` exited {render.returncode}:\n{render.stderr[-3000:]}"
    if cluster:
        assert f"{cluster}: wrote" in render.stdout, f"{log}\n`python -m stacks render --all` wrote no rendered/{cluster}:\n{render.stdout}"
        listed = run("-m", "stacks", "list", timeout=120)
        assert cluster in listed.stdout.split(), f"{log}\n`python -m stacks list` does not list {cluster}:\n{listed.stdout}{listed.stderr}"

    tests = run_committed_stack_tests(project)
    assert tests.returncode == 0, (
        f"{log}\nthe copy's tests that read the committed stacks fail (a test that needs an edit after a README recipe):\n"
        + tests.stdout[-4000:]
        + tests.stderr[-2000:]
    )

    status = git("status", "--porcelain", "--untracked-files=all", cwd=project).stdout.decode()
    touched = {line[3:].split("/", 1)[0] if line[3:].startswith("rendered/") else line[3:] for line in status.splitlines()}
    assert touched == log.edited | {"rendered"}, (
        f"{log}\nfiles changed besides the edited ones and rendered/: {sorted(touched - log.edited)}"
    )
    if log.not_replayed:
        pytest.skip(f"replayed and passed, but not every recipe applies to HEAD as the README writes it:\n{log}")
    passed(request, "README.md", key)


SELECTION = {
    "conftest.py": """
import pytest
from config import project

@pytest.fixture
def fixture_project(tmp_path, monkeypatch):
    monkeypatch.setattr(project, "ROOT", tmp_path)
""",
    "stacks/test_a.py": """
import pytest
import stacks
from config import project as folder

@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setattr(folder, "ROOT", tmp_path)

def first():
    return stacks.names()[0]

def test_reads():
    assert stacks.names()

def test_reads_through_a_helper():
    stacks.load(first())

def test_reads_a_rendering(stack_rendering):
    pass

def test_on_a_project_of_its_own(project):
    stacks.load(first())

def test_on_the_shared_fixture_project(fixture_project):
    assert stacks.names()

def test_reads_nothing():
    assert 1
""",
}


def test_the_selected_tests_are_those_that_read_the_committed_stacks(tmp_path: Path) -> None:
    """What runs on a copy after a recipe or a page of docs: a test reading the committed stacks (itself, through a
    helper, or through a rendering), never one whose fixture gives it a project of its own, nor one reading none."""
    for name, text in SELECTION.items():
        (tmp_path / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / name).write_text(text, encoding="utf-8")
    assert committed_stack_tests(tmp_path / "tests") == [
        f"tests/stacks/test_a.py::{name}" for name in ("test_reads", "test_reads_through_a_helper", "test_reads_a_rendering")
    ]
