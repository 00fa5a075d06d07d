"""The agent scheduler's queue: urgent, active and backoff (DESIGN.md §7).

- urgent: pods whose commit hit a binder conflict; served first, in arrival order, no backoff;
- active: pending pods, highest priority first, then first come first served;
- backoff: pods that fit nowhere, waiting 1 s, 2 s, 4 s … up to 10 s before the next try,
  or less: :meth:`SchedulingQueue.activate_backoff` brings them all back when capacity
  frees up somewhere;
- handed over: urgent pods held for one worker (a worker found room for them only in that
  worker's partition of the nodes: :meth:`SchedulingQueue.hand_over`); that worker takes them
  first (:meth:`SchedulingQueue.pop_for`), no one else does unless they are released.

A pod is in at most one part. Removal (a pod deleted while queued) is lazy: the entry
stays in its heap and is skipped when it surfaces. Pure; the clock is injected.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Collection

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0


class QueuePart(enum.StrEnum):
    """Where a pod waits: ``urgent`` (retry first), ``active``, ``backoff`` (after a failure), ``inflight`` (with a worker)."""

    URGENT = "urgent"
    ACTIVE = "active"
    BACKOFF = "backoff"
    INFLIGHT = "inflight"


class SchedulingQueue:
    def __init__(
        self, clock: Callable[[], float], *, initial_backoff: float = INITIAL_BACKOFF, max_backoff: float = MAX_BACKOFF
    ) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._seq = itertools.count()
        self._urgent: deque[str] = deque()
        self._active: list[tuple[int, int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self._where: dict[str, QueuePart] = {}
        self._for: dict[str, deque[str]] = {}  # worker -> pods handed over to it, in order
        self._held: dict[str, str] = {}  # uid -> the worker it is handed over to
        self._priority: dict[str, int] = {}
        self.attempts: dict[str, int] = {}

    def __contains__(self, uid: str) -> bool:
        return uid in self._where

    def queued(self) -> Collection[str]:
        """Every pod the queue holds, in flight or waiting (a live view)."""
        return self._where.keys()

    def state(self, uid: str) -> QueuePart | None:
        """Where the pod waits, or None when it is not queued."""
        return self._where.get(uid)

    def add(self, uid: str, priority: int = 0) -> None:
        """A newly pending pod; a pod already queued or in flight is left where it is."""
        if uid in self._where:
            return
        self._priority[uid] = priority
        self._push_active(uid)

    def _push_active(self, uid: str) -> None:
        heapq.heappush(self._active, (-self._priority.get(uid, 0), next(self._seq), uid))
        self._where[uid] = QueuePart.ACTIVE

    def remove(self, uid: str) -> None:
        """Forget a pod (deleted, or bound by someone else)."""
        self._held.pop(uid, None)
        self._where.pop(uid, None)
        self._priority.pop(uid, None)
        self.attempts.pop(uid, None)

    def ready(self) -> int:
        """How many pods :meth:`pop` could hand out now, at most (entries of pods removed since are
        counted until they surface)."""
        return len(self._urgent) + len(self._active)

    def pop(self, n: int) -> list[str]:
        """Up to ``n`` pods to try now (urgent first, then active); they are in flight until
        :meth:`done`, :meth:`retry_now` or :meth:`back_off`."""
        self.flush_backoff()
        out: list[str] = []
        while self._urgent and len(out) < n:
            uid = self._urgent.popleft()
            if self._where.get(uid) is QueuePart.URGENT and uid not in self._held:
                out.append(uid)
        while self._active and len(out) < n:
            _, _, uid = heapq.heappop(self._active)
            if self._where.get(uid) is QueuePart.ACTIVE:
                out.append(uid)
        for uid in out:
            self._where[uid] = QueuePart.INFLIGHT
        return out

    def hand_over(self, uid: str, worker: str) -> None:
        """A pod in flight goes to ``worker``'s part: urgent, but for that worker alone."""
        if self._where.get(uid) is not QueuePart.INFLIGHT:
            return
        self._where[uid] = QueuePart.URGENT
        self._held[uid] = worker
        self._for.setdefault(worker, deque()).append(uid)

    def held_for(self, worker: str) -> int:
        """How many pods are handed over to ``worker`` (entries of pods removed since are counted
        until they surface)."""
        held = self._for.get(worker)
        return len(held) if held else 0

    def pop_for(self, worker: str, n: int) -> list[str]:
        """Up to ``n`` of the pods handed over to ``worker``, in the order they were; in flight as :meth:`pop`'s."""
        held = self._for.get(worker)
        out: list[str] = []
        while held and len(out) < n:
            uid = held.popleft()
            if self._held.get(uid) == worker and self._where.get(uid) is QueuePart.URGENT:
                del self._held[uid]
                self._where[uid] = QueuePart.INFLIGHT
                out.append(uid)
        if not held:
            self._for.pop(worker, None)
        return out

    def release(self, worker: str) -> int:
        """``worker`` is gone: the pods handed over to it are urgent for anyone. Returns how many."""
        moved = 0
        for uid in self._for.pop(worker, ()):
            if self._held.get(uid) == worker and self._where.get(uid) is QueuePart.URGENT:
                del self._held[uid]
                self._urgent.append(uid)
                moved += 1
        return moved

    def done(self, uid: str) -> None:
        """The pod was placed (or is gone)."""
        self.remove(uid)

    def retry_now(self, uid: str) -> None:
        """A binder conflict: try again first thing, without backoff."""
        if uid in self._where:
            self._held.pop(uid, None)
            self._where[uid] = QueuePart.URGENT
            self._urgent.append(uid)

    def back_off(self, uid: str) -> float:
        """The pod fits nowhere: wait before trying again; returns the delay."""
        if uid not in self._where:
            return 0.0
        self._held.pop(uid, None)
        tries = self.attempts.get(uid, 0) + 1
        self.attempts[uid] = tries
        delay = float(min(self.initial_backoff * 2 ** (tries - 1), self.max_backoff))
        heapq.heappush(self._backoff, (self.clock() + delay, next(self._seq), uid))
        self._where[uid] = QueuePart.BACKOFF
        return delay

    def flush_backoff(self) -> None:
        """Move pods whose backoff is over to active."""
        now = self.clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, uid = heapq.heappop(self._backoff)
            if self._where.get(uid) is QueuePart.BACKOFF:
                self._push_active(uid)

    def activate_backoff(self) -> int:
        """Capacity freed up: every pod in backoff is worth a try now. Returns how many."""
        moved = 0
        for _, _, uid in self._backoff:
            if self._where.get(uid) is QueuePart.BACKOFF:
                self._push_active(uid)
                moved += 1
        self._backoff.clear()
        return moved

    def next_backoff_due(self) -> float | None:
        """When the earliest backoff ends (clock time), or None."""
        while self._backoff and self._where.get(self._backoff[0][2]) is not QueuePart.BACKOFF:
            heapq.heappop(self._backoff)
        return float(self._backoff[0][0]) if self._backoff else None

    def depth(self) -> dict[str, int]:
        counts = {part.value: 0 for part in QueuePart}
        for where in self._where.values():
            counts[where] += 1
        return counts
