"""GPU fragmentation and Fragmentation Gradient Descent (Weng et al., USENIX ATC '23).

A free GPU thousandth is a *fragment* for a kind of pod when that pod cannot use it: the
node cannot host the pod at all (cpu, model, too few cards with room), or the card has
less left than the pod's share. The *typical pods* M are the most frequent pod shapes of
a workload, with their shares p_m; a node's expected fragment is F_n(M) = Σ p_m F_n(m),
in thousandths of a GPU. FGD places each pod on the node and card where F grows least:
score ⌊100·σ((F_n − F_n')/1000)⌋, n' the node after the pod.

The definitions are the authors' simulator's (``pkg/utils/frag.go``,
``pkg/simulator/plugin/fgd_score.go`` of hkust-adsl/kubernetes-scheduler-simulator), so
that the figures are comparable with the paper's:

- a pod without GPUs counts every free thousandth of a node as fragment;
- a share's candidates are each card with room, the first best score wins;
- a pod with whole cards (or none) imagines the node after it with the least sufficient
  cards taken (``cards.least_sufficient``); whole cards then go to the first free ones;
- memory is not part of the measure (the filter checks it).

Everything is numpy over node columns: all feasible nodes scored at once, and every
candidate card of a share too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import msgspec
import numpy as np
import numpy.typing as npt

from cluster.nodeview.cards import MILLI, BoolArray, Cards, IntArray, Task

FloatArray = npt.NDArray[np.float64]


class TypicalPod(msgspec.Struct, frozen=True, kw_only=True):
    """One pod shape of the target workload and its share of it."""

    task: Task
    share: float


def typical_pods(
    tasks: Iterable[Task], *, threshold: float = 95.0, include_cpu: bool = True, step: int = 1
) -> tuple[TypicalPod, ...]:
    """The most frequent shapes (cpu, share, cards, models) until they make ``threshold`` % of the pods.

    The simulator's ``GetTypicalPods``: shapes counted, most frequent first (ties: larger
    cpu, share, cards first), taken ``step`` at a time until their count reaches the
    threshold, then renormalised over what was taken. Memory is not part of a shape.
    """
    if not 0 < threshold <= 100:
        raise ValueError(f"popularityThreshold {threshold:g} (expected a percentage in (0, 100])")
    if step < 1:
        raise ValueError(f"popularity step {step} (expected a whole number ≥ 1)")
    counts = Counter(
        Task(cpu=t.cpu, gpus=t.gpus, milli=t.milli, models=t.models) for t in tasks if include_cpu or t.gpus
    )
    if not counts:
        return ()
    total = sum(counts.values())
    ranked = sorted(
        counts.items(),
        key=lambda kv: (kv[1], kv[0].cpu, kv[0].milli, kv[0].gpus, "|".join(sorted(kv[0].models))),
        reverse=True,
    )
    expected = threshold * total / 100.0
    taken, cumulative, limit = 0, 0, 0
    while cumulative < expected:
        limit += step
        while taken < limit and taken < len(ranked):
            cumulative += ranked[taken][1]
            taken += 1
    norm = total if taken >= len(ranked) else cumulative
    return tuple(TypicalPod(task=t, share=n / norm) for t, n in ranked[:taken])


class Workload:
    """The typical pods as columns: what the fragment measure needs, computed once."""

    def __init__(self, pods: tuple[TypicalPod, ...], cards: Cards) -> None:
        gpu = [p for p in pods if p.task.gpus]
        self.cpu_share = float(sum(p.share for p in pods if not p.task.gpus))
        self.cpu: IntArray = np.asarray([p.task.cpu for p in gpu], dtype=np.int64)
        self.gpus: IntArray = np.asarray([p.task.gpus for p in gpu], dtype=np.int64)
        self.share: FloatArray = np.asarray([p.share for p in gpu], dtype=np.float64)
        milli = np.asarray([p.task.milli for p in gpu], dtype=np.int64)
        self.thresholds, self.at = np.unique(milli, return_inverse=True)  # distinct shares, and each class's
        # allowed[model code, class]: code 0 is a node without GPUs
        self.allowed: BoolArray = np.ones((len(cards.model_names) + 1, len(gpu)), dtype=np.bool_)
        for k, p in enumerate(gpu):
            if p.task.models:
                self.allowed[:, k] = [False] + [m in p.task.models for m in cards.model_names]

    def counts(self, left: IntArray) -> tuple[IntArray, IntArray]:
        """Per node and distinct share: cards with at least that left, and the thousandths on cards with less."""
        thr = self.thresholds[None, None, :]
        g = left[:, :, None]
        return (g >= thr).sum(axis=1), np.where(g < thr, g, 0).sum(axis=1)

    def fragment(self, ge: IntArray, small: IntArray, total: IntArray, cpu: IntArray, allowed: BoolArray) -> FloatArray:
        """F_n(M) from the counts (last axis: distinct shares), cpu left and ``allowed[model]`` of nodes.

        Leading axes are nodes, and candidates of a node when the caller adds an axis;
        ``total`` and ``cpu`` have the leading axes, ``allowed`` them and the classes.
        """
        fits = (ge[..., self.at] >= self.gpus) & (cpu[..., None] >= self.cpu) & allowed
        frag = np.where(fits, small[..., self.at], total[..., None])
        return np.asarray(frag @ self.share + self.cpu_share * total, dtype=np.float64)


def _score(delta: FloatArray) -> IntArray:
    """⌊100·σ(Δ/1000)⌋: 50 when nothing changes, 73 for a whole GPU less fragment."""
    return np.floor(100.0 / (1.0 + np.exp(-delta / MILLI))).astype(np.int64)


def fgd_deltas(cards: Cards, task: Task, nodes: IntArray, workload: Workload) -> tuple[FloatArray, IntArray]:
    """How much the task lowers F_n(M) on each of ``nodes`` (which can host it), in thousandths, at its best card.

    For a share, the card is the first with the best ⌊100·σ(Δ/1000)⌋ (FGD's pick) and Δ is
    that card's; cards are -1 for tasks that are not shares (``whole_cards`` picks theirs).
    """
    left = cards.left[nodes]
    cpu = cards.cpu[nodes]
    model = cards.model[nodes]
    total = left.sum(axis=1)
    ge, small = workload.counts(left)
    allowed = workload.allowed[model]
    before = workload.fragment(ge, small, total, cpu, allowed)
    none = np.full(len(nodes), -1, dtype=np.int64)
    if not task.shared:
        # whole cards: free ones go to 0 — each share threshold loses them, nothing joins the slivers
        after = workload.fragment(ge - task.gpus, small, total - task.gpu_milli, cpu - task.cpu, allowed)
        return before - after, none
    thr = workload.thresholds[None, None, :]
    g = left[:, :, None]
    g2 = g - task.milli
    ge2 = ge[:, None, :] + (g2 >= thr).astype(np.int64) - (g >= thr).astype(np.int64)
    small2 = small[:, None, :] + np.where(g2 < thr, g2, 0) - np.where(g < thr, g, 0)
    shape = left.shape
    total2 = np.broadcast_to((total - task.milli)[:, None], shape)
    cpu2 = np.broadcast_to((cpu - task.cpu)[:, None], shape)
    after = workload.fragment(ge2, small2, total2, cpu2, allowed[:, None, :])
    delta = before[:, None] - after
    best = np.argmax(np.where(left >= task.milli, _score(delta), -1), axis=1)  # the first card with the best score
    return delta[np.arange(len(nodes)), best], best.astype(np.int64)


def fgd_scores(cards: Cards, task: Task, nodes: IntArray, workload: Workload) -> tuple[IntArray, IntArray]:
    """FGD's score of each of ``nodes`` (which can host the task), ⌊100·σ(Δ/1000)⌋, and a share's card.

    A pod asking for nothing at all scores 100 everywhere.
    """
    if task.cpu == 0 and task.memory == 0 and task.gpus == 0:
        return np.full(len(nodes), 100, dtype=np.int64), np.full(len(nodes), -1, dtype=np.int64)
    delta, card = fgd_deltas(cards, task, nodes, workload)
    return _score(delta), card


def cluster_fragment(cards: Cards, workload: Workload) -> float:
    """F(M) = Σ_n F_n(M) over every node, in thousandths of a GPU."""
    total = cards.left.sum(axis=1)
    ge, small = workload.counts(cards.left)
    return float(workload.fragment(ge, small, total, cards.cpu, workload.allowed[cards.model]).sum())
