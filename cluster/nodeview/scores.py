"""Scores: how good each node is for a pod, as float arrays over all nodes (higher is better).

The pod's request is added to each node's allocated amounts before scoring, as
kube-scheduler does, so a score describes the node as it would be with the pod on it.
A resource a node has none of (zero allocatable) contributes 0 for that node.

The first functions score in [0, 1] (the agent scheduler's); the last section reproduces
kube-scheduler's integer scores in [0, 100], which Volcano's nodeorder plugin adds up and
the batch scheduler's nodeorder therefore uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from cluster.model.core import PreferredSchedulingTerm
from cluster.nodeview.predicates import term_mask
from cluster.nodeview.table import NodeTable

Scores = npt.NDArray[np.float64]
Index = npt.NDArray[np.intp]


def least_allocated(
    columns: NodeTable, request: Mapping[str, int], weights: Mapping[str, float], nodes: Index | None = None
) -> Scores:
    """Spreading: the weighted mean over ``weights``' resources of free-after-placing ÷ allocatable.

    ``nodes``: score only these node rows (in that order); None scores every node.
    """
    return _weighted_fraction(columns, request, weights, free=True, nodes=nodes)


def most_allocated(
    columns: NodeTable, request: Mapping[str, int], weights: Mapping[str, float], nodes: Index | None = None
) -> Scores:
    """Binpack: the weighted mean over ``weights``' resources of used-after-placing ÷ allocatable.

    Every weighted resource counts, requested or not; for Volcano's binpack (only the
    resources the task requests) pass the weights of the requested resources only.
    """
    return _weighted_fraction(columns, request, weights, free=False, nodes=nodes)


def _counted(
    columns: NodeTable, request: Mapping[str, int], weights: Mapping[str, float]
) -> tuple[list[tuple[float, int, int]], float]:
    """The weights that count (checked: finite, >= 0; zero ones dropped) as (weight, the resource's
    row, the amount requested) for the resources some node has, and the sum of all counted weights
    (a resource no node has adds 0 but still counts its weight)."""
    parts: list[tuple[float, int, int]] = []
    weight_sum = 0.0
    for name, weight in weights.items():
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"weights[{name}]: {weight!r} is not a finite number >= 0")
        if weight == 0:
            continue
        weight_sum += weight
        r = columns.resource_index.get(name)
        if r is not None:
            parts.append((weight, r, request.get(name, 0)))
    return parts, weight_sum


def _weighted_fraction(
    columns: NodeTable, request: Mapping[str, int], weights: Mapping[str, float], *, free: bool, nodes: Index | None
) -> Scores:
    sel: slice | Index = slice(0, len(columns)) if nodes is None else nodes
    n = len(columns) if nodes is None else len(nodes)
    total = np.zeros(n, dtype=np.float64)
    parts, weight_sum = _counted(columns, request, weights)
    for weight, r, amount in parts:
        allocatable = columns.allocatable[r, sel]
        used = columns.allocated[r, sel] + amount if amount else columns.allocated[r, sel]
        part = allocatable - used if free else used
        fraction = np.divide(part, allocatable, out=np.zeros(n, dtype=np.float64), where=allocatable > 0)
        _unit(fraction)
        if weight != 1:
            fraction *= weight
        total += fraction
    if weight_sum:
        # No clip needed: each weight·fraction <= weight, summed in the same order as
        # weight_sum, and rounding is monotone, so total <= weight_sum exactly.
        total /= weight_sum
    return total


def allocated_fraction_of(
    columns: NodeTable, request: Mapping[str, int], weights: Mapping[str, float], row: int, *, free: bool
) -> float:
    """:func:`least_allocated` (``free``) or :func:`most_allocated` of one node, with Python floats:
    the same operations in the same order, so the same double (the vector form costs ~15 µs of
    numpy calls for one node; this ~2)."""
    total = 0.0
    parts, weight_sum = _counted(columns, request, weights)
    for weight, r, amount in parts:
        allocatable = int(columns.allocatable[r, row])
        if allocatable <= 0:
            continue  # contributes 0
        used = int(columns.allocated[r, row]) + amount
        fraction = max(min(float(allocatable - used if free else used) / float(allocatable), 1.0), 0.0)
        total += fraction * weight if weight != 1 else fraction
    if weight_sum:
        total /= weight_sum
    return total


def balanced_allocation(
    columns: NodeTable,
    request: Mapping[str, int],
    resources: Sequence[str] = ("cpu", "memory"),
    nodes: Index | None = None,
) -> Scores:
    """1 − the standard deviation of the used-after-placing fractions (each capped at 1).

    As in kube-scheduler, a resource a node has none of is left out of that node's
    spread rather than counted as an empty fraction. ``nodes`` as for :func:`least_allocated`.
    """
    sel: slice | Index = slice(0, len(columns)) if nodes is None else nodes
    n = len(columns) if nodes is None else len(nodes)
    fractions: list[Scores] = []
    present: list[npt.NDArray[np.bool_]] = []
    for name in resources:
        r = columns.resource_index.get(name)
        if r is None:
            continue
        allocatable = columns.allocatable[r, sel]
        has = allocatable > 0
        used = columns.allocated[r, sel] + request.get(name, 0)
        fraction = np.divide(used, allocatable, out=np.zeros(n, dtype=np.float64), where=has)
        fractions.append(_unit(fraction))
        present.append(has)
    if not fractions:
        return np.ones(n, dtype=np.float64)
    # Sums over the resources by hand, not np.stack: this also runs for a single node, per
    # placement, where numpy's per-call overhead is the whole cost.
    count = np.zeros(n, dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    for f, has in zip(fractions, present):
        count += has
        total += f  # f is 0 where a resource is absent
    np.maximum(count, 1.0, out=count)
    mean = total / count
    spread = np.zeros(n, dtype=np.float64)
    for f, has in zip(fractions, present):
        deviation = (f - mean) * has
        spread += deviation * deviation
    score: Scores = _unit(1.0 - np.sqrt(spread / count))
    return score


def _unit(values: Scores) -> Scores:
    """Clip to [0, 1] in place (np.clip costs several times more per call on small arrays)."""
    np.minimum(values, 1.0, out=values)
    np.maximum(values, 0.0, out=values)
    return values


def preferred_affinity(columns: NodeTable, terms: Sequence[PreferredSchedulingTerm]) -> Scores:
    """The weight of the preferred terms a node matches ÷ the weight of all of them (0 without terms).

    Terms of weight 0 or less are ignored (Kubernetes allows 1 to 100).
    """
    n = len(columns)
    score = np.zeros(n, dtype=np.float64)
    weight_sum = 0
    for term in terms:
        if term.weight <= 0:
            continue
        weight_sum += term.weight
        np.add(score, float(term.weight), out=score, where=term_mask(columns, term.preference))
    if weight_sum:
        score /= weight_sum
    return score


def label_bonus(columns: NodeTable, key: str, value: str) -> Scores:
    """1 where the node has label ``key=value``, else 0 (e.g. the warmup bonus)."""
    labels = columns.label_codes(key)
    code = labels.index.get(value)
    if code is None:
        return np.zeros(len(columns), dtype=np.float64)
    bonus: Scores = (labels.codes == code).astype(np.float64)
    return bonus


# -- kube-scheduler's integer scores, as Volcano's nodeorder plugin takes them -------------
#
# Volcano's nodeorder calls kube-scheduler's score plugins and adds their scores times its
# weights, without normalising them to [0, 1]: each is an integer in [0, MAX_NODE_SCORE]
# computed with Go's integer arithmetic. These reproduce those numbers exactly, so a
# weight means what it means in Volcano. (The agent scheduler keeps the [0, 1] scores above.)

MAX_NODE_SCORE = 100
DEFAULT_MILLI_CPU = 100
"""kube-scheduler's ``DefaultMilliCPURequest``: what a container stating no cpu counts as in least/most requested."""
DEFAULT_MEMORY = 200 * 1024 * 1024
"""kube-scheduler's ``DefaultMemoryRequest``."""
_PLAIN = frozenset({"cpu", "memory"})  # the resources kube-scheduler scores even when the pod asks for none


def requested_score(
    columns: NodeTable,
    request: Mapping[str, int],
    weights: Mapping[str, int],
    *,
    most: bool,
    nodes: Index | None = None,
) -> Scores:
    """kube-scheduler's ``LeastAllocated`` (``most=False``: free after placing) or ``MostAllocated``
    score: per resource ``(capacity − requested) × 100 // capacity`` (0 past capacity) or
    ``min(requested, capacity) × 100 // capacity``, then the integer weighted mean over the
    resources the node has. ``request`` is the pod's (non-zero) request; a resource other than
    cpu and memory that the pod does not ask for is left out, as in kube-scheduler."""
    sel: slice | Index = slice(0, len(columns)) if nodes is None else nodes
    n = len(columns) if nodes is None else len(nodes)
    total = np.zeros(n, dtype=np.int64)
    weight_sum = np.zeros(n, dtype=np.int64)
    for name, weight in weights.items():
        amount = int(request.get(name, 0))
        if (amount == 0 and name not in _PLAIN) or weight == 0:
            continue
        r = columns.resource_index.get(name)
        if r is None:
            continue
        capacity = columns.allocatable[r, sel]
        requested = columns.allocated[r, sel] + amount
        has = capacity > 0
        safe = np.where(has, capacity, 1)
        if most:
            score = np.minimum(requested, capacity) * MAX_NODE_SCORE // safe
        else:
            score = np.where(requested > capacity, 0, (capacity - requested) * MAX_NODE_SCORE // safe)
        total += np.where(has, score * weight, 0)
        weight_sum += np.where(has, weight, 0)
    out: Scores = (total // np.maximum(weight_sum, 1)).astype(np.float64)
    return out


def balanced_resource_score(
    columns: NodeTable,
    request: Mapping[str, int],
    resources: Sequence[str] = ("cpu", "memory", "nvidia.com/gpu"),
    nodes: Index | None = None,
) -> Scores:
    """kube-scheduler's ``BalancedAllocation`` score: ``int((1 − std) × 100)`` of the
    used-after-placing fractions (each capped at 1) of ``resources`` the node has — the
    standard deviation of two is half their difference; a best-effort pod scores 0, and a
    resource other than cpu and memory counts only when the pod asks for it."""
    sel: slice | Index = slice(0, len(columns)) if nodes is None else nodes
    n = len(columns) if nodes is None else len(nodes)
    if all(request.get(name, 0) == 0 for name in resources):
        return np.zeros(n, dtype=np.float64)
    fractions: list[tuple[Scores, npt.NDArray[np.bool_]]] = []
    for name in resources:
        amount = int(request.get(name, 0))
        r = columns.resource_index.get(name)
        if (amount == 0 and name not in _PLAIN) or r is None:
            continue
        capacity = columns.allocatable[r, sel]
        has = capacity > 0
        fraction = np.divide(columns.allocated[r, sel] + amount, capacity, out=np.zeros(n, dtype=np.float64), where=has)
        np.minimum(fraction, 1.0, out=fraction)
        fractions.append((fraction, has))
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.float64)
    high = np.full(n, -np.inf)
    low = np.full(n, np.inf)
    for fraction, has in fractions:  # in resource order, as Go sums them
        count += has
        total += np.where(has, fraction, 0.0)
        high = np.where(has, np.maximum(high, fraction), high)
        low = np.where(has, np.minimum(low, fraction), low)
    mean = total / np.maximum(count, 1)
    spread = np.zeros(n, dtype=np.float64)
    for fraction, has in fractions:
        deviation = fraction - mean
        spread += np.where(has, deviation * deviation, 0.0)
    std = np.where(count == 2, (high - low) / 2, np.where(count > 2, np.sqrt(spread / np.maximum(count, 1)), 0.0))
    score: Scores = np.trunc((1.0 - std) * MAX_NODE_SCORE)
    return score


def preferred_affinity_weight(columns: NodeTable, terms: Sequence[PreferredSchedulingTerm]) -> Scores:
    """kube-scheduler's ``NodeAffinity`` score before normalising: the summed weight of the
    preferred terms a node matches (terms of weight 0 are skipped, as there)."""
    score = np.zeros(len(columns), dtype=np.float64)
    for term in terms:
        if term.weight == 0:
            continue
        np.add(score, float(term.weight), out=score, where=term_mask(columns, term.preference))
    return score


def default_normalize(counts: Scores, *, reverse: bool) -> Scores:
    """kube-scheduler's ``DefaultNormalizeScore``: ``100 × count // max`` over the nodes given
    (``100 −`` that when ``reverse``); all 100 (reverse) or all 0 when every count is 0."""
    top = float(counts.max()) if len(counts) else 0.0
    if top <= 0:
        return np.full(len(counts), float(MAX_NODE_SCORE) if reverse else 0.0)
    scaled = np.floor(MAX_NODE_SCORE * counts / top)
    out: Scores = MAX_NODE_SCORE - scaled if reverse else scaled
    return out
