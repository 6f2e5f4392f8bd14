"""The live tier's SCC admission harness, without a cluster (live/scc.py, docs/live.md "SCC admission"): the
allocation annotations in the format and by the scheme of OpenShift's namespace security allocation controller, the
SCC manifests as OpenShift ships them and the program's facts read from them, the webhooks' registration."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from config.openshift import HOST_NAMESPACES, OPENSHIFT_SCCS, SccFacts
from live import scc

# apiserver-library-go's sccadmission waits for these before it admits anything (admission.go standardSCCNames).
STANDARD = {"anyuid", "hostaccess", "hostmount-anyuid", "hostnetwork", "hostnetwork-v2", "nonroot", "nonroot-v2", "privileged",
            "restricted", "restricted-v2"}  # fmt: skip


def test_the_first_projects_get_the_controllers_first_blocks() -> None:
    """cluster-policy-controller's default range 1000000000-1999999999/10000: block i starts at 1000000000 + i x 10000,
    written START/SIZE; the supplemental groups are the same block."""
    assert scc.allocation(0) == {scc.UID_RANGE: "1000000000/10000", scc.SUPPLEMENTAL_GROUPS: "1000000000/10000", scc.MCS: "s0:c1,c0"}
    assert scc.uid_block(68) == "1000680000/10000"
    assert scc.uid_block(99_999) == "1999990000/10000"
    with pytest.raises(ValueError):
        scc.uid_block(100_000)


def _colex_2_subsets(n: int) -> list[tuple[int, int]]:
    """The 2-subsets of 0..n-1 in co-lex order (by the larger element, then the smaller): the order mcs.Range ranks."""
    return sorted(itertools.combinations(range(n), 2), key=lambda pair: (pair[1], pair[0]))


def test_mcs_labels_are_the_co_lex_unranking_of_five_per_project() -> None:
    """Block i's label is the 2-category subset of rank 5 i (mcsLabelsPerProject 5), highest category first: checked
    against the order itself, and distinct for every project."""
    order = _colex_2_subsets(64)
    for i in range(len(order) // 5):
        high, low = order[5 * i][1], order[5 * i][0]
        assert scc.mcs_label(i) == f"s0:c{high},c{low}", i
    assert scc.mcs_label(68) == "s0:c26,c15"
    labels = {scc.mcs_label(i) for i in range(2000)}
    assert len(labels) == 2000


def test_block_index_reads_what_the_allocator_writes_and_nothing_else() -> None:
    for i in (0, 1, 68, 99_999):
        assert scc.block_index(scc.uid_block(i)) == i
    for other in ("1000680000-1000689999", "1000680000/5000", "999990000/10000", "1000680001/10000", "", "x/y"):
        assert scc.block_index(other) is None, other


def test_the_manifests_are_openshifts_default_sccs_with_their_grants() -> None:
    objs = scc.manifests()
    sccs = scc.shipped_sccs()
    assert STANDARD <= set(sccs)  # admission refuses every pod until these exist
    roles = {o["metadata"]["name"] for o in objs if o["kind"] == "ClusterRole"}
    assert {f"system:openshift:scc:{name}" for name in sccs} <= roles
    bindings = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ClusterRoleBinding"}
    for name in ("restricted-v2", "restricted-v3"):
        b = bindings[f"system:openshift:scc:{name}"]
        assert b["roleRef"]["name"] == f"system:openshift:scc:{name}"
        assert b["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]
    assert len(bindings) == 2  # nothing else is granted by default: anyuid, privileged, ... only to their users and groups


@pytest.mark.parametrize("name", sorted(set(OPENSHIFT_SCCS) & set(scc.shipped_sccs())))
def test_the_programs_scc_facts_are_those_of_the_manifests(name: str) -> None:
    """config/openshift.py's table was read from these manifests: it says of each what the manifest says."""
    manifest = scc.shipped_sccs()[name]
    assert SccFacts.from_object(manifest) == OPENSHIFT_SCCS[name]
    # the fields read, as the manifest spells them
    assert OPENSHIFT_SCCS[name].host_paths == manifest["allowHostDirVolumePlugin"]
    assert OPENSHIFT_SCCS[name].host_namespaces == {f for f in HOST_NAMESPACES if manifest[f]}


def test_the_program_knows_every_scc_openshift_ships() -> None:
    """An SCC of the manifests the table lacks would be one a stack may `create` (and own, and delete), and one the
    preflight calls unknown (restricted-v3 and nested-container were, until the differential found them)."""
    assert set(scc.shipped_sccs()) <= set(OPENSHIFT_SCCS)


def test_the_webhooks_are_called_for_pods_and_fail_closed() -> None:
    mutating, validating = scc.webhook_configurations(8443, b"-----BEGIN CERTIFICATE-----\n")
    assert (mutating["kind"], validating["kind"]) == ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    for config, path in ((mutating, "/mutate"), (validating, "/validate")):
        (hook,) = config["webhooks"]
        assert hook["clientConfig"]["url"] == f"https://127.0.0.1:8443{path}"
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
        (rule,) = hook["rules"]
        assert rule["operations"] == ["CREATE", "UPDATE"] and "pods" in rule["resources"]
        # the subresources the plugin passes over (shouldIgnore) are never sent to it
        assert not {"pods/status", "pods/binding", "pods/eviction", "pods/exec"} & set(rule["resources"])


def test_the_pod_a_statefulset_controller_makes_has_its_claims_as_volumes() -> None:
    sts = {
        "kind": "StatefulSet",
        "metadata": {"name": "run", "namespace": "team"},
        "spec": {
            "template": {"metadata": {"labels": {"a": "b"}, "annotations": {"openshift.io/required-scc": "x"}},
                         "spec": {"containers": [{"name": "c"}], "volumes": [{"name": "shm", "emptyDir": {}}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "workspace"}}],
        },
    }  # fmt: skip
    pod = scc.pod_of(sts, 1)
    meta = {"name": "run-1", "namespace": "team", "labels": {"a": "b"}, "annotations": {"openshift.io/required-scc": "x"}}
    assert pod["metadata"] == meta
    assert pod["spec"]["volumes"] == [
        {"name": "workspace", "persistentVolumeClaim": {"claimName": "workspace-run-1"}},
        {"name": "shm", "emptyDir": {}},
    ]
    assert sts["spec"]["template"]["spec"]["volumes"] == [{"name": "shm", "emptyDir": {}}]  # the owner is left as it was


def test_the_tiers_own_uid_package_passes_its_go_tests() -> None:
    """live/toolchain/k8s/librarygo stands in for library-go's pkg/security/uid (the proxy serves no library-go): its Go
    tests hold it to the formats the allocation controller writes and sccmatching reads."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no `go` on PATH")
    module = Path(scc.__file__).resolve().parent / "toolchain" / "k8s" / "librarygo"
    run = subprocess.run([go, "test", "-count=1", "./..."], cwd=module, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"})  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok  \tgithub.com/openshift/library-go/pkg/security/uid" in run.stdout, run.stdout
