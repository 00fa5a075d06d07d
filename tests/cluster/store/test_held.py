"""A connection held for one reader's blocking reads: the feed read through it over either protocol,
failures and cancels dropping it, the next call taking another."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cluster.runtime.redis_server import RedisServer
from cluster.store.client import STORE_DOWN, connect
from cluster.store.feed import FeedReader, stream_entries
from cluster.store.held import HeldConnection
from cluster.store.keys import Keys, Kind
from cluster.store.store import Store
from tests.builders import node, pod


@pytest.mark.parametrize("protocol", [2, 3])
async def test_the_feed_read_through_a_held_connection_over_either_protocol(
    redis_server: RedisServer, keys: Keys, protocol: int
) -> None:
    """RESP2 gives an XREAD's streams as a list, RESP3 as a map: the reader takes both, the carried
    records with the changes."""
    client = connect(f"{redis_server.url}?protocol={protocol}")
    try:
        store = Store(client, keys)
        reader = FeedReader(store, 0)
        await store.upsert_nodes([node("n1")])
        await store.upsert_pods([pod("a", node="n1", phase="Running"), pod("b")])
        changes = await reader.read(block_ms=None)
        assert [(c.kind, c.name) for c in changes] == [
            (Kind.NODE, "n1"),
            (Kind.POD, "uid-a"),
            (Kind.NODE, "n1"),
            (Kind.POD, "uid-b"),
        ]
        assert set(reader.carried) == {"uid-a", "uid-b"}
        assert reader.position == await store.version()
        await reader.close()
    finally:
        await client.aclose()


def test_stream_entries_take_either_protocols_reply() -> None:
    fields = [b"c", b"pod:x", b"t", b"1"]
    resp2 = [[b"feed", [[b"7-0", fields]]], [b"recent", [[b"7-0", [b"r", b"\x80"]]]]]
    resp3 = {b"feed": [[b"7-0", fields]], b"recent": [[b"7-0", [b"r", b"\x80"]]]}
    want = [(b"feed", [(b"7-0", {b"c": b"pod:x", b"t": b"1"})]), (b"recent", [(b"7-0", {b"r": b"\x80"})])]
    assert stream_entries(resp2) == stream_entries(resp3) == want
    assert stream_entries(None) == []


async def test_a_read_cancelled_while_it_waits_drops_the_connection_and_the_next_read_works(store: Store) -> None:
    """A cancel that lands while the reply is on its way leaves a reply unread on the socket: the
    connection goes, and the next read takes another (it must not read the old read's reply)."""
    reader = FeedReader(store, await store.version())
    waiting = asyncio.create_task(reader.read(block_ms=5000))
    await asyncio.sleep(0.1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await store.upsert_pods([pod("a")])
    changes = await asyncio.wait_for(reader.read(block_ms=1000), 5)
    assert [(c.kind, c.name) for c in changes] == [(Kind.POD, "uid-a")]
    await reader.close()


async def test_an_error_reply_is_raised_and_the_connection_kept(store: Store) -> None:
    held = HeldConnection(store.client)
    await store.client.set("a-string", "x")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await held.call("LPOP", "a-string")
    assert await held.call("GET", "a-string") == b"x"
    await held.close()


async def test_a_connection_the_store_dropped_is_a_store_down_error_and_the_next_call_connects_again() -> None:
    """The informers' outage handling relies on it: an error of :data:`STORE_DOWN`, and the next call,
    once the store is back, on a new connection."""
    with RedisServer() as server:
        client = connect(server.url)
        held = HeldConnection(client)
        try:
            assert await held.call("PING") == b"PONG"
            await client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            with pytest.raises(STORE_DOWN):
                await held.call("PING")
            assert await held.call("PING") == b"PONG"
        finally:
            await held.close()
            await client.aclose()


async def test_a_reply_later_than_the_clients_socket_timeout_is_a_timeout_and_the_next_call_works(
    redis_server: RedisServer,
) -> None:
    """As redis-py's own read: the URL's ``socket_timeout`` bounds the wait for a reply (a blocking
    read must wait less), a :class:`redis.TimeoutError` of :data:`STORE_DOWN`."""
    client = connect(f"{redis_server.url}?socket_timeout=0.2")
    held = HeldConnection(client)
    try:
        with pytest.raises(RedisTimeoutError):
            await held.call("BLPOP", "nothing-here", 2)
        assert await held.call("BLPOP", "nothing-here", 0.05) is None
    finally:
        await held.close()
        await client.aclose()
