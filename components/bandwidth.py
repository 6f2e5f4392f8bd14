"""A bandwidth check (docs/bandwidth.md): an all-reduce Job that gates the rollout of its transport's workloads, rendered
as a workload so its pods get what that transport's training pods get; components/launcher/bandwidth.py exits 1 on
failure (backoffLimit 0). Its Job is NAME-DIGEST of the fabric and the check: it runs again only when they change."""

import hashlib
import json
from typing import Any

from components.training import workload_objects
from config.stack import ClusterConfig
from config.values import LAUNCHER_DIR
from config.workloads import CHECK_DIGEST, Workload
from config.workloads import BandwidthCheck as CheckConfig

# components/launcher/bandwidth.py in the pod: the launcher ConfigMap is mounted at LAUNCHER_DIR.
BANDWIDTH_BENCH = f"{LAUNCHER_DIR}/bandwidth.py"
# What a check's pods take from the check as a workload's from the workload.
SHARED_FIELDS = "name namespace image service_account nodes gpus_per_node node_set transport memlock privileged_reason cpu memory"
SHARED_FIELDS += " shm_size master_port"


def job_name(config: ClusterConfig, check: CheckConfig) -> str:
    """NAME-DIGEST: a new Job (a new run) exactly when the fabric or the check changes."""
    fabric = config.fabric.model_dump(mode="json") if config.fabric else None
    text = json.dumps({"fabric": fabric, "check": check.model_dump(mode="json")}, sort_keys=True)
    return f"{check.name}-{hashlib.sha256(text.encode()).hexdigest()[:CHECK_DIGEST]}"


def check_workload(config: ClusterConfig, check: CheckConfig) -> Workload:
    rate = config.bandwidth_line_rate_gbps(check)
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
    # model_construct (which fills in the defaults): the check was validated already (its Job is named by job_name).
    return Workload.model_construct(
        **{k: getattr(check, k) for k in SHARED_FIELDS.split()},
        user="bandwidth check",
        source=f"bandwidth check {check.name}",
        kind="job",
        state="running",
        run="command",
        args=args,
        env=env,
        backoff_limit=0,  # a failed measurement is the answer, not something to retry
    )


def bandwidth_objects(config: ClusterConfig, check: CheckConfig) -> list[dict[str, Any]]:
    return workload_objects(config, check_workload(config, check), job_name(config, check), check.deadline_minutes * 60)
