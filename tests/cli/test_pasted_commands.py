"""Every command the program prints for a user to paste is quoted for the shell (issue 35): pasted into a real shell
with a hostile name in it, it runs the program it names with that name as one argument, and nothing else runs. The
names here get past no check of the program's (a stack name on the command line, a Pulumi.NAME.yaml, is held to
Pulumi's grammar first: tests/stacks/test_stack_names.py); the quoting is what holds when a name comes from
elsewhere (a state file, a lock file's name, a live object)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import stacks
from cli.main import main
from components.tiers import can_i, can_i_read
from config import project
from tests import fixtures
from tools import adoption, drift, recovery
from tools.status import reasons
from tools.status.cluster import Cluster

HOSTILE = "fa-$(touch${IFS}PWNED);x`touch PWNED`'\"&& touch PWNED #"
PROGRAMS = ("pulumi", "oc", "python", "rm", "grep")


class Shell:
    """A real `sh` whose PATH starts with stand-ins for the programs the commands name: each records its arguments.
    The shell's own `touch` is the real one, so an injected `touch PWNED` would leave its file."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.calls = folder, folder / "calls"
        bin_dir = folder / "bin"
        bin_dir.mkdir()
        for name in PROGRAMS:
            stub = bin_dir / name
            stub.write_text(
                # One printf, so one append: the two ends of a pipe record at once and must not interleave.
                '#!/bin/sh\nus=$(printf "\\037"); r="${0##*/}"; for a in "$@"; do r="$r$us$a"; done; printf "%s\\036" "$r" >> "$CALLS"\n',
                encoding="utf-8",
            )
            stub.chmod(0o755)
        self.path = f"{bin_dir}:/usr/bin:/bin"

    def paste(self, line: str) -> list[list[str]]:
        """Run the line as a user pasting it would; the calls the stand-ins saw, each [program, *arguments]."""
        self.calls.write_text("", encoding="utf-8")
        env = {"PATH": self.path, "CALLS": str(self.calls), "HOME": str(self.folder)}
        subprocess.run(["/bin/sh", "-c", line], cwd=self.folder, env=env, check=False, timeout=60, capture_output=True)
        assert not (self.folder / "PWNED").exists(), f"pasting {line!r} ran a command of the name's"
        return [c.split("\x1f") for c in self.calls.read_text(encoding="utf-8").split("\x1e") if c]


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    return Shell(tmp_path)


def steps(report: str) -> list[str]:
    """The numbered commands of a report (`1. pulumi ...`)."""
    return [m.group(1) for m in re.finditer(r"^\d+\. (.*)$", report, re.M)]


def test_recovers_commands_run_what_they_say_with_a_hostile_stack_and_state(shell: Shell) -> None:
    urn = f"urn:pulumi:{HOSTILE}::gpu-training::kubernetes:core/v1:ServiceAccount::$(touch PWNED)"
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer", "namespace": "team-a"}}
    state = {"deployment": {"pending_operations": [{"type": "creating", "resource": {"urn": urn, "inputs": sa}}]}}
    text, args = recovery.plan(HOSTILE, recovery.pending(state), {("ServiceAccount", "team-a", "trainer")}, locked=[Path("x.json")])
    cancel, refresh, up = steps(text)
    assert shell.paste(cancel.split(": ", 1)[1]) == [["pulumi", "cancel", "--yes", "-s", HOSTILE]]
    assert shell.paste(refresh) == [args] and args is not None and args[3] == HOSTILE and urn in args
    assert shell.paste(up) == [["pulumi", "up", "-s", HOSTILE]]
    unlocked, _ = recovery.plan(HOSTILE, [], set(), None)
    converge = unlocked.split("pending operations: `", 1)[1].rsplit("` converges", 1)[0]  # the name holds a backtick too
    assert shell.paste(converge) == [["pulumi", "up", "-s", HOSTILE]]
    cancel_line = unlocked.split("no other run is going on: ", 1)[1].rstrip(".\n")
    assert shell.paste(cancel_line) == [["pulumi", "cancel", "--yes", "-s", HOSTILE]]


def test_drifts_command_runs_what_it_says_with_a_hostile_stack(shell: Shell) -> None:
    config = fixtures.config("tcp")
    found = [drift.Drift("workloads[one]", "StatefulSet a/one", "replicas 3 on the cluster, 1 in the stack")]
    text = drift.report(config, found, HOSTILE)
    command = text.split("To restore what the stack declares: ", 1)[1].split(". A hand edit", 1)[0]
    assert shell.paste(command) == [["pulumi", "up", "--refresh", "-s", HOSTILE]]


def test_rights_lines_run_what_they_say_with_hostile_names(shell: Shell) -> None:
    obj: dict[str, Any] = {
        "kind": "RoleBinding",
        "metadata": {"name": HOSTILE, "namespace": HOSTILE},
        "roleRef": {"name": "system:openshift:scc:x"},
    }
    for line in [*can_i(obj), *can_i(obj, patch=True), can_i_read("Secret", f"{HOSTILE}/{HOSTILE}")]:
        (call,) = shell.paste(line)
        assert call[:4] == ["oc", "auth", "can-i", line.split()[3]] and call[-2:] == ["-n", HOSTILE], call


def test_adopt_diffs_commands_run_what_they_say_with_hostile_names(shell: Shell) -> None:
    live = {"kind": "ServiceAccount", "metadata": {"name": HOSTILE, "namespace": HOSTILE}}
    text = " ".join(adoption._who_relies("ServiceAccount", live))
    pipeline = re.search(r"find them \(`(.*?)`\),", text)
    assert pipeline is not None
    grep_call, oc_call = sorted(shell.paste(pipeline.group(1)))  # the two ends of a pipe run at once: either may record first
    assert oc_call[:5] == ["oc", "get", "pods", "-n", HOSTILE] and grep_call == ["grep", "-w", HOSTILE]


def test_the_nad_to_delete_first_is_a_command_that_runs_what_it_says(shell: Shell) -> None:
    config = fixtures.config("roce", lambda d: d["fabric"].update(nad_mode="operator"))
    why = adoption.operator_replaces(config, "NetworkAttachmentDefinition", "team-a", "port1-network")
    command = why is not None and re.search(r"\(`(oc delete [^`]*)`\)", why)
    assert command and shell.paste(command.group(1)) == [["oc", "delete", "net-attach-def", "port1-network", "-n", "team-a"]]


def test_statuss_advice_is_a_command_that_runs_what_it_says_on_the_context_it_read(shell: Shell) -> None:
    config = fixtures.config("roce", lambda d: d["security"].update(grant=False))
    w = fixtures_workload(config, "dev")
    message = (
        'unable to validate against any security context constraint: provider "gpu-rdma": Forbidden: not usable by user or serviceaccount'
    )
    said = reasons.refused(config, reasons.Subject(("workloads", 0), w, "dev"), message, Cluster([], context=HOSTILE))
    command = said.split("a cluster admin runs `", 1)[1].removesuffix("`")  # the context holds a backtick too
    assert shell.paste(command) == [
        ["oc", "--context", HOSTILE, "adm", "policy", "add-scc-to-user", "gpu-rdma", "-z", w.service_account, "-n", w.namespace]
    ]


def fixtures_workload(config: Any, name: str) -> Any:
    return next(w for w in config.workloads if w.name == name)


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with stack `lab`, and a file backend (project layout) whose lock folder of lab holds an empty lock
    attributes file a hostile name was given."""
    data = fixtures.tcp()
    data["name"] = "lab"
    root = tmp_path / "project"
    (root / stacks.CLUSTERS).mkdir(parents=True)
    (root / "lab.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    (root / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    settings = {"gpu-training:configFile": "lab.yaml", "kubernetes:context": "lab"}
    (root / "Pulumi.lab.yaml").write_text(yaml.safe_dump({"config": settings}), encoding="utf-8")
    state = tmp_path / "state" / ".pulumi"
    locks = state / "locks" / "organization" / stacks.PROJECT / "lab"
    locks.mkdir(parents=True)
    (state / "meta.yaml").write_text("version: 1\n", encoding="utf-8")
    (locks / f"{HOSTILE}.json").write_text("{}", encoding="utf-8")
    (locks / f"{HOSTILE}.json.attrs").write_bytes(b"")
    monkeypatch.setattr(project, "ROOT", root)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path / 'state'}")
    return locks


def test_the_removal_recover_prints_removes_the_file_it_names_and_nothing_else(
    backend: Path, shell: Shell, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["recover", "lab"]) == 1
    out = capsys.readouterr().out
    rm, again = steps(out)
    assert shell.paste(rm) == [["rm", str(backend / f"{HOSTILE}.json.attrs")]]
    assert shell.paste(again) == [["python", "-m", "stacks", "recover", "lab"]]
    assert json.dumps(out)  # printable, one command a line


def test_a_printed_command_stays_one_line_a_shell_reads_whole() -> None:
    # shlex.join quotes; a name with a control character could not be pasted as shown: the program never prints one.
    for command in (shlex.join(["pulumi", "up", "-s", HOSTILE]), *can_i({"kind": "Pod", "metadata": {"name": HOSTILE}}, patch=True)):
        assert shlex.split(command)[-1].endswith(HOSTILE) and command.isprintable()
