"""What a cluster IS: the typed, validated configuration of one stack.

Everything the seed documents set up by hand is a field here. Every field is documented (the
docstrings become the descriptions of `python -m stacks schema`), every name that lands on the
cluster is checked against the API server's own rules, including the names the program derives
from it (`NAME-headless`, `NAME-rN-INDEX`, ...), every size as a quantity and every count within
int32 and within bounds that keep the program's own work small. This module is the ground floor:
it imports nothing of the project above it.

Errors name the object and the field (`workloads[h-kim].nodes`), whether the config comes from a
stack module or a YAML file: see `located` and `ModelError`.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from config import provenance

# --- value types ------------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CAPABILITY = re.compile(r"^[A-Z][A-Z_]*$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_LABEL_KEY_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_FILE_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
# The image reference grammar of distribution/reference: [domain[:port]/]path[:tag][@digest].
_IMAGE = re.compile(
    r"^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*"
    r"(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?$"
)
# The digests a registry and the container runtime verify (OCI image spec, go-digest): the algorithm's
# lowercase hex encoding of exactly its length. Anything else fails the pull ("invalid checksum digest format",
# "unsupported digest algorithm").
DIGEST_HEX_LENGTH = {"sha256": 64, "sha512": 128}
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

INT32_MAX = 2**31 - 1
# Bounds on counts: generous for a GPU cluster, and small enough that a typo (3000000000 nodes)
# is refused instead of making the program build billions of names.
MAX_NODES = 256
MAX_GPUS = 16
MAX_NODE_SET_SIZE = 4096
MAX_WORKLOADS = 200
# Bounds on what one stack declares, so that `python -m stacks check` (the preflight over the declared objects, linear
# in them) and `render` stay a matter of seconds: docs/performance.md "Scale" measures the largest stack they accept.
# The committed stacks use at most a quarter of each (Barcelona: 5 named GPU nodes, 5 workloads, two TCP variants of
# one workload, one bandwidth check; /work/shared/CLUSTER-FACTS.md), and a large site's project on one cluster fits too.
MAX_CLUSTER_NODES = 4096
"""GPU nodes of all node sets together: a large cluster's whole GPU fleet."""
MAX_NAMED_NODES = 256
"""Nodes named in all node sets together. Every pod template carries the names of its set (a pin) or of all of them
(the pods of a count set avoid them), so the rendered objects grow with templates x names; a fleet larger than this is
counted (`count`), not listed."""
MAX_TCP_VARIANTS = 8
"""TCP variants of one workload (alternatives of it: an older and a newer image, say)."""
MAX_POD_TEMPLATES = 256
"""Workloads, their TCP variants and the bandwidth checks together: each renders a StatefulSet or Job, its Services
and its NetworkPolicy, whether it runs or not (a stopped StatefulSet keeps its claims at 0 replicas)."""
MAX_PORTS = 16
"""Developer ports of one workload: each routed port renders a Route."""
# Bounds of every other list and dict a stack writes. Each is far above real use (the committed stacks, and the facts
# of /work/shared/CLUSTER-FACTS.md, stay under a quarter of each: tests/test_issue23_fixes_model.py), and together they keep
# `check` of the largest stack accepted (bench/scale.py largest(), every list at its bound) within 2 s: each entry is
# work for the preflight in every pod template, so an unbounded list (3,000 tolerations) made it minutes. The bounds of
# what every pod template carries are the tightest: each of their entries is repeated in up to 256 templates.
MAX_NODE_SETS = 64  # node sets: a site splits its GPU fleet into a few pools (Barcelona: 2)
MAX_NAMESPACES = 64  # user namespaces of one stack: the projects of a large site's teams (Barcelona: 3)
MAX_VOLUMES = MAX_WORKLOADS  # data volumes: a few per namespace (Barcelona: 3)
MAX_BANDWIDTH_CHECKS = 16  # bandwidth checks: one per transport and node set is the use (1 each here)
MAX_ATTACHMENTS = 32  # SR-IOV networks of a pod: one per NIC port; a GPU node has 4 to 8 (Barcelona: 4)
MAX_DEVICES = 32  # RDMA devices named in a fabric or one observation: one per port (Barcelona: 4, Cairo: 5 seen)
MAX_OBSERVATIONS = 16  # the seeds' device lists of one fabric (2 on each cluster)
MAX_ACCESS_MODES = 8  # access modes of one storage class: the model knows 2 (a class offers 1 or 2); a bound on a runaway list
MAX_STORAGE_CLASSES = 16  # storage classes known on a cluster, or served by one fixed claim (2 at most here)
MAX_PVC_FIXES = 16  # existing claims patched with a storage class (Cairo: 1, the NFS server's root)
MAX_SERVICE_ACCOUNTS = 64  # service accounts the stack makes: one or two per namespace (Barcelona: 4)
MAX_CAPABILITIES = 64  # capabilities an existing SCC allows: Linux has 41
MAX_EXISTING = 64  # secrets, ConfigMaps and ImageStreams the stack relies on, each (1 each here)
MAX_SCRIPTS = 64  # ConfigMaps of scripts the stack ships (1 here)
MAX_SCRIPT_FILES = 64  # files of one such ConfigMap (1 here; a ConfigMap holds 1 MiB in all)
MAX_IMAGES = 32  # images the stack builds (1 here)
MAX_HAND_MADE = 128  # objects made by hand that the stack declares (Barcelona: 20, the most)
MAX_ACCEPTED_WARNINGS = 128  # accepted preflight warnings (Barcelona: 5); `*` patterns accept many objects at once
MAX_NOTES = 64  # notes of a stack (Barcelona: 8)
MAX_TOLERATIONS = 8  # taints tolerated, of the stack's GPU nodes or of one workload (1 on every cluster here)
MAX_SELECTOR = 8  # node labels required, by the stack or by one workload (1 here)
MAX_ENV = 32  # environment variables of one workload or check, and NCCL defaults per transport (5 at most here)
MAX_SECRET_ENV = 8  # variables of one workload read from Secrets (1 here: HF_TOKEN)
MAX_MOUNTS = 8  # volumes one workload mounts (2 at most here: workspace and datasets)
MAX_SCRIPT_MOUNTS = 4  # script ConfigMaps one workload mounts (1 here)
MAX_ARGS = 128  # arguments of one workload's command (7 at most here; a torchrun with 60 flags and values fits)
MAX_TEXT = 256 * 1024  # one script file, one Dockerfile
GIB = 1024**3
MIB = 1024**2

# Names the program gives its own volumes and mount paths in every training pod.
RESERVED_VOLUMES = frozenset({"launcher", "dshm"})
LAUNCHER_DIR = "/opt/launcher"
RESERVED_PATHS = frozenset({"/dev/shm", LAUNCHER_DIR})
# Environment the launcher reads or exports (components/launcher/launcher.py): a workload's env
# must not override it, or the pod starts with a rank, world size or strategy the program did not render.
RESERVED_ENV = frozenset(
    {"MASTER_ADDR", "MASTER_PORT", "POD_NAME", "JOB_COMPLETION_INDEX", "NODE_RANK", "NNODES", "NPROC_PER_NODE", "WORLD_SIZE"}
)
RESERVED_ENV_PREFIX = "LAUNCHER_"
# Limits of exec(2): the launcher execs the command with the pod's environment, so every `NAME=value` string and
# every argument must fit MAX_ARG_STRLEN (32 pages), and all of them with their pointers ARG_MAX (a quarter of the
# 8 MiB stack limit). EXEC_MARGIN is left for the image's own environment, what the launcher adds and torchrun's flags.
EXEC_STRING_MAX = 131_072
EXEC_TOTAL_MAX = 2 * 1024**2
EXEC_MARGIN = 256 * 1024
# The API server refuses a request larger than etcd takes (1.5 MiB); the pod template is most of a StatefulSet or Job.
OBJECT_MAX = 1536 * 1024
# What a training pod's template holds besides the environment (containers, volumes, affinity, labels): an upper bound.
POD_TEMPLATE_BASE = 16 * 1024


class SccFacts(NamedTuple):
    """What admission lets a pod do under an SCC OpenShift ships (the fields of its manifest the rules judge)."""

    capabilities: frozenset[str] | None
    """allowedCapabilities: what a container may add; None for `*` (any)."""
    run_as_user: str
    """runAsUser.type: RunAsAny admits uid 0; MustRunAsRange and MustRunAsNonRoot never do."""
    privileged: bool
    """allowPrivilegedContainer."""
    host_paths: bool
    """allowHostDirVolumePlugin: hostPath volumes, the node's file system."""
    escalation: bool
    """allowPrivilegeEscalation (unset in a manifest means allowed)."""

    @property
    def allows_root(self) -> bool:
        return self.run_as_user == "RunAsAny"


_NET_BIND = frozenset({"NET_BIND_SERVICE"})
_NONE: frozenset[str] = frozenset()
# The SCCs OpenShift ships, and what each one allows: facts of the platform, not of a stack's config. Read from the
# manifests OpenShift installs them from: openshift/cluster-kube-apiserver-operator bindata/bootkube/scc-manifests/
# (0000_20_kube-apiserver-operator_00_scc-NAME.yaml), openshift/machine-api-operator
# install/0000_30_machine-api-operator_09_security_context_constraint.yaml (machine-api-termination-handler) and
# openshift/cluster-monitoring-operator assets/node-exporter/security-context-constraints.yaml (node-exporter); they
# agree with the OpenShift documentation's "Default security context constraints". A stack that `create`s one of them
# would own, and on destroy delete, the SCC every user of the cluster runs under; a stack that names one is judged by
# these facts, whatever its security.existing_* fields say (policy.core.Stack.scc).
OPENSHIFT_SCCS: dict[str, SccFacts] = {
    "anyuid": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=False, escalation=True),
    "hostaccess": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=True, escalation=True),
    "hostmount-anyuid": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True),
    "hostmount-anyuid-v2": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True),
    "hostnetwork": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=False, escalation=True),
    "hostnetwork-v2": SccFacts(_NET_BIND, "MustRunAsRange", privileged=False, host_paths=False, escalation=False),
    "machine-api-termination-handler": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True),
    "node-exporter": SccFacts(_NONE, "RunAsAny", privileged=False, host_paths=True, escalation=True),
    "nonroot": SccFacts(_NONE, "MustRunAsNonRoot", privileged=False, host_paths=False, escalation=True),
    "nonroot-v2": SccFacts(_NET_BIND, "MustRunAsNonRoot", privileged=False, host_paths=False, escalation=False),
    "privileged": SccFacts(None, "RunAsAny", privileged=True, host_paths=True, escalation=True),
    "restricted": SccFacts(_NONE, "MustRunAsRange", privileged=False, host_paths=False, escalation=True),
    "restricted-v2": SccFacts(_NET_BIND, "MustRunAsRange", privileged=False, host_paths=False, escalation=False),
}
BUILTIN_SCCS = frozenset(OPENSHIFT_SCCS)
INTERNAL_REGISTRY = "image-registry.openshift-image-registry.svc:5000"
# Service accounts OpenShift makes in every project (the value: which part of it does).
PROJECT_SERVICE_ACCOUNTS = {"default": "", "builder": "", "deployer": "", "pipeline": " that has OpenShift Pipelines"}
# Machine config pools of the control plane: a MachineConfig there drains and reboots the API server's nodes in turn.
CONTROL_PLANE_POOLS = frozenset({"master", "control-plane", "arbiter"})
# The node-role labels (and taint keys) of the same nodes: a GPU pod that selects or tolerates them may land on, and
# load, the nodes the API server and etcd run on.
CONTROL_PLANE_ROLES = tuple(sorted(f"node-role.kubernetes.io/{pool}" for pool in CONTROL_PLANE_POOLS))
# Namespaces a stack never touches: the platform's own and `default`. What a stack declares there it owns, and its
# `pulumi destroy` deletes (a NAD copy, a RoleBinding, a claim); an import would adopt the platform's objects.
PLATFORM_NAMESPACES = ("kube-*", "openshift", "openshift-*", "default")


def platform_namespace(namespace: str) -> bool:
    return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in PLATFORM_NAMESPACES)


# The files components/launcher/launcher.py writes in every pod (DEFAULT_ENV_FILE, DEFAULT_BASH_ENV_FILE,
# DEFAULT_REPORT_JSON; tests hold them equal): a DeepSpeed hostfile must not be one of them, and /tmp must be writable.
LAUNCHER_FILES = ("/tmp/launcher.env", "/tmp/launcher-bash-env.sh", "/tmp/launcher-report.json")
NAME_MAX = 255  # bytes of one path component (Linux NAME_MAX)
# A debugger's port (debugpy's name and its default port): it runs whatever code its client sends.
DEBUGGER_PORT_NAMES = frozenset({"debugpy"})
DEBUGGER_PORTS = frozenset({5678})


def _label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes name: use lowercase letters, digits and '-', "
            "start and end with a letter or digit, at most 63 characters"
        )
    return value


def _dns1035(value: str) -> str:
    if len(value) > 63 or not _DNS_1035.match(value):
        raise ValueError(
            f"{value!r} is not a valid name for a workload: its Service must be a DNS-1035 label, so use lowercase "
            "letters, digits and '-', start with a letter, end with a letter or digit, at most 63 characters"
        )
    return value


def _subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes object name: use lowercase letters, digits, '-' "
            "and '.', start and end with a letter or digit, at most 253 characters"
        )
    return value


def _quantity(value: str) -> str:
    if len(value) > 32 or not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (for example 100Gi, 500Mi, 64, 500m)")
    return value


_SUFFIX: dict[str, Decimal | int] = {
    "": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip


def quantity_value(value: str) -> Decimal:
    """A quantity as a number (bytes for memory, cores for CPU)."""
    m = re.match(r"^([0-9.]+)([A-Za-z]*)$", value)
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    try:
        return Decimal(m.group(1)) * _SUFFIX[m.group(2)]
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a Kubernetes quantity") from None


def _positive(value: str) -> str:
    # A size or an amount of CPU or memory of zero is a typo; the API server rejects a zero claim.
    if quantity_value(value) <= 0:
        raise ValueError(f"{value!r} must be greater than zero")
    return value


# Bounds of a pod's CPU and memory and of a claim: far above any node or volume, and far below where the API
# server's int64 arithmetic overflows (8Ei); a value beyond them is a unit typo, not a wish.
MAX_CPU = 4096  # cores
MAX_MEMORY = 64 * 2**40  # 64Ti
MIN_MEMORY = 12 * 2**20  # CRI-O refuses a memory limit below 12 MiB
MAX_VOLUME = 16 * 2**50  # 16Pi


def _cpu(value: str) -> str:
    if quantity_value(value) > MAX_CPU:
        raise ValueError(f"{value!r} is more CPU than any node has (at most {MAX_CPU} cores here): a unit typo? (e.g. 32, or 500m)")
    return value


def _binary(amount: int) -> str:
    """A byte count in the largest binary unit that divides it (16Pi, 12Mi)."""
    for unit, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount >= size and amount % size == 0:
            return f"{amount // size}{unit}"
    return str(amount)


def _bytes(value: str, low: int, high: int, what: str) -> str:
    if value.endswith("m"):
        raise ValueError(f"{value!r}: 'm' is milli, so this is {quantity_value(value)} bytes: write Mi (mebibytes) or M (megabytes)")
    amount = quantity_value(value)
    if amount > high:
        raise ValueError(f"{value!r} is more than {_binary(high)} of {what}: a unit typo? (the API server overflows at 8Ei)")
    if amount < low:
        raise ValueError(f"{value!r} is {amount} bytes of {what}, below {_binary(low)}: a unit typo? (64 is 64 bytes; write 64Gi)")
    return value


def _memory(value: str) -> str:
    return _bytes(value, MIN_MEMORY, MAX_MEMORY, "memory")


def _shm(value: str) -> str:
    return _bytes(value, 1, MAX_MEMORY, "/dev/shm")  # below 64Mi is the preflight's warning (rule shm-size)


def _volume_size(value: str) -> str:
    return _bytes(value, 1, MAX_VOLUME, "storage")


def _resource(value: str) -> str:
    if len(value) > 253 or not _RESOURCE.match(value):
        raise ValueError(f"{value!r} is not an extended resource name like openshift.io/eno5np0rdma")
    return value


def _env_name(value: str) -> str:
    if len(value) > 256 or not _ENV_NAME.match(value):
        raise ValueError(f"{value!r} is not a valid environment variable name")
    return value


def _capability(value: str) -> str:
    if len(value) > 64 or not _CAPABILITY.match(value) or value.startswith("CAP_"):
        raise ValueError(f"{value!r} is not a capability name as Kubernetes spells it (IPC_LOCK, not cap_ipc_lock)")
    return value


def is_label_value(value: str) -> bool:
    """Whether the API server takes `value` as a label value: at most 63 characters of the label grammar."""
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def _label_value(value: str) -> str:
    if not is_label_value(value):
        raise ValueError(f"{value!r} is not a valid label value (at most 63 letters, digits, '-', '_', '.')")
    return value


def qualified_name_problem(value: str) -> str:
    """Why the API server refuses `value` as a qualified name ("" when it takes it). It checks label and node selector
    keys, taint and toleration keys and affinity expression keys alike with this grammar: [DNS subdomain '/'] name."""
    prefix, slash, name = value.rpartition("/")
    problem = ""
    if slash and not prefix:
        problem = "the prefix before '/' is empty"
    elif prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        problem = f"the prefix {prefix[:64]!r} is not a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)"
    elif len(name) > 63:
        problem = f"the name (after any prefix) has {len(name)} characters, at most 63 are allowed"
    elif not _LABEL_KEY_NAME.match(name):
        problem = "the name must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
    return problem


def _label_key(value: str) -> str:
    if problem := qualified_name_problem(value):
        raise ValueError(
            f"{value[:80]!r} is not a key the API server accepts (label, node selector, taint and toleration keys are qualified "
            f"names): {problem}. Write NAME or PREFIX/NAME, e.g. nvidia.com/gpu.present"
        )
    return value


def _image(value: str) -> str:
    name, at, digest = value.partition("@")
    if not name or len(value) > 512 or not _IMAGE.match(name) or len(name.rsplit(":", 1)[0]) > 255:
        raise ValueError(
            f"{value!r} is not an image reference (registry/path[:tag][@sha256:digest], lowercase path, e.g. "
            "nvcr.io/nvidia/pytorch:25.08-py3)"
        )
    first, slash, _ = name.partition("/")
    if slash and ":" in first:  # a registry host with a port: registry.example.org:5000/team/image
        port = first.rsplit(":", 1)[1]
        if not 1 <= int(port) <= 65535:
            raise ValueError(f"{value!r}: the registry port {port} is not a TCP port (1..65535): fix the registry address")
    if at:
        algorithm, colon, encoded = digest.partition(":")
        if algorithm not in DIGEST_HEX_LENGTH or not colon:
            raise ValueError(
                f"{value!r}: the digest algorithm {algorithm!r} is not one a registry verifies: pin IMAGE@sha256:<64 hex digits> "
                "(`skopeo inspect docker://IMAGE` prints it)"
            )
        want = DIGEST_HEX_LENGTH[algorithm]
        if len(encoded) != want or not re.fullmatch(r"[0-9a-f]+", encoded):
            shown = "uppercase hex" if re.fullmatch(r"[0-9a-fA-F]+", encoded) and len(encoded) == want else f"{len(encoded)} characters"
            raise ValueError(
                f"{value!r}: a {algorithm} digest is exactly {want} lowercase hex digits, this one has {shown}: the pull fails "
                f"with 'invalid checksum digest format'. Copy the digest as the registry prints it ({algorithm}:<{want} hex digits>)"
            )
    return value


def _mount_path(value: str) -> str:
    parts = value.split("/")
    if not value.startswith("/") or ".." in parts or ":" in value or "\x00" in value or len(value) > 1024:
        raise ValueError(f"{value!r} is not a mount path: an absolute path without '..' or ':'")
    long = next((p for p in parts if len(p.encode("utf-8", "surrogatepass")) > NAME_MAX), None)
    if long is not None:
        raise ValueError(
            f"the path component {long[:40]!r}... is {len(long.encode('utf-8', 'surrogatepass'))} bytes: a file name is at most "
            f"{NAME_MAX} bytes (NAME_MAX), so the runtime cannot create it. Shorten that component"
        )
    return "/" + "/".join(p for p in parts if p)  # normalised: no trailing or double slashes


def _file_key(value: str) -> str:
    # The API server's key grammar (IsConfigMapKey): [-._a-zA-Z0-9]+, at most 253 characters, not `.` or `..`, and
    # not starting with `..` (the kubelet's atomic writer keeps its own `..data` and `..TIMESTAMP` entries there).
    if len(value) > 253 or not _FILE_KEY.match(value) or value in (".", "..") or value.startswith(".."):
        raise ValueError(
            f"{value!r} is not a ConfigMap/Secret key: the API server takes letters, digits, '-', '_' and '.', at most 253 "
            "characters, not '.' or '..' and not starting with '..'. Rename the key (e.g. train.sh, HF_TOKEN)"
        )
    return value


def _port_name(value: str) -> str:
    # IANA_SVC_NAME: at most 15 characters, a letter among them, no '--'.
    if len(value) > 15 or not _PORT_NAME.match(value) or "--" in value or not re.search(r"[a-z]", value):
        raise ValueError(f"{value!r} is not a port name: at most 15 lowercase letters, digits and '-', with a letter, no '--'")
    return value


def _text(value: str) -> str:
    if len(value.encode("utf-8", "surrogatepass")) > MAX_TEXT:
        raise ValueError(f"text of {len(value)} characters is longer than {MAX_TEXT} bytes (a ConfigMap holds 1 MiB in all)")
    return value


def _reason(value: str) -> str:
    # A reason is printed with the check and stands for a decision someone made: whitespace alone (or invisible format
    # characters such as a zero-width space) says nothing, and would pass for one.
    value = value.strip()
    if not any(c.isprintable() and not c.isspace() and unicodedata.category(c) != "Cf" for c in value):
        raise ValueError("a reason needs words: this one is empty or only whitespace. Say why (it is printed with the check)")
    return value


def nesting(value: Any) -> int:
    """How deep lists and mappings nest in a parsed value (a scalar: 0), walked without recursion: a value nested
    thousands deep must be refused, not crash the check that measures it."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            todo += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return deepest


MAX_CNI_DEPTH = 20  # a CNI config nests a few levels (plugins[].ipam.routes[])


class TooDeep(ValueError):
    """A parsed value nests deeper than its reader takes."""


def _no_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    # Python reads 1e999 as inf: a number no other JSON reader (Go's, the CNI plugin's) takes.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number (it overflows a float)")
    return value


def bounded_json(text: str, max_depth: int) -> Any:
    """JSON text nested at most `max_depth` deep, without NaN or Infinity (no JSON parser but Python's takes them), nor a
    number too large for a float (1e999, which Python would read as Infinity).
    Python's parser stops near 1,000 levels with a RecursionError, and whatever walks the value afterwards recurses
    too: both are refused here with a TooDeep, any other fault with a ValueError saying why."""
    try:
        parsed = json.loads(text, parse_constant=_no_json_constant, parse_float=_finite_float)
    except RecursionError:
        raise TooDeep(f"nested more than {max_depth} levels deep") from None
    if nesting(parsed) > max_depth:
        raise TooDeep(f"nested more than {max_depth} levels deep")
    return parsed


def _json_object(value: str) -> str:
    try:
        parsed = bounded_json(value, MAX_CNI_DEPTH)
    except TooDeep as err:
        raise ValueError(f"{err}: a CNI config is a few levels deep; paste the source NAD's spec.config as it is") from None
    except ValueError as err:
        raise ValueError(f"not JSON ({err}): paste the source NAD's spec.config as it is") from None
    if not isinstance(parsed, dict):
        raise ValueError("a CNI config is a JSON object ({...}): paste the source NAD's spec.config as it is")
    return value


K8sName = Annotated[str, AfterValidator(_label)]
"""A DNS-1123 label: names of namespaces, service accounts, PVCs, NADs, ConfigMaps."""
WorkloadName = Annotated[str, AfterValidator(_dns1035)]
"""A DNS-1035 label (starts with a letter): workloads and checks, whose Services carry their name."""
ObjectName = Annotated[str, AfterValidator(_subdomain)]
"""A DNS-1123 subdomain: names of cluster-scoped objects such as SCCs and storage classes."""
Quantity = Annotated[str, AfterValidator(_quantity)]
Size = Annotated[str, AfterValidator(_quantity), AfterValidator(_positive)]
"""A quantity greater than zero: volume sizes, CPU, memory."""
Cpu = Annotated[Size, AfterValidator(_cpu)]
"""An amount of CPU: cores (32) or millicores (500m), at most MAX_CPU."""
Memory = Annotated[Size, AfterValidator(_memory)]
"""An amount of memory in bytes (256Gi), between MIN_MEMORY and MAX_MEMORY; never milli (m)."""
ShmSize = Annotated[Size, AfterValidator(_shm)]
VolumeSize = Annotated[Size, AfterValidator(_volume_size)]
ResourceName = Annotated[str, AfterValidator(_resource)]
EnvName = Annotated[str, AfterValidator(_env_name)]
Capability = Annotated[str, AfterValidator(_capability)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
ImageRef = Annotated[str, AfterValidator(_image)]
MountPath = Annotated[str, AfterValidator(_mount_path)]
FileKey = Annotated[str, AfterValidator(_file_key)]
PortName = Annotated[str, AfterValidator(_port_name)]
Text = Annotated[str, AfterValidator(_text)]
CniConfig = Annotated[str, AfterValidator(_text), AfterValidator(_json_object)]
"""A CNI config: a JSON object, as a NetworkAttachmentDefinition's spec.config holds it."""
Reason = Annotated[str, AfterValidator(_reason)]
"""Why the stack does something that needs saying (a broad grant, a routed debugger, an accepted warning, a hand-made
object's origin): stripped, and at least one visible character."""
OptionalReason = Annotated[str, AfterValidator(lambda value: value and _reason(value))]
"""A reason that may be left out: "" (not given), or words."""
Port = Annotated[int, Field(strict=True, ge=1, le=65535)]
# Every integer field is strict: a YAML `true` (or `yes`, `on`) is a boolean, not 1, and a quoted "4" is text.
# (The YAML loader refuses YAML 1.1's octal and base-60 readings, `017` = 15, before validation: stacks.read_yaml.)

Transport = Literal["rdma", "tcp"]
LinkLayer = Literal["roce-v2", "infiniband"]
GdrLevel = Literal["LOC", "PIX", "PXB", "PHB", "SYS"]
MemlockStrategy = Literal["node-limit", "root-ipc-lock", "root-sys-resource", "privileged", "none"]
WorkloadKind = Literal["statefulset", "job"]
State = Literal["running", "stopped"]
AccessMode = Literal["ReadWriteMany", "ReadWriteOnce"]
BandwidthTool = Literal["auto", "torch", "nccl-tests"]

# The capabilities each memlock strategy adds to the container (KNOWLEDGE.md's table). IPC_LOCK
# in the *effective* set lets a root process pin memory past RLIMIT_MEMLOCK; SYS_RESOURCE is only
# needed to raise the limit itself (`ulimit -l unlimited`), which IPC_LOCK alone cannot do.
STRATEGY_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "node-limit": (),
    "root-ipc-lock": ("IPC_LOCK",),
    "root-sys-resource": ("IPC_LOCK", "SYS_RESOURCE"),
    "privileged": (),
    "none": (),
}
# NCCL settings that only mean something over RDMA; a TCP variant does not inherit them.
RDMA_ONLY_NCCL = ("NCCL_IB_", "NCCL_SOCKET_IFNAME", "NCCL_NET_GDR_LEVEL", "NCCL_CROSS_NIC")
# Added capabilities are effective only for uid 0 (CRI-O and containerd set no ambient set).
STRATEGY_RUNS_AS_ROOT = frozenset({"root-ipc-lock", "root-sys-resource"})
# Strategies that need more than the unprivileged SCC (restricted-v2) allows.
STRATEGY_NEEDS_SCC = STRATEGY_RUNS_AS_ROOT | {"privileged"}


# --- what the kubelet does to environment values --------------------------------------------------

# The kubelet rewrites a container's env values (and its command and args) before the process sees them: `$(NAME)`
# becomes NAME's value where the container defines NAME (earlier in its env), and `$$` becomes `$`; so `pa$$word`
# arrives as `pa$word`. A config is literal text: the program renders every `$` of a literal env value as `$$`
# (kubelet_escape), so the process receives exactly what the config says, `$(NAME)` and `$$` included. The one
# ambiguous case is refused (Workload._dollars): `$(NAME)` naming a variable the pod defines, which its writer
# almost certainly meant as the kubelet's reference and which would arrive as that text instead.
_REFERENCE = re.compile(r"\$\(([^)]*)\)")
# Kubernetes expands nothing else: `$PATH` in an env value reaches the process as those five characters.
_SHELL_PATH = re.compile(r"\$(?:\{(PATH|LD_LIBRARY_PATH)\}|(PATH|LD_LIBRARY_PATH)(?![A-Za-z0-9_]))")


def kubelet_escape(value: str) -> str:
    """A literal value as an env value the kubelet leaves alone: every `$` doubled."""
    return value.replace("$", "$$")


def kubelet_expand(value: str, defined: Mapping[str, str]) -> str:
    """What the kubelet makes of an env value (or an argument): `$$` is `$`, `$(NAME)` is NAME's value where
    `defined` has it and stays as written where not, `$(` without `)` and any other `$` stay."""
    if "$" not in value:  # nearly every value: the preflight asks for each env value and argument of each pod
        return value
    out: list[str] = []
    i = 0
    while i < len(value):
        if value[i] != "$" or i + 1 == len(value):
            out.append(value[i])
            i += 1
        elif value[i + 1] == "$":
            out.append("$")
            i += 2
        elif value[i + 1] == "(" and (close := value.find(")", i + 2)) >= 0:
            name = value[i + 2 : close]
            out.append(defined[name] if name in defined else f"$({name})")
            i = close + 1
        else:
            out.append(value[i : i + 2])
            i += 2
    return "".join(out)


def pod_variable(name: str, own: Iterable[str] = ()) -> bool:
    """Whether a training pod's container defines `name` in its env: the launcher's contract, NCCL_* (the stack's
    and the program's), and the workload's own names (`own`)."""
    return name in RESERVED_ENV or name == "POD_NAME" or name.startswith((RESERVED_ENV_PREFIX, "NCCL_")) or name in own


def _dollar_problem(value: str, own: Iterable[str], where: str) -> str | None:
    """Why a literal value would not reach the process as its writer meant, or None."""
    for m in _REFERENCE.finditer(value):
        if pod_variable(m.group(1), own):
            name = m.group(1)
            return (
                f"$({name}) in {where} is the kubelet's reference syntax, but the program passes the config's text as it is "
                f"(every $ rendered as $$), so the process would get the text $({name}), not {name}'s value. Read {name} in the "
                f"process (it is in the pod's environment), or in a shell command write ${{{name}}} "
                f'(run: command, args: ["bash", "-c", "... ${{{name}}} ..."])'
            )
    return None


# --- errors that name the object ----------------------------------------------------------------


def _where(path: tuple[str | int, ...], root: Any) -> str:
    """A config path as a user reads it, with the line that writes it where one is known:
    `workloads[h-kim] at clusters/barcelona.py:160`."""
    line = provenance.shown(provenance.origin(root, path))
    return f"{located(path, root)} at {line}" if line else located(path, root)


class FieldError(ValueError):
    """A check across fields that knows which field is wrong: `path` is relative to the model
    that raises it (a tuple of field names and list indexes), so the message can be located."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class FieldErrors(ValueError):
    """Several FieldErrors of one model, reported together (every invalid value, not the first)."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(e.message for e in errors))
        self.errors = errors


class _Problems:
    """Collects the FieldErrors of a model's cross-field checks, so each entry is checked whatever another's errors."""

    def __init__(self) -> None:
        self.found: list[FieldError] = []

    @contextmanager
    def collect(self) -> Iterator[None]:
        try:
            yield
        except FieldError as err:
            if all(e.path != err.path for e in self.found):  # a TCP variant failing as its source does: one cause, one error
                self.found.append(err)
        except (KeyError, StopIteration, ValueError):
            if not self.found:
                raise  # not a consequence of an error already reported: a defect, shown as one
            # else a check tripping over a value an earlier error already names: that error is the report

    def raise_all(self) -> None:
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise FieldErrors(self.found)


def _item_name(container: Any, index: int) -> str | None:
    try:
        item = container[index]
    except (IndexError, KeyError, TypeError):
        return None
    name = item.get("name") if isinstance(item, dict) else getattr(item, "name", None)
    return name if isinstance(name, str) and name else None


def located(loc: tuple[str | int, ...], data: Any) -> str:
    """A pydantic location as a user reads it: list items by their `name` where they have one
    (`workloads[h-kim].nodes`), by index otherwise (`mounts[0].volume`)."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            name = _item_name(node, part)
            out += f"[{name}]" if name else f"[{part}]"
            try:
                node = node[part]
            except (IndexError, KeyError, TypeError):
                node = None
        elif part == "[key]":
            continue  # pydantic's mark of a dict's key: the message says it is the key
        else:
            # A dict key that is not a plain name (`..data`, `kubernetes.io/hostname`) is quoted, so the path stays readable.
            shown = str(part) if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else f"[{str(part)!r}]"
            out += shown if shown.startswith("[") or not out else f".{shown}"
            node = node.get(part) if isinstance(node, dict) else getattr(node, str(part), None)
    return out


def describe_errors(
    err: ValidationError,
    data: Any,
    prefix: str = "",
    line_of: Callable[[tuple[str | int, ...]], str] | None = None,
    skip: Callable[[tuple[str | int, ...]], bool] | None = None,
) -> list[str]:
    """One `field: message` line per problem (a check across fields may find several), located by names in `data`;
    with `line_of`, the file and line that write the field follow its path (`volumes[data] (clusters/nerc.py:95): ...`)."""
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        cause = (e.get("ctx") or {}).get("error")
        found = [(loc, msg)]
        if isinstance(cause, FieldError):
            found = [(loc + cause.path, cause.message)]
        elif isinstance(cause, FieldErrors):
            found = [(loc + c.path, c.message) for c in cause.errors]
        elif e["type"] == "extra_forbidden":
            found = [(loc, "unknown field (check the spelling; `python -m stacks schema` lists the fields)")]
        elif e["type"] == "int_type" and isinstance(e.get("input"), bool):
            found = [
                (
                    loc,
                    f"Input should be a valid integer, not the boolean {str(e['input']).lower()} (YAML reads true, false, yes, "
                    "no, on and off as booleans): write the number",
                )
            ]
        elif e["type"] == "int_type" and isinstance(e.get("input"), str):
            found = [(loc, msg + ": write the number without quotes")]
        elif e["type"] == "too_long" and isinstance(e.get("input"), (list, dict)):
            limit, actual = (e.get("ctx") or {}).get("max_length"), len(e["input"])
            found = [(loc, f'{actual} entries, at most {limit}: a bound of the program (docs/reference.md, "Bounds")')]
        for at, text in found:
            if skip is not None and skip(at):
                continue
            where = located(at, data)
            where = f"{prefix}.{where}" if prefix and where and not where.startswith("[") else f"{prefix}{where}"
            written = line_of(at) if line_of is not None else ""
            if written:
                where = f"{where} ({written})" if where else written
            lines.append(f"{where}: {text}" if where else text)
    return lines


class ModelError(Exception):
    """A model built in Python (a stack module) that failed validation, with its name: pydantic
    alone reports `nodes: ...` for `Workload(name="h-kim", nodes=0)`."""

    @classmethod
    def of(cls, errors: list[ModelError]) -> ModelError:
        """Several models' errors as one, each line once."""
        combined = cls.__new__(cls)
        combined.lines = list(dict.fromkeys(line for e in errors for line in e.lines))
        Exception.__init__(combined, "\n".join(combined.lines))
        return combined

    def __init__(
        self,
        model: type[Strict],
        data: dict[str, Any],
        err: ValidationError,
        skip: Callable[[Any, tuple[str | int, ...]], bool] | None = None,
    ) -> None:
        name = data.get("name")
        # A model with no place of its own (a Mount, a ContainerPort) is named by its class: it fails when
        # Python builds it, before the Workload(...) around it exists.
        # A ClusterConfig's fields are the config's own paths (`workloads[h-kim].nodes`).
        prefix = "" if model is ClusterConfig else model.COLLECTION or model.__name__
        if isinstance(name, str) and prefix:
            prefix += f"[{name}]"
        here = provenance.written_here()  # the failing call: the line of a field whose value holds no line of its own

        def line_of(loc: tuple[str | int, ...]) -> str:
            where = provenance.origin(data, loc) or here
            # Always the file with the line (`clusters/x.py:12`), the form editors and terminals link, even where the
            # message opens with the same file.
            return provenance.shown(where)

        self.lines = describe_errors(err, data, prefix, line_of, skip=(lambda loc: skip(data, loc)) if skip else None)
        super().__init__("\n".join(self.lines))


DEFERRED: ContextVar[list[ModelError] | None] = ContextVar("deferred", default=None)
"""While a stack module runs (stacks.load_module): the models it built that failed, each replaced by a stand-in so the
module runs on; the ClusterConfig(...) raises them all together (ModelError.of)."""
_INVALID: dict[int, weakref.ReferenceType[Any]] = {}  # by id: a model with a list field is not hashable


def _mark_invalid(model: Any) -> None:
    key = id(model)
    _INVALID[key] = weakref.ref(model)
    weakref.finalize(model, _INVALID.pop, key, None).atexit = False


def _is_invalid(model: Any) -> bool:
    known = _INVALID.get(id(model))
    return known is not None and known() is model


def _built_from_invalid(data: Any, loc: tuple[str | int, ...]) -> bool:
    """Whether a location runs through a stand-in of an invalid model (its own error says what is wrong there)."""
    node = data
    for part in loc:
        if isinstance(part, int):
            try:
                node = node[part]
            except (IndexError, KeyError, TypeError):
                return False
        else:
            node = node.get(part) if isinstance(node, dict) else getattr(node, str(part), None)
        if node is None:
            return False
        if _is_invalid(node):
            return True
    return False


IN_STACK_MODULE: ContextVar[bool] = ContextVar("in_stack_module", default=False)
"""Set while a stack module runs (stacks.load_module): its models' errors then name their object."""
_CONSTRUCTING: ContextVar[int] = ContextVar("constructing", default=0)


class Strict(BaseModel):
    """Unknown fields are errors, values are immutable. Field documentation is each field's
    docstring (read by stacks.schema for `python -m stacks schema`, not at import: extracting it
    costs every `pulumi preview` tens of milliseconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    COLLECTION: ClassVar[str] = ""
    """Where objects of this model live in a ClusterConfig, for error messages (`workloads`)."""

    def __init__(self, **data: Any) -> None:
        # Only a model built by a stack module's code gets a ModelError: pydantic validates nested data
        # through __init__ as well, and a nested error must reach the outer model as a ValidationError,
        # which pydantic locates (workloads.0.tcp_variants.0.name) and the outermost model names.
        depth = _CONSTRUCTING.get()
        by_module = depth == 0 and IN_STACK_MODULE.get()
        if by_module:
            provenance.remember(self)  # errors and findings name the line that wrote it (stacks/provenance.py)
        deferred = DEFERRED.get() if by_module else None
        token = _CONSTRUCTING.set(depth + 1)
        try:
            super().__init__(**data)
        except ValidationError as err:
            if not by_module:
                raise
            error = ModelError(type(self), data, err, skip=_built_from_invalid)
            if deferred is None:
                raise error from None
            deferred.append(error)
            if not isinstance(self, ClusterConfig):
                self._stand_in(data)  # the module runs on, so every model it gets wrong is reported, not the first
                return
        except Exception:
            if not deferred:
                raise
            # A check across the config tripping over a model already reported as invalid: that report is the answer.
        finally:
            _CONSTRUCTING.reset(token)
        if deferred and isinstance(self, ClusterConfig):
            raise ModelError.of(deferred) from None

    @model_validator(mode="before")
    @classmethod
    def _no_sets(cls, data: Any) -> Any:
        # pydantic's lax mode takes a set where a list is expected, in the set's iteration order, which follows the hash
        # seed (PYTHONHASHSEED) for strings and for the models hashed from them: two renders of one stack would differ.
        # No field of the model is a set, so a set or frozenset is refused wherever it is written (a module's or YAML's !!set).
        if not isinstance(data, dict):
            return data
        found = [
            FieldError((key,), "a set has no order (it follows Python's hash seed, so two renders differ): write a list [...]")
            for key, value in data.items()
            if isinstance(value, (set, frozenset))
        ]
        if len(found) == 1:
            raise found[0]
        if found:
            raise FieldErrors(found)
        return data

    def _stand_in(self, data: dict[str, Any]) -> None:
        """Become an unvalidated stand-in with the values given (pydantic's model_construct), marked invalid: what is
        built on it is reported only where its own fields are not (`_built_from_invalid`)."""
        fresh = type(self).model_construct(**{k: v for k, v in data.items() if k in type(self).model_fields})
        for slot in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
            object.__setattr__(self, slot, getattr(fresh, slot, None))
        _mark_invalid(self)


# --- nodes --------------------------------------------------------------------------------------


class Toleration(Strict):
    """A taint the pods tolerate (the GPU nodes' taint, as `oc describe node` shows it)."""

    key: LabelKey
    """Taint key, e.g. nvidia.com/gpu.product."""
    operator: Literal["Equal", "Exists"] = "Exists"
    """Equal matches `value`; Exists matches any value."""
    value: LabelValue | None = None
    """The taint's value, with operator Equal."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """The taint's effect; None tolerates every effect."""

    @field_validator("key", mode="before")
    @classmethod
    def _a_key(cls, value: Any) -> Any:
        if value == "":
            # The API server takes it (with operator Exists): it tolerates every taint, the control plane's included.
            raise ValueError(
                "an empty key (with operator Exists) tolerates every taint, the control plane's NoSchedule taints included, so "
                "GPU pods may land on the API server's nodes: name the taint's key (e.g. nvidia.com/gpu)"
            )
        return value

    @model_validator(mode="after")
    def _value_matches_operator(self) -> Toleration:
        if self.operator == "Equal" and self.value is None:
            raise FieldError(("value",), "operator Equal needs a value")
        if self.operator == "Exists" and self.value is not None:
            raise FieldError(("value",), "operator Exists takes no value (use Equal)")
        return self


class NodeSet(Strict):
    """GPU nodes the stack counts on: named nodes (pods are pinned to them), or a number of
    interchangeable nodes. The preflight places every running pod of the stack on them at once."""

    COLLECTION: ClassVar[str] = "node_sets"
    name: K8sName
    """Name of the set (workloads name it in node_set)."""
    nodes: list[LabelValue] = Field(default=[], max_length=MAX_NAMED_NODES)
    """Node names as `oc get nodes` shows them (kubernetes.io/hostname). Pods of this set are pinned to them. At most
    256 names in all node sets together (MAX_NAMED_NODES): count a larger fleet."""
    count: int | None = Field(strict=True, default=None, ge=1, le=MAX_NODE_SET_SIZE)
    """For nodes not known by name: how many the stack may count on. Pods are not pinned."""
    gpus_per_node: int = Field(strict=True, ge=1, le=MAX_GPUS)
    """GPUs each node offers as nvidia.com/gpu."""
    allocatable_cpu: Cpu | None = None
    """CPU each node offers to pods (`oc describe node`, Allocatable: cpu). None: not known, not checked."""
    allocatable_memory: Memory | None = None
    """Memory each node offers to pods (`oc describe node`, Allocatable: memory). None: not known, not checked."""
    source: str = ""
    """Where the stack knows this from."""

    @field_validator("nodes")
    @classmethod
    def _node_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if name != name.lower():
                # Node names are DNS subdomains: the kubelet registers the host's name lowercased, so `oc get nodes`
                # never shows an uppercase letter, and a pin to one matches no node.
                raise ValueError(f"{name!r}: node names are lowercase (kubernetes.io/hostname); write {name.lower()!r}")
        return value

    @model_validator(mode="after")
    def _named_or_counted(self) -> NodeSet:
        if bool(self.nodes) == (self.count is not None):
            raise FieldError(("nodes",), "give either nodes (names) or count (a number of unnamed nodes), not both or neither")
        if len(set(self.nodes)) != len(self.nodes):
            raise FieldError(("nodes",), "a node is listed twice")
        return self

    @property
    def size(self) -> int:
        return len(self.nodes) or self.count or 0


# --- hardware and fabric ----------------------------------------------------------------------


class SriovAttachment(Strict):
    """One SR-IOV network a pod attaches, in the order the pod lists it."""

    network: K8sName
    """Name of the NetworkAttachmentDefinition, e.g. eno5np0-network."""
    resource: ResourceName
    """The SR-IOV device plugin resource the NAD is annotated with (k8s.v1.cni.cncf.io/resourceName)."""
    interface: str = Field(pattern=r"^net[0-9]{1,3}$")
    """Interface name inside the pod: net1, net2, ... in attachment order."""
    device: str | None = None
    """RDMA device behind the attachment according to the seeds (documentation only; the launcher
    detects the live devices in the pod)."""
    cni_config: CniConfig | None = None
    """The CNI config (a JSON string) of the source NAD as the SR-IOV operator wrote it. The copies
    in the user namespaces carry it; the platform tier's preview reads the live source and fails
    when it differs, so a copy never silently drifts from the operator's network."""


class DeviceObservation(Strict):
    """What one seed document saw of a cluster's RDMA devices. Seeds contradict each other; all
    observations are kept as data and the fabric says which list the stack uses."""

    source: str
    """Which seed document, and where in it."""
    devices: list[str] = Field(max_length=MAX_DEVICES)
    """The devices named there."""
    note: str = ""
    """What the observation means, and what was wrong with it if anything."""


class RdmaFabric(Strict):
    """The high-speed network of a cluster's GPU nodes."""

    link_layer: LinkLayer
    """roce-v2 (Ethernet) or infiniband."""
    nic: str
    """Adapter model, for the record."""
    link_gbps: int = Field(strict=True, gt=0, le=10_000)
    """Line rate of one port in Gb/s."""
    devices: list[str] = Field(min_length=1, max_length=MAX_DEVICES)
    """RDMA devices (ports) the stack treats as live on every GPU node: the list static checks use."""
    device_observations: list[DeviceObservation] = Field(default=[], max_length=MAX_OBSERVATIONS)
    """Every device list the seeds report, including the ones the stack does not use, and why."""
    attachments: list[SriovAttachment] = Field(default=[], max_length=MAX_ATTACHMENTS)
    """SR-IOV attachments in interface order. Empty where RDMA devices reach the pod another way."""
    nad_source_namespace: K8sName = "default"
    """Where the SR-IOV operator creates the NADs."""
    nad_mode: Literal["copy", "reference"] = "copy"
    """copy: a NAD per user namespace that runs RDMA pods, with the source's config (the seeds' way);
    reference: pods name `default/NAME` and no copies are made (OpenShift allows NADs of `default`)."""
    device_access: Literal["sriov", "privileged"] = "sriov"
    """How /dev/infiniband reaches the container: SR-IOV device plugin resources, or a privileged
    container that sees the host's devices."""
    static_hca: bool = False
    """Pin NCCL_IB_HCA to `devices` in the rendered environment. Off: the launcher detects the ACTIVE
    ports behind the pod's interfaces, which is right on nodes whose device names differ."""
    gid_index: int | None = Field(strict=True, default=None, ge=0, le=255)
    """Pin NCCL_IB_GID_INDEX. None: the launcher picks the RoCE v2 IPv4 index per port (and NCCL 2.21.5+
    does so itself). InfiniBand needs none."""
    gdr_level: GdrLevel = "SYS"
    """NCCL_NET_GDR_LEVEL (the seeds' legacy value 5 is SYS)."""

    @model_validator(mode="after")
    def _interfaces_in_order(self) -> RdmaFabric:
        expected = [f"net{i}" for i in range(1, len(self.attachments) + 1)]
        got = [a.interface for a in self.attachments]
        if got != expected:
            raise FieldError(
                ("attachments",), f"attachments must name interfaces {expected} in order (Multus numbers them that way), got {got}"
            )
        if self.device_access == "sriov" and not self.attachments:
            raise FieldError(("attachments",), "device_access 'sriov' needs at least one attachment")
        if len({a.network for a in self.attachments}) != len(self.attachments):
            raise FieldError(("attachments",), "a network is attached twice")
        if self.device_access == "sriov" and self.nad_mode == "copy":
            for i, a in enumerate(self.attachments):
                if not a.cni_config:
                    raise FieldError(
                        ("attachments", i, "cni_config"),
                        f"nad_mode 'copy' copies the source NAD's config: set cni_config (`oc get net-attach-def {a.network} -n "
                        f"{self.nad_source_namespace} -o jsonpath='{{.spec.config}}'`), or use nad_mode 'reference'",
                    )
        return self

    def port_count(self) -> int:
        """Ports a pod uses: one per attachment, or every live device where there are none."""
        return len(self.attachments) or len(self.devices)


# --- storage ----------------------------------------------------------------------------------


class StorageClass(Strict):
    """A storage class known to exist on the cluster, and what it provides."""

    name: ObjectName
    """The StorageClass name on the cluster."""
    access_modes: list[AccessMode] = Field(min_length=1, max_length=MAX_ACCESS_MODES)
    """Access modes it provides for filesystem volumes."""
    note: str = ""
    """Where the stack knows this from."""


class Volume(Strict):
    """A data volume (workspace, datasets). Never deleted by `pulumi destroy` or a rename."""

    COLLECTION: ClassVar[str] = "volumes"
    name: K8sName
    """PVC name (for per-pod volumes: the volumeClaimTemplate name; pods get NAME-WORKLOAD-ORDINAL)."""
    namespace: K8sName
    """Namespace of the PVC."""
    mount_path: MountPath
    """Where workloads mount it."""
    size: VolumeSize | None = None
    """Requested size (required unless the claim exists already)."""
    storage_class: ObjectName | None = None
    """Storage class. None leaves it to the cluster default, which the preflight flags."""
    shared: bool = True
    """True: one ReadWriteMany PVC every pod mounts. False: per-pod ReadWriteOnce claims
    (StatefulSet volumeClaimTemplates), for clusters without an RWX class."""
    existing: bool = False
    """The claim exists already (made by its owner): the stack mounts it, never creates, changes or
    deletes it; preview fails when it is missing. `shared` then says whether several pods may mount it."""

    @model_validator(mode="after")
    def _size_unless_existing(self) -> Volume:
        if self.size is None and not self.existing:
            raise FieldError(("size",), "a volume the stack creates needs a size (or set existing: true for a claim that exists)")
        if self.existing and not self.shared and self.size is None:
            pass  # an existing single-pod claim: mounted by one pod only (the preflight counts them)
        if self.mount_path in RESERVED_PATHS or self.mount_path.startswith(LAUNCHER_DIR + "/"):
            raise FieldError(
                ("mount_path",), f"{self.mount_path} is the program's own mount (/dev/shm, {LAUNCHER_DIR}): choose another path"
            )
        if problem := system_path_problem(self.mount_path):
            raise FieldError(("mount_path",), problem)
        if self.name in RESERVED_VOLUMES:
            raise FieldError(("name",), f"{self.name!r} is the name of a volume the program adds to every pod: choose another")
        return self


class PvcStorageClassFix(Strict):
    """A patch of an existing PVC that has no storage class (Cairo's NFS server root volume)."""

    namespace: K8sName
    """Namespace of the existing PVC."""
    pvc: K8sName
    """Name of the existing PVC."""
    storage_class: ObjectName
    """The storage class to set (must be in storage_classes)."""
    reason: Reason
    """Why, for the record and the preview."""
    serves_storage_classes: list[ObjectName] = Field(default=[], max_length=MAX_STORAGE_CLASSES)
    """Storage classes that work only once this claim is fixed (nfs-csi is served by the NFS server
    whose root volume this is): the stack's claims of those classes wait for the fix."""


# --- security ---------------------------------------------------------------------------------


class ServiceAccount(Strict):
    """A service account the training pods run as."""

    COLLECTION: ClassVar[str] = "security.service_accounts"
    name: K8sName
    """Service account name."""
    namespace: K8sName
    """Its namespace (one of namespaces)."""

    @field_validator("name")
    @classmethod
    def _not_openshifts(cls, value: str) -> str:
        if value in PROJECT_SERVICE_ACCOUNTS:
            raise ValueError(
                f"OpenShift creates service account {value!r} in every project{PROJECT_SERVICE_ACCOUNTS[value]}: a stack that "
                "declares it would take it over, and delete it on `pulumi destroy` from under everything that runs as it. "
                "Give the training pods their own (e.g. trainer-sa)"
            )
        return value


class Security(Strict):
    """The SCCs the training pods run under, and who may use them.

    A pod whose memlock strategy needs nothing (none, node-limit) runs non-root, with every
    capability dropped, under `unprivileged_scc` (restricted-v2, which every authenticated user may
    use). A pod that needs root with capabilities, or a privileged container, runs under `scc`."""

    scc: ObjectName | None = None
    """SCC of the pods that need root capabilities or privileged containers. Pods pin their SCC with
    the annotation openshift.io/required-scc. None: no pod of this stack needs one."""
    create: bool = False
    """True: the program creates `scc` (least privilege: drop ALL, add back only what the memlock
    strategies need). False: an SCC that exists on the cluster is referenced."""
    existing_allowed_capabilities: list[Capability] | None = Field(default=None, max_length=MAX_CAPABILITIES)
    """For an existing SCC: the capabilities it allows (None: every capability, as `privileged`)."""
    existing_allows_privileged: bool = False
    """For an existing SCC: whether it allows privileged containers."""
    existing_allows_root: bool = True
    """For an existing SCC: whether its runAsUser strategy admits uid 0 (RunAsAny)."""
    broad_grant_reason: Reason | None = None
    """Required when the SCC allows privileged containers: why the stack accepts it. Printed."""
    grant: bool = True
    """Bind `scc`'s `use` ClusterRole to the service accounts of the pods that run under it, in their
    namespaces (as `oc adm policy add-scc-to-user`)."""
    unprivileged_scc: ObjectName = "restricted-v2"
    """SCC of the pods that need no privilege (TCP, node-limit). Every authenticated user may use
    restricted-v2, so these pods need no grant."""
    service_accounts: list[ServiceAccount] = Field(default=[], max_length=MAX_SERVICE_ACCOUNTS)
    """Service accounts the program creates."""

    @model_validator(mode="after")
    def _safe_scc(self) -> Security:
        if self.create and self.scc in BUILTIN_SCCS:
            raise FieldError(
                ("create",),
                f"{self.scc!r} is an SCC OpenShift ships: a stack that creates it would own it and delete it on `pulumi destroy`, "
                "taking it from every user of the cluster. Reference it (create: false) or create an SCC with your own name",
            )
        if self.create and self.scc is None:
            raise FieldError(("scc",), "create: true needs the name of the SCC to create")
        if self.scc and not self.create and not self.broad_grant_reason and (broad := self.broad_grant()):
            raise FieldError(
                ("broad_grant_reason",),
                f"SCC {self.scc!r} allows {broad}: set broad_grant_reason to say why this stack accepts it, or use a "
                "least-privilege SCC (create: true, with a name of your own)",
            )
        return self

    def broad_grant(self) -> str:
        """What makes the existing `scc` a broad grant ("" when nothing does): privileged containers, hostPath volumes.
        Judged by OpenShift's own facts for an SCC it ships (OPENSHIFT_SCCS), by existing_allows_privileged otherwise."""
        facts = OPENSHIFT_SCCS.get(self.scc or "")
        if facts is None:
            return "privileged containers" if self.existing_allows_privileged else ""
        broad = ["privileged containers"] * facts.privileged + ["hostPath volumes (the node's file system)"] * facts.host_paths
        return " and ".join(broad) + (f" (OpenShift ships {self.scc!r} so)" if broad else "")


class NamespacedName(Strict):
    """An object the stack relies on but does not own."""

    namespace: K8sName
    """Its namespace."""
    name: K8sName
    """Its name."""


class ExistingObjects(Strict):
    """Objects made by their owners that workloads use (a token Secret, a ConfigMap made with
    `oc create configmap --from-file`, an ImageStream another project builds). The stack never creates
    or changes them; preview reads each one and fails, naming it, when it is missing."""

    secrets: list[NamespacedName] = Field(default=[], max_length=MAX_EXISTING)
    """Secrets workloads read environment from (their values never enter the config)."""
    config_maps: list[NamespacedName] = Field(default=[], max_length=MAX_EXISTING)
    """ConfigMaps workloads mount as scripts."""
    image_streams: list[NamespacedName] = Field(default=[], max_length=MAX_EXISTING)
    """ImageStreams whose images workloads pull from the internal registry."""


class ScriptConfigMap(Strict):
    """A ConfigMap of scripts the stack ships (training scripts, shell wrappers)."""

    COLLECTION: ClassVar[str] = "scripts"
    name: K8sName
    """ConfigMap name."""
    namespace: K8sName
    """Its namespace."""
    files: dict[FileKey, Text] = Field(min_length=1, max_length=MAX_SCRIPT_FILES)
    """File name -> content."""
    source: str = ""
    """Where the script comes from."""


class ImageBuild(Strict):
    """An image the stack builds on the cluster: an ImageStream and a BuildConfig (Docker strategy,
    inline Dockerfile) in `namespace`; pods reference it through the internal registry."""

    COLLECTION: ClassVar[str] = "images"
    name: K8sName
    """ImageStream and BuildConfig name."""
    namespace: K8sName
    """Where it is built."""
    tag: str = Field(default="latest", pattern=_TAG.pattern)
    """The tag the build pushes."""
    dockerfile: Text = Field(min_length=1)
    """The Dockerfile (FROM ... and what it installs). RDMA workloads need rdma-core and libibverbs in it."""
    source: str = ""
    """Where the recipe comes from."""

    @property
    def reference(self) -> str:
        return f"{INTERNAL_REGISTRY}/{self.namespace}/{self.name}:{self.tag}"


class NodeLevel(Strict):
    """Node-level objects a cluster admin applies: MachineConfigs for a machine config pool. Each
    one reboots every node of the pool, one at a time; both are off by default."""

    pool: K8sName = "worker"
    """The pool (machineconfiguration.openshift.io/role) of the GPU nodes."""
    crio_memlock_unlimited: bool = False
    """Write /etc/crio/crio.conf.d/99-memlock with default_ulimits memlock=-1:-1: the node-limit strategy
    (KNOWLEDGE.md): every container may pin memory, root or not, with no capability."""
    iommu_passthrough: bool = False
    """Kernel argument iommu=pt (IOMMU passthrough for GPUDirect RDMA; KNOWLEDGE.md ties IBV_WC_LOC_PROT_ERR
    to ACS/IOMMU)."""
    reason: OptionalReason = ""
    """Why the stack asks for them (printed; "": not given, not whitespace)."""
    control_plane_reason: Reason | None = None
    """Required when `pool` is a control-plane pool (master, control-plane, arbiter): each MachineConfig drains and
    reboots the API server's nodes one by one. Right only where they are the GPU nodes too (a compact cluster)."""

    @model_validator(mode="after")
    def _not_the_control_plane(self) -> NodeLevel:
        if self.pool in CONTROL_PLANE_POOLS and not self.control_plane_reason:
            raise FieldError(
                ("pool",),
                f"{self.pool!r} is the control plane's pool: its MachineConfigs would drain and reboot the API server's nodes one "
                "by one. Name the GPU nodes' pool (`oc get machineconfigpool`, usually worker or a gpu pool), or set "
                "node_level.control_plane_reason if the control-plane nodes really are the GPU nodes (a compact cluster)",
            )
        return self


# --- workloads --------------------------------------------------------------------------------


class Mount(Strict):
    """A volume a workload mounts."""

    volume: K8sName
    """Name of a Volume of the stack in the workload's namespace."""
    mount_path: MountPath | None = None
    """Overrides the volume's mount path."""
    read_only: bool = False
    """Mount it read-only."""


class ScriptMount(Strict):
    """A ConfigMap of scripts a workload mounts (one of `scripts`, or an existing one)."""

    config_map: K8sName
    """ConfigMap name."""
    mount_path: MountPath = "/scripts"
    """Where its files appear."""


class SecretKeyRef(Strict):
    """One key of a Secret (declared in existing.secrets): its value never enters the config."""

    secret: K8sName
    """Secret name, in the workload's namespace."""
    key: FileKey
    """Key in the Secret."""


class ContainerPort(Strict):
    """A port the training container serves (developer tools)."""

    name: PortName
    """Port name (at most 15 characters), e.g. code-server, jupyter, tensorboard, debugpy."""
    port: Port
    """Container port."""
    route: bool = False
    """Expose it outside the cluster: a Service port plus an OpenShift Route (edge TLS) to rank 0's pod.
    Off: reachable with `oc port-forward` only (right for debugpy)."""
    route_reason: Reason | None = None
    """Required to route a debugger's port (named debugpy, or port 5678): why it is exposed outside the cluster, where
    whoever reaches it runs any code in the pod. Printed with every check."""

    @model_validator(mode="after")
    def _reason_of_a_routed_debugger(self) -> ContainerPort:
        # A reason nothing needs would outlive what it accepted (as a stale accepted warning would).
        if self.route_reason is not None and not (self.route and (self.name in DEBUGGER_PORT_NAMES or self.port in DEBUGGER_PORTS)):
            raise FieldError(
                ("route_reason",),
                "route_reason says why a debugger's port (debugpy, 5678) is routed; this port is "
                + ("not routed (route: false)" if not self.route else "not a debugger's")
                + ": remove it",
            )
        return self


class TcpVariant(Strict):
    """A TCP copy of an RDMA workload under another name (another image, say). It is an alternative:
    it runs only when its own state says so, and never beside its source unless `alongside` says so."""

    COLLECTION: ClassVar[str] = "tcp_variants"
    name: WorkloadName
    """Name of the TCP copy (its own object and pod names)."""
    image: ImageRef | None = None
    """Another image, e.g. a newer PyTorch."""
    state: State = "stopped"
    """running or stopped (default: stopped)."""
    alongside: bool = False
    """Allow it to run while its source runs (two deployments at once)."""


class Workload(Strict):
    """One training or development deployment."""

    COLLECTION: ClassVar[str] = "workloads"
    name: WorkloadName
    """Object name; pods are NAME-0, NAME-1, ... (a Job's pods NAME-rRUN-INDEX)."""
    namespace: K8sName
    """Namespace it runs in (one of namespaces)."""
    user: str
    """Who runs it."""
    source: str = ""
    """The seed manifest or fact it comes from."""
    kind: WorkloadKind = "statefulset"
    """statefulset: long-lived (development pods, interactive training), restarts and survives node
    reboots; one or more nodes. job: runs to completion once per run_number."""
    state: State = "running"
    """running, or stopped: a StatefulSet at 0 replicas (its claims and Services stay); a Job not declared
    (stopping a running Job ends its run; starting it creates it from the config of that moment)."""
    run_number: int = Field(strict=True, default=1, ge=1, le=999_999)
    """Jobs: the run. The Job is named NAME-rRUN_NUMBER: raise it to run the training again (a new Job).
    Nothing else re-runs it: an existing Job never takes a change of its template (it waits for the next run)."""
    image: ImageRef
    """Container image; it needs python3 (the launcher) and, for torchrun, PyTorch."""
    service_account: K8sName
    """Service account of the pods (listed in security.service_accounts, same namespace)."""
    service_account_token: bool = False
    """Mount the service account's API token in the pods (off: training pods never call the API)."""
    nodes: int = Field(strict=True, default=1, ge=1, le=MAX_NODES)
    """Pods, one per node."""
    gpus_per_node: int = Field(strict=True, ge=1, le=MAX_GPUS)
    """GPUs each pod requests (and processes torchrun starts per pod)."""
    node_set: K8sName | None = None
    """Which node set the pods run on (None: the first of node_sets)."""
    tolerations: list[Toleration] = Field(default=[], max_length=MAX_TOLERATIONS)
    """Taints tolerated besides the stack's gpu_tolerations."""
    node_selector: dict[LabelKey, LabelValue] = Field(default={}, max_length=MAX_SELECTOR)
    """Node labels required besides the stack's gpu_node_selector."""
    transport: Transport
    """rdma: NCCL over the cluster's fabric; tcp: NCCL over sockets (NCCL_IB_DISABLE=1). Switching it
    updates the same workload."""
    memlock: MemlockStrategy | None = None
    """How an RDMA pod gets to pin memory (KNOWLEDGE.md). None: the stack default for the transport."""
    privileged_reason: Reason | None = None
    """Required when the memlock strategy is privileged: why this workload needs a privileged container."""
    tcp_fallback: bool = False
    """In RDMA mode with no ACTIVE port, start over TCP (loudly) instead of failing."""
    launcher_strict: bool = False
    """Stop the pod when an NCCL setting inherited from the image would break NCCL (a wrong device, interface or
    GID index), instead of overriding it. Harmless ones (RDMA-only settings in TCP mode) are overridden either way."""
    cpu: Cpu = "32"
    """CPU request of each pod."""
    cpu_limit: Cpu | None = None
    """CPU limit (None: the request)."""
    memory: Memory = "256Gi"
    """Memory request of each pod."""
    memory_limit: Memory | None = None
    """Memory limit (None: the request). The launcher's pinning proof and /dev/shm count against it."""
    shm_size: ShmSize = "32Gi"
    """Size of /dev/shm (a memory emptyDir; counts against the memory limit)."""
    mounts: list[Mount] = Field(default=[], max_length=MAX_MOUNTS)
    """Volumes of the stack every pod mounts."""
    scripts: list[ScriptMount] = Field(default=[], max_length=MAX_SCRIPT_MOUNTS)
    """ConfigMaps of scripts every pod mounts."""
    ports: list[ContainerPort] = Field(default=[], max_length=MAX_PORTS)
    """Ports besides the rendezvous port (code-server, Jupyter, TensorBoard, debugpy); at most 16 (MAX_PORTS)."""
    run: Literal["torchrun", "command"] = "command"
    """torchrun: the launcher execs torchrun with the rendezvous settings and `args`;
    command: it execs `args` as given (interactive pods: sleep infinity)."""
    args: list[str] = Field(default=["sleep", "infinity"], min_length=1, max_length=MAX_ARGS)
    """The torchrun script and its arguments, or the whole command (see run)."""
    working_dir: MountPath | None = None
    """Working directory of the command."""
    master_port: Port = 29500
    """Rendezvous port on pod 0 (the headless Service exposes it)."""
    env: dict[EnvName, str] = Field(default={}, max_length=MAX_ENV)
    """Explicit environment (NCCL_* here wins over the stack's and over detection)."""
    secret_env: dict[EnvName, SecretKeyRef] = Field(default={}, max_length=MAX_SECRET_ENV)
    """Environment from Secrets (declared in existing.secrets), e.g. HF_TOKEN from hf-secret."""
    deepspeed_hostfile: MountPath | None = None
    """Write a DeepSpeed hostfile here at start (one line `POD.SERVICE slots=GPUS` per pod)."""
    backoff_limit: int = Field(strict=True, default=0, ge=0, le=100)
    """Jobs: retries of a failed pod before the Job fails."""
    tcp_variants: list[TcpVariant] = Field(default=[], max_length=MAX_TCP_VARIANTS)
    """TCP copies derived from this definition (alternatives, stopped unless they say otherwise); at most 8 (MAX_TCP_VARIANTS)."""

    @field_validator("kind", mode="before")
    @classmethod
    def _no_bare_pods(cls, value: Any) -> Any:
        if value == "pod":
            raise ValueError(
                "kind 'pod' is gone: a bare Pod stays Failed after one crash or node reboot and almost any edit replaces it. "
                "Use kind statefulset with nodes 1 (it restarts, survives reboots and rolls on change)"
            )
        return value

    @field_validator("args")
    @classmethod
    def _args_text(cls, value: list[str]) -> list[str]:
        for a in value:
            if "\x00" in a or len(a) > 16384:
                raise ValueError("an argument holds a NUL byte or is longer than 16384 characters")
        return value

    @field_validator("env", "secret_env")
    @classmethod
    def _not_the_launchers(cls, value: dict[str, Any]) -> dict[str, Any]:
        for k, v in value.items():
            if k.startswith(RESERVED_ENV_PREFIX) or k in RESERVED_ENV:
                raise FieldError(
                    (k,),
                    f"{k} is set by the program for the launcher (its contract: LAUNCHER_*, {', '.join(sorted(RESERVED_ENV))}): "
                    "change the workload's fields instead",
                )
            if isinstance(v, str) and ("\x00" in v or len(v) > 65536):
                raise FieldError((k,), f"the value of {k} holds a NUL byte or is longer than 65536 characters")
            if k == "PYTHONHOME":
                raise FieldError(
                    (k,),
                    "PYTHONHOME replaces the image's Python installation for the Python the launcher execs (torchrun, the "
                    "command): it stops at start with 'Fatal Python error: init_fs_encoding'. Remove it; to use another "
                    "interpreter, name it in args (e.g. /opt/conda/bin/python)",
                )
            if isinstance(v, str) and (m := _SHELL_PATH.search(v)):
                name = m.group(1) or m.group(2)
                raise FieldError(
                    (k,),
                    f"the value of {k} holds {m.group(0)}, which Kubernetes never expands (nor does it see the image's {name}): "
                    f"the process would get the text {m.group(0)}. Write the whole value (`oc run --rm -it --image IMAGE -- "
                    f"printenv {name}` shows the image's), or extend it in a shell command "
                    f'(run: command, args: ["bash", "-c", "export {name}=...:${name}; exec ..."])',
                )
            if isinstance(v, str) and (size := len(f"{k}={v}".encode("utf-8", "surrogatepass")) + 1) > EXEC_STRING_MAX:
                raise FieldError(
                    (k,),
                    f"{k}=... is {size} bytes: the kernel passes at most {EXEC_STRING_MAX} bytes per environment string "
                    "(MAX_ARG_STRLEN), so exec fails with 'Argument list too long'. Put the text in a file (scripts) and pass its path",
                )
        return value

    @model_validator(mode="after")
    def _dollars(self) -> Workload:
        """`$(NAME)` of a pod variable is ambiguous (see kubelet_escape): refused, in env values and in args."""
        own = [*self.env, *self.secret_env]
        for k, v in self.env.items():
            if problem := _dollar_problem(v, own, f"the value of {k}"):
                raise FieldError(("env", k), problem)
        for i, a in enumerate(self.args):
            if problem := _dollar_problem(a, own, "an argument"):
                raise FieldError(("args", i), problem)
        launcher_args = len("LAUNCHER_ARGS=" + json.dumps(self.args)) + 1
        if launcher_args > EXEC_STRING_MAX:
            raise FieldError(
                ("args",),
                f"the arguments take {launcher_args} bytes as the launcher's LAUNCHER_ARGS (JSON): the kernel passes at most "
                f"{EXEC_STRING_MAX} bytes per environment string (MAX_ARG_STRLEN), so the pod fails with 'Argument list too "
                "long'. Put long text in a script (scripts) and pass its path",
            )
        return self

    @model_validator(mode="after")
    def _shape(self) -> Workload:
        if self.tcp_variants and self.transport != "rdma":
            raise FieldError(("tcp_variants",), "tcp_variants derive from an RDMA workload; this one is already TCP")
        both = set(self.env) & set(self.secret_env)
        if both:
            raise FieldError(("secret_env",), f"{', '.join(sorted(both))} set in env and in secret_env: keep one")
        _check_name_lengths(self.name, self.kind, self.nodes, self.run_number, ("name",))
        _check_pod_paths(self, ("mounts",))
        names = [p.name for p in self.ports]
        if len(set(names)) != len(names) or "rendezvous" in names:
            raise FieldError(("ports",), "port names must be unique and not 'rendezvous' (the program's own port)")
        numbers = [p.port for p in self.ports] + [self.master_port]
        if len(set(numbers)) != len(numbers):
            raise FieldError(("ports",), "a port number is used twice (master_port counts)")
        if self.cpu_limit is not None and quantity_value(self.cpu_limit) < quantity_value(self.cpu):
            raise FieldError(("cpu_limit",), f"cpu_limit {self.cpu_limit} is below the request {self.cpu}: the API server rejects it")
        if self.memory_limit is not None and quantity_value(self.memory_limit) < quantity_value(self.memory):
            raise FieldError(
                ("memory_limit",), f"memory_limit {self.memory_limit} is below the request {self.memory}: the API server rejects it"
            )
        return self

    @property
    def mem_limit(self) -> str:
        return self.memory_limit or self.memory

    @property
    def cpu_limit_value(self) -> str:
        return self.cpu_limit or self.cpu

    @property
    def object_name(self) -> str:
        """The StatefulSet's or Job's name: a Job carries its run number."""
        return f"{self.name}-r{self.run_number}" if self.kind == "job" else self.name


def _check_name_lengths(name: str, kind: str, nodes: int, run_number: int, where: tuple[str | int, ...]) -> None:
    """The names the program derives from a workload's name stay within the API server's limits."""
    if len(name) > 63 - len("-headless"):
        raise FieldError(where, f"{name!r} is too long: its Service {name}-headless would exceed 63 characters (use at most 54)")
    if kind == "statefulset" and len(name) > 52:
        # The controller labels each pod with controller-revision-hash NAME-<10 characters>, a label value of at most 63.
        raise FieldError(where, f"{name!r} is too long for a StatefulSet: at most 52 characters, or its pods are never created")
    if kind == "job":
        hostname = f"{name}-r{run_number}-{nodes - 1}"
        if len(hostname) > 63:
            raise FieldError(where, f"{name!r} is too long: the Job's pod hostname {hostname} would exceed 63 characters")


def _check_pod_paths(w: Any, where: tuple[str | int, ...]) -> None:
    """No mount takes the program's own paths, and nothing is mounted twice. (Two mounts on one path are
    found by the stack-wide check, which knows the paths mounts take from their volumes.)"""
    for p in [m.mount_path for m in w.mounts if m.mount_path] + [s.mount_path for s in w.scripts]:
        if p in RESERVED_PATHS or p.startswith(LAUNCHER_DIR + "/"):
            raise FieldError(where, f"{p} is the program's own mount (/dev/shm, {LAUNCHER_DIR}): choose another path")
    placed = [(("mounts", k, "mount_path"), m.mount_path) for k, m in enumerate(w.mounts) if m.mount_path]
    placed += [(("scripts", k, "mount_path"), s.mount_path) for k, s in enumerate(w.scripts)]
    for field, p in placed:
        if problem := system_path_problem(p):
            raise FieldError(field, problem)
    volumes = [m.volume for m in w.mounts]
    if len(set(volumes)) != len(volumes):
        raise FieldError(where, "a volume is mounted twice")
    maps = [s.config_map for s in w.scripts]
    if len(set(maps)) != len(maps):
        raise FieldError(("scripts",), "a ConfigMap is mounted twice")


# Characters of the digest in a check's Job name (components/bandwidth.py).
CHECK_DIGEST = 6
# Where a pod finds components/launcher/bandwidth.py: the launcher ConfigMap, which carries every
# module of components/launcher/, is mounted at /opt/launcher (components/training.py).
BANDWIDTH_BENCH = f"{LAUNCHER_DIR}/bandwidth.py"


class BandwidthCheck(Strict):
    """An all-reduce benchmark that gates the rollout: an Indexed Job with exactly the pods of a
    training workload of the same transport (networks, SR-IOV resources, SCC, memlock strategy,
    launcher). When enabled it runs before the workloads of its transport (they depend on it), with a
    deadline; it fails, and so stops `pulumi up` before training starts, when the bus bandwidth at the
    largest message size is below `min_fraction` of the line rate or when NCCL used sockets in RDMA
    mode. It runs again when run_number or the fabric config changes (the Job's name carries both).

    Its pods take whole nodes: the preflight counts them with the running workloads, so an enabled
    check always finds free nodes. Read a saved log with `python -m stacks bandwidth-report`."""

    COLLECTION: ClassVar[str] = "bandwidth_checks"
    name: WorkloadName
    """Name of the check; its Job is NAME-<digest of the fabric and the check>, its pods NAME-<digest>-INDEX."""
    namespace: K8sName
    """Namespace it runs in (one of namespaces)."""
    enabled: bool = True
    """Deploy and run it. Off: nothing of it is deployed, and nothing waits for it."""
    run_number: int = Field(strict=True, default=1, ge=1, le=999_999)
    """Raise it to run the check again with nothing else changed."""
    service_account: K8sName
    """Service account of the pods (listed in security.service_accounts, same namespace)."""
    image: ImageRef
    """A PyTorch image (tool torch) or one with nccl-tests' all_reduce_perf on PATH (tool nccl-tests)."""
    nodes: int = Field(strict=True, default=2, ge=1, le=MAX_NODES)
    """Pods, one per node. Two or more measure the fabric between nodes. One node measures its own
    NICs: the check then disables NCCL's NVLink/PCIe (P2P) and shared-memory transports
    (NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1), so that every hop goes through the network."""
    gpus_per_node: int = Field(strict=True, ge=1, le=MAX_GPUS)
    """GPUs each pod requests; one benchmark process per GPU."""
    node_set: K8sName | None = None
    """Which node set it runs on (None: the first of node_sets)."""
    transport: Transport
    """rdma: fail unless NCCL used InfiniBand/RoCE (never sockets). tcp: fail if NCCL used IB."""
    tool: BandwidthTool = "auto"
    """torch: a torch.distributed all_reduce loop started by torchrun on every node (the launcher's
    bandwidth.py; its table has the nccl-tests format). nccl-tests: all_reduce_perf in one process
    over the node's GPUs; it needs `nodes: 1`, because all_reduce_perf spans hosts only under MPI
    (mpirun), which this program does not deploy. auto: nccl-tests on one node where the image has
    all_reduce_perf, torch otherwise."""
    min_fraction: float = Field(default=0.8, gt=0, le=1)
    """Pass when the bus bandwidth at the largest message size is at least this fraction of the line rate."""
    line_rate_gbps: float | None = Field(default=None, gt=0, le=1_000_000)
    """The line rate in Gb/s the bus bandwidth is held against. None: from the fabric for rdma (see
    ClusterConfig.bandwidth_line_rate_gbps); for tcp the seeds give no line rate, so a tcp check
    without this value reports the bandwidth without a threshold (it fails only on errors)."""
    min_bytes: int = Field(strict=True, default=1024 * 1024, ge=4, le=64 * GIB)
    """Smallest message in bytes (all_reduce_perf -b); sizes double up to max_bytes."""
    max_bytes: int = Field(strict=True, default=1024 * 1024 * 1024, ge=4, le=64 * GIB)
    """Largest message in bytes (all_reduce_perf -e): its bus bandwidth decides the verdict, so make
    it large enough to leave the latency-bound range (hundreds of MiB and up)."""
    iterations: int = Field(strict=True, default=20, ge=1, le=100_000)
    """Timed all-reduces per message size (all_reduce_perf -n)."""
    warmup_iterations: int = Field(strict=True, default=5, ge=0, le=100_000)
    """Untimed all-reduces before them (all_reduce_perf -w)."""
    memlock: MemlockStrategy | None = None
    """How the pods get to pin memory, as a workload's: None takes the cluster default for the transport."""
    privileged_reason: Reason | None = None
    """Required when the memlock strategy is privileged: why the check needs a privileged container."""
    env: dict[EnvName, str] = Field(default={}, max_length=MAX_ENV)
    """Extra environment (NCCL_* here wins over the rendered values)."""
    cpu: Cpu = "16"
    """CPU request and limit of each pod."""
    memory: Memory = "64Gi"
    """Memory request and limit of each pod."""
    shm_size: ShmSize = "16Gi"
    """Size of /dev/shm (a memory emptyDir; counts against the memory limit)."""
    master_port: Port = 29500
    """Rendezvous port on pod 0 (the headless Service exposes it)."""
    deadline_minutes: int = Field(strict=True, default=30, ge=1, le=7 * 24 * 60)
    """activeDeadlineSeconds of the Job: Pending time for free GPUs counts. `pulumi up` waits a little
    longer than this for the verdict, then fails."""

    @field_validator("env")
    @classmethod
    def _not_the_launchers(cls, value: dict[str, str]) -> dict[str, str]:
        return Workload._not_the_launchers(value)  # the same rule as a workload's env

    @model_validator(mode="after")
    def _dollars(self) -> BandwidthCheck:
        for k, v in self.env.items():
            if problem := _dollar_problem(v, self.env, f"the value of {k}"):
                raise FieldError(("env", k), problem)
        return self

    @model_validator(mode="after")
    def _shape(self) -> BandwidthCheck:
        if self.min_bytes > self.max_bytes:
            raise FieldError(("min_bytes",), f"min_bytes ({self.min_bytes}) is larger than max_bytes ({self.max_bytes})")
        if self.tool == "nccl-tests" and self.nodes != 1:
            raise FieldError(
                ("tool",),
                "tool 'nccl-tests' runs all_reduce_perf on one node (it spans hosts only under mpirun, which this "
                "program does not deploy): set nodes to 1, or use tool 'torch' (or 'auto') across nodes",
            )
        hostname = f"{self.name}-{'x' * CHECK_DIGEST}-{self.nodes - 1}"
        if len(hostname) > 63 or len(self.name) > 63 - len("-headless"):
            raise FieldError(
                ("name",), f"{self.name!r} is too long: the check's pod hostnames (NAME-DIGEST-INDEX) would exceed 63 characters"
            )
        return self


class Defaults(Strict):
    """Cluster-wide defaults of workloads that do not set their own."""

    memlock_rdma: MemlockStrategy = "root-ipc-lock"
    """Memlock strategy of RDMA workloads that do not name one."""
    memlock_tcp: MemlockStrategy = "none"
    """Memlock strategy of TCP workloads that do not name one."""
    tcp_socket_ifname: str = Field(default="^lo,docker0", min_length=1, max_length=256)
    """NCCL_SOCKET_IFNAME for TCP workloads (the seeds' value)."""
    pin_bytes: int = Field(strict=True, default=256 * MIB, gt=8 * MIB, le=16 * GIB)
    """Size of the buffer the launcher pins to prove memory locking works (must exceed 8 MiB, and stay
    below every RDMA pod's memory limit with room for the process itself)."""
    nccl_env_rdma: dict[EnvName, str] = Field(default={}, max_length=MAX_ENV)
    """NCCL tuning of every RDMA pod (NCCL_IB_TIMEOUT, NCCL_MIN_NCHANNELS, ...); a workload's env wins."""
    nccl_env_tcp: dict[EnvName, str] = Field(default={}, max_length=MAX_ENV)
    """NCCL tuning of every TCP pod (NCCL_P2P_LEVEL, ...); a workload's env wins."""


class HandMade(Strict):
    """An object that exists on the cluster because someone made it by hand (the seeds' `oc create`, `oc adm
    policy`, `oc apply`), which the stack now declares: `python -m stacks import-plan` adopts it instead of
    letting `pulumi up` fail on AlreadyExists."""

    kind: str = Field(pattern=r"^[A-Z][A-Za-z]+$")
    """Its kind, e.g. ServiceAccount, RoleBinding, SecurityContextConstraints."""
    name: str = Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$")
    """Its name (RoleBindings made by `oc adm policy` are named system:openshift:scc:SCC)."""
    namespace: K8sName | None = None
    """Its namespace (none for cluster-scoped objects)."""
    source: Reason
    """Who made it, and where that is recorded."""


class AcceptedWarning(Strict):
    """A preflight warning this stack accepts knowingly. `python -m stacks check` counts it (`-v` prints it with the
    reason); an acceptance that matches no finding is reported, so they do not go stale."""

    rule: str = Field(min_length=1, max_length=64)
    """The rule id (python -m stacks check prints it)."""
    object: str = Field(min_length=1, max_length=512)
    """The object as the finding names it (`StatefulSet nccl-test/h-kim`); `*` matches any run of characters."""
    value: str | None = Field(default=None, min_length=1, max_length=1024)
    """The value it accepts, for a warning about one (an `image` warning's image, written whole): required there, and
    matched exactly, so a changed value (a new tag, a copied module's new image) is warned about again, and this entry
    is reported as no longer matching. The check's `accepted-warnings` finding names the value to write."""
    reason: Reason
    """Why the stack accepts it."""


class ClusterConfig(Strict):
    """One OpenShift cluster: one Pulumi stack (or two, when its platform and project parts are run by
    different people; see docs/deploy.md "Pulumi stacks, tiers and rights")."""

    name: K8sName
    """Stack name: the module clusters/NAME.py and the Pulumi stack NAME."""
    description: str
    """What the cluster is, in a sentence."""
    api_host: str | None = None
    """API server host, where known."""
    openshift_version: str = "4.17"
    """OpenShift version, for the record."""
    gpu_model: str
    """GPU model of the GPU nodes, for the record."""
    node_sets: list[NodeSet] = Field(min_length=1, max_length=MAX_NODE_SETS)
    """The GPU nodes the stack counts on. Every running pod of the stack must fit on them at once. At most 4096 nodes
    in all (MAX_CLUSTER_NODES)."""
    gpu_tolerations: list[Toleration] = Field(default=[], max_length=MAX_TOLERATIONS)
    """Taints of the GPU nodes that every GPU pod of this cluster tolerates."""
    gpu_node_selector: dict[LabelKey, LabelValue] = Field(default={}, max_length=MAX_SELECTOR)
    """Node labels every GPU pod requires (e.g. nvidia.com/gpu.present: "true")."""
    fabric: RdmaFabric | None = None
    """None: no RDMA (TCP only)."""
    storage_classes: list[StorageClass] = Field(default=[], max_length=MAX_STORAGE_CLASSES)
    """Storage classes known to exist."""
    namespaces: list[K8sName] = Field(min_length=1, max_length=MAX_NAMESPACES)
    """User namespaces (OpenShift projects) the stack deploys into. They exist already: creating a
    project is the users' or admins' business, not this program's (preview reads each one)."""
    security: Security = Security()
    """The SCCs the training pods run under and who may use them."""
    defaults: Defaults = Defaults()
    """Defaults of workloads that do not set their own."""
    volumes: list[Volume] = Field(default=[], max_length=MAX_VOLUMES)
    """Data volumes (PVCs) the workloads mount."""
    pvc_fixes: list[PvcStorageClassFix] = Field(default=[], max_length=MAX_PVC_FIXES)
    """Storage classes to set on PVCs that exist already without one."""
    existing: ExistingObjects = ExistingObjects()
    """Objects workloads use that their owners made (preview checks they exist)."""
    scripts: list[ScriptConfigMap] = Field(default=[], max_length=MAX_SCRIPTS)
    """ConfigMaps of scripts the stack ships."""
    images: list[ImageBuild] = Field(default=[], max_length=MAX_IMAGES)
    """Images the stack builds on the cluster (ImageStream + BuildConfig)."""
    node_level: NodeLevel = NodeLevel()
    """MachineConfigs for the GPU pool (cluster-admin; off by default; each reboots the pool's nodes)."""
    workloads: list[Workload] = Field(default=[], max_length=MAX_WORKLOADS)
    """Training and development deployments: at most 200, and at most 256 pod templates with their TCP variants and
    the bandwidth checks (MAX_POD_TEMPLATES)."""
    bandwidth_checks: list[BandwidthCheck] = Field(default=[], max_length=MAX_BANDWIDTH_CHECKS)
    """All-reduce benchmarks that gate the rollout of the workloads of their transport."""
    hand_made: list[HandMade] = Field(default=[], max_length=MAX_HAND_MADE)
    """Objects made by hand that the stack declares: candidates for `python -m stacks import-plan`."""
    accepted_warnings: list[AcceptedWarning] = Field(default=[], max_length=MAX_ACCEPTED_WARNINGS)
    """Preflight warnings this stack accepts, each with its reason."""
    notes: list[str] = Field(default=[], max_length=MAX_NOTES)
    """Contradictions between the sources and the choices the stack makes about them."""
    _volume_index: dict[tuple[str, str], Volume] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _references(self) -> ClusterConfig:
        _references(self)
        return self

    # Derived views. Kept as methods so the stored config stays exactly what was written.

    def all_workloads(self) -> list[Workload]:
        """The workloads with their TCP variants expanded (a variant follows its source)."""
        out: list[Workload] = []
        for w in self.workloads:
            out.append(w)
            for v in w.tcp_variants:
                out.append(
                    w.model_copy(
                        update={
                            "name": v.name,
                            "image": v.image or w.image,
                            "state": v.state,
                            "transport": "tcp",
                            "memlock": None,
                            "privileged_reason": None,
                            "tcp_fallback": False,
                            # RDMA-only NCCL settings name devices and interfaces a TCP pod lacks.
                            "env": {k: val for k, val in w.env.items() if not k.startswith(RDMA_ONLY_NCCL)},
                            "tcp_variants": [],
                            "source": f"{w.source} (TCP variant of {w.name})".strip(),
                        }
                    )
                )
        return out

    def located_workloads(self) -> list[tuple[tuple[str | int, ...], Workload]]:
        """all_workloads() with the config path of each: `("workloads", i)`, a variant `("workloads", i, "tcp_variants", j)`."""
        paths = [
            p
            for i, w in enumerate(self.workloads)
            for p in [("workloads", i), *(("workloads", i, "tcp_variants", j) for j in range(len(w.tcp_variants)))]
        ]
        return list(zip(paths, self.all_workloads(), strict=True))

    def running_workloads(self) -> list[Workload]:
        return [w for w in self.all_workloads() if w.state == "running"]

    def enabled_checks(self) -> list[BandwidthCheck]:
        return [c for c in self.bandwidth_checks if c.enabled]

    def pod_specs(self) -> list[Workload | BandwidthCheck]:
        """Everything that runs pods: workloads (any state: a stopped one may be started by a researcher
        without a cluster admin, so its grant and networks exist already) and enabled bandwidth checks."""
        return [*self.all_workloads(), *self.enabled_checks()]

    def node_set(self, name: str | None) -> NodeSet:
        """A node set by name (None: the first)."""
        if name is None:
            return self.node_sets[0]
        return next(s for s in self.node_sets if s.name == name)

    def bandwidth_line_rate_gbps(self, check: BandwidthCheck) -> float | None:
        """The line rate in Gb/s a check's bus bandwidth (nccl-tests' busbw) is held against.

        Across nodes a ring all-reduce moves 2(n-1)/n of the message through each node's NICs, the
        same factor busbw multiplies by, so busbw approaches the node's NIC bandwidth: the ports the
        check's GPUs drive (a GPU drives the port next to it, so at most one port per GPU) times
        link_gbps. Barcelona: 4 x 400 Gb/s = 1600 Gb/s = 200 GB/s. On one node with P2P and SHM
        disabled every ring hop goes out through a NIC, so busbw approaches one GPU's share of them.
        None for tcp unless the check names a rate: the sources give no Ethernet line rate."""
        if check.line_rate_gbps is not None:
            return check.line_rate_gbps
        if check.transport != "rdma" or self.fabric is None:
            return None
        node = float(min(self.fabric.port_count(), check.gpus_per_node) * self.fabric.link_gbps)
        return node if check.nodes > 1 else node / check.gpus_per_node

    def bandwidth_workload(self, check: BandwidthCheck) -> Workload:
        """The check as a workload: an Indexed Job whose pods are built like every training pod, so
        the measured network setup is exactly the training one. The launcher execs bandwidth.py's
        `check`, which starts the benchmark (torchrun or all_reduce_perf), reads its output and NCCL's
        INFO lines, prints the verdict and exits 1 on failure."""
        rate = self.bandwidth_line_rate_gbps(check)
        args = [
            "python3", BANDWIDTH_BENCH, "check",
            "--tool", check.tool,
            "--mode", check.transport,
            "--min-bytes", str(check.min_bytes),
            "--max-bytes", str(check.max_bytes),
            "--iters", str(check.iterations),
            "--warmup", str(check.warmup_iterations),
            "--min-fraction", f"{check.min_fraction:g}",
        ]  # fmt: skip
        if rate is not None:
            args += ["--line-rate-gbps", f"{rate:g}"]
        # INIT and NET are the subsystems that say which network NCCL chose and how each channel connects.
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
        if check.nodes == 1:
            env.update(NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1")
        env.update(check.env)
        # model_construct: the check was validated already (its Job is named by components/bandwidth.py).
        return Workload.model_construct(
            **{
                **{k: f.default for k, f in Workload.model_fields.items() if not f.is_required()},
                "name": check.name,
                "namespace": check.namespace,
                "user": "bandwidth check",
                "source": f"bandwidth check {check.name}",
                "kind": "job",
                "state": "running",
                "image": check.image,
                "service_account": check.service_account,
                "nodes": check.nodes,
                "gpus_per_node": check.gpus_per_node,
                "node_set": check.node_set,
                "transport": check.transport,
                "memlock": check.memlock,
                "privileged_reason": check.privileged_reason,
                "cpu": check.cpu,
                "memory": check.memory,
                "shm_size": check.shm_size,
                "run": "command",
                "args": args,
                "master_port": check.master_port,
                "env": env,
                "backoff_limit": 0,  # a failed measurement is the answer, not something to retry
            }
        )

    def memlock_of(self, w: Workload | BandwidthCheck) -> str:
        if w.memlock is not None:
            return w.memlock
        return self.defaults.memlock_rdma if w.transport == "rdma" else self.defaults.memlock_tcp

    def scc_of(self, w: Workload | BandwidthCheck) -> str:
        """The SCC a pod runs under: the stack's `scc` when its strategy needs root or privilege,
        the unprivileged one (restricted-v2) otherwise."""
        if self.memlock_of(w) in STRATEGY_NEEDS_SCC and self.security.scc:
            return self.security.scc
        return self.security.unprivileged_scc

    def volume(self, namespace: str, name: str) -> Volume:
        # Indexed once per config (it is immutable): every mount of every pod template looks its volume up, so a search
        # of the list each time was mounts x volumes. A missing volume is a KeyError, as it was a StopIteration.
        if self._volume_index is None:
            index: dict[tuple[str, str], Volume] = {}
            for v in self.volumes:
                index.setdefault((v.namespace, v.name), v)  # the first, as the search found (duplicates are refused)
            self._volume_index = index
        return self._volume_index[(namespace, name)]

    def storage_class(self, name: str | None) -> StorageClass | None:
        return next((s for s in self.storage_classes if s.name == name), None)


def _bounds(c: ClusterConfig) -> None:
    """The stack-wide bounds (MAX_CLUSTER_NODES, MAX_POD_TEMPLATES), checked before anything that grows with them. The
    error names the entry that crosses the bound, where the stack file writes it."""
    total = named = 0
    for i, s in enumerate(c.node_sets):
        total += s.size
        named += len(s.nodes)
        if named > MAX_NAMED_NODES:
            raise FieldError(
                ("node_sets", i, "nodes"),
                f"the node sets name {named} nodes up to {s.name!r}: at most {MAX_NAMED_NODES} in all (every pod template carries "
                "the names), the bound that keeps `python -m stacks check` fast. Give a larger set of interchangeable nodes as "
                "a count instead of names",
            )
        if total > MAX_CLUSTER_NODES:
            raise FieldError(
                ("node_sets", i, "nodes" if s.nodes else "count"),
                f"the node sets count {total} GPU nodes up to {s.name!r}: at most {MAX_CLUSTER_NODES} in all, the bound that keeps "
                "`python -m stacks check` fast. Count only the nodes this stack's pods may use",
            )
    templates: list[tuple[str | int, ...]] = []
    for i, w in enumerate(c.workloads):
        templates += [("workloads", i, "name"), *(("workloads", i, "tcp_variants", j, "name") for j in range(len(w.tcp_variants)))]
    templates += [("bandwidth_checks", i, "name") for i in range(len(c.bandwidth_checks))]
    if len(templates) > MAX_POD_TEMPLATES:
        raise FieldError(
            templates[MAX_POD_TEMPLATES],
            f"the stack declares {len(templates)} pod templates (workloads, their TCP variants and bandwidth checks, running or not): "
            f"at most {MAX_POD_TEMPLATES}, the bound that keeps `python -m stacks check` fast, and this is the first past it. Remove the "
            "TCP variants and workloads nobody runs any more, or split the stack",
        )


def _references(c: ClusterConfig) -> None:
    """Checks across the whole config. Each error carries the path of the offending field; every entry is checked, and
    the errors of all come together (FieldErrors), so a config with three bad namespaces hears of three."""
    _bounds(c)  # alone: past a bound, the checks below would be the slow part
    problems = _Problems()
    ns = set(c.namespaces)
    with problems.collect():
        if len(ns) != len(c.namespaces):
            raise FieldError(("namespaces",), "a namespace is listed twice (its objects would be declared twice)")
    seen: dict[tuple[str, str, str], tuple[str | int, ...]] = {}

    def unique(kind: str, namespace: str, name: str, path: tuple[str | int, ...]) -> None:
        first = seen.setdefault((kind, namespace, name), path)
        if first != path:
            raise FieldError(
                path,
                f"duplicate {kind} name {name!r} in namespace {namespace!r} (also {_where(first, c)}): names must be unique",
            )

    nad_source = c.fabric.nad_source_namespace if c.fabric else None

    def untouchable(path: tuple[str | int, ...], namespace: str) -> None:
        """A namespace no stack may touch: one error at the entry that names it."""
        if platform_namespace(namespace):
            raise FieldError(
                path,
                f"{namespace!r} is a namespace of the platform ({', '.join(PLATFORM_NAMESPACES)}): what a stack declares there it "
                "owns, and its `pulumi destroy` deletes it from under the cluster (an import would adopt the platform's own "
                "objects). Use the users' own projects",
            )
        if namespace == nad_source:
            raise FieldError(
                path,
                f"{namespace!r} holds the SR-IOV operator's NADs (fabric.nad_source_namespace): a NAD copy there would adopt the "
                "operator's own NAD, and `pulumi destroy` would delete it. Use the users' own projects",
            )

    for i, name in enumerate(c.namespaces):
        with problems.collect():
            untouchable(("namespaces", i), name)

    def in_namespaces(path: tuple[str | int, ...], what: str, namespace: str) -> None:
        if namespace not in ns:
            untouchable(path, namespace)  # the entry's own error, not "add it to namespaces"
            raise FieldError(path, f"{what} is in namespace {namespace!r}, which is not in namespaces")

    sets = {s.name for s in c.node_sets}
    with problems.collect():
        if len(sets) != len(c.node_sets):
            raise FieldError(("node_sets",), "two node sets share a name")
    all_nodes = [n for s in c.node_sets for n in s.nodes]
    with problems.collect():
        if len(set(all_nodes)) != len(all_nodes):
            raise FieldError(("node_sets",), "a node is in two node sets")
    with problems.collect():
        if sum(1 for s in c.node_sets if not s.nodes) > 1:
            raise FieldError(("node_sets",), "at most one node set of unnamed nodes (count): the scheduler cannot tell two apart")

    for i, sa in enumerate(c.security.service_accounts):
        with problems.collect():
            in_namespaces(("security", "service_accounts", i, "namespace"), f"service account {sa.name!r}", sa.namespace)
            unique("service account", sa.namespace, sa.name, ("security", "service_accounts", i, "name"))
    volumes: dict[tuple[str, str], Volume] = {}
    for i, v in enumerate(c.volumes):
        volumes.setdefault((v.namespace, v.name), v)  # known to its workloads even when wrong itself: one error per cause
        with problems.collect():
            in_namespaces(("volumes", i, "namespace"), f"volume {v.name!r}", v.namespace)
            unique("volume", v.namespace, v.name, ("volumes", i, "name"))
    classes = {s.name for s in c.storage_classes}
    for i, f in enumerate(c.pvc_fixes):
        with problems.collect():
            untouchable(("pvc_fixes", i, "namespace"), f.namespace)
        with problems.collect():
            for cls in f.serves_storage_classes:
                if cls not in classes:
                    raise FieldError(("pvc_fixes", i, "serves_storage_classes"), f"storage class {cls!r} is not in storage_classes")
    script_maps = set()
    for i, s in enumerate(c.scripts):
        script_maps.add((s.namespace, s.name))
        with problems.collect():
            in_namespaces(("scripts", i, "namespace"), f"ConfigMap {s.name!r}", s.namespace)
            unique("ConfigMap", s.namespace, s.name, ("scripts", i, "name"))
            if s.name == "gpu-training-launcher":
                raise FieldError(("scripts", i, "name"), "gpu-training-launcher is the program's own ConfigMap")
            total = sum(len(k) + len(t.encode("utf-8", "surrogatepass")) for k, t in s.files.items())
            if total > 1000 * 1024:
                raise FieldError(
                    ("scripts", i, "files"),
                    f"{total} bytes of keys and files: the API server refuses a ConfigMap over 1 MiB of data (and etcd a request over "
                    "1.5 MiB). Split the files over several entries of scripts, or put large files on a volume",
                )
    for i, b in enumerate(c.images):
        with problems.collect():
            in_namespaces(("images", i, "namespace"), f"image {b.name!r}", b.namespace)
            unique("image", b.namespace, b.name, ("images", i, "name"))
    existing = c.existing
    for field, what in (("secrets", "Secret"), ("config_maps", "ConfigMap"), ("image_streams", "image stream")):
        for i, o in enumerate(getattr(existing, field)):
            with problems.collect():
                in_namespaces(("existing", field, i, "namespace"), f"{what} {o.name!r}", o.namespace)
                unique(f"existing {what}", o.namespace, o.name, ("existing", field, i, "name"))
    built = {(b.namespace, b.name) for b in c.images}
    for field, what, declared, by in (
        ("config_maps", "ConfigMap", script_maps, "scripts"),
        ("image_streams", "ImageStream", built, "images"),
    ):
        for i, o in enumerate(getattr(existing, field)):
            with problems.collect():
                if (o.namespace, o.name) in declared or (field == "config_maps" and o.name == "gpu-training-launcher"):
                    owner = f"{by}[{o.name}]" if o.name != "gpu-training-launcher" else "the program (the launcher's ConfigMap)"
                    raise FieldError(
                        ("existing", field, i, "name"),
                        f"{what} {o.namespace}/{o.name} is created by this stack ({owner}) and listed as existing (made by its owner): "
                        "both cannot be true. Drop it from existing if the stack makes it, or rename the stack's own",
                    )
    maps = script_maps | {(o.namespace, o.name) for o in existing.config_maps}
    secrets = {(o.namespace, o.name) for o in existing.secrets}
    accounts = {(sa.namespace, sa.name) for sa in c.security.service_accounts}

    def pod_refs(what: str, src: tuple[str | int, ...], path: tuple[str | int, ...], w: Workload | BandwidthCheck) -> None:
        """What every pod-running entry (workload, TCP variant, bandwidth check) must reference: each independent fact
        reported on its own; the checks that build on the node set stop at the first."""
        # Outside a collect: an entry in a namespace the stack does not have is not checked further (what it mounts and
        # uses would all be "not in its namespace": one cause, one error).
        in_namespaces(src + ("namespace",), f"{what} {w.name!r}", w.namespace)
        with problems.collect():
            # A check's Job and Service are named as a workload's would be: one name space for both.
            unique("workload", w.namespace, w.name, path + ("name",))
        with problems.collect():
            if (w.namespace, w.service_account) not in accounts:
                raise FieldError(
                    src + ("service_account",),
                    f"{what} {w.name!r} uses service account {w.service_account!r}, which security.service_accounts does not list in "
                    f"namespace {w.namespace!r}",
                )
        with problems.collect():
            if w.transport == "rdma" and c.fabric is None:
                raise FieldError(
                    src + ("transport",), f"{what} {w.name!r} uses rdma, but the cluster has no fabric (set fabric, or transport: tcp)"
                )
        if w.node_set is not None and w.node_set not in sets:
            raise FieldError(src + ("node_set",), f"node set {w.node_set!r} is not in node_sets ({', '.join(sorted(sets))})")
        node_set = c.node_set(w.node_set)
        if w.gpus_per_node > node_set.gpus_per_node:
            raise FieldError(
                src + ("gpus_per_node",),
                f"{w.gpus_per_node} GPUs per pod, but the nodes of {node_set.name!r} have {node_set.gpus_per_node}: the pods never "
                "schedule. Spread the training over more nodes",
            )
        if w.nodes > node_set.size:
            raise FieldError(src + ("nodes",), f"{w.nodes} pods, one per node, but node set {node_set.name!r} has {node_set.size} node(s)")
        _fits_nodes(c, w, src, node_set)
        strategy = c.memlock_of(w)
        if strategy in STRATEGY_NEEDS_SCC and c.security.scc is None:
            raise FieldError(
                src + ("memlock",),
                f"memlock {strategy!r} needs an SCC that admits root with capabilities (or privileged containers): "
                "set security.scc (create: true makes a least-privilege one), or use memlock node-limit",
            )
        if strategy == "privileged" and not w.privileged_reason:
            raise FieldError(src + ("privileged_reason",), "memlock 'privileged' needs privileged_reason (it is printed)")
        if strategy in STRATEGY_RUNS_AS_ROOT or strategy == "privileged" or w.transport == "rdma":
            limit = quantity_value(w.mem_limit if isinstance(w, Workload) else w.memory)
            if w.transport == "rdma" and c.defaults.pin_bytes + 512 * MIB > limit:
                raise FieldError(
                    ("defaults", "pin_bytes"),
                    f"the launcher pins {c.defaults.pin_bytes} bytes to prove memory locking, but {what} {w.name!r} may use "
                    f"{limit} bytes in all: it would be OOM-killed at start. Lower pin_bytes or raise the memory limit "
                    "(leave 512Mi for the process)",
                )

    # all_workloads() lists each workload followed by its TCP variants: the same order as these paths.
    paths: list[tuple[tuple[str | int, ...], tuple[str | int, ...]]] = []
    for i, w in enumerate(c.workloads):
        paths.append((("workloads", i), ("workloads", i)))
        paths += [(("workloads", i), ("workloads", i, "tcp_variants", j)) for j in range(len(w.tcp_variants))]
    for (src, path), w in zip(paths, c.all_workloads(), strict=True):
        with problems.collect():
            pod_refs("workload", src, path, w)
            if path != src:  # a variant carries its own name: its derived names must fit too
                _check_name_lengths(w.name, w.kind, w.nodes, w.run_number, path + ("name",))
            for k, m in enumerate(w.mounts):
                mounted = volumes.get((w.namespace, m.volume))
                if mounted is None:
                    raise FieldError(
                        src + ("mounts", k, "volume"),
                        f"workload {w.name!r} mounts volume {m.volume!r}, which is not a volume in {w.namespace!r}",
                    )
                if not mounted.shared and w.kind == "job" and not mounted.existing:
                    raise FieldError(
                        src + ("mounts", k, "volume"),
                        f"volume {mounted.name!r} is per-pod (shared: false), which only a StatefulSet can make (volumeClaimTemplates): "
                        "a Job would mount a claim nobody creates. Use a shared volume",
                    )
                if mounted.existing and not mounted.shared and w.nodes > 1:
                    raise FieldError(
                        src + ("mounts", k, "volume"),
                        f"existing claim {mounted.name!r} is not shared (ReadWriteOnce) but {w.nodes} pods mount it: all but one "
                        "would stay ContainerCreating. Set shared: true if the claim is ReadWriteMany",
                    )
            paths_in_pod = [m.mount_path or volumes[(w.namespace, m.volume)].mount_path for m in w.mounts]
            paths_in_pod += [script.mount_path for script in w.scripts]
            if len(set(paths_in_pod)) != len(paths_in_pod):
                raise FieldError(src + ("mounts",), f"two mounts of workload {w.name!r} share a mount path")
            if path == src:  # a variant mounts what its source mounts
                _mount_targets(c, w, src)
            _exec_and_object_budget(c, w, src)
            for k, port in enumerate(w.ports):
                # The router names a Route without a host ROUTE-NAMESPACE.DOMAIN: that first label is at most 63 characters.
                if port.route and len(f"{w.name}-{port.name}-{w.namespace}") > 63:
                    raise FieldError(
                        src + ("ports", k, "name"),
                        f"the Route {w.name}-{port.name} in {w.namespace!r} would get the host "
                        f"{w.name}-{port.name}-{w.namespace}.<domain>, whose first label exceeds 63 characters: the router does not "
                        "admit it. Shorten the workload or port name",
                    )
            for k, mount in enumerate(w.scripts):
                if (w.namespace, mount.config_map) not in maps:
                    raise FieldError(
                        src + ("scripts", k, "config_map"),
                        f"ConfigMap {mount.config_map!r} is neither in scripts nor in existing.config_maps (namespace {w.namespace!r})",
                    )
            for key, ref in w.secret_env.items():
                if (w.namespace, ref.secret) not in secrets:
                    raise FieldError(
                        src + ("secret_env", key),
                        f"Secret {ref.secret!r} is not declared in existing.secrets for namespace {w.namespace!r}: preview could not check "
                        "it exists, and the pod would fail with CreateContainerConfigError",
                    )
            for j, variant in enumerate(w.tcp_variants):
                if variant.state == "running" and w.state == "running" and not variant.alongside:
                    raise FieldError(
                        src + ("tcp_variants", j, "state"),
                        f"TCP variant {variant.name!r} and its source {w.name!r} would both run: they are alternatives. Stop one, or set "
                        "alongside: true to run both at once",
                    )
    for i, chk in enumerate(c.bandwidth_checks):
        with problems.collect():
            path = ("bandwidth_checks", i)
            pod_refs("bandwidth check", path, path, chk)
    for i, h in enumerate(c.hand_made):
        with problems.collect():
            if h.namespace and h.namespace not in ns:  # one of namespaces: that entry's error says it
                untouchable(("hand_made", i, "namespace"), h.namespace)
    with problems.collect():
        _derived_names(c, paths)
    problems.raise_all()


def _fits_nodes(c: ClusterConfig, w: Workload | BandwidthCheck, src: tuple[str | int, ...], node_set: NodeSet) -> None:
    """A pod's requests fit one node of its set (where the stack knows the node's allocatable CPU and memory), and
    its node selector agrees with the set's pins and with the stack's GPU node selector."""
    for field, have in (("cpu", node_set.allocatable_cpu), ("memory", node_set.allocatable_memory)):
        want = getattr(w, field)
        if have is not None and quantity_value(want) > quantity_value(have):
            raise FieldError(
                src + (field,),
                f"each pod requests {field} {want}, but the nodes of {node_set.name!r} offer {have} (allocatable_{field}): the pods "
                f"stay Pending ('Insufficient {field}'). Request at most {have}",
            )
    own: dict[str, str] = getattr(w, "node_selector", {}) or {}
    for key, value in own.items():
        if key in c.gpu_node_selector and c.gpu_node_selector[key] != value:
            raise FieldError(
                src + ("node_selector", key),
                f"{key}={value} contradicts the stack's gpu_node_selector {key}={c.gpu_node_selector[key]}: the workload's value "
                "replaces it, so the pods leave the GPU nodes the stack counts on. Remove it, or change gpu_node_selector",
            )
    host_key = "kubernetes.io/hostname"
    host = {**c.gpu_node_selector, **own}.get(host_key)
    if host is None:
        return
    where = src + ("node_selector", host_key) if host_key in own else ("gpu_node_selector", host_key)
    named = {n for s in c.node_sets for n in s.nodes}
    if node_set.nodes and host not in node_set.nodes:
        problem = f"pins the pods to {host}, which is not a node of their node set {node_set.name!r} ({', '.join(node_set.nodes)})"
    elif not node_set.nodes and host in named:
        problem = f"pins the pods to {host}, a named node of another set, while the pods of {node_set.name!r} avoid named nodes"
    elif w.nodes > 1:
        problem = f"pins all {w.nodes} pods to {host}, but the pods of a workload take one node each"
    else:
        return
    raise FieldError(
        where, f"{host_key}: {problem}: they never schedule. Choose the nodes with node_set (and the set's nodes), not node_selector"
    )


# Where a volume hides what the container needs: the image's programs and libraries, the kernel's files,
# the files the kubelet writes into every container.
SYSTEM_DIRS = frozenset({"/", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/usr/bin", "/usr/lib", "/usr/local", "/usr/local/lib"})
KERNEL_DIRS = ("/dev", "/proc", "/sys")
KUBELET_FILES = frozenset({"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/dev/termination-log"})


def system_path_problem(path: str) -> str | None:
    """Why nothing may be mounted at `path`, or None."""
    if path in SYSTEM_DIRS:
        return (
            f"a volume mounted at {path} hides the image's own files there (python3, the shell, their libraries): the "
            "launcher cannot start. Mount it elsewhere (e.g. /workspace, /data)"
        )
    kernel = next((d for d in KERNEL_DIRS if path == d or path.startswith(d + "/")), None)
    if kernel is not None:
        return (
            f"{path} is under {kernel}, which the runtime fills ({kernel} holds the devices, /dev/shm and the kernel's "
            "files the launcher reads): a volume there hides them or is refused. Mount it elsewhere"
        )
    if path in KUBELET_FILES:
        return f"the kubelet mounts {path} into every container itself: a volume there conflicts with it. Mount it elsewhere"
    return None


def _mount_targets(c: ClusterConfig, w: Workload, src: tuple[str | int, ...]) -> None:
    """Every mount point can be made and every file the launcher writes can be written: no read-only mount is a
    parent of another mount (the runtime cannot make a mount point inside it), /tmp stays writable, and the
    DeepSpeed hostfile is a writable file of its own."""
    mounts: list[tuple[str, bool, tuple[str | int, ...], str]] = [
        (LAUNCHER_DIR, True, (), "the launcher's own mount"),
        ("/dev/shm", False, (), "the program's /dev/shm"),
    ]
    for k, m in enumerate(w.mounts):
        v = c.volume(w.namespace, m.volume)
        where = src + ("mounts", k, "mount_path" if m.mount_path else "volume")
        mounts.append((m.mount_path or v.mount_path, m.read_only, where, f"volume {m.volume!r}"))
    for k, sm in enumerate(w.scripts):
        mounts.append((sm.mount_path, True, src + ("scripts", k, "mount_path"), f"ConfigMap {sm.config_map!r} (always read-only)"))
    for path, read_only, where, what in mounts:
        if not where or not read_only:
            continue
        if path == "/tmp" or "/tmp".startswith(path.rstrip("/") + "/"):
            raise FieldError(
                where,
                f"{what} is mounted read-only at {path}, but the launcher writes {', '.join(LAUNCHER_FILES)} at start: it "
                "could not. Mount it elsewhere, or read-write",
            )
        inside = [(p, wh) for p, _, _, wh in mounts if p != path and p.startswith(path.rstrip("/") + "/")]
        if inside:
            other, other_what = inside[0]
            raise FieldError(
                where,
                f"{what} is mounted read-only at {path}, a parent of {other} ({other_what}): the runtime cannot make that mount "
                "point inside a read-only mount, so the container is never created. Mount one of them elsewhere",
            )
    hostfile = w.deepspeed_hostfile
    if hostfile is None:
        return
    where = src + ("deepspeed_hostfile",)
    if hostfile in LAUNCHER_FILES:
        raise FieldError(
            where, f"{hostfile} is a file the launcher itself writes at start: the two would overwrite each other. Choose another path"
        )
    if problem := system_path_problem(hostfile):
        raise FieldError(where, f"the hostfile cannot be written there: {problem}")
    for path, read_only, _, what in mounts:
        if hostfile == path:
            raise FieldError(where, f"{hostfile} is where {what} is mounted (a directory), not a file. Name a file inside it")
        if read_only and hostfile.startswith(path.rstrip("/") + "/"):
            raise FieldError(
                where, f"{hostfile} is inside {path}, where {what} is mounted read-only: the launcher cannot write it and the pod stops"
            )


def _exec_and_object_budget(c: ClusterConfig, w: Workload, src: tuple[str | int, ...]) -> None:
    """The environment and the arguments fit exec(2) (the launcher execs the command with them) and the pod
    template fits the API server's request limit."""
    env = {**(c.defaults.nccl_env_rdma if w.transport == "rdma" else c.defaults.nccl_env_tcp), **w.env}
    args_json = json.dumps(w.args)
    hosts = w.nodes * (2 * len(w.name) + len(w.namespace) + 64) if w.deepspeed_hostfile else 0  # LAUNCHER_HOSTS
    pointer = 8
    env_bytes = sum(len(f"{k}={v}".encode("utf-8", "surrogatepass")) + 1 + pointer for k, v in env.items())
    env_bytes += sum(len(k) + 2 + pointer for k in w.secret_env)  # and the Secret's value, which the config does not know
    args_bytes = len(args_json) + len("LAUNCHER_ARGS=") + 1 + sum(len(a.encode("utf-8", "surrogatepass")) + 1 + pointer for a in w.args)
    blame = ("args",) if args_bytes > env_bytes else ("env",)
    total = env_bytes + args_bytes + hosts + EXEC_MARGIN
    if total > EXEC_TOTAL_MAX:
        raise FieldError(
            src + blame,
            f"the environment and arguments of {w.name!r} take about {total} bytes with the program's own (and {EXEC_MARGIN} "
            f"left for the image's): over the kernel's {EXEC_TOTAL_MAX} (ARG_MAX), so exec fails with 'Argument list too long'. "
            "Put long values in a script or a file on a volume and pass its path",
        )

    # The env entries as the pod template holds them, measured in one piece (a separator more per entry than each alone:
    # still an upper bound), so the check stays one encoding per workload however many variables it has.
    entries = [{"name": k, "value": kubelet_escape(v)} for k, v in [*env.items(), ("LAUNCHER_ARGS", args_json)]]
    size = POD_TEMPLATE_BASE + hosts + len(json.dumps(entries, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > OBJECT_MAX:
        raise FieldError(
            src + blame,
            f"the pod template of {w.name!r} takes about {size} bytes (its environment, each $ rendered as $$, and its arguments): "
            f"the API server refuses an object over {OBJECT_MAX} bytes (etcd's request limit). Put long values in a script "
            "or a file on a volume and pass its path",
        )


def _derived_names(c: ClusterConfig, paths: list[tuple[tuple[str | int, ...], tuple[str | int, ...]]]) -> None:
    """The names the program derives never meet: Services NAME-headless and NAME-dev, Routes NAME-PORT (and their
    hosts ROUTE-NAMESPACE.<domain>, which the router gives across namespaces), claims (shared ones, existing ones,
    and a StatefulSet's per-pod VOLUME-WORKLOAD-ORDINAL). Two entries that make one object would be one object with
    two owners (`pulumi up` stops on a duplicate URN; the router admits one Route; two StatefulSets share a claim)."""
    owners: dict[tuple[str, str, str], tuple[tuple[str | int, ...], str]] = {}

    def own(kind: str, namespace: str, name: str, where: tuple[str | int, ...], what: str) -> None:
        first = owners.setdefault((kind, namespace, name), (where, what))
        if first != (where, what):
            place = f" in namespace {namespace!r}" if namespace else ""
            raise FieldError(
                where,
                f"{what} makes {kind} {name!r}{place}, and so does {first[1]} ({located(first[0], c)}): one object with two owners. "
                "Rename one of them",
            )

    for i, v in enumerate(c.volumes):
        if v.shared or v.existing:
            own("claim", v.namespace, v.name, ("volumes", i, "name"), f"volume {v.name!r}")
    for (src, path), w in zip(paths, c.all_workloads(), strict=True):
        label = f"workload {w.name!r}"
        own("Service", w.namespace, f"{w.name}-headless", path + ("name",), label)
        routed = [(k, p) for k, p in enumerate(w.ports) if p.route]
        if routed:
            own("Service", w.namespace, f"{w.name}-dev", path + ("name",), label)
        for k, port in routed:
            where = src + ("ports", k, "name") if path == src else path + ("name",)
            what = f"port {port.name!r} of {label}"
            own("Route", w.namespace, f"{w.name}-{port.name}", where, what)
            own("Route host", "", f"{w.name}-{port.name}-{w.namespace}", where, f"{what} (namespace {w.namespace})")
        if w.kind != "statefulset":
            continue
        for k, m in enumerate(w.mounts):
            v = c.volume(w.namespace, m.volume)
            if v.shared or v.existing:
                continue
            where = src + ("mounts", k, "volume") if path == src else path + ("name",)
            for r in range(w.nodes):
                own("claim", w.namespace, f"{v.name}-{w.name}-{r}", where, f"the per-pod claim of {label} on volume {v.name!r}")
    for i, chk in enumerate(c.bandwidth_checks):
        own("Service", chk.namespace, f"{chk.name}-headless", ("bandwidth_checks", i, "name"), f"bandwidth check {chk.name!r}")
    patched: dict[tuple[str, str], int] = {}
    for i, f in enumerate(c.pvc_fixes):
        where = ("pvc_fixes", i, "pvc")
        if (f.namespace, f.pvc) in patched:
            first = patched[(f.namespace, f.pvc)]
            raise FieldError(where, f"claim {f.namespace}/{f.pvc} is patched twice (also pvc_fixes[{first}]): keep one of the two")
        patched[(f.namespace, f.pvc)] = i
        owner = owners.get(("claim", f.namespace, f.pvc))
        volume = next((v for v in c.volumes if v.namespace == f.namespace and v.name == f.pvc), None)
        if owner is not None and not (volume is not None and volume.existing and owner[1] == f"volume {volume.name!r}"):
            raise FieldError(
                where,
                f"claim {f.namespace}/{f.pvc} is created by this stack ({owner[1]}, {located(owner[0], c)}): a pvc_fixes patch is for a "
                "claim that exists without a storage class. Set the volume's storage_class instead, and drop the patch",
            )
