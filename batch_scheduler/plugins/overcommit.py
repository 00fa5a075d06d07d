"""overcommit: admit jobs (enqueue) while their minResources fit in idle × ``overcommit-factor`` — Volcano's overcommit plugin.

Idle is what the usable nodes hold, times the factor (default 1.2, so a little more is
admitted than fits and allocate always has work), minus what all schedulers allocated.
Admitted jobs reserve their minResources: Inqueue jobs all of them, Running jobs (with
at least minMember tasks placed) the part of what they hold their minResources covers.
A job fits when its minResources plus those reservations stay within idle in every
resource it asks for; what its scheduling-gated pods ask for is not reserved (Volcano's
``DeductSchGatedResources``). A job without minResources is admitted (a permit, as in
Volcano). A factor below 1 is Volcano's default instead (the conf loader warns).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from batch_scheduler.arguments import Arguments, number
from batch_scheduler.framework import PluginBase, SessionView
from batch_scheduler.jobs import JobInfo
from batch_scheduler.plugins.proportion import (
    allocated_tasks,
    deduct_gated,
    fmt,
    inqueue_part,
)
from batch_scheduler.reasons import PendingReason
from batch_scheduler.tasks import shareable
from batch_scheduler.vector import Vector, amount_text
from batch_scheduler.votes import PERMIT, Vote, VoteKind

FACTOR = "overcommit-factor"
DEFAULT_FACTOR = 1.2


class OvercommitArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset({FACTOR})
    factor: float = DEFAULT_FACTOR

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        factor = number(arguments, FACTOR, DEFAULT_FACTOR, minimum=float("-inf"))
        return cls(factor=factor if factor >= 1.0 else DEFAULT_FACTOR)


class OvercommitPlugin(PluginBase[OvercommitArguments]):
    def open(self, ssn: SessionView) -> None:
        super().open(ssn)
        cols, n = ssn.columns, ssn.n
        usable = ssn.allowed & ~cols.unschedulable[:n]
        self.used = Vector.from_amounts(
            shareable({r: int(cols.allocated[i, :n][usable].sum()) for i, r in enumerate(cols.resources)})
        )
        self.idle = ssn.total.copy().multi(self.args.factor).sub(self.used)
        self.inqueue = Vector()
        for job in ssn.jobs.values():
            if job.min_resources is None:
                continue
            if job.phase == "Inqueue":
                self.inqueue.add(deduct_gated(job, job.min_resources))
            elif job.phase == "Running" and allocated_tasks(job) >= job.min_member:
                self.inqueue.add(deduct_gated(job, inqueue_part(job)))

    def enqueueable(self, job: JobInfo) -> Vote:
        need = job.min_resources
        if need is None:
            return PERMIT
        ok, short = (self.inqueue + need).less_equal_in(self.idle, need)
        if ok:
            return PERMIT
        r = short[0]
        left = self.idle.get(r) - self.inqueue.get(r)
        return Vote(
            VoteKind.REJECT,
            condition=PendingReason.NOT_ENOUGH_RESOURCES,
            reason=(
                f"cluster: job needs {r} {fmt(r, need.get(r))} to start, only {amount_text(r, max(left, 0.0), down=True)} can be admitted "
                f"({fmt(r, self.ssn.total.get(r))} allocatable × overcommit-factor {self.args.factor:g}, "
                f"{fmt(r, self.used.get(r))} allocated, {fmt(r, self.inqueue.get(r))} reserved by admitted jobs)"
            ),
        )

    def enqueued(self, job: JobInfo) -> None:
        if job.min_resources is not None:
            self.inqueue.add(deduct_gated(job, job.min_resources))
