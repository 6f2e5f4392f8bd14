"""The preflight policy (policy/): each rule catches the one change that would break a stack on the
cluster; the same rules stop the Pulumi program under mocks. Every test breaks a config the tests
own (tests/fixtures.py). A few rules guard properties the components guarantee by construction (no
config can break them); those are tested by breaking one field of the rendered objects instead,
which is what a regression in components/ would do.
"""

from __future__ import annotations

import asyncio
import copy
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.rpc_manager import RPCManager
from pulumi.runtime.stack import run_pulumi_func

import policy
import stacks
from components.prerequisites import requirements
from components.program import layout, objects, patches, sources
from config.stack import ClusterConfig
from policy.core import Finding
from tests import fixtures
from tests.helpers import ROOT
from tools.render import drain

Edit = Callable[[dict[str, Any]], Any]


def check(config: ClusterConfig, objs: list[dict[str, Any]] | None = None, previous: dict[str, Any] | None = None) -> list[Finding]:
    # The sources as the CLI and the Pulumi program pass them: findings located in the config (Finding.where).
    located = sources(layout(config))
    return policy.check(config, objects(config) if objs is None else objs, patches(config), previous=previous, sources=located)


def broken(name: str, edit: Edit) -> list[Finding]:
    return check(fixtures.config(name, edit))


def by_rule(findings: list[Finding], rule: str, severity: str = "error") -> list[Finding]:
    return [f for f in findings if f.rule == rule and f.severity == severity]


def find_obj(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def w(name: str, **fields: Any) -> Edit:
    return lambda d: fixtures.workload(d, name).update(fields)


# --- the fixtures themselves ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_the_fixtures_pass(name: str) -> None:
    findings = check(fixtures.config(name))
    assert policy.errors(findings) == []
    # every warning they keep, they accept with a reason (an info line only explains, e.g. a root memlock strategy)
    assert [f for f in findings if not f.accepted and f.severity != "info"] == []


def test_findings_do_not_depend_on_the_order_of_the_config() -> None:
    def reverse(d: dict[str, Any]) -> None:
        d["workloads"].reverse()
        d["volumes"].reverse()
        d["security"]["service_accounts"].reverse()
        for w_ in [*d["workloads"], *d["bandwidth_checks"]]:
            w_["node_set"] = w_.get("node_set", "main")  # the default is the first node set, which the reversal moves
        d["node_sets"].reverse()

    def both_broken(d: dict[str, Any]) -> None:
        d["security"]["grant"] = False
        d["volumes"][1]["storage_class"] = None
        d["bandwidth_checks"][0]["node_set"] = "main"

    a = check(fixtures.config("roce", both_broken))
    b = check(fixtures.config("roce", lambda d: (both_broken(d), reverse(d))))
    assert a and a == b


def test_every_finding_names_rule_object_field_and_fix() -> None:
    findings = broken("roce", lambda d: d["security"].update(grant=False))
    assert findings
    for f in findings:
        line = f.line()
        assert "\n" not in line
        if f.where:  # located in the config: its path first, the objects and their field after the fix
            assert line.startswith(f"{f.severity} {f.rule} {f.where}")
            assert f.object.startswith("Stack ") or all(o in line for o in f.affects or (f.object,)) and f"{f.field}]" in line
        else:
            assert line.startswith(f"{f.severity} {f.rule} {f.object} {f.field}: ")
        assert f.fix and "Fix: " in line


# --- accepted warnings live in the stack --------------------------------------------------------------


def test_an_accepted_warning_is_printed_with_the_stacks_reason() -> None:
    findings = check(fixtures.config("ib"))
    accepted = [f for f in findings if f.accepted]
    assert {f.rule for f in accepted} == {"privileged-scc", "privileged-container"}
    assert all("[accepted: no device plugin]" in f.line() for f in accepted)
    assert policy.summary("ib", findings).endswith("0 errors, 2 warnings, 2 accepted")


def test_a_new_warning_is_reported_but_does_not_fail_and_a_stale_acceptance_is_reported() -> None:
    findings = broken("ib", lambda d: d["accepted_warnings"].pop())
    assert [f.rule for f in findings if not f.accepted] == ["privileged-container"]
    assert policy.errors(findings) == []
    stale = broken("ib", lambda d: d["accepted_warnings"].append({"rule": "storage-class", "object": "*", "reason": "old"}))
    [f] = by_rule(stale, "accepted-warnings", "warning")
    assert "no such warning remains" in f.message and "accepted_warnings" in f.fix


# --- one rule each --------------------------------------------------------------------------------------


def test_required_scc_missing() -> None:
    config = fixtures.config("tcp")
    objs = copy.deepcopy(objects(config))
    del find_obj(objs, "StatefulSet", "one")["spec"]["template"]["metadata"]["annotations"]["openshift.io/required-scc"]
    [f] = by_rule(check(config, objs), "required-scc")
    assert f.object == "StatefulSet proj/one" and "openshift.io/required-scc: restricted-v2" in f.fix


def test_scc_grant_service_account_not_granted() -> None:
    errs = by_rule(broken("roce", lambda d: d["security"].update(grant=False)), "scc-grant")
    assert {"StatefulSet team-a/dev", "Job team-a/train-r1"} <= {f.object for f in errs}
    assert not [f for f in errs if "solo" in f.object]  # TCP pods run under restricted-v2: no grant needed
    assert all("may not use SCC 'gpu-rdma'" in f.message and f.field.endswith("serviceAccountName") for f in errs)


def test_scc_grant_use_role_nobody_creates() -> None:
    findings = broken("roce", lambda d: d["security"].update(create=False, existing_allowed_capabilities=["IPC_LOCK"]))
    [warn] = by_rule(findings, "scc-grant", "warning")
    assert warn.object == "ClusterRole system:openshift:scc:gpu-rdma"


def test_scc_capabilities_capability_may_not_be_added() -> None:
    errs = by_rule(
        broken("roce", lambda d: d["security"].update(create=False, existing_allowed_capabilities=["SYS_RESOURCE"])), "scc-capabilities"
    )
    assert errs and all("capability may not be added: IPC_LOCK" in f.message and "existing_allowed_capabilities" in f.message for f in errs)


def test_memlock_strategy_root_under_restricted_v2() -> None:
    # A TCP workload asking for root + IPC_LOCK runs under the stack's SCC: fine. Under an SCC that admits no root: not.
    def edit(d: dict[str, Any]) -> None:
        d["security"].update(create=False, existing_allowed_capabilities=["IPC_LOCK"], existing_allows_root=False)

    errs = by_rule(broken("roce", edit), "memlock-strategy")
    assert errs and all("does not admit root" in f.message for f in errs)


def test_memlock_strategy_rdma_without_strategy() -> None:
    # "none" for RDMA: nothing to pin with. The model refuses no config here; the rule catches it.
    errs = by_rule(broken("roce", lambda d: d["defaults"].update(memlock_rdma="none")), "memlock-strategy")
    assert errs and all("8 MiB" in f.message for f in errs)


def test_memlock_strategy_node_limit_warns_until_the_machineconfig_is_declared() -> None:
    warns = by_rule(broken("roce", lambda d: d["defaults"].update(memlock_rdma="node-limit")), "memlock-strategy", "warning")
    assert warns and all("crio_memlock_unlimited" in f.fix for f in warns)

    def with_machineconfig(d: dict[str, Any]) -> None:
        d["defaults"]["memlock_rdma"] = "node-limit"
        d["node_level"] = {"crio_memlock_unlimited": True}

    assert by_rule(broken("roce", with_machineconfig), "memlock-strategy", "warning") == []


def test_memlock_strategy_root_without_uid_0() -> None:
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    del find_obj(objs, "StatefulSet", "dev")["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsUser"]
    [f] = by_rule(check(config, objs), "memlock-strategy")
    assert f.object == "StatefulSet team-a/dev" and "needs uid 0" in f.message


def test_an_unknown_strategy_in_an_object_is_a_finding_not_a_crash() -> None:
    # Objects written by hand (or by another tool) reach the rules too; every rule must survive them.
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    for e in find_obj(objs, "StatefulSet", "dev-tcp")["spec"]["template"]["spec"]["containers"][0]["env"]:
        if e["name"] == "LAUNCHER_MEMLOCK_STRATEGY":
            e["value"] = "bogus"
    [f] = by_rule(check(config, objs), "memlock-strategy")
    assert f.object == "StatefulSet team-a/dev-tcp" and "unknown memlock strategy 'bogus'" in f.message


@pytest.mark.parametrize(
    "change,phrase",
    [
        (lambda ctx: ctx["capabilities"].update(drop=[]), "does not drop ALL"),
        (lambda ctx: ctx["capabilities"].update(add=["SYS_ADMIN"]), "adds SYS_ADMIN"),
        (lambda ctx: ctx.update(allowPrivilegeEscalation=True), "allows privilege escalation"),
        (lambda ctx: ctx.pop("seccompProfile"), "no RuntimeDefault seccomp"),
        (lambda ctx: ctx.pop("runAsNonRoot"), "may run as root"),
    ],
)
def test_least_privilege(change: Callable[[dict[str, Any]], Any], phrase: str) -> None:
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    change(find_obj(objs, "StatefulSet", "solo")["spec"]["template"]["spec"]["containers"][0]["securityContext"])
    [f] = by_rule(check(config, objs), "least-privilege")
    assert f.object == "StatefulSet team-b/solo" and phrase in f.message


def test_least_privilege_token_mounted_without_asking() -> None:
    config = fixtures.config("tcp")
    objs = copy.deepcopy(objects(config))
    del find_obj(objs, "StatefulSet", "one")["spec"]["template"]["spec"]["automountServiceAccountToken"]
    [f] = by_rule(check(config, objs), "least-privilege")
    assert "token" in f.message
    assert by_rule(broken("tcp", w("one", service_account_token=True)), "least-privilege") == []


def test_privileged_container_without_reason() -> None:
    # A privileged container the strategy does not explain (a regression of components/) is caught too.
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    find_obj(objs, "StatefulSet", "solo")["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    [f] = by_rule(check(config, objs), "privileged-container")
    assert f.object == "StatefulSet team-b/solo" and "without a stated reason" in f.message and "privileged_reason" in f.fix
    [ok] = by_rule(check(fixtures.config("ib")), "privileged-container", "warning")
    assert "privileged_reason: no device plugin" in ok.message  # the reason is printed with the warning


def test_privileged_scc_created_without_reason() -> None:
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    find_obj(objs, "SecurityContextConstraints", "gpu-rdma")["allowPrivilegedContainer"] = True
    [f] = by_rule(check(config, objs), "privileged-scc")
    assert f.field == "allowPrivilegedContainer" and "broad_grant_reason" in f.fix


def test_network_policy_missing() -> None:
    config = fixtures.config("tcp")
    objs = [o for o in objects(config) if not (o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "one")]
    [f] = by_rule(check(config, objs), "network-policy")
    assert f.object == "StatefulSet proj/one" and "rendezvous" in f.message


def test_network_attachments_missing_nad() -> None:
    errs = by_rule(broken("roce", lambda d: d["fabric"].update(device_access="privileged")), "network-attachments")
    assert errs and all("does not exist where the pod looks for it" in f.message for f in errs)


def test_network_attachments_namespace_the_pod_cannot_see() -> None:
    assert by_rule(broken("roce", lambda d: d["fabric"].update(nad_mode="reference")), "network-attachments") == []
    errs = by_rule(
        broken("roce", lambda d: d["fabric"].update(nad_mode="reference", nad_source_namespace="sriov-nets")), "network-attachments"
    )
    assert errs and all("lets a pod use NADs of its own namespace" in f.message for f in errs)


def test_sriov_resources_not_requested() -> None:
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    res = find_obj(objs, "StatefulSet", "dev")["spec"]["template"]["spec"]["containers"][0]["resources"]
    del res["requests"]["openshift.io/port2rdma"], res["limits"]["openshift.io/port2rdma"]
    [f] = by_rule(check(config, objs), "sriov-resources")
    assert "Insufficient openshift.io/port2rdma" in f.message


def test_socket_ifname_names_an_interface_the_pod_lacks() -> None:
    [f] = by_rule(broken("tcp", w("one", env={"NCCL_SOCKET_IFNAME": "net1"})), "socket-ifname")
    assert "no socket interface found" in f.message
    assert by_rule(broken("roce", w("dev", env={"NCCL_SOCKET_IFNAME": "net1"})), "socket-ifname") == []


def test_ib_hca_names_devices_that_are_not_active() -> None:
    [f] = by_rule(broken("roce", w("dev", env={"NCCL_IB_HCA": "mlx5_0,mlx5_7"})), "ib-hca")
    assert "mlx5_7" in f.message


def test_ib_hca_prefix_match_selects_other_devices() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["fabric"]["devices"] = ["mlx5_1", "mlx5_10"]
        fixtures.workload(d, "dev")["env"] = {"NCCL_IB_HCA": "mlx5_1"}

    prefix = [f for f in by_rule(broken("roce", edit), "ib-hca") if "prefix" in f.message]
    assert len(prefix) == 1 and "mlx5_1 also selects mlx5_10" in prefix[0].message


def test_storage_class_unknown_and_none() -> None:
    [f] = by_rule(broken("ib", lambda d: d["volumes"][0].update(storage_class="nfs")), "storage-class")
    assert "'nfs' is not known on ib" in f.message
    # One cause (the volume's storage_class), one finding, listing the claim templates of the workload and its TCP variant.
    [w] = by_rule(broken("roce", lambda d: d["volumes"][0].update(storage_class=None)), "storage-class", "warning")
    assert w.where == "volumes[workspace].storage_class" and w.affects == ("StatefulSet team-a/dev", "StatefulSet team-a/dev-tcp")
    assert "cluster's default class" in w.message


def test_access_mode_rwx_on_an_rwo_class() -> None:
    [f] = by_rule(broken("ib", lambda d: d["volumes"][0].update(storage_class="ceph-rbd")), "access-mode")
    assert "provides ReadWriteOnce only" in f.message


def test_image_from_an_imagestream_nobody_makes() -> None:
    errs = by_rule(broken("roce", lambda d: d.update(images=[])), "image")
    assert {f.object for f in errs} == {"StatefulSet team-a/dev", "StatefulSet team-a/dev-tcp", "Job team-a/train-r1"} | {
        f.object for f in errs if f.object.startswith("Job team-a/fabric-")
    }
    assert all("ImageStream team-a/trainer is neither built" in f.message for f in errs)
    assert (
        by_rule(
            broken(
                "roce",
                lambda d: d.update(images=[], existing={**d["existing"], "image_streams": [{"namespace": "team-a", "name": "trainer"}]}),
            ),
            "image",
        )
        == []
    )


def test_image_for_rdma_without_rdma_userspace() -> None:
    errs = by_rule(broken("roce", lambda d: d["images"][0].update(dockerfile="FROM nvcr.io/nvidia/pytorch:25.08-py3\n")), "image")
    assert errs and all("does not install rdma-core, libibverbs" in f.message for f in errs)


def test_image_from_another_namespace_needs_a_puller_grant() -> None:
    [f] = by_rule(
        broken("roce", w("solo", image="image-registry.openshift-image-registry.svc:5000/team-a/trainer:latest")), "image", "warning"
    )
    assert "system:image-puller" in f.message


def test_secret_ref_not_declared() -> None:
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    env = find_obj(objs, "Job", "train-r1")["spec"]["template"]["spec"]["containers"][0]["env"]
    next(e for e in env if e["name"] == "HF_TOKEN")["valueFrom"]["secretKeyRef"]["name"] = "other"
    [f] = by_rule(check(config, objs), "secret-ref")
    assert "team-a/other is not declared" in f.message


def test_route_port_the_service_lacks() -> None:
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    find_obj(objs, "Route", "dev-jupyter")["spec"]["port"]["targetPort"] = "tensorboard"
    [f] = by_rule(check(config, objs), "route-port")
    assert "503" in f.message


def test_shm_larger_than_the_memory_limit() -> None:
    [f] = by_rule(broken("tcp", w("one", shm_size="32Gi")), "shm-size")
    assert f.object == "StatefulSet proj/one" and "OOM" in f.message


def test_gpu_toleration_missing() -> None:
    config = fixtures.config("tcp")
    objs = copy.deepcopy(objects(config))
    find_obj(objs, "StatefulSet", "one")["spec"]["template"]["spec"]["tolerations"] = []
    [f] = by_rule(check(config, objs), "gpu-toleration")
    assert "nvidia.com/gpu.product=H100:NoSchedule" in f.message


def test_capacity_all_running_pods_must_fit_at_once() -> None:
    # The Job moved beside dev and the check: 6 pods of 4 GPUs on the 4 main nodes.
    errs = by_rule(broken("roce", w("train", node_set="main")), "capacity")
    assert len(errs) == 1
    assert "cannot all be scheduled at once" in errs[0].message and "stop a workload" in errs[0].fix

    def room(d: dict[str, Any]) -> None:  # disabling the check makes room
        fixtures.workload(d, "train")["node_set"] = "main"
        d["bandwidth_checks"][0]["enabled"] = False

    assert by_rule(broken("roce", room), "capacity") == []


def test_capacity_counts_gpus_not_just_nodes() -> None:
    # two 3-GPU pods cannot share a 4-GPU node; two 2-GPU pods can
    def three(d: dict[str, Any]) -> None:
        fixtures.workload(d, "one")["gpus_per_node"] = 3
        fixtures.workload(d, "two").update(state="running", gpus_per_node=3)
        d["node_sets"][0]["count"] = 1

    assert len(by_rule(broken("tcp", three), "capacity")) == 1

    def two(d: dict[str, Any]) -> None:
        fixtures.workload(d, "one")["gpus_per_node"] = 2
        fixtures.workload(d, "two").update(state="running", gpus_per_node=2)
        d["node_sets"][0]["count"] = 1

    assert by_rule(broken("tcp", two), "capacity") == []


def test_capacity_names_the_workload_the_change_started_not_the_one_that_ran() -> None:
    """On one node, `one` runs; starting `two` makes them not fit. Against the committed outputs (what ran), the error is
    at `two`'s state, naming it as started; without them, the search's own culprit."""
    from components.outputs import stack_outputs

    def one_node(d: dict[str, Any]) -> None:
        d["node_sets"][0]["count"] = 1

    def started(d: dict[str, Any]) -> None:
        one_node(d)
        fixtures.workload(d, "two")["state"] = "running"

    before = stack_outputs(fixtures.config("tcp", one_node))
    config = fixtures.config("tcp", started)
    [err] = by_rule(check(config, previous=before), "capacity")
    assert err.where == "workloads[two].state" and err.object == "StatefulSet proj/two", err.line()
    assert "no placement fits two (started by this change) beside the others" in err.message

    # `two` ran before and `one` is the one started: now `one` is named
    def swapped(d: dict[str, Any]) -> None:
        one_node(d)
        fixtures.workload(d, "one")["state"] = "stopped"
        fixtures.workload(d, "two")["state"] = "running"

    [err] = by_rule(check(config, previous=stack_outputs(fixtures.config("tcp", swapped))), "capacity")
    assert err.where == "workloads[one].state" and "one (started by this change)" in err.message
    # a workload grown past the nodes: named with what it asked for before
    grown = fixtures.config("tcp", lambda d: (one_node(d), fixtures.workload(d, "one").update(gpus_per_node=4)))
    assert by_rule(check(grown, previous=before), "capacity") == []


def test_capacity_pinned_to_a_node_the_stack_does_not_count_on() -> None:
    config = fixtures.config("roce")
    objs = copy.deepcopy(objects(config))
    aff = find_obj(objs, "StatefulSet", "solo")["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["node-z"]
    errs = by_rule(check(config, objs), "capacity")
    assert any("node-z, which are not among the nodes" in f.message for f in errs)


def test_pods_that_may_share_nodes_are_placed_one_by_one() -> None:
    from policy.placement import Group, place

    # Two 4-GPU pods without anti-affinity on two 4-GPU nodes: one per node (never both on one node).
    assert place({"a": 4, "b": 4}, [Group("g", 2, 4, ("a", "b"), spread=False)]).placed
    assert place({"a": 4, "b": 4}, [Group("g", 4, 2, ("a", "b"), spread=False)]).placed
    refused = place({"a": 4, "b": 4}, [Group("g", 3, 3, ("a", "b"), spread=False)])
    assert not refused.placed and not refused.exhausted and refused.unplaced is not None and refused.unplaced.name == "g"


def test_placement_decides_a_large_pinned_stack_quickly() -> None:
    # 20 workloads over 16 nodes in four pinned sets, 96 of 128 GPUs (an exact solver agrees it fits). Quickly: within two
    # steps of the search per group (24 measured), which it counts against its budget, so no machine's load can fail it.
    from policy.placement import Group, place

    nodes = {f"n{i}": 8 for i in range(16)}
    sets = [tuple(f"n{i}" for i in range(k * 4, k * 4 + 4)) for k in range(4)]
    shapes = [(4, 2), (2, 4), (1, 5), (2, 2), (1, 3)]  # (pods, GPUs per pod)
    groups = [Group(f"w{j}", *shapes[j % 5], sets[j % 4], spread=True) for j in range(16)]
    groups += [Group(f"u{j}", 1, 1, tuple(nodes), spread=True) for j in range(4)]
    result = place(nodes, groups, budget=2 * len(groups))
    assert result.placed and not result.exhausted
    too_many = place(nodes, [*groups, Group("extra", 4, 8, sets[0], spread=True)])
    assert not too_many.placed and not too_many.exhausted


def test_unique_objects() -> None:
    config = fixtures.config("tcp")
    objs = objects(config)
    [f] = by_rule(check(config, objs + [copy.deepcopy(find_obj(objs, "Service", "one-headless"))]), "unique-objects")
    assert "declared 2 times" in f.message


def test_orphaned_claims_after_a_rename() -> None:
    previous = fixtures.config("roce")
    from components.outputs import stack_outputs

    before = stack_outputs(previous)
    renamed = fixtures.config("roce", lambda d: fixtures.workload(d, "dev").update(name="dev2", tcp_variants=[]))
    warns = by_rule(check(renamed, previous=before), "orphaned-claims", "warning")
    [f] = [x for x in warns if x.object == "Workload dev"]
    assert "team-a/workspace-dev-0, team-a/workspace-dev-1" in f.message and "keep the workload's and the volume's names" in f.fix
    # Stopping or scaling down keeps the claims (Retain) and reattaches them: no warning.
    stopped = fixtures.config("roce", w("dev", state="stopped"))
    assert by_rule(check(stopped, previous=before), "orphaned-claims", "warning") == []


def test_hand_made_entry_the_stack_does_not_declare() -> None:
    [f] = by_rule(
        broken("tcp", lambda d: d.update(hand_made=[{"kind": "ServiceAccount", "name": "gone", "namespace": "proj", "source": "x"}])),
        "hand-made",
        "warning",
    )
    assert f.object == "ServiceAccount proj/gone"
    assert (
        by_rule(
            broken("tcp", lambda d: d.update(hand_made=[{"kind": "ServiceAccount", "name": "sa", "namespace": "proj", "source": "x"}])),
            "hand-made",
            "warning",
        )
        == []
    )


# --- the gate inside the Pulumi program -------------------------------------------------------------


class _Recorder(pulumi.runtime.Mocks):
    """Records the type of every resource the program registers; answers reads as the stack assumes (the `expected` state
    of each read, components/prerequisites.py), so that preview's checks of them pass."""

    def __init__(self, config: dict[str, str], stack: str) -> None:
        self.types: list[str] = []
        self.cluster: dict[tuple[str, str], dict[str, Any]] = {}
        try:
            path = config.get("gpu-training:configFile")
            loaded = stacks.load_file(path) if path else stacks.load(config.get("gpu-training:cluster") or stack)
        except stacks.ConfigError:
            return  # the gate refuses it before any read
        for tier in ("project", "platform"):
            self.cluster |= {(r.kind, r.object_id): r.expected for r in requirements(loaded, tier)}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.types.append(args.typ)
        if args.resource_id:
            return args.resource_id, self.cluster.get((args.typ.rsplit(":", 1)[-1], args.resource_id), {"metadata": {}})
        return args.name, dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class _Logs:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def debug(self, msg: Any, *args: Any) -> None:
        pass

    def info(self, msg: Any, *args: Any) -> None:
        self.lines.append(("info", str(msg)))

    def warning(self, msg: Any, *args: Any) -> None:
        self.lines.append(("warning", str(msg)))

    def error(self, msg: Any, *args: Any) -> None:
        self.lines.append(("error", str(msg)))


def kubeconfig(tmp_path: Path, *contexts: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "contexts": [{"name": c, "context": {}} for c in contexts]}))
    return path


def run_main(
    stack: str, config: dict[str, str], monkeypatch: pytest.MonkeyPatch, kube: Path | None
) -> tuple[list[str], list[tuple[str, str]], BaseException | None]:
    """Run the real entry point (__main__.py) as `pulumi preview -s STACK` would, under mocks."""
    if kube is None:
        monkeypatch.delenv("KUBECONFIG", raising=False)
        monkeypatch.setenv("HOME", "/nonexistent")
    else:
        monkeypatch.setenv("KUBECONFIG", str(kube))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks, logs = _Recorder(config, stack), _Logs()
    raised: BaseException | None = None
    try:
        pulumi_settings.ROOT.set(None)
        pulumi.runtime.set_mocks(mocks, project="gpu-training", stack=stack, preview=True, logger=logs)  # type: ignore[arg-type]
        pulumi_settings.SETTINGS.rpc_manager = RPCManager()
        pulumi_settings.SETTINGS.outputs = set()
        pulumi.runtime.set_all_config(config)
        try:
            loop.run_until_complete(run_pulumi_func(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__pulumi__")))
        except Exception as err:  # noqa: BLE001 (the test asserts on it)
            raised = err
    finally:
        pulumi.runtime.set_all_config({})
        drain(loop)
        loop.run_until_complete(loop.shutdown_default_executor())
        asyncio.set_event_loop(None)
        loop.close()
    declared = [t for t in mocks.types if t not in ("pulumi:pulumi:Stack", "pulumi:providers:kubernetes")]
    return declared, logs.lines, raised


def write_config(tmp_path: Path, name: str, edit: Edit | None = None) -> Path:
    data = fixtures.data(name)
    if edit:
        edit(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_gate_declares_the_stack_and_logs_its_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = {"gpu-training:configFile": str(write_config(tmp_path, "ib")), "kubernetes:context": "ib"}
    declared, logs, raised = run_main("ib", cfg, monkeypatch, kubeconfig(tmp_path, "ib"))
    assert raised is None
    assert "kubernetes:apps/v1:StatefulSet" in declared
    assert any(m.startswith("warning privileged-scc") and "[accepted:" in m for level, m in logs if level == "warning")


def test_preview_stops_a_broad_grant_without_its_reason_and_prints_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit's case in `pulumi preview`: an existing SCC whose facts allow every capability, bound to the pods'
    service account, stops the program before anything is declared; with broad_grant_reason it is declared, the reason
    logged."""
    site = {"scc": "site-rdma", "create": False}
    for reason in (None, "the lab's SCC until ours is approved"):
        path = write_config(tmp_path, "roce", lambda d, r=reason: d["security"].update(site, broad_grant_reason=r))
        declared, logs, raised = run_main(
            "roce", {"gpu-training:configFile": str(path), "kubernetes:context": "c"}, monkeypatch, kubeconfig(tmp_path, "c")
        )
        if reason is None:
            assert isinstance(raised, pulumi.RunError) and "privileged-scc" in str(raised) and declared == []
        else:
            assert raised is None and any(f"broad_grant_reason: {reason}" in m for level, m in logs if level == "warning"), logs


def test_gate_stops_a_broken_config_before_any_resource(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config(tmp_path, "roce", lambda d: d["security"].update(grant=False))
    declared, _, raised = run_main(
        "roce", {"gpu-training:configFile": str(path), "kubernetes:context": "c"}, monkeypatch, kubeconfig(tmp_path, "c")
    )
    assert isinstance(raised, pulumi.RunError) and "scc-grant" in str(raised)
    assert declared == []


def test_gate_refuses_a_config_named_for_another_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config(tmp_path, "tcp")  # name: tcp
    declared, _, raised = run_main(
        "cairo", {"gpu-training:configFile": str(path), "kubernetes:context": "c"}, monkeypatch, kubeconfig(tmp_path, "c")
    )
    assert isinstance(raised, pulumi.RunError)
    assert "the config is for stack 'tcp', but it is deployed as stack 'cairo'" in str(raised)
    assert declared == []


def test_gate_refuses_to_run_without_a_context_or_with_one_the_kubeconfig_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(write_config(tmp_path, "tcp"))
    declared, _, raised = run_main("tcp", {"gpu-training:configFile": path}, monkeypatch, kubeconfig(tmp_path, "tcp"))
    assert isinstance(raised, pulumi.RunError) and "sets no kubernetes:context" in str(raised) and declared == []
    declared, _, raised = run_main(
        "tcp", {"gpu-training:configFile": path, "kubernetes:context": "tcp"}, monkeypatch, kubeconfig(tmp_path, "other")
    )
    assert isinstance(raised, pulumi.RunError) and "has no context 'tcp' (it has: other)" in str(raised) and "rename-context" in str(raised)
    declared, _, raised = run_main("tcp", {"gpu-training:configFile": path, "kubernetes:context": "tcp"}, monkeypatch, None)
    assert isinstance(raised, pulumi.RunError) and "no readable kubeconfig" in str(raised)


def test_gate_turns_a_config_error_into_run_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: tcp\nnode_sets: four\n", encoding="utf-8")
    declared, _, raised = run_main(
        "tcp", {"gpu-training:configFile": str(path), "kubernetes:context": "c"}, monkeypatch, kubeconfig(tmp_path, "c")
    )
    assert isinstance(raised, pulumi.RunError) and str(path) in str(raised) and "node_sets" in str(raised)
    assert declared == []
    declared, _, raised = run_main("staging", {"kubernetes:context": "c"}, monkeypatch, kubeconfig(tmp_path, "c"))
    assert isinstance(raised, pulumi.RunError) and "unknown stack 'staging'" in str(raised)


def test_gate_runs_the_tier_its_stack_file_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(write_config(tmp_path, "ib"))
    kube = kubeconfig(tmp_path, "c")
    project, _, raised = run_main(
        "ib", {"gpu-training:configFile": path, "gpu-training:tier": "project", "kubernetes:context": "c"}, monkeypatch, kube
    )
    assert raised is None
    assert "kubernetes:core/v1:PersistentVolumeClaimPatch" not in project and "kubernetes:apps/v1:StatefulSet" in project
    platform, _, raised = run_main(
        "ib-platform",
        {"gpu-training:configFile": path, "gpu-training:cluster": "ib", "gpu-training:tier": "platform", "kubernetes:context": "c"},
        monkeypatch,
        kube,
    )
    assert raised is None
    assert "kubernetes:core/v1:PersistentVolumeClaimPatch" in platform and "kubernetes:apps/v1:StatefulSet" not in platform


def test_the_takeover_settings_reach_the_stacks_own_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(write_config(tmp_path, "tcp"))
    kube = kubeconfig(tmp_path, "c")
    base = {"gpu-training:configFile": path, "kubernetes:context": "c"}
    _, logs, raised = run_main(
        "tcp", base | {"kubernetes:upsertExistingObjects": "true", "kubernetes:enablePatchForce": "true"}, monkeypatch, kube
    )
    assert raised is None and any("takes over every object" in m for _, m in logs)
    _, _, raised = run_main("tcp", base | {"kubernetes:upsertExistingObjects": "true"}, monkeypatch, kube)
    assert isinstance(raised, pulumi.RunError) and "needs both" in str(raised)


def test_the_committed_stacks_load_through_the_gate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for s in stacks.pulumi_stacks():
        cfg = {f"gpu-training:{k}": v for k, v in (("cluster", s.cluster), ("tier", s.tier)) if v} | {"kubernetes:context": s.context or ""}
        declared, _, raised = run_main(s.name, cfg, monkeypatch, kubeconfig(tmp_path, s.context or "x"))
        assert raised is None, f"{s.path.name} (clusters/{s.cluster}.py, tier {s.tier}): the program under the gate raised {raised!r}"


# --- hand-made entries: where they are written and why they are undeclared ----------------------------------


def _nad_copies(*namespaces: str) -> Edit:
    """hand_made entries for the roce fixture's two SR-IOV networks in each namespace (the seeds' sed copies)."""
    entries = [
        {"kind": "NetworkAttachmentDefinition", "name": f"port{i}-network", "namespace": ns, "source": "seed: the sed copy"}
        for ns in namespaces
        for i in (1, 2)
    ]
    return lambda d: d.update(hand_made=entries)


def test_hand_made_says_which_workload_change_left_the_nad_copies_undeclared() -> None:
    config = fixtures.config("roce", _nad_copies("team-a", "team-b"))  # team-b runs solo only, over TCP
    found = by_rule(check(config), "hand-made", "warning")
    assert [f.object for f in found] == [f"NetworkAttachmentDefinition team-b/port{i}-network" for i in (1, 2)]
    assert "no RDMA pod runs in namespace team-b: workload solo uses transport tcp" in found[0].message
    assert found[0].fix.startswith("remove hand_made[2], or correct") and "if the switch is temporary" in found[0].fix
    # The committed render ran solo over RDMA: the finding names the switch.
    before = {"workloads": {"solo": {"namespace": "team-b", "mode": "rdma", "scc": "gpu-rdma"}}}
    [f, _] = by_rule(check(config, previous=before), "hand-made", "warning")
    assert "the TCP switch of workload solo no longer needs the NAD copies in namespace team-b" in f.message
    # A namespace with no pods at all, and a network the fabric does not have, are said as such.
    gone = fixtures.config("roce", lambda d: (_nad_copies("team-b")(d), d["workloads"].pop()))
    assert "no workload or enabled bandwidth check runs in namespace team-b" in by_rule(check(gone), "hand-made", "warning")[0].message
    port9 = {"kind": "NetworkAttachmentDefinition", "name": "port9-network", "namespace": "team-a", "source": "oc apply"}
    renamed = fixtures.config("roce", lambda d: d.update(hand_made=[port9]))
    assert "fabric.attachments names no network port9-network" in by_rule(check(renamed), "hand-made", "warning")[0].message


STACK_WITH_A_COMPREHENSION = """from pathlib import Path

import yaml

from config import ClusterConfig, HandMade

DATA = yaml.safe_load(Path(__file__).with_name("roce.yaml").read_text(encoding="utf-8"))
CONFIG = ClusterConfig(
    **DATA,
    hand_made=[
        HandMade(kind="ServiceAccount", name="trainer", namespace="team-a", source="oc create serviceaccount"),
        HandMade(kind="ServiceAccount", name="builder", namespace="team-a", source="oc create serviceaccount"),
        *[
            HandMade(
                kind="NetworkAttachmentDefinition", name=f"port{i}-network", namespace=ns, source="the seeds' sed copy"
            )
            for ns in ("team-a", "team-b")
            for i in (1, 2)
        ],
    ],
)
"""


def test_hand_made_names_the_line_of_a_stack_module_and_a_fix_for_its_comprehension(
    fixture_project: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    root = fixture_project("roce")
    (root / stacks.CLUSTERS / "roce.py").write_text(STACK_WITH_A_COMPREHENSION, encoding="utf-8")
    found = {f.object: f for f in by_rule(check(stacks.load("roce")), "hand-made", "warning")}
    assert sorted(found) == [
        "NetworkAttachmentDefinition team-b/port1-network",
        "NetworkAttachmentDefinition team-b/port2-network",
        "ServiceAccount team-a/builder",
    ]
    nad = found["NetworkAttachmentDefinition team-b/port1-network"]
    assert nad.message.startswith("listed as made by hand at clusters/roce.py:14 (HandMade), but the stack does not declare it")
    assert nad.fix.startswith(
        "drop team-b from the namespaces the comprehension at clusters/roce.py:14 iterates (it makes 4 entries, 2 of them in team-b"
    )
    sa = found["ServiceAccount team-a/builder"]
    assert "at clusters/roce.py:12" in sa.message and "security.service_accounts lists no builder in team-a" in sa.message
    assert sa.fix.startswith("remove the HandMade(...) at clusters/roce.py:12")
    # the same config from a YAML file: no line to name, the entry's index instead
    assert by_rule(check(fixtures.config("roce", _nad_copies("team-b"))), "hand-made", "warning")[0].fix.startswith("remove hand_made[0]")
    assert main(["check", "roce"]) == 0
    out = capsys.readouterr().out
    assert "drop team-b from the namespaces the comprehension at clusters/roce.py:14 iterates" in " ".join(out.split())


# --- long findings wrap ------------------------------------------------------------------------------------


def test_a_long_finding_wraps_with_indented_continuations_and_loses_no_word() -> None:
    from policy.core import INDENT, WIDTH

    f = Finding("warning", "StatefulSet ns/w", "spec.x", "a reason " * 40, "do this " * 30, "image", "reason of the stack " * 10)
    lines = f.wrapped("stack: ")
    assert lines[0].startswith("stack: warning image StatefulSet ns/w spec.x: a reason")
    assert all(len(line) <= WIDTH for line in lines) and all(line.startswith(INDENT) for line in lines[1:])
    assert any(line.startswith(INDENT + "Fix: do this") for line in lines)
    assert any(line.startswith(INDENT + "[accepted: reason of the stack") for line in lines)
    assert " ".join(" ".join(lines).split()) == "stack: " + f.line()
    short = Finding("error", "Pod ns/p", "spec", "short", "fix it", "r")
    assert short.wrapped("stack: ") == ["stack: " + short.line()]
    assert all(len(line) <= 50 for line in Finding("info", "x", "y", "z" * 200, "f", "r").wrapped(width=50))  # one long word is split
