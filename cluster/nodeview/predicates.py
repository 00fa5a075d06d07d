"""Predicates: the nodes a pod may go to, as boolean masks over all nodes at once.

Each predicate follows the kube-scheduler filter of the same purpose. ``filter_nodes`` runs
them in :class:`Predicate` order and counts how many nodes each one ruled out, so that a
pod that fits nowhere gets kube-scheduler's kind of message ("0/12 nodes are available:
...") without anyone reading the scheduler's logs.

Label and taint lookups come from the columns' caches (``label_codes``, ``taint_groups``),
and the mask of each distinct label requirement or toleration list is memoised there, so
the work per pod is mostly a few ANDs of ready masks plus the resource comparisons. The
private functions may return such shared, read-only masks; the public ones return fresh
arrays the caller may modify.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence

import msgspec
import numpy as np

from cluster.model.core import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Taint,
    Toleration,
)
from cluster.nodeview.devices import card_fit, card_need
from cluster.nodeview.fit import shortages
from cluster.nodeview.table import LabelCodes, Mask, NodeTable

NAME_FIELD = "metadata.name"  # the only field matchFields may name

_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.ParseInt(s, 10, 64) accepts
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MEMO_LIMIT = 1024  # distinct toleration lists or label requirements remembered per cache
_EQUALITIES = 3  # up to this many values, In compares codes; beyond, it indexes a table


class Predicate(enum.StrEnum):
    """The filters, in the order they run; a node counts against the first that rules it out."""

    UNSCHEDULABLE = "unschedulable"
    SHARD = "shard"
    TAINTS = "taints"
    NODE_SELECTOR = "node_selector"
    NODE_AFFINITY = "node_affinity"
    RESOURCES = "resources"
    GPU_CARDS = "gpu_cards"


_PHRASES: dict[str, str] = {
    Predicate.UNSCHEDULABLE: "node(s) were unschedulable",
    Predicate.SHARD: "node(s) belong to another scheduler's shard",
    Predicate.TAINTS: "node(s) had untolerated taint(s)",
    Predicate.NODE_SELECTOR: "node(s) didn't match Pod's node affinity/selector",
    Predicate.NODE_AFFINITY: "node(s) didn't match Pod's node affinity/selector",
    Predicate.GPU_CARDS: "node(s) had no GPU card with room for the pod (not enough gpu fitted on this node)",
}


def insufficient(resource: str) -> str:
    """The ``Filtered.failed`` key (and message phrase) for nodes short of a resource."""
    return f"Insufficient {resource}"


class Filtered(msgspec.Struct, frozen=True, kw_only=True):
    """The feasible nodes for a pod, and how many nodes each predicate ruled out.

    ``failed`` holds only non-zero counts, keyed by :class:`Predicate` value, except that
    resources are broken down as ``"Insufficient <name>"`` (a node short of several
    resources counts under each, as in kube-scheduler).
    """

    mask: Mask
    failed: dict[str, int]
    total: int

    @property
    def available(self) -> int:
        return int(np.count_nonzero(self.mask))

    def reason(self) -> str:
        """One line in kube-scheduler's style, largest count first."""
        counts: dict[str, int] = {}
        for key, count in self.failed.items():
            phrase = _PHRASES.get(key, key)
            counts[phrase] = counts.get(phrase, 0) + count
        entries = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        head = f"{self.available}/{self.total} nodes are available"
        if not entries:
            return head + "."
        return head + ": " + ", ".join(f"{count} {phrase}" for phrase, count in entries) + "."


# -- nodeSelector -------------------------------------------------------------------------


def selector_mask(columns: NodeTable, node_selector: Mapping[str, str]) -> Mask:
    """Nodes that carry every label of a pod's ``nodeSelector`` with the same value."""
    mask = _selector(columns, node_selector)
    return np.ones(len(columns), dtype=np.bool_) if mask is None else mask.copy()


def _selector(columns: NodeTable, node_selector: Mapping[str, str]) -> Mask | None:
    """Possibly shared; None for an empty selector (every node)."""
    mask: Mask | None = None
    for key, value in node_selector.items():
        matched = _labels_in(columns.label_codes(key), (value,))
        mask = matched if mask is None else np.logical_and(mask, matched)
    return mask


# -- taints -------------------------------------------------------------------------------


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``: empty effect or key match any; Exists ignores the value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return False


def _tolerated(columns: NodeTable, tolerations: Sequence[Toleration]) -> Mask | None:
    """Read-only mask of nodes whose NoSchedule/NoExecute taints are all tolerated; None for all nodes."""
    groups = columns.taint_groups()
    key = tuple(tolerations)
    if key in groups.tolerated:
        return groups.tolerated[key]
    ok = [all(any(tolerates(t, taint) for t in key) for taint in taints) for taints in groups.sets]
    mask: Mask | None = None
    if not all(ok):
        mask = np.array(ok, dtype=np.bool_)[groups.group]
        mask.flags.writeable = False  # shared by every pod with these tolerations
    if len(groups.tolerated) >= _MEMO_LIMIT:
        groups.tolerated.clear()
    groups.tolerated[key] = mask
    return mask


def taint_mask(columns: NodeTable, tolerations: Sequence[Toleration]) -> Mask:
    """Nodes whose every NoSchedule/NoExecute taint is tolerated (PreferNoSchedule never filters)."""
    mask = _tolerated(columns, tolerations)
    return np.ones(len(columns), dtype=np.bool_) if mask is None else mask.copy()


# -- node affinity ------------------------------------------------------------------------


def required_affinity(pod: Pod) -> NodeSelector | None:
    """The pod's requiredDuringSchedulingIgnoredDuringExecution node selector, if any."""
    affinity = pod.spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return None
    return affinity.node_affinity.required_during_scheduling_ignored_during_execution


def affinity_mask(columns: NodeTable, required: NodeSelector | None) -> Mask:
    """Nodes matching any term of a required node selector (None matches every node).

    As in Kubernetes, an empty term list matches no node, and so does a term with no
    requirements or with an invalid one (unknown operator, wrong number of values, a
    non-integer Gt/Lt bound, a field other than ``metadata.name``); other terms still count.
    """
    mask = _affinity(columns, required)
    return np.ones(len(columns), dtype=np.bool_) if mask is None else mask.copy()


def _affinity(columns: NodeTable, required: NodeSelector | None) -> Mask | None:
    """Possibly shared; None when there is no required selector (every node)."""
    if required is None:
        return None
    mask: Mask | None = None
    for term in required.node_selector_terms:
        matched = _term(columns, term)
        if matched is not None:
            mask = matched if mask is None else np.logical_or(mask, matched)
    return np.zeros(len(columns), dtype=np.bool_) if mask is None else mask


def term_mask(columns: NodeTable, term: NodeSelectorTerm) -> Mask:
    """Nodes matching every requirement of one node selector term (none if it is empty or invalid)."""
    matched = _term(columns, term)
    return np.zeros(len(columns), dtype=np.bool_) if matched is None else matched.copy()


def _term(columns: NodeTable, term: NodeSelectorTerm) -> Mask | None:
    """Possibly shared; None when the term matches no node (empty or invalid)."""
    if not term.match_expressions and not term.match_fields:
        return None
    mask: Mask | None = None
    for requirement in term.match_expressions:
        matched = _label_requirement(columns, requirement)
        if matched is None:
            return None
        mask = matched if mask is None else np.logical_and(mask, matched)
    for requirement in term.match_fields:
        matched = _field_requirement(columns, requirement)
        if matched is None:
            return None
        mask = matched if mask is None else np.logical_and(mask, matched)
    return mask


def _label_requirement(columns: NodeTable, req: NodeSelectorRequirement) -> Mask | None:
    """Shared, read-only: the nodes whose labels satisfy ``req``; None when ``req`` is invalid."""
    op, values = req.operator, tuple(req.values)
    labels = columns.label_codes(req.key)
    if op == "In" and values:
        return _labels_in(labels, values)
    memo_key = (op, values)
    mask = labels.masks.get(memo_key)
    if mask is not None:
        return mask
    if op == "NotIn" and values:
        mask = ~_labels_in(labels, values)
    elif op == "Exists" and not values:
        mask = labels.codes >= 0
    elif op == "DoesNotExist" and not values:
        mask = labels.codes < 0
    elif op in ("Gt", "Lt") and len(values) == 1 and (bound := _parse_int(values[0])) is not None:
        table = np.zeros(len(labels.index) + 1, dtype=np.bool_)  # last slot: label absent
        for value, code in labels.index.items():
            number = _parse_int(value)
            table[code] = number is not None and (number > bound if op == "Gt" else number < bound)
        mask = table[labels.codes]
    else:
        return None
    return _remember(labels, memo_key, mask)


def _labels_in(labels: LabelCodes, values: tuple[str, ...]) -> Mask:
    """Shared, read-only: the nodes whose value of the label is one of ``values``."""
    memo_key = ("In", values)
    mask = labels.masks.get(memo_key)
    if mask is not None:
        return mask
    codes = [c for v in values if (c := labels.index.get(v)) is not None]
    if len(codes) <= _EQUALITIES:
        mask = np.zeros(len(labels.codes), dtype=np.bool_)
        for code in codes:
            mask |= labels.codes == code
    else:
        table = np.zeros(len(labels.index) + 1, dtype=np.bool_)  # last slot: label absent
        table[codes] = True
        mask = table[labels.codes]
    return _remember(labels, memo_key, mask)


def _remember(labels: LabelCodes, key: tuple[str, tuple[str, ...]], mask: Mask) -> Mask:
    mask.flags.writeable = False
    if len(labels.masks) >= _MEMO_LIMIT:
        labels.masks.clear()
    labels.masks[key] = mask
    return mask


def _parse_int(text: str) -> int | None:
    if not _INTEGER.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def _field_requirement(columns: NodeTable, req: NodeSelectorRequirement) -> Mask | None:
    """matchFields: ``metadata.name`` In or NotIn exactly one name; anything else is invalid."""
    if req.key != NAME_FIELD or req.operator not in ("In", "NotIn") or len(req.values) != 1:
        return None
    is_in = req.operator == "In"
    mask = np.full(len(columns), not is_in, dtype=np.bool_)
    i = columns.index.get(req.values[0])
    if i is not None:
        mask[i] = is_in
    return mask


# -- all together -------------------------------------------------------------------------


class _Narrowing:
    """The nodes still feasible, and the count each predicate took away."""

    def __init__(self, mask: Mask, total: int) -> None:
        self.mask = mask
        self.left = int(np.count_nonzero(mask))
        self.failed: dict[str, int] = {}
        if self.left < total:
            self.failed[Predicate.UNSCHEDULABLE.value] = total - self.left

    def keep(self, predicate: Predicate, passing: Mask | None) -> None:
        if passing is None:
            return
        self.mask &= passing
        left = int(np.count_nonzero(self.mask))
        if left < self.left:
            self.failed[predicate.value] = self.left - left
        self.left = left

    def keep_fitting(self, short: Mapping[str, Mask]) -> None:
        any_short = np.zeros_like(self.mask)
        for name, mask in short.items():
            count = int(np.count_nonzero(self.mask & mask))
            if count:
                self.failed[insufficient(name)] = count
                any_short |= mask
        self.mask &= ~any_short
        self.left = int(np.count_nonzero(self.mask))


def filter_nodes(columns: NodeTable, pod: Pod, request: Mapping[str, int], *, allowed: Mask | None = None) -> Filtered:
    """Every predicate for one pod, in :class:`Predicate` order.

    ``allowed`` is the shard mask (``cluster.nodeview.shard.shard_feasible``); None skips SHARD.
    A pod asking for GPU cards needs cards with room (``cluster.nodeview.devices``), after the
    node-level resources. Unschedulable nodes are never feasible, even for a pod tolerating
    ``node.kubernetes.io/unschedulable`` (kube-scheduler lets those through), because the
    binder refuses every commit to an unschedulable node.
    """
    n = len(columns)
    state = _Narrowing(~columns.unschedulable[:n], n)
    if allowed is not None and state.left:
        state.keep(Predicate.SHARD, allowed)
    if state.left:
        state.keep(Predicate.TAINTS, _tolerated(columns, pod.spec.tolerations))
    if state.left and pod.spec.node_selector:
        state.keep(Predicate.NODE_SELECTOR, _selector(columns, pod.spec.node_selector))
    if state.left:
        state.keep(Predicate.NODE_AFFINITY, _affinity(columns, required_affinity(pod)))
    if state.left:
        state.keep_fitting(shortages(columns, request))
    if state.left and request:  # an empty request: free resources aside, cards too
        need = card_need(pod, request)
        if need is not None:
            state.keep(Predicate.GPU_CARDS, card_fit(columns, need, state.mask))
    return Filtered(mask=state.mask, failed=state.failed, total=n)
