"""Leader election over Redis: a lease key with a TTL, renewed by its holder.

Two replicas of a process never both act: only the holder of an unexpired lease does,
and a holder that fails to renew within the TTL stops acting before anyone else can
acquire it (it stops at ``ttl - renew_every`` after its last successful renewal, the
lease expires at ``ttl``). The Kubernetes Lease is ``cluster.kube.lease``; both meet the
runtime's :class:`cluster.runtime.process.Lease`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from cluster.store.client import Client, StoreError
from cluster.store.pause import pause

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class RedisLease:
    def __init__(
        self,
        client: Client,
        key: str,
        holder: str,
        *,
        ttl: float = 10.0,
        renew_every: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if renew_every >= ttl:
            raise ValueError(f"leader election: renew period {renew_every}s must be shorter than the lease {ttl}s")
        self.client = client
        self.key = key
        self.holder = holder
        self.ttl = ttl
        self.renew_every = renew_every
        self.clock = clock
        self._valid_until = 0.0
        self.acquired = asyncio.Event()

    @property
    def leading(self) -> bool:
        """True while this process holds the lease (with a safety margin before it expires)."""
        return self.clock() < self._valid_until

    async def try_acquire(self) -> bool:
        start = self.clock()
        ms = int(self.ttl * 1000)
        got = bool(await self.client.set(self.key, self.holder, nx=True, px=ms))
        if not got:
            got = bool(await self.client.eval(_RENEW, 1, self.key, self.holder, ms))
        if got:
            # Stop acting one renew period before the lease could lapse.
            self._valid_until = start + self.ttl - self.renew_every
            self.acquired.set()
        else:
            self._valid_until = 0.0
            self.acquired.clear()
        return got

    async def run(self, stop: asyncio.Event) -> None:
        """Acquire and keep renewing until ``stop``; then give the lease up."""
        while not stop.is_set():
            try:
                await self.try_acquire()
            except (OSError, StoreError):
                self._valid_until = 0.0
            await pause(stop, self.renew_every)
        if self.leading:
            await self.client.eval(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
                1,
                self.key,
                self.holder,
            )
        self._valid_until = 0.0
