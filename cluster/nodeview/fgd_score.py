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
has seen a pod, every node scores 50 (no change). An operator who knows the workload gives
the typical pods instead (:class:`FgdConfig` ``typical``, read by :func:`parse_typical_pods`
from deviceshare's ``FGDTypicalPods`` or the agent's ``--fgd-typical-pods``): then nothing is
learned.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np
import numpy.typing as npt

from cluster.model.core import Pod
from cluster.model.devices import GPU_MODEL_LABEL
from cluster.model.quantity import QuantityError, parse_amount
from cluster.model.resources import CPU, MEMORY, Resources
from cluster.nodeview.cards import MILLI, Cards, Task
from cluster.nodeview.devices import CardRows, Need, card_need
from cluster.nodeview.fgd import TypicalPod, Workload, fgd_scores, typical_pods
from cluster.nodeview.profile import Placing, Rows, Values
from cluster.nodeview.table import NodeTable


class FgdConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How FGD in a scheduler finds its typical pods (the module docstring)."""

    popularity: float = 95.0  # % of the pods seen that the typical shapes cover
    include_cpu: bool = True  # CPU pods among the shapes
    window: int = 2000  # the last pods seen that they are learned from
    typical: tuple[TypicalPod, ...] = ()  # given: used as they are, nothing learned


_TYPICAL_KEYS = ("cpu", "gpus", "milli", "share", "models")
_DIGITS = re.compile(r"[0-9]{1,9}")


def parse_typical_pods(text: str, field: str) -> tuple[TypicalPod, ...]:
    """Typical pods from text: ``;``-separated pods, each ``cpu=Q,gpus=N,milli=M,share=S[,models=A|B]``
    (cpu a Kubernetes quantity; ``gpus`` whole cards, or one share of ``milli`` thousandths;
    ``share`` the pod's weight, the weights normalised to 1). ValueError naming ``field``."""
    pods: list[tuple[Task, float]] = []
    for i, entry in enumerate(e for e in text.split(";") if e.strip()):
        where = f"{field}[{i}]"
        values: dict[str, str] = {}
        for item in entry.split(","):
            key, eq, value = item.strip().partition("=")
            if not eq or key not in _TYPICAL_KEYS or key in values:
                raise ValueError(
                    f"{where}: {item.strip()!r} (expected each of {', '.join(_TYPICAL_KEYS)} once, as key=value)"
                )
            values[key] = value.strip()
        try:
            cpu = parse_amount(CPU, values.get("cpu", "0"), field=f"{where}.cpu", negative=False)
        except QuantityError as e:
            raise ValueError(str(e)) from None
        gpus, milli, share = values.get("gpus", "0"), values.get("milli", ""), values.get("share", "")
        if not _DIGITS.fullmatch(gpus) or int(gpus) > 64:
            raise ValueError(f"{where}.gpus: {gpus!r} (expected a whole number of cards, 0 to 64)")
        count = int(gpus)
        if milli and (not _DIGITS.fullmatch(milli) or not 1 <= int(milli) <= MILLI or not count):
            raise ValueError(f"{where}.milli: {milli!r} (expected 1 to {MILLI} thousandths of a card, with gpus ≥ 1)")
        try:
            weight = float(share)
        except ValueError:
            weight = -1.0
        if not 0 < weight < float("inf"):
            raise ValueError(f"{where}.share: {share!r} (expected a positive number)")
        models = frozenset(m for m in values.get("models", "").split("|") if m)
        per_card = 0 if not count else int(milli) if milli else MILLI
        try:
            task = Task(cpu=cpu, gpus=count, milli=per_card, models=models)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        pods.append((task, weight))
    if not pods:
        raise ValueError(f"{field}: {text!r} (expected at least one pod, cpu=…,gpus=…,milli=…,share=…)")
    total = sum(w for _, w in pods)
    return tuple(TypicalPod(task=t, share=w / total) for t, w in pods)


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
    fixed: tuple[TypicalPod, ...] = ()  # the typical pods, given: nothing is learned
    _seen: deque[Task] = field(default_factory=deque, init=False, repr=False)
    _since: int = field(default=0, init=False, repr=False)
    _workload: tuple[tuple[str, ...], Workload] | None = field(default=None, init=False, repr=False)
    _typical: tuple[TypicalPod, ...] = field(default=(), init=False, repr=False)

    @classmethod
    def of(cls, config: FgdConfig, weight: float = 1.0) -> FgdScore:
        return cls(
            weight=weight,
            popularity=config.popularity,
            include_cpu=config.include_cpu,
            window=config.window,
            fixed=config.typical,
        )

    def typical(self) -> tuple[TypicalPod, ...]:
        """The typical pods it scores against now."""
        return self.fixed or self._typical

    def observe(self, pods: Sequence[tuple[Pod, Resources]]) -> None:
        """Pods the scheduler is placing or holds (pod, request): the window the typical pods come from."""
        if self.fixed:
            return
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
