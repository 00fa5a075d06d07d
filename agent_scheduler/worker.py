"""One agent-scheduler worker: a replica of the node columns, the core, the binder.

The worker is plain asyncio; ``actors.py`` runs it inside a Ray actor, and tests or the
dry-run may run it in-process. It keeps its replica current from the feed, decides a
micro-batch of pod records (as the loop last saw them), commits the batch through the
binder in one round trip, and on a
``Conflict`` refreshes the replica from the returned figures and decides those pods again
at once (up to ``max_retries`` times). Committed pods are then bound; a failed bind
releases the reservation and the pod is pending again. With several workers, a pod that has
room only in another worker's partition of the nodes is handed over to that worker rather
than placed there (:attr:`WorkerConfig.hand_over`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Collection, Mapping, Sequence

import msgspec
import numpy as np

from agent_scheduler.core import Choice, CoreConfig, NoFit, Task, decisions, partition_room, profile
from agent_scheduler.outcome import BatchResult, Outcome, OutcomeKind
from agent_scheduler.pod_context import PlacedRef, placed_on
from binder.bind import BindTarget, bind_committed
from binder.commit import Binder, CommitStream
from binder.results import Committed, Conflict, Placement, Reason, Result
from cluster.model.binding import Binding
from cluster.model.devices import card_annotations
from cluster.model.resources import Resources
from cluster.nodeview.assume import Assumed, Token
from cluster.nodeview.plugins import partition_steps
from cluster.nodeview.pod_affinity import PlacedPods, bears_rules
from cluster.nodeview.table import NodeTable
from cluster.store.informer import Informer
from cluster.store.keys import Kind
from cluster.store.records import PodRecord
from cluster.store.store import Store

COMMIT_CHUNK = 32
"""Decisions a worker sends to the binder in one script call while it decides the rest of a batch:
Redis commits them on its own core meanwhile, and the first pods of a batch are bound without
waiting for its last to be decided."""


class WorkerConfig(msgspec.Struct, frozen=True, kw_only=True):
    core: CoreConfig = CoreConfig()
    max_retries: int = 3
    seed: int = 0
    # The replica reads the feed at most every this often while it is busy: reading each
    # change as it comes costs the worker a wake-up, a round trip and a fetch per change; a
    # view older by that much costs a few more binder conflicts, each refreshed at once.
    replica_settle_s: float = 0.002
    # Each answer says how much room the worker's partition has left (the loop's --room-shares).
    report_room: bool = True
    # A pod whose best node is in another worker's partition goes back to the loop for that
    # worker (--hand-over), unless the loop says it was handed over already: the two would
    # otherwise fill the same last free room, the owner from its fullest node and this worker
    # from the emptiest, and in a full shard meet there (the demo at 2 workers: every true
    # conflict was such a pair).
    hand_over: bool = True
    # A batch's decisions go to the binder this many at a time, each sent as soon as decided
    # (:data:`COMMIT_CHUNK`).
    commit_chunk: int = COMMIT_CHUNK


_RETRYABLE = {Reason.NOT_OWNER, Reason.INSUFFICIENT, Reason.UNSCHEDULABLE, Reason.UNKNOWN_NODE}


@dataclasses.dataclass
class _Call:
    """What one ``schedule`` call found so far."""

    outcomes: list[Outcome] = dataclasses.field(default_factory=list)
    committed: list[tuple[Task, Committed, int]] = dataclasses.field(default_factory=list)  # (task, answer, attempts)
    stale: list[str] = dataclasses.field(default_factory=list)  # found bound: the record was older than the commit
    conflicts: int = 0
    resolved: int = 0
    rejected: int = 0
    cards: dict[str, Resources] = dataclasses.field(default_factory=dict)  # uid -> the GPU cards its commit took
    commit_seconds: list[float] = dataclasses.field(default_factory=list)
    commit_wait_seconds: float = 0.0
    released: int = 0
    decide_seconds: float = 0.0
    bind_seconds: float = 0.0
    bound_wall: float = 0.0


class Worker:
    def __init__(self, store: Store, binder: Binder, target: BindTarget, config: WorkerConfig) -> None:
        self.store = store
        self.binder = binder
        self.target = target
        self.config = config
        self.rng = random.Random(config.seed)
        self.profile = profile(config.core)
        self.columns = NodeTable()
        self._informer = Informer(store, [Kind.NODE], block_ms=50, settle_s=config.replica_settle_s)
        self._follower: asyncio.Task[None] | None = None
        # Placements decided here and not yet counted by the records the replica holds.
        self.assumed = Assumed(self.columns)

    async def start(self) -> None:
        """Load the replica, then keep it current in the background."""
        updates = self._informer.updates()
        self.columns.apply(await anext(updates))

        async def follow() -> None:
            async for update in updates:
                self.assumed.apply(update)

        self._follower = asyncio.create_task(follow(), name="worker-follow")

    async def stop(self) -> None:
        self._informer.stop()
        if self._follower is not None:
            await self._follower

    def _sort(
        self,
        records: list[PodRecord],
        tasks: list[Task],
        committed: list[tuple[Task, Committed, int]],
        outcomes: list[Outcome],
    ) -> None:
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

    async def schedule(
        self,
        records: list[PodRecord],
        context: Sequence[PlacedRef] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        keep: Collection[str] = (),
    ) -> BatchResult:
        """Decide, commit (retrying conflicts on fresh figures), then bind one batch of pods.
        ``context``: the placed pods the batch's inter-pod rules see, ``namespaces`` the labels of
        their namespaces (:mod:`agent_scheduler.pod_context`); ``keep``: pods handed over to this
        worker already, placed wherever they fit."""
        start, started_wall = time.perf_counter(), time.time()
        call = _Call()
        tasks: list[Task] = []
        self._sort(records, tasks, call.committed, call.outcomes)
        requests = [t.request for t in tasks]
        placed = None
        if context or any(bears_rules(t.pod) for t in tasks):
            placed = placed_on(self.columns, context, namespaces)
        attempt = 0
        while tasks and attempt <= self.config.max_retries:
            attempt += 1
            tasks = await self._attempt(tasks, attempt, call, placed, keep)
        call.outcomes += [
            Outcome(uid=t.uid, kind=OutcomeKind.RETRY, reason="conflicts outlasted the retries", attempts=attempt)
            for t in tasks
        ]
        if call.stale:
            await self._restale(call)
        if call.committed:
            started = time.perf_counter()
            await self._bind(call)
            call.bind_seconds = time.perf_counter() - started
            call.bound_wall = time.time()
        # Last, after every await: the loop takes this figure less the pods of its batches still out,
        # so it must count every batch decided before the answer goes (taken before the bind, it missed
        # a batch decided meanwhile and answered first: a partition handed 100+ pods over its room).
        room = partition_room(self.columns, requests, self.config.core) if self.config.report_room else None
        return BatchResult(
            outcomes=call.outcomes,
            committed=len(call.committed),
            conflicts=call.conflicts,
            resolved=call.resolved,
            rejected=call.rejected,
            seconds=time.perf_counter() - start,
            started_wall=started_wall,
            commit_seconds=call.commit_seconds,
            commit_wait_seconds=call.commit_wait_seconds,
            released=call.released,
            decide_seconds=call.decide_seconds,
            bind_seconds=call.bind_seconds,
            bound_wall=call.bound_wall,
            room=room,
        )

    async def _attempt(
        self, tasks: list[Task], attempt: int, call: _Call, placed: PlacedPods | None, keep: Collection[str]
    ) -> list[Task]:
        """One round: decide every task, committing each :data:`COMMIT_CHUNK` decided while the next
        are decided, then sort the answers; the tasks to retry."""
        started = time.perf_counter()
        by_uid = {t.uid: t for t in tasks}
        stream = await self.binder.commit_stream()
        sent: list[tuple[list[Placement], list[Token]]] = []
        try:
            first = self._decide(tasks, by_uid, stream, sent, attempt, call, placed, keep)
            decided = time.perf_counter()
            call.decide_seconds += decided - started
            answers = await stream.results()
        except BaseException:
            for _, held in sent:
                for h in held:
                    self.assumed.forget(h)
            await stream.abandon()
            raise
        if first is not None:
            answered = time.perf_counter()
            call.commit_seconds.append(answered - first)
            call.commit_wait_seconds += answered - decided
        again: list[Task] = []
        fresh: list[Committed | Conflict] = []  # nodes that moved: their figures as the commit left them
        for (placements, held), results in zip(sent, answers):
            for p, r, h in zip(placements, results, held):
                self._sort_answer(by_uid[p.uid], p, r, h, attempt, call, again, fresh)
        # Last, as they already count this call's placements and undo nothing; each node's newest only
        # (the calls ran in the order sent, so a node's last answer is its newest): every refresh holds
        # the node's placements not counted yet over its figures again, so a node that took 30 of a
        # call's pods, refreshed from each of their answers in turn, was 465 takes.
        newest = {f.node: f for f in fresh if f.allocatable is not None}
        for f in newest.values():
            if f.allocatable is not None and f.allocated is not None:
                self.assumed.set_figures(f.node, f.allocatable, f.allocated, f.version, f.unschedulable)
        if placed is not None:  # a task to retry is not on the node it was decided for
            for t in again:
                placed.remove(t.uid)
        return again

    def _decide(
        self,
        tasks: list[Task],
        by_uid: Mapping[str, Task],
        stream: CommitStream,
        sent: list[tuple[list[Placement], list[Token]]],
        attempt: int,
        call: _Call,
        placed: PlacedPods | None,
        keep: Collection[str],
    ) -> float | None:
        """Decide every task, each :attr:`WorkerConfig.commit_chunk` placements sent as decided (into
        ``sent``, with the tokens holding them); when the first went (None: none did)."""
        core = self.config.core
        steps = None
        if self.config.hand_over and core.workers > 1 and placed is None:
            steps = partition_steps(self.columns, core.worker, core.workers)
        handed: list[tuple[str, Resources]] = []  # given back once every task is decided
        first: float | None = None
        chunk: list[Choice | NoFit] = []
        for i, d in enumerate(decisions(self.columns, tasks, core, self.rng, self.profile, placed), 1):
            chunk.append(d)
            if len(chunk) == self.config.commit_chunk or i == len(tasks):
                placements, held = self._send(stream, chunk, by_uid, keep, attempt, call, steps, handed)
                sent.append((placements, held))
                if placements and first is None:
                    first = time.perf_counter()
                chunk = []
        for node, request in handed:
            self.columns.give_back(node, request)
        return first

    def _sort_answer(
        self,
        task: Task,
        p: Placement,
        r: Result,
        h: Token,
        attempt: int,
        call: _Call,
        again: list[Task],
        fresh: list[Committed | Conflict],
    ) -> None:
        """One placement's answer: a commit confirms its hold, anything else gives it back; the task
        to retry into ``again``, a node's figures the answer carried into ``fresh``."""
        if isinstance(r, Committed):
            self.assumed.confirm(h, r.version)
            call.committed.append((task, r, attempt))
            call.resolved += r.resolved
            if r.allocatable is not None:
                fresh.append(r)
            return
        self.assumed.forget(h)
        if isinstance(r, Conflict):
            call.conflicts += 1
            fresh.append(r)
            again.append(task)
            return
        call.rejected += 1
        if r.reason in _RETRYABLE:
            again.append(task)
        elif r.reason is Reason.ALREADY_BOUND:
            call.stale.append(p.uid)
        else:
            call.outcomes.append(
                Outcome(uid=p.uid, kind=OutcomeKind.GONE, reason=f"{r.reason} {r.detail}".strip(), attempts=attempt)
            )

    def _send(
        self,
        stream: CommitStream,
        decisions: list[Choice | NoFit],
        by_uid: Mapping[str, Task],
        keep: Collection[str],
        attempt: int,
        call: _Call,
        steps: np.ndarray | None,
        handed: list[tuple[str, Resources]],
    ) -> tuple[list[Placement], list[Token]]:
        """The placements to commit, held on the replica and sent to the binder (with the tokens
        holding them). A pod that fits nowhere is unschedulable; with several workers
        (:attr:`WorkerConfig.hand_over`: ``steps``, each node's partition from this worker's), a pod
        whose node is in another worker's partition goes back to the loop for that worker, its room
        to be given back on the replica (``handed``), unless it is in ``keep`` — not in batches judged
        with inter-pod rules (their pods count each other)."""
        core = self.config.core
        index = self.columns.index
        placements: list[Placement] = []
        for d in decisions:
            if isinstance(d, NoFit):
                call.outcomes.append(
                    Outcome(uid=d.uid, kind=OutcomeKind.UNSCHEDULABLE, reason=d.reason, attempts=attempt)
                )
                continue
            request = by_uid[d.uid].request
            step = int(steps[index[d.node]]) if steps is not None and d.uid not in keep else 0
            if step:
                handed.append((d.node, request + d.cards if d.cards else request))
                owner = (core.worker + step) % core.workers
                call.outcomes.append(
                    Outcome(uid=d.uid, kind=OutcomeKind.HANDED_OVER, node=d.node, worker=owner, attempts=attempt)
                )
                continue
            placements.append(Placement(uid=d.uid, node=d.node, request=request, version=d.version, cards=d.cards))
        held = [  # decide took them
            self.assumed.assume(p.node, p.request + p.cards if p.cards else p.request, taken=True) for p in placements
        ]
        call.cards |= {p.uid: p.cards for p in placements if p.cards}
        stream.add(placements)
        return placements, held

    async def _restale(self, call: _Call) -> None:
        """Rare: a batch retried after its first worker died, committed before it could bind."""
        stale = call.stale
        fresh_records = await self.store.get_pods(stale)
        call.outcomes += [Outcome(uid=u, kind=OutcomeKind.GONE) for u in stale if u not in fresh_records]
        again: list[Task] = []  # pending once more (released meanwhile): the loop tries them first thing
        self._sort([fresh_records[u] for u in stale if u in fresh_records], again, call.committed, call.outcomes)
        call.outcomes += [
            Outcome(uid=t.uid, kind=OutcomeKind.RETRY, reason="the pod changed while it was decided") for t in again
        ]

    async def _bind(self, call: _Call) -> None:
        committed = call.committed
        now, index = time.time(), self.columns.index
        bindings = [
            Binding(
                uid=t.uid,
                namespace=t.pod.namespace,
                name=t.pod.name,
                node=c.node,
                annotations=card_annotations(
                    t.pod,
                    c.node,
                    self.columns.card_ids[index[c.node]] if c.node in index else (),
                    call.cards.get(t.uid, Resources()),
                    now,
                ),
            )
            for t, c, _ in committed
        ]
        failures = await bind_committed(self.binder, self.target, bindings)
        call.released += sum(1 for f in failures if f is not None)  # bind_committed released them
        for (t, c, tries), failure in zip(committed, failures):
            if failure is None:
                call.outcomes.append(Outcome(uid=t.uid, kind=OutcomeKind.BOUND, node=c.node, attempts=tries))
            else:
                call.outcomes.append(
                    Outcome(uid=t.uid, kind=OutcomeKind.RETRY, reason=f"bind failed: {failure.reason}", attempts=tries)
                )
