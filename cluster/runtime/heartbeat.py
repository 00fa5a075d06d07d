"""Each process says it is alive, whether it leads, and a few figures, for ``caldera status``.

One hash per cluster (``Keys.processes``), one field per process (``component/holder``)
holding a small JSON record with the wall time it was written; a reader treats a record
older than :data:`STALE_S` as a process that is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import msgspec

from cluster.store.client import Client, StoreError
from cluster.store.keys import Keys
from cluster.store.pause import pause

STALE_S = 10.0
EVERY_S = 2.0


class Stats(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A component's figures for its heartbeat (``caldera status`` shows them): each component
    subclasses it with its own fields; a field left at its default (None: not known yet) is not sent."""


class Beat(msgspec.Struct, frozen=True, kw_only=True):
    component: str
    holder: str
    leading: bool
    at: float  # wall time
    stats: dict[str, Any] = msgspec.field(default_factory=dict)

    def up(self, now: float) -> bool:
        return now - self.at < STALE_S


async def beat(client: Client, keys: Keys, record: Beat) -> None:
    await client.hset(keys.processes, f"{record.component}/{record.holder}", msgspec.json.encode(record))


async def beats(client: Client, keys: Keys) -> list[Beat]:
    raw: dict[bytes, bytes] = await client.hgetall(keys.processes)  # type: ignore[assignment]
    decoder = msgspec.json.Decoder(Beat)
    return sorted((decoder.decode(v) for v in raw.values()), key=lambda b: (b.component, b.holder))


async def run(
    client: Client,
    keys: Keys,
    component: str,
    holder: str,
    leading: Callable[[], bool],
    stats: Callable[[], Stats],
    stop: asyncio.Event,
    wall: Callable[[], float] = time.time,
) -> None:
    """Beat every :data:`EVERY_S` until ``stop``; the last record says the process stopped (not leading, old)."""
    while not stop.is_set():
        with contextlib.suppress(OSError, StoreError):
            await beat(
                client,
                keys,
                Beat(
                    component=component, holder=holder, leading=leading(), at=wall(), stats=msgspec.to_builtins(stats())
                ),
            )
        await pause(stop, EVERY_S)
    with contextlib.suppress(OSError, StoreError):
        await client.hdel(keys.processes, f"{component}/{holder}")
