"""What `python -m stacks diff` says of an edit of a queued stack: a change of the pods' shape replaces the workload and
queues it again, an image change restarts it in place, a start and a new run wait in the queue."""

from __future__ import annotations

from typing import Any

import pytest

from components.program import objects
from config.stack import ClusterConfig
from tests import fixtures
from tests.fixtures import queued_config
from tools.diff import consequence, diff_trees


def tree(c: ClusterConfig) -> dict[str, Any]:
    return {f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in objects(c)}


def said(before: ClusterConfig, after: ClusterConfig, label: str) -> str | None:
    (change,) = [c for c in diff_trees(tree(before), tree(after)) if c.label == label]
    return consequence(change)


class TestDiff:
    @pytest.mark.parametrize(
        "edit",
        [lambda w: w.update(gpus_per_node=1), lambda w: w.update(memory="32Gi"), lambda w: w.update(ports=[{"name": "tb", "port": 6006}])],
    )
    def test_a_change_of_the_pods_shape_replaces_and_requeues(self, edit: Any) -> None:
        text = said(
            queued_config("roce"), queued_config("roce", edit=lambda d: edit(fixtures.workload(d, "solo"))), "StatefulSet team-b/solo"
        )
        assert text is not None and text.startswith("REPLACES the object: Kueue refuses a change") and "REQUEUED" in text
        plain = said(
            fixtures.config("roce"), fixtures.config("roce", lambda d: edit(fixtures.workload(d, "solo"))), "StatefulSet team-b/solo"
        )
        assert plain is not None and plain.startswith("RESTARTS")

    def test_an_image_change_restarts_in_place(self) -> None:
        text = said(
            queued_config("roce"),
            queued_config("roce", edit=lambda d: fixtures.workload(d, "solo").update(image=fixtures.EXAMPLE)),
            "StatefulSet team-b/solo",
        )
        assert text is not None and text.startswith("RESTARTS")

    def test_a_start_and_a_new_run_wait_in_the_queue(self) -> None:
        text = said(
            queued_config("roce"),
            queued_config("roce", edit=lambda d: d["workloads"][0]["tcp_variants"][0].update(state="running", alongside=True)),
            "StatefulSet team-a/dev-tcp",
        )
        assert text is not None and text.startswith("QUEUED: it waits in the queue")
        changes = diff_trees(
            tree(queued_config("roce")), tree(queued_config("roce", edit=lambda d: fixtures.workload(d, "train").update(run_number=2)))
        )
        (added,) = [c for c in changes if c.status == "added"]
        assert added.label == "Job team-a/train-r2" and (consequence(added) or "").startswith("QUEUED")
