"""The simulated cluster's nodes: Node objects built from a stack's own config, for kwok to run as fake kubelets.

Per cluster:
- one Node per GPU node its `node_sets` name (named sets: the names; counted sets: `live-SET-N`), offering the set's
  `gpus_per_node` as nvidia.com/gpu, `allocatable_cpu` / `allocatable_memory` where the config gives them, and the
  SR-IOV VFs of every resource its `fabric.attachments` name: as many as the set's `node_policies` make (num_vfs per
  PF: NodeSet.vfs_per_node) where they name the resource, else one per GPU (VFS_PER_GPU);
- labelled as `gpu_node_selector` requires and tainted with what `gpu_tolerations` tolerate, as on the cluster
  (CLUSTER-FACTS "Scheduling": Barcelona's and Cairo's GPU nodes carry nvidia.com/gpu:NoSchedule, NERC's
  nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3:NoSchedule);
- one worker without GPUs, and one control-plane node with OpenShift's NoSchedule taint, so a pod that loses its
  GPU request, selector or toleration lands somewhere it must not, or nowhere, instead of on a GPU node.

Every node carries kwok's annotation (FAKE), the only nodes kwok manages, and the label NODE_SET naming its set, so
a test can tell where the scheduler put a pod.

What the config does not say, and the defaults (documented in docs/live.md):
- CPU and memory where a node set gives none: the preflight does not check them then ("None: not known, not
  checked"), so the nodes offer the most the config model accepts of one node (4096 cores, 64Ti): never the reason
  a pod stays Pending. The worker and the control-plane node get the same.
- VFs of a resource no node policy of the set names: no fact names the cluster admin's numVfs. One VF of each
  attachment's resource per GPU is what the preflight assumes then (it counts VFs only where node policies state
  them): every pod requests at least one GPU and one VF per attachment, so a placement that fits the GPUs fits the
  VFs. Where the set's node policies state fewer, the nodes offer fewer, and a pod the VFs cannot serve stays Pending
  here as on the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from config.kube import GPU

if TYPE_CHECKING:
    from config.cluster import NodeSet
    from config.stack import ClusterConfig

FAKE = "kwok.x-k8s.io/node"  # =fake: kwok's --manage-nodes-with-annotation-selector
NODE_SET = "live.gpu-training.local/node-set"
DEFAULT_CPU = "4096"
DEFAULT_MEMORY = "64Ti"
MAX_PODS = "110"  # the kubelet's default
VFS_PER_GPU = 1
WORKER = "live-worker-0"
CONTROL_PLANE = "live-master-0"


def node(name: str, labels: dict[str, str], resources: dict[str, str], taints: list[dict[str, str]]) -> dict[str, Any]:
    """A Node as a kubelet registers it: its status (capacity = allocatable) is what the scheduler reads."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", **labels},
        },
        "spec": {"taints": taints},
        "status": {"capacity": resources, "allocatable": resources},
    }


def gpu_taints(config: ClusterConfig) -> list[dict[str, str]]:
    """One taint per toleration of `gpu_tolerations`: the value it names (Equal) or none (Exists), its effect or NoSchedule."""
    taints = []
    for t in config.gpu_tolerations:
        taint = {"key": t.key, "effect": t.effect or "NoSchedule"}
        if t.value is not None:
            taint["value"] = t.value
        taints.append(taint)
    return taints


def vfs(config: ClusterConfig, node_set: NodeSet) -> dict[str, str]:
    """The SR-IOV resources a GPU node of `node_set` offers, per attachment's resource: what the set's node policies make
    of it (num_vfs per PF), else VFS_PER_GPU per GPU for each attachment naming it."""
    stated = node_set.vfs_per_node
    per_resource: dict[str, int] = {}
    for a in config.fabric.attachments if config.fabric else []:
        if a.resource in stated:
            per_resource[a.resource] = stated[a.resource]
        else:
            per_resource[a.resource] = per_resource.get(a.resource, 0) + VFS_PER_GPU * node_set.gpus_per_node
    return {r: str(n) for r, n in per_resource.items()}


def nodes(config: ClusterConfig) -> list[dict[str, Any]]:
    """Every Node of the cluster's simulation, GPU nodes in node_sets order first."""
    out = []
    base = {"cpu": DEFAULT_CPU, "memory": DEFAULT_MEMORY, "pods": MAX_PODS}
    taints = gpu_taints(config)
    for s in config.node_sets:
        names = list(s.nodes) or [f"live-{s.name}-{i}" for i in range(s.count or 0)]
        resources = {
            **base,
            "cpu": str(s.allocatable_cpu or DEFAULT_CPU),
            "memory": str(s.allocatable_memory or DEFAULT_MEMORY),
            GPU: str(s.gpus_per_node),
            **vfs(config, s),
        }
        # The set's own labels too: its pods select them (and a queued cluster's ResourceFlavor adds them to its pods).
        labels = {"node-role.kubernetes.io/worker": "", NODE_SET: s.name, **config.gpu_node_selector, **s.labels}
        out += [node(n, labels, resources, taints) for n in names]
    out.append(node(WORKER, {"node-role.kubernetes.io/worker": ""}, base, []))
    out.append(
        node(
            CONTROL_PLANE,
            {"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": ""},
            base,
            [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}],
        )
    )
    return out
