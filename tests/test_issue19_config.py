"""Issue 19: configs that passed `check` and `render` and then failed on the cluster. Each class of mistake is
now refused by the config's validation (one `path: message` line naming the field and the fix; the CLI's
"invalid configuration", exit 2) or reported by a preflight rule (a finding with rule, object, field and fix;
`check` exits 1 on an error), or, where the value is legal but almost certainly a mistake, warned about in a
way a stack can accept with its reason. Never a traceback.

Cases are tables of (class, case, ...) built on the fixtures the tests own (tests/fixtures.py): INVALID
(refused, naming the path), FINDINGS (a rule's finding), PASSES (what must stay accepted, so each check is
precise), plus a few standalone tests registered under their class. `test_every_class_has_cases` prints the
number of cases per class (`pytest tests/test_issue19_config.py -k every_class -s`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import policy
import stacks
from components.program import objects, patches
from config.openshift import LAUNCHER_FILES
from config.stack import ClusterConfig
from config.values import OBJECT_MAX, kubelet_escape, kubelet_expand
from policy.core import Finding, PodView
from tests import fixtures
from tests.helpers import ROOT, container, find
from tools.render import run

Data = dict[str, Any]
Edit = Callable[[Data], Any]

DOLLAR = "dollar: $$ and $(NAME) in env and args"
KEYS = "keys: ConfigMap and Secret keys"
IMAGE = "image: references, digests, mutable tags"
SIZE = "size: object and exec limits"
NAMES = "names: derived names, built-in and existing objects"
MOUNTS = "mounts: system paths, read-only parents, the launcher's files"
PYENV = "python-env: PYTHON* and $PATH in env"
RESOURCES = "resources: node facts, quantities, shm, node names and selectors"
CONTROL_PLANE = "control-plane: node_level.pool"
YAML11 = "yaml11: integers as YAML 1.1 reads them"
SCC_FACTS = "scc-facts: an existing SCC lacking IPC_LOCK"
MEMLOCK_REASON = "memlock-reason: why root with IPC_LOCK"
CLASSES = [DOLLAR, KEYS, IMAGE, SIZE, NAMES, MOUNTS, PYENV, RESOURCES, CONTROL_PLANE, YAML11, SCC_FACTS, MEMLOCK_REASON]

DIGEST = "sha256:" + "0123456789abcdef" * 4
REGISTERED: Counter[str] = Counter()
"""Standalone tests (and their parametrized cases) per class, counted as they are defined."""


def cases_of(cls: str, n: int = 1) -> Callable[[Any], Any]:
    """Count a standalone test (with n cases) under its class."""

    def mark(fn: Any) -> Any:
        REGISTERED[cls] += n
        return fn

    return mark


# --- edits of the fixtures' data --------------------------------------------------------------------


def W(workload: str, /, **fields: Any) -> Edit:  # noqa: N802 (reads like the fixture's workload)
    return lambda d: fixtures.workload(d, workload).update(fields)


def env(name: str, values: dict[str, str]) -> Edit:
    return lambda d: fixtures.workload(d, name).setdefault("env", {}).update(values)


def mount(workload: str, index: int, /, **fields: Any) -> Edit:
    return lambda d: fixtures.workload(d, workload)["mounts"][index].update(fields)


def both(*edits: Edit) -> Edit:
    def edit(d: Data) -> None:
        for e in edits:
            e(d)

    return edit


def add_workload(base: str, /, **fields: Any) -> Edit:
    """Another workload: a copy of `base` with `fields` (stopped unless it says otherwise, so it needs no nodes)."""

    def edit(d: Data) -> None:
        copy = json.loads(json.dumps(fixtures.workload(d, base)))
        copy.pop("tcp_variants", None)
        copy.update({"state": "stopped", **fields})
        d["workloads"].append(copy)

    return edit


def add_volume(**fields: Any) -> Edit:
    return lambda d: d["volumes"].append({"namespace": "team-a", "size": "1Gi", "storage_class": fixtures.RWX, **fields})


def pvc_fix(pvc: str, namespace: str = "team-a") -> Edit:
    fix = {"namespace": namespace, "pvc": pvc, "storage_class": fixtures.RBD, "reason": "a test"}
    return lambda d: d.setdefault("pvc_fixes", []).append(dict(fix))


def add_namespace(ns: str) -> Edit:
    def edit(d: Data) -> None:
        d["namespaces"].append(ns)
        d["security"]["service_accounts"].append({"name": "trainer", "namespace": ns})

    return edit


def script_file(key: str) -> Edit:
    return lambda d: d["scripts"][0]["files"].update({key: "echo hi\n"})


def secret_key(key: str) -> Edit:
    return lambda d: fixtures.workload(d, "train")["secret_env"]["HF_TOKEN"].update(key=key)


def node_set(index: int, /, **fields: Any) -> Edit:
    return lambda d: d["node_sets"][index].update(fields)


def check_of(name: str, /, **fields: Any) -> Edit:
    return lambda d: d["bandwidth_checks"][0].update(fields)


# --- refused by the config: (class, case, fixture, edit, the path the message names, a phrase of it) -------------

INVALID: list[tuple[str, str, str, Edit, str, str]] = [
    # $(NAME) of a variable the pod defines: meant as the kubelet's reference, it would arrive as text
    (DOLLAR, "launcher variable in env", "roce", env("dev", {"OUT": "/ws/$(POD_NAME)"}), "workloads[dev].env.OUT", "reference syntax"),
    (DOLLAR, "own variable in env", "roce", env("dev", {"A": "x", "B": "$(A)/y"}), "workloads[dev].env.B", "the text $(A)"),
    (DOLLAR, "NCCL variable in env", "tcp", env("one", {"LOG": "$(NCCL_DEBUG).log"}), "workloads[one].env.LOG", "Read NCCL_DEBUG"),
    (
        DOLLAR,
        "pod variable in args",
        "roce",
        W("solo", args=["python", "t.py", "--rank=$(NODE_RANK)"]),
        "workloads[solo].args[2]",
        "${NODE_RANK}",
    ),
    (DOLLAR, "bandwidth check env", "roce", check_of("fabric", env={"X": "$(MASTER_ADDR)"}), "bandwidth_checks[fabric].env.X", "reference"),
    # the API server's key grammar
    (KEYS, "script key starting with ..", "roce", script_file("..data"), "scripts[train-script].files['..data']", "not starting with '..'"),
    (KEYS, "script key with a slash", "roce", script_file("bin/run.sh"), "scripts[train-script].files['bin/run.sh']", "letters, digits"),
    (KEYS, "script key '.'", "roce", script_file("."), "scripts[train-script].files['.']", "not '.' or '..'"),
    (KEYS, "script key of 254 characters", "roce", script_file("k" * 254), "scripts[train-script].files." + "k" * 254, "at most 253"),
    (KEYS, "secretKeyRef key with a space", "roce", secret_key("hf token"), "workloads[train].secret_env.HF_TOKEN.key", "Rename the key"),
    (KEYS, "secretKeyRef key ..token", "roce", secret_key("..token"), "workloads[train].secret_env.HF_TOKEN.key", "starting with '..'"),
    # the reference grammar
    (IMAGE, "sha256 of 63 digits", "tcp", W("one", image="quay.io/a/b@sha256:" + "a" * 63), "workloads[one].image", "has 63 characters"),
    (IMAGE, "sha256 of 65 digits", "tcp", W("one", image="quay.io/a/b:1@sha256:" + "a" * 65), "workloads[one].image", "exactly 64"),
    (IMAGE, "uppercase hex", "tcp", W("one", image="quay.io/a/b@sha256:" + "A" * 64), "workloads[one].image", "uppercase hex"),
    (IMAGE, "unknown algorithm", "tcp", W("one", image="quay.io/a/b@md5:" + "a" * 32), "workloads[one].image", "algorithm 'md5'"),
    (IMAGE, "sha512 of 64 digits", "tcp", W("one", image="quay.io/a/b@sha512:" + "a" * 64), "workloads[one].image", "exactly 128"),
    (IMAGE, "digest without algorithm", "tcp", W("one", image="quay.io/a/b@" + "a" * 64), "workloads[one].image", "skopeo inspect"),
    (IMAGE, "registry port 70000", "tcp", W("one", image="registry.example.org:70000/a/b:1"), "workloads[one].image", "port 70000"),
    (IMAGE, "registry port 0", "tcp", W("one", image="localhost:0/a/b:1"), "workloads[one].image", "not a TCP port"),
    (
        IMAGE,
        "variant image",
        "roce",
        lambda d: d["workloads"][0]["tcp_variants"][0].update(image="a/b@sha256:x"),
        "workloads[dev].tcp_variants[dev-tcp].image",
        "sha256",
    ),
    # what the API server and exec(2) refuse
    (
        SIZE,
        "ConfigMap from big scripts",
        "roce",
        lambda d: d["scripts"][0]["files"].update({f"part{i}.py": "x" * 200_000 for i in range(6)}),
        "scripts[train-script].files",
        "over 1 MiB",
    ),
    (SIZE, "one environment string", "roce", env("dev", {"BIG": "€" * 45_000}), "workloads[dev].env.BIG", "MAX_ARG_STRLEN"),
    (SIZE, "arguments as LAUNCHER_ARGS", "roce", W("dev", args=["é" * 3000] * 8), "workloads[dev].args", "LAUNCHER_ARGS"),
    (SIZE, "environment over ARG_MAX", "roce", env("dev", {f"V{i}": "x" * 60_000 for i in range(32)}), "workloads[dev].env", "ARG_MAX"),
    (SIZE, "pod template over etcd's limit", "roce", env("dev", {f"V{i}": "$" * 60_000 for i in range(14)}), "workloads[dev].env", "etcd"),
    # names that meet only once derived, across workloads, ports, variants and volumes
    (
        NAMES,
        "one Route from two workload/port pairs",
        "roce",
        both(
            lambda d: d["workloads"][0]["ports"].append({"name": "a-b", "port": 9000, "route": True}),
            add_workload("solo", name="dev-a", namespace="team-a", ports=[{"name": "b", "port": 9000, "route": True}]),
        ),
        "workloads[dev-a].ports[b].name",
        "and so does port 'a-b' of workload 'dev' (workloads[dev].ports[a-b].name)",
    ),
    (
        NAMES,
        "a variant's Route host and a workload's",
        "roce",
        both(
            add_namespace("a"),
            add_workload("solo", name="dev-tcp-jupyter", namespace="a", ports=[{"name": "team", "port": 9000, "route": True}]),
        ),
        "workloads[dev-tcp-jupyter].ports[team].name",
        "Route host 'dev-tcp-jupyter-team-a'",
    ),
    (
        NAMES,
        "a variant's per-pod claim and a workload's",
        "roce",
        both(
            add_volume(name="workspace-dev", mount_path="/w2", storage_class=fixtures.RBD, shared=False),
            add_workload("solo", name="tcp", namespace="team-a", mounts=[{"volume": "workspace-dev"}]),
        ),
        "workloads[tcp].mounts[0].volume",
        "workspace-dev-tcp-0",
    ),
    (
        NAMES,
        "one Route host from two namespaces",
        "roce",
        both(
            add_namespace("a"),
            add_workload("solo", name="dev", namespace="a", ports=[{"name": "jupyter-team", "port": 9000, "route": True}]),
        ),
        "workloads[dev].ports[jupyter-team].name",
        "Route host 'dev-jupyter-team-a'",
    ),
    (
        NAMES,
        "one per-pod claim from two volume/workload pairs",
        "roce",
        both(
            add_volume(name="workspace-d", mount_path="/w2", storage_class=fixtures.RBD, shared=False),
            W("dev", name="d-ev"),
            add_workload("solo", name="ev", namespace="team-a", mounts=[{"volume": "workspace-d"}]),
        ),
        "workloads[ev].mounts[0].volume",
        "the per-pod claim of workload 'd-ev' on volume 'workspace'",
    ),
    (
        NAMES,
        "shared claim named like a per-pod claim",
        "roce",
        add_volume(name="workspace-dev-1", mount_path="/x"),
        "workloads[dev].mounts[0].volume",
        "volume 'workspace-dev-1'",
    ),
    (
        NAMES,
        "existing claim named like a per-pod claim",
        "roce",
        add_volume(name="workspace-dev-0", mount_path="/x", existing=True, size=None),
        "workloads[dev].mounts[0].volume",
        "claim 'workspace-dev-0'",
    ),
    (
        NAMES,
        "service account default",
        "tcp",
        lambda d: d["security"]["service_accounts"].append({"name": "default", "namespace": "proj"}),
        "security.service_accounts[default].name",
        "in every project",
    ),
    (
        NAMES,
        "service account builder",
        "tcp",
        lambda d: d["security"]["service_accounts"].append({"name": "builder", "namespace": "proj"}),
        "security.service_accounts[builder].name",
        "take it over",
    ),
    (
        NAMES,
        "service account deployer",
        "tcp",
        lambda d: d["security"]["service_accounts"].append({"name": "deployer", "namespace": "proj"}),
        "security.service_accounts[deployer].name",
        "pulumi destroy",
    ),
    (
        NAMES,
        "service account pipeline",
        "tcp",
        lambda d: d["security"]["service_accounts"].append({"name": "pipeline", "namespace": "proj"}),
        "security.service_accounts[pipeline].name",
        "OpenShift Pipelines",
    ),
    (
        NAMES,
        "ConfigMap declared and existing",
        "roce",
        lambda d: d["existing"].update(config_maps=[{"namespace": "team-a", "name": "train-script"}]),
        "existing.config_maps[train-script].name",
        "scripts[train-script]",
    ),
    (
        NAMES,
        "ImageStream built and existing",
        "roce",
        lambda d: d["existing"].update(image_streams=[{"namespace": "team-a", "name": "trainer"}]),
        "existing.image_streams[trainer].name",
        "images[trainer]",
    ),
    (
        NAMES,
        "the launcher's ConfigMap as existing",
        "roce",
        lambda d: d["existing"].update(config_maps=[{"namespace": "team-a", "name": "gpu-training-launcher"}]),
        "existing.config_maps[gpu-training-launcher].name",
        "the launcher's ConfigMap",
    ),
    (
        NAMES,
        "pvc_fixes of a shared claim the stack creates",
        "roce",
        pvc_fix("datasets"),
        "pvc_fixes[0].pvc",
        "created by this stack (volume 'datasets', volumes[datasets].name)",
    ),
    (NAMES, "pvc_fixes of a per-pod claim", "roce", pvc_fix("workspace-dev-1"), "pvc_fixes[0].pvc", "the per-pod claim of workload 'dev'"),
    (
        NAMES,
        "pvc_fixes of one claim twice",
        "ib",
        pvc_fix("nfs-server-root", "nfs"),
        "pvc_fixes[1].pvc",
        "patched twice (also pvc_fixes[0])",
    ),
    # mount points
    (
        MOUNTS,
        "volume at /usr",
        "roce",
        lambda d: d["volumes"][1].update(mount_path="/usr"),
        "volumes[datasets].mount_path",
        "hides the image's own files",
    ),
    (
        MOUNTS,
        "volume at /",
        "roce",
        lambda d: d["volumes"][1].update(mount_path="/"),
        "volumes[datasets].mount_path",
        "hides the image's own files",
    ),
    (MOUNTS, "mount at /etc", "roce", mount("dev", 1, mount_path="/etc"), "workloads[dev].mounts[1].mount_path", "Mount it elsewhere"),
    (MOUNTS, "mount under /proc", "roce", mount("dev", 1, mount_path="/proc/driver"), "workloads[dev].mounts[1].mount_path", "under /proc"),
    (MOUNTS, "mount at /sys", "roce", mount("dev", 1, mount_path="/sys"), "workloads[dev].mounts[1].mount_path", "under /sys"),
    (
        MOUNTS,
        "mount over /dev/infiniband",
        "roce",
        mount("dev", 1, mount_path="/dev/infiniband"),
        "workloads[dev].mounts[1].mount_path",
        "devices",
    ),
    (
        MOUNTS,
        "mount at /etc/resolv.conf",
        "roce",
        mount("dev", 1, mount_path="/etc/resolv.conf"),
        "workloads[dev].mounts[1].mount_path",
        "the kubelet mounts",
    ),
    (
        MOUNTS,
        "scripts at /usr/local",
        "roce",
        lambda d: fixtures.workload(d, "train")["scripts"][0].update(mount_path="/usr/local"),
        "workloads[train].scripts[0].mount_path",
        "hides",
    ),
    (
        MOUNTS,
        "read-only /tmp",
        "roce",
        mount("dev", 1, mount_path="/tmp", read_only=True),
        "workloads[dev].mounts[1].mount_path",
        "/tmp/launcher.env",
    ),
    (
        MOUNTS,
        "scripts at /tmp",
        "roce",
        lambda d: fixtures.workload(d, "train")["scripts"][0].update(mount_path="/tmp"),
        "workloads[train].scripts[0].mount_path",
        "the launcher writes",
    ),
    (
        MOUNTS,
        "read-only /opt over the launcher",
        "roce",
        mount("dev", 1, mount_path="/opt", read_only=True),
        "workloads[dev].mounts[1].mount_path",
        "a parent of /opt/launcher",
    ),
    (
        MOUNTS,
        "scripts at /opt",
        "roce",
        lambda d: fixtures.workload(d, "train")["scripts"][0].update(mount_path="/opt"),
        "workloads[train].scripts[0].mount_path",
        "parent of /opt/launcher",
    ),
    (
        MOUNTS,
        "read-only parent of another mount",
        "roce",
        both(mount("dev", 1, mount_path="/data", read_only=True), mount("dev", 0, mount_path="/data/ws")),
        "workloads[dev].mounts[1].mount_path",
        "a parent of /data/ws",
    ),
    (
        MOUNTS,
        "path component over 255 bytes",
        "roce",
        mount("dev", 1, mount_path="/data/" + "é" * 128),
        "workloads[dev].mounts[1].mount_path",
        "NAME_MAX",
    ),
    (
        MOUNTS,
        "working_dir component over 255 bytes",
        "roce",
        W("dev", working_dir="/" + "w" * 256),
        "workloads[dev].working_dir",
        "at most 255 bytes",
    ),
    *[
        (MOUNTS, f"hostfile {f}", "roce", W("dev", deepspeed_hostfile=f), "workloads[dev].deepspeed_hostfile", "the launcher itself writes")
        for f in LAUNCHER_FILES
    ],
    (
        MOUNTS,
        "hostfile in a read-only mount",
        "roce",
        both(mount("dev", 1, read_only=True), W("dev", deepspeed_hostfile="/datasets/hosts")),
        "workloads[dev].deepspeed_hostfile",
        "mounted read-only",
    ),
    (
        MOUNTS,
        "hostfile on a mount point",
        "roce",
        W("dev", deepspeed_hostfile="/datasets"),
        "workloads[dev].deepspeed_hostfile",
        "(a directory)",
    ),
    (
        MOUNTS,
        "hostfile in the launcher's mount",
        "roce",
        W("dev", deepspeed_hostfile="/opt/launcher/hostfile"),
        "workloads[dev].deepspeed_hostfile",
        "read-only",
    ),
    (
        MOUNTS,
        "hostfile under /proc",
        "roce",
        W("dev", deepspeed_hostfile="/proc/hostfile"),
        "workloads[dev].deepspeed_hostfile",
        "under /proc",
    ),
    # Python and PATH
    (PYENV, "PYTHONHOME", "roce", env("dev", {"PYTHONHOME": "/opt/conda"}), "workloads[dev].env.PYTHONHOME", "init_fs_encoding"),
    (
        PYENV,
        "PYTHONHOME in a check",
        "roce",
        check_of("fabric", env={"PYTHONHOME": "/usr"}),
        "bandwidth_checks[fabric].env.PYTHONHOME",
        "Remove it",
    ),
    (PYENV, "$PATH in a value", "roce", env("dev", {"PATH": "/opt/venv/bin:$PATH"}), "workloads[dev].env.PATH", "never expands"),
    (PYENV, "${PATH} in a value", "tcp", env("one", {"TOOLS": "${PATH}:/tools"}), "workloads[one].env.TOOLS", "Write the whole value"),
    (
        PYENV,
        "$LD_LIBRARY_PATH in a value",
        "tcp",
        env("one", {"LD_LIBRARY_PATH": "/x:$LD_LIBRARY_PATH"}),
        "workloads[one].env.LD_LIBRARY_PATH",
        "printenv LD_LIBRARY_PATH",
    ),
    # what the nodes have, and quantities nobody means
    (RESOURCES, "CPU above the nodes'", "roce", node_set(1, allocatable_cpu="16"), "workloads[train].cpu", "offer 16 (allocatable_cpu)"),
    (RESOURCES, "memory above the nodes'", "roce", node_set(0, allocatable_memory="32Gi"), "workloads[dev].memory", "Insufficient memory"),
    (
        RESOURCES,
        "a check's memory above the nodes'",
        "roce",
        both(node_set(0, allocatable_memory="100Gi"), check_of("fabric", memory="128Gi")),
        "bandwidth_checks[fabric].memory",
        "offer 100Gi",
    ),
    (RESOURCES, "64Ei CPU", "tcp", W("one", cpu="64Ei", cpu_limit=None), "workloads[one].cpu", "more CPU than any node has"),
    (RESOURCES, "100k cores limit", "tcp", W("one", cpu_limit="100k"), "workloads[one].cpu_limit", "a unit typo"),
    (RESOURCES, "8Ei claim", "roce", lambda d: d["volumes"][1].update(size="8Ei"), "volumes[datasets].size", "more than 16Pi"),
    (RESOURCES, "64Ei memory", "tcp", W("one", memory_limit="64Ei"), "workloads[one].memory_limit", "more than 64Ti"),
    (RESOURCES, "memory in milli", "tcp", W("one", memory="8000m", memory_limit=None), "workloads[one].memory", "'m' is milli"),
    (RESOURCES, "memory in bytes", "tcp", W("one", memory="64", memory_limit=None), "workloads[one].memory", "64 is 64 bytes"),
    (RESOURCES, "shm in milli", "tcp", W("one", shm_size="512m"), "workloads[one].shm_size", "'m' is milli"),
    (
        RESOURCES,
        "uppercase node name",
        "roce",
        lambda d: d["node_sets"][0]["nodes"].__setitem__(0, "Node-A"),
        "node_sets[main].nodes",
        "write 'node-a'",
    ),
    (
        RESOURCES,
        "node_selector outside the set",
        "roce",
        W("solo", node_selector={"kubernetes.io/hostname": "node-a"}),
        "workloads[solo].node_selector['kubernetes.io/hostname']",
        "not a node of their node set 'spare'",
    ),
    (
        RESOURCES,
        "node_selector pinning many pods",
        "roce",
        W("dev", node_selector={"kubernetes.io/hostname": "node-a"}),
        "workloads[dev].node_selector['kubernetes.io/hostname']",
        "one node each",
    ),
    (
        RESOURCES,
        "node_selector to a named node of an unnamed set",
        "tcp",
        both(
            lambda d: d["node_sets"].append({"name": "pinned", "nodes": ["gpu-9"], "gpus_per_node": 4}),
            W("one", node_selector={"kubernetes.io/hostname": "gpu-9"}),
        ),
        "workloads[one].node_selector['kubernetes.io/hostname']",
        "avoid named nodes",
    ),
    (
        RESOURCES,
        "node_selector against gpu_node_selector",
        "roce",
        W("solo", node_selector={"nvidia.com/gpu.present": "false"}),
        "workloads[solo].node_selector['nvidia.com/gpu.present']",
        "contradicts",
    ),
    # the control plane's pool
    (
        CONTROL_PLANE,
        "pool master",
        "tcp",
        lambda d: d.update(node_level={"pool": "master", "crio_memlock_unlimited": True}),
        "node_level.pool",
        "control plane's pool",
    ),
    (
        CONTROL_PLANE,
        "pool control-plane",
        "tcp",
        lambda d: d.update(node_level={"pool": "control-plane", "iommu_passthrough": True, "reason": "GDR"}),
        "node_level.pool",
        "control_plane_reason",
    ),
    (
        CONTROL_PLANE,
        "pool master, nothing enabled",
        "tcp",
        lambda d: d.update(node_level={"pool": "master"}),
        "node_level.pool",
        "oc get machineconfigpool",
    ),
    # integers as YAML 1.1 or a Python stack module would give them
    (YAML11, "nodes: true", "tcp", W("one", nodes=True), "workloads[one].nodes", "not the boolean true"),
    (YAML11, "gpus_per_node: yes", "tcp", node_set(0, gpus_per_node=True), "node_sets[pool].gpus_per_node", "YAML reads true"),
    (YAML11, "quoted number", "tcp", W("one", master_port="29500"), "workloads[one].master_port", "without quotes"),
    (YAML11, "0o17", "tcp", W("one", run_number="0o17"), "workloads[one].run_number", "valid integer"),
    (YAML11, "float", "tcp", W("one", nodes=1.0), "workloads[one].nodes", "valid integer"),
]

# --- a preflight finding: (class, case, fixture, edit, rule, severity, object, a phrase of message and fix) ---------

FINDINGS: list[tuple[str, str, str, Edit, str, str, str, str]] = [
    (
        IMAGE,
        ":latest",
        "tcp",
        W("one", image="quay.io/example/pytorch:latest"),
        "image",
        "warning",
        "StatefulSet proj/one",
        "`latest` without a digest",
    ),
    (IMAGE, "no tag", "tcp", W("one", image="quay.io/example/pytorch"), "image", "warning", "StatefulSet proj/one", "no tag means latest"),
    (
        IMAGE,
        "a version tag",
        "tcp",
        W("one", image="quay.io/example/pytorch:2.9"),
        "image",
        "warning",
        "StatefulSet proj/one",
        "the tag '2.9'",
    ),
    (
        IMAGE,
        "registry port and tag",
        "tcp",
        W("one", image="localhost:5000/pytorch:2.9"),
        "image",
        "warning",
        "StatefulSet proj/one",
        "skopeo inspect",
    ),
    (
        IMAGE,
        "an existing ImageStream's tag",
        "roce",
        both(
            lambda d: d["existing"].update(image_streams=[{"namespace": "team-b", "name": "base"}]),
            W("solo", image="image-registry.openshift-image-registry.svc:5000/team-b/base:v1"),
        ),
        "image",
        "warning",
        "StatefulSet team-b/solo",
        "@sha256:<digest>",
    ),
    (
        PYENV,
        "PYTHONPATH",
        "roce",
        env("dev", {"PYTHONPATH": "/workspace/src"}),
        "image",
        "warning",
        "StatefulSet team-a/dev",
        "shadows the image's",
    ),
    (
        PYENV,
        "PYTHONSTARTUP",
        "tcp",
        env("one", {"PYTHONSTARTUP": "/ws/.pythonrc"}),
        "image",
        "warning",
        "StatefulSet proj/one",
        "interactive Python only",
    ),
    (
        PYENV,
        "PYTHONPATH from a Secret",
        "roce",
        lambda d: fixtures.workload(d, "train")["secret_env"].update(PYTHONPATH={"secret": "hf-secret", "key": "path"}),
        "image",
        "warning",
        "Job team-a/train-r1",
        "accept the warning",
    ),
    (
        RESOURCES,
        "shm below 64Mi",
        "tcp",
        W("one", shm_size="32Mi"),
        "shm-size",
        "warning",
        "StatefulSet proj/one",
        "too small|less than the 64 MiB",
    ),
    (
        SCC_FACTS,
        "existing SCC without IPC_LOCK",
        "roce",
        lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["NET_RAW"]),
        "scc-capabilities",
        "error",
        "StatefulSet team-a/dev",
        "security.existing_allowed_capabilities",
    ),
    (
        SCC_FACTS,
        "existing SCC without SYS_RESOURCE",
        "roce",
        both(
            lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"]),
            W("dev", memlock="root-sys-resource"),
        ),
        "scc-capabilities",
        "error",
        "StatefulSet team-a/dev",
        "add SYS_RESOURCE to its allowedCapabilities",
    ),
    (
        SCC_FACTS,
        "existing SCC not admitting root",
        "roce",
        lambda d: d["security"].update(
            scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"], existing_allows_root=False
        ),
        "memlock-strategy",
        "error",
        "StatefulSet team-a/dev",
        "does not admit root",
    ),
    (
        SCC_FACTS,
        "existing SCC not allowing privileged",
        "ib",
        lambda d: d["security"].update(scc="site-priv", existing_allows_privileged=False, broad_grant_reason=None),
        "memlock-strategy",
        "error",
        "StatefulSet lab/env",
        "does not allow",
    ),
    (MEMLOCK_REASON, "root-ipc-lock", "roce", lambda d: None, "memlock-strategy", "info", "Stack roce", "checkov"),
    (
        MEMLOCK_REASON,
        "root-sys-resource",
        "roce",
        W("dev", memlock="root-sys-resource"),
        "memlock-strategy",
        "info",
        "Stack roce",
        "SYS_RESOURCE lets",
    ),
]

# --- what stays accepted, so each check refuses only what it means to: (class, case, fixture, edit) -----------------

PASSES: list[tuple[str, str, str, Edit]] = [
    (DOLLAR, "pa$$word", "roce", env("dev", {"PASSWORD": "pa$$word"})),
    (DOLLAR, "shell command substitution", "tcp", W("one", args=["bash", "-c", "echo $(hostname) $$ ${NODE_RANK}"])),
    (DOLLAR, "$(name) that is no pod variable", "tcp", env("one", {"PROMPT_COMMAND": "echo $(date)"})),
    (KEYS, "a dotfile key", "roce", script_file(".bashrc")),
    (KEYS, "a key of 253 characters", "roce", script_file("k" * 253)),
    (IMAGE, "pinned by digest", "tcp", W("one", image="quay.io/example/pytorch@" + DIGEST)),
    (IMAGE, "sha512 digest", "tcp", W("one", image="quay.io/example/pytorch:2.9@sha512:" + "ab" * 64)),
    (IMAGE, "registry port 65535", "tcp", W("one", image="registry.example.org:65535/a/b@" + DIGEST)),
    (SIZE, "a large environment under the limits", "roce", env("dev", {f"V{i}": "x" * 60_000 for i in range(20)})),
    (
        NAMES,
        "same port name in two workloads",
        "roce",
        add_workload("solo", name="other", ports=[{"name": "jupyter", "port": 8888, "route": True}]),
    ),
    (
        NAMES,
        "pvc_fixes of an existing claim the stack mounts",
        "ib",
        both(
            add_namespace("nfs"),
            lambda d: d["volumes"].append({"name": "nfs-server-root", "namespace": "nfs", "mount_path": "/nfs", "existing": True}),
        ),
    ),
    (MOUNTS, "read-write /opt", "roce", mount("dev", 1, mount_path="/opt")),
    (MOUNTS, "under /etc", "roce", mount("dev", 1, mount_path="/etc/myapp")),
    (MOUNTS, "hostfile in /tmp", "roce", W("dev", deepspeed_hostfile="/tmp/hostfile")),
    (PYENV, "PATH written whole", "roce", env("dev", {"PATH": "/opt/venv/bin:/usr/local/bin:/usr/bin:/bin"})),
    (RESOURCES, "requests equal to the nodes'", "roce", both(node_set(1, allocatable_cpu="32"), node_set(0, allocatable_memory="64Gi"))),
    (RESOURCES, "shm of 64Mi", "tcp", W("one", shm_size="64Mi")),
    (RESOURCES, "node_selector on a node of the set", "roce", W("solo", node_selector={"kubernetes.io/hostname": "node-e"})),
    (
        CONTROL_PLANE,
        "pool master with a reason",
        "tcp",
        lambda d: d.update(node_level={"pool": "master", "crio_memlock_unlimited": True, "control_plane_reason": "compact cluster"}),
    ),
    (
        SCC_FACTS,
        "existing SCC with IPC_LOCK",
        "roce",
        both(
            lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"]),
            lambda d: d.setdefault("accepted_warnings", []).append(
                {"rule": "scc-grant", "object": "ClusterRole system:openshift:scc:site-rdma", "reason": "made by the site's admin"}
            ),
        ),
    ),
]


def findings_of(config: ClusterConfig) -> list[Finding]:
    return policy.check(config, objects(config), patches(config))


def refused(fixture: str, edit: Edit) -> str:
    with pytest.raises(stacks.ConfigError) as err:
        fixtures.config(fixture, edit)
    return str(err.value)


@pytest.mark.parametrize("cls,case,fixture,edit,path,phrase", INVALID, ids=[f"{c[0].split(':')[0]}: {c[1]}" for c in INVALID])
def test_refused_naming_the_path_and_the_fix(cls: str, case: str, fixture: str, edit: Edit, path: str, phrase: str) -> None:
    message = refused(fixture, edit)
    assert message.startswith(f"fixture {fixture}: invalid configuration\n"), message
    lines = message.splitlines()[1:]
    # Every invalid value is reported, each once: one line per field (a TCP variant failing as its source adds none).
    fields = [line.split(": ", 1)[0] for line in lines]
    assert len(set(fields)) == len(fields), message
    assert any(re.match(rf"  {re.escape(path)}( \([^)]*:\d+\))?: ", line) and phrase in line for line in lines), message
    assert "Traceback" not in message


@pytest.mark.parametrize(
    "cls,case,fixture,edit,rule,severity,obj,phrase", FINDINGS, ids=[f"{c[0].split(':')[0]}: {c[1]}" for c in FINDINGS]
)
def test_reported_by_the_preflight(cls: str, case: str, fixture: str, edit: Edit, rule: str, severity: str, obj: str, phrase: str) -> None:
    import re

    config = fixtures.config(fixture, edit)
    run(config)  # the offline rendering the CLI runs first does not stop on it (scc-facts: no RunError)
    hits = [f for f in findings_of(config) if f.rule == rule and f.severity == severity and obj in (f.affects or (f.object,))]
    assert hits, [f.line() for f in findings_of(config)]
    assert any(re.search(phrase, f"{f.message} Fix: {f.fix}") for f in hits), [f.line() for f in hits]
    assert all(f.fix and "\n" not in f.line() for f in hits)


@pytest.mark.parametrize("cls,case,fixture,edit", PASSES, ids=[f"{c[0].split(':')[0]}: {c[1]}" for c in PASSES])
def test_still_accepted(cls: str, case: str, fixture: str, edit: Edit) -> None:
    config = fixtures.config(fixture, edit)
    new = [f for f in findings_of(config) if f.severity != "info" and not f.accepted]
    assert new == [], [f.line() for f in new]


# --- $$ and $(NAME): what the process receives is what the config says ------------------------------------------

LITERALS = ["pa$$word", "$$", "$", "a$b", "$(lower)", "$(", "x$$(y)", "$$$(date)", "cost: 5$", "${HOME}"]


@cases_of(DOLLAR, len(LITERALS))
@pytest.mark.parametrize("value", LITERALS)
def test_env_values_and_args_reach_the_process_as_written(value: str) -> None:
    config = fixtures.config("roce", both(env("dev", {"V": value}), W("dev", args=["bash", "-c", f"echo '{value}'"])))
    sts = find(run(config), "StatefulSet", "dev", "team-a")
    env_list = container(sts)["env"]
    defined: dict[str, str] = {}  # what the kubelet maps: the variables listed before (valueFrom ones unknown here)
    received = {}
    for e in env_list:
        if "value" in e:
            received[e["name"]] = defined[e["name"]] = kubelet_expand(e["value"], defined)
    assert received["V"] == value
    assert json.loads(received["LAUNCHER_ARGS"]) == ["bash", "-c", f"echo '{value}'"]
    assert PodView.env(container(sts))["V"] == value  # the preflight reads the value the process gets


@cases_of(DOLLAR)
@given(st.text(alphabet="$()ABN_a-z{} x", max_size=30), st.dictionaries(st.sampled_from(["A", "B", "N"]), st.text(max_size=5)))
def test_escaping_survives_any_expansion(text: str, defined: dict[str, str]) -> None:
    assert kubelet_expand(kubelet_escape(text), defined) == text


@cases_of(DOLLAR)
def test_the_kubelet_expansion_as_documented() -> None:
    # k8s.io/kubernetes third_party/forked/golang/expansion: the cases the kubelet's own tests name
    defined = {"VAR_A": "A", "VAR_B": "B"}
    assert kubelet_expand("pa$$word", {}) == "pa$word"
    assert kubelet_expand("$(VAR_A)-$(VAR_B)", defined) == "A-B"
    assert kubelet_expand("$(VAR_C)", defined) == "$(VAR_C)"
    assert kubelet_expand("$$(VAR_A)", defined) == "$(VAR_A)"
    assert kubelet_expand("$(VAR_A", defined) == "$(VAR_A"
    assert kubelet_expand("foo$", defined) == "foo$"


# --- size: the estimate the config checks against is an upper bound of what is rendered ------------------------------


@cases_of(SIZE)
def test_the_object_size_estimate_bounds_the_rendered_object() -> None:
    edit = env("dev", {f"V{i}": "$" * 50_000 for i in range(13)})  # 1.3 MB once escaped, just under the limit
    sts = find(run(fixtures.config("roce", edit)), "StatefulSet", "dev", "team-a")
    size = len(json.dumps(sts, ensure_ascii=False).encode())
    assert 1_290_000 < size < OBJECT_MAX
    assert "etcd" in refused("roce", env("dev", {f"V{i}": "$" * 50_000 for i in range(16)}))


# --- names: the rendered objects name both sources too ------------------------------------------------------------


@cases_of(NAMES)
def test_a_duplicate_rendered_object_names_both_sources() -> None:
    config = fixtures.config("roce")
    objs = objects(config)
    route = next(o for o in objs if o["kind"] == "Route")
    twin = json.loads(json.dumps(route))
    twin["metadata"]["labels"]["app.kubernetes.io/instance"] = "dev-a"
    [f] = [f for f in policy.check(config, [*objs, twin], patches(config)) if f.rule == "unique-objects"]
    assert f.object == "Route team-a/dev-jupyter" and "(from dev, dev-a)" in f.message


# --- mounts: the launcher's files are the launcher's --------------------------------------------------------------


@cases_of(MOUNTS)
def test_the_launcher_files_the_model_knows_are_the_launchers() -> None:
    from components.launcher import launcher

    assert set(LAUNCHER_FILES) == {launcher.DEFAULT_ENV_FILE, launcher.DEFAULT_BASH_ENV_FILE, launcher.DEFAULT_REPORT_JSON}


# --- YAML 1.1: the loader refuses what it would read as another number --------------------------------------------------

YAML_CASES = [
    ("master_port: 017", "workloads[one].master_port", "017 is an octal number in YAML 1.1 (it reads as 15, not 17): write 17"),
    ("master_port: 0017", "workloads[one].master_port", "write 17, or quote it ('0017')"),
    ("master_port: 29:50", "workloads[one].master_port", "base-60 number in YAML 1.1 (it reads as 1790)"),
    ("nodes: true", "workloads[one].nodes", "not the boolean true"),
    ("nodes: on", "workloads[one].nodes", "not the boolean true"),
    ("nodes: '1'", "workloads[one].nodes", "without quotes"),
    ("env: {MODE: 0644}", "workloads[one].env.MODE", "reads as 420"),
]


@cases_of(YAML11, len(YAML_CASES))
@pytest.mark.parametrize("line,path,phrase", YAML_CASES, ids=[c[0] for c in YAML_CASES])
def test_yaml_11_readings_are_refused_with_the_fix(line: str, path: str, phrase: str, tmp_path: Path) -> None:
    text = yaml.safe_dump(fixtures.tcp(), sort_keys=False).replace("  transport: tcp\n", f"  transport: tcp\n  {line}\n", 1)
    file = tmp_path / "c.yaml"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(stacks.ConfigError) as err:
        stacks.load_file(file)
    # The file's line of the value follows its path.
    assert re.match(
        rf"{re.escape(str(file))}: invalid configuration\n  {re.escape(path)} \({re.escape(str(file))}:\d+\): ", str(err.value)
    ), err.value
    assert phrase in str(err.value), err.value


@cases_of(YAML11)
def test_a_quoted_octal_looking_text_is_text(tmp_path: Path) -> None:
    text = yaml.safe_dump(fixtures.tcp(), sort_keys=False).replace("  transport: tcp\n", "  transport: tcp\n  env: {MODE: '017'}\n", 1)
    file = tmp_path / "c.yaml"
    file.write_text(text, encoding="utf-8")
    config = stacks.load_file(file)
    assert config.workloads[0].env == {"MODE": "017"}
    assert "MODE: '017'" in stacks.dump(config)  # and it is written back quoted


# --- scc-facts: the read still checks the live SCC against what the config says ----------------------------------------


@cases_of(SCC_FACTS)
def test_a_live_scc_lacking_what_the_config_says_it_allows_still_fails_preview() -> None:
    config = fixtures.config(
        "roce", lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["IPC_LOCK"])
    )
    live = {"metadata": {"name": "site-rdma"}, "allowedCapabilities": ["NET_RAW"], "runAsUser": {"type": "RunAsAny"}}
    with pytest.raises(pulumi.RunError, match="SecurityContextConstraints site-rdma: it does not allow capabilities IPC_LOCK"):
        run(config, "platform", live={("SecurityContextConstraints", "site-rdma"): live})


# --- memlock-reason: once per stack, never a warning to accept ---------------------------------------------------------


@cases_of(MEMLOCK_REASON, 2)
def test_the_root_strategy_reason_is_printed_once_per_stack() -> None:
    findings = findings_of(fixtures.config("roce"))
    [f] = [f for f in findings if f.severity == "info"]
    assert f.rule == "memlock-strategy" and f.line().startswith("info memlock-strategy defaults.memlock_rdma")
    assert "KNOWLEDGE.md" in f.message and "StatefulSet team-a/dev" in f.message and "Job team-a/train-r1" in f.message
    assert policy.summary("roce", findings).endswith(f"0 errors, 0 warnings, 1 info ({len(policy.RULES)} rules)")
    assert [f for f in findings_of(fixtures.config("tcp")) if f.severity == "info"] == []  # nobody runs as root there


# --- the command line: no traceback, the exit code, the config path ----------------------------------------------------

CLI = [
    (SCC_FACTS, "roce", lambda d: d["security"].update(scc="site-rdma", create=False, existing_allowed_capabilities=["NET_RAW"]), 1,
     "error scc-capabilities security.existing_allowed_capabilities", "Job team-a/train-r1, StatefulSet team-a/dev: spec."),
    (NAMES, "roce", both(lambda d: d["workloads"][0]["ports"].append({"name": "a-b", "port": 9000, "route": True}),
                         add_workload("solo", name="dev-a", namespace="team-a", ports=[{"name": "b", "port": 9000, "route": True}])), 2,
     "workloads[dev-a].ports[b].name", "workloads[dev].ports[a-b].name"),
    (MOUNTS, "roce", mount("dev", 1, mount_path="/tmp", read_only=True), 2, "workloads[dev].mounts[1].mount_path", "/tmp/launcher.env"),
    (IMAGE, "tcp", W("one", image="quay.io/example/pytorch:latest"), 0, "warning image workloads[one].image (", "@sha256:<digest>"),
    (MEMLOCK_REASON, "roce", lambda d: None, 0, "roce: info memlock-strategy defaults.memlock_rdma (", "checkov"),
]  # fmt: skip


@pytest.mark.parametrize("cls,fixture,edit,code,where,phrase", CLI, ids=[c[0].split(":")[0] for c in CLI])
def test_check_from_a_file_in_a_real_process(
    cls: str, fixture: str, edit: Edit, code: int, where: str, phrase: str, tmp_path: Path
) -> None:
    data = fixtures.data(fixture)
    edit(data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    assert proc.returncode == code, output  # 1: a preflight error; 2: an invalid config (the file and the path named)
    if code == 2:
        assert re.match(
            rf"error: {re.escape(str(path))}: invalid configuration\n  {re.escape(where)} \({re.escape(str(path))}:\d+\): ", proc.stderr
        ), proc.stderr
    else:
        assert where in proc.stdout, proc.stdout
    assert phrase in " ".join(output.split())  # a long finding wraps


@cases_of(YAML11)
def test_an_octal_port_from_a_file_in_a_real_process(tmp_path: Path) -> None:
    text = yaml.safe_dump(fixtures.tcp(), sort_keys=False).replace("  transport: tcp\n", "  transport: tcp\n  master_port: 017\n", 1)
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"error: {path}: invalid configuration\n"
        f"  workloads[one].master_port ({path}:27): 017 is an octal number in YAML 1.1 (it reads as 15, not 17): write 17, or "
        "quote it ('017') if it is text\n"
    )


# --- counts -------------------------------------------------------------------------------------------------------------


def case_counts() -> dict[str, int]:
    """Cases per class: the tables' rows and the standalone tests' cases."""
    counts: Counter[str] = Counter()
    for table in (INVALID, FINDINGS, PASSES, CLI):
        counts.update(row[0] for row in table)
    counts.update(REGISTERED)
    return {cls: counts[cls] for cls in CLASSES}


def test_every_class_has_cases(capsys: pytest.CaptureFixture[str]) -> None:
    counts = case_counts()
    with capsys.disabled():
        print("\nissue 19 cases per class: " + "; ".join(f"{cls.split(':')[0]} {n}" for cls, n in counts.items()))
    assert all(n > 0 for n in counts.values()), counts
