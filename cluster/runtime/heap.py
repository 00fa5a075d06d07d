"""Keeping Python's cyclic garbage collector off a process's long-lived cache.

A scheduler holds a cache of every pod, node and PodGroup — at 5,000 nodes and 10,000
pending pods, a few million tracked objects — and each session allocates enough to trigger
full collections, each of which walks the whole cache (~0.3 s here) to find the session's
little garbage. The cache holds no reference cycles (records are replaced, not linked), and
sessions break their own when closed, so reference counting frees nearly everything.

:class:`HeapKeeper` therefore keeps the collector off during a session (what a session
allocates lives until it ends anyway), and after it moves what is alive into the permanent
generation (``gc.freeze()``), so the collections between sessions walk only new objects.
Every ``every`` sessions it unfreezes and collects everything once, so cyclic garbage among
the frozen objects is still freed, only later.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


class HeapKeeper:
    def __init__(self, every: int = 300) -> None:
        if every < 1:
            raise ValueError(f"every: {every} (expected a positive number of sessions)")
        self.every = every
        self.sessions = 0
        self.full_collections = 0

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Around one session: no collections during it, :meth:`after_session` after it."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if enabled:
                gc.enable()
            self.after_session()

    def after_session(self) -> None:
        """Call between sessions, when nothing of the last one is needed but its report."""
        self.sessions += 1
        if self.sessions % self.every == 0:
            gc.unfreeze()
            gc.collect()
            self.full_collections += 1
        gc.freeze()

    def release(self) -> None:
        """Give the frozen objects back to the collector (at the end of a run)."""
        gc.unfreeze()


# Collections at 50,000 new objects rather than CPython's 700, and full ones ten times rarer. A
# process that follows the feed decodes each changed pod (a dozen tracked objects) while holding
# thousands of records: at 700 the collector runs every ~60 decodes and keeps promoting survivors,
# so full collections come often, and a pod's decode cost 18 us instead of 2 (20,000 pods held).
THRESHOLDS = (50_000, 20, 100)


def settle() -> None:
    """For a process that runs until stopped (and each agent worker): what starting it made —
    modules, classes, the clients' tables, ~90,000 objects that a full collection walks in ~40 ms —
    goes into the permanent generation, and collections come at :data:`THRESHOLDS`. Cycles are
    still collected, only later; the batch scheduler's sessions add :class:`HeapKeeper`."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
