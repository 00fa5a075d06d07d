"""A statement: tentative changes to the session made while trying one job, kept or undone as a whole.

``allocate`` takes a task's request on a node of the session's columns; ``pipeline`` sets a
task aside for a node whose resources evictions are freeing (it counts against its job
and queue like an allocation); ``evict`` marks a running
task as releasing. ``commit`` hands the allocations to the session as one gang batch for
the binder, and the evictions to the session's eviction list; ``discard`` undoes every
change in reverse order, so a job that cannot become ready leaves no trace.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from batch_scheduler.info import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from batch_scheduler.session import Session


class Op(enum.Enum):
    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"


class Statement:
    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[tuple[Op, TaskInfo, str]] = []

    def allocate(self, task: TaskInfo, node: str) -> None:
        self.ssn.columns.add(node, task.request)
        self.ssn.chooser.changed(node, task, +1)
        task.status, task.node = TaskStatus.ALLOCATED, node
        self.ssn.account(task, +1)
        self.ops.append((Op.ALLOCATE, task, node))

    def pipeline(self, task: TaskInfo, node: str) -> None:
        """Reserve the task's request out of what the node's evictions will free."""
        task.status, task.node = TaskStatus.PIPELINED, node
        self.ssn.releasing_add(task, -1)
        self.ssn.account(task, +1)  # counts against its queue, as an allocation would
        self.ops.append((Op.PIPELINE, task, node))

    def evict(self, task: TaskInfo) -> None:
        task.status = TaskStatus.RELEASING
        self.ssn.account(task, -1)
        self.ssn.releasing_add(task, +1)
        self.ops.append((Op.EVICT, task, task.node))

    def discard(self) -> None:
        for op, task, node in reversed(self.ops):
            if op is Op.ALLOCATE:
                self.ssn.columns.add(node, task.request.scaled(-1))
                self.ssn.chooser.changed(node, task, -1)
                self.ssn.account(task, -1)
                task.status, task.node = TaskStatus.PENDING, ""
            elif op is Op.PIPELINE:
                self.ssn.account(task, -1)
                self.ssn.releasing_add(task, +1)
                task.status, task.node = TaskStatus.PENDING, ""
            else:
                self.ssn.releasing_add(task, -1)
                self.ssn.account(task, +1)
                task.status = TaskStatus.BOUND
        self.ops.clear()

    def commit(self) -> None:
        allocated = [task for op, task, _ in self.ops if op is Op.ALLOCATE]
        if allocated:
            self.ssn.commits.append(allocated)
        self.ssn.evictions += [task for op, task, _ in self.ops if op is Op.EVICT]
        self.ops.clear()

    @property
    def empty(self) -> bool:
        return not self.ops
