"""The network topology over the node table: HyperNodes as a tree of domains, each a node mask.

Built from the HyperNode objects (:mod:`cluster.model.topology`) and the table's nodes, as
Volcano's scheduler cache reads them (``hyper_node_info.go``): a Node member adds the nodes
its selector picks — ``exactMatch`` by name, ``regexMatch`` by a regular expression searched
in the name (Go's ``MatchString``), ``labelMatch`` by labels (an empty selector picks none);
a HyperNode member (by exact name only) makes that HyperNode a child, whose nodes the parent
also holds. A virtual root, :data:`ROOT`, of tier one above the highest (1 without HyperNodes)
holds every node and every HyperNode without a parent, so a node outside every HyperNode is
reachable only through it.

A bad tree is said, not guessed at: a HyperNode named as a child by two parents, and a cycle,
each become a :class:`Problem` on the HyperNodes concerned (``caldera status`` lists them).
Unlike Volcano, which then stops every job with a network topology, only the bad part is left
out: the HyperNodes of a cycle, and the parents of a HyperNode with two (with their ancestors,
whose node sets would depend on which parent is right); the child itself, and everything else,
stays usable. A job whose placement would need a left-out HyperNode waits, and its reason
names the problem (:meth:`Topology.blocking`).

The parent links are checked for cycles before anything walks them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import re2

from cluster.model.core import ObjectMeta
from cluster.model.topology import (
    HYPERNODE_MEMBER,
    NODE_MEMBER,
    ExactMatch,
    HyperNode,
    HyperNodeSpec,
    LabelMatch,
    Member,
    MemberSelector,
    node_pattern,
)
from cluster.nodeview.predicates import selector_mask
from cluster.nodeview.table import Mask, NodeTable

ROOT = "<cluster-top-hypernode>"
"""The virtual HyperNode above every other, holding every node (Volcano's name for it)."""

Rows = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Domain:
    """One HyperNode as the scheduler sees it: its tier, its place in the tree, its nodes."""

    name: str
    tier: int
    tier_name: str
    parent: str | None
    children: tuple[str, ...]
    mask: Mask  # over the table's rows (read-only)
    rows: Rows  # the same nodes, as row numbers


@dataclass(frozen=True)
class Problem:
    """Why a HyperNode is left out of the tree."""

    hypernode: str
    reason: str  # Cycle | TwoParents
    message: str


@dataclass
class Topology:
    """The usable domains (the root included), the problems, and each node's lowest domain."""

    domains: dict[str, Domain]
    problems: list[Problem] = field(default_factory=list)
    left_out: dict[str, tuple[int, str]] = field(default_factory=dict)  # HyperNode -> (its tier, why)
    tier_names: dict[str, int] = field(default_factory=dict)
    leaf: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  # row -> domain index
    order: list[str] = field(default_factory=list)  # domain index -> name
    _within: dict[tuple[str, int], list[list[Domain]]] = field(default_factory=dict, repr=False)
    _of_row: list[npt.NDArray[np.intp]] | None = field(default=None, repr=False)

    @property
    def root(self) -> Domain:
        return self.domains[ROOT]

    @property
    def tiers(self) -> list[int]:
        """Every tier in use, the root's (the highest) included."""
        return sorted({d.tier for d in self.domains.values()})

    def ancestors(self, name: str) -> Iterator[Domain]:
        """The domain, its parent, …, up to the root."""
        current: str | None = name
        while current is not None:
            domain = self.domains[current]
            yield domain
            current = domain.parent

    def domains_of_rows(self) -> list[npt.NDArray[np.intp]]:
        """Per node row, the indexes (in :attr:`order`) of the domains holding it; worked out once."""
        if self._of_row is None:
            members: list[list[int]] = [[] for _ in range(len(self.leaf))]
            for d, name in enumerate(self.order):
                for r in self.domains[name].rows.tolist():
                    members[r].append(d)
            self._of_row = [np.array(m, dtype=np.intp) for m in members]
        return self._of_row

    def highest_within(self, name: str, tier: int) -> Domain | None:
        """The highest of the domain and its ancestors, climbing while the tier stays ``tier`` or
        lower (None when the domain itself is above it): where a placed job may grow."""
        top = None
        for d in self.ancestors(name):
            if d.tier > tier:
                break
            top = d
        return top

    def lca(self, a: str, b: str) -> Domain:
        """The lowest domain holding both."""
        above = {d.name for d in self.ancestors(a)}
        return next(d for d in self.ancestors(b) if d.name in above)

    def lowest_holding(self, rows: Sequence[int]) -> Domain:
        """The lowest domain holding every one of ``rows`` (the root when they are spread)."""
        if not len(rows):
            return self.root
        start = self.order[int(self.leaf[rows[0]])]
        return next(d for d in self.ancestors(start) if bool(d.mask[list(rows)].all()))

    def within(self, top: str, highest_tier: int) -> list[list[Domain]]:
        """The domains of ``top``'s subtree (``top`` included) of tier ``highest_tier`` or lower,
        grouped by tier, lowest first; names sorted within a tier. Remembered: the lists are shared,
        not to be changed."""
        key = (top, highest_tier)
        known = self._within.get(key)
        if known is None:
            known = self._within[key] = self._walk(top, highest_tier)
        return known

    def _walk(self, top: str, highest_tier: int) -> list[list[Domain]]:
        found: list[Domain] = []
        queue = [self.domains[top]]
        while queue:
            d = queue.pop()
            if d.tier <= highest_tier:
                found.append(d)
            queue.extend(self.domains[c] for c in d.children)
        by_tier: dict[int, list[Domain]] = {}
        for d in found:
            by_tier.setdefault(d.tier, []).append(d)
        return [sorted(by_tier[t], key=lambda d: d.name) for t in sorted(by_tier)]

    def blocking(self, highest_tier: int) -> list[str]:
        """The problems of the left-out HyperNodes of tier ``highest_tier`` or lower: what a job
        that found no domain may be waiting on."""
        return sorted({message for (tier, message) in self.left_out.values() if tier <= highest_tier})


def _picks(member: Member, table: NodeTable) -> Iterator[int]:
    """The rows a Node member selects."""
    s = member.selector
    n = len(table)
    if s.exact_match is not None:
        row = table.index.get(s.exact_match.name)
        if row is not None:
            yield row
    elif s.regex_match is not None:
        try:
            pattern = node_pattern(s.regex_match.pattern)
        except re2.error:
            return  # Volcano: a pattern that does not compile adds nothing (the webhook refuses it)
        yield from (i for i in range(n) if pattern.search(table.names[i]))
    elif s.label_match is not None and not s.label_match.empty and not s.label_match.match_expressions:
        yield from np.flatnonzero(selector_mask(table, s.label_match.match_labels)).tolist()  # by label codes
    elif s.label_match is not None:
        yield from (i for i in range(n) if s.label_match.matches(table.labels[i]))


def _parents(hypernodes: dict[str, HyperNode]) -> tuple[dict[str, str], list[Problem], dict[str, str]]:
    """Each HyperNode's parent (name order decides nothing: two parents is a problem, and both are
    left out), the problems, and the HyperNodes left out for them."""
    named_by: dict[str, list[str]] = {}
    for name in sorted(hypernodes):
        for m in hypernodes[name].spec.members:
            child = m.selector.exact_match.name if m.selector.exact_match is not None else None
            if m.type == HYPERNODE_MEMBER and child and child in hypernodes and child != name:
                named_by.setdefault(child, [])
                if name not in named_by[child]:
                    named_by[child].append(name)
            elif m.type == HYPERNODE_MEMBER and child == name:
                named_by.setdefault(name, []).append(name)  # itself: a cycle of one
    parents: dict[str, str] = {}
    problems: list[Problem] = []
    bad: dict[str, str] = {}  # left out -> why
    for child, by in sorted(named_by.items()):
        if len(by) == 1 and by[0] != child:
            parents[child] = by[0]
        elif len(by) > 1:
            message = (
                f"HyperNode {child} has two parents ({', '.join(by)}): {', '.join(by)} left out until one lets it go"
            )
            problems.append(Problem(child, "TwoParents", message))
            bad.update(dict.fromkeys(by, message))
        else:
            message = f"HyperNode {child} is its own member: left out"
            problems.append(Problem(child, "Cycle", message))
            bad[child] = message
    # Cycles: with one parent each, walk up from every HyperNode, colouring as we go.
    state: dict[str, int] = {}  # 1: on the current walk, 2: done
    for start in sorted(parents):
        walk: list[str] = []
        current: str | None = start
        while current is not None and state.get(current) is None:
            state[current] = 1
            walk.append(current)
            current = parents.get(current)
        if current is not None and state.get(current) == 1:  # came back onto this walk: a cycle
            cycle = walk[walk.index(current) :]
            message = f"HyperNodes {' -> '.join([*cycle, cycle[0]])} form a cycle: left out"
            problems.extend(Problem(name, "Cycle", message) for name in sorted(cycle))
            bad.update(dict.fromkeys(cycle, message))
        for name in walk:
            state[name] = 2
    # The ancestors of a left-out HyperNode are left out too (their node sets depend on it).
    for name in sorted(bad):
        current = parents.get(name)
        seen = {name}
        while current is not None and current not in seen:
            seen.add(current)
            bad.setdefault(current, bad[name])
            current = parents.get(current)
    return {c: p for c, p in parents.items() if c not in bad and p not in bad}, problems, bad


def build(table: NodeTable, hypernodes: Iterable[HyperNode]) -> Topology:
    """The tree over ``table``'s nodes (see the module docstring)."""
    objects = {hn.name: hn for hn in hypernodes}
    n = len(table)
    parents, problems, bad = _parents(objects)
    usable = sorted(name for name in objects if name not in bad)
    children: dict[str, list[str]] = {name: [] for name in usable}
    for child, parent in parents.items():
        children[parent].append(child)
    # Masks bottom-up: a HyperNode after its children (the links have no cycle now).
    masks: dict[str, Mask] = {}

    def mask_of(name: str) -> Mask:
        stack, order = [name], []
        while stack:
            current = stack.pop()
            order.append(current)
            stack.extend(c for c in children[current] if c not in masks)
        for current in reversed(order):
            if current in masks:
                continue
            m = np.zeros(n, dtype=np.bool_)
            for member in objects[current].spec.members:
                if member.type == NODE_MEMBER:
                    m[list(_picks(member, table))] = True
            for c in children[current]:
                m |= masks[c]
            m.flags.writeable = False
            masks[current] = m
        return masks[name]

    # Above every tier a HyperNode gives, left-out ones too: a bad tree does not widen "tier 1".
    top_tier = max((hn.spec.tier for hn in objects.values()), default=0) + 1
    domains: dict[str, Domain] = {}
    for name in usable:
        spec = objects[name].spec
        m = mask_of(name)
        domains[name] = Domain(
            name=name,
            tier=spec.tier,
            tier_name=spec.tier_name,
            parent=parents.get(name, ROOT),
            children=tuple(sorted(children[name])),
            mask=m,
            rows=np.flatnonzero(m),
        )
    everything = np.ones(n, dtype=np.bool_)
    everything.flags.writeable = False
    domains[ROOT] = Domain(
        name=ROOT,
        tier=top_tier,
        tier_name="",
        parent=None,
        children=tuple(name for name in usable if name not in parents),
        mask=everything,
        rows=np.arange(n, dtype=np.intp),
    )
    tier_names: dict[str, int] = {}
    for name in usable:
        spec = objects[name].spec
        if spec.tier_name:
            tier_names[spec.tier_name] = spec.tier  # two tiers under one name: the last wins, as Volcano's
    order = [ROOT, *sorted(usable, key=lambda name: (-domains[name].tier, name))]
    leaf = np.zeros(n, dtype=np.int32)  # the root's index
    for i, name in enumerate(order[1:], start=1):  # highest tier first: lower tiers overwrite
        leaf[domains[name].mask] = i
    return Topology(
        domains=domains,
        problems=problems,
        left_out={name: (objects[name].spec.tier, why) for name, why in bad.items()},
        tier_names=tier_names,
        leaf=leaf,
        order=order,
    )


def from_labels(table: NodeTable, keys: Sequence[str]) -> list[HyperNode]:
    """HyperNodes from node labels, for clusters that have labels and no HyperNode objects: ``keys``
    lowest tier first (e.g. a leaf-switch label, then a spine label); tier i + 1 holds one
    HyperNode per value of ``keys[i]``, named ``<value>`` prefixed by the key's last segment, its
    parent the HyperNode of the next key's value on the same nodes (nodes of one leaf under two
    spines make a HyperNode with two parents: a :class:`Problem`, as any)."""
    out: list[HyperNode] = []
    for tier, key in enumerate(keys, start=1):
        short = key.rsplit("/", 1)[-1]
        below = keys[tier - 2] if tier > 1 else None
        children: dict[str, set[str]] = {}  # this key's value -> the values of the key below, one pass
        for labels in table.labels:
            value = labels.get(key)
            if value is not None:
                child = labels.get(below) if below is not None else None
                children.setdefault(value, set()).update([child] if child is not None else [])
        for value in sorted(children):
            members = [
                Member(type=NODE_MEMBER, selector=MemberSelector(label_match=LabelMatch(match_labels={key: value})))
            ]
            if below is not None:
                lower_short = below.rsplit("/", 1)[-1]
                members += [
                    Member(
                        type=HYPERNODE_MEMBER,
                        selector=MemberSelector(exact_match=ExactMatch(name=f"{lower_short}-{c}")),
                    )
                    for c in sorted(children[value])
                ]
            out.append(
                HyperNode(
                    metadata=ObjectMeta(name=f"{short}-{value}"),
                    spec=HyperNodeSpec(tier=tier, tier_name=short, members=members),
                )
            )
    return out


class DomainSums:
    """Per domain, its nodes' summed allocatable and allocated amounts (one column per domain, in
    ``topology.order``), built once and then kept current placement by placement: what the
    domain-level checks and scores read, instead of summing a domain's nodes each time."""

    def __init__(self, topology: Topology, table: NodeTable) -> None:
        self.index = {name: i for i, name in enumerate(topology.order)}
        self.resource_index = dict(table.resource_index)
        columns = [topology.domains[name].rows for name in topology.order]
        self.capacity = np.stack([table.allocatable[:, rows].sum(axis=1) for rows in columns], axis=1)
        self.used = np.stack([table.allocated[:, rows].sum(axis=1) for rows in columns], axis=1)
        self._of_row = topology.domains_of_rows()

    def changed(self, row: int, request: Mapping[str, int], sign: int) -> None:
        """A placement (+1) or its undoing (−1) on node ``row``."""
        domains = self._of_row[row]
        for name, amount in request.items():
            r = self.resource_index.get(name)
            if r is not None:
                self.used[r, domains] += sign * amount

    def columns(self, domains: Sequence[Domain]) -> npt.NDArray[np.intp]:
        """The columns of ``domains``, in their order."""
        index = self.index
        return np.fromiter((index[d.name] for d in domains), dtype=np.intp, count=len(domains))

    def free(self, name: str) -> npt.NDArray[np.int64]:
        """The domain's free room per resource (rows of the table's resources)."""
        d = self.index[name]
        out: npt.NDArray[np.int64] = self.capacity[:, d] - self.used[:, d]
        return out
