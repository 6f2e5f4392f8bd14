"""The YAML reader (stacks._compose): one pass over libyaml's events gives the data PyYAML's own loader constructs from a
node tree, the line of every key and list item, and every refusal the loader made (duplicate keys, keys that are not
text, aliases, sets, several documents, the limits), without building the node tree."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import stacks
from stacks import Yaml11Number


def reference(text: str) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """What PyYAML's SafeLoader makes of `text` and the lines of its node tree: the reader must agree."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    data = yaml.SafeLoader(text).construct_document(node) if node is not None else None
    lines: dict[tuple[str | int, ...], int] = {}
    todo: list[tuple[Any, tuple[str | int, ...]]] = [(node, ())] if node is not None else []
    while todo:
        current, path = todo.pop()
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                lines[(*path, key.value)] = key.start_mark.line + 1
                todo.append((value, (*path, key.value)))
        elif isinstance(current, yaml.SequenceNode):
            for i, item in enumerate(current.value):
                lines[(*path, i)] = item.start_mark.line + 1
                todo.append((item, (*path, i)))
    return data, lines


def read(text: str, tmp_path: Path) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return stacks.read_yaml_lines(path)


DOCUMENTS = [
    "",
    "a: 1\n",
    "name: x\nlist:\n  - a\n  - {b: 2, c: [1, 2.5, true, null, ~]}\n  -\n    - nested\n",
    "quoted: '017'\nplain: 1_000\nfloat: 1e3\nneg: -2\nhex: 0x1F\nbool: yes\nempty:\n",
    "text: |\n  two\n  lines\nfolded: >\n  one\n  line\n",
    "deep: {a: {b: {c: {d: [[[1]]]}}}}\n",
    "- one\n- two: 2\n  three: 3\n- [x, y]\n",
    "anchored: &keep {a: 1}\nother: 2\n",
    "tagged: !!str 123\nnum: !!int '7'\nflt: !!float '1.5'\n",
    "key with spaces: value\n'quoted key': 1\n\"double\": 2\n",
    "unicode: café ü 名前\n",
    "%YAML 1.1\n---\na: 1\n...\n",
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_reader_agrees_with_pyyaml_on_data_and_lines(text: str, tmp_path: Path) -> None:
    assert read(text, tmp_path) == reference(text)


# Plain scalars of every kind the resolver tells apart, and keys: a generated document is a mapping of lists and mappings.
SCALARS = st.one_of(
    st.text(alphabet=string.ascii_letters + string.digits + " -_.:/", min_size=1, max_size=12),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.none(),
    st.sampled_from(["yes", "no", "on", "off", "~", "null", "1e3", ".5", "0x10", "2001-12-14"]),
)
KEYS = st.text(alphabet=string.ascii_lowercase + "-_", min_size=1, max_size=8)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=20)


@settings(max_examples=60, deadline=None)
@given(data=st.dictionaries(KEYS, VALUES, min_size=1, max_size=5), flow=st.booleans())
def test_generated_documents_read_as_pyyaml_reads_them(data: dict[str, Any], flow: bool) -> None:
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
    assert stacks._compose(text, "generated", stacks.CONFIG_LIMITS, lines=True) == reference(text)


def test_a_yaml_1_1_number_is_kept_as_its_text_for_validate_to_refuse(tmp_path: Path) -> None:
    data, _ = read("mode: 0644\ntime: 1:30\nport: 8080\n", tmp_path)
    assert data == {"mode": "0644", "time": "1:30", "port": 8080}
    assert type(data["mode"]) is Yaml11Number and type(data["time"]) is Yaml11Number


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: 1\na: 2\n", "c.yaml:2:1: not valid YAML: duplicate key 'a' (YAML keeps only the last one)"),
        ("1: x\n", """c.yaml:1:1: not valid YAML: the key '1' is not text: quote it ("1": ...)"""),
        ("null: x\n", "the key 'null' is not text"),
        ("on: x\n", "the key 'on' is not text"),
        ("? [a]\n: x\n", "the key of type list is not text: a key is a name"),
        ("? {a: 1}\n: x\n", "the key of type dict is not text: a key is a name"),
        ("a: &x 1\nb: *x\n", "c.yaml:2: YAML aliases (*name) are not supported in a config"),
        ("a: 1\n---\nb: 2\n", "c.yaml:2:1: not valid YAML: but found another document"),
        ("s: !!set {a, b}\n", "!!set is not supported"),
        ("o: !!omap [a: 1]\n", "!!omap is not supported"),
        ("b: !!binary aGk=\n", "!!binary is not supported"),
        ("x: !!python/tuple [1]\n", "could not determine a constructor for the tag"),
        ("x: !custom 1\n", "could not determine a constructor for the tag '!custom'"),
        ("<<: {a: 1}\n", "could not determine a constructor for the tag 'tag:yaml.org,2002:merge'"),
        ("x: .nan\n", "is not a JSON number"),
        ("x: [1, 2\n", "not valid YAML"),
        ('x: "\\ud800"\n', "not valid YAML: found invalid Unicode character escape code"),
    ],
)
def test_what_the_loader_refused_is_refused_naming_the_file_and_line(text: str, said: str, tmp_path: Path) -> None:
    with pytest.raises(stacks.ConfigError) as err:
        read(text, tmp_path)
    assert said in str(err.value), str(err.value)
    assert str(err.value).startswith(str(tmp_path / "c.yaml"))


def test_nesting_past_the_limit_is_refused_before_anything_deep_is_built(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(stacks.ConfigError, match=f"nested more than {stacks.CONFIG_LIMITS.max_depth} levels deep"):
        read(deep, tmp_path)


def test_too_many_values_are_refused_as_they_come(tmp_path: Path) -> None:
    limits = stacks.Limits("a test file", max_values=10)
    with pytest.raises(stacks.ConfigError, match="more than 10 values: not a test file"):
        stacks.parse_yaml("[" + ", ".join(["1"] * 11) + "]", "t.yaml", limits)
    assert stacks.parse_yaml("[" + ", ".join(["1"] * 9) + "]", "t.yaml", limits) == [1] * 9


def test_an_anchor_without_an_alias_is_read(tmp_path: Path) -> None:
    assert read("a: &x {b: 1}\n", tmp_path)[0] == {"a": {"b": 1}}


def test_a_plain_scalar_resolves_to_the_same_kind_wherever_it_repeats(tmp_path: Path) -> None:
    """Resolutions are kept per text: a repeated key or value reads alike at every place, its lines its own."""
    data, lines = read("- {name: a, n: 1}\n- {name: b, n: 1}\n- {name: '1', n: '1'}\n", tmp_path)
    assert data == [{"name": "a", "n": 1}, {"name": "b", "n": 1}, {"name": "1", "n": "1"}]
    assert lines[(1, "name")] == 2 and lines[(2, "n")] == 3
