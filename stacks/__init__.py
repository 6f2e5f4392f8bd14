"""The stacks: one validated ClusterConfig per cluster, from its module clusters/NAME.py (the repository's reviewed code,
imported in process) or the YAML file its stack file names, so `check NAME` checks what `pulumi up -s NAME` deploys."""

import os
import signal
import sys

if sys.argv[:1] == ["-m"]:  # `python -m stacks` importing the program: Ctrl-C and SIGTERM end it quietly from here on
    for _sig in (signal.SIGINT, signal.SIGTERM):  # (cli/process.py takes over once the command starts)
        if signal.getsignal(_sig) is not signal.SIG_IGN:
            signal.signal(_sig, lambda n, _: (os.write(2, b"interrupted\n" if n == signal.SIGINT else b"terminated\n"), os._exit(128 + n)))

# isort: split

import contextlib
import ctypes
import difflib
import functools
import importlib.util
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from config import hints, project, provenance
from config.errors import ModelError, describe_errors, located
from config.files import (
    CONFIG_LIMITS,
    LIVE_LIMITS,
    RENDERED_LIMITS,
    ConfigError,
    Limits,
    decode_text,
    dump_yaml,
    parse_json,
    parse_yaml,
    read_text,
    read_yaml,
    read_yaml_lines,
)
from config.stack import ClusterConfig
from config.text import escaped

__all__ = ["CONFIG_LIMITS", "LIVE_LIMITS", "RENDERED_LIMITS", "ConfigError", "Limits", "decode_text", "parse_json", "parse_yaml"]
__all__ += ["read_text", "read_yaml", "read_yaml_lines"]  # re-exported from config.files; this module's own names are public

CLUSTERS = "clusters"  # the folder of project.ROOT that holds the cluster modules, the files a user edits
PROJECT = "gpu-training"
CONFIG_FILE_KEY = f"{PROJECT}:configFile"
CLUSTER_KEY = f"{PROJECT}:cluster"
TIER_KEY = f"{PROJECT}:tier"
TIERS = ("all", "platform", "project")
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")  # what Pulumi reads there
# The settings of this project's and the provider's namespaces that are read (policy/gate.py): the default provider is
# off, so any other `kubernetes:` setting, or a misspelt one, would be ignored without a word.
READ_SETTINGS = (
    CONFIG_FILE_KEY,
    CLUSTER_KEY,
    TIER_KEY,
    "kubernetes:context",
    "kubernetes:upsertExistingObjects",
    "kubernetes:enablePatchForce",
)

# Pulumi's grammar of a stack name (sdk/go/common/tokens/stack_name.go): held to it where it is read.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
CLUSTER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # its config's `name`, a DNS label


def stack_name_problem(name: str) -> str:
    """Why Pulumi would refuse `name` as a stack name, or ""."""
    if not name:
        return "the stack name is empty"
    if len(name) > 100:
        return f"the stack name {escaped(name[:40])}... has {len(name)} characters: Pulumi takes at most 100"
    if STACK_NAME.fullmatch(name) and name not in (".", ".."):
        return ""
    odd = next((c for c in name if not STACK_NAME.fullmatch(c)), ".")
    said = f"the stack name {escaped(repr(name))} holds {escaped(repr(odd))}"
    return f"{said}: a stack name is letters, digits, '-', '_' and '.' (Pulumi's rule), and not '.' or '..'"


def check_stack_name(name: str, what: str = "PULUMI_STACK") -> None:  # a stack name given on the command line
    if problem := stack_name_problem(name):
        raise ConfigError(f"{what}: {problem}")


def names() -> list[str]:
    """The stacks: every module clusters/NAME.py (NAME not starting with '_', which a shared helper may use)."""
    found = sorted(p.stem for p in (project.ROOT / CLUSTERS).glob("*.py") if not p.stem.startswith("_"))
    for name in found:
        if problem := stack_name_problem(name):
            raise ConfigError(f"{CLUSTERS}/{escaped(name)}.py: {problem}: name the module clusters/CLUSTER.py, CLUSTER its config's name")
    return found


def module_file(name: str) -> str:  # a stack's module as messages name it
    return f"{CLUSTERS}/{name}.py"


@dataclass(frozen=True)
class PulumiStack:  # one `Pulumi.NAME.yaml`: a Pulumi stack that deploys (a tier of) one cluster's config
    name: str
    cluster: str
    tier: str
    config_file: str | None
    context: str | None
    disabled_default_providers: list[str]
    path: Path


def _name_problem(kind: str, name: str, known: list[str]) -> str:
    """Why a stack or cluster name in a stack file is refused (empty, not ASCII, a module's but for case), or ""."""
    if not name:
        return f"the {kind} name is empty"
    alike = next((k for k in known if k != name and k.casefold() == name.casefold()), None)
    hint = f"; it looks like {alike!r} (clusters/{alike}.py): write {alike}" if alike else ""
    if odd := next((c for c in name if not c.isascii()), None):
        return f"the {kind} name {name!r} is not ASCII ({odd!r} is U+{ord(odd):04X}): a {kind} name is ASCII letters, digits, -, _ and ."
    if alike:
        return f"the {kind} name {name!r} differs from the cluster {alike!r} only by case{hint}"
    if kind == "cluster" and not CLUSTER_NAME.fullmatch(name):
        return f"the cluster name {escaped(repr(name))} is not a cluster's name: lowercase letters, digits and '-' (a DNS label)"
    return stack_name_problem(name)


def pulumi_stacks() -> list[PulumiStack]:
    """Every Pulumi stack file of the project, parsed; a name or setting that would deploy another thing is an error."""
    out: list[PulumiStack] = []
    modules = names()
    for path in sorted(project.ROOT.glob("Pulumi.*.yaml")):
        name = path.name[len("Pulumi.") : -len(".yaml")]
        if problem := _name_problem("stack", name, modules):
            raise ConfigError(f"{escaped(path.name)}: {problem}: name the file Pulumi.STACK.yaml, STACK being the cluster or CLUSTER-TIER")
        if twin := next((s.name for s in out if s.name.casefold() == name.casefold()), None):
            raise ConfigError(
                f"{path.name}: the stack name {name!r} differs from {twin!r} (Pulumi.{twin}.yaml) only by case: "
                "give each stack a name of its own"
            )
        if not isinstance(data := _stack_file(path, read_text(path)), dict):
            raise ConfigError(f"{path.name}: a stack file is a mapping with `config:` (kubernetes:context, {TIER_KEY}, ...)")
        if unknown := [k for k in data if k not in STACK_FILE_KEYS]:
            raise ConfigError(f"{path.name}: {unknown[0]!r} is not a key of a stack file (Pulumi reads {', '.join(STACK_FILE_KEYS)})")
        if not isinstance(config := data.get("config"), dict):
            got = "missing" if config is None else type(config).__name__
            raise ConfigError(f"{path.name}: `config:` must be a mapping of settings (kubernetes:context, {TIER_KEY}, ...), not {got}")
        if unread := [k for k in config if _unread(str(k))]:
            meant = difflib.get_close_matches(str(unread[0]), READ_SETTINGS, n=1, cutoff=0.85)
            raise ConfigError(
                f"{path.name}: {unread[0]!r} is a setting nothing reads: "
                + (f"did you mean {meant[0]}?" if meant else f"the program (its provider too) reads {', '.join(READ_SETTINGS)} only")
            )
        if (tier := config.get(TIER_KEY, "all")) not in TIERS:
            raise ConfigError(f"{path.name}: {TIER_KEY} is {tier!r}; expected one of {', '.join(TIERS)} (or no {TIER_KEY}: all)")
        cluster = config.get(CLUSTER_KEY, name)
        problem = _name_problem("cluster", cluster, modules) if isinstance(cluster, str) else f"{CLUSTER_KEY} is not a name: {cluster!r}"
        if problem:
            said = CLUSTER_KEY if CLUSTER_KEY in config else f"the stack name (no {CLUSTER_KEY}: the cluster it names)"
            raise ConfigError(f"{path.name}: {problem.replace('the cluster name', said)}")
        off = config.get("pulumi:disable-default-providers")
        strings = {k: v for k, v in config.items() if isinstance(v, str) and v}
        file, context = strings.get(CONFIG_FILE_KEY), strings.get("kubernetes:context")
        out.append(PulumiStack(name, cluster, str(tier), file, context, [str(d) for d in off] if isinstance(off, list) else [], path))
    return out


def _unread(key: str) -> bool:  # a setting of this project's or the provider's namespace (or a typo of one) never read
    return key not in READ_SETTINGS and bool(difflib.get_close_matches(key.partition(":")[0], (PROJECT, "kubernetes"), cutoff=0.75))


@functools.cache
def _stack_file(path: Path, text: str) -> Any:  # parsed once per text (every load reads the stack files)
    return read_yaml_lines(path, text)[0]


def config_file_of(cluster: str) -> tuple[str | None, str]:
    """(the YAML config the cluster's stacks deploy instead of its module, or None; the stack file that says so)."""
    found = [s for s in pulumi_stacks() if s.cluster == cluster]
    if len({s.config_file for s in found}) > 1:
        shown = ", ".join(f"{s.path.name}: {s.config_file or '(the module)'}" for s in found)
        raise ConfigError(f"the Pulumi stack files of {cluster!r} name different configs ({shown}): make them name one")
    return (found[0].config_file, found[0].path.name) if found else (None, "")


def load(name: str) -> ClusterConfig:
    """The config `pulumi up` deploys for stack NAME: the YAML file its stack files name, else its module."""
    check_stack_name(name, "STACK")
    if name not in (known := names()):
        raise ConfigError(f"unknown stack {name!r}: the stacks are {', '.join(known) or 'none'} (python -m stacks list)")
    return load_deployed(name, *config_file_of(name))


def load_deployed(cluster: str, config_file: str | None, stack_file: str) -> ClusterConfig:
    """What a Pulumi stack deploys: the YAML `config_file` its `stack_file` names, else clusters/CLUSTER.py."""
    if not config_file:
        if cluster not in names():
            raise ConfigError(
                f"unknown stack {cluster!r}: no {module_file(cluster)} (the stacks are {', '.join(names())}); set "
                f"{CLUSTER_KEY} in {stack_file or 'its Pulumi stack file'} to the cluster this stack deploys"
            )
        config, source = load_module(cluster), module_file(cluster)
    else:
        file = project.ROOT / config_file  # an absolute config_file stays itself
        if not file.exists():
            raise ConfigError(
                f"{stack_file}: {CONFIG_FILE_KEY} names {config_file}, which does not exist ({file}): fix the path "
                f"(relative to the project folder), or remove the key to deploy {module_file(cluster)}"
            )
        config, source = load_file(file), config_file
    if config.name != cluster:  # deploying it would send one cluster's objects to another
        raise ConfigError(
            f"{source}: name: the config is for stack {config.name!r}, but it is deployed as stack {cluster!r}; "
            f"set name: {cluster} if this file is meant for {cluster}, or name it in Pulumi.{config.name}.yaml instead"
        )
    return config


def others(name: str) -> list[ClusterConfig]:
    """The other stacks, for the preflight to compare with; one that does not load is left out (its check says why)."""
    out = []
    for other in (n for n in names() if n != name):
        with contextlib.suppress(ConfigError):
            out.append(load(other))
    return out


def load_file(path: str | Path) -> ClusterConfig:
    """A config written as YAML (the output of `python -m stacks config STACK`, `dump`)."""
    data, lines, surprises = read_yaml_lines(path)
    return validate(data, str(path), lines, surprises)


def dump(config: ClusterConfig) -> str:
    return dump_yaml(config.model_dump(mode="json"))


def validate(
    data: Any, source: str, lines: dict[provenance.Path_, int] | None = None, surprises: Sequence[tuple[provenance.Path_, str]] = ()
) -> ClusterConfig:
    """Parsed YAML as a ClusterConfig; `source` and `lines` (read_yaml_lines) name each error's line, and the findings'."""

    def line_of(loc: provenance.Path_) -> str:
        where = provenance.yaml_line(source, lines or {}, loc)
        return f"{source}:{where[1]}" if where else ""

    if data is None:
        raise ConfigError(f"{source}: the file is empty: write the config (`python -m stacks config STACK` prints one)")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of fields, got {type(data).__name__}")
    if surprises:
        found = [f"{located(loc, data) or 'the file'} ({line_of(loc)}): {problem}".replace(" ()", "") for loc, problem in surprises]
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in found))
    try:
        config = ClusterConfig.model_validate(data)
    except ValidationError as err:
        found = describe_errors(err, data, ClusterConfig, line_of=line_of if lines else None)
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in found)) from None
    if lines:
        provenance.register_yaml(config, source, lines)
    return config


TIME_LIMIT_KEY = "GPU_TRAINING_MODULE_TIME_LIMIT"
_LOADED: dict[Path, tuple[str, ClusterConfig]] = {}  # the modules imported, by path, with the text they were imported from


def load_module(name: str, folder: Path | None = None) -> ClusterConfig:
    """A stack's module (in `folder`, by default clusters/), imported once per process and again once its text changes."""
    path = (folder or project.ROOT / CLUSTERS) / f"{name}.py"
    source = module_file(name)
    if not path.exists():
        raise ConfigError(f"{source}: no such module (the stacks are {', '.join(names()) or 'none'})")
    text = read_text(path, source=source)  # bounded, UTF-8: bytes that are not text are one message
    if (cached := _LOADED.get(path)) is not None and cached[0] == text:
        return cached[1]
    config = getattr(_import(name, path, source), "CONFIG", None)
    if not isinstance(config, ClusterConfig):
        raise ConfigError(f"{source}: defines no CONFIG = ClusterConfig(...) (every stack module does)")
    # Once more from its data: a model built around validation (model_construct, a list changed later) is checked too.
    try:
        again = ClusterConfig.model_validate(config.model_dump(warnings=False))
    except ValidationError as err:
        found = describe_errors(err, config, ClusterConfig, line_of=lambda loc: provenance.shown(provenance.origin(config, loc)))
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in found)) from None
    provenance.register(again, config)
    _LOADED[path] = (text, again)
    return again


class ModuleTimeout(BaseException):  # raised in a module past its time limit; its `except Exception` cannot hold it
    pass


def _import(name: str, path: Path, source: str) -> Any:
    """Import the module at `path` as `clusters.NAME`, with its folder's helpers (`from clusters import _common`)."""
    folder = str(path.parent.parent)
    for loaded in [m for m in sys.modules if m == CLUSTERS or m.startswith(f"{CLUSTERS}.")]:
        del sys.modules[loaded]  # another project's (a copy's, a commit's) helpers are not this one's
    if (spec := importlib.util.spec_from_file_location(f"{CLUSTERS}.{name}", path)) is None or spec.loader is None:
        raise ConfigError(f"{source}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would: a dataclass in the module looks its module up
    sys.path.insert(0, folder)
    try:
        with contextlib.redirect_stdout(sys.stderr), _time_limit():
            # From the file as it is now, not a cached .pyc (trusted by mtime and size, which an edit within one tick keeps).
            exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), module.__dict__)
    except ModelError as err:
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in err.lines)) from None
    except ConfigError:  # a config the module read (load_file) names its own file
        sys.modules.pop(spec.name, None)
        raise
    except ModuleTimeout as err:
        raise ConfigError(
            f"{source}: the module did not finish within its time limit ({TIME_LIMIT_KEY}; at "
            f"{hints.failing_line(err.__traceback__, path) or source}): an endless loop, or a wait for something; a stack "
            "module only defines CONFIG"
        ) from None
    except BaseException as err:  # noqa: BLE001 (the module's mistake, whatever it is, is one message)
        sys.modules.pop(spec.name, None)
        raise ConfigError(hints.mistake(err, path, source, module.__dict__)) from None
    finally:
        sys.path.remove(folder)
    return module


@contextlib.contextmanager
def _time_limit() -> Iterator[None]:
    """Stop a module that loops or waits with ModuleTimeout: by SIGALRM in the main thread, else (an inline Pulumi
    program runs in a gRPC thread) by an exception set on the thread, which interrupts a loop but not a sleep."""
    text = os.environ.get(TIME_LIMIT_KEY) or "20"
    try:
        limit = float(text)
        assert limit > 0 and limit < 1e6
    except (ValueError, AssertionError):
        raise ConfigError(f"{TIME_LIMIT_KEY} is {text!r}: give a number of seconds above 0 (the default is 20)") from None

    def stop(*_: Any) -> None:
        raise ModuleTimeout(f"did not finish within {limit:g} s")

    with contextlib.ExitStack() as undo:  # run last to first: the timer stops before the handler is put back
        if threading.current_thread() is threading.main_thread():
            undo.callback(signal.signal, signal.SIGALRM, signal.signal(signal.SIGALRM, stop))
            signal.setitimer(signal.ITIMER_REAL, limit)
            undo.callback(signal.setitimer, signal.ITIMER_REAL, 0)
        else:
            me = ctypes.c_ulong(threading.get_ident())
            timer = threading.Timer(limit, lambda: ctypes.pythonapi.PyThreadState_SetAsyncExc(me, ctypes.py_object(ModuleTimeout)))
            timer.start()
            undo.callback(timer.cancel)
        yield


def committed_names(ref: str) -> list[str]:  # a ConfigError outside git or for an unknown ref
    files = _git("ls-tree", "--name-only", f"{ref}:./{CLUSTERS}").split("\n")
    return sorted(f[: -len(".py")] for f in files if f.endswith(".py") and not f.startswith("_"))


def load_committed(name: str, ref: str) -> ClusterConfig | None:
    """The stack's module as committed at `ref` (clusters/ checked out by git into a temporary folder), or None."""
    if name not in committed_names(ref):
        return None
    with tempfile.TemporaryDirectory(prefix="stacks-committed-") as tmp:
        _git(f"--work-tree={tmp}", "checkout", ref, "--", CLUSTERS, env={**os.environ, "GIT_INDEX_FILE": os.path.join(tmp, "index")})
        try:
            return load_module(name, Path(tmp) / CLUSTERS)
        except ConfigError as err:  # named as the committed file, not the temporary one
            raise ConfigError(str(err).replace(f"{Path(tmp).resolve()}/", "").replace(f"{tmp}/", "")) from None
        finally:
            _LOADED.pop(Path(tmp) / CLUSTERS / f"{name}.py", None)
            for loaded in [m for m in sys.modules if m.startswith(f"{CLUSTERS}.")]:
                del sys.modules[loaded]


def _git(*args: str, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=project.ROOT, capture_output=True, check=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError) as err:
        raise ConfigError(f"cannot read {CLUSTERS}/ at the commit: {err}") from None
    return done.stdout.decode("utf-8", "replace")
