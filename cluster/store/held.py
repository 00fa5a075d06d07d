"""A connection one reader keeps for its own blocking reads: the feed's XREAD, a worker's inbox.

An informer reads the feed every time it changes (in the demo each process's informer ~300 times a
second), and each read through the client's ``xread`` cost ~100 µs of the reader's CPU: the pool's
lease and release, the retry wrapper, the per-command hooks, the reply's conversion. Taken from the
pool once and kept, a connection's command is packed in one C call and its reply read straight from
redis-py's hiredis parser: ~55–70 µs (``XREAD`` of two streams, three entries, on uvloop; measured
side by side). The replies are Redis's own (RESP2 or RESP3 as the client speaks), not redis-py's
conversions of them: the callers read them as such.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import hiredis
from redis.asyncio.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cluster.store.client import Client
from cluster.store.scripts import Arg, hiredis_parser


class HeldConnection:
    """One connection of ``client``'s pool, held for one caller's commands, one at a time.

    A failure (the store gone, a cancel while a reply was on its way) drops the connection and is
    raised as the client would raise it (:data:`~cluster.store.client.STORE_DOWN`); the next call
    takes another. :meth:`close` gives it back to the pool (a client closed meanwhile closed it)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._conn: Connection | None = None

    async def call(self, *command: Arg) -> Any:
        """``command``'s reply as Redis gave it; an error reply raised."""
        conn = self._conn
        if conn is None:
            conn = cast(Connection, await self.client.connection_pool.get_connection())  # type: ignore[no-untyped-call]
            self._conn = conn
        try:
            parser = hiredis_parser(conn)
            writer = conn._writer
            if parser is None or writer is None or writer.transport.is_closing():
                await conn.send_packed_command([hiredis.pack_command(cast(Any, command))], check_health=False)
                reply = await conn.read_response()
            else:
                writer.write(hiredis.pack_command(cast(Any, command)))
                # The reply waited for as long as redis-py's own read would: the client's socket timeout
                # (redis-py's default 5 s; a blocking read's own wait must be shorter).
                async with asyncio.timeout(conn.socket_timeout):
                    reply = await parser.read_response()
        except ResponseError:
            raise  # a whole reply, read: the connection is sound
        except BaseException as e:
            self._conn = None
            await conn.disconnect(nowait=True)
            await self.client.connection_pool.release(conn)
            if isinstance(e, TimeoutError) and not isinstance(e, RedisTimeoutError):
                raise RedisTimeoutError(f"no reply within {conn.socket_timeout} s") from e
            raise
        if isinstance(reply, ResponseError):
            raise reply
        if isinstance(reply, RedisConnectionError):  # how the parser gives a store still loading its data
            raise reply
        return reply

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self.client.connection_pool.release(conn)
