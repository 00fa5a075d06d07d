"""The top-K draw: the k-th best value found by passes of max is the one a partition finds."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cluster.nodeview.plugins import TopK, kth_largest

# Scores with many ties (few distinct values) and without, as nodes' scores come.
values = st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, -1.0]) | st.floats(-2, 2), min_size=1, max_size=60)


@given(values, st.integers(1, 8))
def test_kth_largest_is_the_partitions_kth(xs: list[float], k: int) -> None:
    v = np.array(xs)
    k = min(k, len(v))
    assert kth_largest(v, k) == v[np.argpartition(-v, k - 1)[k - 1]]


def test_the_draw_is_among_the_rows_tied_with_the_kth_best_and_only_those() -> None:
    rows = np.arange(10)
    values = np.array([0.1, 0.9, 0.5, 0.9, 0.3, 0.7, 0.7, 0.2, 0.7, 0.0])  # 3rd best: 0.7, tied thrice
    rng = random.Random(0)
    drawn = {TopK(3).select(rows, values, rng) for _ in range(400)}
    assert drawn == {1, 3, 5, 6, 8}
