"""Script calls packed by hiredis: replies in order, errors and lost connections handled as a pipeline's."""

from __future__ import annotations

import asyncio

import hiredis
import pytest
import redis.asyncio as aioredis
from redis.exceptions import BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from binder.commit import Binder
from binder.results import Committed, Placement
from cluster.model.resources import Resources
from cluster.runtime.redis_server import RedisServer
from cluster.store.keys import Keys
from cluster.store.scripts import SentAhead, _hiredis_reader, _read_replies, _take_buffered, call_packed
from cluster.store.store import Store
from tests.builders import node, pod


async def test_a_commit_after_redis_lost_its_scripts_loads_them_and_commits(store: Store) -> None:
    """Redis restarted empty of scripts (SCRIPT FLUSH): the commit's NOSCRIPT loads them, and it runs."""
    await store.upsert_nodes([node("n1", cpu="4")])
    await store.upsert_pods([pod("a", cpu="1"), pod("b", cpu="1")])
    binder = Binder(store.client, store.keys, "s")
    version = (await store.get_nodes(["n1"]))["n1"].version
    request = (await store.get_pods(["uid-a"]))["uid-a"].request
    [first] = await binder.commit([Placement(uid="uid-a", node="n1", request=request, version=version)])
    assert isinstance(first, Committed)
    await store.client.script_flush()
    [second] = await binder.commit([Placement(uid="uid-b", node="n1", request=request, version=first.version)])
    assert isinstance(second, Committed)
    assert (await store.get_nodes(["n1"]))["n1"].allocated == Resources({"cpu": 2000, "memory": 2 * 2**30, "pods": 2})


async def test_an_error_reply_is_raised_after_every_reply_is_read(rclient: aioredis.Redis, keys: Keys) -> None:
    k = keys.prefix + "x"
    [conn_id] = await call_packed(rclient, [("CLIENT", "ID")])
    with pytest.raises(ResponseError):
        await call_packed(rclient, [("SET", k, "a"), ("INCR", k), ("SET", k, "b")])
    assert await rclient.get(k) == b"b"  # the command after the error ran, as in a pipeline
    # The connection is kept (an error reply — a NOSCRIPT after every restart — costs no reconnect)
    # and in step: the next call's replies are its own.
    assert await call_packed(rclient, [("CLIENT", "ID")]) == [conn_id]
    assert await call_packed(rclient, [("GET", k), ("STRLEN", k), ("SET", k, "é")]) == [b"b", 1, b"OK"]
    assert await rclient.get(k) == "é".encode()


async def test_a_pooled_connection_the_server_closed_is_replaced_and_the_call_sent(
    redis_server: RedisServer, rclient: aioredis.Redis, keys: Keys
) -> None:
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        [conn_id] = await call_packed(client, [("CLIENT", "ID")])
        await rclient.execute_command("CLIENT", "KILL", "ID", conn_id)  # the pooled connection, from outside
        k = keys.prefix + "y"
        assert await call_packed(client, [("SET", k, 1), ("INCRBY", k, 41)]) == [b"OK", 42]
        [again] = await call_packed(client, [("CLIENT", "ID")])
        assert again != conn_id
    finally:
        await client.aclose()


def _pending_incr(ahead: SentAhead, key: str, times: int) -> None:
    """Synchronous code, as a batch session is: no await between the sends."""
    for _ in range(times):
        ahead.send(("INCR", key))


async def test_commands_sent_ahead_run_before_their_replies_are_awaited(
    redis_server: RedisServer, rclient: aioredis.Redis, keys: Keys
) -> None:
    """What synchronous code sends reaches Redis at once: another client sees it done while the
    sender has not read a reply (the event loop only ran the other client's call)."""
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        k = keys.prefix + "n"
        ahead = await SentAhead.open(client)
        _pending_incr(ahead, k, 3)
        for _ in range(200):
            if await rclient.get(k) == b"3":
                break
            await asyncio.sleep(0.005)
        assert await rclient.get(k) == b"3"
        assert await ahead.replies() == [1, 2, 3]
        assert await call_packed(client, [("GET", k)]) == [b"3"]  # the connection went back in step
    finally:
        await client.aclose()


@pytest.mark.parametrize("noticed", [False, True], ids=["unnoticed", "noticed"])
async def test_commands_sent_ahead_on_a_connection_killed_meanwhile_are_sent_again(
    redis_server: RedisServer, rclient: aioredis.Redis, keys: Keys, noticed: bool
) -> None:
    """The connection was lost before the sends — the loop has seen it closed, or not yet (the
    writes go to a dead socket): every command is sent again on another one (the caller's
    commands are idempotent for those that ran, as caldera's scripts are)."""
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        k = keys.prefix + "s"
        ahead = await SentAhead.open(client)
        [mine] = await call_packed(rclient, [("CLIENT", "ID")])
        listed = (await rclient.execute_command("CLIENT", "LIST")).decode()
        for line in listed.splitlines():
            conn_id = int(line.split()[0].removeprefix("id="))
            if conn_id != mine:
                await rclient.execute_command("CLIENT", "KILL", "ID", conn_id)
        if noticed:
            await asyncio.sleep(0.05)
        ahead.send(("SET", k, "v"))
        ahead.send(("APPEND", k, "w"))
        assert await ahead.replies() == [b"OK", 2]
        assert await rclient.get(k) == b"vw"
    finally:
        await client.aclose()


async def test_an_error_sent_ahead_is_raised_once_every_reply_is_read(redis_server: RedisServer, keys: Keys) -> None:
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        k = keys.prefix + "e"
        ahead = await SentAhead.open(client)
        ahead.send(("SET", k, "a"))
        ahead.send(("INCR", k))
        ahead.send(("SET", k, "b"))
        with pytest.raises(ResponseError):
            await ahead.replies()
        assert await call_packed(client, [("GET", k)]) == [b"b"]  # in step: the reply is this call's
    finally:
        await client.aclose()


async def test_a_stream_abandoned_drops_its_connection_and_leaves_what_it_sent(
    redis_server: RedisServer, rclient: aioredis.Redis, keys: Keys
) -> None:
    """Abandoned (the session failed): what was sent runs; the connection, its replies unread,
    is dropped rather than handed to the next caller."""
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        k = keys.prefix + "a"
        ahead = await SentAhead.open(client)
        _pending_incr(ahead, k, 2)
        await ahead.abandon()
        assert await call_packed(client, [("INCRBY", k, 40)]) == [42]
    finally:
        await client.aclose()


async def test_many_replies_read_in_bulk_arrive_in_order_with_an_error_in_its_place(
    rclient: aioredis.Redis, keys: Keys
) -> None:
    """Replies taken from the parser's buffer in bulk (a fetch of hundreds of objects): each in its
    place across socket reads, an error reply at its own index, the connection in step after."""
    k = keys.prefix + "bulk"
    big = b"\x00\xff" * 40_000  # replies that span several socket reads
    await rclient.set(k, big)
    commands: list[tuple[str, ...]] = [("GET", k) if i % 7 == 0 else ("ECHO", str(i)) for i in range(600)]
    commands[311] = ("INCR", k)  # not an integer: an error reply in the middle
    conn = await rclient.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        await conn.send_packed_command([hiredis.pack_command(c) for c in commands], check_health=False)
        replies = await _read_replies(conn, len(commands))
    finally:
        await rclient.connection_pool.release(conn)
    assert _hiredis_reader(conn) is not None  # the installed redis-py's parser: the bulk path was taken
    assert isinstance(replies[311], ResponseError)
    expected = [big if i % 7 == 0 else str(i).encode() for i in range(600)]
    assert replies[:311] + replies[312:] == expected[:311] + expected[312:]
    assert await call_packed(rclient, [("ECHO", "after")]) == [b"after"]


async def test_a_connection_error_given_as_a_reply_is_raised_and_a_push_fails_the_connection(
    rclient: aioredis.Redis,
) -> None:
    """What read_response raises, the bulk path raises: Redis answering LOADING (a connection error
    redis-py retries on another connection), and a push message no store connection asked for. (The
    replies are fed to the connection's own parser, which is then dropped.)"""
    conn = await rclient.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        reader = _hiredis_reader(conn)
        assert reader is not None
        replies: list[object] = []
        reader.feed(b"+OK\r\n-LOADING Redis is loading the dataset in memory\r\n+late\r\n")
        with pytest.raises(BusyLoadingError):
            _take_buffered(reader, replies, 3)
        assert replies == [b"OK"]
        reader.gets()  # the reply after it
        reader.feed(b">2\r\n$10\r\ninvalidate\r\n*0\r\n")
        with pytest.raises(RedisConnectionError, match="push"):
            _take_buffered(reader, [], 2)
    finally:
        await conn.disconnect()
        await rclient.connection_pool.release(conn)
