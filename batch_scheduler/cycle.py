"""The batch scheduler's cycle: the I/O around the pure session — commit, bind, evict, write back, metrics.

One :meth:`BatchScheduler.run_session` takes a snapshot of the cache
(:mod:`batch_scheduler.cache`, kept current from the feed by :meth:`BatchScheduler.apply`),
runs a :class:`~batch_scheduler.session.Session` timing each action, then: evicts its victims through the
:class:`~binder.bind.Evictor`; commits each ready job through the binder as one gang
(all or nothing, so two schedulers racing for the same nodes can never leave half a
gang bound); binds what was committed (a failed bind releases and requeues); writes
PodGroup and Queue status and every waiting pod's reason to the store — only what
changed. The conf file is re-read before a session when it changed.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator

import msgspec

from batch_scheduler.cache import BatchCache
from batch_scheduler.commits import SessionCommits
from batch_scheduler.conf import ConfError, SchedulerConf, load_conf
from batch_scheduler.metrics import BatchMetrics
from batch_scheduler.reasons import EVICTING, PendingReason
from batch_scheduler.report import BatchStats, SessionReport, last_session_stats, observe
from batch_scheduler.session import Session
from batch_scheduler.session_input import SessionConfig
from batch_scheduler.status import (
    hypernode_status,
    pending_reason,
    podgroup_status,
    queue_status,
    same_hypernode_status,
    same_status,
)
from batch_scheduler.tasks import TaskInfo, TaskStatus
from binder.bind import BindTarget, Evictor, GateLifter, bind_committed
from binder.commit import Binder, GangStream
from binder.metrics import BinderMetrics
from binder.rebind import DEFAULT_AFTER_S, Rebinder
from binder.results import Committed, Conflict
from cluster.kube.connect import KubeConnection
from cluster.model.binding import Binding, Eviction, GateLift
from cluster.model.devices import card_annotations
from cluster.model.labels import QUEUE_ALLOCATION_GATE
from cluster.model.resources import Resources
from cluster.model.volcano import PodGroupStatus
from cluster.runtime.heap import HeapKeeper
from cluster.store.records import PodRecord, Update
from cluster.store.store import Put, Store, Write

log = logging.getLogger("caldera.batch")


class SchedulerConfig(msgspec.Struct, frozen=True, kw_only=True):
    names: tuple[str, ...] = ("volcano",)  # the schedulerNames served; the first owns shards
    session: SessionConfig = msgspec.field(default_factory=SessionConfig)
    period: float = 1.0
    conf_path: str | None = None
    rebind_after: float = DEFAULT_AFTER_S  # see binder.rebind
    kube: KubeConnection | None = None  # None: bind and evict in the simulator


def _now_text(wall: Callable[[], float]) -> str:
    return datetime.datetime.fromtimestamp(wall(), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class BatchScheduler:
    def __init__(
        self,
        store: Store,
        conf: SchedulerConf,
        config: SchedulerConfig,
        *,
        bind_target: BindTarget,
        evictor: Evictor,
        gates: GateLifter | None = None,
        metrics: BatchMetrics | None = None,
        binder_metrics: BinderMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        heap: HeapKeeper | None = None,
    ) -> None:
        self.store = store
        self.conf = conf
        self.config = config
        self.bind_target = bind_target
        self.evictor = evictor
        self.gates = gates  # None: queue-allocation gates are left on (a pod opted in waits)
        self.heap = heap  # the process's: keeps the cyclic collector off the cache between sessions
        self.metrics = metrics
        self.clock = clock
        self.wall = wall
        self.binders = {
            name: Binder(store.client, store.keys, name, sharding=config.session.sharding, metrics=binder_metrics)
            for name in config.names
        }
        self.rebinders = [
            Rebinder(store, binder, bind_target, after=config.rebind_after, wall=wall)
            for binder in self.binders.values()
        ]
        self.cache = BatchCache(config.names, clock, config.session.hypernode_labels)
        self.reasons: dict[str, dict[str, str]] = {name: {} for name in config.names}  # as written to the store
        self._conf_mtime = self._mtime()
        self.sessions = 0
        self.conflicts = 0  # pods of gang commits the binder refused (another scheduler got there first)
        self.last: SessionReport | None = None
        self._recent: deque[tuple[float, int]] = deque(maxlen=30)  # (clock, pods committed) per session

    # -- the cache ----------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The feed version the cache has reached (0: nothing yet)."""
        return self.cache.version

    def apply(self, update: Update) -> None:
        """Bring the cache up to date with a feed update."""
        self.cache.apply(update)

    @property
    def pods(self) -> dict[str, PodRecord]:
        """This scheduler's pods, by uid (the cache's)."""
        return self.cache.pods

    @property
    def releasing(self) -> dict[str, float]:
        """The pods this scheduler is evicting, by uid: since when (the cache's)."""
        return self.cache.releasing

    # -- the conf -----------------------------------------------------------------------

    def _mtime(self) -> float | None:
        if self.config.conf_path is None:
            return None
        try:
            return os.stat(self.config.conf_path).st_mtime
        except OSError:
            return None

    def reload_conf(self) -> None:
        """Load the conf file again if it changed; a broken file keeps the old conf and says why."""
        mtime = self._mtime()
        if mtime == self._conf_mtime:
            return
        self._conf_mtime = mtime
        try:
            conf = load_conf(self.config.conf_path, self.conf.registry)
        except ConfError as e:
            log.error("keeping the previous scheduler conf: %s", e)
            print(f"batch-scheduler: keeping the previous scheduler conf: {e}", flush=True)
            if self.metrics is not None:
                self.metrics.conf_reloads.labels("error").inc()
            return
        previous, self.conf = self.conf, conf
        print(f"batch-scheduler: reloaded {self.config.conf_path}: actions {', '.join(self.conf.actions)}", flush=True)
        for line in conf.new_warnings(previous):  # what the start (or an earlier reload) already said is not repeated
            print(f"batch-scheduler: warning: {line}", file=sys.stderr, flush=True)
        if self.metrics is not None:
            self.metrics.conf_reloads.labels("ok").inc()
            self.metrics.conf_loaded(conf)

    # -- a session ----------------------------------------------------------------------

    async def rebind(self) -> int:
        """Bind what a stopped batch scheduler committed and never bound (between sessions nothing
        of this one's is in flight); how many pods."""
        return sum([await r.run_once() for r in self.rebinders])

    async def run_session(self) -> SessionReport:
        with self.heap.session() if self.heap is not None else contextlib.nullcontext():
            return await self._run_session()

    async def _run_session(self) -> SessionReport:
        start = self.clock()
        self.reload_conf()
        ssn = Session(self.conf, self.config.session, self.cache.snapshot())
        report = SessionReport(session=ssn)

        @contextlib.contextmanager
        def timed(action: str) -> Iterator[None]:
            t0 = self.clock()
            yield
            report.actions[action] = self.clock() - t0

        commits = await self._open_commits(ssn)
        try:
            ssn.run(observe=timed)
            await self._evict(ssn, report)
            await self._commit(ssn, report, commits)
        except BaseException:  # what was not read yet: its connections dropped, not pooled
            await commits.abandon()
            raise
        await self._lift_gates(ssn)
        await self._write_back(ssn, report)
        report.seconds = self.clock() - start
        if self.metrics is not None:
            observe(self.metrics, ssn, report, self.cache.phases)
        self.sessions += 1
        self.conflicts += report.conflicts
        if self.last is not None and self.last.session is not None:
            self.last.session.close()  # the report keeps its figures; the session's cycles go
        self.last = report
        self._recent.append((self.clock(), report.committed))
        return report

    def stats(self) -> BatchStats:
        """The figures ``caldera status`` shows: sessions, the last one, pods/s, and each queue."""
        pods_per_s = None
        if len(self._recent) > 1:
            span = self._recent[-1][0] - self._recent[0][0]
            pods_per_s = round(sum(n for _, n in list(self._recent)[1:]) / span, 1) if span > 0 else 0.0
        out = BatchStats(
            sessions=self.sessions,
            conflicts=self.conflicts,
            unimplemented=self.conf.unimplemented_names(),
            pods_per_s=pods_per_s,
        )
        return last_session_stats(out, self.last, self.cache.phases)

    async def _evict(self, ssn: Session, report: SessionReport) -> None:
        if not ssn.evictions:
            return
        evictions = []
        for task in ssn.evictions:
            preemptors = [j.key for j in ssn.jobs.values() if j.reason_kind in EVICTING]
            evictions.append(
                Eviction(
                    uid=task.uid,
                    namespace=task.namespace,
                    name=task.name,
                    node=task.node,
                    reason=f"evicted for {', '.join(preemptors) or 'a higher-priority job'}",
                )
            )
        outcomes = await self.evictor.evict(evictions)
        now = self.clock()
        for e, outcome in zip(evictions, outcomes):
            if outcome is None:
                self.releasing[e.uid] = now
                report.evicted += 1

    async def _lift_gates(self, ssn: Session) -> None:
        """Take the queue-allocation gate off the pods whose queue took them this session (the
        next session places them, their requests held against the queue meanwhile)."""
        if not ssn.ungated or self.gates is None:
            return
        lifts = [
            GateLift(uid=t.uid, namespace=t.namespace, name=t.name, gate=QUEUE_ALLOCATION_GATE) for t in ssn.ungated
        ]
        for lift, failure in zip(lifts, await self.gates.lift_gates(lifts)):
            if failure is not None:
                log.warning(
                    "could not lift %s/%s's queue-allocation gate: %s", lift.namespace, lift.name, failure.reason
                )

    async def _open_commits(self, ssn: Session) -> SessionCommits:
        streams: dict[str, GangStream] = {}
        try:
            for name, binder in self.binders.items():
                streams[name] = await binder.gang_stream()
        except BaseException:
            for stream in streams.values():
                await stream.abandon()
            raise
        commits = SessionCommits(streams, self.config.names[0], self.pods, self.cache.columns)
        ssn.on_commit = commits.add
        return commits

    async def _commit(self, ssn: Session, report: SessionReport, commits: SessionCommits) -> None:
        now = self.clock()
        for name, jobs, stream in commits.per_binder():
            binder = self.binders[name]
            results = await stream.results()
            bindings: list[Binding] = []
            # (node, request) -> (pods committed there with that request, the node's newest version)
            taken: dict[tuple[str, Resources], tuple[int, int]] = {}
            for tasks, outcome in zip(jobs, results):
                done = [r for r in outcome if isinstance(r, Committed)]
                if len(done) == len(outcome):
                    report.jobs_started += 1
                    for t, c in zip(tasks, done):
                        notes: dict[str, str] = {}
                        if t.cards:  # what the device plugins read of the cards it took
                            cols = self.cache.columns
                            uuids = cols.card_ids[cols.index[t.node]] if t.node in cols.index else ()
                            notes = card_annotations(t.pod, t.node, uuids, t.cards, self.wall())
                        bindings.append(
                            Binding(uid=t.uid, namespace=t.namespace, name=t.name, node=t.node, annotations=notes)
                        )
                        self._assume(t)
                        held = t.request + t.cards if t.cards else t.request
                        count, version = taken.get((t.node, held), (0, 0))
                        taken[t.node, held] = (count + 1, max(version, c.version))
                        if self.metrics is not None and t.uid in self.cache.first_seen:
                            self.metrics.task_latency.observe((now - self.cache.first_seen[t.uid]) * 1000)
                    continue
                report.conflicts += len(tasks)
                job = ssn.jobs[tasks[0].job]
                for t in tasks:
                    t.status, t.node = TaskStatus.PENDING, ""
                for lost in outcome:
                    if isinstance(lost, Conflict):
                        self.cache.assumed.set_figures(
                            lost.node, lost.allocatable, lost.allocated, lost.version, lost.unschedulable
                        )
                detail = next(
                    (
                        f"{type(r).__name__.lower()} on {getattr(r, 'node', '')}"
                        for r in outcome
                        if not isinstance(r, Committed)
                    ),
                    "",
                )
                job.reason, job.reason_kind = (
                    (f"placement lost a race with another scheduler ({detail}); retried next session"),
                    PendingReason.COMMIT_CONFLICT,
                )
            self._hold(taken)
            report.committed += len(bindings)
            if bindings:
                bound = await bind_committed(binder, self.bind_target, bindings)
                # Bound now: the PodGroup status written below counts them (Volcano sees them so
                # one session later, once its cache has the bound pods).
                for b, failure in zip(bindings, bound):
                    task = ssn.tasks.get(b.uid)
                    if task is not None and failure is None:
                        task.status = TaskStatus.BOUND

    def _hold(self, taken: dict[tuple[str, Resources], tuple[int, int]]) -> None:
        """Hold a round's committed pods on the cache's node table, one token per node, until the
        feed's records count them (``taken``: (node, request) -> (pods, the node's newest version))."""
        held: dict[str, tuple[Resources, int]] = {}
        for (node, request), (count, version) in taken.items():
            amount = request.scaled(count) if count > 1 else request
            was = held.get(node)
            held[node] = (amount, version) if was is None else (was[0] + amount, max(was[1], version))
        for node, (request, version) in held.items():
            if node in self.cache.columns.index:
                self.cache.assumed.confirm(self.cache.assumed.assume(node, request), version)

    def _assume(self, task: TaskInfo) -> None:
        """Record a committed pod as bound in the cache before the feed reports it (its node's
        figures are held on the cache's table, one token per node, by the caller)."""
        record = self.pods.get(task.uid)
        if record is not None:
            self.pods[task.uid] = msgspec.structs.replace(record, node=task.node, accounted=task.node)
        self.cache.first_seen.pop(task.uid, None)

    async def _write_back(self, ssn: Session, report: SessionReport) -> None:
        now = _now_text(self.wall)
        gang = ssn.conf.has_plugin("gang")
        cache = self.cache
        writes: list[Write] = []
        for job in ssn.jobs.values():
            pg = job.podgroup
            status = podgroup_status(job, pg.status if pg is not None else PodGroupStatus(), now, gang)
            cache.phases[job.key] = status.phase
            if pg is not None and not same_status(status, pg.status):
                updated = msgspec.structs.replace(pg, status=status)
                cache.podgroups[job.key] = updated
                writes.append(Put(updated))
        cache.phases = {k: v for k, v in cache.phases.items() if k in ssn.jobs}
        report.allocated = {name: queue.allocated for name, queue in ssn.queues.items()}
        for name, queue in ssn.queues.items():
            if queue.queue is None:
                continue
            qstatus = queue_status(queue, cache.phases, report.allocated[name])
            if qstatus != queue.queue.status:
                updated_q = msgspec.structs.replace(queue.queue, status=qstatus)
                cache.queues[name] = updated_q
                writes.append(Put(updated_q))
        for name, hn in cache.hypernodes.items():
            hstatus = hypernode_status(hn, ssn.topology, hn.status, now)
            if not same_hypernode_status(hstatus, hn.status):
                updated_h = msgspec.structs.replace(hn, status=hstatus)
                cache.hypernodes[name] = updated_h
                writes.append(Put(updated_h))
        if writes:
            await self.store.write(writes)
        await self._write_reasons(ssn, report)

    async def _write_reasons(self, ssn: Session, report: SessionReport) -> None:
        wanted: dict[str, dict[str, str]] = {name: {} for name in self.config.names}
        for job in ssn.jobs.values():
            waiting = job.pending()
            if not waiting:
                continue
            reason = pending_reason(job)
            for t in waiting:
                record = self.pods.get(t.uid)
                if record is not None and record.scheduler in wanted:
                    wanted[record.scheduler][t.uid] = reason
        report.pending = sum(len(w) for w in wanted.values())
        for name, reasons in wanted.items():
            old = self.reasons[name]
            changed = {u: r for u, r in reasons.items() if old.get(u) != r}
            gone = [u for u in old if u not in reasons]
            await self.store.set_reasons(name, changed)
            await self.store.clear_reasons(name, gone)
            self.reasons[name] = reasons
