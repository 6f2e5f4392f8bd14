"""Issue 23, part 3: what the program reads back is read as carefully as a config.

- The committed render (`check --against`, `diff`) and the render a `render` replaces: bounded size, depth and
  values, no aliases, UTF-8 only, one message naming the file (a 100,000-deep YAML used to kill the process with
  SIGSEGV inside libyaml). A fabric attachment's cni_config JSON likewise, named by its config path and line.
- adopt-diff: a field the live object leaves out counts at its API default, so taking it away is a narrowing;
  malformed metadata is one message naming the file and the object.
- bandwidth-report: NaN, inf, 1e999, digits of another script, 5,000-digit sizes, a #wrong that is no count and rows
  after the trailer fail the check; never PASS, never a traceback.
- The YAML route: !!set, !!omap and !!pairs are refused with the file and line (a set's order changes between runs).
- The launcher: with more RDMA ports than it scans, the pod's own VFs are still found.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from cli.main import main
from tests import fixtures
from tests.helpers import rendered_fixture
from tests.launcher.test_launcher import LAUNCHER_FILE, L, contract_env, fake
from tools import diff
from tools.render import run as render_run
from tools.writer import MAX_READ, WriteError, write

DEEP_YAML = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
DEEP_JSON = "[" * 100_000 + "]" * 100_000
SEVENTY_DEEP_JSON = '{"a":' * 70 + "1" + "}" * 70  # under Python's recursion limit, over the readers' depth


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True, capture_output=True)


# --- the committed render ------------------------------------------------------------------------------

# (file under rendered/tcp/, its bytes, a phrase of the message)
COMMITTED: dict[str, tuple[str, bytes, str]] = {
    "YAML nested 100,000 deep": ("proj/configmap-x.yaml", DEEP_YAML.encode(), "nested more than 40 levels deep"),
    "a billion laughs": ("proj/configmap-x.yaml", b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", "YAML aliases (*name) are not supported"),
    "not UTF-8": ("proj/configmap-x.yaml", b"kind: \xff\xfe\n", "not a UTF-8 text file (byte 6)"),
    "JSON nested 100,000 deep": ("outputs.json", DEEP_JSON.encode(), "nested more than 40 levels deep"),
    "JSON nested 70 deep": ("outputs.json", SEVENTY_DEEP_JSON.encode(), "nested more than 40 levels deep"),
    "NaN in the outputs": ("outputs.json", b'{"bandwidth": NaN}', "NaN is not a JSON number"),
    "larger than a rendered file": ("proj/configmap-x.yaml", b"a: '" + b"x" * stacks.RENDERED_LIMITS.max_bytes + b"'\n", "larger than"),
    "an unordered set": ("proj/configmap-x.yaml", b"kind: ConfigMap\ndata: !!set {a, b}\n", "!!set is not supported"),
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
        code, out, err = run(["diff", "tcp"], capsys)
        assert code == 2 and out == "", err
        assert err.startswith(f"error: HEAD:rendered/tcp/{rel}") and phrase in err, err

    @pytest.mark.parametrize("case", ["YAML nested 100,000 deep", "JSON nested 100,000 deep", "not UTF-8"])
    def test_check_against_names_the_committed_file(
        self, case: str, committed_project: Callable[[str, bytes], Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        rel, data, phrase = COMMITTED[case]
        committed_project(rel, data)
        code, _, err = run(["check", "tcp", "--against", "HEAD"], capsys)
        assert code == 2 and err.startswith(f"error: HEAD:rendered/tcp/{rel}") and phrase in err, err

    def test_a_sound_committed_render_reads_as_before(self, committed_project: Callable[[str, bytes], Path]) -> None:
        root = committed_project("outputs.json", b'{"stack": "tcp"}\n')
        files = diff.committed(root, "HEAD", "rendered/tcp")
        assert files == {
            "outputs.json": {"stack": "tcp"},
            "proj/serviceaccount-ok.yaml": {"kind": "ServiceAccount", "metadata": {"name": "ok"}},
        }

    def test_the_deep_document_ends_in_a_message_in_a_real_process(self, committed_project: Callable[[str, bytes], Path]) -> None:
        # libyaml's composer recursed until the process died with SIGSEGV: no message, no exit code of ours.
        root = committed_project("proj/configmap-x.yaml", DEEP_YAML.encode())
        code = (
            "import stacks\nfrom tools import diff\n"
            f"try:\n    diff.committed({str(root)!r}, 'HEAD', 'rendered/tcp')\n"
            "except stacks.ConfigError as err:\n    raise SystemExit(str(err))\n"
        )
        cwd = Path(__file__).resolve().parents[1]  # the project: `import stacks` finds the program
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd)
        assert done.returncode == 1, (done.returncode, done.stderr[-500:])  # -11: SIGSEGV
        assert done.stderr.startswith("HEAD:rendered/tcp/proj/configmap-x.yaml:1:") and "nested more than 40" in done.stderr, done.stderr


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
        config.write_text(yaml.safe_dump(fixtures.tcp()), encoding="utf-8")
        out = tmp_path / "out"
        assert main(["render", "--config", str(config), "--out", str(out)]) == 0
        outputs = out / "tcp" / "outputs.json"
        data, phrase = READ_BACK[case]
        outputs.write_bytes(data)
        capsys.readouterr()
        code, _, err = run(["render", "--config", str(config), "--out", str(out)], capsys)
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


# --- the fabric attachments' CNI config --------------------------------------------------------------------

CNI: dict[str, tuple[str, str]] = {
    "nested 100,000 deep": (DEEP_JSON, "nested more than 20 levels deep"),
    "nested 70 deep": (SEVENTY_DEEP_JSON, "nested more than 20 levels deep"),
    "NaN": ('{"type": "sriov", "mtu": NaN}', "NaN is not a JSON number"),
    "larger than a ConfigMap holds": ('{"name": "' + "x" * 300_000 + '"}', "longer than"),
}


class TestCniConfigJson:
    @pytest.mark.parametrize("case", CNI)
    @pytest.mark.parametrize("command", ["config", "check"])
    def test_a_cni_config_that_is_not_one_is_refused_with_its_path_and_line(
        self, case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data = fixtures.roce()
        data["fabric"]["attachments"][0]["cni_config"] = CNI[case][0]
        path = tmp_path / "roce.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False, width=1 << 30), encoding="utf-8")
        code, out, err = run([command, "--config", str(path)], capsys)
        assert code == 2 and out == "", err
        assert err.startswith(f"error: {path}: invalid configuration") and "fabric.attachments[0].cni_config" in err, err
        assert CNI[case][1] in err and f"{path}:" in err.split("cni_config", 1)[1], err

    @pytest.mark.parametrize(
        "live_config", [DEEP_JSON, SEVENTY_DEEP_JSON, '{"type": "sriov", "mtu": NaN}'], ids=["100,000 deep", "70 deep", "NaN"]
    )
    def test_a_live_nad_config_that_is_not_one_differs_in_preview(self, live_config: str) -> None:
        # nad_mode copy: preview compares the source NAD's config on the cluster with the stack's cni_config.
        import pulumi

        live = {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port1rdma"}}, "spec": {"config": live_config}}
        with pytest.raises(pulumi.RunError, match=r"NetworkAttachmentDefinition default/port1-network: its CNI config differs"):
            render_run(fixtures.config("roce"), live={("NetworkAttachmentDefinition", "default/port1-network"): live})

    def test_a_sound_cni_config_still_validates(self) -> None:
        config = fixtures.config("roce")
        assert config.fabric is not None and json.loads(config.fabric.attachments[0].cni_config or "")["type"] == "sriov"


# --- adopt-diff ----------------------------------------------------------------------------------------------


def _declared(kind: str, name: str) -> dict[str, Any]:
    return json.loads(
        json.dumps(next(o for o in rendered_fixture("roce").objects() if o["kind"] == kind and o["metadata"]["name"] == name))
    )


def _live(tmp_path: Path, obj: Any) -> Path:
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")
    return path


# (kind, name, the field the live object leaves out, the line adopt-diff prints, whether adopting narrows)
DEFAULTS = {
    "ServiceAccount token mount": (
        "ServiceAccount", "trainer", "automountServiceAccountToken",
        "- REMOVES automountServiceAccountToken: true -> false (not set on the live object: the API's default)", True,
    ),
    "SCC privilege escalation": (
        "SecurityContextConstraints", "gpu-rdma", "allowPrivilegeEscalation",
        "- REMOVES allowPrivilegeEscalation: true -> false (not set on the live object: the API's default)", True,
    ),
    "StatefulSet pod management": (
        "StatefulSet", "dev", "spec.podManagementPolicy",
        "~ changes spec.podManagementPolicy: OrderedReady -> Parallel (not set on the live object: the API's default)", False,
    ),
    "Service publishing unready pods": (
        "Service", "dev-headless", "spec.publishNotReadyAddresses",
        "~ changes spec.publishNotReadyAddresses: false -> true (not set on the live object: the API's default)", False,
    ),
}  # fmt: skip


def _without(obj: dict[str, Any], path: str) -> dict[str, Any]:
    *parents, last = path.split(".")
    node = obj
    for p in parents:
        node = node[p]
    node.pop(last)
    return obj


class TestAdoptDiff:
    @pytest.mark.parametrize("case", DEFAULTS)
    def test_a_field_the_live_object_leaves_out_counts_at_its_api_default(
        self, case: str, fixture_project: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        kind, name, field, line, narrows = DEFAULTS[case]
        fixture_project("roce")
        live = _without(_declared(kind, name), field)
        code, out, err = run(["adopt-diff", "roce", str(_live(tmp_path, live))], capsys)
        assert code == (1 if narrows else 0), out + err
        assert f"  {line}\n" in out, out
        assert ("Adopting narrows this" in out) is narrows

    def test_a_default_the_stack_also_declares_is_no_change(
        self, fixture_project: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        fixture_project("roce")
        scc = _declared("SecurityContextConstraints", "gpu-rdma")
        assert scc["readOnlyRootFilesystem"] is False
        code, out, _ = run(["adopt-diff", "roce", str(_live(tmp_path, _without(scc, "readOnlyRootFilesystem")))], capsys)
        assert code == 0 and "readOnlyRootFilesystem" not in out and "takes nothing away" in out, out

    @pytest.mark.parametrize(
        "metadata,phrase",
        [
            ({"namespace": "team-a"}, "the ServiceAccount: metadata.name is null, not a name"),
            ({"name": ["trainer"], "namespace": "team-a"}, "the ServiceAccount: metadata.name is [trainer], not a name"),
            (
                {"name": "trainer", "namespace": ["team-a"]},
                "ServiceAccount trainer: metadata.namespace is [team-a], not a namespace's name",
            ),
            ({"name": "trainer", "namespace": "team-a", "annotations": ["a"]}, "ServiceAccount trainer: metadata.annotations is [a]"),
            ({"name": "trainer", "namespace": "team-a", "labels": "app=x"}, "ServiceAccount trainer: metadata.labels is app=x"),
            ({"name": "trainer", "namespace": "team-a", "labels": {"replicas": 2}}, "metadata.labels is {replicas: 2}, not a map"),
        ],
    )
    @pytest.mark.parametrize("as_list", [False, True], ids=["object", "List"])
    def test_malformed_metadata_is_one_message_naming_file_and_object(
        self,
        metadata: dict[str, Any],
        phrase: str,
        as_list: bool,
        fixture_project: Callable[..., Path],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        fixture_project("roce")
        obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}
        live = _live(
            tmp_path, {"apiVersion": "v1", "kind": "List", "items": [_declared("ServiceAccount", "trainer"), obj]} if as_list else obj
        )
        code, out, err = run(["adopt-diff", "roce", str(live)], capsys)
        assert code == 2 and out == "", out
        where = "items[1] of the List, " if as_list else ""
        assert err.startswith(f"error: {live}: {where}") and phrase in err, err

    def test_a_malformed_live_file_in_a_real_process_prints_no_traceback(self, tmp_path: Path) -> None:
        live = _live(tmp_path, {"kind": "ServiceAccount", "metadata": {"name": "trainer", "namespace": ["a"]}})
        cwd = Path(__file__).resolve().parents[1]
        done = subprocess.run(
            [sys.executable, "-m", "stacks", "adopt-diff", "nerc", str(live)], capture_output=True, text=True, timeout=120, cwd=cwd
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"{live}: ServiceAccount trainer: metadata.namespace is [a]" in done.stderr


# --- bandwidth-report ------------------------------------------------------------------------------------------

MPIRUN_TWO_HOSTS = (Path(__file__).parent / "launcher" / "bandwidth_logs" / "made_up_mpirun_two_hosts.log").read_text(encoding="utf-8")
LAST_ROW = next(line for line in MPIRUN_TWO_HOSTS.splitlines() if " 1073741824 " in line and "float" in line)
PREFIX, ROW = LAST_ROW.split(":", 1)[0] + ":", LAST_ROW.split(":", 1)[1]


def _cells(edit: Callable[[list[str]], None]) -> str:
    cells = ROW.split()
    edit(cells)
    return MPIRUN_TWO_HOSTS.replace(LAST_ROW, PREFIX + "  " + "  ".join(cells))


def _cell(index: int, value: str) -> Callable[[list[str]], None]:
    return lambda cells: cells.__setitem__(index, value)


# the last row's cells: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
BAD_LOGS: dict[str, tuple[str, str]] = {
    "NaN bus bandwidth": (_cells(_cell(7, "nan")), "not a number"),
    "NaN everywhere": (_cells(lambda c: c.__setitem__(slice(5, 13), ["nan"] * 8)), "not a number"),
    "infinite bus bandwidth": (_cells(_cell(11, "inf")), "not a number"),
    "overflowing bus bandwidth": (_cells(_cell(11, "1e999")), "'1e999'"),
    "Arabic-Indic digits": (_cells(_cell(11, "\u0669\u0669.\u0669")), "not a number"),
    "fullwidth digits": (_cells(_cell(7, "\uff19\uff19.\uff19")), "not a number"),
    "Arabic-Indic size": (_cells(_cell(0, "\u0661\u0660\u0667\u0663\u0667\u0664\u0661\u0668\u0662\u0664")), "not a number"),
    "5,000-digit size": (_cells(_cell(0, "9" * 5000)), "not a number"),
    "5,000-digit count": (_cells(_cell(1, "2" * 5000)), "not a number"),
    "#wrong is text": (_cells(_cell(8, "x")), "'x' in the row"),
    "#wrong is negative": (_cells(_cell(12, "-1")), "'-1' in the row"),
    "#wrong is a fraction": (_cells(_cell(8, "0.5")), "'0.5' in the row"),
    "#wrong in other digits": (_cells(_cell(8, "\u0663")), "not a number"),
    "a row after the trailer": (MPIRUN_TWO_HOSTS + LAST_ROW.replace("88.05", "99.05") + "\n", "row(s) after the summary trailer"),
    "5,000-digit maxBytes": (MPIRUN_TWO_HOSTS.replace("maxBytes 1073741824", "maxBytes " + "9" * 5000), "thousands of digits in the line"),
}


class TestBandwidthReport:
    def test_the_log_the_cases_edit_passes(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = tmp_path / "ok.log"
        log.write_text(MPIRUN_TWO_HOSTS, encoding="utf-8")
        code, out, _ = run(["bandwidth-report", str(log), "--mode", "rdma", "--line-rate-gbps", "800"], capsys)
        assert code == 0 and "bandwidth check: PASS" in out, out

    @pytest.mark.parametrize("case", BAD_LOGS)
    def test_a_log_whose_numbers_are_not_numbers_fails(self, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        text, phrase = BAD_LOGS[case]
        assert text != MPIRUN_TWO_HOSTS
        log = tmp_path / "bad.log"
        log.write_text(text, encoding="utf-8")
        code, out, err = run(["bandwidth-report", str(log), "--mode", "rdma", "--line-rate-gbps", "800"], capsys)
        assert code == 1 and err == "", err
        assert "bandwidth check: FAIL" in out and phrase in out, out

    @pytest.mark.parametrize("case", ["NaN bus bandwidth", "5,000-digit size", "Arabic-Indic size"])
    def test_the_in_pod_report_fails_them_too(self, case: str, tmp_path: Path) -> None:
        log = tmp_path / "bad.log"
        log.write_text(BAD_LOGS[case][0], encoding="utf-8")
        bench = Path(__file__).resolve().parents[1] / "components" / "launcher" / "bandwidth.py"
        done = subprocess.run(
            [sys.executable, "-I", str(bench), "report", str(log), "--mode", "rdma", "--line-rate-gbps", "800"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr and "bandwidth check: FAIL" in done.stdout, done.stderr


# --- the YAML route ------------------------------------------------------------------------------------------------

UNORDERED = {
    "a set of namespaces": ("namespaces: !!set {team-a, team-b}\n", "!!set is not supported: a set has no order"),
    "a set in flow style": ("namespaces: !!set {? team-a, ? team-b}\n", "!!set is not supported"),
    "an ordered map": ("gpu_node_selector: !!omap [{a: b}]\n", "!!omap is not supported"),
    "pairs": ("gpu_node_selector: !!pairs [{a: b}, {a: c}]\n", "!!pairs is not supported"),
    "a Python tuple": ("namespaces: !!python/tuple [team-a, team-b]\n", "could not determine a constructor"),
}


class TestYamlThatHasNoOrder:
    @pytest.mark.parametrize("case", UNORDERED)
    @pytest.mark.parametrize("command", ["config", "render"])
    def test_refused_with_the_file_and_line(self, case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        data = fixtures.roce()
        key = UNORDERED[case][0].split(":", 1)[0]
        data.pop(key)
        text = yaml.safe_dump(data, sort_keys=False)
        path = tmp_path / "roce.yaml"
        path.write_text(text + UNORDERED[case][0], encoding="utf-8")
        line = len(text.splitlines()) + 1
        out_dir = ["--out", str(tmp_path / "out")] if command == "render" else []
        code, out, err = run([command, "--config", str(path), *out_dir], capsys)
        assert code == 2 and out == "", out
        assert err.startswith(f"error: {path}:{line}:") and UNORDERED[case][1] in err, err
        assert not (tmp_path / "out").exists()

    def test_the_same_data_as_lists_and_maps_loads(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "roce.yaml"
        path.write_text(yaml.safe_dump(fixtures.roce(), sort_keys=False), encoding="utf-8")
        code, out, err = run(["config", "--config", str(path)], capsys)
        assert code == 0 and "namespaces:\n- team-a\n- team-b\n" in out, err


# --- the launcher's device scan ---------------------------------------------------------------------------------

POD_VFS = {"net1": ("mlx5_900", "0000:d8:00.2"), "net2": ("mlx5_901", "0000:d8:00.3")}
POD_HCA = "=mlx5_900:1,mlx5_901:1"


def crowded_host(root: pathlib.Path, devices: int, ports: int) -> pathlib.Path:
    """A privileged pod in shared netns mode on a host showing `devices` RDMA devices of `ports` ports each (ACTIVE
    RoCE, the host's addresses), with the pod's own VFs named so that they sort after all of them."""
    for d in range(devices):
        for p in range(1, ports + 1):
            fake.add_port(root, f"mlx5_{d}", port=p, gids={0: (fake.ipv4_gid(192, 168, d % 250, p), "RoCE v2")}, ndev="eno1np0")
    for n, (ifname, (device, pci)) in enumerate(POD_VFS.items()):
        fake.add_port(root, device, gids=fake.roce_gids(5, (10, 0, 103 + n, 7)), ndev=ifname)
        fake.link_interface(root, ifname, device, pci)
    fake.add_netdevs(root, ["lo", "eth0"])
    return root


def empty_devices(root: pathlib.Path, count: int) -> None:
    """Device folders without ports: enough of them to fill a directory listing (MAX_DIR_ENTRIES)."""
    for d in range(count):
        (root / "class" / "infiniband" / f"mlx4_{d}").mkdir(parents=True)


# case: (the tree, whether the scan without the pod's devices first leaves them out for sure: a directory listing
# past MAX_DIR_ENTRIES stops in the file system's order, which may or may not reach them)
SCANS: dict[str, tuple[Callable[[pathlib.Path], Any], bool]] = {
    "300 devices of 2 ports (600 ports)": (lambda root: crowded_host(root, 300, 2), True),
    "600 devices of 1 port": (lambda root: crowded_host(root, 600, 1), True),
    "more devices than a listing holds": (lambda root: (crowded_host(root, 4, 1), empty_devices(root, L.MAX_DIR_ENTRIES + 100)), False),
}


class TestLauncherFindsThePodsOwnDevices:
    @pytest.mark.parametrize("case", SCANS)
    def test_the_pods_vfs_are_read_first(self, case: str, tmp_path: pathlib.Path) -> None:
        build, crowded = SCANS[case]
        build(tmp_path)
        links = L.read_interface_links(str(tmp_path), list(POD_VFS))
        own = [d for link in links for d in link.devices]
        assert own == [device for device, _ in POD_VFS.values()]
        ports = L.read_rdma_ports(str(tmp_path), own=own)
        assert len(ports) <= L.MAX_PORTS
        assert {"mlx5_900", "mlx5_901"} <= {p.device for p in ports}, "the pod's VFs were left out of the scan"
        assert ports == sorted(ports, key=lambda p: (L.natural_key(p.device), p.port))  # the order reports and NCCL_IB_HCA use
        if crowded:
            without = L.read_rdma_ports(str(tmp_path))  # what the scan read before: the host's devices first
            assert not {"mlx5_900", "mlx5_901"} <= {p.device for p in without}, "the case does not crowd the scan"

    @pytest.mark.parametrize("case", [case for case, (_, crowded) in SCANS.items() if crowded])
    def test_the_launcher_chooses_them_end_to_end(self, case: str, tmp_path: pathlib.Path) -> None:
        SCANS[case][0](tmp_path)
        env = contract_env(LAUNCHER_RDMA_INTERFACES=",".join(POD_VFS), LAUNCHER_PIN_BYTES=str(64 * 1024))
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        done = subprocess.run(
            [sys.executable, str(LAUNCHER_FILE), "--print-env", "--sysfs-root", str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in done.stderr, done.stderr
        assert f"NCCL_IB_HCA={POD_HCA}" in done.stdout, done.stderr[-2000:]
        assert "NCCL_IB_GID_INDEX=5" in done.stdout
