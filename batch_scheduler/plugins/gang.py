"""gang: a job starts whole or not at all — Volcano's gang plugin.

- valid: enough pods exist — per task role (``minTaskMember``, when minMember covers the
  roles' minimums) and in all (minMember); otherwise the job is not scheduled this session;
- ready: at least minMember tasks placed (best-effort pending ones count), each role's
  minimum, and each subgroup family's minSubGroups subgroups ready; allocate commits only
  ready jobs; a family with fewer subgroups than its minimum makes the job not valid;
- pipelined: the same, pipelined tasks counting;
- starving: fewer than minMember tasks placed or pipelined (preempt and reclaim help these);
- job order: jobs not yet ready go first, so a half-placed gang is finished before new ones;
- preemptable / reclaimable (unless ``enablePreemptable`` / ``enableReclaimable`` is off):
  a job loses tasks only while it keeps more than minMember ready — a job with minMember 1
  and one running task keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence

from batch_scheduler.arguments import Arguments
from batch_scheduler.framework import PluginBase
from batch_scheduler.jobs import JobInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.subjobs import ready_families
from batch_scheduler.tasks import TaskInfo
from batch_scheduler.votes import Refusal


class GangPlugin(PluginBase[Arguments]):
    def why_not_schedulable(self, job: JobInfo) -> Refusal | None:
        if not job.check_task_valid():
            short = ", ".join(f"{role or '(no role)'} {need}" for role, need in job.min_task_member.items())
            return Refusal(
                f"gang: not enough pods of each task role exist (minTaskMember {short}); waiting for them "
                "to be created",
                PendingReason.NOT_ENOUGH_PODS,
            )
        for family, minimum in job.min_sub_jobs.items():
            exist = sum(1 for s in job.sub_jobs if s.family == family)
            if exist < minimum:
                return Refusal(
                    f"gang: {exist}/{minimum} subgroups of {family} exist (minSubGroups {minimum}); waiting for "
                    "their pods to be created",
                    PendingReason.NOT_ENOUGH_PODS,
                )
        valid = job.valid_count
        if valid < job.min_member:
            return Refusal(
                f"gang: {valid}/{job.min_member} pods exist (minMember {job.min_member}); waiting for the "
                "rest to be created",
                PendingReason.NOT_ENOUGH_PODS,
            )
        return None

    def job_ready(self, job: JobInfo) -> bool:
        return job.check_task_ready() and ready_families(job) and job.is_ready()

    def job_pipelined(self, job: JobInfo) -> bool:
        return job.check_task_pipelined() and ready_families(job, pipelined=True) and job.is_pipelined()

    def job_starving(self, job: JobInfo) -> bool:
        return job.is_starving()

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        ra, rb = a.is_ready(), b.is_ready()
        return (ra > rb) - (ra < rb)  # not ready first

    def _protect(self, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        left: dict[str, int] = {}
        out = []
        for c in candidates:
            job = self.ssn.jobs[c.job]
            occupied = left.setdefault(c.job, job.ready_count)
            if occupied > job.min_member:
                out.append(c)
                left[c.job] = occupied - 1
        return out

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._protect(candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._protect(candidates)
