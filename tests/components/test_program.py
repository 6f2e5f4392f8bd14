"""What `pulumi up` would do with the objects the program declares: lifecycle, await policy, gating,
providers, reads, tiers. Every test runs on a config the tests own (tests/fixtures.py), so editing a
committed stack never breaks one.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from components.lifecycle import PATCH_FORCE, WAIT_FOR
from components.program import layout, objects, patches
from tests import fixtures
from tests.helpers import container, env_of, find, pod_spec, rendered_fixture
from tools import diff
from tools.render import MISSING, DuplicateResource, MissingObject, Mocks, Rendering, run
from tools.writer import canonical, write

INTERNAL = "image-registry.openshift-image-registry.svc:5000"


def options(r: Rendering, kind: str, name: str) -> dict[str, Any]:
    rec = next(
        x
        for x in r.resources
        if x.type.endswith(f":{kind}") and x.name.endswith(f"/{name}") or x.name == name and x.type.endswith(f":{kind}")
    )
    return rec.options


# --- lifecycle: what `pulumi up` waits for ---------------------------------------------------------


def test_a_statefulset_is_awaited_until_its_pods_exist_never_until_they_are_ready() -> None:
    r = rendered_fixture("roce")
    sts = find(r, "StatefulSet", "dev")
    assert sts["metadata"]["annotations"] == {WAIT_FOR: "jsonpath={.status.replicas}=2", PATCH_FORCE: "true"}
    assert options(r, "StatefulSet", "dev")["custom_timeouts"] == ("5m", "5m")
    assert "pulumi.com/skipAwait" not in sts["metadata"]["annotations"]


def test_stopping_a_statefulset_keeps_it_and_its_claims_at_zero_replicas() -> None:
    r = run(fixtures.config("roce", lambda d: fixtures.workload(d, "dev").update(state="stopped")))
    sts = find(r, "StatefulSet", "dev")
    assert sts["spec"]["replicas"] == 0
    assert sts["metadata"]["annotations"][WAIT_FOR] == "jsonpath={.status.replicas}=0"
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["workspace"]
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert r.outputs["workloads"]["dev"]["state"] == "stopped"


def test_a_training_job_is_never_awaited_to_completion() -> None:
    r = rendered_fixture("roce")
    job = find(r, "Job", "train-r1")
    assert job["metadata"]["annotations"] == {WAIT_FOR: "jsonpath={.status.startTime}", PATCH_FORCE: "true"}
    # No TTL: a Job the cluster deleted would be forgotten by `pulumi refresh` and run again by the next `up`.
    assert "ttlSecondsAfterFinished" not in job["spec"] and "suspend" not in job["spec"]
    # The record of its run: no change of its template ever reaches it (it waits for the next run).
    rec = next(x for x in r.resources if x.name == "team-a/train-r1")
    assert rec.options["ignore_changes"] == ["spec.template", "spec.completions", "spec.parallelism", "spec.selector"]


def test_a_stopped_job_is_not_declared_and_starts_from_the_config_of_that_moment() -> None:
    stopped = run(fixtures.config("roce", lambda d: fixtures.workload(d, "train").update(state="stopped")))
    assert not [o for o in stopped.objects() if o["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == "train"]
    assert stopped.outputs["workloads"]["train"]["state"] == "stopped"


def test_a_job_runs_again_only_under_a_new_run_number() -> None:
    again = run(fixtures.config("roce", lambda d: fixtures.workload(d, "train").update(run_number=2)))
    names = {o["metadata"]["name"] for o in again.objects() if o["kind"] == "Job" and o["metadata"]["name"].startswith("train")}
    assert names == {"train-r2"}
    assert again.outputs["workloads"]["train"]["object"] == "train-r2"


def _tree(tmp: Path, rendering: Rendering) -> dict[str, Any]:
    return diff.read_folder(write(rendering, tmp))


def test_a_job_template_change_is_held_for_the_next_run_and_a_statefulsets_rolls(tmp_path: Path) -> None:
    before = _tree(tmp_path / "a", rendered_fixture("roce"))
    after = _tree(
        tmp_path / "b",
        run(fixtures.config("roce", lambda d: fixtures.workload(d, "train").update(args=["bash", "/scripts/train.sh", "v2.py"]))),
    )
    text = diff.report("roce", "before", diff.diff_trees(before, after), len(after))
    job_block = text.split("Job team-a/train-r1", 1)[1]
    assert "HELD: not applied to the Job that exists" in job_block and "raise run_number" in job_block
    # A StatefulSet's template change is a rolling update, not a replacement; it restarts the run all the same.
    after = _tree(tmp_path / "c", run(fixtures.config("roce", lambda d: fixtures.workload(d, "dev").update(env={"X": "1"}))))
    text = diff.report("roce", "before", diff.diff_trees(before, after), len(after))
    sts_block = text.split("StatefulSet team-a/dev", 1)[1].split("\n~", 1)[0]
    assert "REPLACES" not in sts_block and "RESTARTS: its pods are replaced one by one" in sts_block
    # A claim template change does replace it, and says what that costs.
    after = _tree(tmp_path / "d", run(fixtures.config("roce", lambda d: d["volumes"][0].update(size="20Gi"))))
    text = diff.report("roce", "before", diff.diff_trees(before, after), len(after))
    assert "REPLACES the object: the StatefulSet is deleted, then created again" in text


def test_switching_the_transport_updates_the_same_workload() -> None:
    def to_tcp(d: dict[str, Any]) -> None:
        w = fixtures.workload(d, "dev")
        w.update(transport="tcp", tcp_variants=[])

    r = run(fixtures.config("roce", to_tcp))
    sts = find(r, "StatefulSet", "dev")
    tpl = sts["spec"]["template"]
    assert "k8s.v1.cni.cncf.io/networks" not in tpl["metadata"]["annotations"]
    assert tpl["metadata"]["annotations"]["openshift.io/required-scc"] == "restricted-v2"
    ctx = container(sts)["securityContext"]
    assert ctx["runAsNonRoot"] is True and ctx["capabilities"] == {"drop": ["ALL"]} and "runAsUser" not in ctx
    assert env_of(sts)["NCCL_IB_DISABLE"] == "1"
    assert not [k for k in container(sts)["resources"]["limits"] if k.startswith("openshift.io/")]


def test_a_variant_never_runs_beside_its_source_unless_asked() -> None:
    def both(d: dict[str, Any]) -> None:
        fixtures.workload(d, "dev")["tcp_variants"][0]["state"] = "running"

    with pytest.raises(Exception, match=r"workloads\[dev\]\.tcp_variants\[dev-tcp\]\.state: .*alternatives"):
        fixtures.config("roce", both)

    def alongside(d: dict[str, Any]) -> None:
        fixtures.workload(d, "dev")["tcp_variants"][0].update(state="running", alongside=True)
        d["bandwidth_checks"][0]["enabled"] = False

    r = run(fixtures.config("roce", alongside))
    assert find(r, "StatefulSet", "dev-tcp")["spec"]["replicas"] == 2


def test_a_variant_is_stopped_by_default() -> None:
    variant = find(rendered_fixture("roce"), "StatefulSet", "dev-tcp")
    assert variant["spec"]["replicas"] == 0


# --- the bandwidth check gates the rollout ---------------------------------------------------------


def _check_job(r: Rendering) -> dict[str, Any]:
    (job,) = [o for o in r.objects() if o["kind"] == "Job" and o["metadata"]["name"].startswith("fabric-")]
    return job


def test_the_check_runs_first_and_the_workloads_of_its_transport_wait_for_it() -> None:
    r = rendered_fixture("roce")
    job = _check_job(r)
    assert job["spec"]["activeDeadlineSeconds"] == 30 * 60 and job["spec"]["backoffLimit"] == 0
    assert WAIT_FOR not in job["metadata"].get("annotations", {})  # the provider's own await: its verdict
    rec = next(x for x in r.resources if x.name == f"team-a/{job['metadata']['name']}")
    assert rec.options["custom_timeouts"] == ("35m", "35m")
    assert "BandwidthCheck" in rec.options["parent"]
    dev = next(x for x in r.resources if x.type.endswith("StatefulSet") and x.name == "team-a/dev")
    solo = next(x for x in r.resources if x.type.endswith("StatefulSet") and x.name == "team-b/solo")
    # depends_on a component is a dependency on each of its children: the check's Job among them.
    gate = f"BandwidthCheck$kubernetes:batch/v1:Job::team-a/{job['metadata']['name']}"
    assert any(d.endswith(gate) for d in dev.options["depends_on"])  # RDMA: waits for the fabric's verdict
    assert not any("BandwidthCheck" in d for d in solo.options["depends_on"])  # TCP: not gated by an RDMA check
    # The check measures the training pods' network: the same networks and VFs as dev.
    assert pod_spec(job)["containers"][0]["resources"]["limits"] == container(find(r, "StatefulSet", "dev"))["resources"]["limits"] | {
        "cpu": "16", "memory": "64Gi"
    }  # fmt: skip


def test_a_workload_stopped_in_the_edit_that_enables_a_check_frees_its_nodes_before_the_check_starts() -> None:
    """Gated by the check, a StatefulSet stopped in the same edit would keep the nodes the check needs until the check's
    verdict, which never comes (found live: live/tests/test_scheduling.py). Stopped, it goes first and the check waits
    for its pods to be gone; running, it waits for the check."""
    r = run(fixtures.config("roce", lambda d: fixtures.workload(d, "dev").update(state="stopped")))
    job = _check_job(r)
    check = next(x for x in r.resources if x.name == f"team-a/{job['metadata']['name']}")
    dev = next(x for x in r.resources if x.type.endswith("StatefulSet") and x.name == "team-a/dev")
    assert dev.inputs["spec"]["replicas"] == 0
    assert not [d for d in dev.options["depends_on"] if "BandwidthCheck" in d]
    assert any(d.endswith("TrainingWorkload$kubernetes:apps/v1:StatefulSet::team-a/dev") for d in check.options["depends_on"])
    running = rendered_fixture("roce")
    check = next(x for x in running.resources if x.name == f"team-a/{_check_job(running)['metadata']['name']}")
    assert not [d for d in check.options["depends_on"] if d.endswith("StatefulSet::team-a/dev")]  # dev runs: it waits for the check


def test_the_check_runs_again_when_the_fabric_or_its_run_number_changes_and_only_then() -> None:
    base = _check_job(rendered_fixture("roce"))["metadata"]["name"]
    unrelated = _check_job(run(fixtures.config("roce", lambda d: fixtures.workload(d, "solo").update(cpu="8"))))["metadata"]["name"]
    fabric = _check_job(run(fixtures.config("roce", lambda d: d["fabric"].update(link_gbps=200))))["metadata"]["name"]
    rerun = _check_job(run(fixtures.config("roce", lambda d: d["bandwidth_checks"][0].update(run_number=2))))["metadata"]["name"]
    assert unrelated == base
    assert len({base, fabric, rerun}) == 3


def test_a_disabled_check_deploys_nothing() -> None:
    r = run(fixtures.config("roce", lambda d: d["bandwidth_checks"][0].update(enabled=False)))
    assert not [o for o in r.objects() if "fabric" in o["metadata"]["name"]]
    assert r.outputs["bandwidth_checks"] == {}
    dev = next(x for x in r.resources if x.type.endswith("StatefulSet") and x.name == "team-a/dev")
    assert not [d for d in dev.options["depends_on"] if "BandwidthCheck" in d]


# --- provider, ConfigMaps, claims --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_every_resource_and_read_goes_through_the_stacks_own_provider(name: str) -> None:
    r = rendered_fixture(name)
    (provider,) = r.providers
    assert provider.name == name
    assert provider.inputs["clusterIdentifier"] == name  # a moved kubeconfig never replaces the provider
    assert provider.inputs["enableConfigMapMutable"] == "true"  # launcher changes update in place
    for rec in r.resources:
        # (the mock runtime spells top-level URNs with the root stack's type; the engine leaves it out)
        assert f"pulumi:providers:kubernetes::{name}::" in rec.options["provider"], rec.name


def test_the_takeover_run_configures_the_stacks_own_provider() -> None:
    (provider,) = run(fixtures.config("tcp"), adopt=True).providers
    assert provider.inputs["upsertExistingObjects"] == "true" and provider.inputs["enablePatchForce"] == "true"
    (plain,) = rendered_fixture("tcp").providers
    assert plain.inputs["upsertExistingObjects"] == "false" and plain.inputs["enablePatchForce"] == "false"


def test_the_provider_takes_nothing_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK fills every provider setting left out from PULUMI_K8S_* and KUBECONFIG: a researcher's exported
    # variable would take objects over without the stack file's say, and a CI runner's kubeconfig path would
    # make its provider differ from a laptop's.
    monkeypatch.setenv("PULUMI_K8S_UPSERT_EXISTING_OBJECTS", "true")
    monkeypatch.setenv("PULUMI_K8S_ENABLE_PATCH_FORCE", "true")
    monkeypatch.setenv("PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", "false")
    monkeypatch.setenv("KUBECONFIG", "/runner/tmp/kubeconfig:/home/me/.kube/config")
    (provider,) = run(fixtures.config("tcp")).providers
    assert provider.inputs["upsertExistingObjects"] == "false" and provider.inputs["enablePatchForce"] == "false"
    assert provider.inputs["enableServerSideApply"] == "true"  # the claim patches need server-side apply
    assert provider.inputs["kubeconfig"] == ""  # client-go's own loading: $KUBECONFIG lists work


def test_hostile_provider_variables_change_nothing_the_program_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    # With PULUMI_K8S_SKIP_UPDATE_UNREACHABLE=true a read against a dead cluster returns what it asked for, and
    # every prerequisite passes: each setting the SDK would fill from the environment is set by the program.
    calm = run(fixtures.config("tcp")).providers[0].inputs
    for name in ("DELETE_UNREACHABLE", "SKIP_UPDATE_UNREACHABLE", "ENABLE_SECRET_MUTABLE", "ENABLE_CONFIGMAP_MUTABLE",
                 "SUPPRESS_DEPRECATION_WARNINGS", "SUPPRESS_HELM_HOOK_WARNINGS", "ENABLE_SERVER_SIDE_APPLY"):  # fmt: skip
        monkeypatch.setenv(f"PULUMI_K8S_{name}", "false" if name in ("ENABLE_CONFIGMAP_MUTABLE", "ENABLE_SERVER_SIDE_APPLY") else "true")
    monkeypatch.setenv("PULUMI_K8S_CLIENT_TIMEOUT", "1")
    monkeypatch.setenv("PULUMI_K8S_CLIENT_QPS", "0.01")
    hostile = run(fixtures.config("tcp")).providers[0].inputs
    assert hostile == calm
    assert calm["skipUpdateUnreachable"] == "false" and calm["deleteUnreachable"] == "false"


def test_a_claim_both_mounted_and_patched_is_read_once() -> None:
    # The engine rejects two reads with one URN; the mock runtime now does too.
    def edit(d: dict[str, Any]) -> None:
        d["volumes"].append({"name": "nfs-server-root", "namespace": "nfs", "mount_path": "/nfsroot", "existing": True})
        d["namespaces"].append("nfs")

    r = run(fixtures.config("ib", edit))
    claims = [x for x in r.reads if x.name == "nfs/nfs-server-root"]
    assert len(claims) == 1


def test_one_launcher_configmap_per_namespace_that_runs_pods() -> None:
    r = rendered_fixture("roce")
    launchers = [o for o in r.objects() if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "gpu-training-launcher"]
    assert sorted(o["metadata"]["namespace"] for o in launchers) == ["team-a", "team-b"]
    from components.launcher import shipped_files

    assert launchers[0]["data"] == shipped_files()


def test_claims_are_protected_and_nfs_claims_wait_for_the_nfs_fix() -> None:
    r = rendered_fixture("ib")
    (claim,) = [x for x in r.resources if x.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    (fix,) = [x for x in r.resources if x.is_patch]
    assert claim.options["protect"] and claim.options["retain_on_delete"]
    assert fix.options["retain_on_delete"] and not fix.options["protect"]
    assert any(d.endswith("PersistentVolumeClaimPatch::nfs/nfs-server-root") for d in claim.options["depends_on"])


def test_data_of_a_statefulset_outlives_it() -> None:
    sts = find(rendered_fixture("roce"), "StatefulSet", "dev")
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    out = rendered_fixture("roce").outputs["workloads"]["dev"]
    assert out["per_pod_claims"] == ["team-a/workspace-dev-0", "team-a/workspace-dev-1"]


# --- reads: what preview checks exists ---------------------------------------------------------------


def _reads(r: Rendering) -> set[str]:
    return {f"{x.type.rsplit(':', 1)[1]} {x.name}" for x in r.reads}


def test_each_tier_reads_what_it_relies_on() -> None:
    config = fixtures.config("ib")
    project = _reads(run(config, "project"))
    platform = _reads(run(config, "platform"))
    assert project == {"Namespace lab", "RoleBinding lab/system:openshift:scc:privileged"}
    assert platform == {
        "Namespace lab",
        "SecurityContextConstraints privileged",
        "PersistentVolumeClaim nfs/nfs-server-root",
        "StorageClass ceph-rbd",
        "StorageClass nfs-csi",
    }
    roce = _reads(rendered_fixture("roce"))
    assert {"NetworkAttachmentDefinition default/port1-network", "Namespace team-b"} <= roce
    assert not [x for x in roce if x.startswith("Secret")]  # a read would copy the secret into the state


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_reads_send_no_inputs_so_the_provider_takes_the_namespace_from_the_id(name: str) -> None:
    r = rendered_fixture(name)
    assert r.read_inputs and all(inputs == {} for inputs in r.read_inputs)
    if name != "tcp":  # it reads its namespace only, which is cluster-scoped
        assert any("/" in x.name for x in r.reads)


def test_a_missing_namespace_fails_preview_naming_it() -> None:
    with pytest.raises(MissingObject, match="resource 'lab' does not exist"):
        run(fixtures.config("ib"), live={("Namespace", "lab"): MISSING})


def test_a_drifted_source_nad_fails_preview_with_the_fix() -> None:
    import pulumi

    live = {
        "metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port1rdma"}},
        "spec": {"config": '{"type":"sriov","vlan":7}'},
    }
    with pytest.raises(
        pulumi.RunError, match=r"NetworkAttachmentDefinition default/port1-network: its CNI config differs.*Fix: .*cni_config"
    ):
        run(fixtures.config("roce"), live={("NetworkAttachmentDefinition", "default/port1-network"): live})


@pytest.mark.parametrize(
    "state,phrase",
    [
        ({"spec": {"storageClassName": "nfs-client"}, "status": {"phase": "Bound"}}, "has storage class 'nfs-client' already"),
        ({"spec": {}, "status": {"phase": "Bound"}}, "Bound without a storage class"),
    ],
)
def test_the_nfs_patch_is_refused_in_preview_when_it_cannot_apply(state: dict[str, Any], phrase: str) -> None:
    import pulumi

    with pytest.raises(pulumi.RunError, match=phrase):
        run(fixtures.config("ib"), "platform", live={("PersistentVolumeClaim", "nfs/nfs-server-root"): {"metadata": {}, **state}})


def test_an_existing_scc_that_lacks_what_the_pods_add_fails_preview() -> None:
    import pulumi

    def existing(d: dict[str, Any]) -> None:
        d["security"].update(create=False, existing_allowed_capabilities=["IPC_LOCK"])

    live = {
        "metadata": {"name": "gpu-rdma"},
        "allowedCapabilities": [],
        "allowPrivilegedContainer": False,
        "runAsUser": {"type": "MustRunAsRange"},
    }
    with pytest.raises(
        pulumi.RunError, match=r"gpu-rdma: it does not admit capability IPC_LOCK .*; it does not admit uid 0 \(its runAsUser"
    ):
        run(fixtures.config("roce", existing), "platform", live={("SecurityContextConstraints", "gpu-rdma"): live})


def test_the_project_tier_fails_preview_when_the_platform_did_not_grant_its_scc() -> None:
    import pulumi

    live = {"metadata": {"name": "system:openshift:scc:gpu-rdma"}, "subjects": [], "roleRef": {}}
    with pytest.raises(pulumi.RunError, match=r"RoleBinding team-a/system:openshift:scc:gpu-rdma: it does not bind trainer.*platform tier"):
        run(fixtures.config("roce"), "project", live={("RoleBinding", "team-a/system:openshift:scc:gpu-rdma"): live})


def test_a_failed_check_holds_back_the_pods_in_up_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # `pulumi up --skip-preview` meets the check for the first time while declaring: what needs the grant must
    # not be sent to the cluster, or its pods would be rejected by the SCC admission at once.
    import pulumi

    from tools import render as engine

    sent: list[str] = []

    class Recording(Mocks):
        def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
            if not args.resource_id:
                sent.append(args.typ.rsplit(":", 1)[-1])
            return super().new_resource(args)

    monkeypatch.setattr(engine, "Mocks", Recording)
    live = {"metadata": {"name": "system:openshift:scc:gpu-rdma"}, "subjects": [], "roleRef": {}}
    with pytest.raises(pulumi.RunError, match="does not bind trainer"):
        run(fixtures.config("roce"), "project", live={("RoleBinding", "team-a/system:openshift:scc:gpu-rdma"): live})
    assert "ServiceAccount" in sent  # what needs no read goes ahead
    assert not {"StatefulSet", "Job"} & set(sent), sent


def test_the_state_the_stack_assumes_passes_every_check() -> None:
    from components.prerequisites import requirements

    for name in fixtures.FIXTURES:
        for tier in ("all", "platform", "project"):
            for req in requirements(fixtures.config(name), tier):
                state = {f: req.expected.get(f) for f in req.fields}
                assert req.verify is None or req.verify(state) is None, (name, tier, req.kind, req.object_id)


# --- tiers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_the_project_tier_declares_nothing_a_project_admin_may_not(name: str) -> None:
    r = run(fixtures.config(name), "project")
    for o in r.objects():
        assert o["metadata"].get("namespace") in fixtures.data(name)["namespaces"], o
        assert not (o["kind"] == "RoleBinding" and o["roleRef"]["name"].startswith("system:openshift:scc:")), o
    platform = {(o["kind"], o["metadata"]["name"]) for o in run(fixtures.config(name), "platform").objects()}
    everything = {(o["kind"], o["metadata"]["name"]) for o in rendered_fixture(name).objects()}
    assert platform | {(o["kind"], o["metadata"]["name"]) for o in r.objects()} == everything


# --- pods --------------------------------------------------------------------------------------------


def test_pods_tolerate_the_gpu_taints_and_stay_on_their_node_set() -> None:
    r = rendered_fixture("roce")
    dev = pod_spec(find(r, "StatefulSet", "dev"))
    solo = pod_spec(find(r, "StatefulSet", "solo"))
    assert dev["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert dev["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    hosts = dev["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert hosts == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a", "node-b", "node-c", "node-d"]}
    assert dev["affinity"]["podAntiAffinity"]  # one pod per node
    assert solo["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][
        0
    ]["values"] == ["node-e", "node-f", "node-g"]
    tcp = pod_spec(find(rendered_fixture("tcp"), "StatefulSet", "one"))
    assert "affinity" not in tcp  # one unnamed node set: nothing to pin
    assert tcp["tolerations"] == [{"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "H100", "effect": "NoSchedule"}]


def test_a_pod_holds_only_what_its_memlock_strategy_needs() -> None:
    r = rendered_fixture("roce")
    rdma = container(find(r, "StatefulSet", "dev"))["securityContext"]
    assert rdma == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsUser": 0,
        "runAsNonRoot": False,
    }
    tcp = container(find(r, "StatefulSet", "solo"))["securityContext"]
    assert tcp == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
    }
    assert find(r, "StatefulSet", "solo")["spec"]["template"]["metadata"]["annotations"]["openshift.io/required-scc"] == "restricted-v2"
    for o in r.objects():
        if o["kind"] in ("StatefulSet", "Job"):
            assert pod_spec(o)["automountServiceAccountToken"] is False
    scc = find(r, "SecurityContextConstraints", "gpu-rdma")
    assert scc["allowedCapabilities"] == ["IPC_LOCK"] and scc["requiredDropCapabilities"] == ["ALL"]
    # Grants only where pods run under the SCC: team-b runs TCP only.
    assert [o["metadata"]["namespace"] for o in r.objects() if o["kind"] == "RoleBinding"] == ["team-a"]


def test_the_rendezvous_admits_only_the_workloads_own_pods() -> None:
    r = rendered_fixture("roce")
    policy = find(r, "NetworkPolicy", "dev")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/instance": "dev"}}
    own, router = policy["spec"]["ingress"]
    assert own == {"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/instance": "dev"}}}]}
    assert router["ports"] == [{"protocol": "TCP", "port": 8888}]  # only the routed port; debugpy stays port-forward only


def test_developer_ports_get_a_service_and_an_edge_route_to_rank_0() -> None:
    r = rendered_fixture("roce")
    svc = find(r, "Service", "dev-dev")
    assert svc["spec"]["selector"] == {"app.kubernetes.io/instance": "dev", "statefulset.kubernetes.io/pod-name": "dev-0"}
    assert [p["name"] for p in svc["spec"]["ports"]] == ["jupyter"]
    route = find(r, "Route", "dev-jupyter")
    assert route["spec"]["to"]["name"] == "dev-dev" and route["spec"]["port"] == {"targetPort": "jupyter"}
    assert route["spec"]["tls"]["termination"] == "edge"
    assert [p["name"] for p in container(find(r, "StatefulSet", "dev"))["ports"]] == ["rendezvous", "jupyter", "debugpy"]
    assert r.outputs["workloads"]["dev"]["routes"] == {"jupyter": "dev-jupyter"}


def test_the_launcher_learns_what_was_set_on_purpose_and_where_the_hostfile_goes() -> None:
    env = env_of(find(rendered_fixture("roce"), "StatefulSet", "dev"))
    assert env["LAUNCHER_EXPLICIT_NCCL"] == "NCCL_IB_DISABLE,NCCL_IB_TIMEOUT,NCCL_NET_GDR_LEVEL"
    assert env["LAUNCHER_DEEPSPEED_HOSTFILE"] == "/workspace/.deepspeed/hostfile"
    assert env["LAUNCHER_HOSTS"] == "dev-0.dev-headless.team-a.svc.cluster.local,dev-1.dev-headless.team-a.svc.cluster.local"
    assert env["LAUNCHER_STRICT"] == "false"


@pytest.mark.parametrize("name,workload,layer", [("ib", "env", "InfiniBand"), ("roce", "dev", "Ethernet"), ("tcp", "one", "")])
def test_the_launcher_takes_only_ports_of_the_fabrics_link_layer(name: str, workload: str, layer: str) -> None:
    # The rendered environment is one the launcher accepts, and it names the link layer of an RDMA pod's fabric.
    from components.launcher.contract import Config

    pod = [o for o in objects(fixtures.config(name)) if o["kind"] in ("StatefulSet", "Job") and o["metadata"]["name"] == workload]
    assert pod, workload
    env = {k: v or "" for k, v in env_of(pod[0]).items()}
    assert Config({**env, "POD_NAME": f"{workload}-0"}).link_layer == layer


def test_secrets_scripts_and_requests_reach_the_pod_without_the_secrets_value() -> None:
    job = find(rendered_fixture("roce"), "Job", "train-r1")
    c = container(job)
    (token,) = [e for e in c["env"] if e["name"] == "HF_TOKEN"]
    assert token == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-secret", "key": "token"}}}
    assert {"name": "scripts-0", "mountPath": "/scripts", "readOnly": True} in c["volumeMounts"]
    one = container(find(rendered_fixture("tcp"), "StatefulSet", "one"))
    assert one["resources"]["requests"]["cpu"] == "4" and one["resources"]["limits"]["cpu"] == "8"
    assert one["resources"]["requests"]["memory"] == "8Gi" and one["resources"]["limits"]["memory"] == "10Gi"


def test_a_changed_dockerfile_is_a_new_buildconfig_into_the_same_tag() -> None:
    before = [o for o in rendered_fixture("roce").objects() if o["kind"] == "BuildConfig"]
    after = [
        o
        for o in run(
            fixtures.config("roce", lambda d: d["images"][0].update(dockerfile=d["images"][0]["dockerfile"] + "RUN true\n"))
        ).objects()
        if o["kind"] == "BuildConfig"
    ]
    assert before[0]["metadata"]["name"] != after[0]["metadata"]["name"]
    assert before[0]["spec"]["output"] == after[0]["spec"]["output"] == {"to": {"kind": "ImageStreamTag", "name": "trainer:latest"}}
    assert before[0]["spec"]["triggers"] == [{"type": "ConfigChange"}]  # it builds once, when created


def test_node_level_objects_are_off_by_default_and_say_what_they_write() -> None:
    assert not [o for o in rendered_fixture("roce").objects() if o["kind"] == "MachineConfig"]
    r = run(
        fixtures.config("roce", lambda d: d.update(node_level={"crio_memlock_unlimited": True, "iommu_passthrough": True, "reason": "why"}))
    )
    memlock = find(r, "MachineConfig", "99-worker-crio-memlock")
    (file,) = memlock["spec"]["config"]["storage"]["files"]
    assert file["path"] == "/etc/crio/crio.conf.d/99-memlock" and file["mode"] == 0o644
    text = base64.b64decode(file["contents"]["source"].split(",", 1)[1]).decode()
    assert text == '[crio.runtime]\ndefault_ulimits = ["memlock=-1:-1"]\n'
    assert find(r, "MachineConfig", "99-worker-iommu-passthrough")["spec"]["kernelArguments"] == ["iommu=pt"]
    assert memlock["metadata"]["labels"]["machineconfiguration.openshift.io/role"] == "worker"


# --- the program as a whole ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_the_objects_the_preflight_reads_are_the_ones_declared(name: str) -> None:
    r = rendered_fixture(name)

    def key(o: dict[str, Any]) -> tuple[str, str, str]:
        return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])

    config = r.config
    assert sorted((canonical(x.object, True) for x in r.resources if not x.is_patch), key=key) == sorted(
        (canonical(o, True) for o in objects(config)), key=key
    )
    assert [canonical(x.object, True) for x in r.resources if x.is_patch] == [canonical(p, True) for p in patches(config)]


@pytest.mark.parametrize("name", sorted(fixtures.FIXTURES))
def test_the_layout_is_what_the_components_register(name: str) -> None:
    """components.program.layout (which the import plan reads) names each object's parent as the
    components really register it."""
    r = rendered_fixture(name)
    registered = set()
    for rec in r.resources:
        parent = rec.options["parent"]
        ptype, pname = parent.split("::")[-2].rsplit("$", 1)[-1], parent.split("::")[-1]
        registered.add((rec.type, rec.name, ptype, pname))
    from components.kube import logical_name, token

    planned = {(token(d.object, d.patch), logical_name(d.object), d.component_type, d.component_name) for d in layout(r.config)}
    assert registered == planned


def test_two_resources_with_one_name_are_refused_as_pulumi_up_would() -> None:
    from pulumi.runtime.mocks import MockResourceArgs

    mocks = Mocks(fixtures.config("tcp"), "all", {})
    args = MockResourceArgs(typ="kubernetes:core/v1:ConfigMap", name="proj/x", inputs={}, provider="", resource_id="", custom=True)
    mocks.new_resource(args)
    with pytest.raises(DuplicateResource, match="Duplicate resource URN"):
        mocks.new_resource(args)


def test_rendering_is_deterministic(tmp_path: Path) -> None:
    config = fixtures.config("roce")
    a, b = write(run(config), tmp_path / "a"), write(run(config), tmp_path / "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert "replicas: 2\n" in (a / "team-a" / "statefulset-dev.yaml").read_text()  # ints, not 2.0
    assert json.loads((a / "outputs.json").read_text())["schema_version"] == "2"


def test_the_capabilities_of_a_bandwidth_check_count_when_the_scc_is_made() -> None:
    # A check whose memlock strategy differs from the workloads' gets an SCC that admits it.
    r = run(fixtures.config("roce", lambda d: d["bandwidth_checks"][0].update(memlock="root-sys-resource")))
    assert find(r, "SecurityContextConstraints", "gpu-rdma")["allowedCapabilities"] == ["IPC_LOCK", "SYS_RESOURCE"]
    assert container(_check_job(r))["securityContext"]["capabilities"]["add"] == ["IPC_LOCK", "SYS_RESOURCE"]
