"""Every example in docs/*.md, followed as written on a copy of the committed project (HEAD, as the README's recipes are
in tests/test_recipes.py): a page's ```python and ```sh blocks in order, then `python -m stacks check` and `render` of
each stack an example edited, then the copy's tests that read the committed stacks (as after the README's recipes: a
user who follows a page, turning on queueing or operator networks, never has to edit a test). A page that cannot be
followed (an import the package does not export, a node set no stack has, a step `check` refuses) fails here, naming the
page and the line of the example.

How each example is applied, as a user would:
- python: a stack module's parts. `from config import ...` lines join the module's imports; a keyword (`queueing=...`)
  goes into its `ClusterConfig(...)`, replacing one of that name; a model call with a name (`NodeSet(name="nairr", ...)`)
  replaces the keywords of the module's call of that model and name, one without (`RdmaFabric(...)`) those of its only
  call of that model. The stack is the one whose module has the node sets the example names (`NodeSet(name=...)`, the
  keys of a `quota`), else the one the text before the example names (`clusters/NAME.py`).
- sh: each command, through bash in the copy: files it writes (`cat > F <<'EOF'`), `python -m stacks` commands (their
  arguments must parse, the stacks and Pulumi stacks they name must exist; those that read no cluster run and must not
  fail on their input: exit 0, or 1 for a verdict), `check-jsonschema`, `jq`, `python3 -c`. What needs a cluster is
  not run here (the live tier, docs/live.md, runs the real `pulumi` and kube-apiserver): `pulumi` and `oc`, except two
  reads that have a stand-in from the committed render: `pulumi stack output --json -s S > F` (rendered/S/outputs.json
  is those outputs) and `oc get KIND NAME -o yaml > F` (the object as the stack declares it). `make TARGET`: the target
  exists (it runs the same `python -m stacks` commands; `make` would build a virtualenv in the copy).
- Some steps are prose: shared-clusters.md's "stop every running workload first" is replayed (and asserted still said).

```yaml and unlabelled blocks are objects and outputs shown, not steps to follow."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from cli.main import COMMANDS, parser
from tests.helpers import ROOT
from tests.test_recipes import commit, copy_of_head, git, passed, passed_before, read_by_replay, run_committed_stack_tests, span

DOCS = ROOT / "docs"
RUNS = ("python", "sh")
"""The languages of the blocks that are steps to follow."""
CLUSTER_ONLY = ("pulumi", "oc")
"""Programs whose commands need a cluster or a Pulumi backend: not run here (but for the stand-ins above)."""
READS_THE_CLUSTER = ("drift", "recover", "status")
"""`python -m stacks` commands that read the cluster unless given `--live FILE`: parsed and checked, not run."""
SHORT_KINDS = {"scc": "securitycontextconstraints", "sa": "serviceaccount", "pvc": "persistentvolumeclaim", "cm": "configmap"}
"""`oc get`'s short names of the kinds, as the rendered files are named (`securitycontextconstraints-NAME.yaml`)."""
STOP_FIRST = "Stop every running workload"
"""The step of shared-clusters.md that comes before its example (Kueue refuses to queue a running workload)."""


# --- the examples of a page ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    lang: str
    text: str
    before: str = ""
    """The page's prose between the previous block and this one (where it names the stack module an example edits)."""

    def __str__(self) -> str:
        return f"docs/{self.page}:{self.line} ({self.lang})"


def examples(page: str, text: str) -> list[Example]:
    """The ```python and ```sh blocks of a page, in order, each dedented as far as its fence (a block in a list item)."""
    out, previous = [], 0
    for m in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```[ \t]*$", text, flags=re.S | re.M):
        if m.group(2) in RUNS:
            body = textwrap.dedent("\n".join(line[len(m.group(1)) :] for line in m.group(3).splitlines()))
            out.append(Example(page, text[: m.start()].count("\n") + 1, m.group(2), body, text[previous : m.start()]))
        previous = m.end()
    return out


def test_every_example_is_in_a_language_this_test_follows_or_shows_a_result() -> None:
    """A new kind of example (```bash, ```console) would pass unseen: name it here or write it as one of RUNS."""
    known = (*RUNS, "yaml", "json", "")
    found = [
        f"docs/{p.name}: ```{lang}"
        for p in sorted(DOCS.glob("*.md"))
        for lang in re.findall(r"^ *```(\w*)\n", p.read_text(encoding="utf-8"), flags=re.M)
        if lang not in known
    ]
    assert found == []


# --- following a page on a copy of HEAD -------------------------------------------------------------------------------


@dataclass
class Follow:
    """A page followed on a copy: what was done, what was not run and why, the stacks its examples edited."""

    project: Path
    page: str
    done: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"following docs/{self.page} on a copy of HEAD:", *(f"  - {d}" for d in self.done)]
        return "\n".join(lines + [f"  - not run (needs a cluster): {n}" for n in self.not_run])

    def run(self, command: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        """A command line of the docs, through bash in the copy, with this interpreter for `python`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # check-jsonschema, python
        line = re.sub(r"^(\.venv/bin/python|python3?)(?=\s)", shlex.quote(sys.executable), command)
        return subprocess.run(["bash", "-c", line], cwd=self.project, capture_output=True, text=True, env=env, timeout=timeout)

    def stacks(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return self.run(" ".join(["python", "-m", "stacks", *map(shlex.quote, argv)]))


# --- python: parts of a stack module ------------------------------------------------------------------------------------


def imports_and_parts(example: Example) -> tuple[list[str], list[ast.keyword], list[ast.Call], str]:
    """The names an example imports from config, its keywords of ClusterConfig(...), its named model calls, and the source
    they are parsed from (the example's lines but the imports, as the arguments of one call)."""
    names: list[str] = []
    rest: list[str] = []
    for line in example.text.splitlines():
        found = re.match(r"from config import ([\w, ]+)", line)
        if found:
            names += [n.strip() for n in found.group(1).split(",") if n.strip()]
        else:
            rest.append(line)
    source = "_(\n" + "\n".join(rest) + "\n)\n"
    try:
        call = ast.parse(source).body[0].value  # type: ignore[attr-defined]
    except SyntaxError as err:
        raise AssertionError(f"{example}: not the parts of a stack module ({err.msg}, its line {(err.lineno or 2) - 1})") from None
    calls = [a for a in call.args if isinstance(a, ast.Call)]
    assert len(calls) == len(call.args), f"{example}: only keywords of ClusterConfig(...) and model calls are parts of a stack module"
    return names, call.keywords, calls, source


def _name_of(call: ast.Call) -> str | None:
    kw = next((k for k in call.keywords if k.arg == "name"), None)
    return kw.value.value if kw is not None and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str) else None


def _called(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else call.func.attr if isinstance(call.func, ast.Attribute) else ""


def node_sets_named(keywords: list[ast.keyword], calls: list[ast.Call]) -> set[str]:
    """The node sets an example names: its NodeSet(name=...) and the keys of a `quota` dict."""
    named = {n for c in calls if _called(c) == "NodeSet" and (n := _name_of(c))}
    for node in ast.walk(ast.Module(body=[ast.Expr(k.value) for k in keywords], type_ignores=[])):
        if isinstance(node, ast.keyword) and node.arg == "quota" and isinstance(node.value, ast.Dict):
            named |= {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return named


def module_node_sets(text: str) -> set[str]:
    return {n for c in ast.walk(ast.parse(text)) if isinstance(c, ast.Call) and _called(c) == "NodeSet" and (n := _name_of(c))}


def target_stack(project: Path, example: Example, wanted: set[str]) -> Path:
    """The stack module an example edits: the one with the node sets it names, else the one the prose before it names."""
    modules = sorted(p for p in (project / "clusters").glob("*.py") if not p.stem.startswith("_"))
    if not wanted:
        named = re.findall(r"`clusters/(\w+)\.py`", example.before)
        assert named, f"{example} names no node set, and the text before it names no stack module (`clusters/NAME.py`)"
        path = project / "clusters" / f"{named[-1]}.py"
        assert path in modules, f"{example}: the text before it names clusters/{named[-1]}.py, which is no stack module"
        return path
    fits = [p for p in modules if wanted <= module_node_sets(p.read_text(encoding="utf-8"))]
    have = {p.stem: sorted(module_node_sets(p.read_text(encoding="utf-8"))) for p in modules}
    assert wanted and fits, f"{example} names node set(s) {sorted(wanted)}, which no stack has together: {have}"
    return fits[0]


def _segment(source: str, keyword: ast.keyword, indent: str) -> str:
    """A keyword's value as the example writes it, its continuation lines moved from the keyword's column to `indent`."""
    first, *rest = (ast.get_source_segment(source, keyword.value) or "").split("\n")
    col = keyword.col_offset
    return "\n".join([first, *(indent + line[col:] if not line[:col].strip() else line for line in rest)])


def set_keyword(text: str, call: ast.Call, keyword: ast.keyword, source: str, indent: str) -> str:
    """`keyword` of the example in the module's `call`: replacing one of that name, else added after the last."""
    written = f"{keyword.arg}={_segment(source, keyword, indent)}"
    mine = next((k for k in call.keywords if k.arg == keyword.arg), None)
    if mine is not None:
        start, end = span(text, mine)
        return text[:start] + written + text[end:]
    _, last = span(text, call.keywords[-1])
    _, close = span(text, call)
    if "\n" not in text[last:close]:  # the call closes on its last keyword's line
        return text[:last] + ", " + written + text[last:]
    comma = re.compile(r"[ \t]*,").match(text, last)
    if comma is None:
        text, last = text[:last] + "," + text[last:], last + 1
    eol = text.index("\n", last)
    return text[:eol] + "\n" + indent + written + "," + text[eol:]


def apply_python(follow: Follow, example: Example) -> str:
    """The example in the module of the stack it names; answers that stack's name. Its `from config import` line goes in
    as the page writes it, above the module's own, and then what the page says of it: `make fmt` merges them."""
    names, keywords, calls, source = imports_and_parts(example)
    path = target_stack(follow.project, example, node_sets_named(keywords, calls))
    text = path.read_text(encoding="utf-8")
    if names:
        imported = next((n for n in ast.parse(text).body if isinstance(n, ast.ImportFrom) and n.module == "config"), None)
        assert imported is not None, f"{example}: clusters/{path.name} imports nothing from config to add {names} to"
        line = next(line for line in example.text.splitlines() if line.startswith("from config import"))
        assert "make fmt" in line, f"{example}: `{line}` does not say how it joins the module's imports (`make fmt` merges them)"
        start, _ = span(text, imported)
        text = text[:start] + line + "\n" + text[start:]
    for keyword in keywords:
        (config,) = [c for c in ast.walk(ast.parse(text)) if isinstance(c, ast.Call) and _called(c) == "ClusterConfig"]
        text = set_keyword(text, config, keyword, source, "    ")
    for part in calls:
        name = _name_of(part)
        for keyword in part.keywords:
            mine = [c for c in ast.walk(ast.parse(text)) if isinstance(c, ast.Call) and _called(c) == _called(part) and _name_of(c) == name]
            assert len(mine) == 1, f"{example}: clusters/{path.name} has {len(mine)} {_called(part)}(name={name!r}, ...) calls"
            indent = " " * (mine[0].keywords[0].col_offset if mine[0].keywords[0].lineno != mine[0].lineno else mine[0].col_offset + 4)
            text = set_keyword(text, mine[0], keyword, source, indent)
    path.write_text(text, encoding="utf-8")
    make_fmt(follow, path)
    follow.done.append(f"{example}: into clusters/{path.name}, then `make fmt`")
    return path.stem


def make_fmt(follow: Follow, path: Path) -> None:
    """What `make fmt` does to the module (ruff's fixes, its formatter, the lint), which must leave nothing to fix."""
    ruff = shlex.quote(str(Path(sys.executable).parent / "ruff"))
    file = shlex.quote(str(path))
    done = follow.run(f"{ruff} check --fix --exit-zero --quiet {file} && {ruff} format --quiet {file} && {ruff} check --quiet {file}")
    assert done.returncode == 0, f"{follow}\n`make fmt` leaves clusters/{path.name} failing the lint:\n{done.stdout}{done.stderr}"


def stop_every_running_workload(follow: Follow, stack: str) -> None:
    """The step before queueing: every workload stopped, `pulumi up` (here: the render committed)."""
    path = follow.project / "clusters" / f"{stack}.py"
    text = path.read_text(encoding="utf-8")
    for call in sorted(
        (c for c in ast.walk(ast.parse(text)) if isinstance(c, ast.Call) and _called(c) == "Workload" and _name_of(c)),
        key=lambda c: -c.lineno,
    ):
        state = next((k for k in call.keywords if k.arg == "state"), None)
        if state is None:
            start, end = span(text, call.keywords[0])
            text = text[:end] + ', state="stopped"' + text[end:]
    text = text.replace('state="running"', 'state="stopped"')
    path.write_text(text, encoding="utf-8")
    render = follow.stacks("render", stack)
    assert render.returncode == 0, f"{follow}\nthe render of {stack} with every workload stopped: {render.stdout}{render.stderr}"
    if not git("status", "--porcelain", cwd=follow.project).stdout.strip():  # HEAD where the page was followed: done already
        follow.done.append(f"{STOP_FIRST.lower()} of {stack} (the page's step before its example): HEAD has them stopped")
        return
    commit(follow.project, "every workload stopped, and pulumi up")
    follow.done.append(f"{STOP_FIRST.lower()} of {stack} (the page's step before its example), the render committed")


# --- sh: commands ------------------------------------------------------------------------------------------------------


def commands(example: Example) -> list[tuple[int, str]]:
    """(line in the page, command) of an sh example, as bash runs them: a heredoc whole, `a && b` as two, comments cut."""
    out: list[tuple[int, str]] = []
    lines = example.text.splitlines()
    i = 0
    while i < len(lines):
        line, at = lines[i], example.line + 1 + i
        i += 1
        heredoc = re.search(r"<<-?'?(\w+)'?", line)
        if heredoc:
            end = next(j for j in range(i, len(lines)) if lines[j].strip() == heredoc.group(1))
            out.append((at, "\n".join([line, *lines[i : end + 1]])))
            i = end + 1
            continue
        cut = _comment_start(line)
        command = (line[:cut] if cut is not None else line).strip()
        out += [(at, part.strip()) for part in command.split(" && ") if part.strip()]
    return out


def _comment_start(line: str) -> int | None:
    """Where a `#` comment starts in a shell line (outside quotes, at the start or after a blank)."""
    quote = ""
    for at, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1] in " \t"):
            return at
    return None


def _argv(words: list[str]) -> list[str]:
    """The arguments of a command, up to its first redirection or pipe."""
    cut = next((i for i, w in enumerate(words) if w in ("<", ">", ">>", "|") or w.startswith(("<", ">"))), len(words))
    return words[:cut]


def make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M))


def follow_command(follow: Follow, where: str, command: str) -> None:
    """Follow one command of an sh example."""
    words = shlex.split(command.splitlines()[0])
    program = words[0]
    if program == "cat" and "<<" in command:
        done = follow.run(command)
        assert done.returncode == 0, f"{follow}\n{where}: `{command}` failed: {done.stderr}"
        follow.done.append(f"{where}: {command.splitlines()[0]}")
        return
    if program == "make":
        assert words[1] in make_targets(), f"{follow}\n{where}: the Makefile has no target {words[1]!r}"
        follow.done.append(f"{where}: `{command}` (the target exists)")
        return
    if words[:4] == ["pulumi", "stack", "output", "--json"] and ">" in words:
        stack = words[words.index("-s") + 1]
        shutil.copy(follow.project / "rendered" / stack / "outputs.json", follow.project / words[words.index(">") + 1])
        follow.done.append(f"{where}: `{command}` (stand-in: rendered/{stack}/outputs.json)")
        return
    if words[:2] == ["oc", "get"] and ">" in words and "-o" in words:
        kind, name = SHORT_KINDS.get(words[2].lower(), words[2].lower()), words[3]
        found = [p for p in (follow.project / "rendered").rglob("*.yaml") if re.fullmatch(rf"{kind}\w*-{re.escape(name)}\.yaml", p.name)]
        assert found, f"{follow}\n{where}: `{command}`: the committed render has no {kind} {name} to stand in for the cluster's"
        shutil.copy(found[0], follow.project / words[words.index(">") + 1])
        follow.done.append(f"{where}: `{command}` (stand-in: {found[0].relative_to(follow.project)})")
        return
    if program in CLUSTER_ONLY:
        follow.not_run.append(f"{where}: {command}")
        return
    if "-m" in words and words[words.index("-m") + 1 : words.index("-m") + 2] == ["stacks"]:
        follow_stacks(follow, where, command, words[words.index("-m") + 2 :])
        return
    assert program in ("check-jsonschema", "jq", "python3", "python"), (
        f"{follow}\n{where}: `{program}`: teach tests/test_doc_examples.py how to follow it (run it, or name it as needing a cluster)"
    )
    done = follow.run(command)
    assert done.returncode == 0, f"{follow}\n{where}: `{command}` exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    follow.done.append(f"{where}: `{command}`")
    return None


def follow_stacks(follow: Follow, where: str, command: str, argv: list[str]) -> None:
    argv = _argv(argv)
    try:
        args = parser().parse_args(argv)
    except SystemExit:
        raise AssertionError(f"{follow}\n{where}: `{command}`: the command line does not take these arguments") from None
    assert args.command in COMMANDS
    names = {p.stem for p in (follow.project / "clusters").glob("*.py") if not p.stem.startswith("_")}
    pulumi = {p.name[len("Pulumi.") : -len(".yaml")] for p in follow.project.glob("Pulumi.*.yaml")}
    named = [s for s in [getattr(args, "stack", None), *(getattr(args, "stacks", None) or [])] if s]
    assert all(s in names for s in named), f"{follow}\n{where}: `{command}` names a stack that does not exist ({sorted(names)})"
    target = getattr(args, "pulumi_stack", None)
    assert target is None or target in pulumi, f"{follow}\n{where}: `{command}` names no Pulumi stack file ({sorted(pulumi)})"
    stand_in = ""
    if args.command in READS_THE_CLUSTER and not getattr(args, "live", None):
        if args.command == "recover":  # it reads the state (`pulumi stack export`) too
            follow.not_run.append(f"{where}: {command} (reads the state and the cluster; its arguments parse)")
            return
        live = follow.project / f"live-{target}.yaml"
        objects = rendered_objects(follow.project, str(target))
        live.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
        stand_in = f" --live {live.name}"
    done = follow.run(command + stand_in)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (
        f"{follow}\n{where}: `{command}` exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    said = f", stand-in for the cluster: the committed render ({stand_in.strip()})" if stand_in else ""
    follow.done.append(f"{where}: `{command}` (exit {done.returncode}{said})")


# --- the test ----------------------------------------------------------------------------------------------------------


def rendered_objects(project: Path, pulumi_stack: str) -> list[object]:
    """The objects of a Pulumi stack's cluster as the committed render has them: the cluster as the stack declares it."""
    settings = yaml.safe_load((project / f"Pulumi.{pulumi_stack}.yaml").read_text(encoding="utf-8"))["config"]
    cluster = settings.get("gpu-training:cluster", pulumi_stack)
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((project / "rendered" / cluster).rglob("*.yaml"))]


def follow_page(project: Path, page: str) -> Follow:
    text = (project / "docs" / page).read_text(encoding="utf-8")
    follow = Follow(project, page)
    for example in examples(page, text):
        if example.lang == "python":
            names, keywords, calls, _ = imports_and_parts(example)
            if any(k.arg == "queueing" for k in keywords):  # the page's step before its example
                assert STOP_FIRST in text, f"docs/{page} no longer says {STOP_FIRST!r}: update tests/test_doc_examples.py with it"
                stack = target_stack(project, example, node_sets_named(keywords, calls)).stem
                stop_every_running_workload(follow, stack)
            follow.edited.append(apply_python(follow, example))
        else:
            for line, command in commands(example):
                follow_command(follow, f"docs/{page}:{line}", command)
    for stack in dict.fromkeys(follow.edited):
        for verb in ("check", "render"):
            done = follow.stacks(verb, stack)
            assert done.returncode == 0, (
                f"{follow}\n`python -m stacks {verb} {stack}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
            )
            follow.done.append(f"`python -m stacks {verb} {stack}`: exit 0")
    return follow


PAGES = sorted(p.name for p in DOCS.glob("*.md") if examples(p.name, p.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", PAGES)
def test_the_examples_of_a_page_can_be_followed(page: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    project = tmp_path / "project"
    copy_of_head(project)
    if not (project / "docs" / page).exists():
        pytest.skip(f"docs/{page} is not committed yet: the examples are followed on HEAD")
    edits = any(e.lang == "python" for e in examples(page, (project / "docs" / page).read_text(encoding="utf-8")))
    key = read_by_replay(project, [f"docs/{page}"], runs_tests=edits)
    if passed_before(request, f"docs/{page}", key):
        return
    follow = follow_page(project, page)
    assert follow.done or follow.not_run, f"{follow}\nnothing was followed"
    if follow.edited:  # as after the README's recipes: no test needs an edit (tests/test_recipes.py)
        tests = run_committed_stack_tests(project)
        assert tests.returncode == 0, (
            f"{follow}\nthe copy's tests that read the committed stacks fail (a test that needs an edit after following "
            f"docs/{page}):\n{tests.stdout[-4000:]}{tests.stderr[-2000:]}"
        )
    passed(request, f"docs/{page}", key)


def test_a_page_example_that_names_no_stack_s_node_set_is_refused(tmp_path: Path) -> None:
    """What the test says of the example the issue found: a quota for a node set no stack has."""
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "one.py").write_text('NodeSet(name="h100", count=1)\n', encoding="utf-8")
    bad = Example("x.md", 3, "python", 'queueing=Queueing(cluster_queue="q", quota={"a100": {"nvidia.com/gpu": "8"}}),\n')
    names, keywords, calls, _ = imports_and_parts(bad)
    with pytest.raises(AssertionError, match=r"docs/x.md:3 \(python\) names node set\(s\) \['a100'\], which no stack has"):
        target_stack(tmp_path, bad, node_sets_named(keywords, calls))


def test_a_stack_module_gets_the_parts_of_an_example(tmp_path: Path) -> None:
    module = (
        'from config import ClusterConfig, NodeSet\n\nCONFIG = ClusterConfig(\n    name="x",\n'
        '    node_sets=[\n        NodeSet(\n            name="a",\n            count=1,\n        )\n    ],\n)\n'
    )
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "x.py").write_text(module, encoding="utf-8")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)  # the lint `make fmt` applies
    example = Example(
        "x.md",
        1,
        "python",
        'from config import PodsReady, Queueing  # make fmt merges it\n\nNodeSet(name="a", count=2, labels={"k": "v"}),\n'
        'queueing=Queueing(\n    cluster_queue="q",\n    pods_ready=PodsReady(),\n),\n',
    )
    follow = Follow(tmp_path, "x.md")
    assert apply_python(follow, example) == "x"
    text = (tmp_path / "clusters" / "x.py").read_text(encoding="utf-8")
    tree = ast.parse(text)  # still Python
    (config,) = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _called(c) == "ClusterConfig"]
    assert [k.arg for k in config.keywords] == ["name", "node_sets", "queueing"]
    (node_set,) = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _called(c) == "NodeSet"]
    assert {k.arg: ast.literal_eval(k.value) for k in node_set.keywords} == {"name": "a", "count": 2, "labels": {"k": "v"}}
    (imported,) = [n for n in tree.body if isinstance(n, ast.ImportFrom)]  # merged, as the lint wants it
    assert [a.name for a in imported.names] == ["ClusterConfig", "NodeSet", "PodsReady", "Queueing"]


def test_sh_commands_are_split_as_bash_would_run_them() -> None:
    example = Example(
        "x.md",
        10,
        "sh",
        "make venv   # a comment\npulumi preview --diff && pulumi up\ncat > F <<'EOF'\na: 1  # kept\nEOF\n"
        ".venv/bin/python -m stacks rights barcelona --tier platform   # admin: may you?\n",
    )
    assert commands(example) == [
        (11, "make venv"),
        (12, "pulumi preview --diff"),
        (12, "pulumi up"),
        (13, "cat > F <<'EOF'\na: 1  # kept\nEOF"),
        (16, ".venv/bin/python -m stacks rights barcelona --tier platform"),
    ]


def test_the_yaml_a_heredoc_example_writes_is_read_as_the_program_reads_stack_files() -> None:
    """shared-clusters.md's platform stack file, as the page writes it, is a Pulumi stack file of the program's grammar."""
    text = (DOCS / "shared-clusters.md").read_text(encoding="utf-8")
    (heredoc,) = [c for e in examples("shared-clusters.md", text) if e.lang == "sh" for _, c in commands(e) if "<<" in c]
    body = yaml.safe_load("\n".join(heredoc.splitlines()[1:-1]))
    assert body["config"]["gpu-training:tier"] == "platform" and body["config"]["kubernetes:context"]
