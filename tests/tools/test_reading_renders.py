"""Renders read back (tools/diff.py, tools/writer.py): the committed render `diff` and `check --against` compare with, and
the render a `render` replaces, are read as data: bounded in size (JSON in depth too), UTF-8 only, each file one object
with kind and metadata.name; anything else is one message naming the file, never a comparison of a list with an
object. (A committed render is the repository's own: a hostile one is code review's to catch.)"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import stacks
from cli.main import main
from tests import fixtures
from tests.helpers import run_cli, yaml_text
from tools import diff
from tools.render import run as render_run
from tools.writer import MAX_READ, WriteError, write

DEEP_JSON = "[" * 100_000 + "]" * 100_000


SEVENTY_DEEP_JSON = '{"a":' * 70 + "1" + "}" * 70  # under Python's recursion limit, over the readers' depth


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True, capture_output=True)


# --- the committed render ------------------------------------------------------------------------------

# (file under rendered/tcp/, its bytes, a phrase of the message)
COMMITTED: dict[str, tuple[str, bytes, str]] = {
    "not UTF-8": ("proj/configmap-x.yaml", b"kind: \xff\xfe\n", "not a UTF-8 text file (byte 6)"),
    "JSON nested 100,000 deep": ("outputs.json", DEEP_JSON.encode(), "nested more than 40 levels deep"),
    "JSON nested 70 deep": ("outputs.json", SEVENTY_DEEP_JSON.encode(), "nested more than 40 levels deep"),
    "NaN in the outputs": ("outputs.json", b'{"bandwidth": NaN}', "NaN is not a JSON number"),
    "larger than a rendered file": ("proj/configmap-x.yaml", b"a: '" + b"x" * stacks.RENDERED_LIMITS.max_bytes + b"'\n", "larger than"),
}


@pytest.fixture
def committed_project(fixture_project: Callable[..., Path]) -> Callable[[str, bytes], Path]:
    """The tcp fixture project as a git repository whose HEAD commits a render of tcp with one hostile file."""

    def make(rel: str, data: bytes) -> Path:
        root = fixture_project("tcp")
        folder = root / "rendered" / "tcp"
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
        (folder / "proj").mkdir(parents=True, exist_ok=True)
        (folder / "proj" / "serviceaccount-ok.yaml").write_text("kind: ServiceAccount\nmetadata: {name: ok}\n", encoding="utf-8")
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "a render")
        return root

    return make


class TestTheCommittedRenderIsReadBounded:
    @pytest.mark.parametrize("case", COMMITTED)
    def test_diff_names_the_committed_file(
        self, case: str, committed_project: Callable[[str, bytes], Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        rel, data, phrase = COMMITTED[case]
        committed_project(rel, data)
        code, out, err = run_cli(["diff", "tcp"], capsys)
        assert code == 2 and out == "", err
        assert err.startswith(f"error: HEAD:rendered/tcp/{rel}") and phrase in err, err

    @pytest.mark.parametrize("case", ["JSON nested 100,000 deep", "not UTF-8"])
    def test_check_against_names_the_committed_file(
        self, case: str, committed_project: Callable[[str, bytes], Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        rel, data, phrase = COMMITTED[case]
        committed_project(rel, data)
        code, _, err = run_cli(["check", "tcp", "--against", "HEAD"], capsys)
        assert code == 2 and err.startswith(f"error: HEAD:rendered/tcp/{rel}") and phrase in err, err

    def test_a_sound_committed_render_reads_as_before(self, committed_project: Callable[[str, bytes], Path]) -> None:
        root = committed_project("outputs.json", b'{"stack": "tcp"}\n')
        files = diff.committed(root, "HEAD", "rendered/tcp")
        assert files == {
            "outputs.json": {"stack": "tcp"},
            "proj/serviceaccount-ok.yaml": {"kind": "ServiceAccount", "metadata": {"name": "ok"}},
        }


@pytest.fixture
def committed_render(fixture_project: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> Callable[[Callable[[Path], None]], Path]:
    """The tcp fixture project as a git repository whose HEAD commits tcp's render after `edit(stack folder)`."""

    def make(edit: Callable[[Path], None]) -> Path:
        root = fixture_project("tcp")
        assert run_cli(["render", "tcp"], capsys)[0] == 0
        edit(root / "rendered" / "tcp")
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "a render")
        return root

    return make


def _statefulset(folder: Path) -> Path:
    return next(folder.rglob("statefulset-*.yaml"))


def _replace(text: str) -> Callable[[Path], None]:
    return lambda folder: _statefulset(folder).write_text(text, encoding="utf-8")


# (an edit of the committed StatefulSet file, a phrase of the one message `diff` prints)
REFUSED: dict[str, tuple[Callable[[Path], None], str]] = {
    "a list": (_replace("- 1\n- 2\n"), "not a rendered object (a list)"),
    "empty": (_replace(""), "not a rendered object (empty)"),
    "a comment only": (_replace("# nothing\n"), "not a rendered object (empty)"),
    "a scalar": (_replace("just text\n"), "not a rendered object (a scalar)"),
    "no metadata.name": (_replace("kind: StatefulSet\nmetadata: {namespace: x}\n"), "not a rendered object (a mapping without them)"),
    "no kind": (_replace("metadata: {name: x}\n"), "not a rendered object (a mapping without them)"),
}


class TestCommittedRenderFiles:
    @pytest.mark.parametrize("case", REFUSED)
    def test_a_file_that_is_not_one_object_of_json_data_is_named(
        self, case: str, committed_render: Callable[[Callable[[Path], None]], Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        edit, phrase = REFUSED[case]
        root = committed_render(edit)
        rel = _statefulset(root / "rendered" / "tcp").relative_to(root).as_posix()
        code, out, err = run_cli(["diff", "tcp"], capsys)
        assert code == 2 and out == "" and "Traceback" not in err, err
        assert err.startswith(f"error: HEAD:{rel}") and phrase in err, err

    @pytest.mark.parametrize("value", ["2001-12-14", "2001-12-14T21:59:43Z", "2001-12-14 21:59:43.10 -5"])
    def test_a_timestamp_is_read_as_its_text(
        self, value: str, committed_render: Callable[[Callable[[Path], None]], Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        def edit(folder: Path) -> None:
            path = _statefulset(folder)
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("metadata:\n", f"metadata:\n  creationTimestamp: {value}\n", 1), encoding="utf-8")

        committed_render(edit)
        code, out, err = run_cli(["diff", "tcp"], capsys)
        assert code in (0, 1) and err == "", err
        assert f"metadata.creationTimestamp: removed (was '{value}')" in out, out

    @pytest.mark.parametrize(
        "text,data",
        [
            ("a: 2001-12-14\n", {"a": "2001-12-14"}),
            ("a: !!timestamp 2001-12-14\n", {"a": "2001-12-14"}),
            ("a: [1.5, -2.0e+3]\n", {"a": [1.5, -2000.0]}),
            ("a: '.inf'\n", {"a": ".inf"}),
        ],
    )
    def test_the_loader_reads_json_data(self, text: str, data: Any) -> None:
        assert stacks.parse_yaml(text, "x.yaml") == data

    @pytest.mark.parametrize("case", ["binary", "infinity"])
    def test_a_config_file_refuses_them_too(self, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        data = fixtures.tcp()
        path = tmp_path / "tcp.yaml"
        value = "!!binary AAAA" if case == "binary" else ".inf"
        path.write_text(yaml_text(data, sort_keys=False) + f"extra: {value}\n", encoding="utf-8")
        code, out, err = run_cli(["check", "--config", str(path)], capsys)
        assert code == 2 and out == "" and err.startswith(f"error: {path}:"), err
        assert "not supported" in err or "not a JSON number" in err, err


# --- the render a render replaces ------------------------------------------------------------------------

READ_BACK: dict[str, tuple[bytes, str]] = {
    "JSON nested 100,000 deep": (DEEP_JSON.encode(), "nested more than 40 levels deep"),
    "JSON nested 70 deep": (SEVENTY_DEEP_JSON.encode(), "nested more than 40 levels deep"),
    "not UTF-8": (b'{"a": "\xff"}', "not a UTF-8 text file"),
    "Infinity": (b'{"a": Infinity}', "Infinity is not a JSON number"),
    "not JSON": (b"{", "not valid JSON"),
}


class TestRenderReadsBackTheRenderItReplaces:
    @pytest.mark.parametrize("case", READ_BACK)
    def test_outputs_json_that_is_not_one_is_named(self, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        config = tmp_path / "tcp.yaml"
        config.write_text(yaml_text(fixtures.tcp()), encoding="utf-8")
        out = tmp_path / "out"
        assert main(["render", "--config", str(config), "--out", str(out)]) == 0
        outputs = out / "tcp" / "outputs.json"
        data, phrase = READ_BACK[case]
        outputs.write_bytes(data)
        capsys.readouterr()
        code, _, err = run_cli(["render", "--config", str(config), "--out", str(out)], capsys)
        assert code == 2 and err.startswith(f"error: {outputs}") and phrase in err, err
        assert outputs.read_bytes() == data  # nothing replaced

    def test_a_manifest_larger_than_any_render_writes_is_refused(self, tmp_path: Path) -> None:
        rendering = render_run(fixtures.config("tcp"))
        target = write(rendering, tmp_path)
        manifest = target / ".render-manifest"
        manifest.write_bytes(b"#" * (MAX_READ + 1))
        with pytest.raises(WriteError, match="larger than a render writes"):
            write(rendering, tmp_path)

    def test_a_listed_file_larger_than_any_render_writes_is_changed(self, tmp_path: Path) -> None:
        rendering = render_run(fixtures.config("tcp"))
        target = write(rendering, tmp_path)
        (target / "outputs.json").write_bytes(b" " * (MAX_READ + 1))
        with pytest.raises(WriteError, match="outputs.json was changed after"):
            write(rendering, tmp_path)
