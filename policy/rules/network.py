"""Networks: the NADs a pod attaches exist where it sees them, it requests their SR-IOV resources, NCCL's interface and
HCA settings select what it will have, and the node policies make the VFs."""

from collections import Counter
from collections.abc import Iterator
from functools import partial

from config.cluster import NodeSet
from config.kube import HOSTNAME, NETWORKS, RESOURCE_NAME, node_policy_name, operator_network_name
from config.stack import ClusterConfig
from config.values import MAX_CNI_DEPTH, bounded_json
from policy.core import Finding, Stack, amount, error, ref, rule, warning

# Namespaces whose NADs a pod of any namespace may use (OpenShift Multus namespace isolation).
GLOBAL_NAD_NAMESPACES = frozenset({"default", "openshift-multus", "openshift-sriov-network-operator", "openshift-cnv"})
POD_INTERFACES = ("lo", "eth0")  # every pod's besides its attachments (OVN-Kubernetes names the pod network eth0)


def _visible_nads(stack: Stack) -> dict[tuple[str, str], str | None]:
    """(namespace, name) -> resourceName of every NAD the stack knows exists: its own, the source's, the operator's."""
    nads: dict[tuple[str, str], str | None] = {}
    if (fabric := stack.config.fabric) is not None:
        served = stack.config.rdma_namespaces() if fabric.nad_mode == "operator" else []  # it needs sriov (the model)
        nads = {(fabric.nad_source_namespace, a.network): a.resource for a in fabric.attachments}
        nads |= {(ns, operator_network_name(ns, a.network)): a.resource for a in fabric.attachments for ns in served}
    for o in stack.of_kind("NetworkAttachmentDefinition"):
        meta = o.get("metadata") or {}
        nads[(meta.get("namespace") or "default", meta["name"])] = (meta.get("annotations") or {}).get(RESOURCE_NAME)
    return nads


@rule("network-attachments", "every network a pod attaches exists where it can see it; an SR-IOV RDMA pod attaches one (seed 003)")
def network_attachments(stack: Stack) -> Iterator[Finding]:
    nads = _visible_nads(stack)
    fabric = stack.config.fabric
    for pod in stack.pods():
        attach_error = partial(error, pod.ref, pod.at_annotation(NETWORKS))
        refs = pod.network_refs()
        rdma = any(pod.env(c).get("LAUNCHER_MODE") == "rdma" for _, c in pod.containers())
        if rdma and not refs and fabric is not None and fabric.device_access == "sriov":
            yield attach_error(
                "an RDMA pod on an SR-IOV fabric attaches no network: it gets no RDMA device and NCCL falls back to sockets",
                "list the SR-IOV networks in fabric.attachments",
            )
        for r in refs:
            if r.namespace != pod.namespace and r.namespace not in GLOBAL_NAD_NAMESPACES:
                yield attach_error(
                    f"network {r.namespace}/{r.name}: OpenShift lets a pod use NADs of its own namespace ({pod.namespace}) "
                    f"and of {', '.join(sorted(GLOBAL_NAD_NAMESPACES))} only; the pod sandbox is not created",
                    f"copy the NAD into {pod.namespace} (fabric.nad_mode: copy), or reference it in default",
                    missing=True,
                )
            elif (r.namespace, r.name) not in nads:
                yield attach_error(
                    f"network {r.namespace}/{r.name} does not exist where the pod looks for it: the stack does not create "
                    "it and fabric.attachments does not place it there; the pod sandbox is not created",
                    "create a copy in the pod's namespace (fabric.nad_mode: copy with device_access: sriov), or fix "
                    "fabric.nad_source_namespace",
                    missing=True,
                )


@rule("sriov-resources", "a pod requests and limits one SR-IOV resource per attachment (seed 003: 'Insufficient ...')")
def sriov_resources(stack: Stack) -> Iterator[Finding]:
    nads = _visible_nads(stack)
    for pod in stack.pods():
        needed = Counter(backing for r in pod.network_refs() if (backing := nads.get((r.namespace, r.name))))
        containers = list(pod.containers())
        resources = [c.get("resources") or {} for _, c in containers]
        for resource, count in sorted(needed.items()):
            limit = sum(amount(r, "limits", resource) for r in resources)
            request = sum(amount(r, "requests", resource) or amount(r, "limits", resource) for r in resources)
            if limit < count or request < count:
                first = containers[0][0] if containers else pod.at("spec.containers[0]")
                yield error(
                    pod.ref,
                    f'{first}.resources.limits["{resource}"]',
                    f"the pod attaches {count} network(s) backed by {resource} but requests {request} and limits {limit}: "
                    f"no VF is allocated, the scheduler reports 'Insufficient {resource}' or the attachment fails",
                    f"request and limit {resource}: {count} on the training container",
                )


def _nccl_list(value: str) -> tuple[bool, bool, str, list[str]]:
    """(excludes, exact, the list, its names) of an NCCL device list: comma-separated prefixes, `=` exact, `^` excludes."""
    exclude, exact = value.startswith("^"), value.removeprefix("^").startswith("=")
    body = value.removeprefix("^").removeprefix("=")
    return exclude, exact, body, [n.strip() for n in body.split(",") if n.strip()]


@rule("socket-ifname", "NCCL_SOCKET_IFNAME selects interfaces the pod will have (seed 003: 'no socket interface found')")
def socket_ifname(stack: Stack) -> Iterator[Finding]:
    for pod, path, c in stack.containers():
        env = pod.env(c)
        tcp = env.get("LAUNCHER_MODE") == "tcp" or env.get("LAUNCHER_TCP_FALLBACK") == "true"
        var = "NCCL_SOCKET_IFNAME" if "NCCL_SOCKET_IFNAME" in env else "LAUNCHER_TCP_SOCKET_IFNAME" if tcp else ""
        if var not in env:
            continue
        value, interfaces = env[var], list(POD_INTERFACES) + [r.interface for r in pod.network_refs()]
        multi_node = int(env.get("LAUNCHER_NNODES", "1") or 1) > 1
        exclude, exact, _, names = _nccl_list(value)
        selected = [i for i in interfaces if any(i == n if exact else i.startswith(n) for n in names) != exclude]
        if not [i for i in selected if i != "lo" or not multi_node]:
            yield error(
                pod.ref,
                f"{path}.env[{var}]",
                f"{var}={value!r} selects none of the interfaces the pod will have ({', '.join(interfaces)}"
                f"{'; loopback cannot reach the other pods' if multi_node else ''}): NCCL stops with "
                "'Bootstrap: no socket interface found'",
                "name interfaces the pod has (eth0 is the pod network; net1.. are its SR-IOV attachments), "
                "or leave it out and let the launcher choose",
            )


@rule("ib-hca", "a static NCCL_IB_HCA names devices live on every node, exactly where a prefix is ambiguous (seeds 002/003)")
def ib_hca(stack: Stack) -> Iterator[Finding]:
    fabric = stack.config.fabric
    for pod, path, c in stack.containers():
        env = pod.env(c)
        if (value := env.get("NCCL_IB_HCA")) is None or env.get("NCCL_IB_DISABLE") == "1":
            continue  # with IB disabled NCCL never reads the list
        hca_error = partial(error, pod.ref, f"{path}.env[NCCL_IB_HCA]")
        if fabric is None:
            yield hca_error("NCCL_IB_HCA is set on a cluster without an RDMA fabric", "remove it, or set NCCL_IB_DISABLE=1")
            continue
        exclude, exact, body, entries = _nccl_list(value)
        names = [e.partition(":")[0] for e in entries]
        unknown = [n for n in names if n not in fabric.devices]
        if unknown and not exclude:
            seen = [o.source for o in fabric.device_observations if set(unknown) & set(o.devices)]
            yield hca_error(
                f"NCCL_IB_HCA names {', '.join(unknown)}, which are not among the devices live on every node "
                f"(fabric.devices: {', '.join(fabric.devices)})"
                + (f"; they appear in {'; '.join(seen)}" if seen else "")
                + ": NCCL uses only the listed devices that exist and are up, or none",
                "name only devices from fabric.devices, or leave NCCL_IB_HCA unset and let the launcher detect the ACTIVE ports",
            )
        known = set(fabric.devices) | {d for o in fabric.device_observations for d in o.devices}
        clashes = {n: sorted(k for k in known if k != n and k.startswith(n)) for n in names} if not exact else {}
        if listed := "; ".join(f"{n} also selects {', '.join(ks)}" for n, ks in sorted(clashes.items()) if ks):
            yield hca_error(f"NCCL_IB_HCA entries are prefix matches: {listed}", f"write the exact form: {'^' if exclude else ''}={body}")


def _pods_on_one_node(config: ClusterConfig, node_set: NodeSet) -> int:
    """The most running RDMA pods that fit on one node of `node_set` by their GPUs (smallest first)."""
    running = [w for w in config.pod_specs() if w.uses_rdma and getattr(w, "state", "running") == "running"]
    free, count = node_set.gpus_per_node, 0
    for gpus, pods in sorted((w.gpus_per_node, w.nodes) for w in running if config.node_set(w.node_set).name == node_set.name):
        fit = min(pods, free // gpus)
        count, free = count + fit, free - fit * gpus
    return count


def _cni_mtu(cni_config: str | None) -> int | None:
    mtu = bounded_json(cni_config, MAX_CNI_DEPTH).get("mtu") if cni_config else None
    return mtu if type(mtu) is int else None


@rule("sriov-node-policies", "a node set's SR-IOV node policies make enough VFs, with the attachments' MTU, on one named node each")
def sriov_node_policies(stack: Stack) -> Iterator[Finding]:
    config, fabric = stack.config, stack.config.fabric
    if fabric is None or not any(s.node_policies for s in config.node_sets):
        return
    per_pod = Counter(a.resource for a in fabric.attachments)
    mtus = {a.resource: (a.network, m) for a in fabric.attachments if (m := _cni_mtu(a.cni_config)) is not None}
    for i, node_set in enumerate(config.node_sets):
        pods = _pods_on_one_node(config, node_set)
        made = node_set.vfs_per_node
        for j, p in enumerate(node_set.node_policies):
            obj = f"SriovNetworkNodePolicy {fabric.operator_namespace}/{node_policy_name(node_set.name, p.resource, node_set.nodes[0])}"
            need = pods * per_pod[p.resource]
            if made[p.resource] < need and p.resource not in {q.resource for q in node_set.node_policies[:j]}:
                yield error(
                    obj,
                    "spec.numVfs",
                    f"each node gets {made[p.resource]} VF(s) of {p.resource}, and {pods} running RDMA pod(s) of the stack fit on one "
                    f"node, each taking {per_pod[p.resource]}: {need} needed. The last pods stay Pending ('Insufficient {p.resource}')",
                    f"raise num_vfs to {-(-need // max(1, len(p.pf_names)))} (at most 128 on a ConnectX PF)",
                    config=("node_sets", i, "node_policies", j, "num_vfs"),
                )
            if p.mtu is not None and p.resource in mtus and mtus[p.resource][1] != p.mtu:
                network, mtu = mtus[p.resource]
                yield error(
                    obj,
                    "spec.mtu",
                    f"the VFs get MTU {p.mtu}, and network {network}'s CNI config names {mtu}: the pods' interfaces would not carry "
                    "the frames the fabric is set up for (and a larger MTU than the VF's fails the attachment)",
                    f"set mtu to {mtu}, or correct the attachment's cni_config",
                    config=("node_sets", i, "node_policies", j, "mtu"),
                )
    named = {n for s in config.node_sets for n in s.nodes}
    for o in stack.of_kind("SriovNetworkNodePolicy"):
        selector = (o.get("spec") or {}).get("nodeSelector") or {}
        if set(selector) != {HOSTNAME} or selector[HOSTNAME] not in named:
            yield error(
                ref(o),
                "spec.nodeSelector",
                f"it selects {selector or 'every node'}: not one node the stack names. The operator would reconfigure, and "
                "reboot, every node the selector matches",
                "select one node of a node set by kubernetes.io/hostname",
            )


@rule("sriov-node-reboot", "SR-IOV node policies reboot their nodes: the node set says why (node_reboot_reason)")
def sriov_node_reboot(stack: Stack) -> Iterator[Finding]:
    fabric = stack.config.fabric
    for i, node_set in enumerate(stack.config.node_sets):
        if node_set.node_policies and fabric is not None:
            first = node_policy_name(node_set.name, node_set.node_policies[0].resource, node_set.nodes[0])
            yield warning(
                f"SriovNetworkNodePolicy {fabric.operator_namespace}/{first}",
                "spec.nodeSelector",
                f"its {len(node_set.node_policies)} SR-IOV node policy(ies) make the operator drain and reboot "
                f"{', '.join(node_set.nodes)} (one node at a time) whenever one is applied, changed or removed; the stack's "
                f"node_reboot_reason: {node_set.node_reboot_reason}",
                "apply them in a maintenance window; leave the VFs to the cluster admin's own policies once they exist",
                config=("node_sets", i, "node_reboot_reason"),
            )
