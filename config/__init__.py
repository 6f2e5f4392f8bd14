"""The configuration: the typed model of a cluster's config, where each value was written (provenance), the
project folder, and the JSON schema of the YAML form. The bottom layer: it imports no other package of the
program, and every other package reads it (docs/architecture.md).

Its modules, each importing only those above it in this list:
- values.py: names, quantities and paths checked as the API server checks them, the field types, the bounds (MAX_*),
  the names reserved in every pod, what the kubelet does to env values;
- openshift.py: facts of the platform the config is judged by (the SCCs OpenShift ships, its namespaces, ...);
- errors.py: errors that name the object and the field, the stand-ins that let a stack module run on, `Strict`;
- cluster.py: node sets, fabric, storage, security and the other objects of a cluster;
- workloads.py: Workload, its TCP variants, mounts and ports, BandwidthCheck;
- stack.py: ClusterConfig and its checks across fields;
- provenance.py, project.py, schema.py.

The cluster modules in clusters/ import their vocabulary from here: `from config import Workload, NodeSet, ...`;
the program imports each name from the module that defines it.
"""

from config.cluster import (
    DeviceObservation,
    ExistingObjects,
    ImageBuild,
    NamespacedName,
    NodeLevel,
    NodeSet,
    PodsReady,
    PvcStorageClassFix,
    Queueing,
    RdmaFabric,
    ScriptConfigMap,
    Security,
    ServiceAccount,
    SriovAttachment,
    SriovNodePolicy,
    StorageClass,
    Toleration,
    Volume,
)
from config.stack import AcceptedWarning, ClusterConfig, Defaults, HandMade
from config.workloads import BandwidthCheck, ContainerPort, Mount, ScriptMount, SecretKeyRef, TcpVariant, Workload

__all__ = [
    "AcceptedWarning",
    "BandwidthCheck",
    "ClusterConfig",
    "ContainerPort",
    "Defaults",
    "DeviceObservation",
    "ExistingObjects",
    "HandMade",
    "ImageBuild",
    "Mount",
    "NamespacedName",
    "NodeLevel",
    "NodeSet",
    "PodsReady",
    "PvcStorageClassFix",
    "Queueing",
    "RdmaFabric",
    "ScriptConfigMap",
    "ScriptMount",
    "SecretKeyRef",
    "Security",
    "ServiceAccount",
    "SriovAttachment",
    "SriovNodePolicy",
    "StorageClass",
    "TcpVariant",
    "Toleration",
    "Volume",
    "Workload",
]
