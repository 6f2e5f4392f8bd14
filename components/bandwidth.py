"""A bandwidth check: an all-reduce benchmark Job that gates the rollout of the workloads of its transport.

The check is a workload (`ClusterConfig.bandwidth_workload`) rendered by the same function as every
training workload (`training.workload_objects`), so its pods carry the same networks annotation,
SR-IOV requests, SCC, memlock strategy and launcher as training pods of the same transport: what it
measures is the network training gets. Inside the pod the launcher runs its usual checks and execs
components/launcher/bandwidth.py (shipped in the same ConfigMap), which benchmarks, judges and
exits 1 on failure; with backoffLimit 0 the Job is then Failed.

Unlike a training Job, `pulumi up` waits for this one (the provider's Job await: Complete, or Failed
at once for BackoffLimitExceeded and DeadlineExceeded), at most deadline_minutes plus a margin; the
Job's activeDeadlineSeconds, which counts Pending time too, ends it before that. The workloads of its
transport are declared after it, so a slow fabric stops the rollout before training starts.

It runs again only when asked: its Job is named NAME-DIGEST, DIGEST covering the fabric and the
check's own config (run_number included). An unchanged stack keeps the finished Job and does nothing;
a changed fabric or a raised run_number is a new Job, and the old one is deleted after it. A failed
check fails every `pulumi up` at once (the provider sees the Failed Job again) until the fabric is
fixed and run_number raised, or the check is disabled; nothing replaces it in a loop.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from components.training import workload_objects
from config.stack import ClusterConfig
from config.workloads import CHECK_DIGEST
from config.workloads import BandwidthCheck as CheckConfig


def job_name(config: ClusterConfig, check: CheckConfig) -> str:
    """NAME-DIGEST: a new Job (a new run) exactly when the fabric or the check changes."""
    fabric = config.fabric.model_dump(mode="json") if config.fabric else None
    text = json.dumps({"fabric": fabric, "check": check.model_dump(mode="json")}, sort_keys=True)
    return f"{check.name}-{hashlib.sha256(text.encode()).hexdigest()[:CHECK_DIGEST]}"


def bandwidth_objects(config: ClusterConfig, check: CheckConfig) -> list[dict[str, Any]]:
    """The headless Service, NetworkPolicy and Indexed Job of one check (the launcher ConfigMap is
    the namespace's)."""
    return workload_objects(config, config.bandwidth_workload(check), job_name(config, check), check.deadline_minutes * 60)
