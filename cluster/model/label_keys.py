"""``matchLabelKeys`` and ``mismatchLabelKeys``: a pod's own label values merged into its inter-pod
terms' and topology spread constraints' label selectors, as Kubernetes does.

For a pod affinity or anti-affinity term, each key of ``matchLabelKeys`` the pod has a label for
adds ``key In (the pod's value)`` to the term's selector, each of ``mismatchLabelKeys``
``key NotIn (the pod's value)`` (the API server merges them when the pod is created); for a
topology spread constraint, each of ``matchLabelKeys`` adds ``key In (the pod's value)`` (the
scheduler merges it). A key the pod has no label for adds nothing, and a term without a selector
selects nothing either way. Merging is idempotent: a requirement already in the selector (the
API server's merge) is not added twice. The rules of :mod:`cluster.nodeview.pod_affinity` read a
pod through :func:`with_label_keys`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from cluster.model.core import Affinity, Pod
from cluster.model.pod_rules import (
    LabelSelector,
    LabelSelectorRequirement,
    PodAffinity,
    PodAffinityTerm,
    TopologySpreadConstraint,
)


def _merged(
    selector: LabelSelector | None, labels: Mapping[str, str], match: Sequence[str], mismatch: Sequence[str] = ()
) -> LabelSelector | None:
    if selector is None or not (match or mismatch):
        return selector
    extra = [LabelSelectorRequirement(key=k, operator="In", values=[labels[k]]) for k in match if k in labels]
    extra += [LabelSelectorRequirement(key=k, operator="NotIn", values=[labels[k]]) for k in mismatch if k in labels]
    new = [r for r in extra if r not in selector.match_expressions]
    if not new:
        return selector
    return msgspec.structs.replace(selector, match_expressions=[*selector.match_expressions, *new])


def _term(term: PodAffinityTerm, labels: Mapping[str, str]) -> PodAffinityTerm:
    merged = _merged(term.label_selector, labels, term.match_label_keys, term.mismatch_label_keys)
    return term if merged is term.label_selector else msgspec.structs.replace(term, label_selector=merged)


def _part(part: PodAffinity | None, labels: Mapping[str, str]) -> PodAffinity | None:
    if part is None:
        return None
    return msgspec.structs.replace(
        part,
        required_during_scheduling_ignored_during_execution=[
            _term(t, labels) for t in part.required_during_scheduling_ignored_during_execution
        ],
        preferred_during_scheduling_ignored_during_execution=[
            msgspec.structs.replace(w, pod_affinity_term=_term(w.pod_affinity_term, labels))
            for w in part.preferred_during_scheduling_ignored_during_execution
        ],
    )


def _has_keys(pod: Pod) -> bool:
    a = pod.spec.affinity
    if (
        a is None or (a.pod_affinity is None and a.pod_anti_affinity is None)
    ) and not pod.spec.topology_spread_constraints:
        return False  # most pods: asked of every pod the agent loop sees placed, twice
    parts = [p for p in ((a.pod_affinity, a.pod_anti_affinity) if a is not None else ()) if p is not None]
    terms = [
        t
        for p in parts
        for t in (
            *p.required_during_scheduling_ignored_during_execution,
            *(w.pod_affinity_term for w in p.preferred_during_scheduling_ignored_during_execution),
        )
    ]
    return any(t.match_label_keys or t.mismatch_label_keys for t in terms) or any(
        c.match_label_keys for c in pod.spec.topology_spread_constraints
    )


def with_label_keys(pod: Pod) -> Pod:
    """The pod with its ``matchLabelKeys``/``mismatchLabelKeys`` merged into its selectors (itself
    when it has none: the common case costs a look at its terms)."""
    if not _has_keys(pod):
        return pod
    labels = pod.metadata.labels
    spec = pod.spec
    affinity: Affinity | None = spec.affinity
    if affinity is not None:
        affinity = msgspec.structs.replace(
            affinity,
            pod_affinity=_part(affinity.pod_affinity, labels),
            pod_anti_affinity=_part(affinity.pod_anti_affinity, labels),
        )
    spread: list[TopologySpreadConstraint] = [
        msgspec.structs.replace(c, label_selector=_merged(c.label_selector, labels, c.match_label_keys))
        for c in spec.topology_spread_constraints
    ]
    return msgspec.structs.replace(
        pod, spec=msgspec.structs.replace(spec, affinity=affinity, topology_spread_constraints=spread)
    )
