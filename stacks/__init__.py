"""The stacks: one validated ClusterConfig per cluster, from its module in clusters/ or from the YAML
file its Pulumi stack file names.

A stack is a module `clusters/NAME.py` that defines `CONFIG` (discovered: adding a cluster is one
module plus its `Pulumi.NAME.yaml`). clusters/ holds only the files users edit; this package is the program
that reads them. `load(name)` honours `gpu-training:configFile` in the stack's
Pulumi stack files, so `python -m stacks check NAME` checks what `pulumi up -s NAME` would deploy.
Errors are ConfigError with a message that names the file and the field, never a traceback.
"""

from __future__ import annotations

# First, before the slow imports: under `python -m stacks` Ctrl-C is quiet from here on (stacks/_process.py).
from stacks import _process  # noqa: F401

# isort: split

import importlib.util
import io
import os
import re
import stat
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from pydantic import ValidationError

from stacks import provenance
from stacks.model import DEFERRED, IN_STACK_MODULE, ClusterConfig, ModelError, TooDeep, bounded_json, describe_errors, located

ROOT = Path(__file__).resolve().parent.parent
"""The project folder: Pulumi.yaml, the stack files, clusters/, rendered/."""
CLUSTERS = "clusters"
"""The folder of ROOT that holds the cluster modules, the files a user edits."""
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


def names() -> list[str]:
    """The stacks: every module clusters/NAME.py (NAME not starting with '_', which a shared helper may use)."""
    return sorted(p.stem for p in (ROOT / CLUSTERS).glob("*.py") if not p.stem.startswith("_"))


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


def pulumi_stacks(root: Path | None = None) -> list[PulumiStack]:
    """Every Pulumi stack file of the project, parsed (the workflow's preview matrix reads this)."""
    out = []
    for path in sorted((root or ROOT).glob("Pulumi.*.yaml")):
        name = path.name[len("Pulumi.") : -len(".yaml")]
        data = read_yaml(path)
        config = data.get("config") if isinstance(data, dict) else None
        config = config if isinstance(config, dict) else {}

        def text(key: str, config: dict[str, Any] = config) -> str | None:
            value = config.get(key)
            return value if isinstance(value, str) and value else None

        tier = text(TIER_KEY) or "all"
        if tier not in TIERS:
            raise ConfigError(f"{path.name}: {TIER_KEY} is {tier!r}; expected one of {', '.join(TIERS)}")
        disabled = config.get("pulumi:disable-default-providers")
        out.append(
            PulumiStack(
                name=name,
                cluster=text(CLUSTER_KEY) or name,
                tier=tier,
                config_file=text(CONFIG_FILE_KEY),
                context=text("kubernetes:context"),
                disabled_default_providers=[str(d) for d in disabled] if isinstance(disabled, list) else [],
                path=path,
            )
        )
    return out


def config_file_of(cluster: str, root: Path | None = None) -> tuple[str | None, str]:
    """(the YAML config the cluster's Pulumi stacks deploy instead of its module, or None; the stack file
    that says so). All stack files of one cluster must agree: two tiers deploying two configs would drift."""
    found = [s for s in pulumi_stacks(root or ROOT) if s.cluster == cluster]
    files = {s.config_file for s in found}
    if len(files) > 1:
        shown = ", ".join(f"{s.path.name}: {s.config_file or '(the module)'}" for s in found)
        raise ConfigError(f"the Pulumi stack files of {cluster!r} name different configs ({shown}): make them name one")
    return (found[0].config_file, found[0].path.name) if found else (None, "")


# --- loading ------------------------------------------------------------------------------------


def load(name: str) -> ClusterConfig:
    """The config `pulumi up` deploys for stack NAME: the YAML file its stack files name in
    gpu-training:configFile, else its module in clusters/."""
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
    file = Path(config_file) if Path(config_file).is_absolute() else ROOT / config_file
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


def _line_in(tb: TracebackType | None, path: Path) -> int | None:
    """The last line of `path` on a traceback: where in the stack module the bad model was built."""
    line = None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path.resolve():
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def load_module(name: str) -> ClusterConfig:
    """A stack's module; any error in it is a message with the file and line, never a traceback. A module runs
    once per process (kept in sys.modules as `clusters.NAME`, as an import would), by its path: clusters/ is a
    folder of files, not a package on sys.path."""
    path = ROOT / CLUSTERS / f"{name}.py"
    qualified = f"{CLUSTERS}.{name}"
    module = sys.modules.get(qualified)
    if module is None or Path(getattr(module, "__file__", "")) != path:
        module = _stack_module(qualified, path, module_file(name))
    return _config_of(module, module_file(name))


def _stack_module(qualified: str, path: Path, source: str) -> Any:
    """Run a stack module as `qualified`, every error in it a ConfigError naming `source` and the line."""
    token = IN_STACK_MODULE.set(True)
    deferred: list[ModelError] = []
    reported = DEFERRED.set(deferred)
    try:
        module = _run_module(qualified, path)
        if deferred:  # models that failed, and no ClusterConfig(...) that raised them
            raise ModelError.of(deferred)
        return module
    except ModelError as err:  # each of its lines names the file and line that write the field
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in err.lines)) from None
    except SyntaxError as err:
        raise ConfigError(f"{source}:{err.lineno}: not valid Python: {err.msg}") from None
    except Exception as err:  # noqa: BLE001 (a user's module: any mistake in it is reported, not raised)
        line = _line_in(err.__traceback__, path)
        where = f"{source}:{line}" if line else source
        raise ConfigError(f"{where}: the stack module failed: {type(err).__name__}: {err}") from None
    finally:
        DEFERRED.reset(reported)
        IN_STACK_MODULE.reset(token)


def _config_of(module: Any, source: str) -> ClusterConfig:
    config = getattr(module, "CONFIG", None)
    if not isinstance(config, ClusterConfig):
        raise ConfigError(f"{source}: defines no CONFIG = ClusterConfig(...) (every stack module does)")
    return config


def _committed_clusters(ref: str, *command: str) -> bytes:
    """`git COMMAND REF:./clusters` in the project: clusters/ as committed at `ref`."""
    try:
        done = subprocess.run(["git", *command, f"{ref}:./{CLUSTERS}"], cwd=ROOT, capture_output=True, check=True, timeout=60)
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
        with tarfile.open(fileobj=io.BytesIO(_committed_clusters(ref, "archive", "--format=tar"))) as tar:
            tar.extractall(tmp, filter="data")
        qualified = f"{CLUSTERS}.{name}@{ref}"  # never the working tree's module: both stay loaded
        try:
            return _config_of(_stack_module(qualified, Path(tmp) / f"{name}.py", f"{module_file(name)} at {ref}"), module_file(name))
        finally:
            sys.modules.pop(qualified, None)


def _run_module(qualified: str, path: Path) -> Any:
    """Run the module at `path` as `qualified`; registered only once it ran whole, so a failed one runs again."""
    spec = importlib.util.spec_from_file_location(qualified, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[qualified] = module
    return module


def _yaml11_numbers(data: Any, loc: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], Yaml11Number]]:
    """Where the loader kept a YAML 1.1 number reading (Yaml11Number), and which."""
    if isinstance(data, Yaml11Number):
        return [(loc, data)]
    if isinstance(data, dict):
        return [hit for k, v in data.items() for hit in _yaml11_numbers(v, (*loc, str(k)))]
    if isinstance(data, list):
        return [hit for i, v in enumerate(data) for hit in _yaml11_numbers(v, (*loc, i))]
    return []


def validate(data: Any, source: str, lines: dict[provenance.Path_, int] | None = None) -> ClusterConfig:
    """Validate plain data (parsed YAML) as a ClusterConfig; `source` names it in errors, and `lines` (the line of each
    key, provenance.yaml_lines) start each error with its line and stay with the config for the preflight's findings."""

    def line_of(loc: provenance.Path_) -> str:  # `FILE:N`, the form editors link
        where = provenance.yaml_line(source, lines or {}, loc)
        return f"{source}:{where[1]}" if where else ""

    if data is None:
        raise ConfigError(f"{source}: the file is empty: write the config (`python -m stacks config STACK` prints one)")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of fields, got {type(data).__name__}")
    surprises = [
        f"{located(loc, data) or 'the file'} ({line_of(loc)}): {value.problem()}".replace(" ()", "")
        for loc, value in _yaml11_numbers(data, ())
    ]
    if surprises:
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in surprises))
    try:
        config = ClusterConfig.model_validate(data)
    except ValidationError as err:
        found = describe_errors(err, data, line_of=line_of if lines else None)
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in found)) from None
    except ModelError as err:  # a model built inside a validator
        raise ConfigError(f"{source}: invalid configuration\n" + "\n".join(f"  {e}" for e in err.lines)) from None
    if lines:
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
    """SafeLoader that refuses duplicate keys (YAML lets the last one win silently, so a stray second
    `workloads: []` would empty a stack) and keys that are not text (`1:`, `null:`, `? [a]`: no field or name
    is one, and YAML 1.1 reads `on:` or `no:` as booleans)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                shown = repr(key_node.value) if isinstance(key_node, yaml.ScalarNode) else f"of type {type(key).__name__}"
                fix = f'quote it ("{key_node.value}": ...)' if isinstance(key_node, yaml.ScalarNode) else "a key is a name"
                raise yaml.constructor.ConstructorError(None, None, f"the key {shown} is not text: {fix}", key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (YAML keeps only the last one)", key_node.start_mark
                )
            seen[key] = True
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]

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


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
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


def _bounded(path: Path | str, text: str, limits: Limits = CONFIG_LIMITS) -> None:
    """Refuse nesting, size and aliases before anything is built from the text: the event stream is
    read iteratively, so a file nested 100,000 deep cannot exhaust the stack (libyaml's composer would
    crash the process on it)."""
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            line = event.start_mark.line + 1 if event.start_mark is not None else "?"
            if isinstance(event, yaml.AliasEvent):
                raise ConfigError(f"{path}:{line}: YAML aliases (*name) are not supported in {limits.what}")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > limits.max_depth:
                    raise ConfigError(f"{path}:{line}: nested more than {limits.max_depth} levels deep")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                nodes += 1
                if nodes > limits.max_values:
                    raise ConfigError(f"{path}: more than {limits.max_values} values: not {limits.what}")
    except yaml.YAMLError as err:
        raise _yaml_error(path, err) from None


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
    """read_yaml, and the line of every key and list item (provenance.yaml_lines)."""
    data, node = _compose(read_text(path), path, CONFIG_LIMITS)
    return data, provenance.yaml_lines(node)


def parse_yaml(text: str, source: str, limits: Limits = CONFIG_LIMITS) -> Any:
    """YAML text read elsewhere (a committed render from git, a file a command reads back) with the same
    limits and loader as a config file; `source` names it in every error."""
    return _compose(text, source, limits)[0]


def _compose(text: str, path: Path | str, limits: Limits) -> tuple[Any, yaml.Node | None]:
    _bounded(path, text, limits)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as err:
        raise _yaml_error(path, err) from None
    except (ValueError, RecursionError, MemoryError) as err:
        # int() refuses numbers of more than 4300 digits; nothing in a config is that long.
        raise ConfigError(f"{path}: a value cannot be read: {err}") from None
    finally:
        loader.dispose()
    _check_text(data, path)
    return data, node


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
