"""capacity: each queue's deserved, guarantee and capability as its spec states them — Volcano's capacity plugin (release-1.14).

Per queue that has jobs it sums, at session open, what the queue holds (allocated), asks
for (allocated plus pending requests), what its admitted jobs reserve (inqueue) and its
running jobs' elastic slack, as proportion does; but deserved is taken from the spec, not
water-filled. Its *real capability* is the cluster less every queue's guarantee, plus its
own guarantee, capped by its capability (a capability's cpu or memory of 0, or absent,
means unlimited). Then:

- queue order: higher ``spec.priority`` first, then the smaller share (the largest
  allocated ÷ deserved over the resources deserved names); a queue deserving nothing has
  share 1, and at equal shares one that deserves something goes first;
- allocatable: the queue is Open and allocated + the task's request stays within the real
  capability in every resource the task asks for (deserved does not limit allocation:
  a queue borrows what others leave idle; capacity never calls a queue overused);
- enqueue: the queue is Open and a job's minResources + allocated + inqueue − elastic
  stays within the real capability in every resource the job asks for;
- preemptive (reclaim): allocated + the task's request is within deserved in at least one
  resource the task asks for (dimensions neither side has are left out);
- reclaimable: a running task whose resources meet the reclaimer's, of a queue that stays
  at or above its guarantee without it, and that holds more than it deserves in a
  resource the task uses and deserved names — or uses nothing deserved names at all.

With ``enableHierarchy: true`` on the plugin, queues form a tree by ``spec.parent`` under
the queue ``root`` (which Volcano's scheduler creates; caldera assumes it when absent: no
capability, nothing deserved). Every queue then has figures; a parent's are the sums of
its subtree. A child's capability takes its parent's cpu, memory and any resource it does
not state; the root's, when empty, is unlimited; a child's real capability is its
parent's less the children's guarantees, plus its own. Allocate and enqueue check the
queue and then every ancestor up to the root; only leaf queues take jobs — a job in a
queue with children, or a queue naming a parent that does not exist, makes the plugin
refuse everything this session, as Volcano does. Queue order puts leaves first and
compares two leaves by their ancestors just below the deepest one they share; victims
come first from the queues closest in the tree to the reclaimer's.

``ancestorReclaimLevel: N`` (an argument of Volcano 1.15's plugin; with the hierarchy only)
also weighs ancestors in reclaim: a queue over its deserved may still reclaim when one of
its ancestors within N levels (not the root) would stay within its deserved; a victim's
ancestors within N levels that are not also the reclaimer's must each hold more than they
deserve in a resource the victim uses; and two queues sharing such an ancestor do not take
from each other when the reclaimer's queue deserves nothing it asks for. Candidates are
weighed first victim first (1.15's order; 1.14 walks them in Go's map order).

Allocations, pipelines and evictions in the session update what each queue holds (and,
with the hierarchy, its ancestors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Self

from batch_scheduler.arguments import Arguments
from batch_scheduler.framework import PluginBase, SessionView
from batch_scheduler.jobs import JobInfo
from batch_scheduler.plugins.capacity_tree import (
    ROOT,
    UNLIMITED,
    QueueAttr,
    QueueTree,
    common_level,
    compare_shares,
    deduct_gated,
)
from batch_scheduler.queues import QueueInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.tasks import TaskInfo, TaskStatus
from batch_scheduler.vector import MIN_RESOURCE, Vector, amount_text
from batch_scheduler.votes import PERMIT, Refusal, Vote, VoteKind
from cluster.model.resources import CPU, MEMORY, PODS

ANCESTOR_RECLAIM_LEVEL = "ancestorReclaimLevel"


class CapacityArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset({ANCESTOR_RECLAIM_LEVEL})
    ancestor_reclaim_level: int = 0

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        text = arguments.get(ANCESTOR_RECLAIM_LEVEL, "0")
        try:
            level = int(text)
        except ValueError:
            raise ValueError(
                f"{ANCESTOR_RECLAIM_LEVEL}: {text!r} (expected a whole number of queue levels, e.g. 1 for the parent)"
            ) from None
        return cls(ancestor_reclaim_level=max(level, 0))  # below 0: 0, as Volcano (the conf loader warns)


def intersects(a: Vector, b: Vector) -> bool:
    """Some resource other than pods that both hold (Volcano's ``IntersectionWithIgnoredScalarResources``)."""
    return bool((set(a.resource_names()) & set(b.resource_names())) - {PODS})


def within_somewhere(used: Vector, limit: Vector, req: Vector) -> bool:
    """Volcano's ``LessEqualPartlyWithDimensionZeroFiltered``: among the resources ``req`` asks
    for that ``used`` or ``limit`` has, some where ``used`` is at most ``limit``."""

    def le(x: float, y: float) -> bool:
        return x < y or abs(x - y) < MIN_RESOURCE

    for name, amount in req.items():
        if name == PODS or amount <= 0:
            continue
        u, lim = used.get(name), limit.get(name)
        if not (u < MIN_RESOURCE and lim < MIN_RESOURCE) and le(u, lim):
            return True
    return False


def amount(name: str, value: float) -> str:
    return "unlimited" if value >= UNLIMITED else amount_text(name, value)


class CapacityPlugin(PluginBase[CapacityArguments]):
    def open(self, ssn: SessionView) -> None:
        super().open(ssn)
        self.hierarchy = ssn.hierarchy_enabled(self.name)
        self.tree = QueueTree(ssn, self.hierarchy, self.args.ancestor_reclaim_level)
        self.attrs = self.tree.attrs
        self.broken = self.tree.broken
        # Per leaf queue, the tasks whose queue-allocation gate it lifted that wait to be placed:
        # those of earlier sessions (gate gone, annotation kept, still pending) and this one's.
        self.reserved: dict[str, dict[str, TaskInfo]] = {}
        for job in ssn.jobs.values():
            for t in job.tasks.values():
                if t.status is TaskStatus.PENDING and t.queue_gate_opted_in and not t.scheduling_gated:
                    self.reserved.setdefault(job.queue, {})[t.uid] = t

    def gate_passed(self, task: TaskInfo) -> None:
        job = self.ssn.jobs.get(task.job)
        if job is not None:
            self.reserved.setdefault(job.queue, {})[task.uid] = task

    def _reserved(self, queue: str, but: TaskInfo) -> Vector:
        held = Vector()
        for uid, t in self.reserved.get(queue, {}).items():
            if uid != but.uid:
                held.add(t.resreq)
        return held

    # -- events ---------------------------------------------------------------------------

    def _holder(self, task: TaskInfo) -> QueueAttr | None:
        job = self.ssn.jobs.get(task.job)
        return self.attrs.get(job.queue) if job is not None else None

    def allocated(self, task: TaskInfo) -> None:
        attr = self._holder(task)
        for held in self.reserved.values():
            held.pop(task.uid, None)  # placed: it holds its own request now
        if attr is not None:
            attr.allocated.add(task.resreq)
            attr.update_share()  # only the leaf's share, as in Volcano: its ancestors keep the session's
            for a in attr.ancestors:
                self.attrs[a].allocated.add(task.resreq)

    def deallocated(self, task: TaskInfo) -> None:
        attr = self._holder(task)
        if task.queue_gate_opted_in and not task.scheduling_gated:
            self.gate_passed(task)  # a placement undone: its reservation stands again
        if attr is not None:
            attr.allocated.sub(task.resreq)
            attr.update_share()
            for a in attr.ancestors:
                self.attrs[a].allocated.sub(task.resreq)

    # -- orders ---------------------------------------------------------------------------

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if a.priority != b.priority:
            return b.priority - a.priority
        la, lb = self.attrs.get(a.name), self.attrs.get(b.name)
        if la is None or lb is None:
            return 0
        if not self.hierarchy:
            return compare_shares(la, lb)
        if bool(la.children) != bool(lb.children):
            return 1 if la.children else -1  # leaves first
        if la.children:
            return compare_shares(la, lb)
        level = common_level(la, lb)
        pa = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la.name
        pb = lb.ancestors[level + 1] if level + 1 < len(lb.ancestors) else lb.name
        return compare_shares(self.attrs[pa], self.attrs[pb])

    def victim_queue_order(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        """With the hierarchy: victims first from the queue sharing the deeper ancestor with the reclaimer's."""
        if not self.hierarchy:
            return 0
        la, lb, lp = self.attrs.get(a.name), self.attrs.get(b.name), self.attrs.get(preemptor.name)
        if la is None or lb is None or lp is None:
            return 0
        left, right = common_level(la, lp), common_level(lb, lp)
        return 0 if left == right else (-1 if left > right else 1)

    # -- limits ---------------------------------------------------------------------------

    def _limit(self, attr: QueueAttr, r: str) -> str:
        real = attr.real_capability.get(r)
        stated = attr.capability is not None and (r in (CPU, MEMORY) or r in attr.capability.scalars)
        if stated and attr.capability is not None and real >= attr.capability.get(r) - MIN_RESOURCE:
            origin = attr.origin.get(r, attr.name)
            inherited = f" (inherited from queue {origin})" if origin and origin != attr.name else ""
            return f"capability {r} {amount(r, real)}{inherited}"
        if self.hierarchy and not attr.rooted:
            return (
                f"real capability {r} {amount(r, real)} (queue {attr.name} is not under queue {ROOT}: "
                f"its spec.parent chain loops)"
            )
        if self.hierarchy and attr.ancestors:
            return (
                f"real capability {r} {amount(r, real)} (what queue {attr.ancestors[-1]}'s real capability "
                f"leaves after its children's guarantees)"
            )
        return f"real capability {r} {amount(r, real)} (the cluster's {r} less the other queues' guarantees)"

    def _exceeded(self, attr: QueueAttr, queue: str, r: str, held: str, need: str) -> str:
        where = f"queue {attr.name}" if attr.name == queue else f"queue {attr.name} (parent of {queue})"
        return f"{where}: {self._limit(attr, r)} would be exceeded ({held}, {need})"

    def _not_leaf(self, attr: QueueAttr) -> str:
        return (
            f"queue {attr.name} has child queues ({', '.join(attr.children)}): with enableHierarchy only leaf "
            f"queues take jobs"
        )

    # -- extension points -----------------------------------------------------------------

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        if not queue.open:
            return Refusal(
                f"queue {queue.name} is {queue.state}: only Open queues take new tasks", PendingReason.QUEUE_CLOSED
            )
        if self.broken is not None:
            return Refusal(self.broken, PendingReason.QUEUE_HIERARCHY_INVALID)
        if queue.name not in self.attrs:
            return None
        if self.hierarchy and self.attrs[queue.name].children:
            return Refusal(self._not_leaf(self.attrs[queue.name]), PendingReason.QUEUE_NOT_LEAF)
        req = task.resreq
        for attr in self.tree.levels(queue.name):
            held = attr.allocated + self._reserved(attr.name, task) if attr.name in self.reserved else attr.allocated
            ok, short = (held + req).less_equal_in(attr.real_capability, req)
            if not ok:
                r = short[0]
                return Refusal(
                    self._exceeded(
                        attr,
                        queue.name,
                        r,
                        f"allocated {amount(r, attr.allocated.get(r))}",
                        f"task needs {amount(r, req.get(r))}",
                    ),
                    PendingReason.QUEUE_CAPABILITY_EXCEEDED,
                )
        return None

    def enqueueable(self, job: JobInfo) -> Vote:
        """As Volcano's vote, which reserves an admitted job's minResources itself (so a later
        reject by another plugin does not undo it)."""
        if self.broken is not None:
            return Vote(VoteKind.REJECT, reason=self.broken, condition=PendingReason.QUEUE_HIERARCHY_INVALID)
        attr = self.attrs.get(job.queue)
        if attr is None:
            return PERMIT
        if self.hierarchy and attr.children:
            return Vote(VoteKind.REJECT, reason=self._not_leaf(attr), condition=PendingReason.QUEUE_NOT_LEAF)
        queue = self.ssn.queues[job.queue]
        if not queue.open:
            return Vote(
                VoteKind.REJECT,
                condition=PendingReason.QUEUE_CLOSED,
                reason=f"queue {queue.name} is {queue.state}: only Open queues take new jobs",
            )
        if job.min_resources is None:
            return PERMIT
        need = job.min_resources
        for level in self.tree.levels(job.queue):
            future = need.copy().add(level.allocated).add(level.inqueue).sub(level.elastic)
            ok, short = future.less_equal_in(level.real_capability, need)
            if not ok:
                r = short[0]
                held = (level.allocated + level.inqueue - level.elastic).get(r)
                return Vote(
                    VoteKind.REJECT,
                    condition=PendingReason.QUEUE_CAPABILITY_EXCEEDED,
                    reason=self._exceeded(
                        level,
                        job.queue,
                        r,
                        f"allocated and reserved {amount(r, held)}",
                        f"job needs {amount(r, need.get(r))}",
                    ),
                )
        reserved = deduct_gated(job, need)
        for level in self.tree.levels(job.queue):
            level.inqueue.add(reserved)
        return PERMIT

    def enqueued(self, job: JobInfo) -> None:
        pass  # enqueueable already reserved the job's minResources, as Volcano's does

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if self.broken is not None or not queue.open:
            return False
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        if within_somewhere(attr.allocated + task.resreq, attr.deserved, task.resreq):
            return True
        # Volcano 1.15's ancestorReclaimLevel: or an ancestor within that many levels (not the
        # root) would stay within its deserved somewhere with the task.
        for depth in range(1, self.tree.level + 1):
            above = self.tree.ancestor(attr, depth)
            if (
                above is not None
                and above.name != ROOT
                and within_somewhere(above.allocated + task.resreq, above.deserved, task.resreq)
            ):
                return True
        return False

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        if self.broken is not None:
            return []
        allocations: dict[str, Vector] = {}
        victims = []
        job = self.ssn.jobs.get(reclaimer.job)
        mine = self.attrs.get(job.queue) if job is not None else None
        # The first victims first, as Volcano 1.15 weighs them (1.14 walks the node's tasks in
        # Go's map order): which of them pass depends on those already taken.
        for c in sorted(candidates, key=self.ssn.victim_order(reclaimer)):
            job = self.ssn.jobs.get(c.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None or not intersects(c.resreq, reclaimer.resreq):
                continue
            allocated = allocations.setdefault(attr.name, attr.allocated.copy())
            if not attr.guarantee.less_equal(allocated - c.resreq):
                continue  # its queue would drop below its guarantee
            if not intersects(c.resreq, attr.deserved):
                # Uses nothing its queue deserves: a victim — unless, with ancestorReclaimLevel,
                # the two queues share an ancestor within the levels and the reclaimer's queue
                # deserves nothing it asks for either (no real contention between them).
                if (
                    mine is not None
                    and self.tree.shares_ancestor(mine, attr)
                    and not intersects(reclaimer.resreq, mine.deserved)
                ):
                    continue
            elif not allocated.greater_in_relevant(attr.deserved, c.resreq)[0]:
                continue
            above = self._ancestors_over(mine, attr, c, allocations) if mine is not None and self.tree.level else []
            if above is None:
                continue
            for held in (allocated, *above):
                held.sub(c.resreq)
            victims.append(c)
        return victims

    def _ancestors_over(
        self, mine: QueueAttr, attr: QueueAttr, victim: TaskInfo, allocations: dict[str, Vector]
    ) -> list[Vector] | None:
        """With ancestorReclaimLevel: what the victim's ancestors within the levels (those not
        also the reclaimer's) hold, each over its deserved in a resource the victim uses or
        deserving nothing it uses; None when one is not (reclaiming would take from a subtree
        within its share)."""
        held = []
        for gate in self.tree.ancestor_gates(mine, attr):
            if gate is None:
                return None
            allocated = allocations.setdefault(gate.name, gate.allocated.copy())
            held.append(allocated)
            if (
                intersects(victim.resreq, gate.deserved)
                and not allocated.greater_in_relevant(gate.deserved, victim.resreq)[0]
            ):
                return None
        return held
