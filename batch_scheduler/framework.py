"""The extension points, one Protocol each; what a plugin sees of a session; the registry as a value.

A plugin subclasses :class:`PluginBase` (its name, its typed arguments, the session it is
open in) and implements only the extension-point Protocols it needs — to filter and score
nodes, the placement framework's :class:`~cluster.nodeview.profile.Filter` and
:class:`~cluster.nodeview.profile.Score`, which take the node table and a placing, not the
session, so that the agent scheduler can run the same plugin;
:class:`~batch_scheduler.plugin_set.PluginSet` sorts a session's plugins into one list per
point and combines their answers as Volcano's tiers do. A plugin reads the session
through :class:`SessionView` and changes nothing in it: statements change the session and
tell the plugins through their event handlers.

The plugins and actions a conf may name are a :class:`Registry`, a plain value built by
:func:`batch_scheduler.registry.default_registry` and handed to the conf loader, which
decodes each plugin's arguments once, when the conf loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import msgspec

from batch_scheduler.arguments import Arguments
from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.tasks import TaskInfo
from batch_scheduler.vector import Vector
from batch_scheduler.votes import Refusal, Vote
from cluster.nodeview.pod_affinity import PlacedPods
from cluster.nodeview.predicates import Filtered
from cluster.nodeview.profile import Filter, Placing, Score, Values
from cluster.nodeview.table import Mask, NodeTable
from cluster.nodeview.topology import Domain, DomainSums, Topology

A = TypeVar("A", bound=Arguments)


# -- what a plugin sees -----------------------------------------------------------------


class SessionView(Protocol):
    """A session as plugins read it. Read-only: the columns, jobs and queues change only
    through statements, which tell the plugins (:class:`EventHandler`)."""

    @property
    def columns(self) -> NodeTable:
        """The node columns as placed so far this session (rows ``[:n]``)."""
        ...

    @property
    def n(self) -> int: ...

    @property
    def allowed(self) -> Mask:
        """The nodes this scheduler may use (its shard in hard mode)."""
        ...

    @property
    def total(self) -> Vector:
        """The cluster the shares divide: every node this scheduler may use, cordoned ones too."""
        ...

    @property
    def jobs(self) -> Mapping[str, JobInfo]: ...

    @property
    def queues(self) -> Mapping[str, QueueInfo]: ...

    def in_queue(self, job: JobInfo) -> bool:
        """The job's PodGroup and queue exist (Volcano leaves other jobs out of the session)."""
        ...

    def hierarchy_enabled(self, plugin: str) -> bool:
        """Whether the conf turns ``enableHierarchy`` on for the plugin."""
        ...

    def feasible(self, task: TaskInfo, *, ignore_resources: bool = False) -> Filtered:
        """The nodes the task may go to, by every predicate (free resources unless told otherwise)."""
        ...

    def victim_order(self, preemptor: TaskInfo) -> Callable[[TaskInfo], Any]:
        """A sort key putting the first victim first (Volcano's victims priority queue)."""
        ...

    @property
    def topology(self) -> Topology:
        """The HyperNode tree over the session's nodes."""
        ...

    @property
    def domain_sums(self) -> DomainSums:
        """Each HyperNode's summed allocatable and allocated figures, current."""
        ...

    def placing(self, task: TaskInfo) -> Placing:
        """The task as filters and scores see it (keyed by its template; ``anywhere`` is
        :meth:`feasible` free resources aside)."""
        ...

    @property
    def placed(self) -> PlacedPods:
        """The pods on the session's nodes by namespace and label, this session's placements included."""
        ...

    @property
    def pods_with_terms(self) -> bool:
        """Whether a pod on the session's nodes has an inter-pod (anti-)affinity term (cheap: no index built)."""
        ...


# -- the extension points ---------------------------------------------------------------


class Plugin(Protocol):
    name: str

    def open(self, ssn: SessionView) -> None: ...


class PluginBase(Generic[A]):
    """What every plugin has: its name in the conf, its decoded arguments, the session it is open in.

    A plugin is built fresh for each session; :meth:`open` runs before any extension point
    is asked. A plugin that works figures out at session open extends it.
    """

    ssn: SessionView

    def __init__(self, name: str, args: A) -> None:
        self.name = name
        self.args = args

    def open(self, ssn: SessionView) -> None:
        self.ssn = ssn


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
class PlacedScore(Protocol):
    def placed_score(self, task: TaskInfo, candidates: Mask) -> Values | None:
        """A score per node (every row of the session's table) that depends on where the session
        has put other pods — inter-pod preferences, task topology — or None when this plugin has
        nothing to say about the task. ``candidates``: the nodes the task could go to now (what a
        score normalises over). Asked afresh each time the task is placed, never kept per
        template as :class:`~cluster.nodeview.profile.Score` answers are; added to them."""
        ...


@runtime_checkable
class QueueGate(Protocol):
    def gate_passed(self, task: TaskInfo) -> None:
        """The task's queue took it and its queue-allocation gate is being removed: hold its
        request against the queue until it is placed (Volcano capacity's reserved cache)."""
        ...


@runtime_checkable
class IgnoredSettings(Protocol):
    def ignored_settings(self) -> Mapping[str, str]:
        """Job key -> what of the job's settings this plugin ignores this session, and why (a
        malformed annotation, say): shown by ``caldera status``, never a reason to wait."""
        ...


@runtime_checkable
class HyperNodeOrder(Protocol):
    def hypernode_scores(
        self, job: JobInfo, tasks: Sequence[TaskInfo], domains: Sequence[Domain]
    ) -> Mapping[str, float]:
        """A score per domain ``tasks`` of the job (its gang, or one subgroup) could go to, higher is
        better (Volcano's HyperNodeOrderFn)."""
        ...


@runtime_checkable
class JobReady(Protocol):
    def job_ready(self, job: JobInfo) -> bool: ...


@runtime_checkable
class JobPipelined(Protocol):
    def job_pipelined(self, job: JobInfo) -> bool: ...


@runtime_checkable
class JobValid(Protocol):
    def why_not_schedulable(self, job: JobInfo) -> Refusal | None:
        """None when the job may be scheduled this session, else why not (Volcano's JobValid)."""
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
    Filter: "enablePredicate",  # nodes are filtered and scored through the placement framework's
    Score: "enableNodeOrder",  # Protocols (cluster.nodeview.profile), as the agent's profile is
    PlacedScore: "enableNodeOrder",
    HyperNodeOrder: "enabledHyperNodeOrder",
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
OTHER_SWITCHES = frozenset(
    {
        "enableNamespaceOrder",
        "enableHierarchy",
        "enabledClusterOrder",
        "EnabledClusterOrder",
        "enableBestNode",
        "enableTargetJob",
        "enableReservedNodes",
        "enabledVictim",
        "enableJobBackfillReady",
        "enabledQueueOrder",
    }
)


# -- the registry -----------------------------------------------------------------------


class PluginSpec(msgspec.Struct, frozen=True):
    """A plugin a conf may name: what builds it (from its name and decoded arguments) and the
    type its arguments decode to. Build one with :func:`plugin_spec`, which checks that the two agree."""

    create: Callable[[str, Any], Plugin]
    arguments: type[Arguments] = Arguments


def plugin_spec(create: Callable[[str, A], Plugin], arguments: type[A]) -> PluginSpec:
    return PluginSpec(create, arguments)


class ActionSpec(msgspec.Struct, frozen=True):
    """An action a conf may name: ``run(session)``, and the arguments it reads (others have no effect).

    ``run`` takes the :class:`~batch_scheduler.session.Session`, which sits above this module."""

    run: Callable[..., None]
    arguments: frozenset[str] = frozenset()


class Registry(msgspec.Struct, frozen=True):
    """The plugins and actions a conf may name, by name."""

    plugins: Mapping[str, PluginSpec]
    actions: Mapping[str, ActionSpec]
