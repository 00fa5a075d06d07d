"""The scheduling queue: urgent before active, priority then FIFO, exponential backoff."""

from __future__ import annotations

from agent_scheduler.queue import SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_priority_then_fifo_and_urgent_first() -> None:
    q = SchedulingQueue(Clock())
    for uid, prio in [("a", 0), ("b", 10), ("c", 0), ("d", 10)]:
        q.add(uid, prio)
    first = q.pop(1)
    assert first == ["b"]
    q.retry_now("b")
    assert q.pop(10) == ["b", "d", "a", "c"]


def test_backoff_doubles_to_ten_seconds_and_reactivates_early_on_freed_capacity() -> None:
    clock = Clock()
    q = SchedulingQueue(clock)
    q.add("p")
    delays = []
    for _ in range(6):
        assert q.pop(1) == ["p"]
        delays.append(q.back_off("p"))
        assert q.pop(1) == []
        clock.now += delays[-1]
    assert delays == [1, 2, 4, 8, 10, 10]
    assert q.pop(1) == ["p"]
    q.back_off("p")
    assert q.pop(1) == [] and q.depth()["backoff"] == 1
    assert q.activate_backoff() == 1
    assert q.pop(1) == ["p"]


def test_removed_pods_leave_every_part() -> None:
    q = SchedulingQueue(Clock())
    for uid in "abc":
        q.add(uid)
    [a] = q.pop(1)
    q.back_off(a)
    [b] = q.pop(1)
    q.retry_now(b)
    for uid in "abc":
        q.remove(uid)
    assert q.pop(10) == [] and q.activate_backoff() == 0
    assert q.depth() == {"urgent": 0, "active": 0, "backoff": 0, "inflight": 0}


def test_a_pod_is_queued_once() -> None:
    q = SchedulingQueue(Clock())
    q.add("a")
    q.add("a")
    [a] = q.pop(5)
    q.add("a")  # still in flight: the feed repeating it changes nothing
    assert q.pop(5) == [] and q.depth()["inflight"] == 1
