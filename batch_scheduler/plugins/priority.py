"""priority: higher-priority jobs and tasks go first, and may preempt lower-priority ones.

Priorities come from ``spec.priority`` or the PriorityClass named by the pod (tasks) or
the PodGroup's ``priorityClassName`` (jobs; without one, the default PriorityClass, else 0).
"""

from __future__ import annotations

from collections.abc import Sequence

from batch_scheduler.arguments import Arguments
from batch_scheduler.framework import PluginBase
from batch_scheduler.jobs import JobInfo
from batch_scheduler.tasks import TaskInfo


def _higher_first(a: int, b: int) -> int:
    return (b > a) - (b < a)


class PriorityPlugin(PluginBase[Arguments]):
    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        return _higher_first(a.priority, b.priority)

    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        return _higher_first(a.priority, b.priority)

    def task_order_key(self, task: TaskInfo) -> int:
        return -task.priority

    def job_starving(self, job: JobInfo) -> bool:
        """Fewer tasks placed or pipelined than it has."""
        return job.ready_count + job.pipelined_count < len(job.tasks)

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        """Tasks of lower-priority jobs; within the preemptor's own job, lower-priority tasks."""
        jobs = self.ssn.jobs
        mine = jobs[preemptor.job]
        out = []
        for c in candidates:
            if c.job == preemptor.job:
                if c.priority < preemptor.priority:
                    out.append(c)
            elif jobs[c.job].priority < mine.priority:
                out.append(c)
        return out
