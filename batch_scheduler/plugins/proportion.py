"""proportion: queues share the cluster by weight, within their capability, above their guarantee.

At session open each queue's *deserved* share is computed by water-filling, as Volcano
does: the remaining resources are handed out by weight, a queue never gets more than it
asks for (allocated + pending requests) nor more than its real capability
(``capability``, and the cluster minus the other queues' guarantees), and never less than
its ``guarantee``; what a satisfied queue does not need goes round again. Then:

- queue order: the smaller ``allocated ÷ deserved`` (dominant over resources) goes first;
- allocatable: a task fits its queue when allocated + request stays within deserved;
- overused: a queue at its deserved share in every resource gets nothing more;
- enqueue: a job is admitted while minResources + allocated + admitted stays within the
  real capability;
- reclaim: tasks of queues above their deserved share may be taken back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from batch_scheduler.framework import ABSTAIN, PERMIT, Refusal, Vote, VoteKind, check_arguments
from batch_scheduler.info import JobInfo, QueueInfo, TaskInfo
from cluster.resources import Resources

if TYPE_CHECKING:
    from batch_scheduler.session import Session

EPSILON = 1e-6
Amounts = dict[str, float]


def fmt(name: str, amount: float) -> str:
    """A resource amount as a Kubernetes quantity (cpu in cores or millicores, memory in bytes units)."""
    return Resources({name: int(amount)}).to_quantities().get(name, "0")


def share(allocated: Mapping[str, int], deserved: Mapping[str, float]) -> float:
    """The largest allocated ÷ deserved over resources (1 for a resource held but not deserved)."""
    s = 0.0
    for name, amount in allocated.items():
        d = deserved.get(name, 0.0)
        s = max(s, amount / d if d > EPSILON else (1.0 if amount > 0 else 0.0))
    return s


def elastic(ssn: Session) -> dict[str, Resources]:
    """Per queue, what its running jobs hold beyond their minResources: preemptible slack, not
    counted against the queue when a new job asks to be admitted (as in Volcano)."""
    out = {q: Resources() for q in ssn.queues}
    for job in ssn.jobs.values():
        if job.queue in out and not job.allocated.is_empty:
            extra = Resources({r: max(v - job.min_resources.get(r, 0), 0) for r, v in job.allocated.items()})
            out[job.queue] = out[job.queue] + extra
    return out


def water_fill(total: Mapping[str, int], weights: Mapping[str, int], request: Mapping[str, Amounts],
               capability: Mapping[str, Amounts], guarantee: Mapping[str, Amounts]) -> dict[str, Amounts]:
    """Each queue's deserved share (see the module docstring)."""
    names = list(total)
    remaining = {r: float(total[r]) for r in names}
    deserved = {q: {r: 0.0 for r in names} for q in weights}
    met: set[str] = set()
    for _ in range(64):  # each round hands out what is left; it shrinks geometrically
        active = [q for q in weights if q not in met]
        weight_sum = sum(weights[q] for q in active)
        if not weight_sum:
            break
        before = dict(remaining)
        change = {r: 0.0 for r in names}
        for q in active:
            old = deserved[q]
            asked = request[q]
            new = {r: min(old[r] + before[r] * weights[q] / weight_sum, capability[q][r], asked.get(r, 0.0)) for r in names}
            new = {r: max(new[r], guarantee[q].get(r, 0.0)) for r in names}
            if all(asked.get(r, 0.0) <= new[r] + EPSILON for r in names) or all(
                    abs(new[r] - old[r]) <= EPSILON for r in names):
                met.add(q)  # has all it asks for, or all its capability allows
            for r in names:
                change[r] += new[r] - old[r]
            deserved[q] = new
        remaining = {r: before[r] - change[r] for r in names}
        if all(v <= EPSILON for v in remaining.values()) or all(
                abs(remaining[r] - before[r]) <= EPSILON * max(float(total[r]), 1.0) for r in names):
            break
    return deserved


class ProportionPlugin:
    name = "proportion"

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> ProportionPlugin:
        check_arguments(cls.name, arguments)
        return cls()

    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        total = ssn.total
        total_guarantee: Amounts = {}
        for queue in ssn.queues.values():
            for r, v in queue.guarantee.items():
                total_guarantee[r] = total_guarantee.get(r, 0.0) + v
        request: dict[str, Amounts] = {q: {r: float(v) for r, v in info.allocated.items()} for q, info in ssn.queues.items()}
        self.inqueue: dict[str, Resources] = {q: Resources() for q in ssn.queues}
        self.elastic = elastic(ssn)
        for job in ssn.jobs.values():
            if job.queue not in request:
                continue
            req = request[job.queue]
            for t in job.pending():
                for r, v in t.resreq.items():
                    req[r] = req.get(r, 0.0) + v
            if job.phase == "Inqueue" and job.ready_count < job.min_member:
                self.inqueue[job.queue] = self.inqueue[job.queue] + job.min_resources
        self.capability: dict[str, Amounts] = {}
        self.capped: dict[str, set[str]] = {}  # resources where the queue's own capability is the limit
        for q, info in ssn.queues.items():
            cap: Amounts = {}
            self.capped[q] = set()
            for r, amount in total.items():
                limit = float(amount) - total_guarantee.get(r, 0.0) + info.guarantee.get(r, 0)
                if r in info.capability and info.capability[r] <= limit:
                    limit = float(info.capability[r])
                    self.capped[q].add(r)
                cap[r] = limit
            for r in info.capability:
                if r not in cap:  # a resource no usable node has
                    cap[r], self.capped[q] = 0.0, self.capped[q] | {r}
            self.capability[q] = cap
        weights = {q: info.weight for q, info in ssn.queues.items()}
        guarantee = {q: {r: float(v) for r, v in info.guarantee.items()} for q, info in ssn.queues.items()}
        self.deserved = water_fill(total, weights, request, self.capability, guarantee)

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        sa, sb = share(a.allocated, self.deserved[a.name]), share(b.allocated, self.deserved[b.name])
        if abs(sa - sb) <= EPSILON:
            return 0
        return -1 if sa < sb else 1

    def overused(self, queue: QueueInfo) -> Refusal | None:
        deserved = self.deserved[queue.name]
        if all(queue.allocated.get(r, 0) + EPSILON >= d for r, d in deserved.items()):
            held = ", ".join(f"{r} {fmt(r, queue.allocated.get(r, 0))}" for r, d in deserved.items() if d > EPSILON) or "nothing"
            return Refusal(f"queue {queue.name}: at its deserved share ({held}); waits for its running jobs to finish",
                           "QueueShareExceeded")
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        deserved = self.deserved[queue.name]
        for r, v in task.resreq.items():
            if v > 0 and queue.allocated.get(r, 0) + v > deserved.get(r, 0.0) + EPSILON:
                return self._limit(queue, r, v, "task")
        return None

    def _limit(self, queue: QueueInfo, r: str, need: int, what: str) -> Refusal:
        allocated = fmt(r, queue.allocated.get(r, 0))
        if r in self.capped[queue.name] and self.deserved[queue.name].get(r, 0.0) + EPSILON >= self.capability[queue.name][r]:
            cap = fmt(r, self.capability[queue.name][r])
            return Refusal(f"queue {queue.name}: capability {r} {cap} would be exceeded (allocated {allocated}, "
                           f"{what} needs {fmt(r, need)})", "QueueCapabilityExceeded")
        deserved = fmt(r, self.deserved[queue.name].get(r, 0.0))
        why = "; the other queues' weights and requests set it" if len(self.deserved) > 1 else ""
        return Refusal(f"queue {queue.name}: deserved share {r} {deserved} would be exceeded (allocated {allocated}, "
                       f"{what} needs {fmt(r, need)}){why}", "QueueShareExceeded")

    def enqueueable(self, job: JobInfo) -> Vote:
        need = job.min_resources
        if need.is_empty or job.queue not in self.capability:
            return ABSTAIN
        queue = self.ssn.queues[job.queue]
        held = queue.allocated + self.inqueue[job.queue] - self.elastic[job.queue]
        future = held + need
        for r, v in need.items():
            if v > 0 and future.get(r, 0) > self.capability[job.queue].get(r, 0.0) + EPSILON:
                allocated = fmt(r, held.get(r, 0))
                cap = fmt(r, self.capability[job.queue][r])
                kind = "capability" if r in self.capped[job.queue] else "share of the cluster (after guarantees)"
                return Vote(VoteKind.REJECT, condition="QueueCapabilityExceeded", reason=(
                    f"queue {job.queue}: {kind} {r} {cap} would be exceeded (allocated {allocated}, job needs {fmt(r, v)})"))
        return PERMIT

    def enqueued(self, job: JobInfo) -> None:
        if job.queue in self.inqueue:
            self.inqueue[job.queue] = self.inqueue[job.queue] + job.min_resources

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        """Tasks of reclaimable queues, while their queue stays above its deserved share."""
        left: dict[str, Resources] = {}
        out = []
        for c in candidates:
            q = self.ssn.jobs[c.job].queue
            queue = self.ssn.queues[q]
            if not queue.reclaimable:
                continue
            allocated = left.get(q, queue.allocated)
            deserved = self.deserved[q]
            if any(allocated.get(r, 0) > deserved.get(r, 0.0) + EPSILON for r in c.resreq):
                out.append(c)
                left[q] = allocated - c.resreq
        return out
