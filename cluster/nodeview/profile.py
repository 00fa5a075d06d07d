"""The placement framework both schedulers run: Filter and Score plugins, a Select policy, a Profile.

As kube-scheduler runs several schedulerNames as profiles of one framework, caldera's two
schedulers judge nodes through the same extension points. A :class:`Filter` says where a
pod may go (with the count each check ruled out, so a pod that fits nowhere says why); a
:class:`Score` rates nodes for it (higher is better); a :class:`Bonus` is a score of the
node alone; a :class:`Select` picks one node. The batch scheduler's conf plugins that
filter or score (``predicates``, ``binpack``, ``nodeorder``) *are* these Protocols — the
session asks them directly — and the agent scheduler runs a :class:`Profile` of them
(``agent_scheduler.core.profile``). The plugins themselves are in
:mod:`cluster.nodeview.plugins`: written once, usable by either scheduler.

What is being placed reaches a plugin as a :class:`Placing`: the pod, its request (the
batch chooser may ask for several alike tasks at once as one scaled request), a key alike
pods share, and — for a score normalised over the nodes the pod may go to, as
kube-scheduler's TaintToleration is — those nodes, free resources aside.

A :class:`Profile` filters, keeps the nodes of the best shard rank (own shard, then
unowned, then others: the order the batch chooser applies as a penalty,
:func:`cluster.nodeview.shard.preference_penalty`), sums the scores and bonuses there, and
selects. Plugins are pure: given the table and the placing, they return the same arrays.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import msgspec
import numpy as np
import numpy.typing as npt

from cluster.model.core import Pod
from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.nodeview.predicates import Filtered
from cluster.nodeview.shard import shard_feasible, shard_rank
from cluster.nodeview.table import Mask, NodeTable

Rows = npt.NDArray[np.intp]
Values = npt.NDArray[np.float64]
A = TypeVar("A", bound=npt.NDArray[Any])


class Placing(msgspec.Struct, frozen=True):
    """A pod being placed, as filters and scores see it.

    ``key``: placings with one key differ at most in their request (a job's task template),
    so a plugin may cache what depends on the rest under it; None, do not cache.
    ``anywhere``: the nodes every filter of the scheduler allows the pod, free resources
    aside (None when nothing filters but the plugin itself).
    """

    pod: Pod
    request: Resources
    key: Hashable | None = None
    anywhere: Callable[[], Mask] | None = None

    def without_resources(self) -> Placing:
        """The same pod as if it asked for nothing: the filters' verdict free resources aside."""
        return Placing(self.pod, Resources(), self.key, self.anywhere)


@runtime_checkable
class Filter(Protocol):
    def filter(self, table: NodeTable, placing: Placing, allowed: Mask | None) -> Filtered:
        """Where the pod may go, among ``allowed`` (the scheduler's shard; None, every node), with the
        count each check ruled out."""
        ...


@runtime_checkable
class Score(Protocol):
    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        """How good each of ``rows`` (every node when None) is for the pod, higher is better.

        A score may depend on a node's allocation only through allocated + ``placing.request``
        (the batch chooser scores "j more tasks like this one" as one task asking j + 1 times).
        """
        ...


class Bonus(Protocol):
    """A score that depends on the node alone (its labels, its name), not on the pod: summed once per
    topology of the table and added to every pod's score."""

    def bonus(self, table: NodeTable) -> Values: ...


class Select(Protocol):
    """The row to place the pod on, among ``rows`` (all of the best shard rank) with their values."""

    def select(self, rows: Rows, values: Values, rng: random.Random) -> int: ...


def all_of(verdicts: Sequence[Filtered], n: int) -> Filtered:
    """Several filters' verdicts as one: a node passes when every filter passes it."""
    result = verdicts[0]
    for f in verdicts[1:]:
        result = Filtered(mask=result.mask & f.mask, failed={**result.failed, **f.failed}, total=n)
    return result


def standing(table: NodeTable, key: Hashable, compute: Callable[[], A]) -> A:
    """An array that depends only on the table's nodes, owners, labels and taints, cached on the table
    and shared: made read-only so that no plugin writes to it."""

    def made() -> A:
        value = compute()
        value.flags.writeable = False
        return value

    return table.memo_until_topology_changes(key, made)


@dataclass(frozen=True)
class Profile:
    """Filter (every filter must pass, within the scheduler's shard); score (the sum of the scores,
    plus the sum of the bonuses); keep the best shard rank; select."""

    filters: Sequence[Filter]
    scores: Sequence[Score]
    bonuses: tuple[Bonus, ...]
    select: Select
    scheduler: str
    sharding: ShardingMode
    _keys: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Memo keys built once: hashing the plugins' dataclasses on every pod costs more than the lookup.
        shard = (self.scheduler, str(self.sharding))
        object.__setattr__(
            self, "_keys", (("shard-feasible", *shard), ("shard-rank", *shard), ("bonus", repr(self.bonuses)))
        )

    def _bonus(self, table: NodeTable) -> Values:
        total = np.zeros(len(table), dtype=np.float64)
        for b in self.bonuses:
            total = total + b.bonus(table)
        return total

    def feasible(self, table: NodeTable, placing: Placing) -> Filtered:
        """Every filter's verdict on the pod, within the shard. Each filter after the first sees only
        the nodes the ones before let through, so a node counts under the first check that rules it
        out (kube-scheduler's message: "0/5 nodes are available: 2 …, 3 …" adds up to 5)."""
        allowed = standing(table, self._keys[0], lambda: shard_feasible(table, self.scheduler, self.sharding))
        verdict = self.filters[0].filter(table, placing, allowed)
        for f in self.filters[1:]:
            verdict = all_of([verdict, f.filter(table, placing, verdict.mask)], len(table))
        return verdict

    def place(self, table: NodeTable, pod: Pod, request: Resources, rng: random.Random) -> int | Filtered:
        """The row to place the pod on, or the filters' verdict when no node is feasible."""
        placing = Placing(pod, request, anywhere=lambda: self.feasible(table, placing.without_resources()).mask)
        filtered = self.feasible(table, placing)
        rows = np.flatnonzero(filtered.mask)
        if not len(rows):
            return filtered
        rows = self.best_rank(table, rows)
        return self.select.select(rows, self.values(table, placing, rows), rng)

    def best_rank(self, table: NodeTable, rows: Rows) -> Rows:
        """Those of ``rows`` (feasible, at least one) of the best shard rank among them."""
        rank = standing(table, self._keys[1], lambda: shard_rank(table, self.scheduler, self.sharding))
        tiers = rank[rows]
        best: Rows = rows[tiers == tiers.min()]
        return best

    def values(self, table: NodeTable, placing: Placing, rows: Rows) -> Values:
        """The sum of the scores and the bonuses of ``rows`` for the pod."""
        values = self.scores[0].score(table, placing, rows) if self.scores else np.zeros(len(rows))
        for s in self.scores[1:]:
            values = values + s.score(table, placing, rows)
        if self.bonuses:
            values = values + self.bonus(table)[rows]
        return values

    def bonus(self, table: NodeTable) -> Values:
        """The sum of the bonuses of every node (kept until the table's topology changes)."""
        return standing(table, self._keys[2], lambda: self._bonus(table))
