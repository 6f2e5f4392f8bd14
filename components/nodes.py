"""Node-level objects for cluster admins: MachineConfigs for the GPU nodes' pool.

- CRI-O memlock drop-in: makes the node-limit memlock strategy real (KNOWLEDGE.md 4: CRI-O clears
  rlimits and applies only `default_ulimits`; there is no per-pod annotation, and
  ContainerRuntimeConfig has no ulimit field).
- IOMMU passthrough (`iommu=pt`) for GPUDirect RDMA.

The Machine Config Operator drains and reboots every node of the pool, one at a time, to apply each
one (a file under /etc/crio is not covered by the default node-disruption policies; a kernel argument
always reboots). Both are off by default; docs/stacks.md says who applies them.
"""

from __future__ import annotations

import base64
from typing import Any

from components.kube import MANAGED_BY, Sourced
from config.stack import ClusterConfig

IGNITION_VERSION = "3.2.0"  # accepted by every OpenShift 4.x this program targets
CRIO_MEMLOCK_PATH = "/etc/crio/crio.conf.d/99-memlock"
CRIO_MEMLOCK = '[crio.runtime]\ndefault_ulimits = ["memlock=-1:-1"]\n'


def _machine_config(name: str, role: str, spec: dict[str, Any], reason: str) -> dict[str, Any]:
    annotations = {"gpu-training/reason": reason} if reason else {}
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {**MANAGED_BY, "machineconfiguration.openshift.io/role": role}, "annotations": annotations},
        "spec": spec,
    }


def node_objects(config: ClusterConfig) -> list[Sourced]:
    nl = config.node_level
    objs: list[Sourced] = []
    if nl.crio_memlock_unlimited:
        data = base64.b64encode(CRIO_MEMLOCK.encode()).decode()
        file = {
            "path": CRIO_MEMLOCK_PATH,
            "mode": 0o644,
            "overwrite": True,
            "contents": {"source": f"data:text/plain;charset=utf-8;base64,{data}"},
        }
        spec: dict[str, Any] = {"config": {"ignition": {"version": IGNITION_VERSION}, "storage": {"files": [file]}}}
        objs.append((("node_level", "crio_memlock_unlimited"), _machine_config(f"99-{nl.pool}-crio-memlock", nl.pool, spec, nl.reason)))
    if nl.iommu_passthrough:
        spec = {"config": {"ignition": {"version": IGNITION_VERSION}}, "kernelArguments": ["iommu=pt"]}
        objs.append((("node_level", "iommu_passthrough"), _machine_config(f"99-{nl.pool}-iommu-passthrough", nl.pool, spec, nl.reason)))
    return objs
