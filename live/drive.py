"""One real Pulumi operation on one stack of the project in the current folder, through the real CLI.

    python -m live.drive STACK preview|up|refresh|destroy [--diff] [--expect-no-changes] [--target URN]...
                         [--exclude-protected] [--report FILE]
    python -m live.drive STACK import --file PLAN [--report FILE]

The program is the project's own `__main__.py`, run as a Pulumi Automation API inline program: no
`pulumi-language-python` plugin can be built from the Go module proxy, and an inline program is the
Python SDK hosting the language runtime itself, so the same `__main__.py`, `build()` and stack file run as
under `pulumi up`. Everything else is the real engine: the `pulumi` CLI on PATH, its `file://` backend
($PULUMI_BACKEND_URL, passphrase secrets), and the kubernetes provider plugin it finds on PATH.

`import` runs `pulumi import --file PLAN --generate-code=false` itself. The CLI loads the project's language
runtime even when it generates no code; here that runtime is the SDK's own language server (as for the inline
program), named by a `client` runtime in Pulumi.yaml for the one command and restored after.

--report writes what happened as JSON: the result, each step the engine reported (urn, op, the properties
it diffs), the outputs, and the timings (wall time, and the program's own time: loading, preflight and
declaring every resource).
"""

from __future__ import annotations

import argparse
import json
import runpy
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import IO, Any

import grpc  # type: ignore[import-untyped]
import yaml
from pulumi import automation as auto
from pulumi.automation._cmd import CommandResult
from pulumi.automation._server import LanguageServer
from pulumi.runtime.proto import language_pb2_grpc

PROJECT = "gpu-training"


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    root = Path.cwd()
    program_time: list[float] = []

    def program() -> None:
        started = time.monotonic()
        runpy.run_path(str(root / "__main__.py"), run_name="__main__")
        program_time.append(time.monotonic() - started)

    steps: list[dict[str, Any]] = []
    diagnostics: list[str] = []

    events = args.events.open("a", buffering=1) if args.events else None

    # The project folder as the workspace (its Pulumi.yaml and stack files); `work_dir=` would make a local
    # program instead, and an inline program without these options gets a temporary project with no config.
    workspace = auto.LocalWorkspaceOptions(work_dir=str(root))
    output: list[str] = []
    started = time.monotonic()
    result: dict[str, Any] = {"stack": args.stack, "op": args.op, "ok": True}
    on_event = _recorder(events, started, steps, diagnostics)
    try:  # selecting the stack reads its state: a state a killed run left unreadable fails here, and is reported too
        stack = auto.create_or_select_stack(stack_name=args.stack, project_name=PROJECT, program=program, opts=workspace)
        common: dict[str, Any] = {"on_output": output.append, "on_event": on_event, "color": "never"}
        _operate(args, stack, common, root, program, output, result)
    except auto.CommandError as err:
        result["ok"] = False
        result["error"] = str(err)
    result["wall_seconds"] = round(time.monotonic() - started, 2)
    result["program_seconds"] = round(program_time[-1], 2) if program_time else None
    result["steps"] = steps
    result["diagnostics"] = diagnostics
    result["output"] = "".join(output)
    if args.report:
        args.report.write_text(json.dumps(result, indent=1))
    print("".join(output)[-4000:])
    if not result["ok"]:
        print(result["error"][-4000:], file=sys.stderr)
    return 0 if result["ok"] else 1


def _arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m live.drive")
    p.add_argument("stack")
    p.add_argument("op", choices=["preview", "up", "refresh", "destroy", "import"])
    p.add_argument("--file", type=Path)
    p.add_argument("--diff", action="store_true")
    p.add_argument("--expect-no-changes", action="store_true")
    p.add_argument("--target", action="append", default=[])
    p.add_argument("--exclude-protected", action="store_true")
    p.add_argument("--report", type=Path)
    p.add_argument("--refresh", action="store_true", help="up: refresh first (pulumi up --refresh)")
    p.add_argument("--events", type=Path, help="append one JSON line per engine event as it happens (a test kills the run by them)")
    return p.parse_args(argv)


def _recorder(
    events: IO[str] | None, started: float, steps: list[dict[str, Any]], diagnostics: list[str]
) -> Callable[[auto.EngineEvent], None]:
    """The engine-event callback: each step and diagnostic for the report, and (--events) each event's line as it happens."""

    def on_event(event: auto.EngineEvent) -> None:
        pre = event.resource_pre_event
        if events is not None:
            done = event.res_outputs_event
            if pre is not None or done is not None:
                m = (pre or done).metadata  # type: ignore[union-attr]
                events.write(json.dumps({"event": "pre" if pre else "done", "urn": m.urn, "op": str(getattr(m.op, "value", m.op))}) + "\n")
        if pre is not None:
            m = pre.metadata
            steps.append({"urn": m.urn, "op": str(m.op.value if hasattr(m.op, "value") else m.op), "type": m.type,
                          "diffs": list(m.diffs or []), "at": time.monotonic() - started})  # fmt: skip
        diag = event.diagnostic_event
        if diag is not None and diag.severity in ("error", "warning"):
            diagnostics.append(f"{diag.severity}: {diag.message.strip()}")

    return on_event


def _operate(
    args: argparse.Namespace,
    stack: auto.Stack,
    common: dict[str, Any],
    root: Path,
    program: Callable[[], None],
    output: list[str],
    result: dict[str, Any],
) -> None:
    """Runs the chosen operation on the selected stack; its change summary goes in `result`."""
    if args.op == "preview":
        r = stack.preview(diff=args.diff or None, expect_no_changes=args.expect_no_changes or None, target=args.target or None, **common)
        result["change_summary"] = dict(r.change_summary)
    elif args.op == "up":
        up = stack.up(
            diff=args.diff or None, expect_no_changes=args.expect_no_changes or None, target=args.target or None,
            refresh=args.refresh or None, **common,
        )  # fmt: skip
        result["change_summary"] = dict(up.summary.resource_changes or {})
    elif args.op == "import":
        assert args.file is not None, "import needs --file PLAN"
        result["change_summary"] = {}
        output.append(_import(root, args.stack, args.file, program))
    elif args.op == "refresh":
        rr = stack.refresh(expect_no_changes=args.expect_no_changes or None, **common)
        result["change_summary"] = dict(rr.summary.resource_changes or {})
    else:
        dr = stack.destroy(exclude_protected=args.exclude_protected or None, **common)
        result["change_summary"] = dict(dr.summary.resource_changes or {})


def _import(root: Path, stack: str, plan: Path, program: Any) -> str:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageServer(program), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    project = root / "Pulumi.yaml"
    original = project.read_text()
    settings = yaml.safe_load(original)
    settings["runtime"] = {"name": "client", "options": {"address": f"127.0.0.1:{port}"}}
    project.write_text(yaml.safe_dump(settings))
    try:
        cmd = ["pulumi", "import", "--file", str(plan), "--yes", "--generate-code=false", "--non-interactive", "--color=never", "-s", stack]
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False, timeout=600)
    finally:
        project.write_text(original)
        server.stop(0)
    if proc.returncode != 0:
        raise auto.CommandError(CommandResult(proc.stdout, proc.stderr, proc.returncode))
    return proc.stdout


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
