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

Statements are the only writers of a session: they change it through its narrow methods
(``place``, ``releasing_add``, the event calls, ``bind_later``, ``evict_later``).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from batch_scheduler.tasks import TaskInfo, TaskStatus

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
        self.ssn.place(task, node, +1)
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

    def unpipeline(self, task: TaskInfo) -> None:
        """Take a pipelined task back to pending: what it reserved returns to its node's evictions (not
        recorded: discard calls it to undo a pipeline, backfill to place the task afresh)."""
        self.ssn.releasing_add(task, +1)
        task.status, task.node = TaskStatus.PENDING, ""
        self.ssn.deallocated_event(task)

    def discard(self) -> None:
        for op, task, node, before in reversed(self.ops):
            if op is Op.ALLOCATE:
                self.ssn.place(task, node, -1)
                task.status, task.node = TaskStatus.PENDING, ""
                self.ssn.deallocated_event(task)
            elif op is Op.PIPELINE:
                self.unpipeline(task)
            else:
                self.ssn.releasing_add(task, -1)
                task.status = before
                self.ssn.allocated_event(task)
        self.ops.clear()

    def commit(self) -> None:
        self.bind([task for op, task, _, _ in self.ops if op is Op.ALLOCATE])
        self.ssn.evict_later([task for op, task, _, _ in self.ops if op is Op.EVICT])
        self.ops.clear()

    def merge(self, other: Statement) -> None:
        """Take ``other``'s changes as this statement's own (a subgroup's, into its job's)."""
        self.ops.extend(other.ops)
        other.ops.clear()

    def keep(self) -> None:
        """Leave the changes in the session with nothing to undo and nothing handed on (Volcano's
        ``ssn.Allocate`` outside a statement)."""
        self.ops.clear()

    def bind(self, tasks: list[TaskInfo]) -> None:
        """Hand tasks placed in this session to the binder as one gang batch (they become Binding)."""
        for task in tasks:
            task.status = TaskStatus.BINDING
        if tasks:
            self.ssn.bind_later(tasks)

    @property
    def empty(self) -> bool:
        return not self.ops

    @property
    def evicted(self) -> int:
        return sum(1 for op, _, _, _ in self.ops if op is Op.EVICT)
