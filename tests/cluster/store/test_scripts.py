"""Script calls packed by hiredis: replies in order, errors and lost connections handled as a pipeline's."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from binder.commit import Binder
from binder.results import Committed, Placement
from cluster.model.resources import Resources
from cluster.runtime.redis_server import RedisServer
from cluster.store.keys import Keys
from cluster.store.scripts import call_packed
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
