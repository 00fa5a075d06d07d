"""What a task counts for in the share plugins (drf, proportion): Volcano's ``TaskInfo.Resreq``.

Volcano counts every pod as one ``pods`` besides its requests, and its drf and proportion
plugins add those up with the rest: a job's dominant share may be its share of the
cluster's pod slots, and a queue's deserved share has a pod count that its allocation is
compared against (only the comparisons Volcano makes "in the task's dimensions" skip
``pods``). The session's job and queue figures leave ``pods`` out, so these plugins keep
their own, with it.
"""

from __future__ import annotations

from batch_scheduler.info import TaskInfo
from batch_scheduler.vector import Vector
from cluster.resources import PODS

ONE_POD = Vector(scalars={PODS: 1.0})


def resreq(task: TaskInfo) -> Vector:
    """The task's request as a share: its resources and one pod (a fresh vector)."""
    return task.resreq.copy().add(ONE_POD)
