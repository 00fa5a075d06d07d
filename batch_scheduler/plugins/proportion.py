"""proportion: queues share the cluster by weight, within their capability, above their guarantee — Volcano's proportion plugin.

At session open, for every queue that has jobs, it sums what the queue holds (allocated:
tasks bound, binding, running or allocated) and asks for (allocated plus pending
requests), what its admitted jobs reserve (inqueue: minResources of Inqueue jobs, and of
Running jobs the part of what they hold their minResources covers) and its elastic slack
(what running jobs hold beyond their minResources). Its *real capability* is the cluster
less every queue's guarantee, plus its own guarantee, capped by its ``capability``.
Then each queue's *deserved* share is water-filled as Volcano does: the remaining
resources are handed out by weight, a queue never gets more than its real capability nor
more than it asks for, never less than its guarantee; what a satisfied queue does not
need goes round again. Then:

- queue order: higher ``spec.priority`` first, then the smaller share (the largest
  allocated ÷ deserved over resources);
- overused: a queue whose allocation reached its deserved share in every resource gets
  nothing more this session;
- allocatable (and preemptive, for reclaim): the queue is Open, and allocated + the task's
  request stays within deserved in every resource the task asks for;
- enqueue: the queue is Open, and a job's minResources + allocated + inqueue − elastic
  stays within the real capability in every resource the job asks for;
- reclaimable: tasks of queues holding more than their deserved share, until they are
  down to it.

Allocations, pipelines and evictions in the session update what each queue holds.

As in Volcano every task also counts one ``pods`` (``TaskInfo.resreq``), and the cluster's
pod slots are water-filled with the rest: a queue deserves at most as many pods as it has
placed and pending, so while it has pods waiting its allocation stays below its deserved
pod count — overused then does not hold, and the allocatable check (which, like Volcano's,
leaves ``pods`` out) is what stops it. Scheduling-gated tasks' requests are deducted from
what their job reserves, as Volcano's ``DeductSchGatedResources`` does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from batch_scheduler.arguments import Arguments
from batch_scheduler.framework import PluginBase, SessionView
from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.tasks import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from batch_scheduler.vector import (
    INFINITY,
    ZERO,
    Vector,
    amount_text,
    exceeded_part,
    share,
    vmax,
)
from batch_scheduler.votes import PERMIT, Refusal, Vote, VoteKind
from cluster.model.resources import CPU, MEMORY, PODS

EPSILON = 1e-6


def fmt(name: str, amount: float) -> str:
    """A Volcano-unit amount as a Kubernetes quantity."""
    return amount_text(name, amount)


def _scalar(name: str) -> bool:
    """Kubernetes' ``IsScalarResourceName``: extended, prefixed native, hugepages and volume-limit resources."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


def inqueue_part(job: JobInfo) -> Vector:
    """What a running job's minResources still reserve beyond what it holds, per resource its
    minResources names (Volcano's ``GetInqueueResource``; the pods it holds count as ``pods``)."""
    need = job.min_resources if job.min_resources is not None else Vector()
    held = job.allocated
    names = job.podgroup.spec.min_resources if job.podgroup is not None and job.podgroup.spec.min_resources else {}
    out = Vector()
    for name in names:
        if name == CPU:
            out.cpu = max(need.cpu - held.cpu, 0.0)
        elif name == MEMORY:
            out.memory = max(need.memory - held.memory, 0.0)
        elif name == PODS:
            reserved_pods = need.scalars.get(PODS, 0.0) - allocated_tasks(job)
            if reserved_pods > 0:
                out.scalars[PODS] = reserved_pods
        elif _scalar(name) and not name.startswith("count/"):
            reserved = need.scalars.get(name, 0.0)
            if name not in held.scalars:
                out.scalars[name] = reserved
            elif reserved - held.scalars[name] > 0:
                out.scalars[name] = reserved - held.scalars[name]
    return out


def deduct_gated(job: JobInfo, need: Vector) -> Vector:
    """``need`` less what the job's scheduling-gated tasks ask for, never below 0, in the dimensions
    ``need`` has (Volcano's ``DeductSchGatedResources``: gated pods do not keep other jobs out)."""
    gated = Vector()
    for t in job.tasks.values():
        if t.scheduling_gated:
            gated.add(t.resreq)
    if gated.is_empty():
        return need
    out = Vector(max(need.cpu - gated.cpu, 0.0), max(need.memory - gated.memory, 0.0), need.scalars)
    for name, amount in need.scalars.items():
        if name in gated.scalars:
            out.scalars[name] = max(amount - gated.scalars[name], 0.0)
    return out


@dataclass
class QueueAttr:
    name: str
    weight: int
    deserved: Vector = field(default_factory=Vector)
    allocated: Vector = field(default_factory=Vector)
    request: Vector = field(default_factory=Vector)
    elastic: Vector = field(default_factory=Vector)
    inqueue: Vector = field(default_factory=Vector)
    capability: Vector | None = None
    real_capability: Vector = field(default_factory=Vector)
    guarantee: Vector = field(default_factory=Vector)
    share: float = 0.0

    share_names: list[str] | None = None  # the deserved resources, once deserved is final
    stale: bool = False  # allocated changed since share was worked out

    def current_share(self) -> float:
        if self.stale:
            self.update_share()
        return self.share

    def update_share(self) -> None:
        self.stale = False
        names = self.share_names if self.share_names is not None else self.deserved.resource_names()
        best = 0.0
        for n in names:
            s = share(self.allocated.get(n), self.deserved.get(n))
            if s > best:
                best = s
        self.share = best


def allocated_tasks(job: JobInfo) -> int:
    """Volcano's ``CalculateAllocatedTaskNum``: tasks holding resources."""
    return job.count(ALLOCATED_STATUSES)


class ProportionPlugin(PluginBase[Arguments]):
    def open(self, ssn: SessionView) -> None:
        super().open(ssn)
        total = ssn.total
        total_guarantee = Vector()
        for queue in ssn.queues.values():
            if queue.guarantee is not None:
                total_guarantee.add(queue.guarantee)
        self.attrs: dict[str, QueueAttr] = {}
        for job in ssn.jobs.values():
            info = ssn.queues.get(job.queue)
            if info is None or not ssn.in_queue(job):
                continue
            attr = self.attrs.get(job.queue)
            if attr is None:
                attr = self._attr(info, total, total_guarantee)
                self.attrs[job.queue] = attr
            for t in job.tasks.values():
                if t.status in ALLOCATED_STATUSES:
                    attr.allocated.add(t.resreq)
                    attr.request.add(t.resreq)
                elif t.status is TaskStatus.PENDING:
                    attr.request.add(t.resreq)
            if job.phase == "Inqueue" and job.min_resources is not None:
                attr.inqueue.add(deduct_gated(job, job.min_resources))
            if job.phase == "Running" and job.min_resources is not None and allocated_tasks(job) >= job.min_member:
                attr.inqueue.add(deduct_gated(job, inqueue_part(job)))
            attr.elastic.add(job.elastic())
        self._water_fill(total)
        for attr in self.attrs.values():
            attr.share_names = attr.deserved.resource_names()

    def _attr(self, queue: QueueInfo, total: Vector, total_guarantee: Vector) -> QueueAttr:
        attr = QueueAttr(name=queue.name, weight=queue.weight)
        if queue.capability is not None:
            cap = queue.capability.copy()
            if cap.cpu <= 0:
                cap.cpu = math.inf
            if cap.memory <= 0:
                cap.memory = math.inf
            attr.capability = cap
        if queue.guarantee is not None:
            attr.guarantee = queue.guarantee.copy()
        real = exceeded_part(total, total_guarantee).add(attr.guarantee)
        if attr.capability is not None:
            real.min_dimension(attr.capability, INFINITY)
        attr.real_capability = real
        return attr

    def _water_fill(self, total: Vector) -> None:
        remaining = total.copy()
        met: set[str] = set()
        while True:
            weight_sum = sum(a.weight for q, a in self.attrs.items() if q not in met)
            if weight_sum == 0:
                break
            old_remaining = remaining.copy()
            increased, decreased = Vector(), Vector()
            for q, attr in self.attrs.items():
                if q in met:
                    continue
                old = attr.deserved.copy()
                attr.deserved.add(remaining.copy().multi(attr.weight / weight_sum))
                attr.deserved.min_dimension(attr.real_capability, INFINITY)
                attr.deserved.min_dimension(attr.request, ZERO)
                attr.deserved = vmax(attr.deserved, attr.guarantee)
                attr.update_share()
                if attr.request.less_equal(attr.deserved, ZERO) or attr.deserved == old:
                    met.add(q)
                inc, dec = attr.deserved.diff(old, ZERO)
                increased.add(inc)
                decreased.add(dec)
            remaining = exceeded_part(remaining.add(decreased), increased)
            if remaining.is_empty() or remaining == old_remaining:
                break

    # -- events ---------------------------------------------------------------------------

    def allocated(self, task: TaskInfo) -> None:
        attr = self.attrs.get(self.ssn.jobs[task.job].queue)
        if attr is not None:
            attr.allocated.add(task.resreq)
            attr.stale = True  # the share waits until queue order asks for it

    def deallocated(self, task: TaskInfo) -> None:
        attr = self.attrs.get(self.ssn.jobs[task.job].queue)
        if attr is not None:
            attr.allocated.sub(task.resreq)
            attr.stale = True

    # -- extension points -----------------------------------------------------------------

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if a.priority != b.priority:
            return b.priority - a.priority
        sa = self.attrs[a.name].current_share() if a.name in self.attrs else 0.0
        sb = self.attrs[b.name].current_share() if b.name in self.attrs else 0.0
        return 0 if sa == sb else (-1 if sa < sb else 1)

    def overused(self, queue: QueueInfo) -> Refusal | None:
        attr = self.attrs.get(queue.name)
        if attr is None or not attr.deserved.less_equal(attr.allocated, ZERO):
            return None
        held = (
            ", ".join(f"{r} {fmt(r, attr.allocated.get(r))}" for r in attr.deserved.resource_names() if r != PODS)
            or "nothing"
        )
        return Refusal(
            f"queue {queue.name}: at its deserved share ({held}); waits for its running jobs to finish",
            PendingReason.QUEUE_SHARE_EXCEEDED,
        )

    def _allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        if not queue.open:
            return Refusal(
                f"queue {queue.name} is {queue.state}: only Open queues take new tasks", PendingReason.QUEUE_CLOSED
            )
        attr = self.attrs.get(queue.name)
        if attr is None:
            return None
        request = task.resreq
        ok, short = (attr.allocated + request).less_equal_in(attr.deserved, request)
        if ok:
            return None
        r = short[0]
        held = fmt(r, attr.allocated.get(r))
        if attr.capability is not None and attr.deserved.get(r) + EPSILON >= attr.capability.get(r):
            return Refusal(
                f"queue {queue.name}: capability {r} {fmt(r, attr.capability.get(r))} would be exceeded "
                f"(allocated {held}, task needs {fmt(r, task.resreq.get(r))})",
                PendingReason.QUEUE_CAPABILITY_EXCEEDED,
            )
        why = "; the other queues' weights and requests set it" if len(self.attrs) > 1 else ""
        return Refusal(
            f"queue {queue.name}: deserved share {r} {fmt(r, attr.deserved.get(r))} would be exceeded "
            f"(allocated {held}, task needs {fmt(r, task.resreq.get(r))}){why}",
            PendingReason.QUEUE_SHARE_EXCEEDED,
        )

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        return self._allocatable(queue, task)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self._allocatable(queue, task) is None

    def enqueueable(self, job: JobInfo) -> Vote:
        queue = self.ssn.queues[job.queue]
        if not queue.open:
            return Vote(
                VoteKind.REJECT,
                condition=PendingReason.QUEUE_CLOSED,
                reason=f"queue {queue.name} is {queue.state}: only Open queues take new jobs",
            )
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return PERMIT
        need = job.min_resources
        future = need.copy().add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
        ok, short = future.less_equal_in(attr.real_capability, need)
        if ok:
            attr.inqueue.add(deduct_gated(job, need))
            return PERMIT
        r = short[0]
        kind = (
            "capability"
            if attr.capability is not None
            and math.isfinite(attr.capability.get(r))
            and attr.real_capability.get(r) >= attr.capability.get(r) - EPSILON
            else "share of the cluster (after guarantees)"
        )
        return Vote(
            VoteKind.REJECT,
            condition=PendingReason.QUEUE_CAPABILITY_EXCEEDED,
            reason=(
                f"queue {job.queue}: {kind} {r} {fmt(r, attr.real_capability.get(r))} would be exceeded "
                f"(allocated {fmt(r, (attr.allocated + attr.inqueue - attr.elastic).get(r))}, job needs {fmt(r, need.get(r))})"
            ),
        )

    def enqueued(self, job: JobInfo) -> None:
        pass  # enqueueable already reserved the job's minResources, as Volcano's does

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        """Tasks of queues holding more than their deserved share, until they are down to it."""
        allocations: dict[str, Vector] = {}
        out = []
        for c in candidates:
            q = self.ssn.jobs[c.job].queue
            attr = self.attrs.get(q)
            if attr is None:
                continue
            allocated = allocations.setdefault(q, attr.allocated.copy())
            if not allocated.less_equal(attr.deserved, ZERO):
                allocated.sub(c.resreq)
                out.append(c)
        return out

    @property
    def deserved(self) -> dict[str, dict[str, float]]:
        """Each queue's deserved share in caldera amounts (for ``caldera status``)."""
        return {
            q: {r: float(v) for r, v in a.deserved.to_amounts().items() if r != PODS} for q, a in self.attrs.items()
        }

    @property
    def real_capability(self) -> dict[str, dict[str, float]]:
        """Each queue's real capability in caldera amounts (infinite ones left out)."""
        return {
            q: {r: float(v) for r, v in a.real_capability.to_amounts().items() if r != PODS}
            for q, a in self.attrs.items()
        }
