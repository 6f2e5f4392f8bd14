"""`python -m stacks status` on a queued stack, over synthetic Kueue Workloads shaped as Kueue v0.17.0 writes them: a
workload waiting in the queue with its position and why, in the stack file's words; one that can never be admitted;
admitted, evicted and finished runs; a stopped run's Workload Kueue left holding quota, and never another owner's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import stacks
from cli.main import main
from config import project
from config.stack import ClusterConfig
from tests import fixtures
from tests.fixtures import Data, queued_config
from tests.helpers import ROOT
from tests.tools import cluster as fake
from tests.tools.cluster import stranded_workload
from tests.tools.test_status import declared, node, pod
from tools.status import report as status
from tools.status.cluster import Cluster
from tools.status.queue import queue_reason

WAITING = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor roce-main, 4 more needed"


def kueue_workload(owner: Data, *conditions: Data, name: str | None = None) -> Data:
    """A Kueue Workload as Kueue v0.17.0 makes one for a StatefulSet or Job: owned by it, with its conditions."""
    meta = owner["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name or f"{owner['kind'].lower()}-{meta['name']}-3f2a1",
            "namespace": meta["namespace"],
            "ownerReferences": [
                {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": "u1", "controller": True}
            ],
        },
        "spec": {"queueName": "gpu-training"},
        "status": {"conditions": list(conditions)},
    }


def condition(kind: str, state: str, reason: str = "", message: str = "") -> Data:
    return {"type": kind, "status": state, "reason": reason, "message": message}


def pending_summary(*names: tuple[str, str, int]) -> Data:
    """What Kueue's visibility API answers for a LocalQueue's pendingworkloads (v1beta2 PendingWorkloadsSummary)."""
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": n, "namespace": ns},
                "priority": 0,
                "localQueueName": "gpu-training",
                "positionInClusterQueue": p,
                "positionInLocalQueue": p,
            }
            for n, ns, p in names
        ],
    }


def gated(owner: Data, index: int) -> Data:
    p = pod(owner, index, node=None, ready=False, phase="Pending")
    p["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    p["status"]["conditions"].append(
        condition("PodScheduled", "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
    )
    return p


class TestStatus:
    def cluster(self) -> tuple[ClusterConfig, dict[str, Data]]:
        c = queued_config("roce")
        return c, declared(c)

    def test_waiting_in_the_queue_with_its_position_and_why_in_the_stack_files_words(self) -> None:
        c, objs = self.cluster()
        wl = kueue_workload(objs["dev"], condition("QuotaReserved", "False", "Pending", WAITING))
        extra = [
            wl,
            pending_summary(("other", "team-a", 0), (wl["metadata"]["name"], "team-a", 1)),
            gated(objs["dev"], 0),
            gated(objs["dev"], 1),
        ]
        result = status.stack_status(c, "lab", None, [*objs.values(), *extra])
        dev = next(w for w in result.workloads if w.config == "workloads[dev]")
        assert dev.state == "pending" and not dev.ok and dev.ready == 0 and dev.wanted == 2
        assert dev.reasons == ["waiting in queue gpu (position 2): needs 4 more nvidia.com/gpu than the queue has free on node set main"]
        assert dev.queue is not None and (dev.queue.admission, dev.queue.position, dev.queue.workload) == (
            "waiting",
            2,
            wl["metadata"]["name"],
        )
        assert "workloads[dev]: pending, 0/2 pods ready: waiting in queue gpu (position 2): needs 4 more nvidia.com/gpu" in status.report(
            result
        )

    def test_the_position_is_not_made_up_when_it_could_not_be_read(self) -> None:
        c, objs = self.cluster()
        wl = kueue_workload(objs["solo"], condition("QuotaReserved", "False", "Pending", WAITING.replace("roce-main", "roce-spare")))
        solo = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), wl]).workloads if w.config == "workloads[solo]")
        assert solo.reasons == ["waiting in queue gpu: needs 4 more nvidia.com/gpu than the queue has free on node set spare"]
        assert solo.queue is not None and solo.queue.position is None

    def test_a_workload_that_can_never_be_admitted_and_other_kueue_reasons(self) -> None:
        c = queued_config("roce")
        never = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor roce-main, previously " \
            "considered podsets requests (0) + current podset request (8) > maximum capacity (4)"  # fmt: skip
        assert queue_reason(c, never).startswith("asks for 8 nvidia.com/gpu, more than node set main holds in the queue (4)")
        assert queue_reason(c, "couldn't assign flavors to pod set main: resource example.com/fpga unavailable in ClusterQueue") == (
            "requests example.com/fpga, which the queue does not cover (queueing.quota)"
        )
        assert queue_reason(c, "LocalQueue gpu-training doesn't exist") == "Kueue says: LocalQueue gpu-training doesn't exist"

    def test_admitted_runs_are_counted_as_before_with_the_pods_ready_timeout(self) -> None:
        c, objs = self.cluster()
        wl = kueue_workload(objs["dev"], condition("QuotaReserved", "True"), condition("Admitted", "True"))
        pods = [pod(objs["dev"], 0, "node-a"), pod(objs["dev"], 1, "node-b", ready=False)]
        dev = next(
            w
            for w in status.stack_status(c, "lab", None, [*objs.values(), wl, *pods, node("node-a")]).workloads
            if w.config == "workloads[dev]"
        )
        assert dev.queue is not None and dev.queue.admission == "admitted" and dev.ready == 1
        assert dev.reasons[0] == (
            "admitted by queue gpu; Kueue evicts it and queues it again if its pods are not all Ready within 5 minutes (waitForPodsReady)"
        )
        wl["status"]["conditions"].append(condition("PodsReady", "True"))
        pods[1] = pod(objs["dev"], 1, "node-b")
        dev = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), wl, *pods]).workloads if w.config == "workloads[dev]")
        assert dev.ok and dev.state == "running" and dev.reasons == []

    def test_evicted_for_pods_not_ready(self) -> None:
        c, objs = self.cluster()
        wl = kueue_workload(
            objs["dev"],
            condition("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout default/dev"),
            condition("QuotaReserved", "False", "Pending", WAITING),
        )
        dev = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), wl]).workloads if w.config == "workloads[dev]")
        assert dev.reasons[0].startswith("waiting in queue gpu: evicted: its pods were not all Ready within 5 minutes (waitForPodsReady)")
        assert dev.reasons[0].endswith("; needs 4 more nvidia.com/gpu than the queue has free on node set main")

    def test_no_kueue_workload_says_what_to_look_at(self) -> None:
        c, objs = self.cluster()
        train = next(w for w in status.stack_status(c, "lab", None, list(objs.values())).workloads if w.config == "workloads[train]")
        assert train.queue is not None and train.queue.admission == "unknown" and not train.ok
        assert "Kueue made no Workload for its Job" in train.reasons[0] and "kueue.openshift.io/managed=true" in train.reasons[0]

    def test_a_finished_job_is_not_in_the_queue_any_more(self) -> None:
        c, objs = self.cluster()
        job = objs["train-r1"]
        job["status"] = {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}
        wl = kueue_workload(job, condition("Admitted", "False", "NoReservation"), condition("Finished", "True", "Succeeded"))
        train = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), wl]).workloads if w.config == "workloads[train]")
        assert train.state == "succeeded" and train.ok

    def test_the_json_validates_and_a_stack_without_queueing_prints_no_queue(self) -> None:
        schema = json.loads((ROOT / "schemas" / "status.v1.json").read_text(encoding="utf-8"))
        assert schema == status.schema()
        c, objs = self.cluster()
        result = status.stack_status(
            c, "lab", None, [*objs.values(), kueue_workload(objs["dev"], condition("QuotaReserved", "False", "Pending", WAITING))]
        )
        jsonschema.validate(json.loads(result.model_dump_json()), schema)
        plain = fixtures.config("roce")
        printed = json.loads(status.stack_status(plain, "lab", None, list(declared(plain).values())).model_dump_json())
        jsonschema.validate(printed, schema)
        assert all("queue" not in w for w in printed["workloads"])


class TestStrandedWorkload:
    """Kueue v0.17.0 can leave a stopped StatefulSet's Workload admitted with no owner (kueue#12232, live/kueue.py): it holds
    its quota until someone deletes it, and the queue's next runs wait for good. `status` names it where it shows, with the
    command that frees it, and never takes a Workload Kueue still owns or is done with for one."""

    def cluster(self) -> tuple[ClusterConfig, dict[str, Data]]:
        c = queued_config("roce", lambda d: fixtures.workload(d, "dev").update(state="stopped"))
        objs = declared(c)
        objs["dev"]["metadata"]["uid"] = "sts-dev"
        assert objs["dev"]["spec"]["replicas"] == 0
        return c, objs

    def waiting(self, objs: dict[str, Data]) -> Data:
        return kueue_workload(objs["solo"], condition("QuotaReserved", "False", "Pending", WAITING.replace("roce-main", "roce-spare")))

    def test_a_stopped_statefulsets_workload_left_holding_quota_is_named_with_the_command_that_frees_it(self) -> None:
        c, objs = self.cluster()
        left = stranded_workload(objs["dev"], "sts-dev", name="statefulset-dev-8c1f2")
        result = status.stack_status(c, "lab", None, [*objs.values(), left, self.waiting(objs)])
        dev = next(w for w in result.workloads if w.config == "workloads[dev]")
        fix = "`oc delete workloads.kueue.x-k8s.io statefulset-dev-8c1f2 -n team-a`"
        assert dev.state == "stopped" and not dev.ok and not result.ok
        assert dev.reasons == [
            "its Kueue Workload statefulset-dev-8c1f2 in team-a still holds 8 nvidia.com/gpu of queue gpu with no owner left (a "
            "Kueue bug, kubernetes-sigs/kueue#12232, fixed after v0.17.0): nothing frees it and the queue's next runs wait for "
            f"it; a user allowed to delete Kueue Workloads there frees it: {fix}"
        ]
        solo = next(w for w in result.workloads if w.config == "workloads[solo]")
        assert solo.reasons[0].startswith(
            "waiting in queue gpu: needs 4 more nvidia.com/gpu than the queue has free on node set spare; Kueue Workload "
            "statefulset-dev-8c1f2 in team-a still holds 8 nvidia.com/gpu of queue gpu with no owner left"
        ) and solo.reasons[0].endswith(fix)
        assert "workloads[dev]: stopped: its Kueue Workload statefulset-dev-8c1f2" in status.report(result)
        schema = json.loads((ROOT / "schemas" / "status.v1.json").read_text(encoding="utf-8"))
        jsonschema.validate(json.loads(result.model_dump_json()), schema)

    def test_one_whose_statefulset_is_gone_is_named_too(self) -> None:
        c, objs = self.cluster()
        left = stranded_workload(objs.pop("dev"), "sts-dev")
        result = status.stack_status(c, "lab", None, [*objs.values(), left, self.waiting(objs)])
        dev = next(w for w in result.workloads if w.config == "workloads[dev]")
        assert not dev.ok and "kueue#12232" in dev.reasons[0]
        assert "kueue#12232" in next(w for w in result.workloads if w.config == "workloads[solo]").reasons[0]

    @pytest.mark.parametrize(
        "edit",
        [
            lambda wl, objs: wl["metadata"].update(ownerReferences=[{"kind": "StatefulSet", "name": "dev", "uid": "sts-dev"}]),
            lambda wl, objs: wl["metadata"].update(deletionTimestamp="2026-11-28T10:00:00Z"),
            lambda wl, objs: wl["status"].update(conditions=[condition("QuotaReserved", "False", "Pending")]),
            lambda wl, objs: wl["status"]["conditions"].append(condition("Finished", "True", "Succeeded")),
            lambda wl, objs: wl["metadata"].pop("labels"),
            lambda wl, objs: objs["dev"]["spec"].update(replicas=2),  # the stop not applied yet: Kueue gives the owner back
        ],
        ids=["still-owned", "being-deleted", "quota-released", "finished", "made-by-hand", "its-statefulset-runs"],
    )
    def test_a_workload_kueue_still_owns_or_is_done_with_is_never_called_stranded(self, edit: Any) -> None:
        c, objs = self.cluster()
        left = stranded_workload(objs["dev"], "sts-dev")
        edit(left, objs)
        result = status.stack_status(c, "lab", None, [*objs.values(), left, self.waiting(objs)])
        assert Cluster([*objs.values(), left]).stranded("team-a") == []
        dev = next(w for w in result.workloads if w.config == "workloads[dev]")
        assert dev.ok and dev.reasons == []
        assert "kueue#12232" not in status.report(result)

    @pytest.mark.parametrize("usage", ["9" * 400, "1e400", "-8", "eight", None, [], {"a": 1}])
    def test_what_it_holds_is_said_only_as_a_count_a_queue_can_hold(self, usage: Any) -> None:
        c, objs = self.cluster()
        left = stranded_workload(objs["dev"], "sts-dev", name="statefulset-dev-8c1f2")
        left["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {"nvidia.com/gpu": usage}
        dev = next(w for w in status.stack_status(c, "lab", None, [*objs.values(), left]).workloads if w.config == "workloads[dev]")
        assert not dev.ok and dev.reasons[0].startswith(
            "its Kueue Workload statefulset-dev-8c1f2 in team-a still holds quota of queue gpu with no owner left"
        )

    @pytest.mark.parametrize(
        ("edit", "blamed"),
        [
            (lambda wl: None, True),
            (lambda wl: wl["metadata"]["annotations"].update({"kueue.x-k8s.io/job-owner-gvk": "batch/v1, Kind=Job"}), False),
            (lambda wl: wl["metadata"]["annotations"].pop("kueue.x-k8s.io/job-owner-gvk"), False),
            (lambda wl: wl["metadata"]["annotations"].update({"kueue.x-k8s.io/job-owner-name": "dev-2"}), False),
            (lambda wl: wl["status"]["admission"].update(clusterQueue="rhoai-workbenches"), False),
            (lambda wl: wl["status"].pop("admission"), False),
        ],
        ids=["this-stacks", "a-jobs", "no-kind", "another-name", "another-queue", "no-queue"],
    )
    def test_with_its_statefulset_gone_only_kind_name_and_queue_say_whose_it_is(self, edit: Any, blamed: bool) -> None:
        c, objs = self.cluster()
        left = stranded_workload(objs.pop("dev"), "sts-dev", name="statefulset-dev-8c1f2")
        edit(left)
        result = status.stack_status(c, "lab", None, [*objs.values(), left])
        dev = next(w for w in result.workloads if w.config == "workloads[dev]")
        assert (dev.ok, "statefulset-dev-8c1f2" in " ".join(dev.reasons)) == (not blamed, blamed)


@pytest.fixture
def queued_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose Pulumi stack `lab` (context `lab`) deploys the roce fixture queued (ClusterQueue gpu), its Job
    `train` stopped and its bandwidth check off."""
    data = fixtures.queued(fixtures.roce())
    data["name"] = "lab"
    fixtures.workload(data, "train")["state"] = "stopped"
    data["bandwidth_checks"][0]["enabled"] = False
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (tmp_path / stacks.CLUSTERS).mkdir()
    (tmp_path / stacks.CLUSTERS / "lab.py").write_text("raise SystemExit('the YAML config is deployed')\n", encoding="utf-8")
    stack = {"gpu-training:configFile": "lab.yaml", "gpu-training:tier": "project", "kubernetes:context": "lab"}
    (tmp_path / "Pulumi.lab.yaml").write_text(yaml.safe_dump({"config": stack}), encoding="utf-8")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.delitem(sys.modules, f"{stacks.CLUSTERS}.lab", raising=False)
    return tmp_path


def running_queued_lab() -> list[Data]:
    """Everything `lab` declares running runs, admitted by its queue; the stopped Job `train` has left nothing."""
    objs = fake.declared(stacks.load("lab"))
    assert "train-r1" not in objs  # stopped: the Job is not declared, and not on the cluster
    admitted = [fake.condition(k, "True") for k in ("QuotaReserved", "Admitted", "PodsReady")]
    workloads = [fake.kueue_workload(objs[name], *admitted) for name in ("dev", "solo")]
    pods = [fake.pod(objs["dev"], 0, "node-a"), fake.pod(objs["dev"], 1, "node-b"), fake.pod(objs["solo"], 0, "node-g")]
    return [*objs.values(), *workloads, *pods]


def status_of(lab: Path, objects: list[Data], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    live = lab / "live.json"
    live.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
    code = main(["status", "lab", "--live", str(live)])
    return code, capsys.readouterr().out


class TestAnotherOwnersWorkload:
    """Issue 43, audit 5 item 1, as the audit did it: another owner's StatefulSet of the name of this stack's stopped Job
    (OpenShift AI stops a workbench so) is at 0 replicas, and its Workload, with no owner left, holds a GPU of another
    ClusterQueue. It is not this stack's: no word of it on the stopped Job, no `oc delete` for it, exit 0 as without it."""

    def test_a_workbenchs_stranded_workload_is_not_blamed_on_the_stopped_job(
        self, queued_lab: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        objects = running_queued_lab()
        assert status_of(queued_lab, objects, capsys)[0] == 0
        other = fake.workbench("train-r1", "team-a")
        held = stranded_workload(other, other["metadata"]["uid"], gpus=1, name="statefulset-train-r1-5d1c9", queue="rhoai-workbenches")
        code, out = status_of(queued_lab, [*objects, other, held], capsys)
        assert code == 0, out
        assert "statefulset-train-r1-5d1c9" not in out and "delete" not in out and "kueue#12232" not in out
        assert "  workloads[train] (lab.yaml:" in out and "): stopped\n" in out

    def test_this_stacks_own_is_named_with_the_command_on_the_context_read(
        self, queued_lab: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data = yaml.safe_load((queued_lab / "lab.yaml").read_text(encoding="utf-8"))
        fixtures.workload(data, "dev")["state"] = "stopped"
        (queued_lab / "lab.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        objects = [o for o in running_queued_lab() if not o["metadata"]["name"].startswith(("dev-", "statefulset-dev-"))]
        dev = next(o for o in objects if o["metadata"]["name"] == "dev")
        objects.append(stranded_workload(dev, dev["metadata"]["uid"], name="statefulset-dev-8c1f2"))
        code, out = status_of(queued_lab, objects, capsys)
        assert code == 1, out
        assert "frees it: `oc --context lab delete workloads.kueue.x-k8s.io statefulset-dev-8c1f2 -n team-a`" in out
