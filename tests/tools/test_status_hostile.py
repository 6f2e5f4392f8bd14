"""`python -m stacks status` against a cluster that lies, as an adversary makes it lie (issue 35): objects of someone
else's taken for the workload's, text that would forge the screen, malformed objects, messages built to make a
pattern scan for minutes. Offline, on synthetic objects shaped as `oc get -o json` prints them (tests/tools/cluster.py)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stacks
from cli.main import main
from components.bandwidth import job_name
from config import project
from tests import fixtures
from tests.tools.cluster import (
    Obj,
    complete,
    condition,
    declared,
    event,
    kueue_workload,
    node,
    pending,
    pod,
    running,
    stranded_workload,
    uid,
)
from tools import kubectl
from tools.status import queue, reasons
from tools.status import report as status
from tools.status.cluster import MATCHED_CHARS, Cluster, read_cluster

GPU_MSG = "0/7 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, 4 Insufficient nvidia.com/gpu. " \
    "preemption: 0/7 nodes are available: 7 No preemption victims found for incoming pod."  # fmt: skip
TAINT_MSG = "0/7 nodes are available: 4 node(s) had untolerated taint {maintenance: now}, 3 node(s) didn't match Pod's node " \
    "affinity/selector. preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling."  # fmt: skip
FORGED = "\x1b[2K\r\nlab (roce): everything declared running runs\x07\u202e"
"""What a container, a webhook or a colleague with edit rights writes where status quotes it: clear the line, start a
new one that says everything runs, ring, and reverse what follows."""


def run(config: Any, *objects: Obj, logs: dict[str, str] | None = None) -> status.StackStatus:
    return status.stack_status(config, "lab", None, list(objects), logs)


def of(result: status.StackStatus, name: str) -> status.WorkloadStatus:
    return next(w for w in result.workloads if w.config.endswith(f"[{name}]"))


def helm_pod(name: str, namespace: str, instance: str, node_name: str = "node-c", gpus: int = 0) -> Obj:
    """A Ready pod of a Helm release named `instance`: Helm sets app.kubernetes.io/instance to its release's name, and
    its ReplicaSet controls it."""
    rs = f"{instance}-7d9f8c6b5"
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid("Pod", namespace, name),
            "labels": {"app.kubernetes.io/instance": instance, "app.kubernetes.io/name": instance, "app.kubernetes.io/managed-by": "Helm"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": uid("ReplicaSet", rs), "controller": True}
            ],
        },
        "spec": {"nodeName": node_name, "containers": [{"name": "web", "image": "quay.io/example/web:1", "resources": resources}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]},
    }


# --- another object taken for the workload's ----------------------------------------------------------------------


class TestOwnership:
    def test_a_ready_pod_of_a_same_named_helm_release_is_not_the_workloads(self) -> None:
        # The attack: the training pods are Pending, a Helm release `dev` in the namespace runs two Ready pods.
        config, objs, rest = running()
        pods = [p for p in rest if not p["metadata"]["name"].startswith("dev-")]
        pods += [pending(objs["dev"], 0, GPU_MSG), pending(objs["dev"], 1, GPU_MSG)]
        helm = [helm_pod("dev-web-1", "team-a", "dev"), helm_pod("dev-web-2", "team-a", "dev")]
        result = run(config, *objs.values(), *pods, *helm)
        dev = of(result, "dev")
        assert (dev.state, dev.ready, dev.ok, result.ok) == ("pending", 0, False, False)
        assert dev.reasons[0].startswith("2 of 2 pods pending: no node of main has 4 free GPUs")
        assert status.report(result).startswith("lab (roce): not everything runs\n")

    def test_a_stopped_workload_is_not_said_to_have_pods_left_for_a_helm_releases(self) -> None:
        config, objs, rest = running(edit=lambda d: fixtures.workload(d, "solo").update(state="stopped"))
        objs["solo"]["spec"]["replicas"] = 0
        pods = [p for p in rest if not p["metadata"]["name"].startswith("solo-")] + [helm_pod("solo-web", "team-b", "solo")]
        solo = of(run(config, *objs.values(), *pods), "solo")
        assert (solo.state, solo.reasons) == ("stopped", [])

    def test_a_pod_that_only_carries_the_jobs_labels_is_not_the_jobs(self) -> None:
        config, objs, rest = running()
        forged = copy.deepcopy(next(p for p in rest if p["metadata"]["name"].startswith("train-r1-0")))
        forged["metadata"].update(name="train-r1-by-hand", uid=uid("by hand"), ownerReferences=[])
        forged["metadata"]["labels"].pop("batch.kubernetes.io/controller-uid", None)
        pods = [p for p in rest if not p["metadata"]["name"].startswith("train-r1-1")] + [forged]
        train = of(run(config, *objs.values(), *pods), "train")
        assert (train.ready, train.ok) == (1, False), train

    def test_a_jobs_pod_is_known_by_its_controller_uid_label_too(self) -> None:
        config, objs, rest = running()
        for p in rest:  # pods the Job controller labelled, whose owner reference a client stripped
            if p["metadata"]["name"].startswith("train-r1-"):
                p["metadata"]["ownerReferences"] = []
        assert of(run(config, *objs.values(), *rest), "train").ok

    def test_the_pods_of_a_former_statefulset_of_the_same_name_are_not_the_current_ones(self) -> None:
        config, objs, rest = running()
        old = declared(config, generation="0")["dev"]  # replaced: its pods, Ready, linger while they terminate
        pods = [p for p in rest if not p["metadata"]["name"].startswith("dev-")]
        pods += [pod(old, 0, "node-a"), pod(old, 1, "node-b"), pending(objs["dev"], 0, GPU_MSG), pending(objs["dev"], 1, GPU_MSG)]
        assert of(run(config, *objs.values(), *pods), "dev").ready == 0

    @pytest.mark.parametrize("old_first", [True, False])
    def test_the_kueue_workload_is_the_current_statefulsets_not_a_former_ones(self, old_first: bool) -> None:
        config = _queued()
        objs = declared(config, generation="2")
        former = declared(config, generation="1")["dev"]
        admitted = kueue_workload(former, condition("QuotaReserved", "True"), condition("Admitted", "True"))
        short = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor roce-main, 4 more needed"
        waiting = kueue_workload(objs["dev"], condition("QuotaReserved", "False", "Pending", short))
        order = [admitted, waiting] if old_first else [waiting, admitted]
        dev = of(run(config, *objs.values(), *order), "dev")
        assert dev.queue is not None and dev.queue.admission == "waiting" and dev.queue.workload == waiting["metadata"]["name"]
        assert dev.reasons == ["waiting in queue gpu: needs 4 more nvidia.com/gpu than the queue has free on node set main"]

    def test_an_event_of_a_former_pod_of_the_same_name_is_not_the_new_pods_reason(self) -> None:
        config, objs, rest = running()
        pods = [p for p in rest if p["metadata"]["name"] != "dev-1"]
        new = pending(objs["dev"], 1, "")  # the condition without its message: the events say why
        former = copy.deepcopy(new)
        former["metadata"]["uid"] = uid("the pod before")
        events = [
            event(new, "FailedScheduling", TAINT_MSG, at="2026-11-25T10:00:00Z"),
            event(former, "FailedScheduling", GPU_MSG, at="2026-11-25T10:05:00Z"),  # newer, of the pod replaced
        ]
        dev = of(run(config, *objs.values(), *pods, new, *events), "dev")
        assert "taint" in dev.reasons[0] and "free GPUs" not in dev.reasons[0], dev.reasons

    def test_a_warning_of_a_former_pod_of_the_same_name_is_not_the_new_pods_reason(self) -> None:
        config, objs, rest = running()
        new = pod(objs["dev"], 1, "node-b", ready=False, phase="Pending")
        former = copy.deepcopy(new)
        former["metadata"]["uid"] = uid("the pod before")
        pods = [p for p in rest if p["metadata"]["name"] != "dev-1"]
        dev = of(run(config, *objs.values(), *pods, new, event(former, "FailedMount", "MountVolume.SetUp failed")), "dev")
        assert not any("FailedMount" in r for r in dev.reasons), dev.reasons

    def test_a_refusal_of_a_former_statefulset_of_the_same_name_is_not_the_current_ones(self) -> None:
        config, objs, rest = running()
        former = declared(config, generation="0")["dev"]
        pods = [p for p in rest if not p["metadata"]["name"].startswith("dev-")]
        quota = "pods \"dev-0\" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=4, used: " \
            "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=0"  # fmt: skip
        dev = of(run(config, *objs.values(), *pods, event(former, "FailedCreate", quota)), "dev")
        assert dev.reasons == ["2 of 2 pods not created: not created yet (no event says why)"]
        now = of(run(config, *objs.values(), *pods, event(objs["dev"], "FailedCreate", quota)), "dev")
        assert now.reasons[0].startswith("2 of 2 pods not created: the quota gpus of namespace team-a is full")

    def test_gpus_a_helm_release_holds_are_not_charged_to_the_workload_of_its_name(self) -> None:
        config, objs, rest = running()
        pods = [p for p in rest if p["metadata"]["name"] != "dev-1"] + [pending(objs["dev"], 1, GPU_MSG)]
        pods += [helm_pod("solo-a", "team-b", "solo", "node-c", gpus=4), helm_pod("solo-b", "team-b", "solo", "node-d", gpus=4)]
        reason = of(run(config, *objs.values(), *pods), "dev").reasons[0]
        assert "in use by ada, pods of team-b" in reason and "bob" not in reason, reason


def _queued() -> Any:
    """The roce fixture on a queued cluster: a ClusterQueue `gpu`, each node set labelled and stating its CPU and memory."""

    def edit(d: dict[str, Any]) -> None:
        d["queueing"] = {"cluster_queue": "gpu"}
        for s in d["node_sets"]:
            s.update(allocatable_cpu="64", allocatable_memory="512Gi", labels={"gpu-pool": s["name"]})

    return fixtures.config("roce", edit)


# --- text from the cluster never reaches the terminal raw ---------------------------------------------------------

RAW = ("\x1b", "\x07", "\r", "\u202e")


def _terminated(message: str = "", reason: str = "Error") -> dict[str, Any]:
    return {"state": {"terminated": {"exitCode": 1, "reason": reason, "message": message}}}


def _hostile(where: str) -> tuple[Any, list[Obj], dict[str, str]]:
    """A cluster where `where` holds FORGED, everything else as declared running (the check Complete)."""
    config, objs, rest = running()
    logs: dict[str, str] = {}
    failing = pod(objs["dev"], 1, "node-b", ready=False, **_terminated())
    if where == "termination message":
        failing = pod(objs["dev"], 1, "node-b", ready=False, **_terminated(message=FORGED))
    elif where == "exit reason":
        failing = pod(objs["dev"], 1, "node-b", ready=False, **_terminated(reason=FORGED))
    elif where == "waiting reason":
        failing = pod(objs["dev"], 1, "node-b", ready=False, state={"waiting": {"reason": FORGED, "message": "m"}})
    elif where == "waiting message":
        failing = pod(objs["dev"], 1, "node-b", ready=False, state={"waiting": {"reason": "CreateContainerError", "message": FORGED}})
    elif where == "image":
        failing = pod(objs["dev"], 1, "node-b", ready=False, state={"waiting": {"reason": "ImagePullBackOff", "message": "back-off"}})
        failing["status"]["containerStatuses"][0]["image"] = FORGED
    elif where == "event":
        failing = pod(objs["dev"], 1, "node-b", ready=False, phase="Pending")
        rest.append(event(failing, FORGED, FORGED))
    elif where == "scheduler message":
        failing = pending(objs["dev"], 1, FORGED)
    elif where == "taint":  # the scheduler's reasons are one per line: the escapes, without the line break
        failing = pending(objs["dev"], 1, TAINT_MSG.replace("maintenance: now", FORGED.replace("\r\n", "")))
        rest = [p for p in rest if p["kind"] != "Node"]
    elif where == "node":
        failing = pending(objs["dev"], 1, TAINT_MSG)
        for n in rest:
            if n["kind"] == "Node" and n["metadata"]["name"] == "node-b":
                n["spec"]["taints"] = [{"key": FORGED, "value": FORGED, "effect": "NoSchedule"}]
    elif where == "failed job":
        objs["train-r1"]["status"] = {"failed": 1, "conditions": [condition("Failed", "True", FORGED, FORGED)]}
        failing = pod(objs["dev"], 1, "node-b")
    elif where == "quota":
        failing = pod(objs["dev"], 1, "node-b")
        rest = [p for p in rest if not p["metadata"]["name"].startswith("solo-")]
        rest.append(event(objs["solo"], "FailedCreate", f"exceeded quota: {FORGED}, requested: {FORGED}, used: x, limited: y"))
    elif where == "log":
        failing = pod(objs["dev"], 1, "node-b")
        check = config.enabled_checks()[0]
        logs[f"{check.namespace}/{job_name(config, check)}"] = f"bandwidth check: FAIL {FORGED}\n  measured: {FORGED}\n"
    pods = [p for p in rest if p["metadata"]["name"] != "dev-1"] + [failing]
    return config, [*objs.values(), *pods], logs


WHERE = ["termination message", "exit reason", "waiting reason", "waiting message", "image", "event", "scheduler message",
         "taint", "node", "failed job", "quota", "log"]  # fmt: skip


@pytest.mark.parametrize("where", WHERE)
def test_what_the_cluster_says_is_shown_escaped_and_never_forges_a_line(where: str) -> None:
    config, objects, logs = _hostile(where)
    result = status.stack_status(config, "lab", None, objects, logs)
    text = status.report(result)
    assert not any(c in text for c in RAW), repr(text)
    lines = text.splitlines()
    head = "lab (roce): everything declared running runs" if result.ok else "lab (roce): not everything runs"
    assert lines[0] == head and sum(line.startswith("lab (roce)") for line in lines) == 1, text
    assert "\\x1b" in text, f"the {where} is not in the report at all: {text}"
    # JSON stays JSON, with the raw value.
    raw = json.loads(result.model_dump_json())
    values = [r for w in [*raw["workloads"], *raw["checks"]] for r in [*w["reasons"], w.get("verdict") or ""]]
    assert any("\x1b" in v for v in values), values


def test_what_could_not_be_read_is_shown_escaped() -> None:
    config, objs, rest = running()
    result = status.stack_status(config, "lab", None, [*objs.values(), *rest], unreadable=[f"nodes ({FORGED})"])
    text = status.report(result)
    assert "\x1b" not in text and "\n  not read: nodes (\\x1b[2K\\r\\nlab (roce): everything declared running runs\\x07\\u202e)\n" in text


def test_a_log_line_without_one_valid_utf8_byte_is_read_and_shown(tmp_path: Path) -> None:
    # The realistic one: `oc logs` of a bandwidth check passes on whatever bytes its pod wrote.
    config, objs, rest = running()
    check = config.enabled_checks()[0]
    tool = fake_oc(tmp_path, [*objs.values(), *rest], logs=b"bandwidth check: PASS (mode rdma) \xff\xfe\x1b[31m\n")
    objects, logs, unreadable = read_cluster(config, None, tool)
    result = status.stack_status(config, "lab", None, objects, logs, unreadable)
    verdict = result.checks[0].verdict
    assert verdict is not None and verdict.startswith("bandwidth check: PASS (mode rdma) \ufffd\ufffd")
    assert "bandwidth check: PASS (mode rdma) \ufffd\ufffd\\x1b[31m" in status.report(result)
    calls = (tmp_path / "calls").read_text(encoding="utf-8")
    assert f"logs -n {check.namespace} job/{job_name(config, check)} --tail=400 --limit-bytes=" in calls


# --- malformed cluster state: one line, exit 2, never a traceback -------------------------------------------------


def fake_oc(folder: Path, objects: list[Obj], answer: bytes | None = None, logs: bytes = b"") -> str:
    """An `oc` that answers every `get` with the objects as a List (or `answer`, bytes as they are), `logs` with
    `logs`, and records its calls."""
    (folder / "objects.json").write_text(json.dumps(objects), encoding="utf-8")
    (folder / "answer.bin").write_bytes(answer if answer is not None else b"")
    (folder / "logs.bin").write_bytes(logs)
    script = folder / "oc"
    script.write_text(
        f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
open({str(folder / "calls")!r}, "a").write(" ".join(args) + "\\n")
if args[0] == "logs":
    sys.stdout.buffer.write(open({str(folder / "logs.bin")!r}, "rb").read()); sys.exit(0)
answer = open({str(folder / "answer.bin")!r}, "rb").read()
if answer:
    sys.stdout.buffer.write(answer); sys.exit(0)
items = json.load(open({str(folder / "objects.json")!r}))
ns = args[args.index("-n") + 1] if "-n" in args else None
kind = args[1]
items = [o for o in items if (o["kind"] == "Node") == (kind == "nodes") and (ns is None or o["metadata"].get("namespace") == ns)]
print(json.dumps({{"kind": "List", "items": items}}))
""",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"<html>502 Bad Gateway</html>", "not valid JSON"),
        (b"[1, 2]", "not a Kubernetes object or List"),
        (b'{"kind": "List", "items": 3}', "items of the List is a number, not a list of objects"),
        (b'{"kind": "List", "items": [3]}', "item 0 is a number, not a Kubernetes object"),
        (b"[" * 100_000 + b"]" * 100_000, "nested more than 64 levels deep"),
        (b'{"kind": "Pod", "metadata": {"name": "\xff"}, "spec": 3}', "spec is a number, not a mapping"),
        (b'{"kind": "List", "items": [{"kind": "Job", "metadata": {"name": "x"}, "status": {"succeeded": 1' + b"0" * 5000 + b"}}]}",
         "not valid JSON"),
    ],
)  # fmt: skip
def test_an_answer_of_oc_that_is_no_list_of_objects_is_one_error(tmp_path: Path, answer: bytes, said: str) -> None:
    config, objs, rest = running()
    with pytest.raises(stacks.ConfigError, match=said):
        read_cluster(config, None, fake_oc(tmp_path, [*objs.values(), *rest], answer=answer))


MALFORMED = [
    ("a 400-digit quantity", lambda o: _node(o)["status"]["allocatable"].update({"nvidia.com/gpu": "9" * 400}),
     "status.allocatable[nvidia.com/gpu] is 400 characters long, not a quantity"),
    ("a negative count", lambda o: o["train-r1"].update(status={"succeeded": -(10**13)}),
     "status.succeeded is -10000000000000, not a count"),
    ("a huge count", lambda o: o["train-r1"].update(status={"succeeded": 10**13}), "status.succeeded is 10000000000000, not a count"),
    ("a count as text", lambda o: o["dev"].update(spec={**o["dev"]["spec"], "replicas": "2"}), "spec.replicas is text, not a count"),
    ("labels as a list", lambda o: _pod(o)["metadata"].update(labels=["a"]), "metadata.labels is a list, not a mapping"),
    ("an owner as text", lambda o: _pod(o)["metadata"].update(ownerReferences=["dev"]), "metadata.ownerReferences[0] is text"),
    ("containers as a mapping", lambda o: _pod(o)["spec"].update(containers={"a": 1}), "spec.containers is a mapping, not a list"),
    ("a condition as text", lambda o: _pod(o)["status"].update(conditions=["Ready"]), "status.conditions[0] is text, not a mapping"),
    ("an exit code as text", lambda o: _pod(o)["status"]["containerStatuses"][0].update(state={"terminated": {"exitCode": "1"}}),
     "exitCode is text, not a whole number"),
    ("restarts as a number", lambda o: _pod(o)["status"]["containerStatuses"][0].update(restartCount=1.5),
     "restartCount is a number, not a count"),
    ("taints as a mapping", lambda o: _node(o)["spec"].update(taints={"k": "v"}), "spec.taints is a mapping, not a list"),
    ("an event about text", lambda o: o["event"].update(involvedObject="dev-0"), "involvedObject is text, not a mapping"),
    ("metadata as a list", lambda o: _pod(o).update(metadata=[]), "metadata is a list, not a mapping"),
    ("a kind as a number", lambda o: _pod(o).update(kind=3), "kind is a number, not text"),
]  # fmt: skip


def _pod(objects: dict[str, Any]) -> Obj:
    return next(p for p in objects["rest"] if p["kind"] == "Pod")  # type: ignore[no-any-return]


def _node(objects: dict[str, Any]) -> Obj:
    return next(p for p in objects["rest"] if p["kind"] == "Node")  # type: ignore[no-any-return]


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose Pulumi stack `lab` deploys a YAML copy of the roce fixture (named lab) to context `lab`."""
    data = fixtures.roce()
    data["name"] = "lab"
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    stack = {"gpu-training:configFile": "lab.yaml", "gpu-training:tier": "project", "kubernetes:context": "lab"}
    (tmp_path / "Pulumi.lab.yaml").write_text(yaml.safe_dump({"config": stack}), encoding="utf-8")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    return tmp_path


@pytest.mark.parametrize(("case", "edit", "said"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_object_is_one_line_exit_2_never_a_traceback(
    lab: Path, case: str, edit: Any, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config, objs, rest = running()
    parts: dict[str, Any] = {**objs, "rest": rest, "event": event(rest[0], "BackOff", "Back-off restarting failed container")}
    edit(parts)
    objects = [*objs.values(), *rest, parts["event"]]
    with pytest.raises(stacks.ConfigError, match="not an object as the API server returns it"):
        run(config, *objects)
    live = lab / "live.json"
    live.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
    assert main(["status", "lab", "--live", str(live)]) == 2  # never 1: that is "not running"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {live}: ") and said in err, err


# Values a malformed object may hold anywhere: wrong types, huge and negative numbers, long and hostile text.
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "x", "9" * 400, FORGED, "-1", "1e400", "Running", "True", "Insufficient nvidia.com/gpu"]),
    st.lists(st.sampled_from([None, 1, "x", {}]), max_size=3),
    st.dictionaries(st.sampled_from(["name", "kind", "uid", "type", "status"]), st.sampled_from([None, 1, "x", [], {}]), max_size=3),
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


def _fuzz_cluster() -> tuple[Any, list[Obj]]:
    config = _queued()
    objs = declared(config)
    objects: list[Obj] = [*objs.values(), pod(objs["dev"], 0, "node-a"), pending(objs["dev"], 1, GPU_MSG)]
    objects += [pod(objs["solo"], 0, "node-g", ready=False, state={"waiting": {"reason": "CrashLoopBackOff"}},
                    lastState={"terminated": {"exitCode": 137, "reason": "OOMKilled"}})]  # fmt: skip
    objects += [
        node("node-a"),
        node("node-g"),
        event(objs["dev"], "FailedCreate", "exceeded quota: q, requested: a=1, used: a=1, limited: a=1"),
    ]
    objects += [kueue_workload(objs["train-r1"], condition("QuotaReserved", "False", "Pending", "insufficient quota for x in flavor y"))]
    objects += [stranded_workload(objs["dev"], uid("StatefulSet", "gone"), name="statefulset-gone-1")]  # kueue#12232
    objects += [{"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {},
                 "items": [{"metadata": {"name": "w", "namespace": "team-a"}, "positionInClusterQueue": 0}]}]  # fmt: skip
    complete(objs[job_name(config, config.enabled_checks()[0])])
    return config, objects


FUZZ_CONFIG, FUZZ_OBJECTS = _fuzz_cluster()
FUZZ_PATHS = [p for p in _paths(FUZZ_OBJECTS) if len(p) > 1]


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(FUZZ_PATHS), JUNK), min_size=1, max_size=3))
def test_any_object_mutated_anywhere_is_read_or_refused_in_one_line(edits: list[tuple[tuple[Any, ...], Any]]) -> None:
    objects = copy.deepcopy(FUZZ_OBJECTS)
    for path, value in edits:
        target: Any = objects
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = copy.deepcopy(value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit changed the shape above this path
    try:
        result = status.stack_status(FUZZ_CONFIG, "lab", None, objects)
    except stacks.ConfigError as err:
        assert "\n" not in str(err) and "\x1b" not in str(err)
        return
    text = status.report(result)
    assert not any(c in text for c in RAW)
    json.loads(result.model_dump_json())


# --- messages built to make a pattern scan for minutes ------------------------------------------------------------


class Recorder:
    """Stands in for the `re` module of a module of tools/status: records the length of every text a pattern is run on
    (the work of a linear pattern is bounded by it)."""

    def __init__(self, real: Any) -> None:
        self.real, self.longest, self.calls = real, 0, 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.real, name)
        if not callable(target) or name in ("escape", "compile"):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            texts = [a for a in args if isinstance(a, str)]
            self.calls += 1
            self.longest = max(self.longest, len(texts[-1]) if texts else 0)
            return target(*args, **kwargs)

        return call


MEGABYTE = 1024 * 1024
LONG = {
    "scheduler": "0/9 nodes are available: " + "9 node(s) had untolerated taint {" * (MEGABYTE // 34),
    "queue, quota": "couldn't assign flavors to pod set main: " + "insufficient quota for a in flavor b, " * (MEGABYTE // 38),
    "queue, unused": "insufficient unused quota for " * (MEGABYTE // 30),
    "admission quota": "exceeded quota: q, requested: r" + ", used: x" * (MEGABYTE // 9),
    "admission scc": "unable to validate against any security context constraint: " + "x" * MEGABYTE,
}


def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Recorder]:
    """Every pattern tools/status runs, recorded: its modules match with `re`'s functions (no pattern compiled aside)."""
    recorders = [Recorder(reasons.re), Recorder(queue.re)]
    monkeypatch.setattr(reasons, "re", recorders[0])
    monkeypatch.setattr(queue, "re", recorders[1])
    return recorders


@pytest.mark.parametrize("kind", list(LONG))
def test_a_megabyte_message_is_matched_within_a_bounded_prefix(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config, objs, rest = running()
    recorders = recorded(monkeypatch)
    message = LONG[kind]
    subject = reasons.Subject(("workloads", 0), config.workloads[0], "dev")
    if kind == "scheduler":
        said = reasons.unschedulable(config, subject, message, Cluster([]))
    elif kind.startswith("queue"):
        said = queue.queue_reason(config, message)
    else:
        said = reasons.refused(config, subject, message, Cluster([]))
    assert sum(r.calls for r in recorders) > 0
    assert max(r.longest for r in recorders) <= MATCHED_CHARS
    assert len(said) < 2 * MATCHED_CHARS


def test_a_megabyte_pod_status_is_read_with_bounded_work(monkeypatch: pytest.MonkeyPatch) -> None:
    config, objs, rest = running()
    recorders = recorded(monkeypatch)
    pods = [p for p in rest if p["metadata"]["name"] != "dev-1"] + [pending(objs["dev"], 1, LONG["scheduler"])]
    pods.append(event(objs["solo"], "FailedCreate", LONG["admission quota"]))
    result = run(config, *objs.values(), *pods)
    assert max(r.longest for r in recorders) <= MATCHED_CHARS and not result.ok
    assert max(len(r) for w in result.workloads for r in w.reasons) < 2 * MATCHED_CHARS


def test_the_shapes_cover_every_kind_status_reads() -> None:
    read = {"Pod", "Node", "StatefulSet", "Job", "Event", "Workload", "PendingWorkloadsSummary"}
    assert read <= set(kubectl.SHAPES)
