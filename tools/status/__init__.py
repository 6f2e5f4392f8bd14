"""Why a run is not running, in the stack file's words (`python -m stacks status`): the cluster's objects (cluster.py),
the scheduler's, the admissions' and Kueue's reasons (reasons.py, queue.py), the report (report.py)."""
