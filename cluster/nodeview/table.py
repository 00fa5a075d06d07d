"""Node columns: the numpy view of nodes that predicates and scores work on.

One row per resource (``allocatable[r]`` and ``allocated[r]`` are contiguous arrays over
all nodes), so a fit check for every node is a handful of vectorised comparisons. Rows are
kept dense: a removed node's slot is filled by the last node. Label and taint lookups
are built lazily and dropped when a node's labels or taints change.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from cluster.model.core import Taint, Toleration
from cluster.model.devices import card_uuids
from cluster.model.resources import STANDARD_RESOURCES, Resources
from cluster.store.records import NodeRecord, Update

T = TypeVar("T")

Mask = npt.NDArray[np.bool_]
Codes = npt.NDArray[np.int32]

# Effects that keep a pod off a node; PreferNoSchedule only steers scoring.
FILTERING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, eq=False)
class LabelCodes:
    """One label key over all nodes as small integers: compare codes, not strings.

    ``codes[i]`` is the code of node i's value, -1 where the node lacks the label, so a
    lookup table by code with one extra slot at the end (for "absent") can be indexed by
    ``codes`` directly.
    """

    codes: Codes
    index: dict[str, int]  # value -> code, in code order
    # Masks per (operator, values), memoised by predicates; valid as long as the codes.
    masks: dict[tuple[str, tuple[str, ...]], Mask] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class TaintGroups:
    """Nodes grouped by their filtering taints (NoSchedule, NoExecute); few distinct sets in practice.

    ``tolerated`` memoises, per toleration list, the nodes whose taints it tolerates
    (None: every node); it stays valid as long as the groups do.
    """

    sets: tuple[tuple[Taint, ...], ...]
    group: Codes
    tolerated: dict[tuple[Toleration, ...], Mask | None] = field(default_factory=dict)


class NodeTable:
    """Nodes as numpy columns, updated in place from records or feed updates."""

    def __init__(self, records: Iterable[NodeRecord] = (), *, capacity: int = 64) -> None:
        self.resources: list[str] = list(STANDARD_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.allocatable = np.zeros((len(self.resources), capacity), dtype=np.int64)
        self.allocated = np.zeros((len(self.resources), capacity), dtype=np.int64)
        self.version = np.zeros(capacity, dtype=np.int64)
        self.name_hash = np.zeros(capacity, dtype=np.int64)  # a stable hash of each node's name (crc32)
        self.unschedulable = np.zeros(capacity, dtype=np.bool_)
        self.owner: list[str] = []
        self.labels: list[Mapping[str, str]] = []
        self.taints: list[tuple[Taint, ...]] = []
        self.card_ids: list[tuple[str, ...]] = []  # per node, its vGPU cards' UUIDs by index (() for other nodes)
        self._label_columns: dict[str, npt.NDArray[np.object_]] = {}
        self._label_codes: dict[str, LabelCodes] = {}
        self._taint_groups: TaintGroups | None = None
        self._owners: npt.NDArray[np.str_] | None = None
        self._derived: dict[Hashable, Any] = {}
        for record in records:
            self.upsert(record)

    def __len__(self) -> int:
        return len(self.names)

    # -- updates ----------------------------------------------------------------------

    def _grow(self, rows: int, cols: int) -> None:
        r0, c0 = self.allocatable.shape
        if rows <= r0 and cols <= c0:
            return
        rows, cols = max(rows, r0), max(cols, c0 * 2 if cols > c0 else c0)
        for attr in ("allocatable", "allocated"):
            old = getattr(self, attr)
            new = np.zeros((rows, cols), dtype=np.int64)
            new[:r0, :c0] = old
            setattr(self, attr, new)
        for attr in ("version", "unschedulable", "name_hash"):
            old = getattr(self, attr)
            new = np.zeros(cols, dtype=old.dtype)
            new[:c0] = old
            setattr(self, attr, new)

    def resource_row(self, resource: str) -> int:
        """The row index of a resource, adding a row for a resource not seen before."""
        i = self.resource_index.get(resource)
        if i is None:
            i = len(self.resources)
            self.resources.append(resource)
            self.resource_index[resource] = i
            self._grow(i + 1, self.allocatable.shape[1])
        return i

    def _vector(self, amounts: Mapping[str, int]) -> npt.NDArray[np.int64]:
        for name in amounts:
            self.resource_row(name)
        v = np.zeros(len(self.resources), dtype=np.int64)
        for name, amount in amounts.items():
            v[self.resource_index[name]] = amount
        return v

    def upsert(self, record: NodeRecord, *, newer_only: bool = False) -> bool:
        """Take ``record`` (a node new to the table, or its newer state); whether its figures were
        taken. ``newer_only``: figures older than the ones held (a binder answer's, :meth:`set_figures`,
        a later version than the feed has brought yet) stay, the rest of the record is taken."""
        i = self.index.get(record.name)
        new = i is None
        if i is None:
            i = len(self.names)
            self._grow(len(self.resources), i + 1)
            self.names.append(record.name)
            self.index[record.name] = i
            self.name_hash[i] = zlib.crc32(record.name.encode())
            self.owner.append("")
            self._owners = None
            self._derived.clear()
            self.labels.append({})
            self.taints.append(())
            self.card_ids.append(())
        self.card_ids[i] = card_uuids(record.node)
        figures = new or not newer_only or record.version >= self.version[i]
        if figures:
            alloc = self._vector(record.allocatable)
            used = self._vector(record.allocated)
            self.allocatable[:, i] = 0
            self.allocatable[: len(alloc), i] = alloc
            self.allocated[:, i] = 0
            self.allocated[: len(used), i] = used
            self.version[i] = record.version
            self.unschedulable[i] = record.unschedulable
        if self.owner[i] != record.owner:
            self.owner[i] = record.owner
            self._owners = None
            self._derived.clear()
        labels, taints = record.node.labels, tuple(record.node.taints)
        if new or labels != self.labels[i] or taints != self.taints[i]:
            self._label_columns.clear()
            self._label_codes.clear()
            self._taint_groups = None
            self._derived.clear()
        self.labels[i] = labels
        self.taints[i] = taints
        return figures

    def set_figures(
        self, name: str, allocatable: Resources, allocated: Resources, version: int, unschedulable: bool
    ) -> bool:
        """Refresh a node's figures (e.g. from a binder Conflict) without its spec; False
        when the node is unknown or these figures are older than the ones held."""
        i = self.index.get(name)
        if i is None or version < self.version[i]:
            return False
        alloc, used = self._vector(allocatable), self._vector(allocated)
        self.allocatable[:, i] = 0
        self.allocatable[: len(alloc), i] = alloc
        self.allocated[:, i] = 0
        self.allocated[: len(used), i] = used
        self.version[i] = version
        self.unschedulable[i] = unschedulable
        return True

    def set_owner(self, name: str, owner: str) -> None:
        """Record an owner change made here before the feed reports it."""
        i = self.index.get(name)
        if i is not None and self.owner[i] != owner:
            self.owner[i] = owner
            self._owners = None
            self._derived.clear()

    def remove(self, name: str) -> None:
        i = self.index.pop(name, None)
        if i is None:
            return
        last = len(self.names) - 1
        if i != last:
            moved = self.names[last]
            self.names[i] = moved
            self.index[moved] = i
            for arr in (self.allocatable, self.allocated):
                arr[:, i] = arr[:, last]
            for vec in (self.version, self.unschedulable, self.name_hash):
                vec[i] = vec[last]
            self.owner[i] = self.owner[last]
            self.labels[i] = self.labels[last]
            self.taints[i] = self.taints[last]
            self.card_ids[i] = self.card_ids[last]
        self.names.pop()
        self.card_ids.pop()
        self.owner.pop()
        self.labels.pop()
        self.taints.pop()
        self.allocatable[:, last] = 0
        self.allocated[:, last] = 0
        self._label_columns.clear()
        self._label_codes.clear()
        self._taint_groups = None
        self._owners = None
        self._derived.clear()

    def apply(self, update: Update) -> set[str]:
        """Apply a feed update's nodes (a full update replaces everything); the nodes whose figures it
        took. A delta's record older than the figures held (a binder answer told them first) leaves the
        figures: taken, it would count fewer placements than the table does, and a placement the
        answer's figures count is no longer held apart (:class:`~cluster.nodeview.assume.Assumed`)."""
        if update.full:
            for name in [n for n in self.names if n not in update.nodes]:
                self.remove(name)
        taken: set[str] = set()
        for name, record in update.nodes.items():
            if record is None:
                self.remove(name)
            elif self.upsert(record, newer_only=not update.full):
                taken.add(name)
        return taken

    def take(self, name: str, request: Resources) -> None:
        """Count a request on a node of this table (a placement decided or held)."""
        i = self.index[name]
        index = self.resource_index
        for resource, amount in request.items():
            r = index.get(resource)
            self.allocated[r if r is not None else self.resource_row(resource), i] += amount

    def give_back(self, name: str, request: Resources) -> None:
        """Undo :meth:`take` (a placement that will not happen)."""
        self.take(name, Resources() - request)

    # -- queries ----------------------------------------------------------------------

    def free(self) -> npt.NDArray[np.int64]:
        n = len(self.names)
        return self.allocatable[:, :n] - self.allocated[:, :n]

    def label_column(self, key: str) -> npt.NDArray[np.object_]:
        """Each node's value of a label (None where absent)."""
        col = self._label_columns.get(key)
        if col is None:
            col = np.array([lab.get(key) for lab in self.labels], dtype=object)
            self._label_columns[key] = col
        return col

    def label_codes(self, key: str) -> LabelCodes:
        """Each node's value of a label as an integer code (cached until labels change)."""
        n = len(self.names)
        cached = self._label_codes.get(key)
        # The length check also catches a node added with no labels and no taints, which
        # upsert does not treat as a label change.
        if cached is not None and len(cached.codes) == n:
            return cached
        index: dict[str, int] = {}
        codes = np.fromiter(
            (-1 if (v := lab.get(key)) is None else index.setdefault(v, len(index)) for lab in self.labels),
            dtype=np.int32,
            count=n,
        )
        cached = LabelCodes(codes=codes, index=index)
        self._label_codes[key] = cached
        return cached

    def taint_groups(self) -> TaintGroups:
        """Nodes grouped by their NoSchedule/NoExecute taints (cached until taints change)."""
        n = len(self.names)
        cached = self._taint_groups
        if cached is not None and len(cached.group) == n:
            return cached
        index: dict[tuple[Taint, ...], int] = {(): 0}
        group = np.fromiter(
            (
                index.setdefault(tuple(t for t in taints if t.effect in FILTERING_EFFECTS), len(index))
                for taints in self.taints
            ),
            dtype=np.int32,
            count=n,
        )
        self._taint_groups = TaintGroups(sets=tuple(index), group=group)
        return self._taint_groups

    def owner_array(self) -> npt.NDArray[np.str_]:
        """Each node's owning scheduler ('' for none), as an array (cached until an owner changes)."""
        if self._owners is None:
            self._owners = np.array(self.owner, dtype=np.str_) if self.owner else np.zeros(0, dtype=np.str_)
        return self._owners

    def memo_until_topology_changes(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, cached under ``key`` until a node is added or removed or changes
        owner, labels or taints: for values that depend on those and not on the figures
        (e.g. a scheduler's shard ranks). The value is shared: treat it as read-only."""
        if key not in self._derived:
            self._derived[key] = compute()
        return cast(T, self._derived[key])

    def snapshot(self) -> NodeTable:
        """An independent copy: a batch session's snapshot, which its statements change as they place
        (Volcano's session snapshot), while the cache's table goes on following the feed. Not a
        read-only view: every decision is taken on a table no one else changes meanwhile — a
        session's copy, or an agent worker's own replica — and its arrays are never shared
        with another writer. Label data is shared: it is replaced, not mutated."""
        c = NodeTable.__new__(NodeTable)
        c.resources = list(self.resources)
        c.resource_index = dict(self.resource_index)
        c.names = list(self.names)
        c.index = dict(self.index)
        c.allocatable = self.allocatable.copy()
        c.allocated = self.allocated.copy()
        c.version = self.version.copy()
        c.name_hash = self.name_hash.copy()
        c.unschedulable = self.unschedulable.copy()
        c.owner = list(self.owner)
        c.labels = list(self.labels)
        c.taints = list(self.taints)
        c.card_ids = list(self.card_ids)
        c._label_columns = dict(self._label_columns)
        c._label_codes = dict(self._label_codes)
        c._taint_groups = self._taint_groups
        c._owners = self._owners
        c._derived = dict(self._derived)
        return c
