"""What the demo saw: every pod from submission to binding (or deletion), every gang job.

The tracker is fed by the workload (what it submitted, which pods form which job) and by reads
of the store's pods (when each pod was bound, when it went away: in the demo the simulated
kubelets' reads, handed over, so that every change is fetched and decoded once). Latency is
submit → bound as the store shows it: from the moment the workload began the write that
submitted the pod to the moment the store wrote the change that shows it on a node — the feed
entry's time, not the moment the demo's process got round to reading it. That process also
writes the workload and plays the kubelets, and on two busy cores it read a bound pod 22–30 ms
(p50) after the store wrote it, up to 118 ms (p99): counted until then, that lag was a third to
half of the figure. When a read brings several changes of a pod, the last one's time is taken —
never earlier than the binding (measured: 2.6% of bound pods, later by a few ms). Figures
"lately" are over a sliding window, for the live view and the report's samples.

Pods are submitted in rounds (every 100 ms, what arrived since; an agent burst is a hundred
pods or more at once), so a pod's latency is the path's plus its wait behind the pods of its
own round. The tracker also keeps, per round and scheduler, the latency of the first of its
pods to be bound — the path with nothing of its round ahead of it — and the round's size: the
two halves of a p50 told apart. By the size of the round (:data:`ROUND_BANDS`), the p50 over the
rounds of their first, median and last pod bound: a pod waits ~140–190 µs behind each pod of its
round ahead of it in the default demo, so a round of 250 has its median pod where one of 100 has its last.

It also counts, per scheduler, each pod's ``write``: from the submission to the store's write that
created it (the feed entry's time) — the first step of its way, before the agent scheduler's stages
(:mod:`agent_scheduler.stages`, whose ``feed`` starts at that write). A round of a few hundred pods
is written :data:`~cluster.store.store.PODS_PER_CALL` to a call, so its median pod waits behind the calls
before its own.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import numpy as np

from agent_scheduler.stages import StageFigures, Stages
from cluster.model.core import Pod
from cluster.store.informer import Informer
from cluster.store.keys import Kind
from cluster.store.records import Update
from cluster.store.store import Store


class Lately(msgspec.Struct, frozen=True):
    """One scheduler over the last window: pods bound per second, p50 and p99 ms (None when none was bound)."""

    pods_per_s: float
    p50_ms: float | None
    p99_ms: float | None


class Job:
    __slots__ = ("name", "queue", "size", "need", "bound", "gone", "started_at")

    def __init__(self, name: str, queue: str, size: int, need: int) -> None:
        self.name, self.queue, self.size, self.need = name, queue, size, need
        self.bound = 0
        self.gone = 0
        self.started_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.gone >= self.size


ROUND_BANDS = (100, 200, 300)
"""The round sizes the figures by round size are told apart at: below 100 pods, 100–199, 200–299, 300
or more (the default workload's agent bursts are 100–300 pods, two in one 100-ms round at times)."""


def band_of(size: int) -> str:
    """The band of :data:`ROUND_BANDS` a round of ``size`` pods falls in, as the report names it."""
    low = 1
    for high in ROUND_BANDS:
        if size < high:
            return f"{low}–{high - 1}"
        low = high
    return f"{low}+"


class _Round:
    """A submission round not settled yet: its scheduler, its size, its pods not yet bound or gone, and
    the latencies (ms) of those bound, in the order bound."""

    __slots__ = ("scheduler", "size", "left", "ms")

    def __init__(self, scheduler: str) -> None:
        self.scheduler, self.size, self.left = scheduler, 0, 0
        self.ms: list[float] = []


def percentile(values: Iterable[float], q: float) -> float:
    a = np.fromiter(values, dtype=float)
    return round(float(np.percentile(a, q)), 1) if a.size else 0.0


class Tracker:
    def __init__(
        self, schedulers: Iterable[str], *, window_s: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.schedulers = list(schedulers)
        self.clock = clock
        self.window_s = window_s
        self.created: dict[str, tuple[str, float, int]] = {}  # uid -> scheduler, submitted, round
        # Per submission round (and scheduler), until each of its pods is bound or gone.
        self._rounds: dict[int, _Round] = {}
        self._round_no = 0
        self.round_firsts: dict[str, array[float]] = {s: array("d") for s in self.schedulers}  # ms, per round
        self.round_sizes: dict[str, array[float]] = {s: array("d") for s in self.schedulers}
        # Per settled round with a pod bound: its band of ROUND_BANDS, and its first, median and last pod's ms.
        self.settled_rounds: dict[str, list[tuple[str, float, float, float]]] = {s: [] for s in self.schedulers}
        self.bound_at: dict[str, float] = {}
        # the write stage: per scheduler; uid -> when submitted (time.time()), until its creation is read
        self.writes = {s: Stages(("write",)) for s in self.schedulers}
        self._unwritten: dict[str, float] = {}
        self._written_then: dict[str, StageFigures] = {}  # at the last written_lately()
        # ms from submitted to bound, every pod of the run (8 bytes each: a soak binds a million)
        self.latencies: dict[str, array[float]] = {s: array("d") for s in self.schedulers}
        self.submitted_n = dict.fromkeys(self.schedulers, 0)
        self.gone_unbound = dict.fromkeys(self.schedulers, 0)
        self.completed = 0
        self.recent: deque[tuple[float, str, float]] = deque()  # (bound at, scheduler, latency ms)
        self.jobs: dict[str, Job] = {}
        self.job_of: dict[str, Job] = {}
        self._finished: list[str] = []  # jobs whose pods are all gone, since take_finished

    # -- feeding -------------------------------------------------------------------------

    def submitted(self, pods: Iterable[Pod]) -> None:
        """Pods submitted together (told before they are written): one round per scheduler among them."""
        now, wall = self.clock(), time.time()
        rounds: dict[str, int] = {}
        for p in pods:
            name = p.scheduler_name if p.scheduler_name in self.submitted_n else self.schedulers[-1]
            if name not in rounds:
                self._round_no += 1
                rounds[name] = self._round_no
                self._rounds[self._round_no] = _Round(name)
            entry = self._rounds[rounds[name]]
            entry.size += 1
            entry.left += 1
            self.created[p.uid] = (name, now, rounds[name])
            self._unwritten[p.uid] = wall
            self.submitted_n[name] += 1
        for name, r in rounds.items():
            self.round_sizes[name].append(self._rounds[r].size)

    def _settled(self, r: int, ms: float | None) -> bool:
        """One pod of round ``r`` bound ``ms`` after its submission, or gone (None); whether it is the
        round's first bound. The round's figures are kept once its last pod is bound or gone."""
        entry = self._rounds[r]
        first = ms is not None and not entry.ms
        if ms is not None:
            entry.ms.append(ms)
        entry.left -= 1
        if not entry.left:
            del self._rounds[r]
            if entry.ms:
                done = sorted(entry.ms)
                self.settled_rounds[entry.scheduler].append(
                    (band_of(entry.size), done[0], float(np.median(done)), done[-1])
                )
        return first

    def job(self, name: str, queue: str, uids: list[str], need: int) -> None:
        job = Job(name, queue, len(uids), need)
        self.jobs[name] = job
        for u in uids:
            self.job_of[u] = job

    def bound(self, uid: str, now: float) -> None:
        entry = self.created.get(uid)
        if entry is None or uid in self.bound_at:
            return
        scheduler, t0, r = entry
        self.bound_at[uid] = now
        ms = (now - t0) * 1000
        self.latencies[scheduler].append(ms)
        if self._settled(r, ms):
            self.round_firsts[scheduler].append(ms)
        self.recent.append((now, scheduler, ms))
        job = self.job_of.get(uid)
        if job is not None:
            job.bound += 1
            if job.started_at is None and job.bound >= job.need:
                job.started_at = now

    def gone(self, uid: str) -> None:
        """The pod is no longer in the store; counted once (a pod created and deleted between
        two reads of the feed is reported gone for each of its changes)."""
        self._unwritten.pop(uid, None)
        entry = self.created.pop(uid, None)
        if entry is None:
            return
        if self.bound_at.pop(uid, None) is not None:  # what a pod gone needs kept no longer (a soak runs for hours)
            self.completed += 1
        else:
            self.gone_unbound[entry[0]] += 1
            self._settled(entry[2], None)
        job = self.job_of.pop(uid, None)
        if job is not None:
            job.gone += 1
            if job.finished:
                self._finished.append(job.name)

    def take_finished(self) -> list[str]:
        """The jobs whose pods are all gone since the last call: their PodGroups can go too."""
        done, self._finished = self._finished, []
        return done

    async def watch(self, store: Store, stop: asyncio.Event) -> None:
        """Follow the store's pods until ``stop``: bindings and deletions."""
        informer = Informer(store, [Kind.POD], block_ms=100)

        async def stopper() -> None:  # a quiet feed yields nothing: stop it from outside
            await stop.wait()
            informer.stop()

        stopping = asyncio.create_task(stopper())
        try:
            async for update in informer.updates():
                self.seen(update)
        finally:
            stopping.cancel()

    def seen(self, update: Update) -> None:
        """What a read of the store's pods brought: bindings and deletions (:meth:`watch`, or the reader of
        the simulated kubelets, which hands its updates over)."""
        now, wall = self.clock(), time.time()
        for uid, rec in update.pods.items():
            submitted = self._unwritten.pop(uid, None) if rec is not None else None
            if submitted is not None and (created := update.written.get(uid)):
                self.writes[self.created[uid][0]].observe("write", created - submitted)
            if rec is None:
                self.gone(uid)
            elif rec.node:
                written = update.last_written.get(uid, 0.0)
                if written and rec.version > update.version:
                    # Fetched after a write the read did not reach (the read saw the pod created; the
                    # fetch found it bound): that write's time is not the one read. The next read brings
                    # it — counted then, at its time, not at the creation's.
                    continue
                self.bound(uid, now - max(0.0, wall - written) if written else now)

    # -- figures -------------------------------------------------------------------------

    def lately(self) -> dict[str, Lately]:
        """Per scheduler over the last window."""
        now = self.clock()
        while self.recent and self.recent[0][0] < now - self.window_s:
            self.recent.popleft()
        out = {}
        for s in self.schedulers:
            ms = [m for _, name, m in self.recent if name == s]
            out[s] = Lately(
                round(len(ms) / self.window_s, 1),
                percentile(ms, 50) if ms else None,
                percentile(ms, 99) if ms else None,
            )
        return out

    def totals(self, elapsed: float) -> dict[str, dict[str, Any]]:
        """Per scheduler over the whole run."""
        out = {}
        for s in self.schedulers:
            lat = self.latencies[s]
            out[s] = {
                "pods_submitted": self.submitted_n[s],
                "pods_bound": len(lat),
                "pending": self.pending(s),
                "deleted_before_bound": self.gone_unbound[s],
                "pods_per_s": round(len(lat) / max(elapsed, 1e-9), 1),
                **{f"p{q}_ms": percentile(lat, q) for q in (50, 90, 99)},
                "rounds": len(self.round_sizes[s]),
                "round_size_mean": round(float(np.mean(self.round_sizes[s])), 1) if self.round_sizes[s] else 0.0,
                "round_first_p50_ms": percentile(self.round_firsts[s], 50),
                "round_first_p99_ms": percentile(self.round_firsts[s], 99),
                "by_round_size": self.by_round_size(s),
            }
        return out

    def by_round_size(self, scheduler: str) -> list[dict[str, object]]:
        """Per band of :data:`ROUND_BANDS` that has a settled round: its rounds, and the p50 over them of
        their first, median and last pod bound (ms)."""
        out: list[dict[str, object]] = []
        rounds = self.settled_rounds[scheduler]
        for band in dict.fromkeys(band_of(n) for n in (1, *ROUND_BANDS)):
            these = [r for r in rounds if r[0] == band]
            if these:
                out.append(
                    {
                        "band": band,
                        "rounds": len(these),
                        "first_p50_ms": percentile((r[1] for r in these), 50),
                        "median_p50_ms": percentile((r[2] for r in these), 50),
                        "last_p50_ms": percentile((r[3] for r in these), 50),
                    }
                )
        return out

    def written(self, scheduler: str) -> StageFigures:
        """The write stage of ``scheduler``'s pods so far."""
        return self.writes[scheduler].figures()["write"]

    def written_lately(self, scheduler: str) -> StageFigures | None:
        """The write stage of the pods counted since the last call."""
        now = self.written(scheduler)
        lately = now.since(self._written_then.get(scheduler))
        self._written_then[scheduler] = now
        return lately

    def pending(self, scheduler: str) -> int:
        return self.submitted_n[scheduler] - len(self.latencies[scheduler]) - self.gone_unbound[scheduler]

    def queues(self, names: Iterable[str]) -> dict[str, dict[str, int]]:
        """Per queue: jobs submitted, started (whole, at least once), running now, waiting now."""
        out = {q: {"submitted": 0, "started": 0, "running": 0, "waiting": 0} for q in names}
        for job in self.jobs.values():
            row = out.setdefault(job.queue, {"submitted": 0, "started": 0, "running": 0, "waiting": 0})
            row["submitted"] += 1
            if job.started_at is not None:
                row["started"] += 1
                if not job.finished:
                    row["running"] += 1
            elif not job.finished:
                row["waiting"] += 1
        return out
