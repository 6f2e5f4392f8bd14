"""A bandwidth check: an all-reduce benchmark Job whose failure fails `pulumi up`.

The check is a workload (`ClusterConfig.bandwidth_workload`) rendered by the same function as every
training workload (`training.workload_objects`), so its pods carry the same networks annotation,
SR-IOV requests, SCC, memlock strategy and launcher as training pods of the same transport: what it
measures is the network training gets. Inside the pod the launcher runs its usual checks and execs
components/launcher/bandwidth.py (shipped in the same ConfigMap), which benchmarks, judges and
exits 1 on failure; with backoffLimit 0 the Job is then Failed.

What the user sees: pulumi-kubernetes waits for a Job until its Complete condition is True and fails
the update as soon as its Failed condition is True (the await logic documented on
kubernetes:batch/v1:Job; pulumi/pulumi-kubernetes#633). `pulumi up` shows
`Waiting for Job "NAMESPACE/NAME" to succeed`, and on failure an error on the Job resource that it
"was successfully created, but the Kubernetes API server reported that it failed to fully initialize
or become live", with "Job has reached the specified backoff limit -- [BackoffLimitExceeded]". The
reason is in the pod log: `oc logs -n NAMESPACE job/NAME` ends with the verdict, and
`python -m stacks bandwidth-report LOG --stack STACK --check NAME` gives it again from a saved log.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi

from components.kube import declare
from components.launcher.bandwidth import threshold_gbytes
from components.training import Names, workload_objects
from stacks.model import BandwidthCheck as CheckConfig
from stacks.model import ClusterConfig

# pulumi-kubernetes keeps waiting on a Job that failed in an earlier update; with this annotation it
# replaces it instead, so the next `pulumi up` after a fix runs the check again.
REPLACE_UNREADY = "pulumi.com/replaceUnready"


def bandwidth_objects(config: ClusterConfig, check: CheckConfig) -> list[dict[str, Any]]:
    """The headless Service and the Indexed Job of one check (the launcher ConfigMap is the namespace's)."""
    *support, job = workload_objects(config, config.bandwidth_workload(check))
    meta = job["metadata"]
    job = {**job, "metadata": {**meta, "annotations": {**meta.get("annotations", {}), REPLACE_UNREADY: "true"}}}
    return [*support, job]


def check_outputs(config: ClusterConfig, check: CheckConfig) -> dict[str, Any]:
    """What a user or a tool reads about a check from the stack outputs."""
    rate = config.bandwidth_line_rate_gbps(check)
    w = config.bandwidth_workload(check)
    return {
        "namespace": check.namespace,
        "job": check.name,
        "mode": check.transport,
        "tool": check.tool,
        "nodes": check.nodes,
        "gpus_per_node": check.gpus_per_node,
        "pods": [Names(w).pod(r) for r in range(check.nodes)],
        "line_rate_gbps": rate,
        "min_fraction": check.min_fraction,
        # nccl-tests' unit, GB/s (1e9 bytes/s): the least bus bandwidth that passes; None reports only.
        "min_busbw_gbytes_per_s": None if rate is None else round(threshold_gbytes(rate, check.min_fraction), 3),
        "report": f"oc logs -n {check.namespace} job/{check.name} | python -m stacks bandwidth-report - "
        f"--stack {config.name} --check {check.name}",
    }


class BandwidthCheck(pulumi.ComponentResource):
    """Headless Service + Indexed Job running the all-reduce check."""

    def __init__(
        self, config: ClusterConfig, check: CheckConfig, after: Sequence[pulumi.Resource] = (), opts: pulumi.ResourceOptions | None = None
    ) -> None:
        """`after`: what the pods need before they can start (grant, networks, claims, launcher)."""
        super().__init__("gpu-training:index:BandwidthCheck", f"{check.namespace}/{check.name}", None, opts)
        *support, job = bandwidth_objects(config, check)
        declared = [declare(obj, pulumi.ResourceOptions(parent=self)) for obj in support]
        # The Job's template is immutable: a changed check is a new Job (deleted first: same name).
        # Its create waits for the Job to succeed; Pending time for free GPUs counts against the timeout.
        wait = f"{check.timeout_minutes}m"
        declare(
            job,
            pulumi.ResourceOptions(
                parent=self,
                delete_before_replace=True,
                depends_on=[*declared, *after],
                custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait),
            ),
        )
        self.register_outputs({"job": f"{check.namespace}/{check.name}"})
