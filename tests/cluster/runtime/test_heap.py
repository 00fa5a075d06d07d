"""HeapKeeper: no collections during a session, the survivors frozen after it, cyclic garbage still freed."""

from __future__ import annotations

import gc
import weakref

import pytest

from cluster.runtime.heap import HeapKeeper


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_session_runs_without_the_collector_and_what_survives_it_is_frozen() -> None:
    heap = HeapKeeper(every=1000)
    try:
        with heap.session():
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        heap.release()
    assert gc.get_freeze_count() == 0


def test_cyclic_garbage_frozen_with_the_cache_is_freed_at_the_periodic_full_collection() -> None:
    heap = HeapKeeper(every=3)
    try:
        garbage = cycle()  # alive now, garbage once its last reference goes
        heap.after_session()  # frozen with everything else
        gc.collect()
        assert garbage() is not None  # a frozen cycle survives ordinary collections
        heap.after_session()
        heap.after_session()  # the third: unfreeze and collect everything
        assert garbage() is None and heap.full_collections == 1
    finally:
        heap.release()


def test_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="every: 0"):
        HeapKeeper(every=0)
