"""Hand-over: a worker whose pods have room only in another worker's partition of the nodes hands
them to that worker instead of placing them there (WorkerConfig.hand_over, the loop's HAND_OVERS).

Node names hash to partitions (crc32 mod 2): n0–n3 are worker 0's, n4–n7 worker 1's."""

from __future__ import annotations

import asyncio
import time
import zlib

import pytest

from agent_scheduler.core import CoreConfig
from agent_scheduler.loop import HAND_OVERS, AgentLoop, LoopConfig
from agent_scheduler.outcome import BatchResult, Outcome, OutcomeKind
from agent_scheduler.worker import Worker, WorkerConfig
from binder.commit import Binder
from cluster.model.core import Pod
from cluster.sim.cluster import SimBindTarget
from cluster.sim.pods import make_pod
from cluster.sim.trace import GPU_MILLI
from cluster.store.audit import audit
from cluster.store.records import PodRecord
from cluster.store.store import Store
from tests.builders import gpu_node, node

ZERO = ["n0", "n1", "n2", "n3"]
ONE = ["n4", "n5", "n6", "n7"]


def test_the_node_names_fall_in_the_partitions_the_tests_say() -> None:
    assert [zlib.crc32(n.encode()) % 2 for n in ZERO + ONE] == [0] * 4 + [1] * 4


async def workers(store: Store, *, hand_over: bool = True) -> list[Worker]:
    out = []
    for i in range(2):
        config = WorkerConfig(core=CoreConfig(worker=i, workers=2), seed=i, hand_over=hand_over)
        w = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), config)
        await w.start()
        w.name = f"w{i}"  # type: ignore[attr-defined]
        out.append(w)
    return out


async def records(store: Store, pods: list[Pod]) -> list[PodRecord]:
    await store.upsert_pods(pods)
    found = await store.get_pods([p.metadata.uid for p in pods])
    return [found[p.metadata.uid] for p in pods]


@pytest.mark.parametrize("hand_over", [True, False])
async def test_two_workers_do_not_meet_on_the_last_room_of_one_partition(store: Store, hand_over: bool) -> None:
    """Worker 0's partition is full; the last room of the shard (two pods' worth, on n4) is in worker
    1's. Both decide on the same view (their replicas stopped where they are: a worker yields once
    before it decides, to take a connection for its commits, so two in one event loop would not
    decide in the order called). Worker 0 hands its two pods over, and worker 1 fills the room with
    its own: no conflict. Without hand-over, worker 0 takes the room from the far end (the emptiest
    of worker 1's nodes: n4 is the only one with room), worker 1 meets it there, and its two commits
    are refused."""
    await store.upsert_nodes(
        [node(n, cpu="1") for n in ZERO] + [node("n4", cpu="4")] + [node(n, cpu="1") for n in ONE[1:]]
    )
    w0, w1 = await workers(store, hand_over=hand_over)
    try:
        mine = await records(
            store, [make_pod(f"a{i}", requests={"cpu": "2"}, scheduler="agent-scheduler") for i in range(2)]
        )
        theirs = await records(
            store, [make_pod(f"b{i}", requests={"cpu": "2"}, scheduler="agent-scheduler") for i in range(2)]
        )
        for w in (w0, w1):
            await w.stop()  # the view each decides on: the same, whatever the other commits
        first = await asyncio.wait_for(w0.schedule(mine), 10)
        second = await asyncio.wait_for(w1.schedule(theirs), 10)
    finally:
        for w in (w0, w1):
            await w.stop()
    kinds = [o.kind for o in first.outcomes], [o.kind for o in second.outcomes]
    if hand_over:
        assert kinds == ([OutcomeKind.HANDED_OVER] * 2, [OutcomeKind.BOUND] * 2)
        assert [(o.worker, o.node) for o in first.outcomes] == [(1, "n4"), (1, "n4")]
        assert first.committed == 0 and first.conflicts == second.conflicts == 0
    else:
        assert kinds == ([OutcomeKind.BOUND] * 2, [OutcomeKind.UNSCHEDULABLE] * 2)
        assert second.conflicts == 2
    assert await audit(store) == []


async def test_a_pod_handed_over_gives_its_room_back_and_one_kept_is_placed_where_it_fits(store: Store) -> None:
    """The worker's replica does not keep the room a handed-over pod was decided into (its next batch
    sees it free); a pod the loop says was handed over already (``keep``) is placed there."""
    await store.upsert_nodes([node(n, cpu="1") for n in ZERO] + [node(n, cpu="8") for n in ONE])
    w0, w1 = await workers(store)
    try:
        batch = await records(
            store, [make_pod(f"p{i}", requests={"cpu": "2"}, scheduler="agent-scheduler") for i in range(6)]
        )
        free = w0.columns.free().sum()
        handed = await asyncio.wait_for(w0.schedule(batch[:3]), 10)
        assert [o.kind for o in handed.outcomes] == [OutcomeKind.HANDED_OVER] * 3
        assert {o.worker for o in handed.outcomes} == {1} and {o.node for o in handed.outcomes} <= set(ONE)
        assert w0.columns.free().sum() == free
        kept = await asyncio.wait_for(w0.schedule(batch[3:], keep=[r.uid for r in batch[3:]]), 10)
        assert [o.kind for o in kept.outcomes] == [OutcomeKind.BOUND] * 3 and {o.node for o in kept.outcomes} <= set(
            ONE
        )
    finally:
        for w in (w0, w1):
            await w.stop()


async def test_the_loop_hands_a_pod_to_the_worker_with_room(store: Store) -> None:
    """Pods that fit only on worker 1's partition, split over both workers: worker 0's are handed to
    worker 1, which binds them all; no commit is refused."""
    await store.upsert_nodes([node(n, cpu="1") for n in ZERO] + [node(n, cpu="64") for n in ONE])
    pool = await workers(store)
    loop = AgentLoop(store, pool, LoopConfig(batch_size=16, inflight=2))  # type: ignore[arg-type]
    stop = asyncio.Event()
    runner = asyncio.create_task(loop.run(stop))
    try:
        await store.upsert_pods(
            [make_pod(f"p{i}", requests={"cpu": "2"}, scheduler="agent-scheduler") for i in range(60)]
        )
        deadline = time.monotonic() + 20
        while len(loop.bound) < 60:
            assert time.monotonic() < deadline, len(loop.bound)
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await runner
        for w in pool:
            await w.stop()
    assert set(loop.bound.values()) <= set(ONE)
    assert loop.totals["handed_over"] > 0 and loop.totals["conflicts"] == 0
    assert loop.stats().handed_over == loop.totals["handed_over"]
    assert await audit(store) == []


async def test_a_pod_is_handed_over_at_most_twice_in_a_row_and_never_to_a_dead_worker(store: Store) -> None:
    """The loop's count: a pod handed from worker 0 to 1 and back (HAND_OVERS times) is then placed by
    the worker it reaches wherever it fits; one handed to a worker being restarted, or that failed,
    is anyone's."""
    assert HAND_OVERS == 2
    await store.upsert_nodes([node(n, cpu="1") for n in ZERO] + [node(n, cpu="8") for n in ONE])
    pool = await workers(store)
    loop = AgentLoop(store, pool, LoopConfig(batch_size=16, inflight=2))  # type: ignore[arg-type]
    try:
        [rec, other] = await records(
            store, [make_pod(u, requests={"cpu": "2"}, scheduler="agent-scheduler") for u in "qr"]
        )
        loop._enqueue(rec)
        assert loop._take("w0")[0] == [rec.uid]
        await loop._absorb("w0", BatchResult(outcomes=[handed(rec, 1)]), handed=1)
        assert loop._take("w0")[0] == [] and loop._take("w1")[0] == [rec.uid]
        await loop._absorb("w1", BatchResult(outcomes=[handed(rec, 0)]), handed=1)
        assert loop._take("w1")[0] == [] and loop._take("w0")[0] == [rec.uid]
        assert await asyncio.wait_for(loop._hand(pool[0], [rec.uid]), 10)  # with leave to place it anywhere
        assert loop.bound[rec.uid] in ONE and loop.totals["handed_over"] == 2
        loop._enqueue(other)
        assert loop._take("w1")[0] == [other.uid]
        restarting = loop._restarting.setdefault("w0", asyncio.Lock())
        await restarting.acquire()  # w0's actor died and is being started again
        await loop._absorb("w1", BatchResult(outcomes=[handed(other, 0)]), handed=1)
        assert loop.queue.held_for("w0") == 0 and loop._take("w1")[0] == [other.uid]
        restarting.release()
        loop.failed_workers.append("w0")  # it could not be
        await loop._absorb("w1", BatchResult(outcomes=[handed(other, 0)]), handed=1)
        assert loop.queue.held_for("w0") == 0 and loop._take("w1")[0] == [other.uid]
    finally:
        for w in pool:
            await w.stop()


def handed(rec: PodRecord, worker: int) -> Outcome:
    """A worker's answer for a pod it handed over to ``worker``."""
    return Outcome(uid=rec.uid, kind=OutcomeKind.HANDED_OVER, node=ONE[0] if worker else ZERO[0], worker=worker)


async def test_a_gpu_share_handed_over_gives_its_card_back(store: Store) -> None:
    """A pod taking a share of a GPU card: handed over, the card's room is back on the replica (the
    core took the share on the card as it decided)."""
    cards = {"nvidia.com/gpu": 2, GPU_MILLI: 2000}
    await store.upsert_nodes([node(n, cpu="8") for n in ZERO] + [gpu_node(n, allocatable=cards) for n in ONE])
    w0, w1 = await workers(store)
    try:
        [share] = await records(
            store, [make_pod("s", requests={"cpu": "1", GPU_MILLI: 600}, scheduler="agent-scheduler")]
        )
        before = w0.columns.allocated.copy()
        result = await asyncio.wait_for(w0.schedule([share]), 10)
        assert [(o.kind, o.worker) for o in result.outcomes] == [(OutcomeKind.HANDED_OVER, 1)]
        assert (w0.columns.allocated[:, : len(w0.columns)] == before[:, : len(w0.columns)]).all()
        placed = await asyncio.wait_for(w1.schedule([share]), 10)
        assert [o.kind for o in placed.outcomes] == [OutcomeKind.BOUND]
    finally:
        for w in (w0, w1):
            await w.stop()
    assert await audit(store) == []
