"""The binder: commits placements through one atomic compare-and-set script in Redis.

See DESIGN.md §4. Fine-grained by default: a node whose version moved since the scheduler
looked is re-checked, and the placement commits if it still fits. The script also knows
Volcano's agent binder's rule (any version change is a conflict); only the bench's
``VersionOnlyBinder`` (``caldera/bench/binders.py``), a subclass, asks for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import redis.asyncio as aioredis

from binder.metrics import BinderMetrics
from binder.results import Committed, Conflict, Placement, Reason, Rejected, Result
from cluster.model.devices import CARD_PREFIX
from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.store.keys import Keys
from cluster.store.records import encode_request
from cluster.store.scripts import Arg, Script, SentAhead, call_packed, run_loaded
from cluster.store.store import DEFAULT_FEED_MAXLEN

GANG_PLACEMENTS_PER_CALL = 256  # see Binder.commit_gangs


Figures = dict[str, tuple[Resources, Resources]]
"""Nodes' figures decoded for one call's answers: the script gives every answer on one node the same
(the node as the call leaves it), so each node's are decoded once."""


def _figures(figures: Figures, node: str, raw: list[object]) -> tuple[Resources, Resources]:
    """Allocatable and allocated from the script's (name, allocatable, allocated) triples, or as
    decoded for ``node`` already."""
    known = figures.get(node)
    if known is not None:
        return known
    alloc: dict[str, int] = {}
    used: dict[str, int] = {}
    for i in range(0, len(raw), 3):
        name = raw[i].decode()  # type: ignore[attr-defined]
        alloc[name] = int(raw[i + 1])  # type: ignore[call-overload]
        used[name] = int(raw[i + 2])  # type: ignore[call-overload]
    figures[node] = Resources(alloc), Resources(used)
    return figures[node]


def decode_result(node: str, raw: list[object], figures: Figures) -> Result:
    """One placement's answer; ``figures``: the nodes' figures decoded so far for the same call."""
    code = int(raw[0])  # type: ignore[call-overload]
    if code == 1:
        version, resolved, idempotent = int(raw[1]), raw[2] == 1, raw[3] == 1  # type: ignore[call-overload]
        if len(raw) > 4:
            allocatable, allocated = _figures(figures, node, raw[5:])
            return Committed(
                node=node,
                version=version,
                resolved=resolved,
                idempotent=idempotent,
                allocatable=allocatable,
                allocated=allocated,
                unschedulable=raw[4] == 1,
            )
        return Committed(node=node, version=version, resolved=resolved, idempotent=idempotent)
    if code == 2:
        allocatable, allocated = _figures(figures, node, raw[3:])
        return Conflict(
            node=node,
            version=int(raw[1]),  # type: ignore[call-overload]
            allocatable=allocatable,
            allocated=allocated,
            unschedulable=raw[2] == 1,
        )
    text = raw[1].decode()  # type: ignore[attr-defined]
    reason, _, detail = text.partition(" ")
    return Rejected(reason=Reason(reason), detail=detail)


def _invalid(p: Placement) -> Rejected | None:
    amounts = (*p.request.items(), *p.cards.items()) if p.cards else p.request.items()
    negative = [f"{name} {amount}" for name, amount in amounts if amount < 0]
    if negative:
        return Rejected(reason=Reason.INVALID_REQUEST, detail=f"negative request: {', '.join(negative)}")
    other = [name for name in p.cards.names() if not name.startswith(CARD_PREFIX)]
    if other:
        return Rejected(
            reason=Reason.INVALID_REQUEST, detail=f"cards name {', '.join(other)} (expected {CARD_PREFIX}<card>)"
        )
    return None


class Binder:
    """Commits one scheduler's placements; every placement gets a :data:`Result`."""

    MODE = "fine"  # the commit script's rule for a node whose version moved: re-check it

    def __init__(
        self,
        client: aioredis.Redis,
        keys: Keys,
        scheduler: str,
        *,
        sharding: ShardingMode = ShardingMode.SOFT,
        metrics: BinderMetrics | None = None,
        clock: Callable[[], float] = time.perf_counter,
        feed_maxlen: int = DEFAULT_FEED_MAXLEN,
    ) -> None:
        self.client = client
        self.keys = keys
        self.scheduler = scheduler
        self.metrics = metrics
        self.clock = clock
        self._head: list[Arg] = [keys.prefix, feed_maxlen]
        self._flags: list[Arg] = [scheduler, self.MODE, int(sharding is ShardingMode.HARD)]
        self._commit = Script("binder", "commit")
        self._release = Script("binder", "release")
        self._unbound = Script("binder", "unbound")
        self._loaded = False  # the scripts loaded by this binder (a gang stream loads them first)

    @property
    def commit_script(self) -> Script:
        """The commit script (the bench calls it raw to measure the ceiling)."""
        return self._commit

    async def load(self) -> None:
        """Load the scripts into Redis ahead of the first commit."""
        for script in (self._commit, self._release, self._unbound):
            await script.load(self.client)

    async def commit(self, placements: Sequence[Placement], gang: bool = False) -> list[Result]:
        """Commit placements in one round trip; with ``gang`` all of them or none."""
        return (await self.commit_many([placements], gang=gang))[0]

    async def commit_many(self, batches: Sequence[Sequence[Placement]], gang: bool = False) -> list[list[Result]]:
        """Commit several batches (each one script call; each a gang with ``gang``) in one round trip."""
        out: list[list[Result]] = []
        calls: list[tuple[str, int, list[int], list[Placement]]] = []
        for batch in batches:
            results, todo = self._screen(batch, gang)
            out.append(results)  # type: ignore[arg-type]
            if todo:
                calls.append(("1" if gang else "0", 1, [len(out) - 1], todo))
        return await self._finish(out, calls)

    async def commit_gangs(
        self, gangs: Sequence[Sequence[Placement]], per_call: int = GANG_PLACEMENTS_PER_CALL
    ) -> list[list[Result]]:
        """Commit gangs, each all or nothing, in one round trip: several gangs to a script call, up
        to about ``per_call`` placements each (a larger gang has a call of its own).

        Several gangs in one call cost Redis one script run instead of one each, and a node that
        an earlier gang of the same call took from does not count as having moved under a later
        one (a scheduler placing a session's gangs decided on them in that order). ``per_call``
        bounds how long one call holds Redis: while a script runs no other client is served.
        A commit re-checked on a node that moved comes without the node's figures (a session's
        later gangs on a node its earlier calls took from are most of them, and the batch
        scheduler decides again from its cache); a :class:`Conflict` still carries them.
        """
        stream = GangStream(self, None, per_call)
        for gang in gangs:
            stream.add(gang)
        return await stream.results()

    async def commit_stream(self) -> CommitStream:
        """:meth:`commit` batch by batch, each batch's script call sent to Redis as soon as it is
        added (:class:`~cluster.store.scripts.SentAhead`): the agent's worker commits a micro-batch's
        first pods while it decides the rest. Read the results with :meth:`CommitStream.results`
        (or give the connection back with :meth:`CommitStream.abandon`)."""
        await self._load_once()
        return CommitStream(self, await SentAhead.open(self.client))

    async def _load_once(self) -> None:
        if not self._loaded:  # calls sent ahead to a Redis without the script would all go twice
            await self.load()
            self._loaded = True

    async def gang_stream(self, per_call: int = GANG_PLACEMENTS_PER_CALL) -> GangStream:
        """:meth:`commit_gangs` gang by gang, each script call sent to Redis as soon as it is
        full, from synchronous code (:class:`~cluster.store.scripts.SentAhead`): the batch
        session commits its first gangs while it places the others. Read the results with
        :meth:`GangStream.results` (or give the connection back with
        :meth:`GangStream.abandon`)."""
        await self._load_once()
        return GangStream(self, await SentAhead.open(self.client), per_call)

    @staticmethod
    def _screen(batch: Sequence[Placement], gang: bool) -> tuple[list[Result | None], list[Placement]]:
        """Each placement's result decided here (None: for the script), and those for the script."""
        uids = [p.uid for p in batch]
        if len(set(uids)) != len(uids):
            raise ValueError(f"placements: a pod appears twice in one batch: {sorted(uids)}")
        invalid = [_invalid(p) for p in batch]
        results: list[Result | None] = list(invalid)
        if gang and any(invalid):
            results = [r or Rejected(reason=Reason.GANG_MEMBER_FAILED) for r in invalid]
        return results, [p for p, r in zip(batch, results) if r is None]

    async def _finish(
        self, out: list[list[Result]], calls: list[tuple[str, int, list[int], list[Placement]]]
    ) -> list[list[Result]]:
        """Run the calls (the script's gang and figures arguments, the batches of ``out`` they
        answer, their placements) and fill each batch's undecided results in from the script's."""
        raws = await self._call([(gang, figures, todo) for gang, figures, _, todo in calls]) if calls else []
        return self._decoded(out, calls, raws)

    def _decoded(
        self,
        out: list[list[Result]],
        calls: Sequence[tuple[str, int, list[int], list[Placement]]],
        raws: Sequence[list[list[object]]],
    ) -> list[list[Result]]:
        for (_, _, indices, todo), raw in zip(calls, raws):
            figures: Figures = {}
            decoded = iter([decode_result(p.node, r, figures) for p, r in zip(todo, raw)])
            for index in indices:
                out[index] = [r if r is not None else next(decoded) for r in out[index]]
        if self.metrics is not None:
            self._count(out)
        return out

    def _command(self, gang: str, figures: int, todo: Sequence[Placement]) -> tuple[Arg, ...]:
        """The commit script's EVALSHA for one call."""
        args: list[Arg] = [*self._head, *self._flags, gang, figures]
        for p in todo:
            args += [
                p.uid,
                p.node,
                p.version,
                encode_request(p.request),
                encode_request(p.cards) if p.cards else "",
            ]
        return self._commit.command([self.keys.rv], args)

    async def _call(self, calls: list[tuple[str, int, list[Placement]]]) -> list[list[list[object]]]:
        commands = [self._command(gang, figures, todo) for gang, figures, todo in calls]

        async def go() -> list[list[list[object]]]:
            return await call_packed(self.client, commands)

        start = self.clock()
        raws = await run_loaded(self.client, [self._commit, self._release], go)
        if self.metrics is not None:
            self.metrics.commit_seconds.observe(self.clock() - start)
        return raws

    async def _sent_replies(self, ahead: SentAhead, start: float) -> list[list[list[object]]]:
        """The replies of the calls ``ahead`` sent from ``start`` on (the commit's round trip
        is timed from the first send); on NOSCRIPT (Redis restarted or flushed meanwhile:
        nothing of that call ran) the scripts loaded and every call sent again."""
        raws: list[list[list[object]]] = await ahead.replies_loaded([self._commit, self._release])
        if self.metrics is not None:
            self.metrics.commit_seconds.observe(self.clock() - start)
        return raws

    def _count(self, batches: list[list[Result]]) -> None:
        assert self.metrics is not None
        for results in batches:
            for r in results:
                if isinstance(r, Committed):
                    self.metrics.commits.labels("committed").inc()
                    if r.resolved:
                        self.metrics.conflicts_resolved.inc()
                elif isinstance(r, Conflict):
                    self.metrics.commits.labels("conflict").inc()
                else:
                    self.metrics.commits.labels("rejected").inc()

    async def release(self, uids: Sequence[str]) -> list[bool]:
        """Give back reservations whose bind failed: the pods are pending again. Idempotent."""
        if not uids:
            return []
        raw = await self._release.call(self.client, [self.keys.rv], [*self._head, *uids])
        released = [v == 1 for v in raw]
        if self.metrics is not None:
            self.metrics.releases.inc(sum(released))
        return released

    async def bound(self, uids: Sequence[str]) -> None:
        """These committed pods are bound in the cluster now: nothing is left for a successor to bind."""
        if uids:
            await self.client.zrem(self.keys.binding(self.scheduler), *uids)

    async def unbound(self, older_than: float, limit: int = 1000) -> list[tuple[str, str]]:
        """(uid, node) of the pods committed at least ``older_than`` seconds ago and still not
        bound in the cluster, oldest first — left by a scheduler that died between the two steps."""
        raw = await self._unbound.call(
            self.client, [self.keys.rv], [*self._head, self.scheduler, int(older_than * 1000), limit]
        )
        items = [v.decode() if isinstance(v, bytes) else str(v) for v in raw]
        return list(zip(items[::2], items[1::2]))


class CommitStream:
    """Batches for :meth:`Binder.commit`, each one script call sent at once when the stream was
    opened with a :class:`SentAhead` (:meth:`Binder.commit_stream`): Redis commits a batch while
    its sender decides the next. :meth:`results` answers every batch in the order added."""

    PARTS = "batches"

    def __init__(self, binder: Binder, ahead: SentAhead | None) -> None:
        self.binder, self.ahead = binder, ahead
        self.out: list[list[Result | None]] = []
        # (the script's gang sizes, figures, the indices in out it answers, its placements)
        self.calls: list[tuple[str, int, list[int], list[Placement]]] = []
        self._seen: set[str] = set()
        self._started: float | None = None  # the binder's clock at the first call sent

    def add(self, batch: Sequence[Placement]) -> None:
        """One batch, as :meth:`Binder.commit` takes it (with the nodes' figures answered)."""
        _, todo = self._screened(batch, False)
        if todo:
            self._send(("0", 1, [len(self.out) - 1], todo))

    def _screened(self, batch: Sequence[Placement], gang: bool) -> tuple[list[Result | None], list[Placement]]:
        results, todo = self.binder._screen(batch, gang)
        uids = [p.uid for p in batch]
        taken = self._seen.intersection(uids)
        if taken:
            raise ValueError(f"placements: a pod appears in two {self.PARTS}: {sorted(taken)}")
        self._seen.update(uids)
        self.out.append(results)
        return results, todo

    def _send(self, call: tuple[str, int, list[int], list[Placement]]) -> None:
        self.calls.append(call)
        if self.ahead is not None:
            if self._started is None:
                self._started = self.binder.clock()
            self.ahead.send(self.binder._command(call[0], call[1], call[3]))

    async def results(self) -> list[list[Result]]:
        """Every batch's results, in the order added."""
        out: list[list[Result]] = self.out  # type: ignore[assignment]  # filled in by _decoded
        if self.ahead is None:
            return await self.binder._finish(out, self.calls)
        if self._started is None:  # nothing sent
            await self.ahead.abandon()
            return self.binder._decoded(out, [], [])
        return self.binder._decoded(out, self.calls, await self.binder._sent_replies(self.ahead, self._started))

    async def abandon(self) -> None:
        """Give the connection back without reading the replies (the calls sent may have
        committed: the rebinder binds what stays committed and unbound)."""
        if self.ahead is not None:
            await self.ahead.abandon()


class GangStream(CommitStream):
    """Gangs for :meth:`Binder.commit_gangs`, added one at a time: a script call is closed as
    soon as it holds ``per_call`` placements (or the next gang would take it past them), and
    sent at once when the stream was opened with a :class:`SentAhead`
    (:meth:`Binder.gang_stream`); :meth:`results` sends what is left and answers every gang in
    the order added."""

    PARTS = "gangs"

    def __init__(self, binder: Binder, ahead: SentAhead | None, per_call: int) -> None:
        super().__init__(binder, ahead)
        self.per_call = per_call
        self._sizes: list[int] = []
        self._indices: list[int] = []
        self._todo: list[Placement] = []

    def add(self, gang: Sequence[Placement]) -> None:
        _, todo = self._screened(gang, True)
        if not todo:
            return
        if self._todo and len(self._todo) + len(todo) > self.per_call:
            self._close()
        self._sizes.append(len(todo))
        self._indices.append(len(self.out) - 1)
        self._todo.extend(todo)
        if len(self._todo) >= self.per_call:
            self._close()

    def _close(self) -> None:
        self._send((" ".join(map(str, self._sizes)), 0, self._indices, self._todo))
        self._sizes, self._indices, self._todo = [], [], []

    async def results(self) -> list[list[Result]]:
        """Every gang's results, in the order added."""
        if self._todo:
            self._close()
        return await super().results()
