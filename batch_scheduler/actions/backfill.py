"""backfill: place best-effort tasks (no requests beyond their pod slot) of admitted jobs on any feasible node.

Each is committed alone: a best-effort pod holds nothing a gang could be short of.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batch_scheduler.statement import Statement

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def run(ssn: Session) -> None:
    key = ssn.tiers.task_key()
    for job in sorted((j for j in ssn.jobs.values() if ssn.admitted(j)), key=ssn.tiers.job_key()):
        tasks = [t for t in job.pending() if t.best_effort]
        if not tasks or not ssn.schedulable(job):
            continue
        for task in sorted(tasks, key=key):
            row = ssn.best_node(task)
            if not isinstance(row, int):
                job.set_reason("NotEnoughResources", f"task {task.name}: {row.reason()}")
                continue
            stmt = Statement(ssn)
            stmt.allocate(task, ssn.columns.names[row])
            stmt.commit()
