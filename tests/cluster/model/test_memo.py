"""Memo: each value worked out once per key, and no more keys kept than its limit."""

from __future__ import annotations

import functools

import pytest

from cluster.model.memo import Memo


def test_a_value_is_worked_out_once_per_key_and_a_full_memo_keeps_no_more() -> None:
    made: list[int] = []

    def make(n: int) -> str:
        made.append(n)
        return f"v{n}"

    memo: Memo[str] = Memo(limit=2)
    assert [memo.get(n, functools.partial(make, n)) for n in (1, 2, 1, 2, 3, 3)] == ["v1", "v2", "v1", "v2", "v3", "v3"]
    assert made == [1, 2, 3, 3]  # the third key is worked out each time: the memo was full
    assert len(memo) == 2


def test_an_unhashable_key_is_refused_before_anything_is_worked_out() -> None:
    memo: Memo[int] = Memo()
    with pytest.raises(TypeError):
        memo.get(([1],), lambda: pytest.fail("worked out"))
