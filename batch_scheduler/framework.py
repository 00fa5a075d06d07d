"""The extension points: one Protocol each, and the tier semantics that combine plugins.

A plugin implements only the Protocols it needs; :class:`Tiers` sorts the session's plugin
instances into one list per point, once, honouring the conf's ``enableXxx`` switches
(absent = enabled). How several plugins combine follows Volcano:

- orders (job, queue, task): tier by tier, plugin by plugin, the first non-zero answer wins;
  then Volcano's defaults (jobs and queues by creation then name, tasks by pod index, then
  creation, then uid);
- predicates: every plugin must pass (masks are ANDed);
- node scores: summed over every plugin;
- job ready: every plugin must agree; job valid: the first refusal wins (no switch);
- job pipelined: any reject fails; otherwise a tier with a permit passes;
- job starving: the first tier with a plugin decides, every plugin of it must agree; no
  plugin at all means not starving;
- allocatable and preemptive: every plugin must agree; overused: any plugin may say so;
- enqueueable: any reject fails; otherwise a tier with a permit passes;
- preemptable / reclaimable: within a tier the victims of the voting plugins are
  intersected; the first tier with a non-empty result wins. As in Volcano, an intersection
  that comes out empty starts over from the next plugin's victims.
- event handlers: every plugin that has them hears every allocation and deallocation
  (statements call them), so shares it keeps stay current.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import msgspec
import numpy as np

from batch_scheduler.info import (
    JobInfo,
    QueueInfo,
    TaskInfo,
    job_order,
    queue_order,
    task_order,
)
from cluster.nodeview.predicates import Filtered
from cluster.nodeview.scores import Index, Scores
from cluster.nodeview.table import Mask

if TYPE_CHECKING:
    from batch_scheduler.session import Session

T = TypeVar("T")


# -- votes and verdicts -----------------------------------------------------------------


class VoteKind(enum.Enum):
    PERMIT = "permit"
    ABSTAIN = "abstain"
    REJECT = "reject"


class Vote(msgspec.Struct, frozen=True):
    """A plugin's enqueue vote; a reject says why, in words a user can act on."""

    kind: VoteKind
    reason: str = ""
    condition: str = ""  # the PodGroup condition reason, e.g. QueueCapabilityExceeded


PERMIT = Vote(VoteKind.PERMIT)
ABSTAIN = Vote(VoteKind.ABSTAIN)


class Refusal(msgspec.Struct, frozen=True):
    """Why a queue may not take a task (allocatable) or is overused: a message and a condition reason."""

    message: str
    condition: str


# -- the extension points ---------------------------------------------------------------


class Plugin(Protocol):
    name: str

    def open(self, ssn: Session) -> None: ...


@runtime_checkable
class JobOrder(Protocol):
    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        """Negative when ``a`` goes first, positive when ``b`` does, 0 when this plugin does not care."""
        ...


@runtime_checkable
class QueueOrder(Protocol):
    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int: ...


@runtime_checkable
class TaskOrder(Protocol):
    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        """As job_order. A plugin may also define ``task_order_key(task)``, a sort key that
        orders tasks as ``task_order`` does (it lets a whole list be sorted by key)."""
        ...


@runtime_checkable
class PredicateFilter(Protocol):
    def predicate(self, ssn: Session, task: TaskInfo, allowed: Mask, *, resources: bool) -> Filtered:
        """The nodes the task may go to, among ``allowed``, with the count each check ruled out.

        ``resources``: whether free resources count (preempt and reclaim look past them).
        """
        ...


@runtime_checkable
class NodeOrder(Protocol):
    def node_scores(self, ssn: Session, task: TaskInfo, nodes: Index | None = None) -> Scores:
        """A score per node (already weighted), higher is better; only for ``nodes`` when given.

        A score may depend on a node's allocation only through allocated + ``task.request``
        (the chooser scores "j more tasks like this one" as one task asking j + 1 times).
        """
        ...


@runtime_checkable
class JobReady(Protocol):
    def job_ready(self, job: JobInfo) -> bool: ...


@runtime_checkable
class JobPipelined(Protocol):
    def job_pipelined(self, job: JobInfo) -> bool: ...


@runtime_checkable
class JobValid(Protocol):
    def job_valid(self, job: JobInfo) -> str | None:
        """None when the job may be scheduled, else why not."""
        ...


@runtime_checkable
class JobStarving(Protocol):
    def job_starving(self, job: JobInfo) -> bool: ...


@runtime_checkable
class Preemptive(Protocol):
    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Whether the queue may take resources back for ``task`` (reclaim)."""
        ...


@runtime_checkable
class VictimQueueOrder(Protocol):
    def victim_queue_order(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        """Negative when ``a``'s tasks are evicted first."""
        ...


@runtime_checkable
class EventHandler(Protocol):
    def allocated(self, task: TaskInfo) -> None:
        """The task now holds resources (allocated, pipelined, or an eviction undone)."""
        ...

    def deallocated(self, task: TaskInfo) -> None:
        """The task gave its resources back (evicted, or a placement undone)."""
        ...


@runtime_checkable
class Preemptable(Protocol):
    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        """The candidates this plugin lets go, or None to abstain."""
        ...


@runtime_checkable
class Reclaimable(Protocol):
    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None: ...


@runtime_checkable
class Overused(Protocol):
    def overused(self, queue: QueueInfo) -> Refusal | None: ...


@runtime_checkable
class Allocatable(Protocol):
    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None: ...


@runtime_checkable
class Enqueueable(Protocol):
    def enqueueable(self, job: JobInfo) -> Vote:
        """Whether the job may be admitted. As in Volcano, a plugin may reserve the job's
        minResources as it permits (proportion and capacity do), even if a later voter rejects."""
        ...

    def enqueued(self, job: JobInfo) -> None:
        """The job was admitted (every voter hears it, whatever it voted)."""
        ...


# Which conf switch turns each point off (Volcano's YAML keys).
SWITCHES: dict[type, str] = {
    JobOrder: "enableJobOrder",
    QueueOrder: "enableQueueOrder",
    TaskOrder: "enableTaskOrder",
    PredicateFilter: "enablePredicate",
    NodeOrder: "enableNodeOrder",
    JobReady: "enableJobReady",
    JobPipelined: "enableJobPipelined",
    JobStarving: "enableJobStarving",
    Preemptable: "enablePreemptable",
    Reclaimable: "enableReclaimable",
    Overused: "enabledOverused",
    Allocatable: "enabledAllocatable",
    Enqueueable: "enableJobEnqueued",
    Preemptive: "enablePreemptive",
}

# Switches Volcano's conf may carry for points caldera does not have; accepted, no effect.
OTHER_SWITCHES = frozenset({
    "enableNamespaceOrder", "enableHierarchy", "enabledClusterOrder", "EnabledClusterOrder",
    "enableBestNode", "enableTargetJob", "enableReservedNodes", "enabledVictim", "enableJobBackfillReady",
    "enabledQueueOrder",
})


class Tiers:
    """The session's plugins sorted into per-point lists, tier by tier."""

    def __init__(self, tiers: Sequence[Sequence[tuple[Plugin, frozenset[str]]]]) -> None:
        """``tiers``: per tier, each plugin instance with the switches the conf turned off."""
        self.tiers = [[p for p, _ in tier] for tier in tiers]

        def point(proto: Any) -> list[list[Any]]:
            switch = SWITCHES[proto]
            return [[p for p, off in tier if isinstance(p, proto) and switch not in off] for tier in tiers]

        def flat(proto: Any) -> list[Any]:
            return [p for tier in point(proto) for p in tier]

        self.job_orders: list[list[JobOrder]] = point(JobOrder)
        self.queue_orders: list[list[QueueOrder]] = point(QueueOrder)
        self.task_orders: list[list[TaskOrder]] = point(TaskOrder)
        self.predicates: list[PredicateFilter] = flat(PredicateFilter)
        self.node_orders: list[NodeOrder] = flat(NodeOrder)
        self.job_readies: list[JobReady] = flat(JobReady)
        self.job_pipelineds: list[JobPipelined] = flat(JobPipelined)
        self.job_starvings: list[JobStarving] = flat(JobStarving)
        self.job_valids: list[JobValid] = [p for tier in self.tiers for p in tier if isinstance(p, JobValid)]
        self.preemptables: list[list[Preemptable]] = point(Preemptable)
        self.reclaimables: list[list[Reclaimable]] = point(Reclaimable)
        self.overuseds: list[Overused] = flat(Overused)
        self.allocatables: list[Allocatable] = flat(Allocatable)
        self.enqueueables: list[list[Enqueueable]] = point(Enqueueable)
        self.preemptives: list[Preemptive] = flat(Preemptive)
        self.job_pipelined_tiers: list[list[JobPipelined]] = point(JobPipelined)
        self.job_starving_tiers: list[list[JobStarving]] = point(JobStarving)
        self.victim_queue_orders: list[VictimQueueOrder] = [
            p for tier in self.tiers for p in tier if isinstance(p, VictimQueueOrder)]
        self.event_handlers: list[EventHandler] = [p for tier in self.tiers for p in tier if isinstance(p, EventHandler)]

    # -- orders -------------------------------------------------------------------------

    @staticmethod
    def _compare(tiers: list[list[T]], call: Callable[[T], int]) -> int:
        for tier in tiers:
            for plugin in tier:
                result = call(plugin)
                if result:
                    return result
        return 0

    def job_compare(self, a: JobInfo, b: JobInfo) -> int:
        return self._compare(self.job_orders, lambda p: p.job_order(a, b)) or job_order(a, b)

    def queue_compare(self, a: QueueInfo, b: QueueInfo) -> int:
        return self._compare(self.queue_orders, lambda p: p.queue_order(a, b)) or queue_order(a, b)

    def task_compare(self, a: TaskInfo, b: TaskInfo) -> int:
        return self._compare(self.task_orders, lambda p: p.task_order(a, b)) or task_order(a, b)

    def job_key(self) -> Callable[[JobInfo], Any]:
        return functools.cmp_to_key(self.job_compare)

    def queue_key(self) -> Callable[[QueueInfo], Any]:
        return functools.cmp_to_key(self.queue_compare)

    def task_key(self) -> Callable[[TaskInfo], Any]:
        return functools.cmp_to_key(self.task_compare)

    def sort_tasks(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        """``tasks`` in task order. When every task-order plugin also gives a sort key
        (``task_order_key``) and the tasks all have a pod index or all have none, a tuple key
        sorts them as the comparisons would, without calling back into Python per comparison."""
        out = list(tasks)
        plugins = [p for tier in self.task_orders for p in tier]
        keys = [getattr(p, "task_order_key", None) for p in plugins]
        indexed = sum(1 for t in out if t.index is not None)
        if None in keys or 0 < indexed < len(out):
            out.sort(key=self.task_key())
            return out
        plugin_keys = [k for k in keys if k is not None]
        if indexed:
            out.sort(key=lambda t: (*(k(t) for k in plugin_keys), t.index, t.created, t.uid))
        else:
            out.sort(key=lambda t: (*(k(t) for k in plugin_keys), t.created, t.uid))
        return out

    def victim_queue_compare(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        """Negative when ``a``'s tasks go first as victims; by default the queue last in queue order."""
        for p in self.victim_queue_orders:
            result = p.victim_queue_order(a, b, preemptor)
            if result:
                return result
        return -self.queue_compare(a, b)

    # -- job questions ------------------------------------------------------------------

    def job_ready(self, job: JobInfo) -> bool:
        for p in self.job_readies:  # asked for every task placed: no generator
            if not p.job_ready(job):
                return False
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        for tier in self.job_pipelined_tiers:
            permitted = False
            for p in tier:
                if not p.job_pipelined(job):
                    return False
                permitted = True
            if permitted:
                return True
        return True

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self.job_starving_tiers:
            if tier:
                return all(p.job_starving(job) for p in tier)
        return False

    def job_invalid(self, job: JobInfo) -> str | None:
        for p in self.job_valids:
            reason = p.job_valid(job)
            if reason is not None:
                return reason
        return None

    def enqueueable(self, job: JobInfo) -> Vote:
        """PERMIT or the first REJECT (any reject fails; a tier with a permit passes)."""
        for tier in self.enqueueables:
            permitted = False
            for p in tier:
                vote = p.enqueueable(job)
                if vote.kind is VoteKind.REJECT:
                    return vote
                permitted |= vote.kind is VoteKind.PERMIT
            if permitted:
                return PERMIT
        return PERMIT

    def enqueued(self, job: JobInfo) -> None:
        """Tell every voter the job was admitted (only now do they reserve its minResources)."""
        for tier in self.enqueueables:
            for p in tier:
                p.enqueued(job)

    # -- queue questions ----------------------------------------------------------------

    def overused(self, queue: QueueInfo) -> Refusal | None:
        for p in self.overuseds:
            refusal = p.overused(queue)
            if refusal is not None:
                return refusal
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        for p in self.allocatables:
            refusal = p.allocatable(queue, task)
            if refusal is not None:
                return refusal
        return None

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(p.preemptive(queue, task) for p in self.preemptives)

    # -- events -------------------------------------------------------------------------

    def allocated(self, task: TaskInfo) -> None:
        for p in self.event_handlers:
            p.allocated(task)

    def deallocated(self, task: TaskInfo) -> None:
        for p in self.event_handlers:
            p.deallocated(task)

    # -- victims ------------------------------------------------------------------------

    @staticmethod
    def _victims(tiers: list[list[T]], call: Callable[[T], list[TaskInfo] | None]) -> list[TaskInfo]:
        for tier in tiers:
            chosen: list[TaskInfo] = []
            for plugin in tier:
                result = call(plugin)
                if result is None:
                    continue
                if not result:
                    chosen = []
                    break
                if not chosen:  # first voter — or an empty intersection, which Volcano starts over from
                    chosen = list(result)
                else:
                    uids = {t.uid for t in result}
                    chosen = [t for t in chosen if t.uid in uids]
            if chosen:
                return chosen
        return []

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return self._victims(self.preemptables, lambda p: p.preemptable(preemptor, candidates))

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return self._victims(self.reclaimables, lambda p: p.reclaimable(reclaimer, candidates))

    # -- nodes --------------------------------------------------------------------------

    def scores(self, ssn: Session, task: TaskInfo, nodes: Index | None = None) -> Scores:
        """The summed node scores of every plugin, for every node or only ``nodes``."""
        total = np.zeros(ssn.n if nodes is None else len(nodes), dtype=np.float64)
        for p in self.node_orders:
            total += p.node_scores(ssn, task, nodes)
        return total


def check_arguments(plugin: str, arguments: Mapping[str, str], accepted: Iterable[str] = (), prefixes: Iterable[str] = ()) -> None:
    """Refuse an argument name the plugin does not know, naming what it accepts."""
    known, starts = set(accepted), tuple(prefixes)
    for name in arguments:
        if name not in known and not (starts and name.startswith(starts)):
            listed = ", ".join(sorted(known) + [p + "<name>" for p in starts]) or "none"
            raise ValueError(f"unknown argument {name!r} for plugin {plugin} (accepted: {listed})")


def number(arguments: Mapping[str, str], name: str, default: float, *, minimum: float = 0.0) -> float:
    """A numeric argument, at least ``minimum``; ValueError naming it otherwise."""
    text = arguments.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= minimum) or value == float("inf"):
        raise ValueError(f"{name}: {text!r} (expected a number >= {minimum:g})")
    return value


def plugins_of(tiers: Iterable[Iterable[tuple[Plugin, frozenset[str]]]]) -> list[Plugin]:
    return [p for tier in tiers for p, _ in tier]
