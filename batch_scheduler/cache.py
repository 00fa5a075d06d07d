"""The batch scheduler's cache: what the feed says, what earlier sessions decided, and the snapshot a session starts from.

:meth:`BatchCache.apply` keeps this scheduler's pods, the PodGroups, Queues and
PriorityClasses and the node table current from the feed (a full update replaces
everything). Beside them it keeps what the cycle decided and the feed has not said yet:
the phase each job was left in, the pods being evicted (left alone as victims until they
are gone, or for :data:`RELEASING_TIMEOUT`), when each pending pod was first seen. The
cycle also records its committed pods here as bound before the feed reports them (see
:mod:`batch_scheduler.cycle`). :meth:`BatchCache.snapshot` copies it all for one session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from batch_scheduler.session_input import SessionInput, session_topology
from cluster.model.core import Namespace, PriorityClass
from cluster.model.topology import HyperNode
from cluster.model.volcano import PodGroup, Queue
from cluster.nodeview.assume import Assumed
from cluster.nodeview.table import NodeTable
from cluster.store.keys import Kind
from cluster.store.records import TERMINAL_PHASES, PodRecord, Update

KINDS = (Kind.NODE, Kind.POD, Kind.PODGROUP, Kind.QUEUE, Kind.PRIORITYCLASS, Kind.HYPERNODE, Kind.NAMESPACE)
RELEASING_TIMEOUT = 300.0  # seconds an evicted pod is left alone before it may be chosen again


class BatchCache:
    def __init__(
        self, names: tuple[str, ...], clock: Callable[[], float], hypernode_labels: tuple[str, ...] = ()
    ) -> None:
        """``names``: the schedulerNames whose pods are kept; ``clock``: monotonic seconds;
        ``hypernode_labels``: as :class:`~batch_scheduler.session_input.SessionConfig`'s."""
        self.names = names
        self.clock = clock
        self.columns = NodeTable()
        # Committed placements the feed has not reported yet (cluster.nodeview.assume).
        self.assumed = Assumed(self.columns)
        self.pods: dict[str, PodRecord] = {}
        self.others: dict[str, PodRecord] = {}  # other schedulers' pods on nodes
        self.podgroups: dict[str, PodGroup] = {}  # by namespace/name
        self.queues: dict[str, Queue] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.hypernodes: dict[str, HyperNode] = {}
        self.hypernodes_generation = 0
        self.namespaces: dict[str, Namespace] = {}  # for inter-pod rules' namespaceSelector
        self.hypernode_labels = hypernode_labels
        self.phases: dict[str, str] = {}  # job key -> the phase the last session left it in
        self.releasing: dict[str, float] = {}  # uid -> when evicted
        self.first_seen: dict[str, float] = {}  # pending pod uid -> when first seen
        self.version = 0

    def apply(self, update: Update) -> None:
        """Bring the cache up to date with a feed update (a full one replaces everything)."""
        self.version = update.version
        self.assumed.apply(update)
        if update.full:
            self.pods.clear()
            self.others.clear()
        now = self.clock()
        for uid, record in update.pods.items():
            if record is None or record.scheduler not in self.names:
                self.pods.pop(uid, None)
                self.first_seen.pop(uid, None)
                if record is not None and record.node and record.phase not in TERMINAL_PHASES:
                    self.others[uid] = record  # on a node: inter-pod rules count it
                else:
                    self.others.pop(uid, None)
                continue
            self.pods[uid] = record
            if record.pending:
                self.first_seen.setdefault(uid, now)
        objects = update.objects
        for kind, target in (
            (Kind.PODGROUP, self.podgroups),
            (Kind.QUEUE, self.queues),
            (Kind.PRIORITYCLASS, self.priority_classes),
            (Kind.HYPERNODE, self.hypernodes),
            (Kind.NAMESPACE, self.namespaces),
        ):
            if kind is Kind.HYPERNODE and (update.full or _tree_changed(self.hypernodes, objects.get(kind, {}))):
                self.hypernodes_generation += 1  # the tree is rebuilt; a status written back changes nothing
            if update.full:
                target.clear()
            for name, obj in objects.get(kind, {}).items():
                if obj is None:
                    target.pop(name, None)  # PodGroups are named namespace/name in the store
                else:
                    target[name] = obj

    def snapshot(self) -> SessionInput:
        """A copy for one session (evictions that finished or timed out are forgotten first)."""
        now = self.clock()
        self.releasing = {u: t for u, t in self.releasing.items() if u in self.pods and now - t < RELEASING_TIMEOUT}
        pods = [r for r in self.pods.values() if r.phase not in TERMINAL_PHASES or r.group]
        # Built on the cache's table, so that later sessions' copies find it there.
        session_topology(self.columns, self.hypernodes, self.hypernodes_generation, self.hypernode_labels)
        return SessionInput(
            columns=self.columns.snapshot(),
            pods=pods,
            podgroups=dict(self.podgroups),
            queues=dict(self.queues),
            priority_classes=dict(self.priority_classes),
            phases=dict(self.phases),
            releasing=frozenset(self.releasing),
            hypernodes=dict(self.hypernodes),
            hypernodes_generation=self.hypernodes_generation,
            others=list(self.others.values()),
            namespaces={name: ns.metadata.labels for name, ns in self.namespaces.items()},
        )


def _tree_changed(known: dict[str, HyperNode], changes: Mapping[str, object]) -> bool:
    """Whether these changes add, remove or re-spec a HyperNode (not only its status)."""
    for name, obj in changes.items():
        was = known.get(name)
        if obj is None or was is None or not isinstance(obj, HyperNode) or obj.spec != was.spec:
            return True
    return False
