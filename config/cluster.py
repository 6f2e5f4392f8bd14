"""What the cluster has and what the stack makes on it besides the training pods: node sets, the RDMA fabric, storage,
service accounts and SCCs, objects that exist already, scripts, image builds, node-level changes, the queue."""

import json
import re
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import AfterValidator, Field, field_validator, model_validator

from config import openshift, values
from config.errors import FieldError, Strict
from config.kube import HOSTNAME
from config.values import Dockerfile, K8sName, NodeName, ObjectName, Reason


class Toleration(Strict):
    """A taint the pods tolerate (the GPU nodes' taint, as `oc describe node` shows it)."""

    key: values.LabelKey
    """Taint key, e.g. nvidia.com/gpu.product."""
    operator: Literal["Equal", "Exists"] = "Exists"
    """Equal matches `value`; Exists matches any value."""
    value: values.LabelValue | None = None
    """The taint's value, with operator Equal."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """The taint's effect; None tolerates every effect."""

    @field_validator("key", mode="before")
    @classmethod
    def _a_key(cls, value: Any) -> Any:
        if value == "":  # the API server takes it
            raise ValueError(
                "an empty key (with operator Exists) tolerates every taint, the control plane's NoSchedule taints included, so "
                "GPU pods may land on the API server's nodes: name the taint's key (e.g. nvidia.com/gpu)"
            )
        return value

    @model_validator(mode="after")
    def _value_matches_operator(self) -> Self:
        if (self.operator == "Equal") == (self.value is None):  # a value with Equal, none with Exists
            raise FieldError(
                ("value",), "operator Equal needs a value" if self.value is None else "operator Exists takes no value (use Equal)"
            )
        return self


class SriovNodePolicy(Strict):
    """VFs the SR-IOV network operator makes on the PFs of each node of a node set, for one device plugin resource
    (a SriovNetworkNodePolicy: isRdma true, deviceType netdevice, linkType from fabric.link_layer)."""

    resource: values.ResourceName
    """The device plugin resource the VFs are offered as: an attachment's resource (openshift.io/eno5np0rdma)."""
    pf_names: list[str] = Field(default=[], max_length=values.MAX_POLICY_PFS)
    """The PFs (network interface names on the node, e.g. eno5np0) whose VFs serve the resource."""
    vendor: str | None = Field(default=None, pattern=r"^[0-9a-f]{4}$")
    """PCI vendor ID of the NICs (15b3: NVIDIA/Mellanox), when PFs are selected by model."""
    device_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{4}$")
    """PCI device ID of the PFs (1021: ConnectX-7), when PFs are selected by model."""
    num_vfs: int = Field(strict=True, ge=1, le=openshift.SRIOV_MAX_VFS)
    """VFs per PF: each RDMA pod on the node takes one per attachment of this resource."""
    mtu: int | None = Field(strict=True, default=None, ge=576, le=9216)
    """MTU of the VFs (and the PF). The operator's NADs carry none: the attachment's cni_config mtu must match."""

    @field_validator("pf_names")
    @classmethod
    def _interface_names(cls, value: list[str]) -> list[str]:
        if bad := [name for name in value if not re.fullmatch(r"[a-zA-Z0-9_.-]{1,15}", name)]:
            raise ValueError(f"{bad[0]!r} is not a network interface name (at most 15 letters, digits, '_', '.', '-'; no VF range #)")
        return value

    @model_validator(mode="after")
    def _selects_nics(self) -> Self:
        if not (self.pf_names or self.vendor or self.device_id):
            raise FieldError(("pf_names",), "name the PFs (pf_names) or their model (vendor, device_id): the operator's webhook needs one")
        if self.vendor is not None and self.vendor not in openshift.SRIOV_VENDORS:
            raise FieldError(
                ("vendor",), f"vendor {self.vendor} is not one the SR-IOV operator supports ({', '.join(sorted(openshift.SRIOV_VENDORS))})"
            )
        if self.vendor == "15b3" and self.device_id is not None and self.device_id not in openshift.SRIOV_MELLANOX_DEVICES:
            raise FieldError(
                ("device_id",),
                f"device {self.device_id} of vendor 15b3 is not a PF the SR-IOV operator supports "
                f"({', '.join(sorted(openshift.SRIOV_MELLANOX_DEVICES))}; 1021 is ConnectX-7)",
            )
        if problem := _operator_resource_problem(self.resource):
            raise FieldError(("resource",), problem)
        return self


def _operator_resource_problem(resource: str) -> str:
    prefix = openshift.SRIOV_RESOURCE_PREFIX
    if resource.startswith(prefix) and re.match(openshift.SRIOV_RESOURCE_NAME, resource.removeprefix(prefix)):
        return ""
    return (
        f"{resource!r}: the SR-IOV operator offers resources as {openshift.SRIOV_RESOURCE_PREFIX}NAME (its RESOURCE_PREFIX on "
        "OpenShift), NAME of letters, digits and '_' only (its webhook's rule): e.g. openshift.io/eno5np0rdma"
    )


def _pinned_node(labels: dict[str, str]) -> dict[str, str]:
    """Node labels where kubernetes.io/hostname, if set, names a node a node can be: a pin to '' schedules nothing."""
    if (host := labels.get(HOSTNAME)) is not None and (problem := values.node_name_problem(host)):
        raise FieldError((HOSTNAME,), f"{problem}: {HOSTNAME} pins the pods to the node of that name, and no node has this one")
    return labels


NodeLabels = Annotated[dict[values.LabelKey, values.LabelValue], AfterValidator(_pinned_node)]  # a selector, a set's labels


class NodeSet(Strict):
    """GPU nodes the stack counts on: named nodes (pods are pinned to them), or a number of interchangeable nodes."""

    COLLECTION: ClassVar[str] = "node_sets"
    name: K8sName
    """Name of the set (workloads name it in node_set)."""
    nodes: list[NodeName] = Field(default=[], max_length=values.MAX_NAMED_NODES)
    """Node names as `oc get nodes` shows them (kubernetes.io/hostname). Pods of this set are pinned to them. At most
    256 names in all node sets together (MAX_NAMED_NODES): count a larger fleet."""
    count: int | None = Field(strict=True, default=None, ge=1, le=values.MAX_NODE_SET_SIZE)
    """For nodes not known by name: how many the stack may count on. Pods are not pinned."""
    gpus_per_node: int = Field(strict=True, ge=1, le=values.MAX_GPUS)
    """GPUs each node offers as nvidia.com/gpu."""
    allocatable_cpu: values.Cpu | None = None
    """CPU each node offers to pods (`oc describe node`, Allocatable: cpu). None: not known, not checked."""
    allocatable_memory: values.Memory | None = None
    """Memory each node offers to pods (`oc describe node`, Allocatable: memory). None: not known, not checked."""
    labels: NodeLabels = Field(default={}, max_length=values.MAX_SELECTOR)
    """Node labels every node of the set carries (and the nodes of the other sets do not): the set's pods select them,
    and on a queued cluster its Kueue ResourceFlavor names them, so Kueue charges a workload to the set it runs on.
    Required on a queued cluster with more than one node set; empty: the set is told apart by its node names only."""
    source: str = ""
    """Where the stack knows this from."""
    node_policies: list[SriovNodePolicy] = Field(default=[], max_length=values.MAX_NODE_POLICIES)
    """SR-IOV VFs the SR-IOV network operator makes on each node of the set (platform tier: a SriovNetworkNodePolicy per
    policy and node). Applying one drains and reboots the node: node_reboot_reason says why. Only on named nodes."""
    node_reboot_reason: Reason | None = None
    """Required with node_policies: why the stack may have the operator drain and reboot these nodes (printed by every
    check). Each new or changed policy reboots every node it selects, one at a time."""

    @field_validator("nodes", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        # Said of the list, before each name's grammar (NodeName): the kubelet registers the host's name lowercased.
        for name in value if isinstance(value, list) else []:
            if isinstance(name, str) and name != name.lower() and not values.node_name_problem(name.lower()):
                raise ValueError(values.node_name_problem(name))
        return value

    @model_validator(mode="after")
    def _named_or_counted(self) -> Self:
        if bool(self.nodes) == (self.count is not None):
            raise FieldError(("nodes",), "give either nodes (names) or count (a number of unnamed nodes), not both or neither")
        if len(set(self.nodes)) != len(self.nodes):
            raise FieldError(("nodes",), "a node is listed twice")
        if self.node_policies and not self.nodes:
            raise FieldError(
                ("node_policies",),
                "node policies need the nodes by name: each policy selects its nodes by kubernetes.io/hostname, so that it "
                "reconfigures (and reboots) no node the stack does not name. List the nodes (nodes), or leave the VFs to the "
                "cluster admin's own policies",
            )
        if self.node_policies and not self.node_reboot_reason:
            raise FieldError(
                ("node_reboot_reason",),
                "applying a SriovNetworkNodePolicy drains and reboots every node it selects (the SR-IOV operator's config daemon, one "
                "node at a time): set node_reboot_reason to say why this stack may, or leave the VFs to the cluster admin's own policies",
            )
        pfs = [pf for p in self.node_policies for pf in p.pf_names]
        if len(set(pfs)) != len(pfs):
            raise FieldError(("node_policies",), "a PF is named by two policies: the operator's webhook refuses overlapping VF ranges")
        return self

    @property
    def size(self) -> int:
        return len(self.nodes) or self.count or 0

    @property
    def vfs_per_node(self) -> dict[str, int]:
        """The SR-IOV VFs each node offers per resource its node_policies name (a policy selecting by model: one PF)."""
        out: dict[str, int] = {}
        for p in self.node_policies:
            out[p.resource] = out.get(p.resource, 0) + p.num_vfs * max(1, len(p.pf_names))
        return out


class SriovAttachment(Strict):
    """One SR-IOV network a pod attaches, in the order the pod lists it."""

    network: K8sName
    """Name of the NetworkAttachmentDefinition, e.g. eno5np0-network."""
    resource: values.ResourceName
    """The SR-IOV device plugin resource the NAD is annotated with (k8s.v1.cni.cncf.io/resourceName)."""
    interface: str = Field(pattern=r"^net[0-9]{1,3}$")
    """Interface name inside the pod: net1, net2, ... in attachment order."""
    device: str | None = None
    """RDMA device behind the attachment according to the seeds (documentation only; the launcher detects the live devices in the pod)."""
    cni_config: values.CniConfig | None = None
    """The CNI config (a JSON string) of the source NAD as the SR-IOV operator wrote it: the copies carry it, and preview
    fails when the live source differs, so a copy never silently drifts from the operator's network."""


class DeviceObservation(Strict):
    """What one seed document saw of a cluster's RDMA devices (seeds contradict each other: `devices` is the choice)."""

    source: str
    """Which seed document, and where in it."""
    devices: list[str] = Field(max_length=values.MAX_DEVICES)
    """The devices named there."""
    note: str = ""
    """What the observation means, and what was wrong with it if anything."""


class RdmaFabric(Strict):
    """The high-speed network of a cluster's GPU nodes."""

    link_layer: values.LinkLayer
    """roce-v2 (Ethernet) or infiniband."""
    nic: str
    """Adapter model, for the record."""
    link_gbps: int = Field(strict=True, gt=0, le=10_000)
    """Line rate of one port in Gb/s."""
    devices: list[str] = Field(min_length=1, max_length=values.MAX_DEVICES)
    """RDMA devices (ports) the stack treats as live on every GPU node: the list static checks use."""
    device_observations: list[DeviceObservation] = Field(default=[], max_length=values.MAX_OBSERVATIONS)
    """Every device list the seeds report, including the ones the stack does not use, and why."""
    attachments: list[SriovAttachment] = Field(default=[], max_length=values.MAX_ATTACHMENTS)
    """SR-IOV attachments in interface order. Empty where RDMA devices reach the pod another way."""
    nad_source_namespace: K8sName = "default"
    """Where the SR-IOV operator creates the NADs."""
    nad_mode: Literal["copy", "reference", "operator"] = "copy"
    """copy: a NAD per user namespace that runs RDMA pods, with the source's config (the seeds' way);
    reference: pods name `default/NAME` and no copies are made (OpenShift allows NADs of `default`);
    operator: the platform tier declares a SriovNetwork per attachment and such namespace in operator_namespace, and
    the SR-IOV operator makes and keeps the NAD there (named PROJECT-NETWORK: docs/networks.md)."""
    operator_namespace: Annotated[K8sName, values.refusing(openshift.operator_namespace_problem)] = openshift.SRIOV_OPERATOR_NAMESPACE
    """The SR-IOV network operator's namespace (nad_mode operator, node policies): it reconciles only the SriovNetworks and
    policies there. The one platform namespace a stack declares objects in, and only these kinds."""
    device_access: Literal["sriov", "privileged"] = "sriov"
    """How /dev/infiniband reaches the container: SR-IOV device plugin resources, or a privileged container that sees the host's devices."""
    static_hca: bool = False
    """Pin NCCL_IB_HCA to `devices` in the rendered environment. Off: the launcher detects the ACTIVE
    ports behind the pod's interfaces, which is right on nodes whose device names differ."""
    gid_index: int | None = Field(strict=True, default=None, ge=0, le=255)
    """Pin NCCL_IB_GID_INDEX. None: the launcher picks the RoCE v2 IPv4 index per port (as NCCL 2.21.5+ does). IB needs none."""
    gdr_level: values.GdrLevel = "SYS"
    """NCCL_NET_GDR_LEVEL (the seeds' legacy value 5 is SYS)."""

    @model_validator(mode="after")
    def _interfaces_in_order(self) -> Self:
        expected = [f"net{i}" for i in range(1, len(self.attachments) + 1)]
        if (got := [a.interface for a in self.attachments]) != expected:
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
        if self.nad_mode == "operator":  # the operator admits the attachments' SriovNetworks, and its NADs carry their config
            if self.device_access != "sriov":
                raise FieldError(("nad_mode",), "nad_mode 'operator' makes SR-IOV networks: it needs device_access 'sriov'")
            if self.link_layer == "infiniband":
                raise FieldError(
                    ("nad_mode",),
                    "the SR-IOV operator makes InfiniBand networks from SriovIBNetwork objects (ib-sriov CNI), which this program "
                    "does not declare: use nad_mode 'copy' or 'reference' on an InfiniBand fabric",
                )
            for i, a in enumerate(self.attachments):
                if resource_problem := _operator_resource_problem(a.resource):
                    raise FieldError(("attachments", i, "resource"), resource_problem)
                if not a.cni_config:
                    raise FieldError(
                        ("attachments", i, "cni_config"),
                        "nad_mode 'operator' makes the SriovNetwork from the network's CNI config (its IPAM above all: RoCE v2 "
                        "needs an address): set cni_config, as `oc get net-attach-def NAME -o jsonpath='{.spec.config}'` shows it",
                    )
                if problem := operator_config_problem(a.cni_config):
                    raise FieldError(("attachments", i, "cni_config"), problem)
        return self

    def link_type(self) -> str:
        """The SR-IOV operator's linkType of the fabric's PFs."""
        return "ib" if self.link_layer == "infiniband" else "eth"


def operator_config_problem(cni_config: str) -> str | None:
    """Why the SR-IOV operator could not render a NAD carrying this CNI config from a SriovNetwork, or None."""
    config = values.bounded_json(cni_config, values.MAX_CNI_DEPTH)
    if config.get("type") != "sriov":
        return f"type is {config.get('type')!r}: a SriovNetwork renders the sriov CNI only (a chained config is a copy's job)"
    if unknown := sorted(set(config) - openshift.SRIOV_CNI_OWN_KEYS - set(openshift.SRIOV_NETWORK_FIELDS)):
        return (
            f"{', '.join(unknown)}: the operator's NAD template has no such field, so the pods would not see it. Remove it, or use "
            "nad_mode 'copy'"
        )
    for key, (field, admitted) in openshift.SRIOV_NETWORK_FIELDS.items():
        if key not in config:
            continue
        value = config[key]
        # A range answers `in` for an int at once, and by walking every member for anything else: ints only go there.
        fits = isinstance(value, str) if admitted is None else (type(value) is int or not isinstance(admitted, range)) and value in admitted
        if not fits:
            return f"{key} {json.dumps(value)}: the SriovNetwork's {field} admits {_admitted(admitted)}"
    for key in ("ipam", "capabilities"):
        if key in config and not isinstance(config[key], dict):
            return f"{key} must be a JSON object"
        if key in config and re.search(r"\s", json.dumps(config[key], separators=(",", ":"))):
            return f"{key} holds whitespace: the operator strips every blank from the SriovNetwork's {key} (RenderNetAttDef)"
    if "mtu" in config and (isinstance(config["mtu"], bool) or not isinstance(config["mtu"], int)):
        return "mtu must be a whole number"
    return None


def _admitted(admitted: object) -> str:
    if isinstance(admitted, range):
        return f"a whole number from {admitted.start} to {admitted.stop - 1}"
    return ", ".join(json.dumps(v) for v in admitted) if isinstance(admitted, tuple) else "text"


class StorageClass(Strict):
    """A storage class known to exist on the cluster, and what it provides."""

    name: ObjectName
    """The StorageClass name on the cluster."""
    access_modes: list[values.AccessMode] = Field(min_length=1, max_length=values.MAX_ACCESS_MODES)
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
    mount_path: values.MountPath
    """Where workloads mount it."""
    size: values.VolumeSize | None = None
    """Requested size (required unless the claim exists already)."""
    storage_class: ObjectName | None = None
    """Storage class. None leaves it to the cluster default, which the preflight flags."""
    shared: bool = True
    """True: one ReadWriteMany PVC every pod mounts. False: per-pod ReadWriteOnce claims (no RWX class)."""
    existing: bool = False
    """The claim exists already (made by its owner): the stack mounts it, never creates, changes or
    deletes it; preview fails when it is missing. `shared` then says whether several pods may mount it."""

    @model_validator(mode="after")
    def _size_unless_existing(self) -> Self:
        if self.size is None and not self.existing:
            raise FieldError(("size",), "a volume the stack creates needs a size (or set existing: true for a claim that exists)")
        own = f"{self.mount_path} is the program's own mount (/dev/shm, {values.LAUNCHER_DIR}): choose another path"
        reserved = self.mount_path in values.RESERVED_PATHS or self.mount_path.startswith(values.LAUNCHER_DIR + "/")
        if problem := own if reserved else values.system_path_problem(self.mount_path):
            raise FieldError(("mount_path",), problem)
        if self.name in values.RESERVED_VOLUMES:
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
    serves_storage_classes: list[ObjectName] = Field(default=[], max_length=values.MAX_STORAGE_CLASSES)
    """Storage classes that work only once this claim is fixed (nfs-csi is served by the NFS server
    whose root volume this is): the stack's claims of those classes wait for the fix."""


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
        if value in openshift.PROJECT_SERVICE_ACCOUNTS:
            raise ValueError(
                f"OpenShift creates service account {value!r} in every project{openshift.PROJECT_SERVICE_ACCOUNTS[value]}: a stack that "
                "declares it would take it over, and delete it on `pulumi destroy` from under everything that runs as it. "
                "Give the training pods their own (e.g. trainer-sa)"
            )
        return value


class Security(Strict):
    """The SCCs the training pods run under, and who may use them: a pod that needs root with capabilities, or a
    privileged container, runs under `scc`; the others non-root, every capability dropped, under `unprivileged_scc`."""

    scc: ObjectName | None = None
    """SCC of the pods that need root capabilities or privileged containers. Pods pin their SCC with
    the annotation openshift.io/required-scc. None: no pod of this stack needs one."""
    create: bool = False
    """True: the program creates `scc` (only what the memlock strategies need). False: an existing SCC is referenced."""
    existing_allowed_capabilities: list[values.Capability] | None = Field(default=None, max_length=values.MAX_CAPABILITIES)
    """For an existing SCC: the capabilities it allows (None: every capability, as `privileged`)."""
    existing_allows_privileged: bool = False
    """For an existing SCC: whether it allows privileged containers."""
    existing_allows_root: bool = True
    """For an existing SCC: whether its runAsUser strategy admits uid 0 (RunAsAny, or a range holding 0)."""
    existing_allows_host_paths: bool = False
    """For an existing SCC: whether it allows hostPath volumes (allowHostDirVolumePlugin)."""
    existing_allows_host_namespaces: bool = False
    """For an existing SCC: whether it lets pods into the node's network, PID or IPC namespace or ports (allowHost*)."""
    broad_grant_reason: Reason | None = None
    """Required when the SCC allows more than its pods need (rule privileged-scc): privileged containers, hostPath volumes,
    the node's namespaces, every capability or one no pod adds, root no pod runs as. Why the stack accepts it. Printed."""
    grant: bool = True
    """Bind `scc`'s `use` ClusterRole to the service accounts of its pods (as `oc adm policy add-scc-to-user`)."""
    unprivileged_scc: ObjectName = "restricted-v2"
    """SCC of the pods that need no privilege (TCP, node-limit): every user may use restricted-v2, so no grant."""
    service_accounts: list[ServiceAccount] = Field(default=[], max_length=values.MAX_SERVICE_ACCOUNTS)
    """Service accounts the program creates."""

    # The config field that states each fact of an existing SCC.
    FACT_FIELDS: ClassVar[dict[str, str]] = {f: f"existing_allows_{f}" for f in openshift.STATED_FACTS}
    FACT_FIELDS["capabilities"] = "existing_allowed_capabilities"

    def existing_facts(self) -> openshift.SccFacts:
        """What security.existing_* say of `scc`; what no field states admits the pods (docs/preflight.md)."""
        caps = self.existing_allowed_capabilities
        return openshift.SccFacts(
            None if caps is None else frozenset(caps),
            "RunAsAny" if self.existing_allows_root else "MustRunAsRange",
            privileged=self.existing_allows_privileged,
            host_paths=self.existing_allows_host_paths,
            seccomp=None,
            host_namespaces=frozenset(openshift.HOST_NAMESPACES) if self.existing_allows_host_namespaces else frozenset(),
        )

    def stated_facts(self) -> openshift.SccFacts | None:
        """What `scc` allows where the stack does not create it: what OpenShift ships (rule shipped-scc), else existing_*."""
        return None if self.scc is None or self.create else openshift.OPENSHIFT_SCCS.get(self.scc) or self.existing_facts()

    def says(self, fact: str) -> str:
        """The field that states `fact` of an existing SCC, and what it says."""
        field = self.FACT_FIELDS[fact]
        value = getattr(self, field)
        said = ("every capability" if value is None else ", ".join(value) or "none") if fact == "capabilities" else str(value).lower()
        return f"security.{field} says {said}"

    @model_validator(mode="after")
    def _safe_scc(self) -> Self:
        if self.create and self.scc in openshift.BUILTIN_SCCS:
            raise FieldError(
                ("create",),
                f"{self.scc!r} is an SCC OpenShift ships: a stack that creates it would own it and delete it on `pulumi destroy`, "
                "taking it from every user of the cluster. Reference it (create: false) or create an SCC with your own name",
            )
        if self.create and self.scc is None:
            raise FieldError(("scc",), "create: true needs the name of the SCC to create")
        return self


class NamespacedName(Strict):
    """An object the stack relies on but does not own."""

    namespace: K8sName
    """Its namespace."""
    name: K8sName
    """Its name."""


class ExistingObjects(Strict):
    """Objects made by their owners that workloads use (a token Secret, a ConfigMap, an ImageStream another project
    builds). The stack never creates or changes them; preview fails, naming one, when it is missing."""

    secrets: list[NamespacedName] = Field(default=[], max_length=values.MAX_EXISTING)
    """Secrets workloads read environment from (their values never enter the config)."""
    config_maps: list[NamespacedName] = Field(default=[], max_length=values.MAX_EXISTING)
    """ConfigMaps workloads mount as scripts."""
    image_streams: list[NamespacedName] = Field(default=[], max_length=values.MAX_EXISTING)
    """ImageStreams whose images workloads pull from the internal registry."""


class ScriptConfigMap(Strict):
    """A ConfigMap of scripts the stack ships (training scripts, shell wrappers)."""

    COLLECTION: ClassVar[str] = "scripts"
    name: K8sName
    """ConfigMap name."""
    namespace: K8sName
    """Its namespace."""
    files: dict[values.FileKey, values.Text] = Field(min_length=1, max_length=values.MAX_SCRIPT_FILES)
    """File name -> content."""
    source: str = ""
    """Where the script comes from."""


class ImageBuild(Strict):
    """An image the stack builds: an ImageStream and a BuildConfig (inline Dockerfile), pulled from the internal registry."""

    COLLECTION: ClassVar[str] = "images"
    name: values.ImageStreamName
    """ImageStream and BuildConfig name."""
    namespace: K8sName
    """Where it is built."""
    tag: str = Field(default="latest", pattern=values.TAG.pattern)
    """The tag the build pushes."""
    dockerfile: Dockerfile = Field(min_length=1)
    """The Dockerfile (FROM ... and what it installs), at most 60,000 bytes. RDMA workloads need rdma-core and libibverbs in it."""
    source: str = ""
    """Where the recipe comes from."""

    @property
    def reference(self) -> str:
        return f"{openshift.INTERNAL_REGISTRY}/{self.namespace}/{self.name}:{self.tag}"


class NodeLevel(Strict):
    """MachineConfigs a cluster admin applies to a pool: each reboots every node of the pool in turn; both off by default."""

    pool: K8sName = "worker"
    """The pool (machineconfiguration.openshift.io/role) of the GPU nodes."""
    crio_memlock_unlimited: bool = False
    """Write /etc/crio/crio.conf.d/99-memlock with default_ulimits memlock=-1:-1: the node-limit strategy
    (KNOWLEDGE.md): every container may pin memory, root or not, with no capability."""
    iommu_passthrough: bool = False
    """Kernel argument iommu=pt (IOMMU passthrough for GPUDirect RDMA; KNOWLEDGE.md ties IBV_WC_LOC_PROT_ERR to ACS/IOMMU)."""
    reason: values.OptionalReason = ""
    """Why the stack asks for them (printed; "": not given, not whitespace)."""
    control_plane_reason: Reason | None = None
    """Required when `pool` is a control-plane pool (master, control-plane, arbiter): each MachineConfig drains and
    reboots the API server's nodes one by one. Right only where they are the GPU nodes too (a compact cluster)."""

    @model_validator(mode="after")
    def _not_the_control_plane(self) -> Self:
        if self.pool in openshift.CONTROL_PLANE_POOLS and not self.control_plane_reason:
            raise FieldError(
                ("pool",),
                f"{self.pool!r} is the control plane's pool: its MachineConfigs would drain and reboot the API server's nodes one "
                "by one. Name the GPU nodes' pool (`oc get machineconfigpool`, usually worker or a gpu pool), or set "
                "node_level.control_plane_reason if the control-plane nodes really are the GPU nodes (a compact cluster)",
            )
        return self


# Kueue's bound on a ResourceFlavor's nodeLabels (resourceflavor_types.go MaxProperties; its tolerations': MAX_TOLERATIONS):
# gpu_node_selector and a set's labels together (rule queue-flavors).
KUEUE_MAX_LABELS = 8
PriorityValue = Annotated[int, Field(strict=True, ge=-(2**31), le=2**31 - 1)]  # a WorkloadPriorityClass's value (an int32)


class PodsReady(Strict):
    """Kueue's waitForPodsReady as the stack counts on it: a setting of the Kueue manager the platform admin makes (the Red
    Hat build: `gangScheduling.policy: ByWorkload`), recorded so `python -m stacks status` can say it."""

    enabled: bool = True
    """Whether the Kueue manager runs waitForPodsReady: an admitted workload whose pods are not all Ready within
    `timeout_minutes` is evicted (its pods deleted, its quota released) and queued again."""
    timeout_minutes: int = Field(strict=True, default=5, ge=1, le=24 * 60)
    """The manager's waitForPodsReady.timeout in minutes (Kueue's default: 5)."""


class Queueing(Strict):
    """Gang admission through Kueue, installed by the platform admin (docs/shared-clusters.md): a ResourceFlavor per node
    set, one ClusterQueue, a LocalQueue per project; every workload and bandwidth check is admitted whole or not at all."""

    cluster_queue: K8sName
    """Name of the ClusterQueue this stack declares (cluster-scoped: unique on the cluster)."""
    local_queue: K8sName = "gpu-training"
    """Name of the LocalQueue declared in each of the stack's namespaces; every workload carries it as
    kueue.x-k8s.io/queue-name. Kueue refuses to change it on a running workload."""
    quota: dict[K8sName, dict[values.QuotaResource, values.Quantity]] = Field(default={}, max_length=values.MAX_NODE_SETS)
    """Nominal quota per node set and resource, where the stack may use less than the set holds: `{"main":
    {"nvidia.com/gpu": "16"}}`. A resource not stated gets the set's total (GPUs, cpu and memory where the set states
    them, one SR-IOV VF per GPU; `pods`: nodes x 110). Only resources the pods request (and `pods`) are quotas."""
    pods_ready: PodsReady = PodsReady()
    """What the stack expects of the Kueue manager's waitForPodsReady (a manager setting, not an object field)."""
    managed_namespace_label: bool = True
    """Label the stack's namespaces kueue.openshift.io/managed=true, which the Red Hat build of Kueue needs (platform
    tier). false: upstream Kueue, or the admin labels them."""
    priority_classes: dict[K8sName, PriorityValue] = Field(default={}, max_length=values.MAX_PRIORITY_CLASSES)
    """WorkloadPriorityClasses this stack declares, name -> value (higher: admitted first): a workload's `priority`."""
    topology_aware: bool = False
    """Let Kueue's Topology Aware Scheduling admit a run only when each of its pods fits a Ready node of its set (a
    Topology of kubernetes.io/hostname on every ResourceFlavor); needs a Kueue that runs TAS. false: Kueue admits by
    quota only (docs/shared-clusters.md "Admitted whole on the nodes")."""
