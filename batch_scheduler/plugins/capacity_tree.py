"""capacity's figures per queue: flat (only queues with jobs), or as a tree by ``spec.parent`` under ``root``.

At session open every queue that has jobs (flat), or every queue (with the hierarchy), gets
a :class:`QueueAttr`: what it holds, asks for, reserves for admitted jobs and holds beyond
its jobs' minResources; its deserved, guarantee, capability and real capability as
Volcano's capacity plugin works them out (``buildQueueAttrs`` / ``checkHierarchicalQueue``).
:class:`QueueTree` also answers the ancestor questions reclaim asks with
``ancestorReclaimLevel`` (Volcano 1.15). See :mod:`batch_scheduler.plugins.capacity`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from batch_scheduler.framework import SessionView
from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.tasks import ALLOCATED_STATUSES, TaskStatus
from batch_scheduler.vector import INFINITY, Vector, exceeded_part, share, vmax
from cluster.model.resources import CPU, MEMORY, PODS

ROOT = "root"
MAX_FLOAT = sys.float_info.max  # Volcano's math.MaxFloat64: an unlimited cpu or memory
MAX_INT64 = float(2**63 - 1)  # Volcano's math.MaxInt64: the root's unlimited scalars
UNLIMITED = 9e18  # amounts from here up are one of the two above (or sums of them)


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


class QueueTree:
    """The session's queue figures, built at session open; ``broken`` says why the tree is
    unusable (Volcano's ``readyToSchedule`` false), None when it is fine."""

    def __init__(self, ssn: SessionView, hierarchy: bool, level: int) -> None:
        self.ssn = ssn
        self.hierarchy = hierarchy
        self.level = level if hierarchy else 0  # ancestor levels reclaim weighs (ancestorReclaimLevel)
        self.attrs: dict[str, QueueAttr] = {}
        self.broken: str | None = None
        if hierarchy:
            self.broken = self._build_tree()
        else:
            self._build_flat()

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
        return QueueAttr(
            name=info.name,
            deserved=info.deserved.copy() if info.deserved is not None else Vector(),
            guarantee=info.guarantee.copy() if info.guarantee is not None else Vector(),
            capability=cap,
            origin={n: info.name for n, _ in cap.items()} if cap is not None else {},
        )

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
                return (
                    f"queue {current} names parent queue {parent}, which does not exist: with enableHierarchy "
                    f"capacity admits and places nothing until it does"
                )
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
                return (
                    f"job {job.key} is in queue {job.queue}, which has child queues ({', '.join(attr.children)}): "
                    f"with enableHierarchy jobs go to leaf queues, and capacity admits and places nothing until it moves"
                )
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

    # -- ancestors ------------------------------------------------------------------------

    def levels(self, queue: str) -> list[QueueAttr]:
        """The queue, then its ancestors up to the root (only the queue without the hierarchy)."""
        attr = self.attrs[queue]
        return [attr, *(self.attrs[a] for a in reversed(attr.ancestors))]

    def ancestor(self, attr: QueueAttr, depth: int) -> QueueAttr | None:
        """Volcano's ``queueAncestorAtDepth``: 1 the parent, 2 the grandparent, ..."""
        return self.attrs.get(attr.ancestors[-depth]) if 0 < depth <= len(attr.ancestors) else None

    def shares_ancestor(self, a: QueueAttr, b: QueueAttr) -> bool:
        """Volcano's ``sharesAnyNonRootAncestorWithinLevel``."""
        level = self.level
        mine = set(a.ancestors[-level:]) if level else set()
        return bool((mine & set(b.ancestors[-level:] if level else ())) - {ROOT})

    def ancestor_gates(self, reclaimer: QueueAttr, victim: QueueAttr) -> list[QueueAttr | None]:
        """Volcano's ``getReclaimeeAncestorToCheck`` at each level: the victim's ancestor there,
        when it is not the root and not the reclaimer's ancestor at the same level (None: missing)."""
        gates: list[QueueAttr | None] = []
        for depth in range(1, self.level + 1):
            if depth > len(victim.ancestors) or victim.ancestors[-depth] == ROOT:
                continue
            name = victim.ancestors[-depth]
            if depth <= len(reclaimer.ancestors) and reclaimer.ancestors[-depth] == name:
                continue
            gates.append(self.attrs.get(name))
        return gates
