"""Waiting without losing a cancellation: :func:`within`, :func:`pause`, :func:`cancels_kept`.

On Python 3.11, ``asyncio.wait_for`` — which redis-py puts around every socket write —
returns its result and drops a cancel that arrives as the write completes (CPython
gh-86296). A task of a process's task group that was cancelled so (when another task failed)
went on running: the agent scheduler, its local Ray dead, hung instead of exiting in two runs
of three, its rebind loop cancelled in the middle of a Redis call and waiting for a stop that
never came. :func:`cancels_kept` makes ``asyncio.wait_for`` Python 3.12's while a loop runs
(``asyncio.timeout`` around the await, which keeps the cancel); every process's ``launch``
and every command's ``run_loop`` run inside it. :func:`within` and :func:`pause` are the
project's own timed waits, built on ``asyncio.wait``, whose waiter is a plain future: a task
cancelled while waiting on it is cancelled, whatever else happens in that iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Iterator
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """``await awaitable``, but at most ``seconds``: then it is cancelled and TimeoutError raised."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=max(seconds, 0.0))
    except BaseException:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise TimeoutError(f"not done within {seconds:g}s")
    return task.result()


async def pause(event: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds`` or until ``event`` is set, whichever is first; whether it is set."""
    if not event.is_set():
        with contextlib.suppress(TimeoutError):
            await within(event.wait(), seconds)
    return event.is_set()


@contextlib.contextmanager
def cancels_kept() -> Iterator[None]:
    """While inside, ``asyncio.wait_for`` is Python 3.12's on 3.11 (see the module's docstring)."""
    if sys.version_info >= (3, 12):
        yield
        return
    original = asyncio.wait_for

    async def wait_for(fut: Awaitable[T], timeout: float | None) -> T:
        if timeout is not None and timeout <= 0:
            return await original(fut, timeout)
        async with asyncio.timeout(timeout):
            return await fut

    setattr(asyncio, "wait_for", wait_for)  # noqa: B010 (redis-py looks it up on each call; typed apart)
    try:
        yield
    finally:
        setattr(asyncio, "wait_for", original)  # noqa: B010
