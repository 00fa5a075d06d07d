"""The one door to the Redis client library: its connection types, its errors, and how to connect.

Everything else of caldera that talks to Redis (the runtime's heartbeats and lease, each
process's main, the agent's Ray workers, the commands) takes a :data:`Client` from here, so
that only ``cluster/store`` and ``binder`` import the library (a test checks it).
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TypeAlias

import msgspec
import redis
import redis.asyncio as aioredis

from cluster.model.text import one_line
from cluster.store.pause import pause

Client: TypeAlias = aioredis.Redis
StoreError = redis.RedisError
"""Any error the client raises talking to Redis (connection lost, timeout, a script error)."""


AuthError = redis.AuthenticationError
"""The store refused the URL's user and password (or the URL gives none and the store wants them)."""


class TlsFiles(msgspec.Struct, frozen=True, kw_only=True):
    """A TLS endpoint's certificate and key (PEM files), and the CA its peers' certificates chain to."""

    cert: str
    key: str
    ca: str


def connect(url: str) -> Client:
    """A client of the store at ``url`` (redis://, rediss:// or unix://); connects on first use.

    The URL carries everything: ``user:password@``, and for ``rediss://`` the TLS files as
    query parameters (``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_cert_reqs``,
    ``ssl_check_hostname``), which redis-py's ``from_url`` passes to its TLS connection."""
    return aioredis.Redis.from_url(url)


def redacted(url: str) -> str:
    """``url`` fit for a message: its password replaced by ``***`` (user, host and the rest kept)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()


def wait_until_up(
    host: str,
    port: int,
    *,
    deadline: float,
    alive: Callable[[], bool] | None = None,
    tls: TlsFiles | None = None,
) -> bool:
    """Ping a local redis-server until it answers (True) or ``deadline`` (monotonic) passes (False).

    Any answer counts, a refusal to an unauthenticated client too (a server whose ``default``
    user is off). With ``tls`` the ping goes over TLS, presenting ``tls.cert`` as the client's
    certificate. When ``alive`` returns False (the server exited) the wait gives up at once.
    """
    if tls is None:
        client = redis.Redis(host=host, port=port)
    else:
        client = redis.Redis(
            host=host, port=port, ssl=True, ssl_certfile=tls.cert, ssl_keyfile=tls.key, ssl_ca_certs=tls.ca
        )
    try:
        while True:
            try:
                client.ping()
                return True
            except (redis.AuthenticationError, redis.exceptions.NoPermissionError):
                return True
            except redis.ConnectionError:
                if (alive is not None and not alive()) or time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
    finally:
        client.close()


STORE_DOWN: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)
"""What a call raises while the store cannot answer (restarting, loading its data, unreachable).
Script errors and refused permissions are not among them: they are defects, not weather."""


class Outage:
    """For a loop that must outlive the store going away: how long to wait before trying again
    (doubling from ``first`` to ``cap``), one log line when an outage starts and one when the
    store answers again — not one per failed call."""

    def __init__(self, log: logging.Logger, what: str, *, first: float = 0.1, cap: float = 2.0) -> None:
        self.log = log
        self.what = what
        self.first = first
        self.cap = cap
        self.delay = 0.0
        self.since: float | None = None
        self.outages = 0

    def failed(self, error: BaseException) -> float:
        """Note a failed call; the seconds to wait before the next try."""
        if self.since is None:
            self.since = time.monotonic()
            self.outages += 1
            self.log.warning("%s: the store does not answer (%s); trying again", self.what, one_line(str(error)))
        self.delay = min(max(self.delay * 2, self.first), self.cap)
        return self.delay

    def ok(self) -> None:
        """Note a call that worked."""
        if self.since is not None:
            self.log.warning("%s: the store answers again after %.1fs", self.what, time.monotonic() - self.since)
            self.since = None
        self.delay = 0.0


async def periodically(
    log: logging.Logger,
    what: str,
    every: float,
    stop: asyncio.Event,
    step: Callable[[], Awaitable[object]],
    *,
    when: Callable[[], bool] = lambda: True,
) -> None:
    """``step()`` every ``every`` seconds while ``when()``, until ``stop``; the store going away is
    waited out (:class:`Outage`: one line when it starts, one when it ends)."""
    outage = Outage(log, what)
    while not stop.is_set():
        if when():
            try:
                await step()
                outage.ok()
            except STORE_DOWN as e:
                outage.failed(e)
        await pause(stop, every)
