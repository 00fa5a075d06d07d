"""The placed pods an agent worker needs to judge inter-pod rules, sent with each batch.

A worker holds the node table, not the pods: following every pod change in every worker
would cost each of them what the loop already pays, for the few pods that have rules. So
the loop, which follows every pod anyway, keeps the index of placed pods (nodes by name), and
hands a worker, with a batch, the placed pods the batch's rules can see — those the pods'
own affinity terms and spread constraints select, and those whose own terms select a pod of
the batch (the symmetric checks) — as :class:`PlacedRef` values. The worker indexes them over
its table and adds its own choices as it goes, so the pods of one batch count each other.
Pods without rules, in a cluster where no placed pod has inter-pod terms, carry nothing.

The window this leaves: a pod another worker placed in the last moment and the loop has not
heard of yet (about one batch's round trip) is not seen. The loop closes it between pods that
have rules of their own by handing them out one batch at a time (``AgentLoop._take``); it stays
open between such a pod and a plain pod its terms select, decided by another worker at that
moment. The batch scheduler, deciding a session at a time, has no such window.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import msgspec

from cluster.model.core import Pod
from cluster.model.label_keys import with_label_keys
from cluster.model.pod_rules import PodAffinity, PodAffinityTerm
from cluster.nodeview.pod_affinity import Placed, PlacedPods, bears_rules, placed
from cluster.nodeview.table import NodeTable
from cluster.store.records import TERMINAL_PHASES, PodRecord


class PlacedRef(msgspec.Struct, frozen=True, array_like=True):
    """What the rules read of a placed pod, on the wire."""

    uid: str
    namespace: str
    labels: dict[str, str]
    node: str
    affinity: PodAffinity | None = None
    anti_affinity: PodAffinity | None = None
    terminating: bool = False  # being deleted (topology spread leaves it out)


def _part_terms(*parts: PodAffinity | None) -> Iterator[PodAffinityTerm]:
    """Every term, required and preferred, of a podAffinity and a podAntiAffinity."""
    for part in parts:
        if part is not None:
            yield from part.required_during_scheduling_ignored_during_execution
            yield from (w.pod_affinity_term for w in part.preferred_during_scheduling_ignored_during_execution)


def _own_terms(pod: Pod) -> Iterator[PodAffinityTerm]:
    """Every term whose selected pods the pod's rules count: affinity, anti-affinity, spread."""
    a = pod.spec.affinity
    if a is not None:
        yield from _part_terms(a.pod_affinity, a.pod_anti_affinity)
    for c in pod.spec.topology_spread_constraints:
        yield PodAffinityTerm(label_selector=c.label_selector, topology_key=c.topology_key)


def _terms(entry: Placed) -> Iterator[PodAffinityTerm]:
    return _part_terms(entry.affinity, entry.anti_affinity)


class PodContext:
    """The loop's index of placed pods (every scheduler's), and what a batch needs of it."""

    def __init__(self) -> None:
        self.index = PlacedPods()
        self._rows: dict[str, int] = {}  # node name -> the row the index uses for it
        self._names: list[str] = []

    def _row(self, node: str) -> int:
        row = self._rows.get(node)
        if row is None:
            row = self._rows[node] = len(self._names)
            self._names.append(node)
        return row

    def seen(self, uid: str, rec: PodRecord | None) -> None:
        """A pod's newest record (None: gone): indexed while it is on a node and not finished."""
        if rec is None or not rec.node or rec.phase in TERMINAL_PHASES:
            self.index.remove(uid)
            return
        self.bound(uid, rec.pod, rec.node)

    def bound(self, uid: str, pod: Pod, node: str) -> None:
        row = self._row(node)
        known = self.index.pods.get(uid)
        terminating = pod.metadata.deletion_timestamp is not None
        if (
            known is not None
            and known.row == row
            and known.labels == pod.metadata.labels
            and known.terminating == terminating
        ):
            return
        pod = with_label_keys(pod)
        a = pod.spec.affinity
        self.index.add_placed(
            placed(
                uid,
                pod.metadata.namespace,
                pod.metadata.labels,
                row,
                a.pod_affinity if a is not None else None,
                a.pod_anti_affinity if a is not None else None,
                terminating,
            )
        )

    def for_batch(self, pods: Iterable[Pod]) -> list[PlacedRef]:
        """The placed pods the rules of ``pods`` can see (empty when none has a rule that sees one)."""
        index = self.index
        wanted: set[str] = set()
        alike: set[tuple[str, frozenset[tuple[str, str]]]] = set()
        for pod in map(with_label_keys, pods):
            if bears_rules(pod):
                for term in _own_terms(pod):
                    wanted.update(p.uid for p in index.matching(term, pod.metadata.namespace))
            if index.with_terms:
                key = (pod.metadata.namespace, frozenset(pod.metadata.labels.items()))
                if key in alike:
                    continue  # pods alike in namespace and labels are selected by the same terms
                alike.add(key)
                for uid in index.with_terms:
                    entry = index.pods[uid]
                    if uid not in wanted and any(index.selects(t, entry.namespace, pod) for t in _terms(entry)):
                        wanted.add(uid)
        return [self._ref(index.pods[uid]) for uid in wanted]

    def namespace_labels(self, pods: Iterable[Pod], refs: Sequence[PlacedRef]) -> dict[str, dict[str, str]]:
        """The labels of the namespaces of ``pods`` and ``refs``: what a namespaceSelector reads there."""
        known = self.index.namespace_labels
        names = {p.metadata.namespace for p in pods} | {r.namespace for r in refs}
        return {ns: dict(known[ns]) for ns in names if ns in known}

    def namespace_seen(self, name: str, labels: Mapping[str, str] | None) -> None:
        """A namespace's labels (None: it is gone)."""
        table = self.index.namespace_labels
        assert isinstance(table, dict)
        if labels is None:
            table.pop(name, None)
        else:
            table[name] = labels

    def _ref(self, entry: Placed) -> PlacedRef:
        return PlacedRef(
            uid=entry.uid,
            namespace=entry.namespace,
            labels=dict(entry.labels),
            node=self._names[entry.row],
            affinity=entry.affinity,
            anti_affinity=entry.anti_affinity,
            terminating=entry.terminating,
        )


def placed_on(
    table: NodeTable, refs: Sequence[PlacedRef], namespaces: Mapping[str, Mapping[str, str]] | None = None
) -> PlacedPods:
    """``refs`` indexed over ``table``'s rows (a pod on a node the table lacks is left out), with
    the namespaces' labels a namespaceSelector reads."""
    index = PlacedPods(namespace_labels=dict(namespaces or {}))
    rows = table.index
    for ref in refs:
        row = rows.get(ref.node)
        if row is not None:
            entry = placed(ref.uid, ref.namespace, ref.labels, row, ref.affinity, ref.anti_affinity, ref.terminating)
            index.add_placed(entry)
    return index
