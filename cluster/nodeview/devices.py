"""GPU cards in the placement core: which nodes have cards a pod fits on, and which cards it takes.

A node's cards are rows of the node table (``gpu.caldera.io/<i>`` and, for vGPU, its
``.slots`` and ``.cores``; ``cluster.model.devices``), so this is numpy over node columns
like every predicate: :func:`card_fit` is the filter both schedulers run (through
``predicates.filter_nodes``), :func:`choose_cards` the pick once the node is chosen, and the
pick is taken on the table and committed with the request, so that the binder checks every
card it takes.

What a pod asks (:func:`card_need`):

- **whole cards** (``nvidia.com/gpu``, gpushare's ``volcano.sh/gpu-number``): that many cards
  nothing is on;
- **a gpushare share** (``volcano.sh/gpu-memory``): one card with that much memory left;
- **vGPU** (``volcano.sh/vgpu-*``): per container, that many distinct cards each with a free
  slot, the memory (or percentage of the card), and the cores (100 means a card of its own;
  a card whose cores are all taken takes no pod asking for none) — HAMi's rules as Volcano
  1.14 checks them;
- **a share in thousandths** (``caldera.io/gpu-milli`` without whole cards, the OpenB
  traces): one card with that many thousandths left.

Which card (:class:`CardPolicy`): Volcano's orders — gpushare first fit by index, vGPU from
the highest index down (1.14), ``binpack`` (most used first) and ``spread`` (least used
first) as Volcano's master orders vGPU cards (#5252) — and ``best-fit`` (the card left
tightest). Whole cards go to the first free ones by index.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cluster.model.core import Pod
from cluster.model.devices import (
    FULL_CORES,
    GPU_MEMORY,
    GPU_MILLI,
    GPU_NUMBER,
    MAX_CARDS,
    NO_CARDS,
    VGPU_MEMORY,
    VGPU_NUMBER,
    WHOLE_GPU,
    Sharing,
    card_resource,
    pod_gpu_demand,
)
from cluster.model.resources import Resources
from cluster.nodeview.table import Mask, NodeTable

_GPU_RESOURCES = (WHOLE_GPU, GPU_MILLI, GPU_MEMORY, GPU_NUMBER, VGPU_NUMBER, VGPU_MEMORY)  # a device user names one

Ints = npt.NDArray[np.int64]


class CardPolicy(enum.StrEnum):
    VOLCANO = ""  # Volcano 1.14's pick: gpushare first fit by index, vGPU highest index first
    BINPACK = "binpack"
    SPREAD = "spread"
    BEST_FIT = "best-fit"
    FGD = "fgd"  # the card FGD picks (cluster/nodeview/fgd_score.py), given to choose_cards as ``first``


@dataclass(frozen=True)
class Ask:
    """What one container (or the pod) asks of each of ``count`` distinct cards.

    ``whole``: cards nothing is on, all of each taken; else ``amount`` of the card's room
    (memory or thousandths), or ``percentage`` of it, and for vGPU a slot and ``cores``.
    """

    count: int
    whole: bool = False
    amount: int = 0
    percentage: int | None = None
    cores: int = 0
    vgpu: bool = False


@dataclass(frozen=True)
class Need:
    """A pod's asks of GPU cards, in the order they are met (containers in turn)."""

    sharing: Sharing | None  # None: a share in thousandths
    asks: tuple[Ask, ...]

    @functools.cached_property
    def whole(self) -> bool:
        """Only whole cards: the node totals fit it as a request, the cards confirm the choice."""
        return all(a.whole for a in self.asks)


@functools.cache
def _whole_need(count: int) -> Need:
    return Need(Sharing.WHOLE, (Ask(count=count, whole=True),))


def card_need(pod: Pod, request: Mapping[str, int]) -> Need | None:
    """What the pod asks of cards (the module docstring); None when it asks for none.

    Asked once per pod per decision: a pod whose request (extended resources' limits included)
    names no GPU resource is answered at once."""
    named = [r for r in _GPU_RESOURCES if r in request]
    if not named:
        return None
    if named == [WHOLE_GPU]:  # whole cards alone (the common GPU pod): the request holds the limit
        return _whole_need(count) if (count := request[WHOLE_GPU]) > 0 else None
    demand = pod_gpu_demand(pod)  # from limits, as Volcano reads them
    if demand is None:
        whole = request.get(WHOLE_GPU, 0)  # whole cards asked in requests alone
        if whole:
            return _whole_need(whole)
        milli = request.get(GPU_MILLI, 0)
        return Need(None, (Ask(count=1, amount=milli),)) if milli else None
    if demand.sharing is Sharing.VGPU:
        return Need(
            Sharing.VGPU,
            tuple(
                Ask(count=c.count, amount=c.memory, percentage=c.percentage, cores=c.cores, vgpu=True)
                for c in demand.cards
                if c.count > 0
            ),
        )
    if demand.sharing is Sharing.GPUSHARE and demand.memory:
        return Need(Sharing.GPUSHARE, (Ask(count=1, amount=demand.memory),))
    if demand.sharing is Sharing.WHOLE:
        return _whole_need(demand.count)
    return Need(demand.sharing, (Ask(count=demand.count, whole=True),))


_NAMES = tuple((card_resource(i), card_resource(i, "slots"), card_resource(i, "cores")) for i in range(MAX_CARDS))


def _card_rows(table: NodeTable) -> tuple[list[int], Ints, Ints, Ints]:
    """The table's cards (indexes) and, per card, its rows of room, slots and cores (-1: none);
    cached on the table (its resource rows only grow, so the count keys it)."""

    def compute() -> tuple[list[int], Ints, Ints, Ints]:
        index = table.resource_index
        present = [i for i in range(MAX_CARDS) if _NAMES[i][0] in index]
        at = [np.asarray([index.get(_NAMES[i][d], -1) for i in present], dtype=np.intp) for d in range(3)]
        return present, at[0], at[1], at[2]

    return table.memo_until_topology_changes(("card-rows", len(table.resources)), compute)


def tracks_cards(table: NodeTable) -> bool:
    """Some node of the table tracks its cards one by one (else whole cards fit on the totals alone)."""
    return bool(_card_rows(table)[0])


def needed_cards(table: NodeTable, need: Need | None) -> Need | None:
    """``need`` as a decision on ``table`` must meet it: none for whole cards where no node tracks
    its cards one by one (the node totals hold them)."""
    return None if need is not None and need.whole and not tracks_cards(table) else need


def _node_cards(table: NodeTable, node: int) -> tuple[list[int], list[int], list[int]] | None:
    """The node's cards (indexes), each one's room and what is used of it, as lists; None for a node
    whose cards are not tracked one by one."""
    present, room, _, _ = _card_rows(table)
    if not present:
        return None
    caps, used = table.allocatable[room, node].tolist(), table.allocated[room, node].tolist()
    return (present, caps, used) if any(c > 0 for c in caps) else None


def idle_cards(table: NodeTable, node: int) -> int | None:
    """How many of the node's cards nothing is on (a whole-card ask's room); None for a node whose
    cards are not tracked one by one (only whole cards there: its totals say it all)."""
    cards = _node_cards(table, node)
    return None if cards is None else sum(1 for c, u in zip(cards[1], cards[2]) if c > 0 and u == 0)


def _whole_cards(table: NodeTable, node: int, count: int) -> Resources | None:
    """``count`` idle cards of the node, lowest index first, each taken whole (the common ask, without arrays)."""
    cards = _node_cards(table, node)
    if cards is None:
        return NO_CARDS  # not tracked one by one there: the node's totals hold it
    taken: dict[str, int] = {}
    for i, size, u in zip(*cards):
        if len(taken) == count:
            break
        if size > 0 and u == 0:
            taken[_NAMES[i][0]] = size
    return Resources(taken) if len(taken) == count else None


class CardRows:
    """The table's card rows, as (card, node) arrays: room, used, and vGPU slots and cores — of every
    node, of the one ``node`` (then the node axis has length 1), or of the rows ``nodes``. Slots and
    cores are read only when a vGPU ask needs them."""

    def __init__(self, table: NodeTable, node: int | None = None, nodes: npt.NDArray[np.intp] | None = None) -> None:
        cols: slice | npt.NDArray[np.intp]
        if nodes is not None:
            cols = nodes
        elif node is not None:
            cols = slice(node, node + 1)
        else:
            cols = slice(0, len(table))
        self.cards, room, self._slot_rows, self._core_rows = _card_rows(table)
        self._table, self._cols = table, cols
        self.cap, self.used = self._read(room)
        self._vgpu: tuple[Ints, Ints, Ints] | None = None

    def _read(self, rows: Ints) -> tuple[Ints, Ints]:
        t, cols = self._table, self._cols
        if not len(rows):
            width = len(t.allocatable[0, cols]) if t.allocatable.shape[0] else 0
            return np.zeros((0, width), dtype=np.int64), np.zeros((0, width), dtype=np.int64)
        have = (rows >= 0)[:, None]
        if isinstance(cols, slice):
            cap, used = t.allocatable[rows, cols], t.allocated[rows, cols]
        else:
            cap, used = t.allocatable[rows[:, None], cols[None, :]], t.allocated[rows[:, None], cols[None, :]]
        return np.where(have, cap, 0), np.where(have, used, 0)

    def _vgpu_rows(self) -> tuple[Ints, Ints, Ints]:
        if self._vgpu is None:
            slots, slots_used = self._read(self._slot_rows)
            _, cores_used = self._read(self._core_rows)
            self._vgpu = (slots, slots_used, cores_used)
        return self._vgpu

    @property
    def slots(self) -> Ints:
        return self._vgpu_rows()[0]

    @property
    def slots_used(self) -> Ints:
        return self._vgpu_rows()[1]

    @property
    def cores_used(self) -> Ints:
        return self._vgpu_rows()[2]

    def tracked(self) -> Mask:
        """Per node: its cards are tracked one by one (whole-only nodes are not)."""
        mask: Mask = np.asarray((self.cap > 0).any(axis=0), dtype=np.bool_)
        return mask

    def usable(self, ask: Ask) -> Mask:
        """(card, node): the card can take one of the ask's cards."""
        exists = self.cap > 0
        if ask.whole:
            idle: Mask = exists & (self.used == 0)
            return idle
        need = self.cap * ask.percentage // 100 if ask.percentage is not None else ask.amount
        ok = exists & (self.cap - self.used >= need)
        if ask.vgpu:
            ok &= (self.slots_used < self.slots) & (self.cores_used + ask.cores <= FULL_CORES)
            if ask.cores >= FULL_CORES:
                ok &= self.slots_used == 0
            if ask.cores == 0:
                ok &= self.cores_used < FULL_CORES
        usable: Mask = ok
        return usable


def card_fit(table: NodeTable, need: Need, among: Mask | None = None, rows: npt.NDArray[np.intp] | None = None) -> Mask:
    """The nodes (of ``among``) with cards for every ask — over every node, or over ``rows`` only (a
    mask of their length); a pod of several asks (vGPU containers) is confirmed node by node, the
    asks met in turn."""
    width = len(table) if rows is None else len(rows)
    mask = np.ones(width, dtype=np.bool_) if among is None else among.copy()
    if not tracks_cards(table):  # whole cards fit on the totals, shares nowhere
        return mask if need.whole else np.zeros(width, dtype=np.bool_)
    cards = CardRows(table, nodes=rows)
    untracked = ~cards.tracked() if need.whole else None
    for ask in need.asks:
        enough: Mask = cards.usable(ask).sum(axis=0) >= ask.count
        if untracked is not None:
            enough = enough | untracked
        mask &= enough
    if len(need.asks) > 1:
        for k in np.flatnonzero(mask):
            node = int(k) if rows is None else int(rows[k])
            mask[k] = choose_cards(table, node, need) is not None
    return mask


def _order(rows: CardRows, candidates: Sequence[int], sharing: Sharing | None, policy: CardPolicy) -> list[int]:
    """The candidate cards (positions in a one-node ``rows``) in the order the policy tries them."""
    used = rows.used[:, 0]
    if policy is CardPolicy.BINPACK:
        return sorted(candidates, key=lambda k: (-int(used[k]), k))
    if policy is CardPolicy.SPREAD:
        count = rows.slots_used[:, 0] if sharing is Sharing.VGPU else used  # vGPU: pods on it; else memory used
        return sorted(candidates, key=lambda k: (int(count[k]), k))
    if policy in (CardPolicy.BEST_FIT, CardPolicy.FGD) or sharing is None:  # the tightest card (the simulator's)
        return sorted(candidates, key=lambda k: (int(rows.cap[k, 0] - used[k]), k))
    if sharing is Sharing.VGPU:
        return sorted(candidates, reverse=True)
    return sorted(candidates)


def choose_cards(
    table: NodeTable, node: int, need: Need, policy: CardPolicy = CardPolicy.VOLCANO, first: int | None = None
) -> Resources | None:
    """The cards' shares the pod takes on ``node`` (table row), by the policy; None when they do not fit.
    ``first``: a card (position among the table's cards) to take first when it can (FGD's pick)."""
    if len(need.asks) == 1 and need.asks[0].whole:
        return _whole_cards(table, node, need.asks[0].count)
    rows = CardRows(table, node)
    taken: dict[str, int] = {}
    for ask in need.asks:
        usable = [int(k) for k in np.flatnonzero(rows.usable(ask)[:, 0])]
        picked = usable if ask.whole else _order(rows, usable, need.sharing, policy)
        if first is not None and first in picked and not ask.whole:
            picked = [first, *(k for k in picked if k != first)]
        if len(picked) < ask.count:
            return None
        for k in picked[: ask.count]:
            i = rows.cards[k]
            if ask.whole:
                amount = int(rows.cap[k, 0])
            elif ask.percentage is not None:
                amount = int(rows.cap[k, 0]) * ask.percentage // 100
            else:
                amount = ask.amount
            _add(taken, card_resource(i), amount)
            rows.used[k, 0] += amount  # tentatively: the next ask (container) sees it
            if ask.vgpu:
                _add(taken, card_resource(i, "slots"), 1)
                rows.slots_used[k, 0] += 1
                if ask.cores:
                    _add(taken, card_resource(i, "cores"), ask.cores)
                    rows.cores_used[k, 0] += ask.cores
    return Resources(taken)


def _add(taken: dict[str, int], name: str, amount: int) -> None:
    taken[name] = taken.get(name, 0) + amount
