"""GPUs per card, as columns over nodes: what each card has left, and which cards a pod takes.

A shared-GPU placement is a node *and* a card. ``Cards`` holds, for a set of nodes, the
cpu and memory left and a matrix of GPU thousandths left per card (``left[node, card]``,
1000 for a free card; a node with fewer cards than the widest has zeros past its last,
and ``count`` says how many it has). A ``Task`` is what one pod asks: cpu, memory, and
``gpus`` cards of ``milli`` thousandths each — a share (one card, ``0 < milli < 1000``),
whole cards (``milli == 1000``) or none. The units and rules are those of Weng et al.
("Beware of Fragmentation", USENIX ATC '23) and their simulator, so that the placement
policies built on this (``cluster/nodeview/gpu_policies.py``) reproduce their figures:
a card hosts a share when it has at least the share left; whole cards are taken among
the fully free ones, lowest index first.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np
import numpy.typing as npt

MILLI = 1000  # thousandths of a card: a whole card

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Task(msgspec.Struct, frozen=True, kw_only=True):
    """What one pod asks: cpu (milli), memory (MiB), ``gpus`` cards of ``milli`` each.

    ``models``: the GPU models it may run on (empty: any). A task with whole cards has
    ``milli == 1000``; a share has ``gpus == 1`` and ``0 < milli < 1000``.
    """

    cpu: int
    memory: int = 0
    gpus: int = 0
    milli: int = 0
    models: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.gpus < 0 or not 0 <= self.milli <= MILLI or (self.gpus == 0) != (self.milli == 0):
            raise ValueError(
                f"a task asks for gpus {self.gpus} of milli {self.milli} (expected both 0, or gpus ≥ 1 of 1–1000)"
            )
        if self.gpus > 1 and self.milli < MILLI:
            raise ValueError(f"a task asks for {self.gpus} shares of {self.milli} (a share is of one card)")

    @property
    def shared(self) -> bool:
        """A share of one card, not whole cards."""
        return self.gpus == 1 and self.milli < MILLI

    @property
    def gpu_milli(self) -> int:
        """All it asks of GPUs, in thousandths."""
        return self.gpus * self.milli


class Cards:
    """The cpu, memory and per-card GPU left on a set of nodes, updated as pods are placed."""

    def __init__(
        self,
        cpu: Sequence[int],
        memory: Sequence[int],
        gpus: Sequence[int],
        models: Sequence[str],
    ) -> None:
        """Empty nodes: ``cpu`` milli, ``memory`` MiB, ``gpus`` whole cards and the GPU model ('' for none)."""
        n = len(cpu)
        if not len(memory) == len(gpus) == len(models) == n:
            raise ValueError("cpu, memory, gpus and models name the same nodes")
        self.cpu: IntArray = np.asarray(cpu, dtype=np.int64).copy()
        self.memory: IntArray = np.asarray(memory, dtype=np.int64).copy()
        self.count: IntArray = np.asarray(gpus, dtype=np.int64).copy()
        width = int(self.count.max()) if n else 0
        self.left: IntArray = np.where(np.arange(max(width, 1))[None, :] < self.count[:, None], MILLI, 0).astype(
            np.int64
        )
        self.model_names: tuple[str, ...] = tuple(sorted({m for m in models if m}))
        code = {m: i + 1 for i, m in enumerate(self.model_names)}
        self.model: IntArray = np.asarray([code.get(m, 0) for m in models], dtype=np.int64)  # 0: no GPUs

    @classmethod
    def copy_of(cls, other: Cards) -> Cards:
        """An independent copy: placing on it leaves ``other`` as it was."""
        c = cls.__new__(cls)
        c.cpu, c.memory, c.count, c.left = other.cpu.copy(), other.memory.copy(), other.count.copy(), other.left.copy()
        c.model_names, c.model = other.model_names, other.model.copy()
        return c

    def __len__(self) -> int:
        return len(self.cpu)

    @property
    def total_milli(self) -> int:
        """Every card's thousandths, free or not: the cluster's GPU capacity."""
        return int(self.count.sum()) * MILLI

    def free_milli(self) -> int:
        return int(self.left.sum())

    def allows(self, task: Task) -> BoolArray:
        """Which nodes' GPU model the task may run on (all, for a task without GPUs or models)."""
        if task.gpus == 0 or not task.models:
            return np.ones(len(self), dtype=np.bool_)
        codes = [i + 1 for i, m in enumerate(self.model_names) if m in task.models]
        return np.isin(self.model, codes)

    def fits(self, task: Task) -> BoolArray:
        """The nodes that can host the task now: cpu, memory, model, and enough cards with room."""
        ok = (self.cpu >= task.cpu) & (self.memory >= task.memory)
        if task.gpus:
            ok &= self.allows(task) & ((self.left >= task.milli).sum(axis=1) >= task.gpus)
        return ok

    def take(self, node: int, cards: Sequence[int], task: Task) -> None:
        """Place the task on ``node``, its GPUs on ``cards`` (which must have room)."""
        if len(cards) != task.gpus or any(self.left[node, c] < task.milli for c in cards):
            raise ValueError(f"cards {list(cards)} of node {node} cannot host {task}")
        self.cpu[node] -= task.cpu
        self.memory[node] -= task.memory
        for c in cards:
            self.left[node, c] -= task.milli


def whole_cards(left: IntArray, gpus: int) -> tuple[int, ...]:
    """The first ``gpus`` fully free cards of one node's row, by index (the simulator's exclusive pick)."""
    free = np.flatnonzero(left == MILLI)
    return tuple(int(c) for c in free[:gpus])


def best_card(left: IntArray, milli: int) -> int:
    """The card with the least left that still holds ``milli`` (lowest index on ties); -1 when none."""
    room = np.where(left >= milli, left, MILLI + 1)
    c = int(np.argmin(room))
    return c if room[c] <= MILLI else -1


def worst_card(left: IntArray, milli: int) -> int:
    """The card with the most left (lowest index on ties); -1 when none holds ``milli``."""
    room = np.where(left >= milli, left, -1)
    c = int(np.argmax(room))
    return c if room[c] >= 0 else -1


def random_card(left: IntArray, milli: int, rng: np.random.Generator) -> int:
    """Any card that holds ``milli``, uniformly; -1 when none."""
    fit = np.flatnonzero(left >= milli)
    return int(rng.choice(fit)) if len(fit) else -1


def least_sufficient(left: IntArray, task: Task) -> tuple[int, ...]:
    """The ``task.gpus`` cards with the least left that each hold ``task.milli`` (stable: lower index first).

    The simulator's ``NodeResource.Sub``: how FGD imagines a node after a task it does not
    place on a chosen card.
    """
    order = np.argsort(left, kind="stable")
    fit = [int(c) for c in order if left[c] >= task.milli]
    return tuple(fit[: task.gpus])
