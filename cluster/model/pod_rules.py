"""What a pod says about the pods it goes with: label selectors, inter-pod affinity terms, topology spread."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class LabelSelectorRequirement(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    key: str = ""
    operator: str = ""
    values: list[str] = msgspec.field(default_factory=list)


class LabelSelector(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Kubernetes' label selector: every label and every expression must hold; an empty one
    selects everything. An operator other than In, NotIn, Exists, DoesNotExist selects nothing
    (:meth:`bad_operator` names it, for callers that refuse it)."""

    match_labels: dict[str, str] = msgspec.field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = msgspec.field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def bad_operator(self) -> str | None:
        return next((r.operator for r in self.match_expressions if r.operator not in LABEL_OPERATORS), None)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for req in self.match_expressions:
            value = labels.get(req.key)
            held = {
                "In": value is not None and value in req.values,
                "NotIn": value is None or value not in req.values,
                "Exists": value is not None,
                "DoesNotExist": value is None,
            }.get(req.operator, False)
            if not held:
                return False
        return True


class PodAffinityTerm(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Pods matching ``label_selector`` in ``namespaces`` (the pod's own when empty; every one with an
    empty ``namespace_selector``), counted per value of the node label ``topology_key``."""

    label_selector: LabelSelector | None = None  # None selects no pod
    namespaces: list[str] = msgspec.field(default_factory=list)
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] = msgspec.field(default_factory=list)
    mismatch_label_keys: list[str] = msgspec.field(default_factory=list)


class WeightedPodAffinityTerm(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = msgspec.field(default_factory=PodAffinityTerm)


class PodAffinity(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pod's podAffinity or podAntiAffinity."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = msgspec.field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = msgspec.field(
        default_factory=list
    )

    def __bool__(self) -> bool:
        return bool(
            self.required_during_scheduling_ignored_during_execution
            or self.preferred_during_scheduling_ignored_during_execution
        )


class TopologySpreadConstraint(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Pods matching ``label_selector`` spread over the values of the node label ``topology_key``."""

    max_skew: int = 1
    topology_key: str = ""
    when_unsatisfiable: str = "DoNotSchedule"  # or ScheduleAnyway (a score only)
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: list[str] = msgspec.field(default_factory=list)
