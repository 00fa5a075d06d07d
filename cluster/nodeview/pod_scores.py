"""Where pods would rather go together: preferred inter-pod affinity and anti-affinity, and
``ScheduleAnyway`` topology spread, as node scores in [0, 100] — kube-scheduler's
InterPodAffinity and PodTopologySpread scores, which Volcano's nodeorder plugin runs with the
weights ``podaffinity.weight`` and ``podtopologyspread.weight``.

Both depend on where other pods sit, so a scheduler asks them afresh for each pod it places
(the batch session through its ``PlacedScore`` point) over the :class:`PlacedPods` index (the
pods on every node count, candidates or not), and normalises them over ``candidates``, the nodes
the pod could go to now (kube-scheduler normalises over the nodes its filters let through).
Nodes outside ``candidates`` score 0; None means nothing bears on the pod (kube-scheduler's
PreScore Skip):

- **affinity**: per node, the summed weights of the pod's preferred affinity terms whose
  domain (the nodes sharing the topology value of a pod the term selects) holds the node, less
  those of its preferred anti-affinity terms; plus, symmetrically, the terms of placed pods that
  select this pod — their preferred affinity (+weight), preferred anti-affinity (−weight) and
  required affinity (+``hard_weight``, kube-scheduler's ``hardPodAffinityWeight``, 1; none at 0).
  None when no such term meets a node with its topology label; else
  100 × (s − min) / (max − min), min and max over the candidates' sums, truncated (all 0 when
  the candidates' sums are equal);
- **spread**: None without a ``ScheduleAnyway`` constraint. Per constraint, the matching pods
  (the pod's namespace) in the node's domain times log(d + 2), plus maxSkew − 1, summed and
  rounded — d the number of the constraint's values among the candidates that have every
  constraint's label (for a hostname constraint, of those candidates); candidates missing one
  of the constraints' labels score 0 and the others
  100 × (max + min − s) / max over them (100 when max is 0): fewer matching pods is better.
  Pods are counted on the nodes with every constraint's label that the constraint's
  ``nodeAffinityPolicy``/``nodeTaintsPolicy`` include, as the filter does; a hostname
  constraint counts each node's own pods. ``minDomains`` plays no part in the score.

What caldera does not model: system-default spreading (for pods without constraints, from the
Services and ReplicaSets selecting them) needs objects caldera does not read, so pods without
constraints get no spread score, as under ``defaultingType: List`` with no default constraints;
``matchLabelKeys`` is not applied (the label selector alone selects); a non-empty
``namespaceSelector`` selects no namespace (:mod:`cluster.nodeview.pod_affinity`). Terminating
pods (being deleted) are left out of the spread counts, as kube-scheduler does; the affinity
score counts them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from cluster.model.core import Pod
from cluster.model.label_keys import with_label_keys
from cluster.model.pod_rules import PodAffinity, PodAffinityTerm, TopologySpreadConstraint, WeightedPodAffinityTerm
from cluster.nodeview.pod_affinity import Placed, PlacedPods, spread_eligible
from cluster.nodeview.profile import Values
from cluster.nodeview.table import Mask, NodeTable

HOSTNAME = "kubernetes.io/hostname"
MAX_SCORE = 100.0


def wants_affinity_score(pod: Pod) -> bool:
    """Whether the pod has a preferred inter-pod affinity or anti-affinity term of its own."""
    a = pod.spec.affinity
    return a is not None and any(
        part is not None and bool(part.preferred_during_scheduling_ignored_during_execution)
        for part in (a.pod_affinity, a.pod_anti_affinity)
    )


def wants_spread_score(pod: Pod) -> bool:
    return any(c.when_unsatisfiable == "ScheduleAnyway" for c in pod.spec.topology_spread_constraints)


def affinity_score(
    table: NodeTable, pod: Pod, placed: PlacedPods, candidates: Mask, hard_weight: int = 1
) -> Values | None:
    """The affinity score of the module docstring per node, None when no term bears on the pod."""
    pod = with_label_keys(pod)
    sums = _affinity_sums(table, pod, placed, hard_weight)
    if not sums:
        return None
    raw = np.zeros(len(table), dtype=np.float64)
    for key, per in sums.items():
        raw += _lookup(table.label_codes(key).codes, per)
    out: Values = np.zeros(len(table), dtype=np.float64)
    scored = raw[candidates]
    if not len(scored):
        return out
    # The candidates' own extremes, not 0: candidates that all share one pod's domain score alike (0).
    high, low = float(scored.max()), float(scored.min())
    if high > low:
        out[candidates] = np.trunc(MAX_SCORE * (scored - low) / (high - low))
    return out


def _affinity_sums(table: NodeTable, pod: Pod, placed: PlacedPods, hard_weight: int) -> dict[str, dict[int, float]]:
    """Per topology key, the summed weights per label code of the terms bearing on the pod."""
    sums: dict[str, dict[int, float]] = {}

    def credit(key: str, row: int, amount: float) -> None:
        code = int(table.label_codes(key).codes[row])
        if code >= 0 and amount:
            per = sums.setdefault(key, {})
            per[code] = per.get(code, 0.0) + amount

    ns = pod.metadata.namespace
    a = pod.spec.affinity
    if a is not None:
        for sign, part in ((1, a.pod_affinity), (-1, a.pod_anti_affinity)):
            for w in _preferred(part):
                for other in placed.matching(w.pod_affinity_term, ns):
                    credit(w.pod_affinity_term.topology_key, other.row, sign * w.weight)
    for uid in placed.with_terms:  # placed pods whose own terms select this one
        other = placed.pods[uid]
        for term, amount in _own_terms(other, hard_weight):
            if placed.selects(term, other.namespace, pod):
                credit(term.topology_key, other.row, amount)
    return sums


def _own_terms(other: Placed, hard_weight: int) -> list[tuple[PodAffinityTerm, float]]:
    """A placed pod's terms that score a pod they select, with what each adds."""
    terms: list[tuple[PodAffinityTerm, float]] = []
    if other.affinity is not None:
        if hard_weight > 0:
            terms += [(t, hard_weight) for t in other.affinity.required_during_scheduling_ignored_during_execution]
        terms += [(w.pod_affinity_term, w.weight) for w in _preferred(other.affinity)]
    if other.anti_affinity is not None:
        terms += [(w.pod_affinity_term, -w.weight) for w in _preferred(other.anti_affinity)]
    return terms


def spread_score(table: NodeTable, pod: Pod, placed: PlacedPods, candidates: Mask) -> Values | None:
    """The spread score of the module docstring per node, None when the pod has no ScheduleAnyway constraint."""
    pod = with_label_keys(pod)
    soft = [c for c in pod.spec.topology_spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
    if not soft:
        return None
    n = len(table)
    keyed = np.ones(n, dtype=np.bool_)  # nodes with every constraint's label
    for c in soft:
        keyed &= table.label_codes(c.topology_key).codes >= 0
    scored = candidates & keyed
    raw = np.zeros(n, dtype=np.float64)
    for c in soft:
        counts = _counts(table, pod, placed, c, keyed)
        codes = table.label_codes(c.topology_key).codes
        size = int(np.count_nonzero(scored)) if c.topology_key == HOSTNAME else len(np.unique(codes[scored]))
        has = codes >= 0
        per_node = np.zeros(n, dtype=np.float64)
        per_node[has] = counts[codes[has]]
        raw += per_node * math.log(size + 2) + (c.max_skew - 1)
    raw = np.round(raw)
    out = np.zeros(n, dtype=np.float64)
    if not scored.any():
        return out
    high, low = float(raw[scored].max()), float(raw[scored].min())
    if high <= 0:
        out[scored] = MAX_SCORE
        return out
    out[scored] = np.floor(MAX_SCORE * (high + low - raw[scored]) / high)
    return out


def _counts(table: NodeTable, pod: Pod, placed: PlacedPods, c: TopologySpreadConstraint, keyed: Mask) -> Values:
    """Matching pods per code of the constraint's label, on the nodes it counts."""
    codes = table.label_codes(c.topology_key).codes
    counts = np.zeros(int(codes.max()) + 1 if len(codes) else 0, dtype=np.float64)
    if not len(counts):
        return counts
    hostname = c.topology_key == HOSTNAME
    eligible = keyed if hostname else keyed & spread_eligible(table, pod, c)
    term = PodAffinityTerm(label_selector=c.label_selector, topology_key=c.topology_key)
    for other in placed.matching(term, pod.metadata.namespace):
        if eligible[other.row] and codes[other.row] >= 0 and not other.terminating:
            counts[codes[other.row]] += 1
    return counts


def _preferred(part: PodAffinity | None) -> Sequence[WeightedPodAffinityTerm]:
    return () if part is None else part.preferred_during_scheduling_ignored_during_execution


def _lookup(codes: npt.NDArray[np.int32], per: dict[int, float]) -> Values:
    table = np.zeros(int(codes.max()) + 2 if len(codes) else 1, dtype=np.float64)
    for code, value in per.items():
        table[code] = value
    out: Values = np.where(codes >= 0, table[codes], 0.0)
    return out
