"""The config refuses what is malformed or names what the stack does not have: each class of mistake (tests/helpers.py)
gets one `path: message` line naming the field (and its line in the stack file) and the fix, which the CLI prints as
"invalid configuration" with exit 2; never a traceback. (What a valid config would break on the cluster is the
preflight's: tests/policy/.) PASSES holds what must stay accepted, so each check refuses only what it means to. Configs
are the fixtures the tests own, edited as a user edits a stack file (tests/fixtures.py)."""

from __future__ import annotations

import pytest

import stacks
from config.openshift import SRIOV_OPERATOR_KINDS, SRIOV_OPERATOR_NAMESPACE, platform_namespace
from tests import fixtures
from tests.fixtures import (
    Edit,
    W,
    add_namespace,
    add_project,
    add_workload,
    both,
    check_of,
    env,
    mount,
    node_set,
    port,
    pvc_fix,
    script_file,
    sec,
    secret_key,
    toleration,
)
from tests.helpers import (
    CONTROL_PLANE,
    DATA_KEYS,
    DEBUGGER,
    DOLLAR,
    IMAGE,
    MOUNTS,
    NAMES,
    NAMESPACES,
    POOL,
    PYENV,
    QUALIFIED_NAMES,
    RESOURCES,
    SCC,
    SIZE,
    YAML11,
    assert_accepted,
    assert_refused,
    case_id,
    cases_of,
    classify,
    rendered_stack,
)

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
    (
        DATA_KEYS,
        "script key starting with ..",
        "roce",
        script_file("..data"),
        "scripts[train-script].files['..data']",
        "not starting with '..'",
    ),
    (
        DATA_KEYS,
        "script key with a slash",
        "roce",
        script_file("bin/run.sh"),
        "scripts[train-script].files['bin/run.sh']",
        "letters, digits",
    ),
    (DATA_KEYS, "script key '.'", "roce", script_file("."), "scripts[train-script].files['.']", "not '.' or '..'"),
    (DATA_KEYS, "script key of 254 characters", "roce", script_file("k" * 254), "scripts[train-script].files." + "k" * 254, "at most 253"),
    (
        DATA_KEYS,
        "secretKeyRef key with a space",
        "roce",
        secret_key("hf token"),
        "workloads[train].secret_env.HF_TOKEN.key",
        "Rename the key",
    ),
    (
        DATA_KEYS,
        "secretKeyRef key ..token",
        "roce",
        secret_key("..token"),
        "workloads[train].secret_env.HF_TOKEN.key",
        "starting with '..'",
    ),
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
    (SIZE, "one environment string", "roce", env("dev", {"BIG": "€" * 45_000}), "workloads[dev].env.BIG", "MAX_ARG_STRLEN"),
    (SIZE, "arguments as LAUNCHER_ARGS", "roce", W("dev", args=["é" * 3000] * 8), "workloads[dev].args", "LAUNCHER_ARGS"),
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
    # the control plane's pool
    (
        POOL,
        "pool master",
        "tcp",
        lambda d: d.update(node_level={"pool": "master", "crio_memlock_unlimited": True}),
        "node_level.pool",
        "control plane's pool",
    ),
    (
        POOL,
        "pool control-plane",
        "tcp",
        lambda d: d.update(node_level={"pool": "control-plane", "iommu_passthrough": True, "reason": "GDR"}),
        "node_level.pool",
        "control_plane_reason",
    ),
    (
        POOL,
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
    # a stack never creates an SCC OpenShift ships
    (SCC, "creating hostmount-anyuid-v2", "roce", sec(scc="hostmount-anyuid-v2"), "security.create", "an SCC OpenShift ships"),
    # namespaces no stack touches
    (NAMESPACES, "default", "tcp", add_namespace("default"), "namespaces[1]", "a namespace of the platform"),
    (NAMESPACES, "kube-system", "tcp", add_namespace("kube-system"), "namespaces[1]", "pulumi destroy"),
    (NAMESPACES, "openshift", "tcp", add_namespace("openshift"), "namespaces[1]", "kube-*, openshift, openshift-*, default"),
    (NAMESPACES, "openshift-monitoring", "roce", add_namespace("openshift-monitoring"), "namespaces[2]", "Use the users' own projects"),
    (
        NAMESPACES,
        "the SR-IOV operator's",
        "roce",
        both(lambda d: d["fabric"].update(nad_source_namespace="sriov-nads"), add_namespace("sriov-nads")),
        "namespaces[2]",
        "holds the SR-IOV operator's NADs",
    ),
    (
        NAMESPACES,
        "a workload in openshift-config",
        "tcp",
        W("one", namespace="openshift-config"),
        "workloads[one].namespace",
        "of the platform",
    ),
    (
        NAMESPACES,
        "a volume in kube-public",
        "roce",
        lambda d: d["volumes"].append({"name": "x", "namespace": "kube-public", "mount_path": "/x", "size": "1Gi"}),
        "volumes[x].namespace",
        "of the platform",
    ),
    (
        NAMESPACES,
        "a service account in default",
        "tcp",
        lambda d: d["security"]["service_accounts"].append({"name": "sa2", "namespace": "default"}),
        "security.service_accounts[sa2].namespace",
        "of the platform",
    ),
    (
        NAMESPACES,
        "a claim fix in openshift-storage",
        "ib",
        lambda d: d["pvc_fixes"][0].update(namespace="openshift-storage"),
        "pvc_fixes[0].namespace",
        "of the platform",
    ),
    (
        NAMESPACES,
        "hand_made in kube-system",
        "tcp",
        lambda d: d.setdefault("hand_made", []).append({"kind": "ServiceAccount", "name": "x", "namespace": "kube-system", "source": "s"}),
        "hand_made[x].namespace",
        "adopt the platform's own objects",
    ),
    (
        NAMESPACES,
        "hand_made in the NAD source",
        "roce",
        both(
            lambda d: d["fabric"].update(nad_source_namespace="sriov-nads"),
            lambda d: d.setdefault("hand_made", []).append(
                {"kind": "NetworkAttachmentDefinition", "name": "port1-network", "namespace": "sriov-nads", "source": "s"}
            ),
        ),
        "hand_made[port1-network].namespace",
        "SR-IOV operator's NADs",
    ),
    # qualified names, as the API server checks them
    (
        QUALIFIED_NAMES,
        "toleration key with an empty prefix",
        "tcp",
        lambda d: d["gpu_tolerations"][0].update(key="/abs"),
        "gpu_tolerations[0].key",
        "the prefix before '/' is empty",
    ),
    (
        QUALIFIED_NAMES,
        "node selector key with an empty prefix",
        "tcp",
        W("one", node_selector={"/gpu": "true"}),
        "workloads[one].node_selector['/gpu']",
        "prefix before '/' is empty",
    ),
    (
        QUALIFIED_NAMES,
        "uppercase prefix",
        "roce",
        lambda d: d["gpu_node_selector"].update({"Example.com/gpu": "true"}),
        "gpu_node_selector['Example.com/gpu']",
        "not a DNS subdomain",
    ),
    (
        QUALIFIED_NAMES,
        "name part of 64 characters",
        "tcp",
        lambda d: d["gpu_tolerations"][0].update(key="nvidia.com/" + "g" * 64),
        "gpu_tolerations[0].key",
        "has 64 characters",
    ),
    (
        QUALIFIED_NAMES,
        "name part starting with '-'",
        "tcp",
        W("one", tolerations=[toleration("nvidia.com/-gpu")]),
        "workloads[one].tolerations[0].key",
        "starting and ending with a letter or digit",
    ),
    (
        QUALIFIED_NAMES,
        "two slashes",
        "roce",
        W("dev", tolerations=[toleration("a/b/c")]),
        "workloads[dev].tolerations[0].key",
        "prefix 'a/b'",
    ),
    (
        CONTROL_PLANE,
        "a toleration of every taint",
        "tcp",
        W("one", tolerations=[{"key": "", "operator": "Exists"}]),
        "workloads[one].tolerations[0].key",
        "tolerates every taint, the control plane's NoSchedule taints included",
    ),
    (
        CONTROL_PLANE,
        "the stack's toleration of every taint",
        "roce",
        lambda d: d["gpu_tolerations"].append(toleration("")),
        "gpu_tolerations[1].key",
        "name the taint's key",
    ),
    (
        DEBUGGER,
        "a reason for a port not routed",
        "roce",
        port("dev", 1, route_reason="a tutorial"),
        "workloads[dev].ports[debugpy].route_reason",
        "not routed (route: false)",
    ),
    (
        DEBUGGER,
        "a reason for Jupyter",
        "roce",
        port("dev", 0, route_reason="a tutorial"),
        "workloads[dev].ports[jupyter].route_reason",
        "not a debugger's",
    ),
    # a reference to what the stack does not declare names what it declares: closest first, or where it is instead
    (
        NAMES,
        "an undeclared namespace",
        "roce",
        W("dev", namespace="tema-b"),
        "workloads[dev].namespace",
        "not in namespaces (team-b, team-a)",
    ),
    (
        NAMES,
        "an undeclared volume",
        "roce",
        mount("dev", 1, volume="dataset"),
        "workloads[dev].mounts[1].volume",
        "declared there: datasets, workspace",
    ),
    (
        NAMES,
        "a volume of another namespace",
        "roce",
        W("solo", mounts=[{"volume": "datasets"}]),
        "workloads[solo].mounts[0].volume",
        "declared in namespace 'team-a' (volumes[datasets])",
    ),
    (
        NAMES,
        "a service account of another namespace",
        "roce",
        both(
            lambda d: d["security"]["service_accounts"].append({"name": "runner", "namespace": "team-a"}),
            W("solo", service_account="runner"),
        ),
        "workloads[solo].service_account",
        "declared in namespace 'team-a' (security.service_accounts[runner]), and a pod uses only what its own namespace holds. "
        "Declare it in 'team-b' too, or name one declared there (trainer)",
    ),
    (
        NAMES,
        "an undeclared script ConfigMap",
        "roce",
        W("train", scripts=[{"config_map": "train-scripts"}]),
        "workloads[train].scripts[0].config_map",
        "(ConfigMaps declared there: train-script)",
    ),
    (
        NAMES,
        "an undeclared Secret",
        "roce",
        W("train", secret_env={"HF_TOKEN": {"secret": "hf-secrets", "key": "token"}}),
        "workloads[train].secret_env.HF_TOKEN",
        "(Secrets declared there: hf-secret)",
    ),
    (
        NAMES,
        "a Secret of another namespace",
        "roce",
        W("solo", secret_env={"HF_TOKEN": {"secret": "hf-secret", "key": "token"}}),
        "workloads[solo].secret_env.HF_TOKEN",
        "declared in namespace 'team-a' (existing.secrets[hf-secret])",
    ),
    (NAMES, "an undeclared node set", "roce", W("train", node_set="spares"), "workloads[train].node_set", "not in node_sets (spare, main)"),
    # what a user pastes with an image: an invisible character at its edge
    (IMAGE, "a trailing space", "tcp", W("one", image=fixtures.EXAMPLE + " "), "workloads[one].image", "ends with U+0020 (SPACE)"),
    (IMAGE, "a leading no-break space", "tcp", W("one", image="\u00a0" + fixtures.EXAMPLE), "workloads[one].image", "starts with U+00A0"),
    (IMAGE, "a trailing zero-width space", "tcp", W("one", image=fixtures.EXAMPLE + "\u200b"), "workloads[one].image", "ZERO WIDTH SPACE"),
    (IMAGE, "a trailing tab in a namespace", "tcp", W("one", namespace="proj\t"), "workloads[one].namespace", "ends with U+0009"),
    # more CPU than an H100 node of these clusters has (MAX_CPU), whatever a node set states
    (RESOURCES, "1Ki cores", "tcp", W("one", cpu="1Ki", cpu_limit=None), "workloads[one].cpu", "1,024 cores, more CPU than any node"),
    (RESOURCES, "1Ki allocatable cores", "tcp", node_set(0, allocatable_cpu="1Ki"), "node_sets[pool].allocatable_cpu", "at most 512"),
]
classify(INVALID)


@pytest.mark.parametrize("cls,case,fixture,edit,path,phrase", INVALID, ids=[case_id(c) for c in INVALID])
def test_refused_naming_the_path_and_the_fix(cls: str, case: str, fixture: str, edit: Edit, path: str, phrase: str) -> None:
    assert_refused(fixture, edit, path, phrase)


# --- what stays accepted, so each check refuses only what it means to: (class, case, fixture, edit) -----------------

PASSES: list[tuple[str, str, str, Edit]] = [
    (DOLLAR, "pa$$word", "roce", env("dev", {"PASSWORD": "pa$$word"})),
    (DOLLAR, "shell command substitution", "tcp", W("one", args=["bash", "-c", "echo $(hostname) $$ ${NODE_RANK}"])),
    (DOLLAR, "$(name) that is no pod variable", "tcp", env("one", {"PROMPT_COMMAND": "echo $(date)"})),
    (DATA_KEYS, "a dotfile key", "roce", script_file(".bashrc")),
    (DATA_KEYS, "a key of 253 characters", "roce", script_file("k" * 253)),
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
            add_project("nfs"),
            lambda d: d["volumes"].append({"name": "nfs-server-root", "namespace": "nfs", "mount_path": "/nfs", "existing": True}),
        ),
    ),
    (MOUNTS, "read-write /opt", "roce", mount("dev", 1, mount_path="/opt")),
    (MOUNTS, "under /etc", "roce", mount("dev", 1, mount_path="/etc/myapp")),
    (MOUNTS, "hostfile in /tmp", "roce", W("dev", deepspeed_hostfile="/tmp/hostfile")),
    (RESOURCES, "requests equal to the nodes'", "roce", both(node_set(1, allocatable_cpu="32"), node_set(0, allocatable_memory="64Gi"))),
    (RESOURCES, "shm of 64Mi", "tcp", W("one", shm_size="64Mi")),
    (RESOURCES, "node_selector on a node of the set", "roce", W("solo", node_selector={"kubernetes.io/hostname": "node-e"})),
    (
        POOL,
        "pool master with a reason",
        "tcp",
        lambda d: d.update(node_level={"pool": "master", "crio_memlock_unlimited": True, "control_plane_reason": "compact cluster"}),
    ),
    (NAMESPACES, "a project named like one", "tcp", both(add_namespace("my-openshift"), add_namespace("kubeflow-team"))),
    (
        NAMESPACES,
        "a NAD source namespace the stack does not deploy into",
        "roce",
        lambda d: d["fabric"].update(nad_source_namespace="sriov-nads"),
    ),
    (QUALIFIED_NAMES, "a key without prefix", "tcp", W("one", node_selector={"gpu": "true"})),
    (QUALIFIED_NAMES, "a name part of 63 characters", "tcp", lambda d: d["gpu_tolerations"][0].update(key="nvidia.com/" + "g" * 63)),
    (QUALIFIED_NAMES, "dots, dashes and underscores", "roce", W("dev", tolerations=[toleration("example.com/a_b.c-d")])),
]
classify(PASSES)


@pytest.mark.parametrize("cls,case,fixture,edit", PASSES, ids=[case_id(c) for c in PASSES])
def test_still_accepted(cls: str, case: str, fixture: str, edit: Edit) -> None:
    assert_accepted(fixture, edit)


# --- namespaces: the committed stacks use none ----------------------------------------------------------------------


@cases_of(NAMESPACES, len(stacks.names()))
@pytest.mark.parametrize("name", stacks.names())
def test_the_committed_stacks_touch_no_platform_namespace(name: str) -> None:
    """But for the one exception docs/networks.md documents: in operator mode, the SR-IOV operator's own kinds in its
    namespace (it reconciles no other), and only there."""
    config = stacks.load(name)
    source = config.fabric.nad_source_namespace if config.fabric else None
    objs = rendered_stack(name).objects()
    operator_kinds = [o for o in objs if o["kind"] in SRIOV_OPERATOR_KINDS]
    if operator_kinds:
        assert config.fabric is not None
        operator_ns = config.fabric.operator_namespace
        assert {o["metadata"]["namespace"] for o in operator_kinds} == {operator_ns}
        assert operator_ns == SRIOV_OPERATOR_NAMESPACE or not platform_namespace(operator_ns), operator_ns
        if any(o["kind"] == "SriovNetwork" for o in operator_kinds):
            assert config.fabric.nad_mode == "operator"
    touched = {o.get("metadata", {}).get("namespace") for o in objs if o["kind"] not in SRIOV_OPERATOR_KINDS} - {None}
    touched |= set(config.namespaces) | {f.namespace for f in config.pvc_fixes} | {h.namespace for h in config.hand_made if h.namespace}
    assert touched and not [ns for ns in touched if platform_namespace(ns) or ns == source]
