"""Values worked out once per key: for immutable results of pure functions that a cluster repeats."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Memo(Generic[V]):
    """Up to ``limit`` keys kept; once full, only looked in (a long-running process does not grow)."""

    def __init__(self, limit: int = 65_536) -> None:
        self.limit = limit
        self._values: dict[Hashable, V] = {}

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value kept for ``key``, else ``make()`` (kept while there is room). Raises TypeError for an
        unhashable key, before ``make`` is called."""
        known = self._values.get(key)
        if known is None:
            known = make()
            if len(self._values) < self.limit:
                self._values[key] = known
        return known
