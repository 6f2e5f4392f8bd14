"""The SCC differential's harness without a cluster (live/scc_differential.py): what a case applies is the program's
render in the case's own names, the SCC that exists is what the config says of it plus the case's cluster edits, and a
disagreement is a documented limit only where a cluster edit explains it in admission's own words."""

from __future__ import annotations

from typing import Any

import stacks
from components.program import objects
from config.kube import REQUIRED_SCC
from live import scc_differential as sd
from tests import fixtures


def case_of(base: str, edit: Any = None, cluster: sd.Cluster | None = None) -> tuple[sd.Case, Any]:
    data = fixtures.data(base, *([edit] if edit else []))
    return sd.Case(7, 1, base, [], data, cluster or sd.Cluster()), stacks.validate(data, "a test")


def test_a_case_applies_the_render_in_its_own_namespaces_and_scc_names() -> None:
    case, config = case_of("roce")
    applied = sd.case_objects(case, config, objects(config))
    kinds = {o["kind"] for o in applied}
    assert kinds == {"SecurityContextConstraints", "ClusterRole", "RoleBinding", "ServiceAccount", "StatefulSet", "Job"}
    assert {o["metadata"]["namespace"] for o in applied if "namespace" in o["metadata"]} == {"s007-team-a", "s007-team-b"}
    (own,) = [o for o in applied if o["kind"] == "SecurityContextConstraints"]
    assert own["metadata"]["name"] == "s007-gpu-rdma"
    bindings = [o for o in applied if o["kind"] == "RoleBinding"]
    assert bindings and all(b["roleRef"]["name"] == "system:openshift:scc:s007-gpu-rdma" for b in bindings)
    assert all(s["namespace"].startswith("s007-") for b in bindings for s in b["subjects"])
    pins = {o["spec"]["template"]["metadata"]["annotations"][REQUIRED_SCC] for o in applied if o["kind"] in ("StatefulSet", "Job")}
    assert pins == {"s007-gpu-rdma", "restricted-v2"}  # a shipped SCC keeps its name: one copy serves every case


def test_the_existing_scc_is_the_configs_facts_and_the_clusters_edits() -> None:
    facts = {"scc": "site-rdma", "create": False, "existing_allowed_capabilities": ["IPC_LOCK"], "existing_allows_root": False}
    case, config = case_of("roce", lambda d: d["security"].update(facts), sd.Cluster(scc={"seccompProfiles": None, "volumes": ["*"]}))
    applied = sd.case_objects(case, config, objects(config))
    (scc,) = [o for o in applied if o["kind"] == "SecurityContextConstraints"]
    assert scc["metadata"]["name"] == "s007-site-rdma"
    assert scc["allowedCapabilities"] == ["IPC_LOCK"] and scc["runAsUser"] == {"type": "MustRunAsRange"}
    assert not scc["allowPrivilegedContainer"] and "seccompProfiles" not in scc and scc["volumes"] == ["*"]
    assert any(o["kind"] == "ClusterRole" and o["metadata"]["name"] == "system:openshift:scc:s007-site-rdma" for o in applied)
    case.cluster.no_use_role = True
    assert not [o for o in sd.case_objects(case, config, objects(config)) if o["kind"] == "ClusterRole"]


def _verdict(kinds: list[str], refused_by_check: list[str], admitted: bool, said: str) -> sd.Verdict:
    case = sd.Case(0, 1, "roce", [(k, k) for k in kinds], {}, sd.Cluster())
    t = sd.Template("StatefulSet a/b", {}, "x", refused_by_check, admitted, "x" if admitted else None, said)
    return sd.Verdict(case, [t], [f"r: {m}" for m in refused_by_check], [])


def test_only_a_cluster_edit_that_explains_a_disagreement_makes_it_a_limit() -> None:
    escalation = (
        "provider s1-site-rdma: .containers[0].allowPrivilegeEscalation: Invalid value: true: "
        "Allowing privilege escalation for containers is not allowed"
    )
    assert sd.limit(_verdict(["escalation"], [], False, escalation))
    assert sd.limit(_verdict(["seccomp"], [], False, escalation)) is None  # the edit is there, but not what refused the pod
    assert sd.limit(_verdict(["memlock"], [], False, escalation)) is None  # a config edit: the rules' business
    assert sd.limit(_verdict(["escalation"], ["no"], True, "")) is None  # check refused what admission admitted
    grant = "service account a/b may not use SCC 'x': no RoleBinding"
    assert sd.limit(_verdict(["group-grant"], [grant], True, ""))
    assert sd.limit(_verdict(["group-grant"], ["capability may not be added"], True, "")) is None
    assert sd.limit(_verdict([], [], True, "")) is None and _verdict([], [], True, "").agree
