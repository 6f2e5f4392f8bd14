"""The stacks: one validated ClusterConfig per cluster, from its module in clusters/ or from the YAML
file its Pulumi stack file names.

A stack is a module `clusters/NAME.py` that defines `CONFIG` (discovered: adding a cluster is one
module plus its `Pulumi.NAME.yaml`). clusters/ holds only the files users edit; this package is the program
that reads them. `load(name)` honours `gpu-training:configFile` in the stack's
Pulumi stack files, so `python -m stacks check NAME` checks what `pulumi up -s NAME` would deploy.
Errors are ConfigError with a message that names the file and the field, never a traceback. A module is user code:
it runs in a child process with a time limit, and only its config comes back, as data validated here (`load_module`).
"""

from __future__ import annotations

# First, before the slow imports: under `python -m stacks` Ctrl-C is quiet from here on (stacks/_process.py).
from stacks import _process  # noqa: F401

# isort: split

import difflib
import functools
import importlib.util
import linecache
import math
import os
import re
import stat
import subprocess
import sys
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from config import project, provenance
from config.errors import DEFERRED, IN_STACK_MODULE, ModelError, describe_errors, located
from config.stack import ClusterConfig
from config.text import escaped
from config.values import TooDeep, bounded_json
from stacks import _archive, _child

CLUSTERS = "clusters"
"""The folder of project.ROOT that holds the cluster modules, the files a user edits."""
PROJECT = "gpu-training"
CONFIG_FILE_KEY = f"{PROJECT}:configFile"
CLUSTER_KEY = f"{PROJECT}:cluster"
TIER_KEY = f"{PROJECT}:tier"
TIERS = ("all", "platform", "project")

# Limits of a config file: a config is a few hundred lines; these stop a file that is a device, a
# FIFO, a bomb of nesting or aliases before it costs more than a moment.
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 40
MAX_YAML_VALUES = 200_000


@dataclass(frozen=True)
class Limits:
    """What one reader of YAML or JSON takes (read_text, parse_yaml, parse_json): a file past them is refused,
    naming it, before anything is built from it."""

    what: str
    """What the file is, as the messages say it: `a config`."""
    max_bytes: int = MAX_FILE_BYTES
    max_depth: int = MAX_DEPTH
    max_values: int = MAX_YAML_VALUES


CONFIG_LIMITS = Limits("a config")
# A rendered object is nested a dozen levels at most; a launcher ConfigMap is its ~3,300 lines of source in one
# value (a ConfigMap holds 1 MiB): the config's limits have room for both, and still stop a bomb.
RENDERED_LIMITS = Limits("a rendered file")
# `oc get KIND -o yaml` of every SCC of a cluster is a few thousand lines.
LIVE_LIMITS = Limits("a live object")


class ConfigError(Exception):
    """Bad configuration: the message names the file, the field and the fix."""


# --- which stacks exist -------------------------------------------------------------------------


# Pulumi's grammar of a stack name (sdk/go/common/tokens/stack_name.go, ParseStackName, pulumi/pulumi at
# 1b59498): not empty, at most 100 characters, each one of [A-Za-z0-9_.-]. A name is read from a file name
# (Pulumi.NAME.yaml, clusters/NAME.py) or the command line, and goes into commands printed for a user to paste, the
# pull-request workflow's matrix and the paths of a file state backend: held to the grammar where it is read, no shell
# or path character ever gets that far. `.` and `..` pass Pulumi's rule but name a folder, not a stack.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
# A cluster's name is its config's `name`, a DNS label (config/stack.py ClusterConfig.name: K8sName).
CLUSTER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def stack_name_problem(name: str) -> str:
    """Why Pulumi would refuse `name` as a stack name, or "" (STACK_NAME)."""
    if not name:
        return "the stack name is empty"
    if len(name) > 100:
        return f"the stack name {escaped(name[:40])}... has {len(name)} characters: Pulumi takes at most 100"
    if not STACK_NAME.fullmatch(name) or name in (".", ".."):
        odd = next((c for c in name if not STACK_NAME.fullmatch(c)), ".")
        return (
            f"the stack name {escaped(repr(name))} holds {escaped(repr(odd))}: a stack name is letters, digits, '-', '_' and '.' "
            "(Pulumi's rule), and not '.' or '..'"
        )
    return ""


def check_stack_name(name: str, what: str = "PULUMI_STACK") -> str:
    """`name` as given on the command line, or the ConfigError that says why it is no stack name."""
    problem = stack_name_problem(name)
    if problem:
        raise ConfigError(f"{what}: {problem}")
    return name


def names(root: Path | None = None) -> list[str]:
    """The stacks: every module clusters/NAME.py (NAME not starting with '_', which a shared helper may use). A module
    whose name Pulumi would refuse as a stack name is an error: its name reaches commands, paths and the workflow."""
    found = sorted(p.stem for p in ((root or project.ROOT) / CLUSTERS).glob("*.py") if not p.stem.startswith("_"))
    for name in found:
        problem = stack_name_problem(name)
        if problem:
            raise ConfigError(
                f"{CLUSTERS}/{escaped(name)}.py: {problem}: name the module clusters/CLUSTER.py, CLUSTER being its config's name"
            )
    return found


def module_file(name: str) -> str:
    """A stack's module as messages name it, relative to the project: `clusters/NAME.py`."""
    return f"{CLUSTERS}/{name}.py"


@dataclass(frozen=True)
class PulumiStack:
    """One `Pulumi.NAME.yaml`: a Pulumi stack that deploys (a tier of) one cluster's config."""

    name: str
    cluster: str
    tier: str
    config_file: str | None
    context: str | None
    disabled_default_providers: list[str]
    path: Path


# Look-alikes of ASCII letters that a name copied from a web page or a chat may hold: Unicode's confusables
# (confusables.txt) for the Latin letters, from the Cyrillic and Greek scripts. NFKC folds the rest that matter
# here (full-width letters, ligatures), and case is folded too.
_LOOK_ALIKES = str.maketrans(
    "аеорсухіјѕԁԛԝһɡАВЕКМНОРСТХІЈЅΑΒΕΗΙΚΜΝΟΡΤΧΥΖοαικνρτυχ",
    "aeopcyxijsdqwhgABEKMHOPCTXIJSABEHIKMNOPTXYZoaikvptux",
)


def _skeleton(name: str) -> str:
    """What a name looks like: two names with one skeleton are told apart only by look-alike characters (Unicode's
    confusables: `nеrc` with a Cyrillic е, `NERC`, `nerc` with 1 for l or 0 for o, `rn` for `m`)."""
    text = unicodedata.normalize("NFKC", name).translate(_LOOK_ALIKES).replace("I", "l").casefold()
    for alike, letter in (("rn", "m"), ("vv", "w"), ("1", "l"), ("0", "o"), ("|", "l")):
        text = text.replace(alike, letter)
    return text


def _alike(one: str, other: str) -> bool:
    return one.casefold() == other.casefold() or _skeleton(one) == _skeleton(other)


def _name_problem(kind: str, name: str, known: list[str]) -> str:
    """Why a stack or cluster name in a stack file is refused, or "": empty, not ASCII, or one that differs from a
    cluster module's only by look-alike characters (it would load, or make, another stack than the one meant)."""
    if not name:
        return f"the {kind} name is empty"
    alike = [k for k in known if k != name and _alike(k, name)]
    hint = f"; it looks like {alike[0]!r} (clusters/{alike[0]}.py): write {alike[0]}" if alike else ""
    odd = next((c for c in name if not c.isascii()), None)
    if odd is not None:
        return (
            f"the {kind} name {name!r} is not ASCII ({odd!r} is U+{ord(odd):04X} {unicodedata.name(odd, 'unnamed')}): a {kind} name "
            f"is ASCII letters, digits, -, _ and . (Pulumi's rule){hint}"
        )
    if alike:
        return f"the {kind} name {name!r} differs from the cluster {alike[0]!r} only by case or look-alike characters{hint}"
    if kind == "cluster" and not CLUSTER_NAME.fullmatch(name):
        return (
            f"the cluster name {escaped(repr(name))} is not a cluster's name: lowercase letters, digits and '-' (its config's "
            "name, a DNS label)"
        )
    return stack_name_problem(name)


def pulumi_stacks(root: Path | None = None) -> list[PulumiStack]:
    """Every Pulumi stack file of the project, parsed (the workflow's preview matrix reads this). A file whose name or
    settings would deploy something else than they seem to (an empty or look-alike name, an unknown tier) is an error,
    never a silent default."""
    out = []
    modules = names(root)
    seen: list[str] = []
    for path in sorted((root or project.ROOT).glob("Pulumi.*.yaml")):
        name = path.name[len("Pulumi.") : -len(".yaml")]
        problem = _name_problem("stack", name, modules)
        if problem:
            raise ConfigError(f"{escaped(path.name)}: {problem}: name the file Pulumi.STACK.yaml, STACK being the cluster or CLUSTER-TIER")
        twin = next((other for other in seen if _alike(other, name)), None)
        if twin is not None:
            raise ConfigError(
                f"{path.name}: the stack name {name!r} differs from {twin!r} (Pulumi.{twin}.yaml) only by case or look-alike "
                "characters: give each stack a name of its own"
            )
        seen.append(name)
        data = read_yaml(path)
        config = _stack_settings(path, data)

        def text(key: str, config: dict[str, Any] = config) -> str | None:
            value = config.get(key)
            return value if isinstance(value, str) and value else None

        tier = config.get(TIER_KEY, "all")
        if tier not in TIERS:
            raise ConfigError(f"{path.name}: {TIER_KEY} is {tier!r}; expected one of {', '.join(TIERS)} (or no {TIER_KEY}: all)")
        cluster = config.get(CLUSTER_KEY, name)
        problem = _name_problem("cluster", cluster, modules) if isinstance(cluster, str) else f"{CLUSTER_KEY} is not a name: {cluster!r}"
        if problem:
            # Without the key the stack's own name is its cluster's.
            said = CLUSTER_KEY if CLUSTER_KEY in config else f"the stack name (no {CLUSTER_KEY}: the cluster it names)"
            raise ConfigError(f"{path.name}: {problem.replace('the cluster name', said)}")
        disabled = config.get("pulumi:disable-default-providers")
        out.append(
            PulumiStack(
                name=name,
                cluster=cluster,
                tier=str(tier),
                config_file=text(CONFIG_FILE_KEY),
                context=text("kubernetes:context"),
                disabled_default_providers=[str(d) for d in disabled] if isinstance(disabled, list) else [],
                path=path,
            )
        )
    return out


# The keys Pulumi reads at the top of a stack file (its settings are under `config:`).
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")


def _stack_settings(path: Path, data: Any) -> dict[str, Any]:
    """A stack file's `config:` mapping. A file that is not a mapping, a key Pulumi does not read (`confg:`), or a
    `config` that is not a mapping would deploy with none of its settings (tier all, no kube context): an error."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name}: a stack file is a mapping with `config:` (kubernetes:context, {TIER_KEY}, ...)")
    unknown = [k for k in data if k not in STACK_FILE_KEYS]
    if unknown:
        raise ConfigError(f"{path.name}: {unknown[0]!r} is not a key of a stack file (Pulumi reads {', '.join(STACK_FILE_KEYS)})")
    config = data.get("config")
    if not isinstance(config, dict):
        raise ConfigError(f"{path.name}: `config:` must be a mapping of settings (kubernetes:context, {TIER_KEY}, ...), not "
                          f"{'missing' if config is None else type(config).__name__}")  # fmt: skip
    return config


def config_file_of(cluster: str, root: Path | None = None) -> tuple[str | None, str]:
    """(the YAML config the cluster's Pulumi stacks deploy instead of its module, or None; the stack file
    that says so). All stack files of one cluster must agree: two tiers deploying two configs would drift."""
    found = [s for s in pulumi_stacks(root or project.ROOT) if s.cluster == cluster]
    files = {s.config_file for s in found}
    if len(files) > 1:
        shown = ", ".join(f"{s.path.name}: {s.config_file or '(the module)'}" for s in found)
        raise ConfigError(f"the Pulumi stack files of {cluster!r} name different configs ({shown}): make them name one")
    return (found[0].config_file, found[0].path.name) if found else (None, "")


# --- loading ------------------------------------------------------------------------------------


def load(name: str) -> ClusterConfig:
    """The config `pulumi up` deploys for stack NAME: the YAML file its stack files name in
    gpu-training:configFile, else its module in clusters/."""
    check_stack_name(name, "STACK")
    known = names()
    if name not in known:
        shown = ", ".join(known) or "none"
        raise ConfigError(f"unknown stack {name!r}: the stacks are {shown} (python -m stacks list)")
    return load_deployed(name, *config_file_of(name))


def load_deployed(cluster: str, config_file: str | None, stack_file: str) -> ClusterConfig:
    """What a Pulumi stack deploys: the YAML `config_file` its `stack_file` names in gpu-training:configFile
    (relative to the project folder), else clusters/CLUSTER.py. A config that names another cluster is refused.
    The commands and the Pulumi program (policy/gate.py) both load through here."""
    if not config_file:
        if cluster not in names():
            raise ConfigError(
                f"unknown stack {cluster!r}: no {module_file(cluster)} (the stacks are {', '.join(names())}); set "
                f"{CLUSTER_KEY} in {stack_file or 'its Pulumi stack file'} to the cluster this stack deploys"
            )
        return checked_name(load_module(cluster), cluster, module_file(cluster))
    file = Path(config_file) if Path(config_file).is_absolute() else project.ROOT / config_file
    if not file.exists():
        raise ConfigError(
            f"{stack_file}: {CONFIG_FILE_KEY} names {config_file}, which does not exist ({file}): fix the path "
            f"(relative to the project folder), or remove the key to deploy {module_file(cluster)}"
        )
    return checked_name(load_file(file), cluster, config_file)


def checked_name(config: ClusterConfig, stack: str, source: str) -> ClusterConfig:
    """Refuse a config that names another cluster: deploying it would send one cluster's objects to another."""
    if config.name != stack:
        raise ConfigError(
            f"{source}: name: the config is for stack {config.name!r}, but it is deployed as stack {stack!r}; "
            f"set name: {stack} if this file is meant for {stack}, or name it in Pulumi.{config.name}.yaml instead"
        )
    return config


TIME_LIMIT_KEY = "GPU_TRAINING_MODULE_TIME_LIMIT"


def _time_limit(text: str | None) -> float | str:
    """The seconds `text` gives (none: 20), or why it gives none."""
    try:
        value = float(text or 20)
    except ValueError:
        value = math.nan
    return (
        value
        if math.isfinite(value) and value > 0
        else f"{TIME_LIMIT_KEY} is {text!r}: give a number of seconds above 0 (the default is 20)"
    )


MODULE_TIME_LIMIT = _time_limit(os.environ.get(TIME_LIMIT_KEY))
"""Seconds a stack module may take to run (GPU_TRAINING_MODULE_TIME_LIMIT): one that loops or waits is stopped and
reported, never left to hang a check, a render or `pulumi preview`. A value that is no such number is the message
that says so (every load reports it, and import stays quiet)."""

SPAWN_MODULES = False
"""Run each module in a fresh interpreter instead of a fork of this process: set by the Pulumi program (policy/gate.py),
whose gRPC threads a fork cannot copy safely. A fresh interpreter costs about half a second per module."""

# What a spawned child runs: argv is [project's program folder, the project folder, stack name, module path].
_SPAWNED = """import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import os, stacks
from config import project
from stacks import _child
project.ROOT = Path(sys.argv[2])
_child.answer(lambda: stacks._run_module(sys.argv[3], Path(sys.argv[4])), int(os.environ[_child.ANSWER_FD]))
"""

# What a spawned loader runs (preload): argv is [project's program folder, the project folder, time limit, NAME...]. It has no
# threads of its own, so it forks one child per module, as the commands do: one module's exit or loop stays its own.
_SPAWNED_MANY = """import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import os, stacks
from config import project
from stacks import _child
project.ROOT = Path(sys.argv[2])
def each():
    out = {}
    for name in sys.argv[4:]:
        path = project.ROOT / stacks.CLUSTERS / f"{name}.py"
        out[name] = _child.run(lambda: stacks._run_module(name, path), float(sys.argv[3]))
    return out
_child.answer(each, int(os.environ[_child.ANSWER_FD]))
"""

_LOADED: dict[Path, tuple[str, ClusterConfig]] = {}
"""The configs of the modules this process has run, by path, with the text they were run from: a module runs once
per process (`check` loads the other stacks too, the tests load them again and again), and again once edited."""


def preload(wanted: list[str]) -> None:
    """Run the modules of these stacks ahead of their loads, all in one fresh interpreter (SPAWN_MODULES: the Pulumi
    program, which loads its own stack and the others the shared-projects rule compares with), so a preview pays one
    interpreter start instead of one per module. Each module still runs in a child of its own, under the time limit.
    What goes wrong is left for load_module, which runs that module again and reports it."""
    if not SPAWN_MODULES or isinstance(MODULE_TIME_LIMIT, str):
        return
    todo: dict[str, tuple[Path, str]] = {}
    for name in wanted:
        path = project.ROOT / CLUSTERS / f"{name}.py"
        try:
            version = read_text(path)
        except ConfigError:
            continue
        cached = _LOADED.get(path)
        if cached is None or cached[0] != version:
            todo[name] = (path, version)
    if not todo:
        return
    spawn = ["-c", _SPAWNED_MANY, str(Path(__file__).resolve().parent.parent), str(project.ROOT), str(MODULE_TIME_LIMIT), *todo]
    answers, died = _child.run(lambda: None, MODULE_TIME_LIMIT * (len(todo) + 1), spawn)
    if died or not isinstance(answers, dict):
        return
    for name, (path, version) in todo.items():
        got = answers.get(name)
        if not (isinstance(got, list) and len(got) == 2 and isinstance(got[1], str)):
            continue
        try:
            _LOADED[path] = (version, _config_from(name, got[0], got[1]))
        except ConfigError:
            continue


_STARTED: dict[Path, tuple[str, _child.Started]] = {}
"""The modules `prefetch` started, by path, with the text they run: load_module takes their answers."""


def prefetch(wanted: list[str]) -> None:
    """Start the modules of these stacks now, each in a child of its own under the time limit, and return at once: a
    command that loads several stacks (render, check) lets them run while it imports the program (pulumi, the
    components), which they do not need, on the machine's other core. load_module collects each answer, and runs a
    module edited since again. A stack deployed from a YAML file (gpu-training:configFile) is not started."""
    if SPAWN_MODULES or isinstance(MODULE_TIME_LIMIT, str) or not hasattr(os, "fork"):
        return
    for name in wanted:
        path = project.ROOT / CLUSTERS / f"{name}.py"
        try:
            if config_file_of(name)[0]:
                continue
            version = read_text(path)
        except ConfigError:  # its own load reports it
            continue
        cached = _LOADED.get(path)
        if path in _STARTED or cached is not None and cached[0] == version:
            continue
        started = _child.start(functools.partial(_run_module, name, path))
        if isinstance(started, _child.Started):
            _STARTED[path] = (version, started)


def forget_prefetched() -> None:
    """End and reap the children `prefetch` started whose modules were never loaded (the command stopped first, or did
    not need them): none outlives the command that started it."""
    while _STARTED:
        _, (_, started) = _STARTED.popitem()
        _child.abandon(started)


def load_module(name: str) -> ClusterConfig:
    """A stack's module, run as user code: in a child process with a time limit (stacks/_child.py), so nothing it
    does (an exit, an endless loop, a print, a change to the program's state) reaches this process; only its
    config comes back, as data, with the line of each model's call. That data is validated here the way a YAML
    config is (`validate`), so a model built around validation (model_construct, model_copy(update=...), a list
    changed after ClusterConfig(...)) is checked too. Any error is a message with the file and line, never a
    traceback."""
    path = project.ROOT / CLUSTERS / f"{name}.py"
    source = module_file(name)
    if not path.exists():
        raise ConfigError(f"{source}: no such module (the stacks are {', '.join(names()) or 'none'})")
    version = read_text(path)  # bounded: a FIFO or a device in clusters/ is refused, not read forever
    cached = _LOADED.get(path)
    if cached is not None and cached[0] == version:
        return cached[1]
    started = _STARTED.pop(path, None)
    if started is not None and started[0] != version:  # edited since it was started: its answer is not this text's
        _child.abandon(started[1])
        started = None
    config = _load_path(name, path, started[1] if started else None)
    _LOADED[path] = (version, config)
    return config


def _load_path(name: str, path: Path, started: _child.Started | None = None) -> ClusterConfig:
    """Run the module at `path` as stack NAME in a child (stacks/_child.py), or take the answer of the child `prefetch`
    started, and validate the config it answers."""
    if isinstance(MODULE_TIME_LIMIT, str):
        raise ConfigError(MODULE_TIME_LIMIT)
    spawn = ["-c", _SPAWNED, str(Path(__file__).resolve().parent.parent), str(project.ROOT), name, str(path)]
    if started is not None:
        answer, died = _child.finish(started, MODULE_TIME_LIMIT)
    else:
        answer, died = _child.run(lambda: _run_module(name, path), MODULE_TIME_LIMIT, spawn if SPAWN_MODULES else None)
    if died.startswith("was killed") and not SPAWN_MODULES:
        # A crash of a forked child can be the fork's (a library's threads, state no fork can copy): once more, in a
        # fresh interpreter, before it is the module's.
        answer, died = _child.run(lambda: _run_module(name, path), MODULE_TIME_LIMIT, spawn)
    return _config_from(name, answer, died)


def _config_from(name: str, answer: Any, died: str) -> ClusterConfig:
    """The config a module's child answered, validated as data; or the ConfigError that says how the child ended."""
    source = module_file(name)
    if died:
        if died.startswith("was not run"):
            raise ConfigError(f"{source}: the module {died}: try again, or free processes or memory")
        if died.startswith("did not finish"):
            raise ConfigError(
                f"{source}: the module {died} (GPU_TRAINING_MODULE_TIME_LIMIT): an endless loop, or a wait for something; "
                "a stack module only defines CONFIG"
            )
        raise ConfigError(
            f"{source}: the module {died} while it was loaded: a stack module only defines CONFIG (os._exit, sys.exit or "
            "a signal end the program that loads it)"
        )
    if not _well_formed(answer):  # the pipe carries data only, but a module can write into it: never trust its shape
        raise ConfigError(f"{source}: the module's child answered something that is not a config: a stack module only defines CONFIG")
    if "error" in answer:
        raise ConfigError(answer["error"])
    data = answer["config"]
    _check_text(data, Path(source))
    if "yaml" in answer:  # the module returned a config it read from a YAML file (load_file): that file's lines
        file, lines = answer["yaml"]
        config = validate(data, file, {tuple(p): n for p, n in lines})
    else:
        config = validate(data, source, calls={tuple(p): (f, n) for p, f, n in answer["calls"]})
    return config


def _path_ok(path: Any) -> bool:
    return isinstance(path, list) and all(isinstance(part, str | int) and not isinstance(part, bool) for part in path)


def _well_formed(answer: Any) -> bool:
    """Whether a child's answer has the shape `_run_module` gives it: {"error": text}, or {"config": a mapping, and
    "calls": [[path, file, line]...] or "yaml": [file, [[path, line]...]]}."""
    if not isinstance(answer, dict):
        return False
    if "error" in answer:
        return isinstance(answer["error"], str)
    if not isinstance(answer.get("config"), dict):
        return False
    if "yaml" in answer:
        y = answer["yaml"]
        return (
            isinstance(y, list) and len(y) == 2 and isinstance(y[0], str) and isinstance(y[1], list)
            and all(isinstance(e, list) and len(e) == 2 and _path_ok(e[0]) and isinstance(e[1], int) for e in y[1])
        )  # fmt: skip
    calls = answer.get("calls")
    return isinstance(calls, list) and all(
        isinstance(e, list) and len(e) == 3 and _path_ok(e[0]) and isinstance(e[1], str) and isinstance(e[2], int) for e in calls
    )


def _run_module(name: str, path: Path) -> dict[str, Any]:
    """In the child: run the module at `path` as `clusters.NAME` and answer {"config": its dumped CONFIG, "calls" or
    "yaml": where its values were written}, or {"error": the message}. Every failure of the module is answered here,
    formatted here: an exception whose message itself fails or loops stays in the child too."""
    source = module_file(name)
    # `from clusters import _common` (a helper module beside the stacks) finds this project's clusters/.
    sys.path.insert(0, str(project.ROOT))
    for loaded in [m for m in sys.modules if m == CLUSTERS or m.startswith(f"{CLUSTERS}.")]:
        del sys.modules[loaded]
    os._exit = _exit_at_its_line  # this process is the child: an os._exit in the module is reported with its line
    token = IN_STACK_MODULE.set(True)
    defined: dict[str, Any] = {}  # the module's globals, once it runs: the names a mistyped one may be meant as
    deferred: list[ModelError] = []
    reported = DEFERRED.set(deferred)
    try:
        spec = importlib.util.spec_from_file_location(f"{CLUSTERS}.{name}", path)
        if spec is None or spec.loader is None:
            return {"error": f"{source}: not a Python module"}
        module = importlib.util.module_from_spec(spec)
        defined = module.__dict__
        sys.modules[spec.name] = module  # as an import would: a dataclass in the module looks its module up
        # Compiled from the file as it is now, not from a cached .pyc: a cache is trusted by the file's mtime and size,
        # which an edit within the same clock tick (a test, a script) leaves as they were.
        exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), module.__dict__)
        if deferred:  # models that failed, and no ClusterConfig(...) that raised them
            raise ModelError.of(deferred)
        config = getattr(module, "CONFIG", None)
        if not isinstance(config, ClusterConfig):
            return {"error": f"{source}: defines no CONFIG = ClusterConfig(...) (every stack module does)"}
        try:
            data = config.model_dump(mode="json", warnings=False)
        except Exception as err:  # noqa: BLE001 (model_construct can put anything in a model)
            return {"error": f"{source}: CONFIG holds a value that is not config data: {_text(err)}: build it with the models' calls"}
        yaml_of = provenance.yaml_of(config)
        if yaml_of is not None:
            return {"config": data, "yaml": [yaml_of[0], [[list(p), n] for p, n in yaml_of[1].items()]]}
        return {"config": data, "calls": [[list(p), f, n] for p, (f, n) in provenance.calls(config).items()]}
    except ModelError as err:  # each of its lines names the file and line that write the field
        return {"error": f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in err.lines)}
    except SyntaxError as err:
        where = _shown_file(err.filename, source)
        line, hint = _syntax_hint(err)
        return {"error": f"{where}:{line}: not valid Python: {err.msg}" + (f": {hint}" if hint else "")}
    except SystemExit as err:
        at = _user_line(err.__traceback__, path) or source
        code = err.code if isinstance(err.code, int) else 1 if err.code is not None else 0
        return {
            "error": f"{at}: the module exited (code {code}) while it was loaded: a stack module only defines CONFIG "
            "(sys.exit and os._exit end the program that loads it)"
        }
    except BaseException as err:  # noqa: BLE001 (a user's module: any mistake in it is reported, not raised)
        at = _user_line(err.__traceback__, path) or source
        hint = _name_hint(err, at, defined) if isinstance(err, NameError) else ""
        said = ": ".join(part for part in (type(err).__name__, _text(err), hint) if part)
        return {"error": f"{at}: the stack module failed: {said}"}
    finally:
        DEFERRED.reset(reported)
        IN_STACK_MODULE.reset(token)


def _exit_at_its_line(status: int) -> NoReturn:
    """os._exit in a module's child: a SystemExit instead, which unwinds to the report that names the calling line."""
    raise SystemExit(status)


def _text(err: BaseException) -> str:
    """An exception's message; one whose __str__ fails is named by its class instead of failing in turn."""
    try:
        return str(err)
    except BaseException as failed:  # noqa: BLE001
        return f"(its message cannot be shown: str() raised {type(failed).__name__})"


def _shown_file(file: str | None, default: str) -> str:
    """A file of the user's as messages name it (`clusters/_common.py`), or `default`."""
    if not file:
        return default
    return provenance.shown((file, 0)).removesuffix(":0")


def _user_line(tb: TracebackType | None, path: Path) -> str:
    """Where a failure happened in the user's files: the last line of a file in clusters/ on the traceback, as
    `clusters/_common.py:4` (a helper module is named as itself), and the stack's line that imported it."""
    folder = (project.ROOT / CLUSTERS).resolve()
    own = None
    last: tuple[str, int] | None = None
    while tb is not None:
        file = Path(tb.tb_frame.f_code.co_filename).resolve()
        if file.parent == folder:
            last = (str(file), tb.tb_lineno)
            if file == path.resolve():
                own = last
        tb = tb.tb_next
    if last is None:
        return ""
    if own is not None and own != last:
        return f"{provenance.shown(last)} (from {provenance.shown(own)})"
    return provenance.shown(last)


# Python mistakes of a user who writes the stack file's YAML: the hint speaks its words.
_YAML_WORDS = {"true": "True", "yes": "True", "on": "True", "false": "False", "no": "False", "off": "False"}
_YAML_NULLS = ("null", "none", "nil", "~")


def _syntax_hint(err: SyntaxError) -> tuple[int | None, str]:
    """(the line to name, a hint or ""): `nodes: 1` inside a call is a keyword argument written as a YAML key. Python
    may place the error on the line before it ("Perhaps you forgot a comma?"), so the lines it spans are read."""
    first = err.lineno or 0
    lines = linecache.getlines(err.filename or "") if err.filename else []
    for number in range(first, max(first, err.end_lineno or first) + 1):
        text = lines[number - 1] if 0 < number <= len(lines) else err.text or ""
        found = re.search(r"\b([A-Za-z_]\w*)\s*:\s*(?=[^,)\]}\s])", text)
        if found is not None and found.group(1) not in ("lambda", "else", "try", "finally", "class", "def"):
            key, value = found.group(1), _argument(text[found.end() :])
            return number, f"use `{key}={value}` (a keyword argument is written with =; `{key}: {value}` is how a YAML file writes it)"
    return err.lineno, ""


def _argument(text: str) -> str:
    """The value an argument starts with in `text`: up to the comma or closing bracket that ends it, with the brackets
    and quotes it opens itself kept whole (`[NS]`, `{"a": 1}`, `"a, b"`)."""
    depth, quote = 0, ""
    for at, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}" and depth > 0:
            depth -= 1
        elif char in ",)]}#" and depth == 0:  # the end of this argument (or a comment)
            return text[:at].strip()
    return text.strip()


def _name_hint(err: NameError, at: str, defined: dict[str, Any]) -> str:
    """A bare word the module uses as a value: a mistyped name the module defines (`H_KIM` for `H_KIM_NS`), `true`,
    `null`, or text written without quotes."""
    name = getattr(err, "name", None)
    if not isinstance(name, str):
        return ""
    file, _, line = at.split(" ")[0].rpartition(":")
    text = linecache.getline(str(project.ROOT / file), int(line)) if line.isdigit() else ""
    keyword = re.search(rf"\b([A-Za-z_]\w*)\s*=\s*{re.escape(name)}\b", text)
    python = _YAML_WORDS.get(name.lower()) or ("None" if name.lower() in _YAML_NULLS else "")
    if python:
        return f"Python writes {python}" + (f": `{keyword.group(1)}={python}`" if keyword else "")
    # `nccl-test` unquoted is `nccl - test` to Python, which names only `nccl`: the text is the whole dashed word.
    dashed = re.search(rf"(?<![\w.'\"-]){re.escape(name)}(?:-\w+)+", text)
    word = dashed.group(0) if dashed else name
    quote = _quote_hint(name, word, keyword, text)
    # The names the module defines first: a constant or an import mistyped is likelier than text left unquoted (a
    # dashed word is text).
    close = [] if dashed else difflib.get_close_matches(name, [n for n in defined if not n.startswith("__")], n=3, cutoff=0.6)
    if not close:
        return quote
    module = getattr(defined.get("__spec__"), "origin", None) or ""
    assigned = provenance.assignments(module) if module else {}
    meant = " or ".join(f"`{c}`" + (f" ({provenance.shown((module, assigned[c]))})" if c in assigned else "") for c in close)
    return f"did you mean {meant}, which the module defines? Else, {quote}"


def _quote_hint(name: str, word: str, keyword: re.Match[str] | None, text: str) -> str:
    if keyword:
        return f'if it is text, quote it: `{keyword.group(1)}="{word}"`'
    if re.search(rf"\b{re.escape(name)}\s*:", text):
        return f'quote a key (`"{word}": ...`), or write a keyword argument as `{name}=...`'
    return f'if it is text, quote it: `"{word}"`'


def _committed_clusters(ref: str, *command: str) -> bytes:
    """`git COMMAND REF:./clusters` in the project: clusters/ as committed at `ref`."""
    try:
        done = subprocess.run(["git", *command, f"{ref}:./{CLUSTERS}"], cwd=project.ROOT, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise ConfigError(f"cannot read {CLUSTERS}/ at {ref}: {err}") from None
    return done.stdout


def committed_names(ref: str) -> list[str]:
    """The stacks committed at git `ref` (names() there); a ConfigError outside git or for an unknown ref."""
    files = _committed_clusters(ref, "ls-tree", "--name-only").decode().split("\n")
    return sorted(f[: -len(".py")] for f in files if f.endswith(".py") and not f.startswith("_"))


def load_committed(name: str, ref: str) -> ClusterConfig | None:
    """The stack's module as committed at git `ref` (with the rest of clusters/ there: its files, its helpers), run by this
    program: what `python -m stacks check` compares a check with (the findings it did not have are new). None when `ref`
    has no such module. A ConfigError when it cannot tell: outside git, an unknown ref, a stack deployed from a YAML
    config file (gpu-training:configFile), a committed module this program cannot run."""
    if config_file_of(name)[0]:
        raise ConfigError(f"{name} is deployed from a YAML config file: only a stack module is compared with its commit")
    if name not in committed_names(ref):
        return None
    with tempfile.TemporaryDirectory(prefix="stacks-committed-") as tmp:
        try:
            _archive.unpack(_committed_clusters(ref, "archive", "--format=tar"), Path(tmp))
        except _archive.UnsafeMember as err:
            raise ConfigError(f"{CLUSTERS}/ at {ref} cannot be unpacked: {err}") from None
        return _load_path(name, Path(tmp) / f"{name}.py")  # in a child, as the working tree's module is


def _yaml11_numbers(data: Any) -> list[tuple[tuple[str | int, ...], Yaml11Number]]:
    """Where the loader kept a YAML 1.1 number reading (Yaml11Number), and which, in the file's order. A walk without
    recursion that looks into containers only: a config is mostly strings."""
    found: list[tuple[tuple[str | int, ...], Yaml11Number]] = []
    todo: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while todo:
        node, loc = todo.pop()
        if type(node) is Yaml11Number:
            found.append((loc, node))
        elif type(node) is dict:
            todo.extend(reversed([(v, (*loc, str(k))) for k, v in node.items() if type(v) is not str]))
        elif type(node) is list:
            todo.extend(reversed([(v, (*loc, i)) for i, v in enumerate(node) if type(v) is not str]))
    return found


def validate(
    data: Any,
    source: str,
    lines: dict[provenance.Path_, int] | None = None,
    calls: dict[provenance.Path_, tuple[str, int]] | None = None,
) -> ClusterConfig:
    """Validate plain data (parsed YAML, or a stack module's dumped CONFIG) as a ClusterConfig; `source` names it in
    errors, and `lines` (the line of each key, read_yaml_lines) or `calls` (the line of each model's call,
    provenance.calls) start each error with its line and stay with the config for the preflight's findings."""

    def line_of(loc: provenance.Path_) -> str:  # `FILE:N`, the form editors link
        if calls is not None:
            return provenance.shown(next((calls[loc[:end]] for end in range(len(loc), -1, -1) if loc[:end] in calls), None))
        where = provenance.yaml_line(source, lines or {}, loc)
        return f"{source}:{where[1]}" if where else ""

    if data is None:
        raise ConfigError(f"{source}: the file is empty: write the config (`python -m stacks config STACK` prints one)")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of fields, got {type(data).__name__}")
    surprises = [
        f"{located(loc, data) or 'the file'} ({line_of(loc)}): {value.problem()}".replace(" ()", "") for loc, value in _yaml11_numbers(data)
    ]
    if surprises:
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in surprises))
    try:
        config = ClusterConfig.model_validate(data)
    except ValidationError as err:
        found = describe_errors(err, data, line_of=line_of if lines or calls else None)
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in found)) from None
    except ModelError as err:  # a model built inside a validator
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in err.lines)) from None
    if calls is not None:
        provenance.register_calls(config, calls)
    elif lines:
        provenance.register_yaml(config, source, lines)
    return config


class Yaml11Number(str):
    """A plain scalar YAML 1.1 reads as a number its writer almost certainly did not mean: `017` (octal: 15) or
    `1:30` (base 60: 90). The loader keeps the text; `validate` refuses it, naming the field and the fix."""

    @property
    def reading(self) -> int:
        """What YAML 1.1 makes of it."""
        text = self.replace("_", "")
        sign = -1 if text.startswith("-") else 1
        text = text.lstrip("+-")
        if ":" in text:
            value = 0
            for part in text.split(":"):
                value = value * 60 + int(part)
            return sign * value
        return sign * int(text, 8)

    def problem(self) -> str:
        if ":" in self:
            return (
                f"{self} is a base-60 number in YAML 1.1 (it reads as {self.reading}): quote it ('{self}') if it is text, "
                "or write the number"
            )
        digits = self.lstrip("+-").replace("_", "").lstrip("0") or "0"
        return (
            f"{self} is an octal number in YAML 1.1 (it reads as {self.reading}, not {digits}): write {digits}, or quote it "
            f"('{self}') if it is text"
        )


_YAML11_SURPRISE = re.compile(r"[-+]?(0[0-7_]+|[1-9][0-9_]*(:[0-5]?[0-9])+)")


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader's resolver and constructors with the changes below. `_compose` drives it event by event and refuses
    duplicate keys there (YAML lets the last one win silently, so a stray second `workloads: []` would empty a stack) and
    keys that are not text (`1:`, `null:`, `? [a]`: no field or name is one, and YAML 1.1 reads `on:` or `no:` as
    booleans)."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        text = str(self.construct_scalar(node))
        if _YAML11_SURPRISE.fullmatch(text):
            return Yaml11Number(text)
        return super().construct_yaml_int(node)

    def construct_unordered(self, node: yaml.Node) -> Any:
        # A !!set has no order (Python's changes from run to run, so two renders of one file could differ), and
        # !!omap/!!pairs become lists of tuples no field reads. A config writes lists and mappings.
        tag = node.tag.rsplit(":", 1)[-1]
        why = "a set has no order, so two renders could differ: write a list ([a, b])" if tag == "set" else "write a mapping (a: 1)"
        raise yaml.constructor.ConstructorError(None, None, f"!!{tag} is not supported: {why}", node.start_mark)

    # Every value read is one JSON holds (a config, a committed render compared and printed as JSON): no dates, bytes
    # or infinities, which json.dumps cannot write or writes as no JSON parser reads them.
    def construct_yaml_timestamp(self, node: yaml.ScalarNode, values: Any = None) -> str:
        # YAML 1.2 has no timestamps, and no field wants a date object: `2001-12-14` is the text as written.
        return str(self.construct_scalar(node))

    def construct_yaml_binary(self, node: yaml.ScalarNode) -> Any:
        raise yaml.constructor.ConstructorError(
            None, None, "!!binary is not supported: a config or render holds text (a Secret's data is base64 text)", node.start_mark
        )

    def construct_yaml_float(self, node: yaml.ScalarNode) -> Any:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"{self.construct_scalar(node)} is not a JSON number: write a finite number", node.start_mark
            )
        return value


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_timestamp)
_Loader.add_constructor("tag:yaml.org,2002:binary", _Loader.construct_yaml_binary)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
for _tag in ("set", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _Loader.construct_unordered)


def read_text(path: Path, limits: Limits = CONFIG_LIMITS) -> str:
    """A regular file's text, bounded: never blocks on a FIFO or reads a device forever."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the file: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: not a regular file (a directory, device or FIFO): {limits.what} is a file")
        if info.st_size > limits.max_bytes:
            raise ConfigError(f"{path}: {info.st_size} bytes is larger than {limits.what} can be ({limits.max_bytes})")
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            raw = handle.read(limits.max_bytes + 1)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the file: {err.strerror or err}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    return decode_text(raw, str(path), limits)


def decode_text(raw: bytes, source: str, limits: Limits = CONFIG_LIMITS) -> str:
    """Bytes read elsewhere (a file, a git blob) as text: at most limits.max_bytes, UTF-8 only."""
    if len(raw) > limits.max_bytes:
        raise ConfigError(f"{source}: {len(raw)} bytes is larger than {limits.what} can be ({limits.max_bytes})")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{source}: not a UTF-8 text file (byte {err.start}): {limits.what} is text") from None


def _yaml_error(path: Path | str, err: yaml.YAMLError) -> ConfigError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
    problem = getattr(err, "problem", None) or str(err)
    return ConfigError(f"{path}{where}: not valid YAML: {problem}")


def _check_text(data: Any, path: Path | str, where: str = "") -> None:
    """Every string is valid Unicode text: a JSON-style escape like "\\ud800" yields a lone surrogate,
    which no API server accepts."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{path}: {where or 'a value'}: holds a lone surrogate (an escape like \\ud800): not text") from None
    elif isinstance(data, dict):
        for k, v in data.items():
            _check_text(k, path, where)
            _check_text(v, path, f"{where}.{k}" if where else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _check_text(v, path, f"{where}[{i}]")


def read_yaml(path: Path, limits: Limits = CONFIG_LIMITS) -> Any:
    """Parse a YAML file with the limits above; every failure is a ConfigError naming the file."""
    return _compose(read_text(path, limits), path, limits)[0]


def read_yaml_lines(path: Path) -> tuple[Any, dict[provenance.Path_, int]]:
    """read_yaml, and the line (1-based) of every key and list item by config path, read in the same pass."""
    data, lines = _compose(read_text(path), path, CONFIG_LIMITS, lines=True)
    return data, lines


def parse_yaml(text: str, source: str, limits: Limits = CONFIG_LIMITS) -> Any:
    """YAML text read elsewhere (a committed render from git, a file a command reads back) with the same
    limits and loader as a config file; `source` names it in every error."""
    return _compose(text, source, limits)[0]


_MAP, _SEQ, _STR = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:str"
_NO_KEY = object()


def _compose(text: str, path: Path | str, limits: Limits, lines: bool = False) -> tuple[Any, dict[provenance.Path_, int]]:
    """The data of a single-document YAML text, as _Loader constructs it, built in one pass over libyaml's events: no
    node tree (libyaml's composer recurses in C, so a file nested 100,000 deep would crash the process; the events are
    read iteratively, and nesting, size and aliases are refused as they come, before anything deep is built). With
    `lines`, the line of every key and list item by config path. Each scalar is resolved and constructed as the loader
    does (its implicit tag, a resolution kept per text: a config repeats its keys thousands of times), and each mapping
    refuses what _Loader.construct_mapping refuses (keys that are not text, duplicates)."""
    loader = _Loader(text)
    constructors = loader.yaml_constructors
    resolved: dict[str, str] = {}
    at: dict[provenance.Path_, int] = {}
    root: Any = None
    # One frame per open mapping or sequence: [container, its config path, the key waiting for its value]
    stack: list[list[Any]] = []
    depth = values = documents = 0
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is yaml.ScalarEvent or kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                values += 1
                if values > limits.max_values:
                    raise ConfigError(f"{path}: more than {limits.max_values} values: not {limits.what}")
                mark = event.start_mark
                frame = stack[-1] if stack else None
                key_wanted = frame is not None and type(frame[0]) is dict and frame[2] is _NO_KEY
                if kind is yaml.ScalarEvent:
                    tag = event.tag
                    if tag is None or tag == "!":
                        if event.implicit[0]:
                            tag = resolved.get(event.value)
                            if tag is None:
                                tag = resolved[event.value] = loader.resolve(yaml.ScalarNode, event.value, (True, False))
                        else:
                            tag = _STR
                    if tag == _STR:
                        value: Any = event.value
                    else:
                        node = yaml.ScalarNode(tag, event.value, mark, event.end_mark, event.style)
                        value = (constructors.get(tag) or constructors[None])(loader, node)
                    if key_wanted:
                        if not isinstance(value, str):
                            raise yaml.constructor.ConstructorError(
                                None, None, f'the key {event.value!r} is not text: quote it ("{event.value}": ...)', mark
                            )
                        if value in frame[0]:  # type: ignore[index]
                            raise yaml.constructor.ConstructorError(
                                None, None, f"duplicate key {value!r} (YAML keeps only the last one)", mark
                            )
                        frame[2] = value  # type: ignore[index]
                        if lines:
                            at[(*frame[1], event.value)] = mark.line + 1  # type: ignore[index]
                        continue
                else:
                    if key_wanted:
                        what = "dict" if kind is yaml.MappingStartEvent else "list"
                        raise yaml.constructor.ConstructorError(None, None, f"the key of type {what} is not text: a key is a name", mark)
                    depth += 1
                    if depth > limits.max_depth:
                        raise ConfigError(f"{path}:{mark.line + 1}: nested more than {limits.max_depth} levels deep")
                    tag = event.tag
                    default = _MAP if kind is yaml.MappingStartEvent else _SEQ
                    if tag is not None and tag != "!" and tag != default:  # !!set, !!omap, or a tag no constructor has
                        made = (yaml.MappingNode if kind is yaml.MappingStartEvent else yaml.SequenceNode)(tag, [], mark, mark)
                        (constructors.get(tag) or constructors[None])(loader, made)
                    value = {} if kind is yaml.MappingStartEvent else []
                # The value in its container (or the document itself), and the line of a list item.
                if frame is None:
                    root = value
                    child: provenance.Path_ = ()
                elif type(frame[0]) is dict:
                    child = (*frame[1], frame[2])
                    frame[0][frame[2]] = value
                    frame[2] = _NO_KEY
                else:
                    child = (*frame[1], len(frame[0]))
                    if lines:
                        at[child] = mark.line + 1
                    frame[0].append(value)
                if kind is not yaml.ScalarEvent:
                    stack.append([value, child, _NO_KEY])
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                depth -= 1
                stack.pop()
            elif kind is yaml.AliasEvent:
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise ConfigError(f"{path}:{line}: YAML aliases (*name) are not supported in {limits.what}")
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise yaml.composer.ComposerError(
                        "expected a single document in the stream", None, "but found another document", event.start_mark
                    )
            elif kind is yaml.StreamEndEvent:
                break
    except yaml.YAMLError as err:
        raise _yaml_error(path, err) from None
    except (ValueError, RecursionError, MemoryError) as err:
        # int() refuses numbers of more than 4300 digits; nothing in a config is that long.
        raise ConfigError(f"{path}: a value cannot be read: {err}") from None
    finally:
        loader.dispose()
    _check_text(root, path)
    return root, at


def parse_json(text: str, source: str, limits: Limits = CONFIG_LIMITS) -> Any:
    """JSON text with the limits of YAML (model.bounded_json: depth, no NaN), text only; `source` names it in errors."""
    if len(text) > limits.max_bytes:
        raise ConfigError(f"{source}: {len(text)} characters is larger than {limits.what} can be ({limits.max_bytes})")
    try:
        data = bounded_json(text, limits.max_depth)
    except TooDeep as err:
        raise ConfigError(f"{source}: {err}") from None
    except ValueError as err:  # JSONDecodeError, NaN, and int() of more than 4300 digits
        raise ConfigError(f"{source}: not valid JSON: {err}") from None
    _check_text(data, source)
    return data


def load_file(path: str | Path) -> ClusterConfig:
    """A config written as YAML (the output of `python -m stacks config STACK`)."""
    p = Path(path)
    data, lines = read_yaml_lines(p)
    return validate(data, str(p), lines)


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Never writes anchors and aliases (the loader refuses them), and writes scripts as blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not value.endswith((" ", "\t")) and "\r" not in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(config: ClusterConfig) -> str:
    """The config as YAML, the form `load_file` reads back to the same config."""
    return yaml.dump(config.model_dump(mode="json"), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
