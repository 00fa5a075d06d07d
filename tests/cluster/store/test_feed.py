"""The change feed and the informer: deltas in order, and a re-list when trimmed past."""

from __future__ import annotations

import asyncio

import pytest

from cluster.nodeview.table import NodeTable
from cluster.store.feed import FeedReader, FeedTrimmed, Informer
from cluster.store.keys import Kind
from cluster.store.store import Store
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
