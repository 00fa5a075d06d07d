"""The change feed and the informer: deltas in order, and a re-list when trimmed past."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from binder.commit import Binder
from binder.results import Committed, Placement
from cluster.nodeview.table import NodeTable
from cluster.runtime.redis_server import RedisServer
from cluster.store.client import STORE_DOWN, connect
from cluster.store.feed import FeedReader, FeedTrimmed, StoreReset
from cluster.store.informer import Informer
from cluster.store.keys import Keys, Kind
from cluster.store.records import Update
from cluster.store.store import PODS_PER_CALL, Own, Store
from tests.builders import node, pod


async def test_every_write_is_one_entry_with_consecutive_versions(store: Store) -> None:
    reader = FeedReader(store, 0)
    await store.upsert_nodes([node("n1"), node("n2")])
    await store.upsert_pods([pod("a", node="n1", phase="Running")])
    await store.delete_pods(["uid-a"])
    changes = await reader.read(block_ms=None)
    assert reader.position == await store.version() == 4
    assert [(c.kind, c.name, c.deleted) for c in changes] == [
        (Kind.NODE, "n1", False),
        (Kind.NODE, "n2", False),
        (Kind.POD, "uid-a", False),
        (Kind.NODE, "n1", False),
        (Kind.NODE, "n1", False),
        (Kind.POD, "uid-a", True),
    ]


async def test_a_feed_line_of_a_kind_no_reader_knows_is_refused_with_the_kind_named(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    epoch, version = await store.head()
    await store.client.xadd(store.keys.feed, {"c": "node:n1\n-widget:w1", "e": epoch}, id=f"{version + 1}-0")
    reader = FeedReader(store, version, epoch)
    with pytest.raises(ValueError, match=r"feed entry 2: kind '-widget'"):
        await reader.read(block_ms=None)


async def test_a_reader_behind_a_trimmed_feed_is_told(store: Store) -> None:
    await store.upsert_nodes([node(f"n{i}") for i in range(5)])
    await store.client.xtrim(store.keys.feed, maxlen=2, approximate=False)
    reader = FeedReader(store, 1)
    with pytest.raises(FeedTrimmed):
        await reader.read(block_ms=None)


async def test_informer_lists_then_follows_and_relists_after_a_trim(store: Store) -> None:
    await store.upsert_nodes([node("n1"), node("n2")])
    informer = Informer(store, [Kind.NODE], block_ms=100)
    updates = informer.updates()
    columns = NodeTable()
    first = await anext(updates)
    assert first.full and set(first.nodes) == {"n1", "n2"}
    columns.apply(first)
    await store.upsert_pods([pod("a", cpu="3", node="n2", phase="Running")])
    delta = await anext(updates)
    assert not delta.full and list(delta.nodes) == ["n2"]
    columns.apply(delta)
    assert columns.allocated[0, columns.index["n2"]] == 3000
    # Trim the feed past the informer while it is not reading, then change things.
    await store.upsert_nodes([node(f"m{i}") for i in range(10)])
    await store.delete_nodes(["n1"])
    await store.client.xtrim(store.keys.feed, maxlen=1, approximate=False)
    await store.client.xadd(store.keys.feed, {"c": "node:x"}, id=f"{await store.client.incr(store.keys.rv)}-0")
    relisted = await anext(updates)
    assert relisted.full and informer.relists == 1
    columns.apply(relisted)
    assert sorted(columns.names) == sorted(["n2"] + [f"m{i}" for i in range(10)])
    informer.stop()
    await updates.aclose()


@pytest.mark.parametrize("settle_s, at_most", [(0.0, None), (0.3, 2)])
async def test_a_settling_informer_reads_a_busy_feed_in_few_steps(
    store: Store, settle_s: float, at_most: int | None
) -> None:
    """Changes written while the informer settles after a read come in one update, not one each."""
    informer = Informer(store, [Kind.POD], block_ms=50, settle_s=settle_s)
    updates = informer.updates()
    await anext(updates)  # the listing
    seen: list[set[str]] = []

    async def follow() -> None:
        async for update in updates:
            seen.append(set(update.pods))

    task = asyncio.create_task(follow())
    try:
        pods = [pod(f"p{i}") for i in range(6)]
        for p in pods:
            await store.upsert_pods([p])
            await asyncio.sleep(0.03)
        async with asyncio.timeout(10):
            while set().union(*seen) != {p.uid for p in pods}:
                await asyncio.sleep(0.01)
    finally:
        informer.stop()
        await task
    if at_most is None:
        assert len(seen) >= 3  # without settling, about one read per write
    else:
        assert len(seen) <= at_most


async def test_a_settling_informer_catches_up_when_its_consumer_asks(store: Store) -> None:
    """The batch scheduler settles its reads for 0.1 s and asks, before each session, for every change
    made until then: it is read and taken at once, not after the settle, and the settle goes on after."""
    informer = Informer(store, [Kind.POD], block_ms=50, settle_s=30.0)
    updates = informer.updates()
    await anext(updates)  # the listing
    held: set[str] = set()

    async def follow() -> None:
        async for update in updates:
            held.update(update.pods)

    task = asyncio.create_task(follow())
    try:
        await store.upsert_pods([pod("first")])
        await asyncio.sleep(0.3)  # read at once (a 50-ms block): the informer settles after it
        assert held == set()
        await store.upsert_pods([pod("second"), pod("third")])
        assert await informer.caught_up(timeout_s=5.0)
        assert held == {"uid-first", "uid-second", "uid-third"}
        assert informer.taken == await store.version()
        await store.upsert_pods([pod("fourth")])  # nobody asks: it waits for the settle
        await asyncio.sleep(0.3)
        assert "uid-fourth" not in held
        assert await informer.caught_up(timeout_s=5.0)
        assert "uid-fourth" in held
    finally:
        informer.stop()
        await task


async def test_a_consumer_that_stops_taking_updates_is_not_waited_for_past_the_timeout(store: Store) -> None:
    informer = Informer(store, [Kind.POD], block_ms=50, settle_s=0.0)
    updates = informer.updates()
    await anext(updates)  # the listing, and nobody asks for more
    await store.upsert_pods([pod("a")])
    assert not await informer.caught_up(timeout_s=0.2)
    informer.stop()
    await updates.aclose()


async def test_a_reader_learns_that_the_store_was_emptied_under_it(store: Store) -> None:
    """Redis lost its data (restarted without persistence, a FLUSHALL): the reader's position
    belongs to a store that is gone; its new entries would never reach it. It is told."""
    await store.upsert_nodes([node(f"n{i}") for i in range(5)])
    epoch, version = await store.head()
    assert epoch and version == 5
    reader = FeedReader(store, version, epoch)
    assert await reader.read(block_ms=None) == []  # same store: nothing new, no alarm
    await store.client.delete(*await store.client.keys(store.keys.prefix + "*"))
    with pytest.raises(StoreReset):
        await reader.read(block_ms=None)
    # Rebuilt past the old position before the reader looked: the entries' epoch tells.
    await store.upsert_nodes([node(f"m{i}") for i in range(7)])
    assert (await store.head())[1] > version
    with pytest.raises(StoreReset):
        await FeedReader(store, version, epoch).read(block_ms=None)


async def test_a_new_epoch_or_versions_going_back_send_readers_to_list_again(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    epoch, version = await store.head()
    reader = FeedReader(store, version, epoch)
    assert await store.new_epoch() != epoch
    with pytest.raises(StoreReset):
        await reader.read(block_ms=None)
    # Same epoch, but the store came back from an older copy: its version is behind the reader.
    epoch, version = await store.head()
    await store.client.set(store.keys.rv, version - 1)
    with pytest.raises(StoreReset):
        await FeedReader(store, version, epoch).read(block_ms=None)


async def test_a_reader_that_listed_an_empty_store_takes_its_first_epoch(store: Store) -> None:
    epoch, version = await store.head()
    assert (epoch, version) == ("", 0)
    reader = FeedReader(store, version, epoch)
    await store.upsert_nodes([node("n1")])
    assert [c.name for c in await reader.read(block_ms=None)] == ["n1"]
    assert reader.epoch == (await store.head())[0] != ""


async def test_the_informer_outlives_redis_restarting_empty_and_lists_the_new_store() -> None:
    """Redis killed while an informer follows it, and started again a second later without its
    data: the informer does not end or hang; its next update is a listing of the new store."""
    with RedisServer() as server:
        client = connect(server.url)
        store = Store(client, Keys("restart"))
        await store.upsert_nodes([node("old-1"), node("old-2")])
        informer = Informer(store, [Kind.NODE], block_ms=100)
        seen: list[Update] = []

        async def follow() -> None:
            async for update in informer.updates():
                seen.append(update)

        task = asyncio.create_task(follow())
        try:
            async with asyncio.timeout(10):
                while not seen:
                    await asyncio.sleep(0.05)
            assert set(seen[0].nodes) == {"old-1", "old-2"}
            server.kill()
            await asyncio.sleep(1.0)  # the informer reads, and fails, meanwhile
            server.start_again(keep_data=False)
            async with asyncio.timeout(30):
                while True:
                    with contextlib.suppress(*STORE_DOWN):
                        await store.upsert_nodes([node("new-1")])
                        break
                    await asyncio.sleep(0.1)
                while not (seen[-1].full and set(seen[-1].nodes) == {"new-1"}):
                    assert not task.done(), task.exception()
                    await asyncio.sleep(0.05)
            assert seen[-1].epoch != seen[0].epoch
        finally:
            informer.stop()
            await task
            await client.aclose()


async def _hgetalls(store: Store) -> int:
    stats = await store.client.info("commandstats")
    return int(stats.get("cmdstat_hgetall", {}).get("calls", 0))


async def test_pods_written_as_observed_come_with_the_read_not_fetched_after_it(store: Store) -> None:
    """A burst's pods reach a reader in its read of the feed: records equal to what a fetch gives, and
    no fetch made. A pod created and committed within one read comes as the commit left it; one
    deleted is gone."""
    await store.upsert_nodes([node("n1", cpu="8")])
    informer = Informer(store, [Kind.POD], block_ms=100)
    updates = informer.updates()
    assert (await anext(updates)).full
    burst = [pod(f"p{i}", cpu="1") for i in range(60)]  # three writes of the store
    await store.upsert_pods(burst)
    before = await _hgetalls(store)
    update = await anext(updates)
    assert await _hgetalls(store) == before  # nothing fetched
    uids = [p.uid for p in burst]
    fetched = await store.get_pods(uids)
    assert len(update.pods) == 60 and update.pods == fetched
    assert update.written and all(update.written[u] > 0 for u in uids)

    await store.upsert_pods([pod("late", cpu="1")])
    record = (await store.get_pods(["uid-late"]))["uid-late"]
    binder = Binder(store.client, store.keys, "default-scheduler")
    version = (await store.get_nodes(["n1"]))["n1"].version
    placed = Placement(uid="uid-late", node="n1", request=record.request, version=version)
    assert isinstance((await binder.commit([placed]))[0], Committed)
    await store.delete_pods([uids[0]])
    update = await anext(updates)
    late = update.pods["uid-late"]
    assert late is not None and late.node == "n1"  # the commit's state, not the creation's carried one
    assert late == (await store.get_pods(["uid-late"]))["uid-late"]
    assert update.pods[uids[0]] is None


async def _commit(store: Store, uids: list[str], node_name: str = "n1") -> None:
    binder = Binder(store.client, store.keys, "default-scheduler")
    records = await store.get_pods(uids)
    version = (await store.get_nodes([node_name]))[node_name].version
    placements = [Placement(uid=u, node=node_name, request=records[u].request, version=version) for u in uids]
    results = await binder.commit(placements)
    assert all(isinstance(r, Committed) for r in results), [r for r in results if not isinstance(r, Committed)]


async def test_a_commit_carries_its_change_and_a_reader_holding_the_pending_pods_fetches_none(
    store: Store,
) -> None:
    """The binder's commit carries what it changed (binding, accounted node, cards, version): an
    informer that holds the pods as pending — from a burst's carried records, or its listing — makes
    the bound records from them, equal to a fetch, without fetching. After a write that carries nothing
    (a release), the change is not of the record held: that pod is fetched."""
    await store.upsert_nodes([node("n1", cpu="64", memory="256Gi")])
    await store.upsert_pods([pod("listed", cpu="1")])
    informer = Informer(store, [Kind.POD], block_ms=100)
    updates = informer.updates()
    assert (await anext(updates)).full
    burst = [pod(f"p{i}", cpu="1") for i in range(40)]
    await store.upsert_pods(burst)
    assert len((await anext(updates)).pods) == 40
    uids = ["uid-listed", *(p.uid for p in burst)]
    await _commit(store, uids)
    before = await _hgetalls(store)
    update = await anext(updates)
    assert await _hgetalls(store) == before  # nothing fetched
    assert update.pods == await store.get_pods(uids)
    assert all(r is not None and r.node == "n1" and r.accounted == "n1" for r in update.pods.values())

    # Released (pending again, carried nothing), then committed again before the reader read either.
    binder = Binder(store.client, store.keys, "default-scheduler")
    await store.upsert_pods([pod("again", cpu="1")])
    assert "uid-again" in (await anext(updates)).pods
    await _commit(store, ["uid-again"])
    assert await binder.release(["uid-again"]) == [True]
    await _commit(store, ["uid-again"])
    before = await _hgetalls(store)
    update = await anext(updates)
    assert await _hgetalls(store) == before + 1  # the one pod fetched
    assert update.pods == await store.get_pods(["uid-again"])
    assert update.pods["uid-again"] is not None and update.pods["uid-again"].node == "n1"


async def test_pods_created_and_committed_within_one_read_come_as_committed_without_a_fetch(
    store: Store,
) -> None:
    """A reader that reads a burst's creation and its commit at once (behind by both) puts the commit's
    change on the creation's record — and the kubelets' report of its start, read with them, on that;
    nothing is fetched. A pod released and committed again in the same read (the release carries
    nothing) is fetched."""
    await store.upsert_nodes([node("n1", cpu="64", memory="256Gi")])
    for started in (False, True):
        reader = FeedReader(store, await store.version())
        burst = [pod(f"{'s' if started else 'p'}{i}", cpu="1") for i in range(30)]
        await store.upsert_pods(burst)
        uids = [p.uid for p in burst]
        await _commit(store, uids)
        if started:
            await store.set_phases((await store.get_pods(uids)).values(), "Running")
        changes = [c for c in await reader.read(block_ms=None) if c.kind is Kind.POD]
        before = await _hgetalls(store)
        update = await Informer(store, [Kind.POD]).fetch(reader.position, reader.epoch, changes, reader.carried)
        assert await _hgetalls(store) == before
        assert update.pods == await store.get_pods(uids)
        assert all(r is not None and r.phase == ("Running" if started else "Pending") for r in update.pods.values())

    await store.upsert_pods([pod("again", cpu="1")])
    await _commit(store, ["uid-again"])
    assert await Binder(store.client, store.keys, "default-scheduler").release(["uid-again"]) == [True]
    await _commit(store, ["uid-again"])
    changes = [c for c in await reader.read(block_ms=None) if c.kind is Kind.POD]
    before = await _hgetalls(store)
    update = await Informer(store, [Kind.POD]).fetch(reader.position, reader.epoch, changes, reader.carried)
    assert await _hgetalls(store) == before + 1
    assert update.pods == await store.get_pods(["uid-again"])


async def test_an_informer_holds_only_the_newest_pending_pods(store: Store) -> None:
    """The pending pods an informer holds for the commits' changes are bounded (``keep_pending``): the
    oldest, beyond it, are fetched when committed, and come the same."""
    await store.upsert_nodes([node("n1", cpu="64", memory="256Gi")])
    informer = Informer(store, [Kind.POD], block_ms=100, keep_pending=5)
    updates = informer.updates()
    assert (await anext(updates)).full
    burst = [pod(f"p{i}", cpu="1") for i in range(12)]
    for p in burst:  # one entry each: the informer reads them in order
        await store.upsert_pods([p])
    seen: set[str] = set()
    while len(seen) < 12:
        seen |= set((await anext(updates)).pods)
    uids = [p.uid for p in burst]
    await _commit(store, uids)
    before = await _hgetalls(store)
    update = await anext(updates)
    assert await _hgetalls(store) == before + 7
    assert update.pods == await store.get_pods(uids)


async def test_a_reader_further_behind_than_the_carried_records_fetches_them(store: Store) -> None:
    """The records an entry carries are kept for the last few hundred entries: a reader further behind
    fetches the pods of the older ones instead, and has the same records."""
    start = await store.version()
    for i in range(600):  # more entries than `recent` keeps
        await store.upsert_pods([pod(f"p{i}", cpu="1")])
    assert await store.client.xlen(store.keys.recent) < 600
    reader = FeedReader(store, start)
    changes = await reader.read(block_ms=None, count=1000)
    assert len(changes) == 600 and "uid-p0" not in reader.carried  # its entry is no longer in `recent`
    assert "uid-p599" in reader.carried and len(reader.carried) < 600
    update = await Informer(store, [Kind.POD]).fetch(reader.position, reader.epoch, changes, reader.carried)
    assert update.pods == await store.get_pods([f"uid-p{i}" for i in range(600)])
    # A reader that is current gets them carried.
    await store.upsert_pods([pod("new", cpu="1")])
    await reader.read(block_ms=None)
    assert set(reader.carried) == {"uid-new"}


async def test_a_reader_of_nodes_leaves_the_pod_records_in_the_store(store: Store) -> None:
    """A reader of other kinds (a worker's node replica, the sharding controller) does not take the pod
    records an entry carries (a burst's, decoded for nothing at every worker): it reads only the feed."""
    informer = Informer(store, [Kind.NODE], block_ms=100)
    updates = informer.updates()
    assert (await anext(updates)).full
    await store.upsert_nodes([node("n1", cpu="8")])
    await store.upsert_pods([pod(f"p{i}", cpu="1", node="n1", phase="Running") for i in range(30)])
    update = await anext(updates)
    assert set(update.nodes) == {"n1"} and not update.pods
    readers = FeedReader(store, 0, records=False), FeedReader(store, 0)
    for reader in readers:
        await reader.read(block_ms=None)
    assert not readers[0].carried and len(readers[1].carried) == 30


async def test_a_kubelets_report_carries_its_change_and_a_reader_holding_the_bound_pods_fetches_none(
    store: Store,
) -> None:
    """The kubelets' report of a phase (``set_phases``) carries the change, not the record: an informer
    that holds the pods bound and not started makes the started records from them, equal to a fetch,
    without fetching — read after the commit, or with it in one read."""
    await store.upsert_nodes([node("n1", cpu="64", memory="256Gi")])
    informer = Informer(store, [Kind.POD], block_ms=100)
    updates = informer.updates()
    assert (await anext(updates)).full
    for start in ("after the commit was read", "with the commit in one read"):
        burst = [pod(f"{start[:4]}{i}", cpu="1") for i in range(30)]
        await store.upsert_pods(burst)
        uids = [p.uid for p in burst]
        assert len((await anext(updates)).pods) == 30
        await _commit(store, uids)
        if start == "after the commit was read":
            assert all(r is not None and r.node for r in (await anext(updates)).pods.values())
        await store.set_phases((await store.get_pods(uids)).values(), "Running")
        before = await _hgetalls(store)
        update = await anext(updates)
        assert await _hgetalls(store) == before, start  # nothing fetched
        assert update.pods == await store.get_pods(uids), start
        assert all(
            r is not None and r.phase == "Running" and r.pod.status.phase == "Running" for r in update.pods.values()
        )


async def test_a_reader_of_nodes_applies_the_accounting_writes_carry_and_fetches_only_nodes_rewritten(
    store: Store,
) -> None:
    """Every write that accounts pods on nodes (a commit, a pod arriving bound, a deletion) carries each
    node's version before it and the amounts used after it: a reader of nodes makes the new records
    from the nodes it holds, equal to a fetch, fetching none — two writes of one node in one read
    merged. A node written otherwise in the same read (its owner, its spec) is fetched, and so is one
    the reader does not hold at the carried change's base (a write that carried nothing came between)."""
    await store.upsert_nodes([node(f"n{i}", cpu="64", memory="256Gi") for i in range(3)])
    informer = Informer(store, [Kind.NODE], block_ms=100)
    updates = informer.updates()
    assert len((await anext(updates)).nodes) == 3
    await store.upsert_pods([pod(f"p{i}", cpu="1") for i in range(20)])
    await _commit(store, [f"uid-p{i}" for i in range(10)], "n0")
    await _commit(store, [f"uid-p{i}" for i in range(10, 20)], "n1")
    await store.upsert_pods([pod("other", cpu="2", scheduler="default-scheduler", node="n1", phase="Running")])
    await store.delete_pods(["uid-p0"])
    before = await _hgetalls(store)
    update = await anext(updates)
    assert await _hgetalls(store) == before  # nothing fetched
    assert set(update.nodes) == {"n0", "n1"}
    assert update.nodes == await store.get_nodes(["n0", "n1"])
    assert update.nodes["n1"] is not None and update.nodes["n1"].allocated["cpu"] == 12_000

    # n0's owner set, then a pod committed on it, in one read: n0 is fetched, as the store has it.
    await store.write([Own("n0", "agent")])
    await store.upsert_pods([pod("late", cpu="1")])
    await _commit(store, ["uid-late"], "n0")
    before = await _hgetalls(store)
    update = await anext(updates)
    assert await _hgetalls(store) == before + 1
    assert update.nodes == await store.get_nodes(["n0"])

    await store.write([Own("n2", "agent")])  # carries nothing, and the reader below starts after it ...
    reader = FeedReader(store, await store.version(), nodes=True)
    await store.upsert_pods([pod("last", cpu="1")])
    await _commit(store, ["uid-last"], "n2")  # ... so this change is not of the n2 it holds
    changes = [c for c in await reader.read(block_ms=None) if c.kind is Kind.NODE]
    before = await _hgetalls(store)
    fetched = await informer.fetch(reader.position, reader.epoch, changes, None, reader.carried_nodes)
    assert await _hgetalls(store) == before + 1
    assert fetched.nodes == await store.get_nodes(["n2"])
    informer.stop()


async def test_a_reader_woken_from_its_wait_takes_what_the_write_carried_and_fetches_nothing(store: Store) -> None:
    """A read that waited for the feed (XREAD BLOCK) is answered, by Redis before 7.2, with the first
    stream the waking write added to — the feed alone: the reader reads the carried streams after it
    rather than fetch every pod and node the write changed (a burst created, then committed)."""
    await store.upsert_nodes([node("n1", cpu="64", memory="256Gi")])
    informer = Informer(store, [Kind.POD, Kind.NODE], block_ms=5000)
    updates = informer.updates()
    assert (await anext(updates)).full
    burst = [pod(f"p{i}", cpu="1") for i in range(PODS_PER_CALL)]  # one write
    uids = [p.uid for p in burst]

    async def woken_by(write: Any) -> Update:
        waiting = asyncio.ensure_future(anext(updates))
        await asyncio.sleep(0.3)  # the informer waits in its read
        assert not waiting.done()
        before = await _hgetalls(store)
        await write
        update = await asyncio.wait_for(waiting, 5)
        assert await _hgetalls(store) == before  # nothing fetched
        return update

    update = await woken_by(store.upsert_pods(burst))
    assert update.pods == await store.get_pods(uids)
    records, n1 = await store.get_pods(uids), (await store.get_nodes(["n1"]))["n1"]
    placements = [Placement(uid=u, node="n1", request=records[u].request, version=n1.version) for u in uids]
    update = await woken_by(Binder(store.client, store.keys, "default-scheduler").commit(placements))
    assert update.pods == await store.get_pods(uids) and update.nodes == await store.get_nodes(["n1"])
    informer.stop()


async def test_a_reader_of_nodes_alone_sleeps_through_writes_of_pods_alone(store: Store) -> None:
    """A replica of the nodes (each agent worker's, the sharding controller's) waits for a write that
    changes a node — its spec or owner written, or pods accounted on it —, not for one that changes
    pods alone (a burst created, a pod started): those come with its next read."""
    await store.upsert_nodes([node("n1", cpu="64", memory="256Gi")])
    informer = Informer(store, [Kind.NODE], block_ms=5000)
    updates = informer.updates()
    assert (await anext(updates)).full
    for burst in ("rewritten", "accounted"):
        waiting = asyncio.ensure_future(anext(updates))
        await asyncio.sleep(0.2)  # the informer waits in its read
        taken = informer.taken
        await store.upsert_pods([pod(f"{burst}{i}", cpu="1") for i in range(3)])
        await asyncio.sleep(0.5)
        assert not waiting.done() and informer.taken == taken, burst  # not woken: the feed not read
        if burst == "rewritten":  # a node's spec written: the write carries no accounting
            await store.upsert_nodes([node("n2")])
            changed = ["n2"]
        else:  # pods committed to a node
            await _commit(store, [f"uid-{burst}0"], "n1")
            changed = ["n1"]
        update = await asyncio.wait_for(waiting, 2)
        assert update.nodes == await store.get_nodes(changed) and update.version == await store.version(), burst
    informer.stop()


async def test_a_reader_of_nodes_alone_whose_read_brought_pods_alone_waits_for_a_node(store: Store) -> None:
    """A replica of the nodes whose last read brought pods alone (a burst's creations, read while
    the worker decided) waits for a node's change before it reads again, rather than take the pods
    written meanwhile at once and wake its process for nothing; the node's change brings them."""
    await store.upsert_nodes([node("n1", cpu="64", memory="256Gi")])
    reader = FeedReader(store, await store.version(), records=False, nodes=True, wake_on_nodes=True)
    await store.upsert_pods([pod("a", cpu="1")])
    assert [c.name for c in await asyncio.wait_for(reader.read(block_ms=5000), 2)] == ["uid-a"]
    await store.upsert_pods([pod("b", cpu="1")])  # written while the reader was busy
    reading = asyncio.ensure_future(reader.read(block_ms=5000))
    await asyncio.sleep(0.5)
    assert not reading.done()
    await _commit(store, ["uid-a"], "n1")
    changes = await asyncio.wait_for(reading, 2)
    assert (changes[0].kind, changes[0].name) == (Kind.POD, "uid-b")  # then the commit's: the pod and its node
    assert {(c.kind, c.name) for c in changes[1:]} == {(Kind.POD, "uid-a"), (Kind.NODE, "n1")}
    assert reader.position == await store.version()
    await reader.close()


async def test_a_reader_woken_by_pods_sleeps_through_deletions_and_reads_them_when_a_pod_is_written(
    store: Store,
) -> None:
    """The agent loop's reader (``wake_on_pods``) is woken by writes that carry a pod — created, updated,
    committed, started —, not by deletions (the simulated kubelets' ends, most of a busy feed), which
    come with its next read; and a read after one that brought deletions alone waits so at once."""
    await store.upsert_nodes([node("n1", cpu="64", memory="256Gi")])
    await store.upsert_pods([pod(name, cpu="1") for name in ("a", "b", "c")])
    informer = Informer(store, [Kind.POD], block_ms=5000, wake_on_pods=True)
    updates = informer.updates()
    assert (await anext(updates)).full
    await store.delete_pods(["uid-a"])  # while the consumer is busy: taken at once, as before
    assert (await asyncio.wait_for(anext(updates), 2)).pods == {"uid-a": None}
    waiting = asyncio.ensure_future(anext(updates))
    await asyncio.sleep(0.2)
    await store.delete_pods(["uid-b"])
    await asyncio.sleep(0.5)
    assert not waiting.done()  # not woken by a deletion
    await _commit(store, ["uid-c"], "n1")
    update = await asyncio.wait_for(waiting, 2)
    assert update.pods == {"uid-b": None, **(await store.get_pods(["uid-c"]))}
    informer.stop()


async def test_a_reader_of_nodes_alone_reads_the_pods_written_when_its_wait_ends(store: Store) -> None:
    """Not woken by writes of pods alone, a reader of nodes still reads past them when its wait ends, so
    that it keeps up with the feed (which is trimmed behind its readers) through a long quiet spell of
    its nodes."""
    await store.upsert_nodes([node("n1")])
    reader = FeedReader(store, await store.version(), records=False, nodes=True, wake_on_nodes=True)
    reading = asyncio.ensure_future(reader.read(block_ms=800))
    await asyncio.sleep(0.2)
    await store.upsert_pods([pod("a")])
    await asyncio.sleep(0.3)
    assert not reading.done()
    changes = await asyncio.wait_for(reading, 2)
    assert [(c.kind, c.name) for c in changes] == [(Kind.POD, "uid-a")]
    assert reader.position == await store.version()
    await reader.close()
