"""caldera's Lua scripts: loading (the shared prelude + a body) and calling by SHA."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

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

    def queue(self, pipe: aioredis.client.Pipeline, keys: Sequence[str], args: Sequence[Arg]) -> None:
        """Add a call to a pipeline (the caller runs it through :func:`run_loaded`)."""
        pipe.evalsha(self.sha, len(keys), *keys, *args)

    async def call(self, client: aioredis.Redis, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        async def once() -> Any:
            return await client.evalsha(self.sha, len(keys), *keys, *args)

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
