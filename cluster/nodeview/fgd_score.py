"""FGD in the schedulers: node scores and card picks from the node table, against typical pods learned as pods come.

``caldera bench trace`` replays FGD on its own columns (``cluster/nodeview/cards.py``);
here the same measure (``cluster/nodeview/fgd.py``) runs on the node table the schedulers
decide on: each node's cards as thousandths left (``(room − used) × 1000 ÷ room``, so a
vGPU or gpushare card's memory counts as its share of the card, as the spec proposes), its
free cpu and memory, and its GPU model (the ``caldera.io/gpu-model`` label).

The typical pods are the shapes (cpu, cards, share, models) of the last ``window`` pods
the scheduler has shown it (:meth:`FgdScore.observe`: the agent each pod it places, the
batch scheduler each session's pods) — CPU pods too, unless ``include_cpu`` is off — taken
at ``popularity`` % (95) as in the paper, and recomputed every ``refresh`` pods. Until it
has seen a pod, every node scores 50 (no change).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cluster.model.core import Pod
from cluster.model.devices import GPU_MODEL_LABEL
from cluster.model.resources import CPU, MEMORY, Resources
from cluster.nodeview.cards import MILLI, Cards, Task
from cluster.nodeview.devices import CardRows, Need, card_need
from cluster.nodeview.fgd import TypicalPod, Workload, fgd_scores, typical_pods
from cluster.nodeview.profile import Placing, Rows, Values
from cluster.nodeview.table import NodeTable


def task_shape(pod: Pod, request: Resources, need: Need | None) -> Task:
    """The pod as FGD sees it: cpu, memory (MiB), and its cards in thousandths (a memory share as 1 card)."""
    cpu, memory = request.get(CPU, 0), request.get(MEMORY, 0) // 2**20
    if need is None:
        return Task(cpu=cpu, memory=memory)
    ask = need.asks[0]
    if ask.whole or len(need.asks) > 1 or ask.count > 1:
        return Task(cpu=cpu, memory=memory, gpus=sum(a.count for a in need.asks), milli=MILLI)
    share = ask.amount if need.sharing is None else (ask.percentage or 0) * 10
    return Task(cpu=cpu, memory=memory, gpus=1, milli=max(1, min(MILLI, share)) if share else MILLI)


def table_cards(table: NodeTable, models: tuple[str, ...], nodes: Rows) -> Cards:
    """The table's rows ``nodes`` as FGD's columns (in that order), GPU models coded against ``models``."""
    n = len(nodes)
    rows = CardRows(table, nodes=np.asarray(nodes, dtype=np.intp))
    cap, used = rows.cap, rows.used
    left = np.where(cap > 0, (cap - used) * MILLI // np.maximum(cap, 1), 0).T.astype(np.int64)
    cards = Cards.__new__(Cards)
    index = table.resource_index

    def free(resource: str) -> npt.NDArray[np.int64]:
        r = index.get(resource)
        if r is None:
            return np.zeros(n, dtype=np.int64)
        return np.asarray(table.allocatable[r, nodes] - table.allocated[r, nodes], dtype=np.int64)

    cards.cpu, cards.memory = free(CPU), free(MEMORY) // 2**20
    cards.count = (cap > 0).sum(axis=0).astype(np.int64)
    cards.left = left if left.shape[1] else np.zeros((n, 1), dtype=np.int64)
    cards.model_names = models
    code = {m: i + 1 for i, m in enumerate(models)}
    labels = table.label_column(GPU_MODEL_LABEL)[nodes]
    cards.model = np.asarray([code.get(v, 0) if v else 0 for v in labels], dtype=np.int64)
    return cards


@dataclass
class FgdScore:
    """The FGD node score, ⌊100·σ(Δ/1000)⌋ × ``weight``, for pods asking for cards (and CPU pods)."""

    weight: float = 1.0
    popularity: float = 95.0
    include_cpu: bool = True
    window: int = 2000
    refresh: int = 100
    _seen: deque[Task] = field(default_factory=deque, init=False, repr=False)
    _since: int = field(default=0, init=False, repr=False)
    _workload: tuple[tuple[str, ...], Workload] | None = field(default=None, init=False, repr=False)
    _typical: tuple[TypicalPod, ...] = field(default=(), init=False, repr=False)

    def typical(self) -> tuple[TypicalPod, ...]:
        """The typical pods it scores against now."""
        return self._typical

    def observe(self, pods: Sequence[tuple[Pod, Resources]]) -> None:
        """Pods the scheduler is placing or holds (pod, request): the window the typical pods come from."""
        for pod, request in pods:
            self._seen.append(task_shape(pod, request, card_need(pod, request)))
            if len(self._seen) > self.window:
                self._seen.popleft()
            self._since += 1
        if self._seen and (not self._typical or self._since >= self.refresh):
            self._typical = typical_pods(self._seen, threshold=self.popularity, include_cpu=self.include_cpu)
            self._since = 0
            self._workload = None

    def _view(self, table: NodeTable, nodes: Rows) -> tuple[Cards, Workload]:
        models = tuple(sorted({v for v in table.label_column(GPU_MODEL_LABEL) if v}))
        cards = table_cards(table, models, nodes)
        if self._workload is None or self._workload[0] != models:
            self._workload = (models, Workload(self.typical(), cards))
        return cards, self._workload[1]

    def score_and_cards(self, table: NodeTable, placing: Placing, rows: Rows) -> tuple[Values, np.ndarray]:
        """Scores of ``rows`` and, for a share, the card (table card position) FGD picks on each."""
        task = task_shape(placing.pod, placing.request, card_need(placing.pod, placing.request))
        if not self.typical():
            return np.full(len(rows), 50.0 * self.weight), np.full(len(rows), -1)
        cards, workload = self._view(table, rows)
        scores, card = fgd_scores(cards, task, np.arange(len(rows)), workload)
        return scores.astype(np.float64) * self.weight, card

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        every = np.arange(len(table)) if rows is None else rows
        values, _ = self.score_and_cards(table, placing, every)
        return values
