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


def test_pods_handed_over_to_a_worker_go_to_it_alone_until_it_is_released() -> None:
    q = SchedulingQueue(Clock())
    for uid in "abcd":
        q.add(uid)
    assert q.pop(4) == ["a", "b", "c", "d"]
    q.retry_now("d")
    q.retry_now("d")  # twice (a failed call, then its outcome): two entries, one pod
    assert q.pop(1) == ["d"]
    for uid in "abd":
        q.hand_over(uid, "w1")
    q.retry_now("c")
    assert q.held_for("w1") == 3 and q.depth()["urgent"] == 4
    assert q.pop(10) == ["c"]  # d's second entry does not hand d to just anyone
    assert q.pop_for("w0", 10) == []
    assert q.pop_for("w1", 1) == ["a"]
    q.remove("b")  # deleted while it waited
    assert q.pop_for("w1", 10) == ["d"] and q.held_for("w1") == 0
    q.hand_over("a", "w1")
    q.hand_over("x", "w1")  # not in flight: nothing to hand over
    assert q.release("w1") == 1  # w1 is gone: a is anyone's
    assert q.pop_for("w1", 10) == [] and q.pop(10) == ["a"]
