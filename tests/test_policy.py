"""The preflight policy (policy/): each rule catches the one change to a real stack that would break
it on the cluster; the committed stacks pass; the same rules stop the Pulumi program under mocks.

Broken configurations are derived from a committed stack by editing its dumped YAML data and
validating it again (so each is a config a user could write), then checked over the objects the
program renders from it. A few rules guard properties the components guarantee by construction (no
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
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

import policy
import stacks
from components.program import objects, patches
from conftest import ROOT, rendered_stack
from policy.core import Finding
from stacks.model import ClusterConfig

# --- helpers -------------------------------------------------------------------------------------


def derive(name: str, edit: Callable[[dict[str, Any]], None]) -> ClusterConfig:
    """A committed stack with one edit applied to its YAML form, validated like a user's file."""
    data = yaml.safe_load(stacks.dump(stacks.load(name)))
    edit(data)
    return stacks.validate(data, f"{name} (edited)")


def check(config: ClusterConfig, objs: list[dict[str, Any]] | None = None) -> list[Finding]:
    return policy.check(config, objects(config) if objs is None else objs, patches(config))


def by_rule(findings: list[Finding], rule: str, severity: str = "error") -> list[Finding]:
    return [f for f in findings if f.rule == rule and f.severity == severity]


def workload(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(w for w in data["workloads"] if w["name"] == name)


def find_obj(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def rdma_pods(config: ClusterConfig) -> set[str]:
    """`Kind ns/name` of every object whose pods run the launcher in RDMA mode (workloads and
    bandwidth checks alike)."""
    out = set()
    for o in objects(config):
        pod = o if o["kind"] == "Pod" else o.get("spec", {}).get("template")
        if o["kind"] in ("Pod", "StatefulSet", "Job") and pod:
            env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
            if env.get("LAUNCHER_MODE") == "rdma":
                out.add(f"{o['kind']} {o['metadata']['namespace']}/{o['metadata']['name']}")
    return out


# --- the committed stacks ------------------------------------------------------------------------

# The warnings each stack keeps, knowingly: README "Preflight warnings each stack accepts" explains
# each one. A new warning fails here until it is explained there too.
ACCEPTED = {
    "barcelona": [
        ("storage-class", "StatefulSet nccl-test/h-kim"),
        ("storage-class", "StatefulSet nccl-test/h-kim-tcp"),
        ("storage-class", "StatefulSet nccl-test/yunshi"),
    ],
    "cairo": [
        ("privileged-container", "StatefulSet nccl-test/ml-dev-rdma"),
        ("privileged-container", "Job nccl-test/rdma-bandwidth"),
        ("privileged-scc", "SecurityContextConstraints privileged"),
    ],
    "nerc": [
        ("storage-class", "PersistentVolumeClaim nccl-test/workspace-deepti-nerc"),
        ("storage-class", "PersistentVolumeClaim nccl-test/workspace-deepti-nerc-pytorch29"),
        ("storage-class", "PersistentVolumeClaim nccl-test/workspace-deepti-nerc-pytorch29-test"),
    ],
}


@pytest.mark.parametrize("name", stacks.STACKS)
def test_committed_stacks_pass_with_only_the_accepted_warnings(name: str) -> None:
    findings = check(stacks.load(name))
    assert policy.errors(findings) == []
    assert sorted((f.rule, f.object) for f in findings) == sorted(ACCEPTED[name])


@pytest.mark.parametrize("name", stacks.STACKS)
def test_rendered_objects_and_program_objects_give_the_same_findings(name: str) -> None:
    """`python -m stacks check` reads the offline rendering, the Pulumi program reads
    components.program.objects: both must see the same problems."""
    rendering = rendered_stack(name)
    from_render = policy.check(
        rendering.config,
        [r.object for r in rendering.resources if not r.is_patch],
        [r.object for r in rendering.resources if r.is_patch],
    )
    assert from_render == check(rendering.config)


def test_readme_explains_every_accepted_warning() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "## Preflight warnings each stack accepts" in text
    section = text.split("## Preflight warnings each stack accepts", 1)[1].split("\n## ", 1)[0]
    for name, warnings in ACCEPTED.items():
        assert f"**{name}**" in section
        for rule, obj in warnings:
            assert f"`{rule}`" in section, rule
            assert obj.split()[-1].split("/")[-1] in section, obj


def test_every_finding_names_rule_object_field_and_fix() -> None:
    findings = check(derive("barcelona", lambda d: d["security"].update(grant=False)))
    assert findings
    for f in findings:
        line = f.line()
        assert "\n" not in line
        assert line.startswith(f"{f.severity} {f.rule} {f.object} {f.field}: ")
        assert f.fix and "Fix: " in line


# --- one rule each ------------------------------------------------------------------------------


def test_scc_grant_service_account_not_granted() -> None:
    # Barcelona's SCC is custom: without the RoleBinding nobody may use it (seed 003's IPC_LOCK rejection).
    findings = check(derive("barcelona", lambda d: d["security"].update(grant=False)))
    errs = by_rule(findings, "scc-grant")
    assert {"StatefulSet nccl-test/h-kim", "Job nccl-test/h-kim-torchtitan", "Pod nccl-test/deepti-barcelona"} <= {f.object for f in errs}
    assert all("may not use SCC 'nccl-rdma-scc'" in f.message and f.field.endswith("serviceAccountName") for f in errs)
    assert "security.grant: true" in errs[0].fix


def test_scc_grant_nerc_needs_no_grant_for_restricted_v2() -> None:
    assert by_rule(check(stacks.load("nerc")), "scc-grant") == []
    # ... but the same pods under another existing SCC without a grant would be rejected.
    findings = check(derive("nerc", lambda d: d["security"].update(scc="nonroot-v2")))
    assert len(by_rule(findings, "scc-grant")) == 4


def test_scc_grant_warns_about_a_use_role_nobody_creates() -> None:
    # An existing custom SCC: the stack binds its use-role but OpenShift does not ship one for it.
    findings = check(derive("barcelona", lambda d: d["security"].update(create=False)))
    warns = by_rule(findings, "scc-grant", "warning")
    assert [f.object for f in warns] == ["ClusterRole system:openshift:scc:nccl-rdma-scc"]
    assert policy.errors(findings) == []


def test_scc_capabilities_capability_may_not_be_added() -> None:
    # One NERC pod switched to root + IPC_LOCK under restricted-v2, which allows NET_BIND_SERVICE only.
    findings = check(derive("nerc", lambda d: workload(d, "deepti-nerc").update(memlock="root-ipc-lock")))
    [f] = by_rule(findings, "scc-capabilities")
    assert f.object == "Pod nccl-test/deepti-nerc"
    assert f.field == "spec.containers[0].securityContext.capabilities.add"
    assert "capability may not be added: IPC_LOCK" in f.message and "NET_BIND_SERVICE" in f.message


def test_scc_capabilities_existing_scc_reads_the_config() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["security"].update(create=False, existing_allowed_capabilities=["SYS_RESOURCE"])

    errs = by_rule(check(derive("barcelona", edit)), "scc-capabilities")
    assert errs and all("IPC_LOCK" in f.message and "existing_allowed_capabilities" in f.message for f in errs)


def test_memlock_strategy_rdma_without_strategy() -> None:
    config = derive("barcelona", lambda d: d["defaults"].update(memlock_rdma="none"))
    errs = by_rule(check(config), "memlock-strategy")
    # every RDMA pod of Barcelona: h-kim, h-kim-torchtitan, yunshi, yunshi-large-zero-shot, deepti-barcelona, ...
    assert {f.object for f in errs} == rdma_pods(config) and "Pod nccl-test/deepti-barcelona" in rdma_pods(config)
    assert all("8 MiB" in f.message and f.field.endswith("env[LAUNCHER_MEMLOCK_STRATEGY]") for f in errs)


def test_memlock_strategy_root_under_an_scc_that_admits_no_root() -> None:
    findings = check(derive("nerc", lambda d: workload(d, "deepti-nerc").update(memlock="root-ipc-lock")))
    [f] = by_rule(findings, "memlock-strategy")
    assert "does not admit root" in f.message and f.field.endswith("securityContext.runAsUser")


def test_memlock_strategy_privileged_under_an_scc_that_forbids_it() -> None:
    findings = check(derive("nerc", lambda d: d["defaults"].update(memlock_tcp="privileged")))
    errs = by_rule(findings, "memlock-strategy")
    assert len(errs) == 4 and all("does not allow" in f.message for f in errs)


def test_memlock_strategy_node_limit_is_a_warning_about_the_machineconfig() -> None:
    config = derive("barcelona", lambda d: d["defaults"].update(memlock_rdma="node-limit"))
    findings = check(config)
    warns = by_rule(findings, "memlock-strategy", "warning")
    assert {f.object for f in warns} == rdma_pods(config) and all("MachineConfig" in f.fix for f in warns)
    assert policy.errors(findings) == []


def test_memlock_strategy_root_without_uid_0() -> None:
    # The components always render runAsUser 0 for the root strategies; a regression that drops it is caught.
    config = stacks.load("barcelona")
    objs = copy.deepcopy(objects(config))
    sts = find_obj(objs, "StatefulSet", "h-kim")
    del sts["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsUser"]
    [f] = by_rule(check(config, objs), "memlock-strategy")
    assert f.object == "StatefulSet nccl-test/h-kim" and "needs uid 0" in f.message


def test_privileged_container_without_reason() -> None:
    # Barcelona's RDMA workloads made privileged through the default strategy: no privileged_reason anywhere.
    config = derive("barcelona", lambda d: d["defaults"].update(memlock_rdma="privileged"))
    errs = by_rule(check(config), "privileged-container")
    assert {f.object for f in errs} == rdma_pods(config) and all("without a stated reason" in f.message for f in errs)
    assert "privileged_reason" in errs[0].fix


def test_privileged_container_with_reason_is_a_warning_that_prints_it() -> None:
    config = stacks.load("cairo")
    [f] = [f for f in by_rule(check(config), "privileged-container", "warning") if f.object == "StatefulSet nccl-test/ml-dev-rdma"]
    assert config.workloads[0].privileged_reason and config.workloads[0].privileged_reason in f.message


def test_privileged_scc_prints_the_broad_grant_reason() -> None:
    config = stacks.load("cairo")
    [f] = by_rule(check(config), "privileged-scc", "warning")
    assert config.security.broad_grant_reason and config.security.broad_grant_reason in f.message
    assert "nccl-test/ml-dev-sa" in f.message


def test_privileged_scc_created_without_reason() -> None:
    # The SCC the program creates never allows privileged containers; should it ever, it needs a reason.
    config = stacks.load("barcelona")
    objs = copy.deepcopy(objects(config))
    find_obj(objs, "SecurityContextConstraints", "nccl-rdma-scc")["allowPrivilegedContainer"] = True
    [f] = by_rule(check(config, objs), "privileged-scc")
    assert f.field == "allowPrivilegedContainer" and "broad_grant_reason" in f.fix


def test_network_attachments_missing_nad() -> None:
    # device_access privileged makes no NAD copies, but the pods still attach nccl-test/eno5np0-network...
    findings = check(derive("barcelona", lambda d: d["fabric"].update(device_access="privileged")))
    errs = by_rule(findings, "network-attachments")
    assert errs and all("does not exist where the pod looks for it" in f.message for f in errs)
    assert any("nccl-test/eno5np0-network" in f.message for f in errs)
    assert errs[0].field.endswith('annotations["k8s.v1.cni.cncf.io/networks"]')


def test_network_attachments_namespace_the_pod_cannot_see() -> None:
    # Referencing the operator's NADs is fine from `default`, not from an arbitrary namespace.
    assert by_rule(check(derive("barcelona", lambda d: d["fabric"].update(nad_mode="reference"))), "network-attachments") == []
    findings = check(derive("barcelona", lambda d: d["fabric"].update(nad_mode="reference", nad_source_namespace="sriov-networks")))
    errs = by_rule(findings, "network-attachments")
    assert errs and all("lets a pod use NADs of its own namespace" in f.message for f in errs)


def test_sriov_resources_not_requested() -> None:
    # The components request one VF per attachment; a pod that loses the request is caught (seed 003's Pending).
    config = stacks.load("barcelona")
    objs = copy.deepcopy(objects(config))
    res = find_obj(objs, "StatefulSet", "yunshi")["spec"]["template"]["spec"]["containers"][0]["resources"]
    del res["requests"]["openshift.io/eno6np0rdma"], res["limits"]["openshift.io/eno6np0rdma"]
    [f] = by_rule(check(config, objs), "sriov-resources")
    assert f.object == "StatefulSet nccl-test/yunshi"
    assert "Insufficient openshift.io/eno6np0rdma" in f.message
    assert f.field == 'spec.template.spec.containers[0].resources.limits["openshift.io/eno6np0rdma"]'


def test_socket_ifname_names_an_interface_the_pod_lacks() -> None:
    findings = check(derive("nerc", lambda d: workload(d, "deepti-nerc").update(env={"NCCL_SOCKET_IFNAME": "net1"})))
    [f] = by_rule(findings, "socket-ifname")
    assert "no socket interface found" in f.message and f.field.endswith("env[NCCL_SOCKET_IFNAME]")
    # On Barcelona the RDMA pods have net1..net4 (and h-kim's TCP variant does not inherit RDMA-only NCCL settings),
    # but not net5.
    barcelona = derive("barcelona", lambda d: workload(d, "h-kim").update(env={"NCCL_SOCKET_IFNAME": "net1"}))
    assert by_rule(check(barcelona), "socket-ifname") == []
    barcelona = derive("barcelona", lambda d: workload(d, "h-kim").update(env={"NCCL_SOCKET_IFNAME": "net5"}))
    assert [f.object for f in by_rule(check(barcelona), "socket-ifname")] == ["StatefulSet nccl-test/h-kim"]


def test_socket_ifname_launcher_tcp_setting() -> None:
    findings = check(derive("nerc", lambda d: d["defaults"].update(tcp_socket_ifname="ib")))
    errs = by_rule(findings, "socket-ifname")
    assert len(errs) == 4 and all("LAUNCHER_TCP_SOCKET_IFNAME" in f.field for f in errs)


def test_ib_hca_names_devices_that_are_not_active() -> None:
    # Seeds 002/003: the HCA list called "perfect" named mlx5_10 and mlx5_11, which were not ACTIVE.
    findings = check(derive("barcelona", lambda d: workload(d, "h-kim").update(env={"NCCL_IB_HCA": "mlx5_6,mlx5_7,mlx5_10,mlx5_11"})))
    [f] = by_rule(findings, "ib-hca")
    assert "mlx5_10, mlx5_11" in f.message and "seed 002 'NCCL Settings'" in f.message
    good = derive("barcelona", lambda d: workload(d, "h-kim").update(env={"NCCL_IB_HCA": "=mlx5_6,mlx5_7,mlx5_8,mlx5_9"}))
    assert by_rule(check(good), "ib-hca") == []


def test_ib_hca_prefix_match_selects_other_devices() -> None:
    findings = check(derive("barcelona", lambda d: workload(d, "h-kim").update(env={"NCCL_IB_HCA": "mlx5_1"})))
    prefix = [f for f in by_rule(findings, "ib-hca") if "prefix" in f.message]
    assert len(prefix) == 1
    assert "mlx5_1 also selects mlx5_10, mlx5_11" in prefix[0].message and "=mlx5_1" in prefix[0].fix


def test_storage_class_unknown_class() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["volumes"][0]["storage_class"] = "nfs"

    [f] = by_rule(check(derive("cairo", edit)), "storage-class")
    assert f.object == "PersistentVolumeClaim nccl-test/ml-dev-workspace" and "'nfs' is not known on cairo" in f.message


def test_storage_class_of_a_patch() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["pvc_fixes"][0]["storage_class"] = "ceph-rbd"

    [f] = by_rule(check(derive("cairo", edit)), "storage-class")
    assert f.object == "PersistentVolumeClaim nfs/nfs-server-root (patch)"


def test_storage_class_none_is_a_warning() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["volumes"][1]["storage_class"] = None

    findings = check(derive("cairo", edit))
    [w] = by_rule(findings, "storage-class", "warning")
    assert w.object == "PersistentVolumeClaim nccl-test/ml-datasets" and "cluster's default class" in w.message


def test_access_mode_rwx_on_an_rwo_class() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["volumes"][0]["storage_class"] = "ocs-external-storagecluster-ceph-rbd"

    [f] = by_rule(check(derive("cairo", edit)), "access-mode")
    assert f.object == "PersistentVolumeClaim nccl-test/ml-dev-workspace"
    assert "provides ReadWriteOnce only: a ReadWriteMany claim stays Pending" in f.message


def test_access_mode_rwx_on_the_default_class() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["volumes"][1]["storage_class"] = None

    [f] = by_rule(check(derive("cairo", edit)), "access-mode")
    assert f.object == "PersistentVolumeClaim nccl-test/ml-datasets" and "default class" in f.message


def test_access_mode_claim_shared_by_several_pods_must_be_rwx() -> None:
    config = stacks.load("cairo")
    objs = copy.deepcopy(objects(config))
    find_obj(objs, "PersistentVolumeClaim", "ml-dev-workspace")["spec"]["accessModes"] = ["ReadWriteOnce"]
    [f] = by_rule(check(config, objs), "access-mode")
    assert "mounted by 4 pods" in f.message  # ml-dev-rdma and ml-dev-tcp, 2 pods each


def test_gpu_fit() -> None:
    findings = check(derive("nerc", lambda d: workload(d, "debug-deepti-nerc").update(gpus_per_node=8)))
    [f] = by_rule(findings, "gpu-fit")
    assert f.object == "Pod nccl-test/debug-deepti-nerc" and "8 GPUs" in f.message and "at most 4" in f.message


def test_replica_fit() -> None:
    findings = check(derive("cairo", lambda d: d["workloads"][0].update(nodes=3)))
    errs = by_rule(findings, "replica-fit")
    assert {f.object for f in errs} == {"StatefulSet nccl-test/ml-dev-rdma", "StatefulSet nccl-test/ml-dev-tcp"}
    assert all("3 pods, one per node, but only 2 node(s)" in f.message and f.field == "spec.replicas" for f in errs)


def test_replica_fit_pinned_to_an_unknown_node() -> None:
    findings = check(derive("cairo", lambda d: d["workloads"][0].update(node_names=["moc-r4pcc02u15", "moc-r4pcc02u17"])))
    errs = by_rule(findings, "replica-fit")
    assert any("moc-r4pcc02u17, which are not among the known nodes" in f.message for f in errs)
    assert any("only 1 node(s)" in f.message for f in errs)


def test_required_scc_missing() -> None:
    # The components always pin the SCC; a pod that loses the annotation is caught.
    config = stacks.load("nerc")
    objs = copy.deepcopy(objects(config))
    del find_obj(objs, "Pod", "deepti-nerc")["metadata"]["annotations"]["openshift.io/required-scc"]
    [f] = by_rule(check(config, objs), "required-scc")
    assert f.object == "Pod nccl-test/deepti-nerc" and "openshift.io/required-scc: restricted-v2" in f.fix


def test_every_rule_has_a_test_that_breaks_it() -> None:
    text = Path(__file__).read_text(encoding="utf-8")
    for rule_id in policy.RULES:
        assert f'"{rule_id}"' in text.split("def test_every_rule_has_a_test_that_breaks_it", 1)[0], rule_id


# --- the gate inside the Pulumi program ----------------------------------------------------------


class _Recorder(pulumi.runtime.Mocks):
    """Records the type of every resource the program registers."""

    def __init__(self, stack: str) -> None:
        self.stack = stack
        self.types: list[str] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.types.append(args.typ)
        if args.resource_id:  # a read of a source NAD: answer what the SR-IOV operator made
            from render.engine import live_nad

            return args.resource_id, live_nad(stacks.load(self.stack), args.resource_id)
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


def run_main(stack: str, config_file: Path | None = None) -> tuple[list[str], list[tuple[str, str]], BaseException | None]:
    """Run the real entry point (__main__.py) as `pulumi preview -s STACK` would, under mocks."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks, logs = _Recorder(stack), _Logs()
    raised: BaseException | None = None
    try:
        pulumi_settings.ROOT.set(None)
        pulumi.runtime.set_mocks(mocks, project="gpu-training", stack=stack, preview=True, logger=logs)  # type: ignore[arg-type]
        pulumi.runtime.set_all_config({"gpu-training:configFile": str(config_file)} if config_file else {})
        try:
            _sync_await(run_pulumi_func(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__pulumi__")))
        except Exception as err:  # noqa: BLE001 (the test asserts on it)
            raised = err
    finally:
        pulumi.runtime.set_all_config({})
        asyncio.set_event_loop(None)
        loop.close()
    declared = [t for t in mocks.types if t != "pulumi:pulumi:Stack"]
    return declared, logs.lines, raised


def test_gate_stops_a_broken_config_before_any_resource(tmp_path: Path) -> None:
    data = yaml.safe_load(stacks.dump(stacks.load("barcelona")))
    data["security"]["grant"] = False
    path = tmp_path / "barcelona.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    declared, _, raised = run_main("barcelona", path)
    assert isinstance(raised, pulumi.RunError)
    assert "scc-grant" in str(raised) and "may not use SCC 'nccl-rdma-scc'" in str(raised)
    assert declared == []


def test_gate_logs_warnings_and_declares_the_stack() -> None:
    declared, logs, raised = run_main("cairo")
    assert raised is None
    warns = [m for level, m in logs if level == "warning"]
    assert any(m.startswith("warning privileged-scc SecurityContextConstraints privileged") for m in warns)
    assert any("privileged-container" in m for m in warns)
    assert "kubernetes:apps/v1:StatefulSet" in declared


def test_gate_turns_a_config_error_into_run_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: cairo\ngpus_per_node: four\n", encoding="utf-8")
    declared, _, raised = run_main("cairo", path)
    assert isinstance(raised, pulumi.RunError)
    assert str(path) in str(raised) and "gpus_per_node" in str(raised)
    assert declared == []
    declared, _, raised = run_main("staging")
    assert isinstance(raised, pulumi.RunError) and "unknown stack 'staging'" in str(raised)
