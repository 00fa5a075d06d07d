"""A statement: tentative changes to the session made while trying one job, kept or undone as a whole.

``allocate`` takes a task's request on a node of the session's columns; ``pipeline`` sets a
task aside for a node whose resources evictions are freeing (Volcano counts it against
its queue's and job's shares through the plugins' event handlers, not against its job's
allocation); ``evict`` marks a running task as releasing. ``commit`` hands the allocations
to the session as one gang batch for the binder (the tasks become Binding) and the
evictions to the session's eviction list; pipelined tasks stay pipelined for the next
session. ``discard`` undoes every change in reverse order, so a job that cannot become
ready leaves no trace. A statement neither committed nor discarded leaves its changes in
the session, as Volcano's allocate does with a job that is pipelined but not ready.
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
        self.ops: list[tuple[Op, TaskInfo, str, TaskStatus]] = []  # (op, task, node, status before)

    def allocate(self, task: TaskInfo, node: str) -> None:
        self.ssn.columns.add(node, task.request)
        self.ssn.chooser.changed(node, task, +1)
        before = task.status
        task.status, task.node = TaskStatus.ALLOCATED, node
        self.ssn.allocated_event(task)
        self.ops.append((Op.ALLOCATE, task, node, before))

    def pipeline(self, task: TaskInfo, node: str) -> None:
        """Reserve the task's request out of what the node's evictions will free."""
        before = task.status
        task.status, task.node = TaskStatus.PIPELINED, node
        self.ssn.releasing_add(task, -1)
        self.ssn.allocated_event(task)
        self.ops.append((Op.PIPELINE, task, node, before))

    def evict(self, task: TaskInfo) -> None:
        before = task.status
        task.status = TaskStatus.RELEASING
        self.ssn.releasing_add(task, +1)
        self.ssn.deallocated_event(task)
        self.ops.append((Op.EVICT, task, task.node, before))

    def discard(self) -> None:
        for op, task, node, before in reversed(self.ops):
            if op is Op.ALLOCATE:
                self.ssn.columns.add(node, task.request.scaled(-1))
                self.ssn.chooser.changed(node, task, -1)
                task.status, task.node = TaskStatus.PENDING, ""
                self.ssn.deallocated_event(task)
            elif op is Op.PIPELINE:
                self.ssn.releasing_add(task, +1)
                task.status, task.node = TaskStatus.PENDING, ""
                self.ssn.deallocated_event(task)
            else:
                self.ssn.releasing_add(task, -1)
                task.status = before
                self.ssn.allocated_event(task)
        self.ops.clear()

    def commit(self) -> None:
        allocated = [task for op, task, _, _ in self.ops if op is Op.ALLOCATE]
        for task in allocated:
            task.status = TaskStatus.BINDING
        if allocated:
            self.ssn.commits.append(allocated)
        self.ssn.evictions += [task for op, task, _, _ in self.ops if op is Op.EVICT]
        self.ops.clear()

    @property
    def empty(self) -> bool:
        return not self.ops

    @property
    def evicted(self) -> int:
        return sum(1 for op, _, _, _ in self.ops if op is Op.EVICT)
