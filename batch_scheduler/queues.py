"""Queues as a session sees them: a Queue's spec, its jobs in this session, Volcano's default order."""

from __future__ import annotations

from dataclasses import dataclass, field

from batch_scheduler.jobs import JobInfo
from batch_scheduler.vector import Vector
from cluster.model.labels import HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION
from cluster.model.volcano import Queue


@dataclass(eq=False)
class QueueInfo:
    name: str
    weight: int
    capability: Vector | None  # None: not stated (unlimited)
    guarantee: Vector | None
    deserved: Vector | None  # as stated in the spec (capacity plugin); proportion computes its own
    parent: str
    reclaimable: bool
    state: str
    queue: Queue | None  # None for the implicit default queue
    priority: int = 0
    hierarchy: str = ""  # volcano.sh/hierarchy, e.g. root/eng/prod
    weights: str = ""  # volcano.sh/hierarchy-weights, e.g. 1/2/8
    created: str = ""
    jobs: list[JobInfo] = field(default_factory=list)  # the session's jobs in this queue
    order: int = 0

    @property
    def allocated(self) -> Vector:
        """What the queue's jobs hold (Volcano's queue status ``allocated``); the plugins keep their own figures."""
        total = Vector()
        for job in self.jobs:
            held = job.allocated
            if held.cpu or held.memory or held.scalars:
                total.add(held)
        return total

    @property
    def open(self) -> bool:
        """Takes new jobs. caldera runs no queue controller, so an unset state counts as Open."""
        return self.state in ("Open", "")


def queue_info(queue: Queue, order: int) -> QueueInfo:
    spec = queue.spec
    annotations = queue.metadata.annotations
    return QueueInfo(
        name=queue.name,
        weight=spec.weight,
        capability=Vector.from_quantities(spec.capability or None, field="spec.capability"),
        guarantee=Vector.from_quantities(spec.guarantee.resource or None, field="spec.guarantee.resource"),
        deserved=Vector.from_quantities(spec.deserved or None, field="spec.deserved"),
        parent=spec.parent,
        reclaimable=spec.reclaimable,
        state=queue.status.state,
        queue=queue,
        priority=spec.priority,
        hierarchy=annotations.get(HIERARCHY_ANNOTATION, ""),
        weights=annotations.get(HIERARCHY_WEIGHTS_ANNOTATION, ""),
        created=queue.metadata.creation_timestamp or "",
        order=order,
    )


def default_queue(name: str) -> QueueInfo:
    """The queue that exists implicitly (weight 1, open, unlimited) until someone creates it."""
    return QueueInfo(
        name=name,
        weight=1,
        capability=None,
        guarantee=None,
        deserved=None,
        parent="",
        reclaimable=True,
        state="Open",
        queue=None,
        order=-1,
    )


def queue_order(a: QueueInfo, b: QueueInfo) -> int:
    """Volcano's default queue order: creation, then name."""
    if a.created != b.created:
        return -1 if a.created < b.created else 1
    return (a.name > b.name) - (a.name < b.name)
