"""caldera's Lua scripts: loading (the shared prelude + a body) and calling by SHA."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any, TypeVar, cast

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

T = TypeVar("T")

Arg = str | bytes | int


def lua_source(package: str, name: str) -> str:
    """The full source of script ``name`` shipped in ``package``'s ``lua/`` folder."""
    prelude = resources.files("cluster.store").joinpath("lua/prelude.lua").read_text()
    body = resources.files(package).joinpath(f"lua/{name}.lua").read_text()
    return prelude + "\n" + body


class Script:
    """One Lua script, called by SHA (EVALSHA) and loaded again when Redis lost it."""

    def __init__(self, package: str, name: str) -> None:
        self.name = name
        self.source = lua_source(package, name)
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    async def load(self, client: aioredis.Redis) -> None:
        await client.script_load(self.source)

    def command(self, keys: Sequence[str], args: Sequence[Arg]) -> tuple[Arg, ...]:
        """The EVALSHA of a call, for :func:`call_packed` (the caller runs it through :func:`run_loaded`)."""
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

    async def call(self, client: aioredis.Redis, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        async def once() -> Any:
            [reply] = await call_packed(client, [self.command(keys, args)])
            return reply

        return await run_loaded(client, [self], once)

    async def call_read_only(self, client: aioredis.Redis, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run a read-only script sent whole (EVAL_RO): Redis refuses any write in it, and a
        read-only user needs neither SCRIPT LOAD nor a write permission on the routing key."""
        return await client.eval_ro(self.source, len(keys), *keys, *args)


async def run_loaded(client: aioredis.Redis, scripts: Sequence[Script], call: Callable[[], Awaitable[T]]) -> T:
    """Run ``call``; when Redis answers NOSCRIPT (restarted, flushed) load the scripts and run it again.

    A NOSCRIPT reply means that call ran nothing, and every caldera script is idempotent
    for the calls that did run in the same pipeline, so running the whole call again is safe.
    """
    try:
        return await call()
    except NoScriptError:
        for script in scripts:
            await script.load(client)
        return await call()


async def call_packed(client: aioredis.Redis, commands: Sequence[Sequence[Arg]]) -> list[Any]:
    """``commands`` as one pipeline (not a transaction): their replies in order, or the first error
    once every reply is read (a NOSCRIPT as :class:`NoScriptError`, for :func:`run_loaded`).

    Every script call goes this way (the binder's commits, the store's writes, single calls):
    each command is packed in one C call (``hiredis.pack_command``), where redis-py's pipeline
    encodes every argument in Python first — 4.4 ms instead of 28.6 for the 50,000 arguments of a
    burst's commit. The
    connection comes from the client's pool and goes back to it, or is dropped when a reply
    was not read; a connection error is retried as the client retries its own commands
    (every caldera script is idempotent for the calls that ran)."""
    pool = client.connection_pool
    # (hiredis's stub types the tuple as of one element; it takes any number)
    packed = [hiredis.pack_command(cast(Any, tuple(c))) for c in commands]

    async def exchange(conn: Connection) -> list[Any]:
        await conn.send_packed_command(packed, check_health=False)
        return await _read_replies(conn, len(packed))

    conn: Connection = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        replies: list[Any] = await conn.retry.call_with_retry(lambda: exchange(conn), lambda _: conn.disconnect())
    finally:
        await pool.release(conn)
    return _first_error_raised(replies)


async def _read_replies(conn: Connection, count: int) -> list[Any]:
    """``count`` replies, an error reply kept in its place; on any other failure the connection is
    dropped (replies left on the socket: never hand it on) and the failure raised.

    Each socket read goes through redis-py's ``read_response``; the replies already whole in its
    parser's buffer after it are taken from hiredis at once (:func:`_take_buffered`). One
    ``read_response`` per reply cost ~6 µs in awaits and checks: 200 pods' hashes (an informer's
    fetch of what a burst changed) 2.5 ms → 1.3, the same replies."""
    replies: list[Any] = []
    hiredis_reader = _hiredis_reader(conn)
    try:
        while len(replies) < count:
            try:
                replies.append(await conn.read_response())
            except ResponseError as e:
                replies.append(e)
            if hiredis_reader is not None:
                _take_buffered(hiredis_reader, replies, count)
    except BaseException:
        await conn.disconnect(nowait=True)
        raise
    return replies


def _hiredis_parts() -> tuple[type | None, object]:
    """redis-py's async hiredis parser and what its reader returns for "no whole reply yet" (None:
    a redis-py without them, where every reply goes through ``read_response``)."""
    try:
        from redis._parsers import hiredis as parsers
    except ImportError:
        return None, None
    return getattr(parsers, "_AsyncHiredisParser", None), getattr(parsers, "NOT_ENOUGH_DATA", None)


_HIREDIS_PARSER, NOT_ENOUGH_DATA = _hiredis_parts()
_PUSH: type | None = getattr(hiredis, "PushNotification", None)  # hiredis's type for a push message


def hiredis_parser(conn: Connection) -> Any:
    """``conn``'s parser when it is redis-py's hiredis one (None: another, and every reply is read
    through ``conn.read_response``)."""
    parser = getattr(conn, "_parser", None)
    if _HIREDIS_PARSER is None or NOT_ENOUGH_DATA is None or type(parser) is not _HIREDIS_PARSER:
        return None
    return parser


def _hiredis_reader(conn: Connection) -> Any:
    """The hiredis reader behind ``conn``'s parser (None: not redis-py's hiredis parser, and every
    reply is read through ``read_response``)."""
    parser = hiredis_parser(conn)
    return None if parser is None else getattr(parser, "_reader", None)


def _take_buffered(reader: Any, replies: list[Any], count: int) -> None:
    """Append the replies already whole in ``reader``'s buffer, up to ``count`` in all, as
    ``read_response`` would return them: an error reply as its exception, kept in place. What
    ``read_response`` raises is raised (a connection error given as a reply: Redis loading its
    data); a push message, which no store connection asks for, fails the connection."""
    while len(replies) < count:
        reply = reader.gets()
        if reply is NOT_ENOUGH_DATA:
            return
        if isinstance(reply, RedisConnectionError):
            raise reply
        if isinstance(reply, list) and reply and isinstance(reply[0], RedisConnectionError):
            raise reply[0]
        if _PUSH is not None and isinstance(reply, _PUSH):
            raise RedisConnectionError("a push message on a store connection, which asked for none")
        replies.append(reply)


def _first_error_raised(replies: list[Any]) -> list[Any]:
    """``replies``, once every one is read, or the first error reply among them raised."""
    for r in replies:
        if isinstance(r, ResponseError):
            raise r
    return replies


class SentAhead:
    """Commands written to Redis as they are made, from synchronous code, and their replies read
    afterwards: Redis runs them on its own core while the caller goes on computing (a batch
    session sends each full call of its commits while it places the rest).

    :meth:`send` hands the packed command to the connection's asyncio transport, which writes at
    once what the socket takes and keeps the rest until the event loop runs again: nothing
    waits, and commands reach Redis in the order sent. :meth:`replies` reads every reply, as
    :func:`call_packed` does; if the connection failed meanwhile, every command is sent again on
    another one (the caller's commands must be idempotent for the ones that ran: every caldera
    script is). The connection comes from the client's pool: :meth:`replies` or :meth:`abandon`
    gives it back (dropped when replies were left unread)."""

    def __init__(self, client: aioredis.Redis, conn: Connection) -> None:
        self.client = client
        self._conn: Connection | None = conn
        self._broken = False
        self.commands: list[tuple[Arg, ...]] = []

    @classmethod
    async def open(cls, client: aioredis.Redis) -> SentAhead:
        return cls(client, await client.connection_pool.get_connection())  # type: ignore[no-untyped-call]

    def send(self, command: Sequence[Arg]) -> None:
        """Write one command now (packed in one C call); its reply comes from :meth:`replies`."""
        command = tuple(command)
        self.commands.append(command)
        if self._broken or self._conn is None:
            return
        # redis-py's async connection keeps its asyncio stream writer here; its own
        # send_packed_command writes to it the same way, then awaits the drain.
        writer = self._conn._writer
        if writer is None or writer.transport.is_closing():
            self._broken = True  # sent again by replies() on another connection
            return
        writer.write(hiredis.pack_command(cast(Any, command)))

    async def replies(self) -> list[Any]:
        """The replies in the order sent, or the first error once every reply is read (a
        NOSCRIPT as :class:`NoScriptError`: nothing ran of that command)."""
        conn, self._conn = self._conn, None
        if conn is None:
            raise RuntimeError("SentAhead.replies: already read or abandoned")
        replies: list[Any] = []
        try:
            if self._broken:
                await conn.disconnect(nowait=True)
            else:
                try:
                    replies = await _read_replies(conn, len(self.commands))
                except (RedisConnectionError, RedisTimeoutError, OSError):
                    self._broken = True  # the connection dropped by _read_replies
        finally:
            await self.client.connection_pool.release(conn)
        if self._broken:
            return await call_packed(self.client, self.commands) if self.commands else []
        return _first_error_raised(replies)

    async def replies_loaded(self, scripts: Sequence[Script]) -> list[Any]:
        """:meth:`replies`; on NOSCRIPT (Redis restarted or flushed: a command with a script it lacked
        ran nothing) ``scripts`` loaded and every command sent again, as :func:`run_loaded` does (every
        caldera script is idempotent for the calls that did run)."""
        try:
            return await self.replies()
        except NoScriptError:
            for script in scripts:
                await script.load(self.client)
            return await call_packed(self.client, self.commands)

    async def abandon(self) -> None:
        """Give the connection back without reading (dropped if anything was sent)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self.commands:
            await conn.disconnect(nowait=True)
        await self.client.connection_pool.release(conn)
