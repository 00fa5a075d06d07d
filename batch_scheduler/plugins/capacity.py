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

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from batch_scheduler.framework import PERMIT, Refusal, Vote, VoteKind, check_arguments
from batch_scheduler.info import (
    ALLOCATED_STATUSES,
    JobInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)
from batch_scheduler.vector import (
    INFINITY,
    MIN_RESOURCE,
    Vector,
    amount_text,
    exceeded_part,
    share,
    vmax,
)
from cluster.model.resources import CPU, MEMORY, PODS

if TYPE_CHECKING:
    from batch_scheduler.session import Session

ROOT = "root"
MAX_FLOAT = sys.float_info.max  # Volcano's math.MaxFloat64: an unlimited cpu or memory
MAX_INT64 = float(2**63 - 1)  # Volcano's math.MaxInt64: the root's unlimited scalars
UNLIMITED = 9e18  # amounts from here up are one of the two above (or sums of them)
ANCESTOR_RECLAIM_LEVEL = "ancestorReclaimLevel"


@dataclass(eq=False)
class QueueAttr:
    name: str
    deserved: Vector
    guarantee: Vector
    capability: Vector | None  # None: not stated (flat mode only)
    real_capability: Vector = field(default_factory=Vector)
    allocated: Vector = field(default_factory=Vector)
    request: Vector = field(default_factory=Vector)
    elastic: Vector = field(default_factory=Vector)
    inqueue: Vector = field(default_factory=Vector)
    ancestors: list[str] = field(default_factory=list)  # the root first (hierarchy only)
    children: list[str] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)  # per capability resource: the queue that stated it
    share: float = 0.0
    rooted: bool = False  # reached from the root (hierarchy only; not so in a spec.parent cycle)

    def update_share(self) -> None:
        self.share = queue_share(self.allocated, self.deserved)


def queue_share(allocated: Vector, deserved: Vector) -> float:
    """Volcano's ``updateQueueAttrShare``: 1 for a queue that deserves nothing (best effort),
    else the largest allocated ÷ deserved over the resources deserved names."""
    if deserved.is_empty():
        return 1.0
    return max((share(allocated.get(n), deserved.get(n)) for n in deserved.resource_names()), default=0.0)


def compare_shares(a: QueueAttr, b: QueueAttr) -> int:
    """Volcano's ``compareShareWithDeserved``: the smaller share first; at equal shares a queue that deserves something."""
    if a.share == b.share:
        return int(a.deserved.is_empty()) - int(b.deserved.is_empty())
    return -1 if a.share < b.share else 1


def common_level(a: QueueAttr, b: QueueAttr) -> int:
    """Volcano's ``getQueueLevel``: the index of the deepest ancestor ``a`` and ``b`` share."""
    level = 0
    for i, (x, y) in enumerate(zip(a.ancestors, b.ancestors)):
        if x != y:
            break
        level = i
    return level


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


def deduct_gated(job: JobInfo, res: Vector) -> Vector:
    """Volcano's ``DeductSchGatedResources``: ``res`` less what the job's scheduling-gated tasks ask (not below 0)."""
    gated = Vector()
    for t in job.tasks.values():
        if t.scheduling_gated:
            gated.add(t.resreq)
    if gated.is_empty():
        return res
    out = res.copy()
    out.cpu, out.memory = max(out.cpu - gated.cpu, 0.0), max(out.memory - gated.memory, 0.0)
    for name, value in res.scalars.items():
        if name in gated.scalars:
            out.scalars[name] = max(value - gated.scalars[name], 0.0)
    return out


def inqueue_of_running(job: JobInfo) -> Vector:
    """Volcano's ``GetInqueueResource``: what a running job's minResources reserve beyond what it
    holds, in the resources its minResources names."""
    need = job.min_resources if job.min_resources is not None else Vector()
    held = job.allocated
    names = (job.podgroup.spec.min_resources or {}) if job.podgroup is not None else {}
    out = Vector()
    for name in names:
        if name == CPU:
            out.cpu = max(need.cpu - held.cpu, 0.0)
        elif name == MEMORY:
            out.memory = max(need.memory - held.memory, 0.0)
        elif name == PODS:
            if need.get(PODS) - held.get(PODS) > 0:
                out.scalars[PODS] = need.get(PODS) - held.get(PODS)
        elif not name.startswith("count/"):
            if name not in held.scalars:
                out.scalars[name] = need.get(name)
            elif need.get(name) - held.scalars[name] > 0:
                out.scalars[name] = need.get(name) - held.scalars[name]
    return out


def job_figures(job: JobInfo) -> tuple[Vector, Vector, Vector, Vector]:
    """What a job adds to its queue at session open: allocated, request, inqueue, elastic."""
    allocated, request = Vector(), Vector()
    held = 0
    for t in job.tasks.values():
        if t.status in ALLOCATED_STATUSES:
            allocated.add(t.resreq)
            request.add(t.resreq)
            held += 1
        elif t.status is TaskStatus.PENDING:
            request.add(t.resreq)
    inqueue = Vector()
    if job.phase == "Inqueue":
        inqueue.add(deduct_gated(job, job.min_resources if job.min_resources is not None else Vector()))
    if job.phase == "Running" and job.min_resources is not None and held >= job.min_member:
        inqueue.add(deduct_gated(job, inqueue_of_running(job)))
    return allocated, request, inqueue, job.elastic()


class CapacityPlugin:
    name = "capacity"

    def __init__(self, ancestor_reclaim_level: int = 0) -> None:
        self.level = ancestor_reclaim_level

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> CapacityPlugin:
        check_arguments(cls.name, arguments, [ANCESTOR_RECLAIM_LEVEL])
        text = arguments.get(ANCESTOR_RECLAIM_LEVEL, "0")
        try:
            level = int(text)
        except ValueError:
            raise ValueError(f"{ANCESTOR_RECLAIM_LEVEL}: {text!r} (expected a whole number of queue levels, "
                             "e.g. 1 for the parent)") from None
        return cls(max(level, 0))  # below 0: 0, as Volcano (the conf loader warns)

    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.hierarchy = ssn.hierarchy_enabled(self.name)
        self.attrs: dict[str, QueueAttr] = {}
        self.broken: str | None = None  # why the queue tree is unusable (Volcano's readyToSchedule false)
        if self.hierarchy:
            self.broken = self._build_tree()
        else:
            self._build_flat()

    # -- building -------------------------------------------------------------------------

    def _build_flat(self) -> None:
        ssn = self.ssn
        total_guarantee = Vector()
        for q in ssn.queues.values():
            if q.guarantee is not None:
                total_guarantee.add(q.guarantee)
        for job in ssn.jobs.values():
            if not ssn.in_queue(job):
                continue
            attr = self.attrs.get(job.queue)
            if attr is None:
                attr = self.attrs[job.queue] = self._flat_attr(ssn.queues[job.queue], total_guarantee)
            for mine, add in zip((attr.allocated, attr.request, attr.inqueue, attr.elastic), job_figures(job)):
                mine.add(add)
        for attr in self.attrs.values():
            attr.deserved.min_dimension(attr.real_capability, INFINITY)
            attr.deserved = vmax(attr.deserved, attr.guarantee)
            attr.update_share()

    def _flat_attr(self, info: QueueInfo, total_guarantee: Vector) -> QueueAttr:
        attr = self._attr(info)
        if attr.capability is not None:
            # Volcano: a capability's cpu or memory of 0 (or left out) is no limit.
            if attr.capability.cpu <= 0:
                attr.capability.cpu = MAX_FLOAT
            if attr.capability.memory <= 0:
                attr.capability.memory = MAX_FLOAT
        attr.real_capability = exceeded_part(self.ssn.total, total_guarantee).add(attr.guarantee)
        if attr.capability is not None:
            attr.real_capability.min_dimension(attr.capability, INFINITY)
        return attr

    @staticmethod
    def _attr(info: QueueInfo | None, name: str = ROOT) -> QueueAttr:
        if info is None:  # the root queue Volcano's scheduler creates: nothing stated
            return QueueAttr(name=name, deserved=Vector(), guarantee=Vector(), capability=None)
        cap = info.capability.copy() if info.capability is not None else None
        return QueueAttr(name=info.name, deserved=info.deserved.copy() if info.deserved is not None else Vector(),
                         guarantee=info.guarantee.copy() if info.guarantee is not None else Vector(), capability=cap,
                         origin={n: info.name for n, _ in cap.items()} if cap is not None else {})

    def _parent(self, name: str) -> str:
        info = self.ssn.queues.get(name)
        return (info.parent if info is not None else "") or ROOT

    def _link(self, name: str) -> str | None:
        """Volcano's ``updateAncestors``: give ``name`` and the ancestors not seen yet their place in
        the tree; why not, when a parent does not exist. Each queue is linked once, so a cycle
        in ``spec.parent`` ends (its queues are nobody's leaves and are never reached from the root)."""
        chain, current = [], name
        while current != ROOT:
            chain.append(current)
            parent = self._parent(current)
            if parent not in self.ssn.queues and parent != ROOT:
                return (f"queue {current} names parent queue {parent}, which does not exist: with enableHierarchy "
                        f"capacity admits and places nothing until it does")
            if parent in self.attrs:
                break
            self.attrs[parent] = self._attr(self.ssn.queues.get(parent), parent)
            current = parent
        for queue in reversed(chain):
            above = self.attrs[self._parent(queue)]
            above.children.append(queue)
            self.attrs[queue].ancestors = [*above.ancestors, above.name]
        return None

    def _build_tree(self) -> str | None:
        ssn = self.ssn
        if ROOT not in self.attrs:
            self.attrs[ROOT] = self._attr(ssn.queues.get(ROOT))
        for name, info in ssn.queues.items():
            if name not in self.attrs:
                self.attrs[name] = self._attr(info)
                broken = self._link(name)
                if broken is not None:
                    return broken
        for job in ssn.jobs.values():
            if not ssn.in_queue(job):
                continue
            attr = self.attrs[job.queue]
            if attr.children:
                return (f"job {job.key} is in queue {job.queue}, which has child queues ({', '.join(attr.children)}): "
                        f"with enableHierarchy jobs go to leaf queues, and capacity admits and places nothing until it moves")
            figures = job_figures(job)
            for level in (attr, *(self.attrs[a] for a in attr.ancestors)):
                for mine, add in zip((level.allocated, level.request, level.inqueue, level.elastic), figures):
                    mine.add(add)
        root = self.attrs[ROOT]
        if root.capability is None or root.capability.is_empty():
            # The root is not limited by what the cluster has now (Volcano: users may submit more).
            root.capability = Vector(MAX_FLOAT, MAX_FLOAT, {n: MAX_INT64 for n in ssn.total.scalars})
            root.origin = {}
        root.real_capability = root.capability
        self._settle(root)
        for attr in self.attrs.values():
            attr.update_share()
        return None

    def _settle(self, root: QueueAttr) -> None:
        """Volcano's ``checkHierarchicalQueue``, parents before children: each child's deserved at
        least its guarantee, its capability completed from its parent's, its real capability."""
        todo, seen = [root], {root.name}
        while todo:
            attr = todo.pop()
            attr.rooted = True
            assert attr.capability is not None
            total_deserved, total_guarantee = Vector(), Vector()
            children = [self.attrs[c] for c in attr.children if c not in seen]
            for child in children:
                child.deserved = vmax(child.deserved, child.guarantee)
                total_deserved.add(child.deserved)
                total_guarantee.add(child.guarantee)
                cap = child.capability if child.capability is not None else Vector()
                if cap.cpu <= 0:
                    cap.cpu = attr.capability.cpu
                    child.origin[CPU] = attr.origin.get(CPU, "")
                if cap.memory <= 0:
                    cap.memory = attr.capability.memory
                    child.origin[MEMORY] = attr.origin.get(MEMORY, "")
                for name, value in attr.capability.scalars.items():
                    if name not in cap.scalars:
                        cap.scalars[name] = value
                        child.origin[name] = attr.origin.get(name, "")
                child.capability = cap
            if attr.name == ROOT:
                attr.guarantee, attr.deserved = total_guarantee, total_deserved
            for child in children:
                assert child.capability is not None
                child.real_capability = exceeded_part(attr.real_capability, total_guarantee).add(child.guarantee)
                child.real_capability.min_dimension(child.capability, INFINITY)
                seen.add(child.name)
                todo.append(child)

    # -- events ---------------------------------------------------------------------------

    def _holder(self, task: TaskInfo) -> QueueAttr | None:
        job = self.ssn.jobs.get(task.job)
        return self.attrs.get(job.queue) if job is not None else None

    def allocated(self, task: TaskInfo) -> None:
        attr = self._holder(task)
        if attr is not None:
            attr.allocated.add(task.resreq)
            attr.update_share()  # only the leaf's share, as in Volcano: its ancestors keep the session's
            for a in attr.ancestors:
                self.attrs[a].allocated.add(task.resreq)

    def deallocated(self, task: TaskInfo) -> None:
        attr = self._holder(task)
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

    def _levels(self, queue: str) -> list[QueueAttr]:
        """The queue, then its ancestors up to the root (only the queue without the hierarchy)."""
        attr = self.attrs[queue]
        return [attr, *(self.attrs[a] for a in reversed(attr.ancestors))]

    def _limit(self, attr: QueueAttr, r: str) -> str:
        real = attr.real_capability.get(r)
        stated = attr.capability is not None and (r in (CPU, MEMORY) or r in attr.capability.scalars)
        if stated and attr.capability is not None and real >= attr.capability.get(r) - MIN_RESOURCE:
            origin = attr.origin.get(r, attr.name)
            inherited = f" (inherited from queue {origin})" if origin and origin != attr.name else ""
            return f"capability {r} {amount(r, real)}{inherited}"
        if self.hierarchy and not attr.rooted:
            return (f"real capability {r} {amount(r, real)} (queue {attr.name} is not under queue {ROOT}: "
                    f"its spec.parent chain loops)")
        if self.hierarchy and attr.ancestors:
            return (f"real capability {r} {amount(r, real)} (what queue {attr.ancestors[-1]}'s real capability "
                    f"leaves after its children's guarantees)")
        return f"real capability {r} {amount(r, real)} (the cluster's {r} less the other queues' guarantees)"

    def _exceeded(self, attr: QueueAttr, queue: str, r: str, held: str, need: str) -> str:
        where = f"queue {attr.name}" if attr.name == queue else f"queue {attr.name} (parent of {queue})"
        return f"{where}: {self._limit(attr, r)} would be exceeded ({held}, {need})"

    def _not_leaf(self, attr: QueueAttr) -> str:
        return (f"queue {attr.name} has child queues ({', '.join(attr.children)}): with enableHierarchy only leaf "
                f"queues take jobs")

    # -- extension points -----------------------------------------------------------------

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        if not queue.open:
            return Refusal(f"queue {queue.name} is {queue.state}: only Open queues take new tasks", "QueueClosed")
        if self.broken is not None:
            return Refusal(self.broken, "QueueHierarchyInvalid")
        if queue.name not in self.attrs:
            return None
        if self.hierarchy and self.attrs[queue.name].children:
            return Refusal(self._not_leaf(self.attrs[queue.name]), "QueueNotLeaf")
        req = task.resreq
        for attr in self._levels(queue.name):
            ok, short = (attr.allocated + req).less_equal_in(attr.real_capability, req)
            if not ok:
                r = short[0]
                return Refusal(self._exceeded(attr, queue.name, r, f"allocated {amount(r, attr.allocated.get(r))}",
                                              f"task needs {amount(r, req.get(r))}"), "QueueCapabilityExceeded")
        return None

    def enqueueable(self, job: JobInfo) -> Vote:
        """As Volcano's vote, which reserves an admitted job's minResources itself (so a later
        reject by another plugin does not undo it)."""
        if self.broken is not None:
            return Vote(VoteKind.REJECT, reason=self.broken, condition="QueueHierarchyInvalid")
        attr = self.attrs.get(job.queue)
        if attr is None:
            return PERMIT
        if self.hierarchy and attr.children:
            return Vote(VoteKind.REJECT, reason=self._not_leaf(attr), condition="QueueNotLeaf")
        queue = self.ssn.queues[job.queue]
        if not queue.open:
            return Vote(VoteKind.REJECT, condition="QueueClosed",
                        reason=f"queue {queue.name} is {queue.state}: only Open queues take new jobs")
        if job.min_resources is None:
            return PERMIT
        need = job.min_resources
        for level in self._levels(job.queue):
            future = need.copy().add(level.allocated).add(level.inqueue).sub(level.elastic)
            ok, short = future.less_equal_in(level.real_capability, need)
            if not ok:
                r = short[0]
                held = (level.allocated + level.inqueue - level.elastic).get(r)
                return Vote(VoteKind.REJECT, condition="QueueCapabilityExceeded", reason=self._exceeded(
                    level, job.queue, r, f"allocated and reserved {amount(r, held)}", f"job needs {amount(r, need.get(r))}"))
        reserved = deduct_gated(job, need)
        for level in self._levels(job.queue):
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
        for depth in range(1, self._level() + 1):
            above = self._ancestor(attr, depth)
            if above is not None and above.name != ROOT and \
                    within_somewhere(above.allocated + task.resreq, above.deserved, task.resreq):
                return True
        return False

    def _level(self) -> int:
        """How many ancestor levels reclaim weighs (``ancestorReclaimLevel``; only with the hierarchy)."""
        return self.level if self.hierarchy else 0

    def _ancestor(self, attr: QueueAttr, depth: int) -> QueueAttr | None:
        """Volcano's ``queueAncestorAtDepth``: 1 the parent, 2 the grandparent, ..."""
        return self.attrs.get(attr.ancestors[-depth]) if 0 < depth <= len(attr.ancestors) else None

    def _shares_ancestor(self, a: QueueAttr, b: QueueAttr) -> bool:
        """Volcano's ``sharesAnyNonRootAncestorWithinLevel``."""
        level = self._level()
        mine = set(a.ancestors[-level:]) if level else set()
        return bool((mine & set(b.ancestors[-level:] if level else ())) - {ROOT})

    def _ancestor_gates(self, reclaimer: QueueAttr, victim: QueueAttr) -> list[QueueAttr | None]:
        """Volcano's ``getReclaimeeAncestorToCheck`` at each level: the victim's ancestor there,
        when it is not the root and not the reclaimer's ancestor at the same level (None: missing)."""
        gates: list[QueueAttr | None] = []
        for depth in range(1, self._level() + 1):
            if depth > len(victim.ancestors) or victim.ancestors[-depth] == ROOT:
                continue
            name = victim.ancestors[-depth]
            if depth <= len(reclaimer.ancestors) and reclaimer.ancestors[-depth] == name:
                continue
            gates.append(self.attrs.get(name))
        return gates

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
                if mine is not None and self._shares_ancestor(mine, attr) and not intersects(reclaimer.resreq, mine.deserved):
                    continue
            elif not allocated.greater_in_relevant(attr.deserved, c.resreq)[0]:
                continue
            above = self._ancestors_over(mine, attr, c, allocations) if mine is not None and self._level() else []
            if above is None:
                continue
            for held in (allocated, *above):
                held.sub(c.resreq)
            victims.append(c)
        return victims

    def _ancestors_over(self, mine: QueueAttr, attr: QueueAttr, victim: TaskInfo,
                        allocations: dict[str, Vector]) -> list[Vector] | None:
        """With ancestorReclaimLevel: what the victim's ancestors within the levels (those not
        also the reclaimer's) hold, each over its deserved in a resource the victim uses or
        deserving nothing it uses; None when one is not (reclaiming would take from a subtree
        within its share)."""
        held = []
        for gate in self._ancestor_gates(mine, attr):
            if gate is None:
                return None
            allocated = allocations.setdefault(gate.name, gate.allocated.copy())
            held.append(allocated)
            if intersects(victim.resreq, gate.deserved) and \
                    not allocated.greater_in_relevant(gate.deserved, victim.resreq)[0]:
                return None
        return held
