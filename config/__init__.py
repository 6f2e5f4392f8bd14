"""The configuration: the typed model of a cluster's config, where each value was written, its JSON schema. The bottom
layer. Stack modules import their vocabulary from here (`from config import Workload`); the program, from each module."""

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
    "AcceptedWarning", "BandwidthCheck", "ClusterConfig", "ContainerPort", "Defaults", "DeviceObservation", "ExistingObjects",
    "HandMade", "ImageBuild", "Mount", "NamespacedName", "NodeLevel", "NodeSet", "PodsReady", "PvcStorageClassFix", "Queueing",
    "RdmaFabric", "ScriptConfigMap", "ScriptMount", "SecretKeyRef", "Security", "ServiceAccount", "SriovAttachment",
    "SriovNodePolicy", "StorageClass", "TcpVariant", "Toleration", "Volume", "Workload",
]  # fmt: skip
