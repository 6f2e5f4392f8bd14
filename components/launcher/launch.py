"""The command line: check, write the files an `oc exec` session reads, report, then exec (exit codes:
docs/launcher.md). When the report (or --print-env's output) cannot be written, one line says so on the other stream
and nothing runs."""

from __future__ import annotations

import argparse
import errno
import json
import os
import shlex
from contextlib import suppress
from typing import Dict, List, Mapping, Optional, Sequence

from . import contract
from .facts import gather_facts
from .plan import Plan, decide, render_report, report_data, report_line


class OutputFailed(Exception):
    def __init__(self, stream: str, what: str, reason: str) -> None:
        super().__init__(f"could not write {what} to {stream} ({reason})")
        self.stream = stream


def write_stream(fd: int, text: str, what: str) -> None:
    """Unbuffered: nothing is left to fail again at exit (120). stdout gets non-UTF-8 values back as their bytes."""
    name = "stdout" if fd == 1 else "stderr"
    data = text.encode("utf-8", "surrogateescape" if fd == 1 else "backslashreplace")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError as exc:
        raise OutputFailed(name, what, "it is closed" if exc.errno == errno.EBADF else exc.strerror or str(exc)) from None


def write_file(path: str, text: str) -> Optional[str]:  # parents created; the error, or None
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(text)
        return None
    except OSError as exc:
        return str(exc)


def child_environment(environ: Mapping[str, str], plan: Plan) -> Dict[str, str]:  # less what it removed, plus what it decided
    return {**{k: v for k, v in environ.items() if k not in plan.unset}, **plan.env}


def write_outputs(cli: argparse.Namespace, plan: Plan) -> None:
    """A missing hostfile would fail DeepSpeed later, far from the cause: it stops the pod; the rest is a convenience."""
    if plan.hostfile and (problem := write_file(*plan.hostfile)):
        failed = f"could not write the DeepSpeed hostfile {plan.hostfile[0]} (LAUNCHER_DEEPSPEED_HOSTFILE): {problem}"
        plan.errors.append(failed + "; DeepSpeed would fail without it")
        return
    if plan.bash_env and (problem := write_file(*plan.bash_env)):  # BASH_ENV would name nothing: the image's own stays in force
        plan.env.pop("BASH_ENV", None)
        plan.summary["bash_env"] = None
        stop = "a script's failing `ulimit -l` under `set -e` will stop the pod"
        plan.warnings.append(f"could not write {plan.bash_env[0]} (BASH_ENV): {problem}; {stop}")
    # For `source` in an oc exec session, which starts from the image's environment: what was removed is unset.
    lines = [
        "# Written by the launcher at container start. In an `oc exec` session: source this file, then run torchrun as below.",
        "# " + " ".join(shlex.quote(a) for a in plan.argv),
        *(f"unset {key}" for key in sorted(plan.unset)),
        *(f"export {key}={shlex.quote(value)}" for key, value in sorted(plan.env.items())),
    ]
    problem = write_file(cli.env_file, "\n".join(lines) + "\n")
    done = f"could not write {cli.env_file}: {problem}" if problem else f"{cli.env_file} (`source {cli.env_file}` in oc exec sessions)"
    plan.sections.append(("environment file", [done]))
    if problem:
        plan.warnings.append(f"oc exec sessions will not see the launcher's environment: {problem}")


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Check the pod, set NCCL's environment and exec torchrun (docs/launcher.md).")
    parser.add_argument("--print-env", action="store_true", help="run every check, print the exported environment (KEY=VALUE) and exit")
    parser.add_argument("--sysfs-root", help="sysfs to read RDMA devices and interfaces from (default LAUNCHER_SYSFS_ROOT or /sys)")
    sessions = f"the environment for oc exec sessions (default {contract.DEFAULT_ENV_FILE})"
    parser.add_argument("--env-file", default=contract.DEFAULT_ENV_FILE, help=sessions)
    shim = f"the file BASH_ENV names, the `ulimit` shim (default {contract.DEFAULT_BASH_ENV_FILE})"
    parser.add_argument("--bash-env-file", default=contract.DEFAULT_BASH_ENV_FILE, help=shim)
    context: List[str] = []  # what the line about a failed write adds: the verdict, where the JSON report is
    try:
        return run(parser.parse_args(argv), os.environ if environ is None else environ, context)
    except OutputFailed as exc:
        with suppress(OutputFailed):
            line = f"launcher: {exc}" + "".join(f"; {c}" for c in context) + f"; exit {contract.EXIT_OUTPUT_FAILED}\n"
            write_stream(1 if exc.stream == "stderr" else 2, line, "")
        return contract.EXIT_OUTPUT_FAILED


def run(cli: argparse.Namespace, environ: Mapping[str, str], context: List[str]) -> int:
    try:
        cfg = contract.Config(environ, cli.sysfs_root)
    except contract.ConfigError as exc:
        errors = str(exc).splitlines()
        data = report_data(None, errors)
        context.append("verdict: would not start (the configuration is invalid)")
        path = environ.get("LAUNCHER_REPORT_JSON", "").strip() or contract.DEFAULT_REPORT_JSON
        if not cli.print_env and write_file(path, json.dumps(data, indent=2) + "\n") is None:
            context.append(f"the report is in {path}")
        write_stream(2, render_report(None, None, errors) + report_line(data), "the report")
        return contract.EXIT_WOULD_NOT_START
    plan = decide(cfg, gather_facts(cfg), cli.bash_env_file)
    if not plan.errors and not cli.print_env:
        write_outputs(cli, plan)
    context.append(f"verdict: {'would not start' if plan.errors else 'start'}" + ("" if cli.print_env else ", but nothing was executed"))
    problem = None if cli.print_env else write_file(cfg.report_json, json.dumps(report_data(plan), indent=2) + "\n")
    if problem:
        failed = f"could not write the JSON report {cfg.report_json} (LAUNCHER_REPORT_JSON): {problem}"
        plan.warnings.append(failed + "; the LAUNCHER_REPORT log line has it")
    elif not cli.print_env:
        plan.sections.append(("json report", [f"{cfg.report_json}; the same as the LAUNCHER_REPORT line below"]))
        context.append(f"the report is in {cfg.report_json}")
    write_stream(2, render_report(cfg, plan) + report_line(report_data(plan)), "the report")
    if plan.errors:
        return contract.EXIT_WOULD_NOT_START
    if cli.print_env:
        write_stream(1, "".join(f"{k}={v}\n" for k, v in sorted(plan.env.items())), "the environment (--print-env)")
        return contract.EXIT_OK
    try:
        # exec, not a child: the command keeps PID 1, so the kubelet's SIGTERM reaches torchrun and its workers.
        os.execvpe(plan.argv[0], plan.argv, child_environment(environ, plan))
    except OSError as exc:
        with suppress(OutputFailed):
            write_stream(2, f"launcher: cannot execute {plan.argv[0]}: {exc}\n", "")
        return contract.EXIT_EXEC_FAILED
