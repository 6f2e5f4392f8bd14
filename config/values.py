"""The values a config is made of, checked by the API server's own rules (K8sName, Memory, MountPath, ...), the bounds
(MAX_*), the names reserved in every pod, and what the kubelet does to env values. Nothing here knows a model."""

import contextlib
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
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
# The digests a registry verifies (OCI image spec): lowercase hex of exactly the algorithm's length.
DIGEST_HEX_LENGTH = {"sha256": 64, "sha512": 128}
TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

# Bounds: generous for a GPU cluster, small enough that a typo (3000000000 nodes) is refused and `check` of the largest
# stack accepted (bench/scale.py) takes seconds. The committed stacks use at most a quarter of each (tests/config/test_bounds.py).
MAX_NODES = 256
MAX_GPUS = 16
MAX_NODE_SET_SIZE = 4096
MAX_WORKLOADS = 200
MAX_CLUSTER_NODES = 4096  # GPU nodes of all node sets together: a large cluster's whole GPU fleet
MAX_NAMED_NODES = 256  # nodes named in all sets together: every pod template carries names, so a larger fleet is counted
MAX_TCP_VARIANTS = 8  # TCP variants of one workload
MAX_POD_TEMPLATES = 256  # workloads, their TCP variants and the bandwidth checks together, running or not
MAX_PORTS = 16  # developer ports of one workload
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
MAX_PRIORITY_CLASSES = 16  # WorkloadPriorityClasses a queued stack declares
MAX_SELECTOR = 8  # node labels required, by the stack or by one workload (1 here)
MAX_ENV = 32  # environment variables of one workload or check, and NCCL defaults per transport (5 at most here)
MAX_SECRET_ENV = 8  # variables of one workload read from Secrets (1 here: HF_TOKEN)
MAX_MOUNTS = 8  # volumes one workload mounts (2 at most here: workspace and datasets)
MAX_SCRIPT_MOUNTS = 4  # script ConfigMaps one workload mounts (1 here)
MAX_NODE_POLICIES = 8  # SR-IOV node policies of one node set: one per NIC port (a GPU node has 4 to 8); each is one object per node
MAX_POLICY_PFS = 8  # PFs one node policy names (1 per port is the use)
MAX_ARGS = 128  # arguments of one workload's command (7 at most here; a torchrun with 60 flags and values fits)
MAX_TEXT = 256 * 1024  # one script file
MAX_DEADLINE_MINUTES = 7 * 24 * 60  # a bandwidth check's deadline: a week
MAX_DOCKERFILE = 60_000  # bytes of one Dockerfile: the openshift-apiserver's maxDockerfileLengthBytes (a BuildConfig's)
# Kueue takes 64 flavors and resources per ClusterQueue (MAX_NODE_SETS; 4 + MAX_ATTACHMENTS), 8 tolerations per flavor.
GIB = 1024**3
MIB = 1024**2

# Names the program gives its own volumes and mount paths in every training pod.
RESERVED_VOLUMES = frozenset({"launcher", "dshm"})
LAUNCHER_DIR = "/opt/launcher"
RESERVED_PATHS = frozenset({"/dev/shm", LAUNCHER_DIR})
# Environment the launcher reads or exports (components/launcher/contract.py): a workload's env must not override it.
RESERVED_ENV = frozenset(
    {"MASTER_ADDR", "MASTER_PORT", "POD_NAME", "JOB_COMPLETION_INDEX", "NODE_RANK", "NNODES", "NPROC_PER_NODE", "WORLD_SIZE"}
)
RESERVED_ENV_PREFIX = "LAUNCHER_"
# exec(2)'s MAX_ARG_STRLEN: every `NAME=value` string and argument the launcher execs with must fit it.
EXEC_STRING_MAX = 131_072
# The API server refuses a request larger than etcd takes (1.5 MiB); the pod template is most of a StatefulSet or Job.
OBJECT_MAX = 1536 * 1024
NAME_MAX = 255  # bytes of one path component (Linux NAME_MAX)


def edge_problem(value: str) -> str:
    """Why `value` is refused for an invisible character at its start or end (a space copied with it), or ""."""
    for side, char in (("starts", value[:1]), ("ends", value[-1:])):
        if char and (char.isspace() or unicodedata.category(char) in ("Cf", "Zs")):
            name = unicodedata.name(char, "a control character")
            return f"{value!r} {side} with U+{ord(char):04X} ({name}), an invisible character no name or image holds: remove it"
    return ""


def refusing(problem: Callable[[str], str | None]) -> AfterValidator:
    """A validator that refuses a value `problem` says something of, with what it says."""

    def check(value: str) -> str:
        if message := problem(value):
            raise ValueError(message)
        return value

    return AfterValidator(check)


def _grammar(pattern: re.Pattern[str], limit: int, message: str) -> Callable[[str], str]:
    """Why the API server refuses a value of a grammar and a length (`message` says why), or ""."""
    return lambda v: edge_problem(v) or ("" if len(v) <= limit and pattern.match(v) else message.format(value=v))


_label = _grammar(
    re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
    63,
    "{value!r} is not a valid Kubernetes name: use lowercase letters, digits and '-', start and end with a letter or digit, at "
    "most 63 characters",
)
_dns1035 = _grammar(
    re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$"),
    63,
    "{value!r} is not a valid name for a workload: its Service must be a DNS-1035 label, so use lowercase letters, digits and "
    "'-', start with a letter, end with a letter or digit, at most 63 characters",
)
_subdomain = _grammar(
    _DNS_SUBDOMAIN,
    253,
    "{value!r} is not a valid Kubernetes object name: use lowercase letters, digits, '-' and '.', start and end with a letter "
    "or digit, at most 253 characters",
)
_quantity = _grammar(_QUANTITY, 32, "{value!r} is not a Kubernetes quantity (for example 100Gi, 500Mi, 64, 500m)")
_resource = _grammar(_RESOURCE, 253, "{value!r} is not an extended resource name like openshift.io/eno5np0rdma")
_env_name = _grammar(re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$"), 256, "{value!r} is not a valid environment variable name")
_label_value = _grammar(_LABEL_VALUE, 63, "{value!r} is not a valid label value (at most 63 letters, digits, '-', '_', '.')")
# The openshift-apiserver's image name grammar (imageStreamName): no two separators in a row.
_image_stream = _grammar(
    re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$"),
    63,
    "{value!r} is not a valid ImageStream name: lowercase letters and digits, one '-' between them (OpenShift refuses two in "
    "a row), at most 63 characters",
)


_SUFFIX: dict[str, Decimal | int] = {
    "": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip


def quantity_value(value: str) -> Decimal:
    if not (m := _QUANTITY.match(value)):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    return Decimal(m.group(1)) * _SUFFIX[m.group(3) or ""]


def quantity_text(value: Decimal | int) -> str:
    """Cores or bytes as a quantity in the largest binary unit that divides it (`1Ti`, `254`), or millicores (`63500m`)."""
    if value == int(value):
        for suffix, unit in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= unit and value % unit == 0:
                return f"{int(value // unit)}{suffix}"
        return str(int(value))
    return f"{int(value * 1000)}m"  # the API server's own finest unit of CPU


def _positive(value: str) -> str:
    # A size or an amount of CPU or memory of zero is a typo; the API server rejects a zero claim.
    if quantity_value(value) <= 0:
        raise ValueError(f"{value!r} must be greater than zero")
    return value


# Far above any node or volume, far below the API server's int64 overflow (8Ei): a value beyond them is a unit typo.
MAX_CPU = 512  # logical CPUs of the largest H100 node: two sockets of 128 cores with two threads (AMD EPYC 9754)
MAX_MEMORY = 64 * 2**40  # 64Ti
MIN_MEMORY = 12 * 2**20  # CRI-O refuses a memory limit below 12 MiB
MAX_VOLUME = 16 * 2**50  # 16Pi


def _cpu(value: str) -> str:
    if quantity_value(value) > MAX_CPU:
        raise ValueError(
            f"{value!r} is {quantity_value(value):,} cores, more CPU than any node has (an H100 node of these "
            f"clusters has at most {MAX_CPU}, MAX_CPU), so its pods would stay Pending: a unit typo? (e.g. 32, or 500m)"
        )
    return value


def _bytes(value: str, low: int, high: int, what: str) -> str:
    if value.endswith("m"):
        raise ValueError(f"{value!r}: 'm' is milli, so this is {quantity_value(value)} bytes: write Mi (mebibytes) or M (megabytes)")
    if (amount := quantity_value(value)) > high:
        raise ValueError(f"{value!r} is more than {quantity_text(high)} of {what}: a unit typo? (the API server overflows at 8Ei)")
    if amount < low:
        raise ValueError(f"{value!r} is {amount} bytes of {what}, below {quantity_text(low)}: a unit typo? (64 is 64 bytes; write 64Gi)")
    return value


def _quota_resource(value: str) -> str:
    # The grammar of a core (cpu, pods) or extended resource; which ones a quota may name: config/stack.py.
    return "" if "/" not in value and len(value) <= 63 and _LABEL_KEY_NAME.match(value) else _resource(value)


def _capability(value: str) -> str:
    if len(value) > 64 or not _CAPABILITY.match(value) or value.startswith("CAP_"):
        raise ValueError(f"{value!r} is not a capability name as Kubernetes spells it (IPC_LOCK, not cap_ipc_lock)")
    return value


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def qualified_name_problem(value: str) -> str:
    """Why the API server refuses `value` as a qualified name (label, selector, taint keys: [subdomain '/'] name), or ""."""
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' is empty"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"the prefix {prefix[:64]!r} is not a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)"
    if len(name) > 63:
        return f"the name (after any prefix) has {len(name)} characters, at most 63 are allowed"
    if not _LABEL_KEY_NAME.match(name):
        return "the name must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
    return ""


def _label_key(value: str) -> str:
    if problem := qualified_name_problem(value):
        raise ValueError(
            f"{value[:80]!r} is not a key the API server accepts (label, node selector, taint and toleration keys are qualified "
            f"names): {problem}. Write NAME or PREFIX/NAME, e.g. nvidia.com/gpu.present"
        )
    return value


def _image(value: str) -> str:
    if problem := edge_problem(value):
        raise ValueError(problem)
    name, at, digest = value.partition("@")
    if not name or len(value) > 512 or not _IMAGE.match(name) or len(name.rsplit(":", 1)[0]) > 255:
        raise ValueError(
            f"{value!r} is not an image reference (registry/path[:tag][@sha256:digest], lowercase path, e.g. "
            "nvcr.io/nvidia/pytorch:25.08-py3)"
        )
    first, slash, _ = name.partition("/")
    # A registry host with a port (registry.example.org:5000/team/image) whose number is no TCP port.
    if slash and ":" in first and not 1 <= int(port := first.rsplit(":", 1)[1]) <= 65535:
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
    if (long := next((p for p in parts if len(p.encode("utf-8", "surrogatepass")) > NAME_MAX), None)) is not None:
        raise ValueError(
            f"the path component {long[:40]!r}... is {len(long.encode('utf-8', 'surrogatepass'))} bytes: a file name is at most "
            f"{NAME_MAX} bytes (NAME_MAX), so the runtime cannot create it. Shorten that component"
        )
    return "/" + "/".join(p for p in parts if p)  # normalised: no trailing or double slashes


def _file_key(value: str) -> str:
    # IsConfigMapKey; `..` starts the kubelet's own `..data` and `..TIMESTAMP` entries.
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


def _dockerfile(value: str) -> str:
    if (size := len(value.encode("utf-8", "surrogatepass"))) > MAX_DOCKERFILE:
        raise ValueError(f"the Dockerfile is {size} bytes: OpenShift's build API takes at most {MAX_DOCKERFILE} in a BuildConfig")
    return value


def _reason(value: str) -> str:
    # A reason stands for a decision: whitespace or a zero-width space says nothing, and would pass for one.
    value = value.strip()
    if not any(c.isprintable() and not c.isspace() and unicodedata.category(c) != "Cf" for c in value):
        raise ValueError("a reason needs words: this one is empty or only whitespace. Say why (it is printed with the check)")
    return value


def nesting(value: Any) -> int:
    """How deep lists and mappings nest in a parsed value (a scalar: 0), walked without recursion."""
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
    if not math.isfinite(value := float(text)):
        raise ValueError(f"{text} is not a finite number (it overflows a float)")
    return value


def bounded_json(text: str, max_depth: int) -> Any:
    """JSON nested at most `max_depth` deep (else TooDeep), without NaN, Infinity or 1e999 (only Python's parser takes them)."""
    with contextlib.suppress(RecursionError):  # Python's parser recurses: too deep for it is too deep
        if nesting(parsed := json.loads(text, parse_constant=_no_json_constant, parse_float=_finite_float)) <= max_depth:
            return parsed
    raise TooDeep(f"nested more than {max_depth} levels deep")


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


def node_name_problem(value: str) -> str:
    """Why no node can have this name (a DNS subdomain, and a label value for kubernetes.io/hostname), or ""."""
    if value != value.lower() and not node_name_problem(value.lower()):
        # The kubelet registers the host's name lowercased: `oc get nodes` never shows an uppercase letter.
        return f"{value!r}: node names are lowercase (kubernetes.io/hostname); write {value.lower()!r}"
    if not value or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        return (
            f"{value[:80]!r} is no node's name: a node is named as a DNS subdomain (lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit), as `oc get nodes` lists it"
        )
    if len(value) > 63:
        return (
            f"{value[:80]!r} is {len(value)} characters long: pods are pinned to a node by its kubernetes.io/hostname label, a "
            "label value of at most 63 characters"
        )
    return ""


NodeName = Annotated[str, refusing(node_name_problem)]  # as `oc get nodes` lists it
K8sName = Annotated[str, refusing(_label)]  # a DNS-1123 label: namespaces, service accounts, PVCs, NADs, ConfigMaps
WorkloadName = Annotated[str, refusing(_dns1035)]  # a DNS-1035 label: a workload's Services carry its name
ObjectName = Annotated[str, refusing(_subdomain)]  # a DNS-1123 subdomain: cluster-scoped objects (SCCs, storage classes)
Quantity = Annotated[str, refusing(_quantity)]
Size = Annotated[str, refusing(_quantity), AfterValidator(_positive)]  # volume sizes, CPU, memory
Cpu = Annotated[Size, AfterValidator(_cpu)]  # cores (32) or millicores (500m), at most MAX_CPU
Memory = Annotated[Size, AfterValidator(lambda v: _bytes(v, MIN_MEMORY, MAX_MEMORY, "memory"))]  # in bytes (256Gi)
ShmSize = Annotated[Size, AfterValidator(lambda v: _bytes(v, 1, MAX_MEMORY, "/dev/shm"))]  # below 64Mi: rule shm-size
VolumeSize = Annotated[Size, AfterValidator(lambda v: _bytes(v, 1, MAX_VOLUME, "storage"))]
ResourceName = Annotated[str, refusing(_resource)]
QuotaResource = Annotated[str, refusing(_quota_resource)]  # cpu, memory, pods, or an extended resource (nvidia.com/gpu)
EnvName = Annotated[str, refusing(_env_name)]
Capability = Annotated[str, AfterValidator(_capability)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, refusing(_label_value)]
ImageRef = Annotated[str, AfterValidator(_image)]
MountPath = Annotated[str, AfterValidator(_mount_path)]
FileKey = Annotated[str, AfterValidator(_file_key)]
PortName = Annotated[str, AfterValidator(_port_name)]
Text = Annotated[str, AfterValidator(_text)]
Dockerfile = Annotated[str, AfterValidator(_dockerfile)]
ImageStreamName = Annotated[str, refusing(_image_stream)]
CniConfig = Annotated[str, AfterValidator(_text), AfterValidator(_json_object)]  # as a NAD's spec.config holds it
# Why the stack does something that needs saying (a broad grant, an accepted warning): stripped, with a visible character.
Reason = Annotated[str, AfterValidator(_reason)]
OptionalReason = Annotated[str, AfterValidator(lambda value: value and _reason(value))]  # "" (not given), or words
Port = Annotated[int, Field(strict=True, ge=1, le=65535)]  # strict, as every integer field: a YAML `true` is not 1

Transport = Literal["rdma", "tcp"]
LinkLayer = Literal["roce-v2", "infiniband"]
GdrLevel = Literal["LOC", "PIX", "PXB", "PHB", "SYS"]
MemlockStrategy = Literal["node-limit", "root-ipc-lock", "root-sys-resource", "privileged", "none"]
WorkloadKind = Literal["statefulset", "job"]
State = Literal["running", "stopped"]
AccessMode = Literal["ReadWriteMany", "ReadWriteOnce"]
BandwidthTool = Literal["auto", "torch", "nccl-tests"]

# Capabilities each memlock strategy adds (KNOWLEDGE.md): IPC_LOCK pins past RLIMIT_MEMLOCK; SYS_RESOURCE raises it.
STRATEGY_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "node-limit": (), "root-ipc-lock": ("IPC_LOCK",), "root-sys-resource": ("IPC_LOCK", "SYS_RESOURCE"), "privileged": (), "none": (),
}  # fmt: skip
# NCCL settings that only mean something over RDMA; a TCP variant does not inherit them.
RDMA_ONLY_NCCL = ("NCCL_IB_", "NCCL_SOCKET_IFNAME", "NCCL_NET_GDR_LEVEL", "NCCL_CROSS_NIC")
# Added capabilities are effective only for uid 0 (CRI-O and containerd set no ambient set).
STRATEGY_RUNS_AS_ROOT = frozenset({"root-ipc-lock", "root-sys-resource"})
# Strategies that need more than the unprivileged SCC (restricted-v2) allows.
STRATEGY_NEEDS_SCC = STRATEGY_RUNS_AS_ROOT | {"privileged"}


# The kubelet turns `$(NAME)` in env values and args into NAME's value, `$$` into `$`. A config is literal text, so every
# `$` is rendered as `$$`; `$(NAME)` of a variable the pod defines, surely meant as a reference, is refused (dollar_problem).
_REFERENCE = re.compile(r"\$\(([^)]*)\)")
_KUBELET = re.compile(r"\$(?:\$|\(([^)]*)\))")
# Kubernetes expands nothing else: `$PATH` in an env value reaches the process as those five characters.
SHELL_PATH = re.compile(r"\$(?:\{(PATH|LD_LIBRARY_PATH)\}|(PATH|LD_LIBRARY_PATH)(?![A-Za-z0-9_]))")


def kubelet_escape(value: str) -> str:
    """A literal value as an env value the kubelet leaves alone: every `$` doubled."""
    return value.replace("$", "$$")


def kubelet_expand(value: str, defined: Mapping[str, str]) -> str:
    """What the kubelet makes of an env value or argument: `$$` is `$`, `$(NAME)` NAME's value where `defined` has it."""
    if "$(" not in value:  # nearly every value (the preflight asks for each of each pod): `$$` is `$`, read left to right
        return value.replace("$$", "$")
    return _KUBELET.sub(lambda m: "$" if m.group(1) is None else defined.get(m.group(1), m.group(0)), value)


def dollar_problem(value: str, own: Iterable[str], where: str) -> str | None:
    """Why a literal value would not reach the process as its writer meant, or None."""
    for m in _REFERENCE.finditer(value):
        name = m.group(1)  # one a training pod defines: the launcher's contract, NCCL_*, the workload's own
        if name in RESERVED_ENV or name.startswith((RESERVED_ENV_PREFIX, "NCCL_")) or name in own:
            return (
                f"$({name}) in {where} is the kubelet's reference syntax, but the program passes the config's text as it is "
                f"(every $ rendered as $$), so the process would get the text $({name}), not {name}'s value. Read {name} in the "
                f"process (it is in the pod's environment), or in a shell command write ${{{name}}} "
                f'(run: command, args: ["bash", "-c", "... ${{{name}}} ..."])'
            )
    return None


# Where a volume hides what the container needs: the image's programs, the kernel's files, the kubelet's files.
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
    if (kernel := next((d for d in KERNEL_DIRS if path == d or path.startswith(d + "/")), None)) is not None:
        return (
            f"{path} is under {kernel}, which the runtime fills ({kernel} holds the devices, /dev/shm and the kernel's "
            "files the launcher reads): a volume there hides them or is refused. Mount it elsewhere"
        )
    if path in KUBELET_FILES:
        return f"the kubelet mounts {path} into every container itself: a volume there conflicts with it. Mount it elsewhere"
    return None
