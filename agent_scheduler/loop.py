"""The agent scheduler's loop: pending pods from the feed into the queue, micro-batches
out to the workers, outcomes back into the queue, reasons into the store.

Batches carry the pods' records as the loop last saw them, so a worker needs no round
trip to read them; the binder's commit checks each pod again (still there, still
unbound, same request), so a record a moment old is safe.

Each worker has up to ``inflight`` batches in flight; a batch that fails (its actor died, a call
timed out, the store did not answer) goes back to the urgent queue, where the other workers
take it. A worker whose actor died is restarted (a new actor, with backoff); one that cannot
be restarted is left out, and when no worker is left the loop raises :class:`NoWorkers` (the
process exits, and its Deployment starts it again: Ray itself is gone). Nothing is lost: a
pod leaves the queue only when it is bound, deleted, or bound by someone else.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

import msgspec

from agent_scheduler.metrics import AgentMetrics
from agent_scheduler.outcome import BatchResult, Outcome, OutcomeKind
from agent_scheduler.pod_context import PlacedRef, PodContext
from agent_scheduler.queue import QueuePart, SchedulingQueue
from agent_scheduler.shares import Shares
from agent_scheduler.stages import StageFigures, Stages
from binder.metrics import BinderMetrics
from cluster.model.core import Namespace
from cluster.nodeview.pod_affinity import bears_rules
from cluster.runtime.heartbeat import Stats
from cluster.store.informer import Informer
from cluster.store.keys import Kind
from cluster.store.pause import pause
from cluster.store.records import TERMINAL_PHASES, PodRecord, Update
from cluster.store.store import Store

log = logging.getLogger("caldera.agent")


RESTART_TRIES = (1.0, 2.0, 4.0)
"""Pauses before each try to restart a dead worker; after the last, it is left out."""
HAND_OVERS = 2
"""Times in a row a pod may be handed from one worker to another (:attr:`WorkerConfig.hand_over`)
before the next places it wherever it fits. One was not enough in a full shard: the worker handed
the pod often found its room taken meanwhile (by its own pods) and placed it back in the first
worker's partition, where the two met (the demo at 2 workers, alternated with the tree before
hand-over, three pairs each: 2.5–2.9% true conflicts → 1.0–1.4% with one, 3.3–4.0% → 0.05–0.36%
with two)."""


class NoWorkers(RuntimeError):
    """Every worker died and none could be restarted."""


class WorkerHandle(Protocol):
    name: str

    @property
    def alive(self) -> bool: ...

    async def restart(self) -> None: ...

    async def schedule(
        self,
        pods: list[PodRecord],
        context: Sequence[PlacedRef] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        keep: Collection[str] = (),
    ) -> BatchResult: ...


INFLIGHT_STORE = 3
"""``--inflight auto`` binding in the store (the simulator). A call holds its slot until its pods are
bound; a burst reaches the loop in pieces, its first piece goes out alone and the next in a second
call, and with two slots what is read after them waited until the first call's pods were bound — with
three it goes out at once. Measured in the default demo (one worker, seven pairs alternated with 2):
submit → bound p50 33.9 → 30.0 ms on average (lower in six of the seven), p99 100.6 → 83.7 ms, the
queue stage p50 1.0–2.5 → 0.8 ms; ``bench agent --fill 0.9`` at 2 and 8 workers alike. Four: no
lower (three pairs)."""

INFLIGHT_KUBE = 2
"""``--inflight auto`` binding through Kubernetes, where a call's bind is a POST per pod: with three
calls' binds at once, ``caldera bench api`` bound fewer pods a second against the in-repo API server
(three pairs: 2,176 / 1,948 / 1,908 with two, 1,882 / 1,538 / 1,916 with three; the server, one
process, took the creations more slowly too)."""


class LoopConfig(msgspec.Struct, frozen=True, kw_only=True):
    scheduler: str = "agent-scheduler"
    batch_size: int = 256
    # Batches in flight per worker: a second batch is decided while the first one's commit
    # and bind round trips are under way, so pods do not wait for a worker's I/O
    # (:data:`INFLIGHT_STORE`, :data:`INFLIGHT_KUBE`).
    inflight: int = 3
    # Share a burst by the room each worker's partition has left (--room-shares): fewer true
    # conflicts in a full shard (agent_scheduler.shares).
    room_shares: bool = True


class AgentStats(Stats, frozen=True, kw_only=True):
    bound: int
    queue: dict[str, int]  # pods per part of the queue
    failed_workers: int
    conflicts: int
    conflicts_resolved: int
    handed_over: int = 0  # pods one worker handed over to another (--hand-over)
    pods_per_s: float | None = None  # lately; None until two samples
    stages: dict[str, StageFigures] = {}  # where the pods' time went so far (agent_scheduler.stages)


class AgentLoop:
    def __init__(
        self,
        store: Store,
        workers: Sequence[WorkerHandle],
        config: LoopConfig,
        *,
        metrics: AgentMetrics | None = None,
        binder_metrics: BinderMetrics | None = None,
        leading: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.workers = list(workers)
        self.config = config
        self.metrics = metrics
        self.binder_metrics = binder_metrics
        self.leading = leading
        self.clock = clock
        self.queue = SchedulingQueue(clock)
        self.first_seen: dict[str, float] = {}
        self.records: dict[str, PodRecord] = {}  # the newest record of every pod in the queue
        # uid -> node for pods this loop placed, and when it learnt so; a pod is forgotten when
        # it is gone from the store (finished, deleted), so a long-running process does not grow.
        self.bound: dict[str, str] = {}
        self.bound_total = 0
        self.failed_workers: list[str] = []
        self.restarts: dict[str, int] = {}  # worker -> actors started in place of dead ones
        self._restarting: dict[str, asyncio.Lock] = {}
        self.bound_at: dict[str, float] = {}
        self.totals = {
            "committed": 0,
            "conflicts": 0,
            "resolved": 0,
            "rejected": 0,
            "unschedulable": 0,
            "handed_over": 0,
        }
        self._work = asyncio.Event()
        self._ruled_out = False  # a batch with pods that have inter-pod rules is with a worker
        self.shares = Shares(
            batch_size=config.batch_size, inflight=config.inflight, room_shares=config.room_shares, clock=clock
        )
        # uid -> times handed over from one worker to another; from HAND_OVERS on, placed where it fits
        self._handovers: dict[str, int] = {}
        self._recent: deque[tuple[float, int]] = deque(maxlen=30)  # (clock, pods bound) at each stats() call
        # Woken by pods written (created, committed, started), not by their deletions or a namespace's
        # labels: those come with the next pod written, or within block_ms.
        self._informer = Informer(store, [Kind.POD, Kind.NAMESPACE], block_ms=50, wake_on_pods=True)
        self.context = PodContext()  # placed pods, for the inter-pod rules of the pods handed out
        self.stages = metrics.stages if metrics is not None else Stages()
        self.listed = asyncio.Event()  # set once the first listing of the pods is taken in
        # The observed stage: uid -> when its bind calls returned (wall clock), until the feed shows
        # it bound; uid -> when the feed showed it bound while its batch was still out.
        self._unobserved: dict[str, float] = {}
        self._seen_bound: dict[str, float] = {}

    def _enqueue(self, rec: PodRecord, written: float = 0.0) -> None:
        """A pending pod; ``written``: when the store wrote what the feed brought (0: not known)."""
        self.records[rec.uid] = rec
        if rec.uid not in self.queue:
            if rec.uid not in self.first_seen:
                self.first_seen[rec.uid] = self.clock()
                if written:
                    self.stages.observe("feed", time.time() - written)
            self.queue.add(rec.uid, rec.priority)
            self._work.set()

    def _forget(self, uid: str) -> None:
        self.first_seen.pop(uid, None)
        self.records.pop(uid, None)
        self._handovers.pop(uid, None)

    def _listed(self, update: Update) -> None:
        """A listing: the pods and namespaces not in it are gone."""
        for uid in [u for u in self.bound if u not in update.pods]:
            self.bound.pop(uid, None)
            self.bound_at.pop(uid, None)
        for uid in [u for u in self.context.index.pods if u not in update.pods]:
            self.context.seen(uid, None)
        for waiting in (self._unobserved, self._seen_bound):
            for uid in [u for u in waiting if u not in update.pods]:
                waiting.pop(uid, None)
        namespaces = update.objects.get(Kind.NAMESPACE, {})
        for name in [n for n in self.context.index.namespace_labels if n not in namespaces]:
            self.context.namespace_seen(name, None)

    async def follow(self) -> None:
        """Pending pods of this scheduler into the queue; gone ones out; freed capacity wakes backoff."""
        async for update in self._informer.updates():
            freed = False
            if update.full:
                self._listed(update)
            for name, ns in update.objects.get(Kind.NAMESPACE, {}).items():
                self.context.namespace_seen(name, ns.metadata.labels if isinstance(ns, Namespace) else None)
            gated: dict[str, str] = {}
            for uid, rec in update.pods.items():
                self.context.seen(uid, rec)
                # A pod with scheduling gates waits until they are all removed (kube-scheduler's rule).
                if rec is not None and rec.pending and rec.scheduler == self.config.scheduler:
                    if not rec.pod.spec.scheduling_gates:
                        self._enqueue(rec, update.written.get(uid, 0.0))
                        continue
                    names = ", ".join(g.name for g in rec.pod.spec.scheduling_gates)
                    gated[uid] = f"SchedulingGated: scheduling is blocked by the pod's scheduling gates ({names})"
                freed |= rec is None or rec.phase in TERMINAL_PHASES
                if rec is None:
                    self.bound.pop(uid, None)
                    self.bound_at.pop(uid, None)
                    self._unobserved.pop(uid, None)
                    self._seen_bound.pop(uid, None)
                elif rec.node:
                    self._observed(uid)
                state = self.queue.state(uid)
                if state is QueuePart.INFLIGHT:  # settles with its outcome; a retry sends the newest record
                    if rec is not None:
                        self.records[uid] = rec
                elif state is not None:
                    self.queue.remove(uid)
                    self._forget(uid)
            if freed and self.queue.activate_backoff():
                self._work.set()
            if gated:
                await self.store.set_reasons(self.config.scheduler, gated)
            self.listed.set()

    async def drive(self, worker: WorkerHandle, stop: asyncio.Event) -> None:
        """Keep one worker busy until ``stop`` or until it fails."""
        while not stop.is_set() and worker.name not in self.failed_workers:
            batch, ruled = self._take(worker.name) if self.leading() else ([], False)
            if not batch:
                self._work.clear()
                due = self.queue.next_backoff_due()
                wait = 0.2 if due is None else max(min(due - self.clock(), 0.2), 0.001)
                await pause(self._work, wait)
                continue
            self.shares.handed += 1
            self._ruled_out |= ruled
            try:
                if not await self._hand(worker, batch):
                    return
            finally:
                self.shares.handed -= 1
                if ruled:
                    self._ruled_out = False
                    self._work.set()

    def _take(self, worker: str) -> tuple[list[str], bool]:
        """The next batch, and whether it holds pods with inter-pod rules of their own. Those go out
        one batch at a time: the pods of a batch count each other, but not those of another batch in
        flight (whose placements the loop has not heard of yet), so two that must stay apart could
        land together. While such a batch is out, they wait for it (first in the queue); the other
        pods go on."""
        # Pods another worker handed over to this one first, whatever its room figure says (that
        # worker saw room for them on this one's partition), then the share, less what they take.
        batch = self.queue.pop_for(worker, self.config.batch_size)
        live = [w.name for w in self.workers if w.name not in self.failed_workers]
        share = self.shares.share(worker, live, self.queue.ready()) - len(batch)
        if share > 0:
            batch += self.queue.pop(share)
        if not batch:
            return [], False
        ruled = [uid for uid in batch if bears_rules(self.records[uid].pod)]
        if ruled and self._ruled_out:
            for uid in ruled:  # in their order: first in the queue again
                self.queue.retry_now(uid)
            waiting = set(ruled)
            batch, ruled = [uid for uid in batch if uid not in waiting], []
        self.shares.took(worker, len(batch))
        return batch, bool(ruled)

    async def _hand(self, worker: WorkerHandle, batch: list[str]) -> bool:
        """One batch through ``worker``, its outcomes absorbed; False when the worker failed and could
        not be restarted (its pods are back in the queue)."""
        pods = [self.records[uid] for uid in batch]
        try:
            context = self.context.for_batch(r.pod for r in pods)
            namespaces = self.context.namespace_labels((r.pod for r in pods), context) if context else None
            handed, handed_wall = self.clock(), time.time()
            keep = [uid for uid in batch if self._handovers.get(uid, 0) >= HAND_OVERS]
            result = await worker.schedule(pods, context, namespaces, keep)
        except Exception as e:  # the actor died or hung, or the store went away: hand the batch on
            self.shares.failed(worker.name, len(batch))
            log.warning("worker %s failed (%s); its %d pods go back to the queue", worker.name, e, len(batch))
            for uid in batch:
                self.queue.retry_now(uid)
            self._work.set()
            return await self._recover(worker)
        self._stages(batch, handed, handed_wall, result)
        await self._absorb(worker.name, result, handed=len(batch))
        if self.config.room_shares:
            self._work.set()  # a fresh figure: a worker held back may take now
        return True

    async def _recover(self, worker: WorkerHandle) -> bool:
        """After a failed batch: go on with a live worker (after a pause), restart a dead one; False
        when it could not be restarted (then it is left out; with no worker left, :class:`NoWorkers`)."""
        if worker.alive:
            await asyncio.sleep(0.1)
            return True
        async with self._restarting.setdefault(worker.name, asyncio.Lock()):
            if self.queue.release(worker.name):  # the pods handed over to it: anyone's while it restarts
                self._work.set()
            for pause in RESTART_TRIES:
                if worker.alive:  # another of its tasks restarted it meanwhile
                    return True
                if worker.name in self.failed_workers:
                    return False
                await asyncio.sleep(pause)
                try:
                    await worker.restart()
                except Exception as e:
                    log.warning("worker %s: %s", worker.name, e)
                    continue
                self.restarts[worker.name] = self.restarts.get(worker.name, 0) + 1
                log.warning("worker %s restarted", worker.name)
                return True
        if worker.name not in self.failed_workers:
            self.failed_workers.append(worker.name)
        if len(self.failed_workers) == len(self.workers):
            raise NoWorkers(f"no agent worker could be started again ({', '.join(self.failed_workers)})")
        return False

    def _observed(self, uid: str) -> None:
        """The feed shows ``uid`` bound."""
        returned = self._unobserved.pop(uid, None)
        if returned is not None:
            self.stages.observe("observed", time.time() - returned)
        elif self.queue.state(uid) is QueuePart.INFLIGHT:  # before its batch's answer
            self._seen_bound.setdefault(uid, time.time())

    def _stages(self, batch: Sequence[str], handed: float, handed_wall: float, result: BatchResult) -> None:
        """Where the batch's pods' time went (:mod:`agent_scheduler.stages`): the call's round trip
        beyond the worker's own time is split where the worker says it started (``handoff`` before,
        ``reply`` after; a worker that does not say counts it all as ``reply``)."""
        n = len(batch)
        self.stages.observe_each("queue", [handed - self.first_seen.get(uid, handed) for uid in batch])
        beyond = self.clock() - handed - result.seconds
        handoff = min(max(0.0, result.started_wall - handed_wall), max(0.0, beyond)) if result.started_wall else 0.0
        self.stages.observe("handoff", handoff, n)
        self.stages.observe("decide", result.decide_seconds, n)
        self.stages.observe("commit", result.commit_wait_seconds, n)
        self.stages.observe("bind", result.bind_seconds, n)
        self.stages.observe("reply", beyond - handoff, n)

    def _bound(self, o: Outcome, now: float, bound_wall: float) -> None:
        rec = self.records.get(o.uid)
        if rec is not None:  # seen by the next batches' rules before the feed brings it
            self.context.bound(o.uid, rec.pod, o.node)
        self.bound[o.uid] = o.node
        self.bound_at[o.uid] = now
        seen = self._seen_bound.pop(o.uid, None)
        if seen is not None:
            self.stages.observe("observed", seen - bound_wall)
        elif bound_wall:
            self._unobserved[o.uid] = bound_wall
        self.bound_total += 1
        started = self.first_seen.get(o.uid, now)
        self._forget(o.uid)
        self.queue.done(o.uid)
        if self.metrics is not None:
            self.metrics.e2e_latency.observe((now - started) * 1000)
            self.metrics.attempts.labels("scheduled").inc()

    async def _absorb(self, worker: str, result: BatchResult, handed: int = 0) -> None:
        """The outcomes of a batch of ``handed`` pods."""
        now = self.clock()
        self.shares.answered(worker, handed, result.room, now)
        reasons: dict[str, str] = {}
        for o in result.outcomes:
            handovers = self._handovers.pop(o.uid, 0)  # kept for a pod handed over again only
            if o.kind is OutcomeKind.HANDED_OVER:
                self._hand_over(o, handovers + 1)
            elif o.kind is OutcomeKind.BOUND:
                self._bound(o, now, result.bound_wall)
            elif o.kind is OutcomeKind.UNSCHEDULABLE:
                self.queue.back_off(o.uid)
                self.totals["unschedulable"] += 1
                reasons[o.uid] = o.reason
                if self.metrics is not None:
                    self.metrics.attempts.labels("unschedulable").inc()
            elif o.kind is OutcomeKind.RETRY:
                self.queue.retry_now(o.uid)
                if self.metrics is not None:
                    self.metrics.attempts.labels("error").inc()
            else:
                self.queue.done(o.uid)
                self._forget(o.uid)
        for key in ("committed", "conflicts", "resolved", "rejected"):
            self.totals[key] += getattr(result, key)
        if reasons:
            await self.store.set_reasons(self.config.scheduler, reasons)
        if self.metrics is not None:
            self.metrics.batch_seconds.labels(worker).observe(result.seconds)
            for part, n in self.queue.depth().items():
                self.metrics.queue_depth.labels(part).set(n)
        if self.binder_metrics is not None:
            m = self.binder_metrics
            m.commits.labels("committed").inc(result.committed)
            m.commits.labels("conflict").inc(result.conflicts)
            m.commits.labels("rejected").inc(result.rejected)
            m.conflicts_resolved.inc(result.resolved)
            for seconds in result.commit_seconds:
                m.commit_seconds.observe(seconds)
            m.releases.inc(result.released)

    def _hand_over(self, o: Outcome, handovers: int) -> None:
        """A pod with room only in worker ``o.worker``'s partition: that worker takes it next; after
        :data:`HAND_OVERS` in a row, the next worker places it wherever it fits. The loop's i-th
        worker is the one configured as worker i; while it restarts, or when it failed, any worker takes
        the pod."""
        self._handovers[o.uid] = handovers
        self.totals["handed_over"] += 1
        if self.metrics is not None:
            self.metrics.handovers.inc()
        owner = self.workers[o.worker].name if 0 <= o.worker < len(self.workers) else None
        restarting = self._restarting.get(owner) if owner is not None else None
        if owner is None or owner in self.failed_workers or (restarting is not None and restarting.locked()):
            self.queue.retry_now(o.uid)
        else:
            self.queue.hand_over(o.uid, owner)
        self._work.set()

    def stats(self) -> AgentStats:
        """The figures ``caldera status`` shows: pods bound, pods/s lately, the queue's depth."""
        self._recent.append((self.clock(), self.bound_total))
        (t0, n0), (t1, n1) = self._recent[0], self._recent[-1]
        return AgentStats(
            bound=self.bound_total,
            queue=self.queue.depth(),
            failed_workers=len(self.failed_workers),
            conflicts=self.totals["conflicts"],
            conflicts_resolved=self.totals["resolved"],
            handed_over=self.totals["handed_over"],
            pods_per_s=round((n1 - n0) / (t1 - t0), 1) if t1 > t0 else None,
            stages=self.stages.figures(),
        )

    async def run(self, stop: asyncio.Event) -> None:
        follower = asyncio.create_task(self.follow(), name="agent-follow")
        try:
            async with asyncio.TaskGroup() as tg:
                for k in range(self.config.inflight):  # each worker's first batch before any one's second
                    for w in self.workers:
                        tg.create_task(self.drive(w, stop), name=f"agent-drive-{w.name}-{k}")
        finally:
            self._informer.stop()
            await follower
