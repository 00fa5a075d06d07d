"""drf: dominant resource fairness between jobs.

A job's share is its largest fraction of any cluster resource it holds; the job with the
smaller share goes first, so a CPU-heavy and a GPU-heavy job progress alike. As a
preempt voter it lets a victim go only when its job keeps at least the preemptor's share.
``enableHierarchy`` (hierarchical DRF over queue paths) is accepted; hierarchical
queues are the capacity plugin's job here, and DRF stays flat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from batch_scheduler.framework import check_arguments
from batch_scheduler.info import JobInfo, TaskInfo

if TYPE_CHECKING:
    from batch_scheduler.session import Session

SHARE_DELTA = 1e-6


def dominant_share(allocated: Mapping[str, int], total: Mapping[str, int]) -> float:
    share = 0.0
    for name, amount in allocated.items():
        t = total.get(name, 0)
        share = max(share, amount / t if t > 0 else (1.0 if amount > 0 else 0.0))
    return share


class DrfPlugin:
    name = "drf"

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> DrfPlugin:
        check_arguments(cls.name, arguments)
        return cls()

    def open(self, ssn: Session) -> None:
        self.ssn = ssn

    def share(self, job: JobInfo) -> float:
        return dominant_share(job.allocated, self.ssn.total)

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        sa, sb = self.share(a), self.share(b)
        if abs(sa - sb) <= SHARE_DELTA:
            return 0
        return -1 if sa < sb else 1

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        jobs, total = self.ssn.jobs, self.ssn.total
        mine = dominant_share(jobs[preemptor.job].allocated + preemptor.resreq, total)
        left: dict[str, Mapping[str, int]] = {}
        out = []
        for c in candidates:
            remaining = left.get(c.job, jobs[c.job].allocated) - c.resreq  # type: ignore[operator]
            theirs = dominant_share(remaining, total)
            if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
                out.append(c)
                left[c.job] = remaining
        return out
