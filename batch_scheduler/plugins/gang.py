"""gang: a job starts whole or not at all.

A job is ready when at least ``minMember`` of its tasks (and ``minTaskMember`` per task
role) are placed; allocate commits only ready jobs. Jobs not yet ready go first, so a
half-placed gang is finished before new ones start. As a preempt or reclaim voter
(unless ``enablePreemptable`` / ``enableReclaimable`` is false) it never takes a running
job below its ``minMember``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from batch_scheduler.framework import check_arguments
from batch_scheduler.info import READY, JobInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from batch_scheduler.session import Session

TASK_SPEC_LABEL = "volcano.sh/task-spec"
_LIVE = frozenset({TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.BOUND, TaskStatus.SUCCEEDED})


def _role(task: TaskInfo) -> str:
    return task.pod.labels.get(TASK_SPEC_LABEL, "")


class GangPlugin:
    name = "gang"

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> GangPlugin:
        check_arguments(cls.name, arguments)
        return cls()

    def open(self, ssn: Session) -> None:
        self.ssn = ssn

    def _roles_short(self, job: JobInfo, statuses: frozenset[TaskStatus]) -> list[str]:
        short = []
        for role, need in job.min_task_member.items():
            have = sum(1 for t in job.tasks.values() if _role(t) == role and t.status in statuses)
            if have < need:
                short.append(f"{role} {have}/{need}")
        return short

    def job_valid(self, job: JobInfo) -> str | None:
        if job.podgroup is None:
            return None
        live = job.count(_LIVE)
        if live < job.min_member:
            return f"gang: {live}/{job.min_member} pods exist (minMember {job.min_member}); waiting for the rest to be created"
        return None

    def job_ready(self, job: JobInfo) -> bool:
        return job.ready_count >= job.min_member and not self._roles_short(job, READY)

    def job_pipelined(self, job: JobInfo) -> bool:
        return job.ready_count + job.pipelined_count >= job.min_member

    def job_starving(self, job: JobInfo) -> bool:
        return job.ready_count + job.pipelined_count < job.min_member

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        ra, rb = self.job_ready(a), self.job_ready(b)
        return (ra > rb) - (ra < rb)  # not ready first

    def _protect(self, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        left: dict[str, int] = {}
        out = []
        for c in candidates:
            job = self.ssn.jobs[c.job]
            occupied = left.setdefault(c.job, job.ready_count)
            if job.min_member <= occupied - 1 or job.min_member <= 1:
                out.append(c)
                left[c.job] = occupied - 1
        return out

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._protect(candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._protect(candidates)
