"""drf: dominant resource fairness between jobs, and (``enableHierarchy``) between queues — Volcano's drf plugin.

A job's share is its largest fraction of any cluster resource it holds — the cluster's
pod slots too, every task counting one pod as in Volcano; the job with the smaller share
goes first, so a CPU-heavy and a GPU-heavy job progress alike. As a
preempt voter it lets a victim go only when the victim's job, without it (and without
the candidates before it), keeps at least the preemptor's share with the preemptor's task.

With ``enableHierarchy: true`` (hierarchical DRF, Volcano's HDRF) queues form a tree by
their ``volcano.sh/hierarchy`` annotation (``root/eng/prod``) with per-level weights
(``volcano.sh/hierarchy-weights``, ``1/2/8``): a node's allocation is its children's
scaled to the smallest dominant share among its unsaturated children; queue order walks
both queues' paths from the root comparing share ÷ weight level by level (saturated
subtrees last); reclaim lets a task go when, after the move, its queue would still come
after the reclaimer's. A job is saturated when it holds all it asks for of some resource,
or asks for a resource nobody has left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from batch_scheduler.arguments import Arguments
from batch_scheduler.framework import PluginBase, SessionView
from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.tasks import ALLOCATED_STATUSES, TaskInfo
from batch_scheduler.vector import Vector, share

SHARE_DELTA = 1e-6


def dominant_share(allocated: Vector, total: Vector) -> float:
    """The largest allocated ÷ total over the resources the cluster has."""
    return _dominant(allocated, [(r, total.get(r)) for r in total.resource_names()])


def _dominant(allocated: Vector, totals: list[tuple[str, float]]) -> float:
    """:func:`dominant_share` over the cluster's (resource, total) pairs, worked out once per session."""
    best = 0.0
    for name, total in totals:
        held = (
            allocated.cpu
            if name == "cpu"
            else allocated.memory
            if name == "memory"
            else allocated.scalars.get(name, 0.0)
        )
        s = share(held, total)
        if s > best:
            best = s
    return best


@dataclass
class Attr:
    allocated: Vector = field(default_factory=Vector)
    share: float = 0.0
    stale: bool = False  # allocated changed since share was worked out (flat DRF works it out when asked)


@dataclass(eq=False)
class HNode:
    """A node of the hierarchy: a queue path level, or (leaf) a job."""

    hierarchy: str
    weight: float
    attr: Attr
    request: Vector = field(default_factory=Vector)
    parent: HNode | None = None
    children: dict[str, HNode] | None = field(default_factory=dict)
    saturated: bool = False

    def clone(self, parent: HNode | None = None) -> HNode:
        node = HNode(
            self.hierarchy,
            self.weight,
            Attr(self.attr.allocated.copy(), self.attr.share),
            self.request.copy(),
            parent,
            None,
            self.saturated,
        )
        if self.children is not None:
            node.children = {k: c.clone(node) for k, c in self.children.items()}
        return node


def _saturated(allocated: Vector, request: Vector, demanding: set[str]) -> bool:
    for r in allocated.resource_names():
        if allocated.get(r) != 0 and request.get(r) != 0 and allocated.get(r) >= request.get(r):
            return True
        if r not in demanding and request.get(r) != 0:
            return True
    return False


class DrfPlugin(PluginBase[Arguments]):
    def open(self, ssn: SessionView) -> None:
        super().open(ssn)
        self.total = ssn.total
        self.totals = [(r, self.total.get(r)) for r in self.total.resource_names()]
        self.hierarchical = ssn.hierarchy_enabled(self.name)
        self.attrs: dict[str, Attr] = {}
        self.total_allocated = Vector()
        self.root = HNode("root", 1.0, Attr())
        for job in ssn.jobs.values():
            attr = Attr()
            for t in job.tasks.values():
                if t.status in ALLOCATED_STATUSES:
                    attr.allocated.add(t.resreq)
            attr.share = _dominant(attr.allocated, self.totals)
            self.attrs[job.key] = attr
            if self.hierarchical and ssn.in_queue(job):
                self.total_allocated.add(attr.allocated)
                self._update_hierarchy(self.root, self.total_allocated, job, attr)

    def _share(self, attr: Attr) -> float:
        if attr.stale:
            attr.share, attr.stale = _dominant(attr.allocated, self.totals), False
        return attr.share

    def share(self, job: JobInfo) -> float:
        return self._share(self.attrs[job.key])

    # -- hierarchy ------------------------------------------------------------------------

    def _build(self, root: HNode, job: JobInfo, attr: Attr) -> None:
        queue = self.ssn.queues[job.queue]
        paths, weights = queue.hierarchy.split("/"), queue.weights.split("/")
        node = root
        for i in range(1, len(paths)):
            assert node.children is not None
            child = node.children.get(paths[i])
            if child is None:
                try:
                    weight = float(weights[i]) if i < len(weights) else 1.0
                except ValueError:
                    weight = 0.0
                child = HNode(paths[i], max(weight, 1.0), Attr(), parent=node)
                node.children[paths[i]] = child
            node = child
        assert node.children is not None
        request = Vector()
        for t in job.tasks.values():
            request.add(t.resreq)
        node.children[job.key] = HNode(job.key, 1.0, attr, request, node, None)

    def _refresh(self, node: HNode, demanding: set[str]) -> None:
        if node.children is None:
            node.saturated = _saturated(node.attr.allocated, node.request, demanding)
            return
        mdr = 1.0
        for child in node.children.values():
            self._refresh(child, demanding)
            if child.attr.share != 0 and not child.saturated:
                mdr = min(mdr, _dominant(child.attr.allocated, self.totals))
        node.attr.allocated = Vector()
        saturated = True
        for child in node.children.values():
            if not child.saturated:
                saturated = False
            if child.attr.share != 0:
                part = (
                    child.attr.allocated
                    if child.saturated
                    else child.attr.allocated.copy().multi(mdr / child.attr.share)
                )
                node.attr.allocated.add(part)
        node.attr.share = _dominant(node.attr.allocated, self.totals)
        node.saturated = saturated

    def _update_hierarchy(self, root: HNode, total_allocated: Vector, job: JobInfo, attr: Attr) -> None:
        demanding = {r for r in self.total.resource_names() if total_allocated.get(r) < self.total.get(r)}
        self._build(root, job, attr)
        self._refresh(root, demanding)

    def _compare_queues(self, root: HNode, a: QueueInfo, b: QueueInfo) -> float:
        left, right = root, root
        lpaths, rpaths = a.hierarchy.split("/"), b.hierarchy.split("/")
        depth = min(len(lpaths), len(rpaths))
        for i in range(depth):
            if not left.saturated and right.saturated:
                return -1.0
            if left.saturated and not right.saturated:
                return 1.0
            ls, rs = left.attr.share / left.weight, right.attr.share / right.weight
            if ls != rs:
                return ls - rs
            if i < depth - 1:
                assert left.children is not None and right.children is not None
                nl, nr = left.children.get(lpaths[i + 1]), right.children.get(rpaths[i + 1])
                if nl is None or nr is None:
                    return 0.0
                left, right = nl, nr
        return 0.0

    # -- extension points -----------------------------------------------------------------

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        sa, sb = self._share(self.attrs[a.key]), self._share(self.attrs[b.key])
        return 0 if sa == sb else (-1 if sa < sb else 1)

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if not self.hierarchical:
            return 0
        result = self._compare_queues(self.root, a, b)
        return -1 if result < 0 else (1 if result > 0 else 0)

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        mine = _dominant(self.attrs[preemptor.job].allocated + preemptor.resreq, self.totals)
        allocations: dict[str, Vector] = {}
        out = []
        for c in candidates:
            remaining = allocations.setdefault(c.job, self.attrs[c.job].allocated.copy()).sub(c.resreq)
            theirs = _dominant(remaining, self.totals)
            if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
                out.append(c)
        return out

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        if not self.hierarchical:
            return None
        total_allocated = self.total_allocated.copy()
        root = self.root.clone()
        ljob = self.ssn.jobs[reclaimer.job]
        lqueue = self.ssn.queues[ljob.queue]
        lattr = Attr(self.attrs[ljob.key].allocated + reclaimer.resreq)
        total_allocated.add(reclaimer.resreq)
        lattr.share = _dominant(lattr.allocated, self.totals)
        self._update_hierarchy(root, total_allocated, ljob, lattr)
        out = []
        for c in candidates:
            rjob = self.ssn.jobs[c.job]
            rqueue = self.ssn.queues[rjob.queue]
            total_allocated.sub(c.resreq)
            rattr = Attr(self.attrs[rjob.key].allocated - c.resreq)
            rattr.share = _dominant(rattr.allocated, self.totals)
            self._update_hierarchy(root, total_allocated, rjob, rattr)
            result = self._compare_queues(root, lqueue, rqueue)
            total_allocated.add(c.resreq)
            rattr.allocated.add(c.resreq)
            rattr.share = _dominant(rattr.allocated, self.totals)
            self._update_hierarchy(root, total_allocated, rjob, rattr)
            if result < 0:
                out.append(c)
        return out

    # -- events ---------------------------------------------------------------------------

    def _changed(self, task: TaskInfo, sign: int) -> None:
        attr = self.attrs.get(task.job)
        if attr is None:
            return
        request = task.resreq
        attr.allocated.add(request) if sign > 0 else attr.allocated.sub(request)
        attr.stale = True  # an allocation event per task placed: the share waits until job order asks
        if self.hierarchical:
            attr.share, attr.stale = _dominant(attr.allocated, self.totals), False
            job = self.ssn.jobs[task.job]
            if self.ssn.in_queue(job):
                self.total_allocated.add(request) if sign > 0 else self.total_allocated.sub(request)
                self._update_hierarchy(self.root, self.total_allocated, job, attr)

    def allocated(self, task: TaskInfo) -> None:
        self._changed(task, +1)

    def deallocated(self, task: TaskInfo) -> None:
        self._changed(task, -1)
