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
puts around every socket write — drops a cancel that arrives as the write completes, so a
command busy with the store could ignore SIGTERM for good; the loop runs inside
:func:`cluster.store.pause.cancels_kept`.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

import uvloop

from cluster.store.pause import cancels_kept

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
        with cancels_kept():
            return uvloop.run(guarded())
    except asyncio.CancelledError:
        if terminated:
            raise KeyboardInterrupt from None
        raise
