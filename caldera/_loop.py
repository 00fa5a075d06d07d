"""How a command stops on SIGTERM: as on Ctrl-C, with its clean-up run to the end.

Outside an event loop SIGTERM raises KeyboardInterrupt, which unwinds every context manager
(a private redis-server, a local Ray). Inside one — every command runs its coroutine with
:func:`run_loop` — SIGTERM cancels that coroutine, as asyncio's runner does on Ctrl-C: its
finally blocks and context managers run, awaits and all, and then KeyboardInterrupt is raised
where the loop was started. Raising KeyboardInterrupt from the signal handler there instead
would land in whichever task runs, and a task group re-raises it while it cancels the rest,
cutting their clean-up short. (Asyncio's own Ctrl-C handling is not borrowed for SIGTERM: a
command started in the background by a shell script runs with SIGINT ignored, so has none.)

A cancel must not be lost on the way: on Python 3.11, ``asyncio.wait_for`` — which redis-py
puts around every socket write — returns its result and drops a cancel that arrives as the
write completes, so a command busy with the store could ignore SIGTERM for good. While the
loop runs, ``asyncio.wait_for`` is therefore 3.12's (``asyncio.timeout`` around the await),
which keeps it (CPython gh-86296).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


def sigterm_as_ctrl_c() -> None:
    """From now on, SIGTERM outside :func:`run_loop` raises KeyboardInterrupt."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """``main``'s result, run on uvloop; SIGTERM cancels it (KeyboardInterrupt here unless ``main`` handles that)."""
    terminated = False

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def terminate() -> None:
            nonlocal terminated
            terminated = True
            task.cancel()

        previous = signal.getsignal(signal.SIGTERM)
        loop.add_signal_handler(signal.SIGTERM, terminate)
        try:
            return await main
        finally:
            loop.remove_signal_handler(signal.SIGTERM)  # which resets SIGTERM to its default
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    try:
        with _cancels_kept():
            return uvloop.run(guarded())
    except asyncio.CancelledError:
        if terminated:
            raise KeyboardInterrupt from None
        raise


@contextlib.contextmanager
def _cancels_kept() -> Iterator[None]:
    """While the loop runs, ``asyncio.wait_for`` is Python 3.12's on 3.11 (see the module's docstring)."""
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
