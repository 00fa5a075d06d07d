"""The Filter, Score, Bonus and Select plugins of the placement framework, written once for both schedulers.

- :class:`NodePredicates` (Filter): every predicate of :func:`filter_nodes` — resources,
  taints, nodeSelector, required node affinity, unschedulable, shard — with Volcano's
  switches for node affinity and taints. The batch ``predicates`` plugin and the agent
  scheduler run this one class.
- :class:`Allocated` (Score): the agent's binpack or least-allocated, in [0, 1].
- :class:`Binpack` (Score): Volcano's binpack formula (the batch ``binpack`` plugin).
- :class:`NodeOrder` (Score): kube-scheduler's scores times Volcano's weights (the batch
  ``nodeorder`` plugin).
- :class:`LabelBonus`, :class:`PartitionBonus` (Bonus) and :class:`TopK` (Select): the
  agent's warmup and worker-partition preferences and its seeded draw.
- :class:`PodRules` (Filter) and :class:`PodPreferences` (Score): required and preferred
  inter-pod affinity and topology spread over a :class:`PlacedPods` index, for a profile built
  per pod (the agent's); their answers depend on where other pods sit, so the batch session
  asks the same functions directly (``Session.pod_rules``, nodeorder's ``PlacedScore``).

A batch conf plugin that filters or scores is one of these built from its decoded
arguments, so the same class, with the same arguments, can be put in an agent profile.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec
import numpy as np
import numpy.typing as npt

from cluster.model.core import Pod, Toleration
from cluster.model.resources import CPU, MEMORY, Resources
from cluster.nodeview.pod_affinity import PlacedPods, pod_rules
from cluster.nodeview.pod_scores import MAX_SCORE, affinity_score, spread_score
from cluster.nodeview.predicates import Filtered, filter_nodes, tolerates
from cluster.nodeview.profile import Placing, Rows, Values, standing
from cluster.nodeview.scores import (
    DEFAULT_MEMORY,
    DEFAULT_MILLI_CPU,
    MAX_NODE_SCORE,
    allocated_fraction_of,
    balanced_resource_score,
    default_normalize,
    label_bonus,
    least_allocated,
    most_allocated,
    preferred_affinity_weight,
    requested_score,
)
from cluster.nodeview.table import Mask, NodeTable

_TOLERATE_ALL = [Toleration(operator="Exists")]


@dataclass(frozen=True)
class NodePredicates:
    """Every predicate of :func:`filter_nodes`; ``node_affinity=False`` ignores nodeSelector and node
    affinity, ``taints=False`` tolerates every taint (Volcano's ``predicate.*Enable`` switches)."""

    node_affinity: bool = True
    taints: bool = True

    def _pod(self, pod: Pod) -> Pod:
        if self.node_affinity and self.taints:
            return pod
        spec = pod.spec
        if not self.node_affinity:
            spec = msgspec.structs.replace(spec, node_selector={}, affinity=None)
        if not self.taints:
            spec = msgspec.structs.replace(spec, tolerations=_TOLERATE_ALL)
        return msgspec.structs.replace(pod, spec=spec)

    def filter(self, table: NodeTable, placing: Placing, allowed: Mask | None) -> Filtered:
        return filter_nodes(table, self._pod(placing.pod), placing.request, allowed=allowed)


@dataclass(frozen=True)
class Allocated:
    """Binpack (``most``: fill the fullest node) or least-allocated: the weighted used fraction after placing."""

    weights: Mapping[str, float]
    most: bool = True
    # Binpack on the partition of worker ``own[0]`` of ``own[1]`` only; on the other nodes the emptiest
    # first (1 − binpack): a worker taking room from another's partition takes it where the owner,
    # filling its fullest nodes first, will come last.
    own: tuple[int, int] | None = None

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        fn = most_allocated if self.most else least_allocated
        if rows is not None and len(rows) * 8 < len(table):  # a few rows (one re-judged): gather them
            values = fn(table, placing.request, self.weights, nodes=rows)
        else:  # over every node, then the rows: contiguous columns beat gathering when most rows remain
            every = fn(table, placing.request, self.weights)
            values = every if rows is None else every[rows]
        mine = self._mine(table)
        if mine is None:
            return values
        return np.where(mine if rows is None else mine[rows], values, 1.0 - values)

    def score_of(self, table: NodeTable, placing: Placing, row: int) -> float:
        """:meth:`score` of one node, the same double (:func:`allocated_fraction_of`)."""
        value = allocated_fraction_of(table, placing.request, self.weights, row, free=not self.most)
        mine = self._mine(table)
        return value if mine is None or mine[row] else 1.0 - value

    def _mine(self, table: NodeTable) -> npt.NDArray[np.bool_] | None:
        """The nodes of ``own``'s partition (None: no partitions)."""
        if self.own is None:
            return None
        worker, workers = self.own
        mine: npt.NDArray[np.bool_] = standing(
            table, ("own-partition", worker, workers), lambda: partition_steps(table, worker, workers) == 0
        )
        return mine


@dataclass(frozen=True)
class Binpack:
    """Volcano's binpack: over the requested resources that have a weight, the weighted mean of
    (used + request) ÷ allocatable — a resource the node has none of adds 0 but still counts its
    weight — times 100 × ``weight``; 0 when the request does not fit in some such resource."""

    weight: int = 1
    resource_weights: Mapping[str, int] = field(default_factory=lambda: {CPU: 1, MEMORY: 1})

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        n = len(table) if rows is None else len(rows)
        if not self.weight:
            return np.zeros(n, dtype=np.float64)
        sel: slice | Rows = slice(0, n) if rows is None else rows
        total = np.zeros(n, dtype=np.float64)
        short = np.zeros(n, dtype=np.bool_)
        weight_sum = 0
        for name, amount in placing.request.items():
            w = self.resource_weights.get(name)
            if amount <= 0 or w is None:
                continue
            weight_sum += w
            r = table.resource_index.get(name)
            if r is None or w == 0:
                continue  # no node has any, or weight 0: adds nothing (and is not checked), as in Volcano
            capacity = table.allocatable[r, sel]
            used = table.allocated[r, sel] + amount
            has = capacity > 0
            short |= has & (used > capacity)
            total += np.divide(used * float(w), capacity, out=np.zeros(n, dtype=np.float64), where=has)
        if weight_sum:
            total /= weight_sum
        total *= MAX_NODE_SCORE * self.weight
        total[short] = 0.0
        return total


NODE_ORDER_WEIGHTS = {
    "leastrequested.weight": 1,
    "mostrequested.weight": 0,
    "balancedresource.weight": 1,
    "nodeaffinity.weight": 2,
    "tainttoleration.weight": 3,
}
"""Volcano nodeorder's weights and their defaults (weight 0 turns a score off)."""
LEAST_WEIGHTS = {CPU: 50, MEMORY: 50}  # Volcano's NodeResourcesFit args for LeastAllocated
MOST_WEIGHTS = {CPU: 1, MEMORY: 1}


def nonzero_request(pod: Pod, request: Resources) -> Resources:
    """The request kube-scheduler's least/most requested score: a container that states no cpu
    (request or limit) counts 100m, no memory 200Mi (``NonMissingContainerRequests``)."""
    extra: dict[str, int] = {}
    level = pod.spec.resources
    for name, default in ((CPU, DEFAULT_MILLI_CPU), (MEMORY, DEFAULT_MEMORY)):
        if level is not None and (name in level.requests or name in level.limits):
            continue
        missing = sum(
            1 for c in pod.spec.containers if name not in c.resources.requests and name not in c.resources.limits
        )
        if missing:
            extra[name] = missing * default
    return request + extra if extra else request


@dataclass(frozen=True)
class NodeOrder:
    """kube-scheduler's node scores, each an integer in [0, 100], times Volcano nodeorder's
    ``weights`` (:data:`NODE_ORDER_WEIGHTS`), summed. The taint score is normalised over
    ``placing.anywhere()`` (the nodes the filters allow, free resources aside)."""

    weights: Mapping[str, int] = field(default_factory=lambda: dict(NODE_ORDER_WEIGHTS))

    def _untolerated(self, table: NodeTable, pod: Pod) -> Values:
        """Per node, the PreferNoSchedule taints the pod does not tolerate."""
        tolerations = tuple(t for t in pod.spec.tolerations if t.effect in ("", "PreferNoSchedule"))

        def count() -> Values:
            return np.fromiter(
                (
                    sum(
                        1
                        for t in taints
                        if t.effect == "PreferNoSchedule" and not any(tolerates(x, t) for x in tolerations)
                    )
                    for taints in table.taints[: len(table)]
                ),
                dtype=np.float64,
                count=len(table),
            )

        return standing(table, ("untolerated-prefer-no-schedule", tolerations), count)

    def _taint_score(self, table: NodeTable, placing: Placing) -> Values:
        """kube-scheduler's TaintToleration score per node, normalised over the nodes the pod may go to."""

        def normalised() -> Values:
            counts = self._untolerated(table, placing.pod)
            allowed = placing.anywhere() if placing.anywhere is not None else ~table.unschedulable[: len(table)]
            out = np.zeros(len(table), dtype=np.float64)
            out[allowed] = default_normalize(counts[allowed], reverse=True)
            return out

        if placing.key is None:
            return normalised()
        return standing(table, ("taint-score", id(self), placing.key), normalised)

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        w, req, pod = self.weights, placing.request, placing.pod
        every: slice | Rows = slice(None) if rows is None else rows
        total = np.zeros(len(table) if rows is None else len(rows), dtype=np.float64)
        if w["leastrequested.weight"] or w["mostrequested.weight"]:
            nonzero = nonzero_request(pod, req)
            if w["leastrequested.weight"]:
                total += w["leastrequested.weight"] * requested_score(
                    table, nonzero, LEAST_WEIGHTS, most=False, nodes=rows
                )
            if w["mostrequested.weight"]:
                total += w["mostrequested.weight"] * requested_score(
                    table, nonzero, MOST_WEIGHTS, most=True, nodes=rows
                )
        if w["balancedresource.weight"]:
            total += w["balancedresource.weight"] * balanced_resource_score(table, req, nodes=rows)
        affinity = pod.spec.affinity
        terms = (
            affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
            if (affinity and affinity.node_affinity)
            else []
        )
        if w["nodeaffinity.weight"] and terms:
            total += w["nodeaffinity.weight"] * preferred_affinity_weight(table, terms)[every]
        if w["tainttoleration.weight"]:
            total += w["tainttoleration.weight"] * self._taint_score(table, placing)[every]
        return total


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
    """Worker partitions: the nodes whose name hashes to ``worker`` (mod ``workers``) first, so that
    workers sharing one view fill different nodes and rarely collide. A worker whose partition is
    full goes on to the next worker's partition, then the one after: each level ``2·weight`` above
    the next (more than the scores' range), so that two workers out of room take from different
    partitions rather than from the same nodes.

    Nodes that score alike (a fresh pool, nodes filled alike) are told apart by a key of their
    name, :data:`TIE_BREAK` apart at most: the owner of a partition takes the lowest keys first,
    a worker taking room there the highest, so that the two meet on the last of them rather than
    anywhere among them."""

    worker: int
    workers: int
    weight: float

    def bonus(self, table: NodeTable) -> Values:
        steps = partition_steps(table, self.worker, self.workers)
        levels: Values = ((self.workers - 1 - steps) * (2.0 * self.weight)).astype(np.float64)
        key = table.name_hash[: len(table)] / 2.0**32  # crc32's high bits; the partition is its low ones
        levels += np.where(steps == 0, -TIE_BREAK, TIE_BREAK) * key
        return levels


TIE_BREAK = 1e-9
"""Far below any difference of the scores between nodes that are not alike."""


def partition_steps(table: NodeTable, worker: int, workers: int) -> npt.NDArray[np.int64]:
    """Per node, how far its partition (name hash mod ``workers``) comes after ``worker``'s: 0 for
    its own, 1 for the next worker's, and so on."""
    steps: npt.NDArray[np.int64] = (table.name_hash[: len(table)] - worker) % workers
    return steps


@dataclass(frozen=True)
class TopK:
    """A seeded draw among the ``k`` best rows, so that workers holding the same view do not all chase one node.

    Rows tied with the k-th best are in the draw too (kube-scheduler's selectHost draws among all the
    rows tied for the best score): a fixed cut through a tie would hand every worker the same few
    of many equal nodes — the first of a fresh pool, say — and their commits would collide there."""

    k: int

    def select(self, rows: Rows, values: Values, rng: random.Random) -> int:
        k = min(self.k, len(rows))
        if k < len(rows):
            rows = rows[values >= kth_largest(values, k)]
        return int(rows[rng.randrange(len(rows))])


def kth_largest(values: Values, k: int) -> float:
    """The ``k``-th largest value, ties counted (what an argpartition of ``-values`` puts k-th): the
    largest ``m`` with at least ``k`` values ≥ ``m``. At most ``k`` passes of max, compare and count:
    for the small ``k`` of a top-K draw, a third of a partition's time over 5,000 nodes."""
    m = values.max()
    for _ in range(k - 1):
        if np.count_nonzero(values >= m) >= k:
            break
        m = np.where(values < m, values, -np.inf).max()
    return float(m)


@dataclass(frozen=True, eq=False)
class PodRules:
    """Required inter-pod affinity and anti-affinity and DoNotSchedule spread against ``placed``."""

    placed: PlacedPods

    def filter(self, table: NodeTable, placing: Placing, allowed: Mask | None) -> Filtered:
        verdict = pod_rules(table, placing.pod, self.placed, start=allowed)
        return Filtered(mask=verdict.mask, failed=verdict.failed, total=len(table))


@dataclass(frozen=True, eq=False)
class PodPreferences:
    """Preferred inter-pod affinity and ScheduleAnyway spread against ``placed``: kube-scheduler's
    scores (0..100, normalised over ``rows``) times their weights, divided by 100 so that weight 1
    weighs as much as a [0, 1] score such as :class:`Allocated`."""

    placed: PlacedPods
    affinity_weight: float = 2.0
    spread_weight: float = 2.0

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        n = len(table)
        candidates = np.ones(n, dtype=np.bool_)
        if rows is not None:
            candidates = np.zeros(n, dtype=np.bool_)
            candidates[rows] = True
        total = np.zeros(n, dtype=np.float64)
        for weight, found in (
            (self.affinity_weight, affinity_score(table, placing.pod, self.placed, candidates)),
            (self.spread_weight, spread_score(table, placing.pod, self.placed, candidates)),
        ):
            if found is not None and weight:
                total += found * (weight / MAX_SCORE)
        return total if rows is None else total[rows]
