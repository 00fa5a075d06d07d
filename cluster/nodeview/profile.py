"""A scheduling profile over the node table: Filter plugins, Score plugins and a Select policy.

As kube-scheduler runs several schedulerNames as profiles of one framework, caldera's
schedulers judge nodes through the same extension points: a :class:`Filter` says where a
pod may go (with the reason it may go nowhere), each :class:`Score` rates the nodes the
filter left, and a :class:`Select` picks one. Shard preference is applied once, between
scoring and selection: only the nodes of the best shard rank (own, unowned, others) are
selected from — the same order the batch chooser applies as a penalty
(:func:`cluster.nodeview.shard.preference_penalty`). The agent scheduler's profile is
predicates; binpack or least-allocated, plus the warmup and partition bonuses (node-only
scores, summed once per table topology); a seeded top-K draw (:func:`agent_profile` builds it). Plugins here are pure: given the table, the
pod and its request, they return the same arrays.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from cluster.model.core import Pod
from cluster.model.labels import WARMUP_LABEL
from cluster.model.resources import Resources
from cluster.nodeview.predicates import Filtered, filter_nodes
from cluster.nodeview.scores import label_bonus, least_allocated, most_allocated
from cluster.nodeview.shard import (
    ShardingMode,
    shard_feasible,
    shard_rank,
)
from cluster.nodeview.table import NodeTable

Rows = npt.NDArray[np.intp]
Values = npt.NDArray[np.float64]
A = TypeVar("A", bound=npt.NDArray[Any])


class Filter(Protocol):
    """Where a pod may go: a mask over every node, and the reason when it is empty."""

    def filter(self, table: NodeTable, pod: Pod, request: Resources) -> Filtered: ...


class Score(Protocol):
    """How good each of ``rows`` is for the pod (higher is better)."""

    def score(self, table: NodeTable, pod: Pod, request: Resources, rows: Rows) -> Values: ...


class Bonus(Protocol):
    """A score that depends on the node alone (its labels, its name), not on the pod: summed once per
    topology of the table and added to every pod's score."""

    def bonus(self, table: NodeTable) -> Values: ...


class Select(Protocol):
    """The row to place the pod on, among ``rows`` (all of the best shard rank) with their values."""

    def select(self, rows: Rows, values: Values, rng: random.Random) -> int: ...


def _standing(table: NodeTable, key: tuple[object, ...], compute: Callable[[], A]) -> A:
    """An array that depends only on the table's nodes, owners, labels and taints, cached on the table
    and shared: made read-only so that no plugin writes to it."""

    def made() -> A:
        value = compute()
        value.flags.writeable = False
        return value

    return table.memo_until_topology_changes(key, made)


@dataclass(frozen=True)
class Predicates:
    """Every predicate of :func:`filter_nodes`, within the nodes the scheduler's shard allows."""

    scheduler: str
    sharding: ShardingMode
    _key: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", ("shard-feasible", self.scheduler, str(self.sharding)))

    def filter(self, table: NodeTable, pod: Pod, request: Resources) -> Filtered:
        allowed = _standing(table, self._key, lambda: shard_feasible(table, self.scheduler, self.sharding))
        return filter_nodes(table, pod, request, allowed=allowed)


@dataclass(frozen=True)
class Allocated:
    """Binpack (``most``: fill the fullest node) or least-allocated: the weighted used fraction after placing."""

    weights: Mapping[str, float]
    most: bool = True

    def score(self, table: NodeTable, pod: Pod, request: Resources, rows: Rows) -> Values:
        fn = most_allocated if self.most else least_allocated
        # Over every node, then the rows: contiguous columns beat gathering when most rows remain.
        return fn(table, request, self.weights)[rows]


@dataclass(frozen=True)
class LabelBonus:
    """``weight`` on nodes labelled ``key=value`` (the warmup label: images already pulled)."""

    key: str
    value: str
    weight: float

    def bonus(self, table: NodeTable) -> Values:
        return label_bonus(table, self.key, self.value) * self.weight


@dataclass(frozen=True)
class PartitionBonus:
    """``weight`` on the nodes whose name hashes to ``worker`` (mod ``workers``): workers sharing one
    view fill different nodes first and rarely collide; a worker whose partition is full falls back."""

    worker: int
    workers: int
    weight: float

    def bonus(self, table: NodeTable) -> Values:
        mine: Values = (table.name_hash[: len(table)] % self.workers == self.worker) * float(self.weight)
        return mine


@dataclass(frozen=True)
class TopK:
    """A seeded draw among the ``k`` best rows, so that workers holding the same view do not all chase one node."""

    k: int

    def select(self, rows: Rows, values: Values, rng: random.Random) -> int:
        k = min(self.k, len(rows))
        top = rows[np.argpartition(-values, k - 1)[:k]] if k < len(rows) else rows
        return int(top[rng.randrange(len(top))])


@dataclass(frozen=True)
class Profile:
    """Filter; score (the sum of the scores, plus the sum of the bonuses); prefer the best shard rank; select."""

    filter: Filter
    scores: Sequence[Score]
    bonuses: tuple[Bonus, ...]
    select: Select
    scheduler: str
    sharding: ShardingMode
    _rank_key: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _bonus_key: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def _bonus(self, table: NodeTable) -> Values:
        total = np.zeros(len(table), dtype=np.float64)
        for b in self.bonuses:
            total = total + b.bonus(table)
        return total

    def __post_init__(self) -> None:
        # Memo keys built once: hashing the plugins' dataclasses on every pod costs more than the lookup.
        object.__setattr__(self, "_rank_key", ("shard-rank", self.scheduler, str(self.sharding)))
        object.__setattr__(self, "_bonus_key", ("bonus", repr(self.bonuses)))

    def place(self, table: NodeTable, pod: Pod, request: Resources, rng: random.Random) -> int | Filtered:
        """The row to place the pod on, or the filter's verdict when no node is feasible."""
        filtered = self.filter.filter(table, pod, request)
        rows = np.flatnonzero(filtered.mask)
        if not len(rows):
            return filtered
        rank = _standing(table, self._rank_key, lambda: shard_rank(table, self.scheduler, self.sharding))
        tiers = rank[rows]
        rows = rows[tiers == tiers.min()]
        values = self.scores[0].score(table, pod, request, rows)
        for s in self.scores[1:]:
            values = values + s.score(table, pod, request, rows)
        if self.bonuses:
            values = values + _standing(table, self._bonus_key, lambda: self._bonus(table))[rows]
        return self.select.select(rows, values, rng)


def agent_profile(
    *,
    scheduler: str,
    sharding: ShardingMode,
    binpack: bool,
    weights: Mapping[str, float],
    warmup_bonus: float,
    worker: int,
    workers: int,
    partition_bonus: float,
    candidates: int,
) -> Profile:
    """The agent scheduler's profile (see the module docstring)."""
    bonuses: list[Bonus] = [LabelBonus(WARMUP_LABEL, "true", warmup_bonus)]
    if workers > 1:
        bonuses.append(PartitionBonus(worker=worker, workers=workers, weight=partition_bonus))
    return Profile(
        filter=Predicates(scheduler, sharding),
        scores=(Allocated(weights=weights, most=binpack),),
        bonuses=tuple(bonuses),
        select=TopK(candidates),
        scheduler=scheduler,
        sharding=sharding,
    )
