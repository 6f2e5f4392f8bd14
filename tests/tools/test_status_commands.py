"""Every command `python -m stacks status` prints for the user to run names where it read: an `oc` command the kube
context (`oc --context CONTEXT ...`), a command of the program's or Pulumi's the stack, so that pasting it acts on the
cluster the status is of, not on whichever one the kubeconfig's current context is (issue 43)."""

from __future__ import annotations

import re
import shlex

import pytest

from tests import fixtures
from tests.tools.cluster import condition, declared, event, kueue_workload, pending, pod, running, stranded_workload
from tools.status import report as status

CONTEXT = "nerc-prod"
SCC_DENIED = 'pods "dev-0" is forbidden: unable to validate against any security context constraint: [provider "gpu-rdma": ' \
    "Forbidden: not usable by user or serviceaccount]"  # fmt: skip
TAINTED = "0/9 nodes are available: 4 node(s) had untolerated taint(s), 5 node(s) didn't match Pod's node affinity/selector."
WAITING = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor roce-spare, 4 more needed"


def commands(text: str) -> list[list[str]]:
    """The commands a report quotes (between backticks) that run `oc`, the program or `pulumi up`, as a shell splits them."""
    quoted = re.findall(r"`([^`]+)`", text)
    return [shlex.split(c) for c in quoted if c.startswith(("oc ", "python -m stacks drift", "pulumi up"))]


def hand_made() -> str:
    """A report whose reasons print each kind of command: an SCC grant for an admin, a build to look at, the nodes to
    describe, a Workload to delete, a drift to read, an `up` to run."""
    config = fixtures.queued_config("roce", lambda d: d["security"].update(grant=False))
    objs = declared(config)
    objs["dev"]["spec"]["replicas"] = 1  # scaled by hand: drift says what; its pod 1 is refused by the SCC admission
    pull = {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "back-off"}}}
    admitted = [condition(k, "True") for k in ("QuotaReserved", "Admitted", "PodsReady")]
    objects = [*objs.values(), pod(objs["dev"], 0, "node-a", ready=False, **pull), event(objs["dev"], "FailedCreate", SCC_DENIED)]
    objects += [kueue_workload(objs[name], *admitted) for name in ("dev", "solo")] + [pending(objs["solo"], 0, TAINTED)]
    stopped = objs["dev-tcp"]  # at 0 replicas, its Workload left holding the queue's quota
    objects += [stranded_workload(stopped, stopped["metadata"]["uid"], name="statefulset-dev-tcp-1")]
    objects.remove(objs[next(n for n in objs if n.startswith("fabric-"))])  # the check's Job deleted: `up` makes it again
    return status.report(status.stack_status(config, "lab", CONTEXT, objects))


def test_every_command_printed_names_the_context_and_the_stack() -> None:
    text = hand_made()
    found = commands(text)
    oc = [c for c in found if c[0] == "oc"]
    assert {c[3] for c in oc} == {"adm", "get", "describe", "delete"}, text
    assert all(c[1:3] == ["--context", CONTEXT] for c in oc), text
    assert ["oc", "--context", CONTEXT, "delete", "workloads.kueue.x-k8s.io", "statefulset-dev-tcp-1", "-n", "team-a"] in oc
    assert ["oc", "--context", CONTEXT, "get", "builds", "-n", "team-a"] in oc
    assert ["python", "-m", "stacks", "drift", "lab"] in found and ["pulumi", "up", "-s", "lab"] in found
    assert all(c[-2:] == ["-s", "lab"] or c[-1] == "lab" for c in found if c[0] != "oc"), text


@pytest.mark.parametrize(
    ("context", "head"),
    [(None, ["oc", "adm"]), ("it's $(quoted)", ["oc", "--context", "it's $(quoted)", "adm"])],
    ids=["current", "quoted"],
)
def test_the_current_context_is_named_by_none_and_a_context_is_quoted(context: str | None, head: list[str]) -> None:
    config, objs, rest = running(edit=lambda d: d["security"].update(grant=False))
    rest = [p for p in rest if not p["metadata"]["name"].startswith("dev-")]
    refused = event(objs["dev"], "FailedCreate", SCC_DENIED)
    (command,) = [
        c for c in commands(status.report(status.stack_status(config, "lab", context, [*objs.values(), *rest, refused]))) if c[0] == "oc"
    ]
    assert command[: len(head)] == head
