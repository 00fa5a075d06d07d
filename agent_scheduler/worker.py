"""One agent-scheduler worker: a replica of the node columns, the core, the binder.

The worker is plain asyncio; ``actors.py`` runs it inside a Ray actor, and tests or the
dry-run may run it in-process. It keeps its replica current from the feed, decides a
micro-batch of pod records (as the loop last saw them), commits the batch through the
binder in one round trip, and on a
``Conflict`` refreshes the replica from the returned figures and decides those pods again
at once (up to ``max_retries`` times). Committed pods are then bound; a failed bind
releases the reservation and the pod is pending again.
"""

from __future__ import annotations

import asyncio
import enum
import random
import time

import msgspec

from agent_scheduler.core import CoreConfig, NoFit, Task, decide
from binder.bind import BindTarget, bind_committed
from binder.commit import Binder
from binder.results import Committed, Conflict, Placement, Reason
from cluster.model.resources import Resources
from cluster.nodeview.table import NodeColumns
from cluster.store.feed import Informer
from cluster.store.keys import Kind
from cluster.store.records import Binding, PodRecord
from cluster.store.store import Store


class OutcomeKind(enum.StrEnum):
    BOUND = "bound"
    UNSCHEDULABLE = "unschedulable"  # fits nowhere: back off
    RETRY = "retry"  # conflicts outlasted the retries, or the bind failed: try again first thing
    GONE = "gone"  # deleted, finished, or bound by someone else


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    kind: OutcomeKind
    node: str = ""
    reason: str = ""
    attempts: int = 1


class BatchResult(msgspec.Struct, frozen=True, kw_only=True):
    outcomes: list[Outcome]
    committed: int = 0
    conflicts: int = 0
    resolved: int = 0
    rejected: int = 0
    seconds: float = 0.0


class WorkerConfig(msgspec.Struct, frozen=True, kw_only=True):
    core: CoreConfig = CoreConfig()
    max_retries: int = 3
    seed: int = 0
    coarse: bool = False  # Volcano-style version-only binder, for the bench's comparison
    # The replica reads the feed at most every this often while it is busy: at hundreds of
    # pods/s, reading each change as it comes cost the worker a wake-up, a round trip and a
    # fetch per change and slowed its batches (bench agent --rate 500: p50 -7% at 2 ms). A
    # view older by that much costs a few more binder conflicts, each refreshed at once.
    replica_settle_s: float = 0.002


_RETRYABLE = {Reason.NOT_OWNER, Reason.INSUFFICIENT, Reason.UNSCHEDULABLE, Reason.UNKNOWN_NODE}


class _Held:
    """A placement decided here that the binder has not answered yet. The store does not
    count it, so a refresh of its node from the store would drop it from the replica, and
    the worker's next batch would fill the same room again: the replica puts it back after
    every refresh until the answer comes."""

    __slots__ = ("node", "request", "overlaid")

    def __init__(self, node: str, request: Resources) -> None:
        self.node = node
        self.request = request
        self.overlaid = -1  # the version of the last refreshed record it was put back over


class Worker:
    def __init__(self, store: Store, binder: Binder, target: BindTarget, config: WorkerConfig) -> None:
        self.store = store
        self.binder = binder
        self.target = target
        self.config = config
        self.rng = random.Random(config.seed)
        self.columns = NodeColumns()
        self._informer = Informer(store, [Kind.NODE], block_ms=50, settle_s=config.replica_settle_s)
        self._follower: asyncio.Task[None] | None = None
        self._held: dict[str, list[_Held]] = {}  # node -> placements in flight on it

    def _refreshed(self, node: str, version: int) -> None:
        """The node's figures were just replaced by the store's as of ``version``: put back
        the placements still in flight on it."""
        for h in self._held.get(node, ()):
            self.columns.add(node, h.request)
            h.overlaid = version

    def _hold(self, placements: list[Placement]) -> list[_Held]:
        held = [_Held(p.node, p.request) for p in placements]
        for h in held:
            self._held.setdefault(h.node, []).append(h)
        return held

    def _release(self, held: list[_Held]) -> None:
        for h in held:
            on_node = self._held[h.node]
            on_node.remove(h)
            if not on_node:
                del self._held[h.node]

    async def start(self) -> None:
        """Load the replica, then keep it current in the background."""
        updates = self._informer.updates()
        self.columns.apply(await anext(updates))

        async def follow() -> None:
            async for update in updates:
                self.columns.apply(update)
                for name in [n for n in self._held if update.nodes.get(n) is not None]:
                    self._refreshed(name, update.nodes[name].version)  # type: ignore[union-attr]

        self._follower = asyncio.create_task(follow(), name="worker-follow")

    async def stop(self) -> None:
        self._informer.stop()
        if self._follower is not None:
            await self._follower

    def _sort(self, records: list[PodRecord], tasks: list[Task], committed: list[tuple[Task, Committed, int]],
              outcomes: list[Outcome]) -> None:
        """Pending pods into ``tasks``; pods committed but never bound into ``committed``; the rest are gone."""
        for rec in records:
            if rec.pending:
                tasks.append(Task(uid=rec.uid, pod=rec.pod, request=rec.request))
            elif rec.node and rec.phase == "Pending" and rec.scheduler == self.config.core.scheduler:
                # Committed by a worker that died before binding it: bind it now (binding is idempotent).
                task = Task(uid=rec.uid, pod=rec.pod, request=rec.request)
                committed.append((task, Committed(node=rec.node, version=0, idempotent=True), 1))
            else:
                outcomes.append(Outcome(uid=rec.uid, kind=OutcomeKind.GONE))

    async def schedule(self, records: list[PodRecord]) -> BatchResult:
        start = time.perf_counter()
        outcomes: list[Outcome] = []
        tasks: list[Task] = []
        committed: list[tuple[Task, Committed, int]] = []
        self._sort(records, tasks, committed, outcomes)
        stale: list[str] = []  # pods the binder found bound: the record was older than the commit
        conflicts = resolved = rejected = 0
        attempt = 0
        while tasks and attempt <= self.config.max_retries:
            attempt += 1
            decisions = decide(self.columns, tasks, self.config.core, self.rng)
            by_uid = {t.uid: t for t in tasks}
            placements = []
            for d in decisions:
                if isinstance(d, NoFit):
                    outcomes.append(Outcome(uid=d.uid, kind=OutcomeKind.UNSCHEDULABLE, reason=d.reason, attempts=attempt))
                else:
                    placements.append(Placement(uid=d.uid, node=d.node, request=by_uid[d.uid].request, version=d.version))
            held = self._hold(placements)
            try:
                results = await self.binder.commit(placements) if placements else []
            finally:
                self._release(held)
            tasks = []
            fresh: list[Committed | Conflict] = []  # nodes that moved: their figures as the commit left them
            for p, r, h in zip(placements, results, held):
                task = by_uid[p.uid]
                if isinstance(r, Committed):
                    if h.overlaid >= r.version:  # put back over a record that already counted it
                        self.columns.add(p.node, Resources() - p.request)
                    committed.append((task, r, attempt))
                    resolved += r.resolved
                    if r.allocatable is not None:
                        fresh.append(r)
                elif isinstance(r, Conflict):
                    conflicts += 1
                    fresh.append(r)
                    tasks.append(task)
                else:
                    rejected += 1
                    self.columns.add(p.node, Resources() - p.request)  # undo the tentative placement
                    if r.reason in _RETRYABLE:
                        tasks.append(task)
                    elif r.reason is Reason.ALREADY_BOUND:
                        stale.append(p.uid)
                    else:
                        outcomes.append(Outcome(uid=p.uid, kind=OutcomeKind.GONE, reason=f"{r.reason} {r.detail}".strip(), attempts=attempt))
            for f in fresh:  # last: they already count this call's placements, and undo nothing
                if f.allocatable is not None and f.allocated is not None:
                    if self.columns.set_figures(f.node, f.allocatable, f.allocated, f.version, f.unschedulable):
                        self._refreshed(f.node, f.version)
        outcomes += [Outcome(uid=t.uid, kind=OutcomeKind.RETRY, reason="conflicts outlasted the retries", attempts=attempt) for t in tasks]
        if stale:  # rare: a batch retried after its first worker died, committed before it could bind
            fresh_records = await self.store.get_pods(stale)
            outcomes += [Outcome(uid=u, kind=OutcomeKind.GONE) for u in stale if u not in fresh_records]
            again: list[Task] = []  # pending once more (released meanwhile): the loop tries them first thing
            self._sort([fresh_records[u] for u in stale if u in fresh_records], again, committed, outcomes)
            outcomes += [Outcome(uid=t.uid, kind=OutcomeKind.RETRY, reason="the pod changed while it was decided") for t in again]
        if committed:
            bindings = [Binding(uid=t.uid, namespace=t.pod.namespace, name=t.pod.name, node=c.node) for t, c, _ in committed]
            failures = await bind_committed(self.binder, self.target, bindings)
            for (t, c, tries), failure in zip(committed, failures):
                if failure is None:
                    outcomes.append(Outcome(uid=t.uid, kind=OutcomeKind.BOUND, node=c.node, attempts=tries))
                else:
                    outcomes.append(Outcome(uid=t.uid, kind=OutcomeKind.RETRY, reason=f"bind failed: {failure.reason}", attempts=tries))
        return BatchResult(outcomes=outcomes, committed=len(committed), conflicts=conflicts, resolved=resolved,
                           rejected=rejected, seconds=time.perf_counter() - start)
