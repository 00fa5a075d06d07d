"""capacity: queues as a tree (``spec.parent``), each level with deserved, guarantee and capability.

A queue without a parent hangs off the root, which is the whole cluster. Jobs go to leaf
queues. Per level:

- capability is a hard cap on what the queue's subtree holds (allocate and enqueue check
  every level up to the root, and name the level that refuses);
- deserved is the share reclaim protects: only queues holding more than their deserved
  share lose tasks, and only down to it; below capability, a queue may borrow what others
  leave idle;
- guarantee is kept back from the others: a queue's real capability is at most the
  cluster minus its siblings' guarantees;
- queue order: the smaller ``allocated ÷ deserved`` goes first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from batch_scheduler.framework import ABSTAIN, PERMIT, Refusal, Vote, VoteKind, check_arguments
from batch_scheduler.info import JobInfo, QueueInfo, TaskInfo
from batch_scheduler.plugins.proportion import EPSILON, fmt
from batch_scheduler.vector import Vector

Resources = Vector  # interim: the capacity plugin is being ported to Volcano's semantics


def share(allocated: Vector, deserved: Mapping[str, float]) -> float:
    s = 0.0
    for name, amount in allocated.items():
        d = deserved.get(name, 0.0)
        s = max(s, amount / d if d > EPSILON else (1.0 if amount > 0 else 0.0))
    return s


def elastic(ssn: "Session") -> dict[str, Vector]:
    out = {q: Vector() for q in ssn.queues}
    for job in ssn.jobs.values():
        if job.queue in out:
            out[job.queue].add(job.elastic())
    return out

if TYPE_CHECKING:
    from batch_scheduler.session import Session

ROOT = "root"


class CapacityPlugin:
    name = "capacity"

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> CapacityPlugin:
        check_arguments(cls.name, arguments)
        return cls()

    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        queues = ssn.queues
        self.parent = {q: (info.parent if info.parent in queues and info.parent != q else ROOT) for q, info in queues.items()}
        self.children: dict[str, list[str]] = {}
        for q, p in self.parent.items():
            self.children.setdefault(p, []).append(q)
        self.subtree: dict[str, list[str]] = {q: self._descendants(q) for q in queues}
        self.chain: dict[str, list[str]] = {q: self._ancestors(q) for q in queues}
        self.capability: dict[str, dict[str, float]] = {}
        self.source: dict[str, dict[str, str]] = {}  # which queue's capability sets each limit ('' for none)
        for q in self._top_down():
            parent = self.parent[q]
            parent_cap = self.capability.get(parent) if parent != ROOT else None
            base = {r: float(v) for r, v in ssn.total.items()} if parent_cap is None else dict(parent_cap)
            source = dict(self.source[parent]) if parent != ROOT else {r: "" for r in base}
            siblings = self.children.get(parent, [])
            for r in list(base):
                others = sum((queues[s].guarantee or Vector()).get(r) for s in siblings if s != q)
                if others:
                    base[r], source[r] = max(base[r] - others, 0.0), ""
            for r, v in (queues[q].capability or Vector()).items():
                if float(v) <= base.get(r, 0.0):
                    base[r], source[r] = float(v), q
            self.capability[q] = base
            self.source[q] = source
        self.inqueue = {q: Vector() for q in queues}
        self.elastic = elastic(ssn)
        for job in ssn.jobs.values():
            if job.queue in queues and job.phase == "Inqueue" and job.ready_count < job.min_member and job.min_resources:
                self.inqueue[job.queue].add(job.min_resources)

    def _descendants(self, q: str) -> list[str]:
        out, todo = [], [q]
        while todo:
            x = todo.pop()
            out.append(x)
            todo += self.children.get(x, [])
        return out

    def _ancestors(self, q: str) -> list[str]:
        out, x, seen = [], q, set()
        while x != ROOT and x not in seen:
            seen.add(x)
            out.append(x)
            x = self.parent[x]
        return out

    def _top_down(self) -> list[str]:
        return sorted(self.ssn.queues, key=lambda q: len(self.chain[q]))

    def held(self, q: str) -> Vector:
        total = Vector()
        for d in self.subtree[q]:
            total.add(self.ssn.queues[d].allocated)
        return total

    def _deserved(self, q: str) -> dict[str, float]:
        info = self.ssn.queues[q]
        return {r: float(v) for r, v in info.deserved.items()} if info.deserved is not None else dict(self.capability[q])

    def job_valid(self, job: JobInfo) -> str | None:
        if job.queue in self.children and self.children[job.queue]:
            return f"queue {job.queue} has child queues; jobs go to leaf queues"
        return None

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        sa, sb = share(self.held(a.name), self._deserved(a.name)), share(self.held(b.name), self._deserved(b.name))
        if abs(sa - sb) <= EPSILON:
            return 0
        return -1 if sa < sb else 1

    def _subtree(self, table: Mapping[str, Vector], q: str) -> Vector:
        total = Vector()
        for d in self.subtree[q]:
            total.add(table[d])
        return total

    def _refuse(self, queue: str, need: Vector, admitting: bool, what: str) -> tuple[str, str] | None:
        """Why ``need`` cannot join the queue (some level's capability), or None. When
        ``admitting`` a job, admitted jobs' reservations count and running jobs' slack does not."""
        for level in self.chain.get(queue, []):
            held = self.held(level)
            if admitting:
                held = held + self._subtree(self.inqueue, level) - self._subtree(self.elastic, level)
            for r, v in need.items():
                cap = self.capability[level].get(r, 0.0)
                if v > 0 and held.get(r) + v > cap + EPSILON:
                    name = level if level == queue else f"{level} (parent of {queue})"
                    origin = self.source[level].get(r, "")
                    if origin and origin != level:
                        continue  # an ancestor's capability: refused, and named, at that level
                    if origin == level:
                        limit = f"capability {r} {fmt(r, cap)}"
                    else:
                        limit = f"share of the cluster {r} {fmt(r, cap)} (what sibling queues' guarantees leave)"
                    return (f"queue {name}: {limit} would be exceeded (allocated "
                            f"{fmt(r, held.get(r))}, {what} needs {fmt(r, v)})", "QueueCapabilityExceeded")
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        refused = self._refuse(queue.name, task.resreq, False, "task")
        return Refusal(*refused) if refused else None

    def enqueueable(self, job: JobInfo) -> Vote:
        if job.min_resources is None or job.min_resources.is_empty() or job.queue not in self.capability:
            return ABSTAIN
        refused = self._refuse(job.queue, job.min_resources, True, "job")
        if refused:
            return Vote(VoteKind.REJECT, reason=refused[0], condition=refused[1])
        return PERMIT

    def enqueued(self, job: JobInfo) -> None:
        if job.queue in self.inqueue and job.min_resources is not None:
            self.inqueue[job.queue].add(job.min_resources)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        left: dict[str, Vector] = {}
        out = []
        for c in candidates:
            q = self.ssn.jobs[c.job].queue
            if not self.ssn.queues[q].reclaimable:
                continue
            held = left.get(q, self.held(q))
            deserved = self._deserved(q)
            if any(held.get(r) > deserved.get(r, 0.0) + EPSILON for r, _ in c.resreq.items() if c.resreq.get(r) > 0):
                out.append(c)
                left[q] = held - c.resreq
        return out
