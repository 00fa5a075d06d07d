"""overcommit: admit jobs (enqueue) while their minResources fit in idle × ``overcommit-factor``.

Idle is what the usable nodes hold, times the factor (default 1.2, so a little more is
admitted than fits and allocate always has work), minus what all schedulers allocated
and what admitted jobs not yet running reserved. A job without minResources is admitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from batch_scheduler.framework import ABSTAIN, PERMIT, Vote, VoteKind, check_arguments, number
from batch_scheduler.info import JobInfo, shareable
from cluster.resources import Resources

if TYPE_CHECKING:
    from batch_scheduler.session import Session

FACTOR = "overcommit-factor"


class OvercommitPlugin:
    name = "overcommit"

    def __init__(self, factor: float) -> None:
        self.factor = factor

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> OvercommitPlugin:
        check_arguments(cls.name, arguments, [FACTOR])
        return cls(number(arguments, FACTOR, 1.2, minimum=1.0))

    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        cols, n = ssn.columns, ssn.n
        usable = ssn.allowed & ~cols.unschedulable[:n]
        used = shareable({r: int(cols.allocated[i, :n][usable].sum()) for i, r in enumerate(cols.resources)})
        self.total = ssn.total
        self.used = used
        self.idle = {r: amount * self.factor - used.get(r, 0) for r, amount in ssn.total.items()}
        self.inqueue = Resources()
        for job in ssn.jobs.values():
            if job.phase == "Inqueue" and job.ready_count < job.min_member:
                self.inqueue = self.inqueue + job.min_resources

    def enqueueable(self, job: JobInfo) -> Vote:
        need = job.min_resources
        if need.is_empty:
            return ABSTAIN
        for name, amount in need.items():
            left = self.idle.get(name, 0.0) - self.inqueue.get(name, 0)
            if amount > left:
                return Vote(VoteKind.REJECT, condition="NotEnoughResources", reason=(
                    f"cluster: job needs {name} {_fmt(name, amount)} to start, only {_fmt(name, max(int(np.floor(left)), 0))} "
                    f"can be admitted ({_fmt(name, self.total.get(name, 0))} allocatable × overcommit-factor {self.factor:g}, "
                    f"{_fmt(name, self.used.get(name, 0))} allocated, {_fmt(name, self.inqueue.get(name, 0))} "
                    "reserved by admitted jobs)"))
        return PERMIT

    def enqueued(self, job: JobInfo) -> None:
        self.inqueue = self.inqueue + job.min_resources


def _fmt(name: str, amount: int) -> str:
    return Resources({name: amount}).to_quantities().get(name, "0")
