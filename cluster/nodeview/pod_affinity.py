"""Where pods may go together: required inter-pod affinity and anti-affinity, and topology spread,
as masks over the node table — kube-scheduler's InterPodAffinity and PodTopologySpread filters.

The pods already on the nodes are a :class:`PlacedPods` index (by namespace and label, each with
its node row and its own required anti-affinity terms); a scheduler adds to it as it places, so
the members of one gang count each other. For a pod and a term with ``topologyKey`` K, the pods
the term selects give a set of K values (their nodes'); a node *is in* the term's domain when
its K value is one of them. Then, as kube-scheduler's filters:

- **affinity**: the placed pods that every required affinity term selects (one pod for all
  the terms) give each term a domain, and every domain must hold the node — except that when
  no such pod sits on a node with a term's label K, the pod that matches all its own terms may
  go to any node with every term's label (the first pod of a group that wants to be together);
- **anti-affinity**: no node in the domain of one of the pod's required anti-affinity terms;
  nor in the domain of an already placed pod whose own required anti-affinity selects this pod
  (the symmetric check); a node without the label K is never in a domain. Pods being deleted
  still count here;
- **topology spread** (``whenUnsatisfiable: DoNotSchedule``): per constraint, the pods its
  selector matches (in the pod's namespace; not those being deleted) counted per K value over
  the nodes that have every such constraint's label and are eligible by ``nodeAffinityPolicy``
  (Honor: the pod's node selector and required node affinity — default) and ``nodeTaintsPolicy``
  (Ignore by default; Honor: the taints the pod tolerates); a node passes when its domain's
  count (0 for a domain no eligible node is in), + 1 if the pod matches the selector itself,
  − the smallest count over the eligible domains ≤ ``maxSkew``, the smallest being 0 while
  fewer than ``minDomains`` (1 unless set) eligible domains exist; a node without the label
  K does not pass.

A term's namespaces are its ``namespaces`` and those whose labels its ``namespaceSelector``
matches (an empty one: every namespace); the pod's own when it has neither — the labels come
from the cluster's Namespace objects (:attr:`PlacedPods.namespace_labels`).
Preferred terms and ``ScheduleAnyway`` constraints only score: :mod:`cluster.nodeview.pod_scores`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from cluster.model.core import Pod
from cluster.model.label_keys import with_label_keys
from cluster.model.pod_rules import PodAffinity, PodAffinityTerm, TopologySpreadConstraint
from cluster.nodeview.predicates import affinity_mask, required_affinity, selector_mask, taint_mask
from cluster.nodeview.table import Mask, NodeTable

ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
AFFINITY = "node(s) didn't match pod affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
_LABEL_KEY = tuple[str, str, str]  # (namespace, label key, value)


@dataclass(eq=False)
class Placed:
    uid: str
    namespace: str
    labels: Mapping[str, str]
    row: int
    anti: Sequence[PodAffinityTerm]  # its own required anti-affinity terms
    affinity: PodAffinity | None = None  # its own podAffinity and podAntiAffinity, when it has any
    anti_affinity: PodAffinity | None = None
    terminating: bool = False  # being deleted: spread no longer counts it, inter-pod affinity still does


def placed(
    uid: str,
    namespace: str,
    labels: Mapping[str, str],
    row: int,
    affinity: PodAffinity | None,
    anti_affinity: PodAffinity | None,
    terminating: bool = False,
) -> Placed:
    """A placed pod's entry from what the rules read of it (its podAffinity and podAntiAffinity,
    and whether it is being deleted)."""
    anti = anti_affinity.required_during_scheduling_ignored_during_execution if anti_affinity is not None else []
    return Placed(uid, namespace, labels, row, anti, affinity or None, anti_affinity or None, terminating)


@dataclass(eq=False)
class PlacedPods:
    """The pods on a table's nodes, by uid, with indexes by namespace and by label."""

    pods: dict[str, Placed] = field(default_factory=dict)
    by_label: dict[_LABEL_KEY, set[str]] = field(default_factory=dict)
    by_namespace: dict[str, set[str]] = field(default_factory=dict)
    with_anti: set[str] = field(default_factory=set)  # pods with required anti-affinity terms
    with_terms: set[str] = field(default_factory=set)  # pods with any inter-pod (anti-)affinity term
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # what namespaceSelector reads

    def add(self, uid: str, pod: Pod, row: int) -> None:
        pod = with_label_keys(pod)
        affinity = pod.spec.affinity
        together = affinity.pod_affinity if affinity is not None and affinity.pod_affinity else None
        apart = affinity.pod_anti_affinity if affinity is not None and affinity.pod_anti_affinity else None
        meta = pod.metadata
        terminating = meta.deletion_timestamp is not None
        self.add_placed(placed(uid, meta.namespace, meta.labels, row, together, apart, terminating))

    def add_placed(self, entry: Placed) -> None:
        uid, ns = entry.uid, entry.namespace
        if uid in self.pods:
            self.remove(uid)
        self.pods[uid] = entry
        self.by_namespace.setdefault(ns, set()).add(uid)
        for k, v in entry.labels.items():
            self.by_label.setdefault((ns, k, v), set()).add(uid)
        if entry.anti:
            self.with_anti.add(uid)
        if entry.affinity is not None or entry.anti_affinity is not None:
            self.with_terms.add(uid)

    def remove(self, uid: str) -> None:
        placed = self.pods.pop(uid, None)
        if placed is None:
            return
        self.by_namespace.get(placed.namespace, set()).discard(uid)
        for k, v in placed.labels.items():
            self.by_label.get((placed.namespace, k, v), set()).discard(uid)
        self.with_anti.discard(uid)
        self.with_terms.discard(uid)

    def matching(self, term: PodAffinityTerm, namespace: str) -> list[Placed]:
        """The placed pods ``term`` (of a pod in ``namespace``) selects."""
        selector = term.label_selector
        if selector is None:
            return []
        namespaces = self.namespaces(term, namespace)
        found: set[str] = set()
        for ns in namespaces:
            if selector.match_labels:
                sets = [self.by_label.get((ns, k, v), set()) for k, v in selector.match_labels.items()]
                found |= set.intersection(*sets) if sets else set()
            else:
                found |= self.by_namespace.get(ns, set())
        return [p for uid in found if selector.matches((p := self.pods[uid]).labels)]

    def namespaces(self, term: PodAffinityTerm, namespace: str) -> Iterable[str]:
        """The namespaces ``term`` of a pod in ``namespace`` covers (kube-scheduler's rule): its
        ``namespaces`` and those whose labels its ``namespaceSelector`` matches (every one for an
        empty selector); the pod's own when it names neither."""
        chosen = term.namespace_selector
        if chosen is not None and chosen.empty:
            return {*self.by_namespace, *self.namespace_labels}  # every namespace
        if chosen is None:
            return term.namespaces or [namespace]
        return {*term.namespaces, *(ns for ns, labels in self.namespace_labels.items() if chosen.matches(labels))}

    def selects(self, term: PodAffinityTerm, owner_namespace: str, pod: Pod) -> bool:
        """Whether ``term`` of a pod in ``owner_namespace`` selects ``pod``."""
        return self.selects_labels(term, owner_namespace, pod.metadata.namespace, pod.metadata.labels)

    def selects_labels(self, term: PodAffinityTerm, owner_namespace: str, ns: str, labels: Mapping[str, str]) -> bool:
        selector = term.label_selector
        if selector is None:
            return False
        chosen = term.namespace_selector
        if chosen is not None and chosen.empty:
            in_namespace = True
        elif chosen is None:
            in_namespace = ns in term.namespaces if term.namespaces else ns == owner_namespace
        else:
            in_namespace = ns in term.namespaces or chosen.matches(self.namespace_labels.get(ns, {}))
        return in_namespace and selector.matches(labels)


def _domain(table: NodeTable, key: str, rows: Iterable[int]) -> Mask:
    """The nodes whose value of label ``key`` is one of the values at ``rows``."""
    codes = table.label_codes(key).codes
    values = {int(codes[r]) for r in rows} - {-1}
    if not values:
        return np.zeros(len(table), dtype=np.bool_)
    return np.isin(codes, np.fromiter(values, dtype=np.int32, count=len(values)))


def _has_key(table: NodeTable, key: str) -> Mask:
    result: Mask = table.label_codes(key).codes >= 0
    return result


@dataclass(frozen=True)
class Verdict:
    """The nodes a pod may go to by these rules, and how many each rule ruled out (only non-zero)."""

    mask: Mask
    failed: dict[str, int]


def bears_rules(pod: Pod) -> bool:
    """Whether the pod has an inter-pod (anti-)affinity term or a topology spread constraint."""
    a = pod.spec.affinity
    return bool(pod.spec.topology_spread_constraints) or (a is not None and bool(a.pod_affinity or a.pod_anti_affinity))


def constrained(pod: Pod, placed: PlacedPods) -> bool:
    """Whether any rule here can rule out a node for the pod (else :func:`pod_rules` is all true)."""
    spec = pod.spec
    affinity = spec.affinity
    own = affinity is not None and (
        (
            affinity.pod_affinity is not None
            and affinity.pod_affinity.required_during_scheduling_ignored_during_execution
        )
        or (
            affinity.pod_anti_affinity is not None
            and affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
        )
    )
    spread = any(c.when_unsatisfiable == "DoNotSchedule" for c in spec.topology_spread_constraints)
    return bool(own or spread or placed.with_anti)


def pod_rules(table: NodeTable, pod: Pod, placed: PlacedPods, start: Mask | None = None) -> Verdict:
    """Every rule of the module docstring for one pod, over every node of the table (the counts
    in ``failed`` only over ``start``'s nodes, when given: a node counts under the first rule that
    rules it out: affinity, anti-affinity, the placed pods' anti-affinity — the order of
    kube-scheduler's InterPodAffinity filter — then spread, which Volcano's predicates ask last)."""
    pod = with_label_keys(pod)
    n = len(table)
    ok = np.ones(n, dtype=np.bool_) if start is None else start.copy()
    failed: dict[str, int] = {}

    def keep(reason: str, passing: Mask) -> None:
        nonlocal ok
        out = int(np.count_nonzero(ok & ~passing))
        if out:
            failed[reason] = failed.get(reason, 0) + out
        ok = ok & passing

    ns = pod.metadata.namespace
    affinity = pod.spec.affinity
    if affinity is not None and affinity.pod_affinity is not None:
        terms = affinity.pod_affinity.required_during_scheduling_ignored_during_execution
        if terms:
            keep(AFFINITY, _together(table, pod, placed, terms))
    if affinity is not None and affinity.pod_anti_affinity is not None:
        for term in affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution:
            keep(ANTI_AFFINITY, ~_domain(table, term.topology_key, (p.row for p in placed.matching(term, ns))))
    for uid in placed.with_anti:  # placed pods whose anti-affinity selects this one
        other = placed.pods[uid]
        for term in other.anti:
            if placed.selects(term, other.namespace, pod):
                keep(ANTI_AFFINITY, ~_domain(table, term.topology_key, [other.row]))
    hard = [c for c in pod.spec.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
    if hard:
        keep(SPREAD, _spread(table, pod, placed, hard))
    return Verdict(mask=ok, failed=failed)


def _together(table: NodeTable, pod: Pod, placed: PlacedPods, terms: Sequence[PodAffinityTerm]) -> Mask:
    """The nodes in the domain of every required affinity term, the domains those of the placed
    pods that every term selects (one pod meeting one term and another the next does not do)."""
    ns = pod.metadata.namespace
    rows = [
        p.row
        for p in placed.matching(terms[0], ns)
        if all(placed.selects_labels(t, ns, p.namespace, p.labels) for t in terms)
    ]
    domains = [_domain(table, t.topology_key, rows) for t in terms]
    if not any(bool(domain.any()) for domain in domains):
        if not all(placed.selects(t, ns, pod) for t in terms):
            return np.zeros(len(table), dtype=np.bool_)
        domains = [_has_key(table, t.topology_key) for t in terms]  # the first of a group that wants to be together
    passing = domains[0].copy()
    for domain in domains[1:]:
        passing &= domain
    return passing


def spread_eligible(table: NodeTable, pod: Pod, c: TopologySpreadConstraint) -> Mask:
    """The nodes whose pods a spread constraint counts: those with its label, and by its
    ``nodeAffinityPolicy`` (Honor: the pod's node selector and required node affinity — the
    default) and ``nodeTaintsPolicy`` (Honor: only taints the pod tolerates; Ignore by default)."""
    eligible: Mask = table.label_codes(c.topology_key).codes >= 0
    if c.node_affinity_policy != "Ignore":
        if pod.spec.node_selector:
            eligible &= selector_mask(table, pod.spec.node_selector)
        eligible &= affinity_mask(table, required_affinity(pod))
    if c.node_taints_policy == "Honor":
        eligible &= taint_mask(table, pod.spec.tolerations)
    return eligible


def _spread(table: NodeTable, pod: Pod, placed: PlacedPods, hard: Sequence[TopologySpreadConstraint]) -> Mask:
    """The nodes every DoNotSchedule constraint lets through (see the module docstring)."""
    keyed = np.ones(len(table), dtype=np.bool_)  # only nodes with every constraint's label count
    for c in hard:
        keyed &= _has_key(table, c.topology_key)
    result = keyed.copy()
    for c in hard:
        codes = table.label_codes(c.topology_key).codes
        eligible = keyed & spread_eligible(table, pod, c)
        counts = np.zeros(int(codes.max()) + 1 if len(codes) else 0, dtype=np.int64)
        term = PodAffinityTerm(label_selector=c.label_selector, topology_key=c.topology_key)
        for p in placed.matching(term, pod.metadata.namespace):
            if eligible[p.row] and not p.terminating:
                counts[codes[p.row]] += 1
        domains = np.unique(codes[eligible])
        # Fewer domains than minDomains (1 unless set; so also none at all): the smallest count is 0.
        smallest = int(counts[domains].min()) if len(domains) >= (c.min_domains or 1) else 0
        self_match = 1 if c.label_selector is not None and c.label_selector.matches(pod.metadata.labels) else 0
        has = result & (codes >= 0)
        result[has] = counts[codes[has]] + self_match - smallest <= c.max_skew
    return result
