"""The loop with an in-process worker (the same Worker the Ray actors hold): what it remembers."""

from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec

from agent_scheduler.core import CoreConfig, partition_room
from agent_scheduler.loop import AgentLoop, LoopConfig
from agent_scheduler.outcome import BatchResult, OutcomeKind
from agent_scheduler.shares import ROOM_PROBE, ROOM_STALE_S
from agent_scheduler.worker import Worker, WorkerConfig
from binder.commit import Binder
from binder.results import Committed, Placement
from cluster.model.binding import Binding, Failure
from cluster.sim.cluster import SimBindTarget
from cluster.sim.pods import make_pod
from cluster.store.audit import audit
from cluster.store.store import Store
from tests.builders import node


@contextlib.asynccontextmanager
async def running_loop(store: Store, target: SimBindTarget | None = None) -> AsyncIterator[AgentLoop]:
    """An agent loop with one in-process worker (binding through ``target``, the simulator's by default), running."""
    worker = Worker(
        store, Binder(store.client, store.keys, "agent-scheduler"), target or SimBindTarget(store), WorkerConfig()
    )
    await worker.start()
    worker.name = "w0"  # type: ignore[attr-defined]
    loop = AgentLoop(store, [worker], LoopConfig())  # type: ignore[list-item]
    stop = asyncio.Event()
    runner = asyncio.create_task(loop.run(stop))
    try:
        yield loop
    finally:
        stop.set()
        await runner
        await worker.stop()


async def test_a_long_running_loop_forgets_pods_once_they_are_gone(store: Store) -> None:
    await store.upsert_nodes([node(f"n{i}", cpu="16") for i in range(4)])
    async with running_loop(store) as loop:
        pods = [make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(20)]
        await store.upsert_pods(pods)
        deadline = time.monotonic() + 20
        while len(loop.bound) < 20:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert loop.stats().bound == 20
        await store.delete_pods([p.uid for p in pods])  # they finished
        while loop.bound or loop.bound_at:
            assert time.monotonic() < deadline, len(loop.bound)
            await asyncio.sleep(0.05)
        assert loop.stats().bound == 20  # the count of pods bound stays


async def test_a_batch_of_old_records_binds_a_pod_committed_meanwhile_and_drops_a_deleted_one(store: Store) -> None:
    """Batches carry the records the loop last saw. A pod retried after its first worker died
    may already be committed (never bound): it is bound where it was committed, not placed twice."""
    await store.upsert_nodes([node("n0", cpu="16"), node("n1", cpu="16")])
    worker = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), WorkerConfig())
    await worker.start()
    try:
        early = make_pod("early", requests={"cpu": "10"}, scheduler="agent-scheduler")
        gone = make_pod("gone", requests={"cpu": "2"}, scheduler="agent-scheduler")
        await store.upsert_pods([early, gone])
        old = await store.get_pods([early.uid, gone.uid])  # pending, as the loop saw them
        [done] = await Binder(store.client, store.keys, "agent-scheduler").commit(
            [Placement(uid=early.uid, node="n1", request=early.request(), version=0)]
        )  # by a worker that then died
        assert isinstance(done, Committed)
        await store.delete_pods([gone.uid])
        deadline = time.monotonic() + 10
        while worker.columns.free()[worker.columns.resource_row("cpu"), worker.columns.index["n1"]] > 6000:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)  # the replica has seen the commit: only n0 seems to fit
        result = await worker.schedule([old[early.uid], old[gone.uid]])
        outcomes = {o.uid: o for o in result.outcomes}
        assert (outcomes[early.uid].kind, outcomes[early.uid].node) == (OutcomeKind.BOUND, "n1")
        assert outcomes[gone.uid].kind is OutcomeKind.GONE
        assert (await store.get_pods([early.uid]))[early.uid].node == "n1"
        assert await audit(store) == []
    finally:
        await worker.stop()


async def test_a_worker_commits_a_batch_a_chunk_at_a_time_as_it_decides_it(store: Store) -> None:
    """Each ``commit_chunk`` decisions go to the binder as soon as they are made: a batch of five in
    chunks of two is three commits (three feed entries, in the order decided), every pod bound once
    where its chunk put it, and the replica counts each placement once. The stage figures: the wait
    for the binder after the deciding is within the commits' round trip."""
    await store.upsert_nodes([node(f"n{i}", cpu="16") for i in range(2)])
    binder = Binder(store.client, store.keys, "agent-scheduler")
    worker = Worker(store, binder, SimBindTarget(store), WorkerConfig(commit_chunk=2))
    await worker.start()
    try:
        pods = [make_pod(f"p{i}", requests={"cpu": "2"}, scheduler="agent-scheduler") for i in range(5)]
        await store.upsert_pods(pods)
        records = await store.get_pods([p.uid for p in pods])
        last = (await store.client.xrevrange(store.keys.feed, count=1))[0][0]
        result = await worker.schedule([records[p.uid] for p in pods])
        assert [o.kind for o in result.outcomes] == [OutcomeKind.BOUND] * 5
        entries = await store.client.xrange(store.keys.feed, min=b"(" + last)
        committed = [
            [name.removeprefix("pod:") for name in fields[b"c"].decode().split("\n") if name.startswith("pod:")]
            for _, fields in entries
        ]
        assert [c for c in committed if c][:3] == [
            [pods[0].uid, pods[1].uid],
            [pods[2].uid, pods[3].uid],
            [pods[4].uid],
        ]
        assert len(result.commit_seconds) == 1 and 0 <= result.commit_wait_seconds <= result.commit_seconds[0]
        held = await store.get_nodes(["n0", "n1"])
        async with asyncio.timeout(10):
            while any(worker.columns.version[worker.columns.index[n]] < r.version for n, r in held.items()):
                await asyncio.sleep(0.01)  # the replica caught up with the commits
        cpu = worker.columns.resource_row("cpu")
        assert sum(int(worker.columns.allocated[cpu, worker.columns.index[n]]) for n in held) == 5 * 2000
        assert len(worker.assumed) == 0
        assert await audit(store) == []
    finally:
        await worker.stop()


async def test_a_refresh_of_the_replica_keeps_placements_whose_commit_is_still_in_flight(store: Store) -> None:
    """While a batch is being committed the store does not count its placements yet; a refresh of
    the node from the feed must not drop them, or the worker's next batch fills the same room."""
    await store.upsert_nodes([node("n0", cpu="16")])
    worker = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), WorkerConfig())
    await worker.start()
    try:
        cols = worker.columns
        cpu, i = cols.resource_row("cpu"), cols.index["n0"]
        p = make_pod("inflight", requests={"cpu": "10"}, scheduler="agent-scheduler")
        placement = Placement(uid=p.uid, node="n0", request=p.request(), version=int(cols.version[i]))
        cols.take("n0", placement.request)  # decided: the tentative placement
        held = worker.assumed.assume("n0", placement.request, taken=True)  # and its commit is on its way
        before = int(cols.version[i])
        await store.upsert_nodes([node("n0", cpu="16", labels={"zone": "a"})])  # the node changes meanwhile
        async with asyncio.timeout(10):
            while int(cols.version[i]) == before:
                await asyncio.sleep(0.01)  # the replica refreshed n0 from the store
        assert cols.allocated[cpu, i] == 10000  # the placement in flight is still counted
        worker.assumed.forget(held)
    finally:
        await worker.stop()


async def test_a_pod_with_scheduling_gates_waits_until_they_are_removed(store: Store) -> None:
    await store.upsert_nodes([node("n0", cpu="16")])
    worker = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), WorkerConfig())
    await worker.start()
    worker.name = "w0"  # type: ignore[attr-defined]
    loop = AgentLoop(store, [worker], LoopConfig())  # type: ignore[list-item]
    stop = asyncio.Event()
    runner = asyncio.create_task(loop.run(stop))
    try:
        pod = make_pod("gated", requests={"cpu": "1"}, scheduler="agent-scheduler")
        gated = msgspec.structs.replace(
            pod, spec=msgspec.structs.replace(pod.spec, scheduling_gates=[{"name": "wait"}])
        )
        await store.upsert_pods([gated])
        await asyncio.sleep(1.0)
        assert not loop.bound and (await store.get_pods([pod.uid]))[pod.uid].node == ""
        assert "scheduling gates (wait)" in (await store.reasons("agent-scheduler"))[pod.uid]  # says why it waits
        await store.upsert_pods([pod])  # the gate is removed
        deadline = time.monotonic() + 20
        while pod.uid not in loop.bound:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await runner
        await worker.stop()


async def test_a_burst_is_split_over_every_worker_at_once(store: Store) -> None:
    """400 pods arrive at once for four workers (two batches in flight each, up to 256 a batch): each
    worker gets a share of the burst in its first batches, not the first two workers 256 apiece
    (which overflowed their partitions of the nodes into the others', where commits collided)."""
    await store.upsert_nodes([node(f"n{i}", cpu="64") for i in range(40)])
    workers = []
    for i in range(4):
        config = WorkerConfig(core=CoreConfig(worker=i, workers=4), seed=i)
        w = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), config)
        await w.start()
        w.name = f"w{i}"  # type: ignore[attr-defined]
        workers.append(w)
    loop = AgentLoop(store, workers, LoopConfig(batch_size=256, inflight=2))  # type: ignore[arg-type]
    await store.upsert_pods([make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(400)])
    stop = asyncio.Event()
    runner = asyncio.create_task(loop.run(stop))
    try:
        deadline = time.monotonic() + 20
        while len(loop.bound) < 400:
            assert time.monotonic() < deadline, len(loop.bound)
            await asyncio.sleep(0.05)
        per_worker = Counter(zlib.crc32(n.encode()) % 4 for n in loop.bound.values())
        # Then 40 more, brought by the feed: each has its feed stage, from the store's write.
        await store.upsert_pods(
            [make_pod(f"q{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(40)]
        )
        while len(loop.bound) < 440:
            assert time.monotonic() < deadline, len(loop.bound)
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await runner
        for w in workers:
            await w.stop()
    # Each worker places in its own partition while it has room (plenty here): where a pod was bound
    # says which worker placed it.
    assert sorted(per_worker) == [0, 1, 2, 3] and all(50 <= n <= 150 for n in per_worker.values()), per_worker
    feed = loop.stats().stages["feed"]
    assert feed.pods == 40 and 0 < feed.seconds / feed.pods < 1.0 and feed.quantile(0.99) is not None


async def test_a_worker_whose_partition_is_full_waits_while_another_has_room(store: Store) -> None:
    """With room shares (the default): a worker whose answer said its partition has no room left takes
    nothing while another's has some (it would place in theirs, and collide there); one with
    room takes at most that much, less its other batches still out; while every figure says full
    and an answer is on its way, nobody takes (it brings a fresher figure); then the waiting pods
    go out evenly again. A full worker's figure older than ROOM_STALE_S earns it a look
    (ROOM_PROBE pods) while another has room; an old figure with room still caps (at least a look).
    Without room shares, shares are even: the waiting pods over the workers (one batch each)."""
    now = [100.0]
    workers = []
    for i in range(2):
        w = Worker(
            store,
            Binder(store.client, store.keys, "agent-scheduler"),
            SimBindTarget(store),
            WorkerConfig(core=CoreConfig(worker=i, workers=2)),
        )
        w.name = f"w{i}"  # type: ignore[attr-defined]
        workers.append(w)

    def loop_of(room_shares: bool) -> AgentLoop:
        config = LoopConfig(batch_size=256, inflight=2, room_shares=room_shares)
        return AgentLoop(store, workers, config, clock=lambda: now[0])  # type: ignore[arg-type]

    loop, plain, counting = loop_of(True), loop_of(False), loop_of(True)
    pods = [make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(200)]
    await store.upsert_pods(pods)
    records = await store.get_pods([p.metadata.uid for p in pods])
    assert len(records) == 200
    for rec in records.values():
        for each in (loop, plain, counting):
            each._enqueue(rec)
    for each in (loop, plain):
        await each._absorb("w0", BatchResult(outcomes=[], room=0))
        await each._absorb("w1", BatchResult(outcomes=[], room=30))
    assert len(plain._take("w0")[0]) == 100  # room or not: 200 over two workers
    assert loop._take("w0") == ([], False)
    first, _ = loop._take("w1")
    assert len(first) == 30  # its room, below the even share (200: the one worker with room)
    assert loop._take("w0") == ([], False)  # every figure says full, and w1's answer is on its way
    await loop._absorb("w1", BatchResult(outcomes=[], room=0), handed=30)
    second, _ = loop._take("w0")  # every partition full, no answer to wait for: evenly again
    assert len(second) == 85  # 170 over 2
    now[0] += ROOM_STALE_S / 2
    await loop._absorb("w1", BatchResult(outcomes=[], room=500))
    assert loop._take("w0") == ([], False)
    now[0] += ROOM_STALE_S  # w0's figure is old: pods may have ended there
    third, _ = loop._take("w0")
    assert len(third) == ROOM_PROBE == 16  # a look, not its share (85 over 2: 43)
    # A figure counts the worker's other batches out as taken: it may have answered before deciding them.
    assert [len(counting._take("w0")[0]) for _ in range(2)] == [100, 50]
    await counting._absorb("w0", BatchResult(outcomes=[], room=60), handed=100)
    assert len(counting._take("w0")[0]) == 10  # 60 less the 50 still out (the even share: 50 over 2, 25)
    # A figure with room that has grown old still caps the share (a look beyond it when small): at 8
    # workers in a full-shard burst answers come ~1 s apart, and the even share ignored the figure.
    aged = loop_of(True)
    for rec in records.values():
        aged._enqueue(rec)
    await aged._absorb("w0", BatchResult(outcomes=[], room=30))
    await aged._absorb("w1", BatchResult(outcomes=[], room=5))
    now[0] += ROOM_STALE_S * 2
    assert len(aged._take("w0")[0]) == 30  # its figure, not its share (200 over 2: 100)
    assert len(aged._take("w1")[0]) == ROOM_PROBE  # 5 then, and pods may have ended since: a look
    # A worker alone collides with no one: its even share, whatever room its answer said.
    alone = AgentLoop(
        store, workers[:1], LoopConfig(batch_size=256, inflight=2, room_shares=True), clock=lambda: now[0]
    )  # type: ignore[arg-type]
    for rec in records.values():
        alone._enqueue(rec)
    await alone._absorb("w0", BatchResult(outcomes=[], room=5))
    assert len(alone._take("w0")[0]) == 200  # the waiting pods in one batch, not 5


async def test_a_burst_read_in_pieces_leaves_a_slot_for_its_rest(store: Store) -> None:
    """The store takes a burst a few pods to a write, and the loop reads its first piece before the rest:
    that piece goes out in one batch, not split over every free slot (which left the rest of the
    burst waiting until a call was over, its pods bound); the rest goes out at once in the other."""
    worker = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), WorkerConfig())
    worker.name = "w0"  # type: ignore[attr-defined]
    loop = AgentLoop(store, [worker], LoopConfig(batch_size=256, inflight=2))  # type: ignore[arg-type]
    pods = [make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(214)]
    await store.upsert_pods(pods)
    records = await store.get_pods([p.metadata.uid for p in pods])
    for p in pods[:25]:
        loop._enqueue(records[p.metadata.uid])
    first, _ = loop._take("w0")
    assert len(first) == 25
    loop.shares.handed += 1  # as drive() counts it, until its answer
    for p in pods[25:]:
        loop._enqueue(records[p.metadata.uid])
    rest, _ = loop._take("w0")
    assert len(rest) == 189 and not set(rest) & set(first)


class HeldBinds(SimBindTarget):
    """The simulator's binding (a slow API server): the first ``hold`` calls (every call when None) held
    until released; ``waiting`` counts them, ``entered`` is set at the first."""

    def __init__(self, store: Store, hold: int | None = None) -> None:
        super().__init__(store)
        self.hold, self.waiting = hold, 0
        self.entered, self.release = asyncio.Event(), asyncio.Event()

    async def bind(self, bindings: Sequence[Binding]) -> list[Failure | None]:
        if self.hold is None or self.waiting < self.hold:
            self.waiting += 1
            self.entered.set()
            await self.release.wait()
        return await super().bind(bindings)


async def test_a_batchs_room_counts_the_batches_decided_while_it_was_binding(store: Store) -> None:
    """A worker answers with its partition's room as it stands when the answer goes: the loop takes
    that figure less the pods of the batches still out, so a batch decided while an earlier one was
    binding must be in the earlier one's figure (taken before its bind, it was not: the loop, hearing
    the late answer last, handed the partition 100+ pods beyond its room in ~1 full-shard run in 10)."""
    await store.upsert_nodes([node(f"n{i}", cpu="16") for i in range(8)])
    target = HeldBinds(store, hold=1)
    config = WorkerConfig(core=CoreConfig(worker=0, workers=2))
    worker = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), target, config)
    await worker.start()
    try:
        pods = [make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(12)]
        await store.upsert_pods(pods)
        records = await store.get_pods([p.metadata.uid for p in pods])
        batch = [records[p.metadata.uid] for p in pods]
        empty = partition_room(worker.columns, [r.request for r in batch], config.core)
        assert empty is not None and empty > 12
        first = asyncio.create_task(worker.schedule(batch[:5]))
        await asyncio.wait_for(target.entered.wait(), 10)  # the first batch is binding
        second = await asyncio.wait_for(worker.schedule(batch[5:]), 10)
        assert second.room == empty - 12
        target.release.set()
        late = await asyncio.wait_for(first, 10)
        assert late.committed == 5 and late.room == empty - 12  # not empty - 5: the second batch counts
    finally:
        target.release.set()
        await worker.stop()


async def test_the_rest_of_a_burst_goes_out_while_its_first_calls_are_binding(store: Store) -> None:
    """A burst reaches the loop in pieces: its first piece goes out alone, the next in a second call,
    and what is read after them in a third at once — not once the first call's pods are bound (the
    default demo, one worker: submit → bound p50 33.9 → 30.0 ms with three batches out, not two)."""
    await store.upsert_nodes([node(f"n{i}", cpu="64") for i in range(8)])
    target = HeldBinds(store)
    async with running_loop(store, target) as loop:
        try:  # a failure below leaves no bind held, so that the loop can stop
            pieces = [
                [make_pod(f"p{k}-{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(25)]
                for k in range(3)
            ]
            for k, piece in enumerate(pieces):
                await store.upsert_pods(piece)
                async with asyncio.timeout(10):
                    while target.waiting <= k:  # this piece's call is binding (held)
                        await asyncio.sleep(0.01)
            assert target.waiting == 3
            target.release.set()
            async with asyncio.timeout(20):
                while len(loop.bound) < 75:
                    await asyncio.sleep(0.02)
        finally:
            target.release.set()


class _LateInbox:
    """A worker reached through an inbox that takes ``delay`` seconds to deliver each call (as a busy
    worker's inbox does): the real worker, started late."""

    def __init__(self, worker: Worker, delay: float) -> None:
        self.worker, self.delay, self.name, self.alive = worker, delay, "w0", True

    async def restart(self) -> None:
        pass

    async def schedule(self, pods: list[Any], *args: Any) -> BatchResult:
        await asyncio.sleep(self.delay)
        return await self.worker.schedule(pods, *args)


async def test_the_wait_before_a_worker_starts_on_a_call_is_the_handoff_stage_not_the_reply(store: Store) -> None:
    """The call's round trip beyond the worker's own time is split where the worker says it started:
    an inbox 0.15 s late is in ``handoff``, and ``reply`` (the answer's way back) stays short."""
    await store.upsert_nodes([node("n1", cpu="64")])
    worker = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), WorkerConfig())
    await worker.start()
    loop = AgentLoop(store, [_LateInbox(worker, 0.15)], LoopConfig())  # type: ignore[list-item]
    await store.upsert_pods([make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(20)])
    stop = asyncio.Event()
    runner = asyncio.create_task(loop.run(stop))
    try:
        async with asyncio.timeout(20):
            while len(loop.bound) < 20:
                await asyncio.sleep(0.02)
    finally:
        stop.set()
        await runner
        await worker.stop()
    stages = loop.stats().stages
    handoff, reply = stages["handoff"], stages["reply"]
    assert handoff.pods == reply.pods >= 20
    assert handoff.seconds / handoff.pods >= 0.15
    assert reply.seconds / reply.pods < 0.05
