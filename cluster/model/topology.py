"""The network topology Volcano 1.14 describes: HyperNodes (switch/rack/zone domains) and a gang's
``networkTopology``.

A :class:`HyperNode` (``topology.volcano.sh/v1alpha1``, cluster-scoped) is one network domain
of tier ``spec.tier`` (lower is closer): its members are nodes — by exact name, by a regular
expression over node names, or by node labels — and child HyperNodes (by exact name only, as
Volcano reads them). :class:`NetworkTopologySpec` is what a PodGroup, a Volcano Job or one of
its partitions asks: the gang inside one domain of tier at most ``highestTierAllowed`` (or the
tier named ``highestTierName``), ``hard`` or ``soft``. The tree itself, over the node table,
is :mod:`cluster.nodeview.topology`.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import re2

from cluster.model.core import ObjectMeta
from cluster.model.pod_rules import LABEL_OPERATORS, LabelSelector
from cluster.model.schema import Problem

MODES = ("hard", "soft")
NODE_MEMBER, HYPERNODE_MEMBER = "Node", "HyperNode"


class NetworkTopologySpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """How far apart in the network a gang may be placed (the HyperNode tiers)."""

    mode: str = "hard"
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""

    def raw(self) -> dict[str, object]:
        """As the API holds it: the mode always, each tier field when set."""
        out: dict[str, object] = {"mode": self.mode}
        if self.highest_tier_allowed is not None:
            out["highestTierAllowed"] = self.highest_tier_allowed
        if self.highest_tier_name:
            out["highestTierName"] = self.highest_tier_name
        return out


class ExactMatch(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""


class RegexMatch(msgspec.Struct, frozen=True, kw_only=True):
    pattern: str = ""


class LabelMatch(LabelSelector, frozen=True, kw_only=True, rename="camel"):
    """A HyperNode member's label selector: as Kubernetes' except that an empty one selects nothing
    (as Volcano reads it)."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.empty and super().matches(labels)


class SubGroupPolicy(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One family of a PodGroup's subgroups (Volcano 1.14): the pods its selector matches that
    share a value for every ``matchLabelKeys`` key form one subgroup, a gang of
    ``subGroupSize`` inside its own network domain; ``minSubGroups`` of them must be ready."""

    name: str = ""
    sub_group_size: int | None = None  # CRD default 1
    min_sub_groups: int | None = None  # CRD default 0
    label_selector: LabelMatch | None = None  # absent or empty: every pod of the job
    match_label_keys: list[str] = msgspec.field(default_factory=list)
    network_topology: NetworkTopologySpec | None = None

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod with ``labels`` belongs to this family (its selector; Kubernetes' reading:
        an empty selector selects everything)."""
        s = self.label_selector
        return s is None or LabelSelector.matches(s, labels)

    def raw(self) -> dict[str, object]:
        """As the API holds it."""
        out: dict[str, object] = {"name": self.name}
        if self.sub_group_size is not None:
            out["subGroupSize"] = self.sub_group_size
        if self.min_sub_groups is not None:
            out["minSubGroups"] = self.min_sub_groups
        if self.label_selector is not None:
            selector: dict[str, object] = {}
            if self.label_selector.match_labels:
                selector["matchLabels"] = dict(self.label_selector.match_labels)
            if self.label_selector.match_expressions:
                selector["matchExpressions"] = msgspec.to_builtins(self.label_selector.match_expressions)
            out["labelSelector"] = selector
        if self.match_label_keys:
            out["matchLabelKeys"] = list(self.match_label_keys)
        if self.network_topology is not None:
            out["networkTopology"] = self.network_topology.raw()
        return out


class MemberSelector(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelMatch | None = None


class Member(msgspec.Struct, frozen=True, kw_only=True):
    type: str = NODE_MEMBER
    selector: MemberSelector = msgspec.field(default_factory=MemberSelector)


class HyperNodeSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    tier: int = 0
    tier_name: str = ""
    members: list[Member] = msgspec.field(default_factory=list)


class HyperNodeCondition(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    type: str
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class HyperNodeStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    conditions: list[HyperNodeCondition] = msgspec.field(default_factory=list)
    node_count: int = 0


class HyperNode(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One network domain: its tier and its members (nodes, child HyperNodes)."""

    api_version: str = "topology.volcano.sh/v1alpha1"
    kind: str = "HyperNode"
    metadata: ObjectMeta
    spec: HyperNodeSpec = msgspec.field(default_factory=HyperNodeSpec)
    status: HyperNodeStatus = msgspec.field(default_factory=HyperNodeStatus)

    @property
    def name(self) -> str:
        return self.metadata.name


_QUIET = re2.Options()
_QUIET.log_errors = False  # a bad pattern is reported once, as a problem, not logged by RE2 too


def node_pattern(pattern: str) -> re2._Regexp:
    """A HyperNode's ``regexMatch`` compiled as Volcano compiles it — Go's regexp, which is RE2:
    the same syntax, and matching in time linear in the name (a backtracking engine can take
    exponential time on a pattern such as ``(a|a)*b``). Raises ``re2.error``."""
    return re2.compile(pattern, options=_QUIET)


def _text(e: Exception) -> str:
    message = e.args[0] if e.args else e
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)


def hypernode_problems(hn: HyperNode) -> list[Problem]:
    """What Volcano's CRD rules and its HyperNode webhook refuse: a negative tier, no members, a
    member type other than Node or HyperNode, not exactly one selector, an empty exact name, a
    pattern that does not compile, an unknown label operator."""
    problems: list[Problem] = []
    if hn.spec.tier < 0:
        problems.append(Problem("spec.tier", f"{hn.spec.tier} is negative (expected 0 or more)"))
    if not hn.spec.members:
        problems.append(Problem("spec.members", "no members (expected at least one node or HyperNode)"))
    for i, member in enumerate(hn.spec.members):
        field = f"spec.members[{i}]"
        if member.type not in (NODE_MEMBER, HYPERNODE_MEMBER):
            problems.append(
                Problem(f"{field}.type", f"{member.type!r} is not a member type (expected Node or HyperNode)")
            )
        s = member.selector
        chosen = [
            name
            for name, v in (("exactMatch", s.exact_match), ("regexMatch", s.regex_match), ("labelMatch", s.label_match))
            if v is not None
        ]
        if len(chosen) != 1:
            problems.append(
                Problem(
                    f"{field}.selector",
                    f"{len(chosen)} selectors ({', '.join(chosen) or 'none'}; expected exactly one of exactMatch, regexMatch, labelMatch)",
                )
            )
        if s.exact_match is not None and not s.exact_match.name:
            problems.append(Problem(f"{field}.selector.exactMatch.name", "empty (expected a name)"))
        if s.regex_match is not None:
            try:
                node_pattern(s.regex_match.pattern)
            except re2.error as e:
                problems.append(
                    Problem(
                        f"{field}.selector.regexMatch.pattern",
                        f"{s.regex_match.pattern!r} does not compile: {_text(e)}",
                    )
                )
        if s.label_match is not None:
            for j, req in enumerate(s.label_match.match_expressions):
                if req.operator not in LABEL_OPERATORS:
                    problems.append(
                        Problem(
                            f"{field}.selector.labelMatch.matchExpressions[{j}].operator",
                            f"{req.operator!r} is not an operator (expected {', '.join(LABEL_OPERATORS)})",
                        )
                    )
    return problems
