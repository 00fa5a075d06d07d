"""Where an agent pod's time goes, stage by stage, per pod.

From the write that made the pod pending to the moment its binding is seen back on the feed:

- ``feed``: the store's write → the loop sees the pod on the feed (the feed entry's time, by the
  store's clock, against this process's: exact on one machine, off by the clocks' skew across
  machines);
- ``queue``: first seen → handed to a worker;
- ``handoff``: handed to a worker → the worker starts on the call (the batch's push to the worker's
  inbox, its pop and decoding, and the wait while the worker finishes its earlier calls: one worker
  decides one call at a time), by the two processes' clocks as ``feed`` is;
- ``decide``, ``commit`` (the wait for the binder's answers once the deciding is done — a worker
  sends each few pods' commit as soon as they are decided —, retries included), ``bind`` (the
  cluster's pods/binding calls): the worker's call, each pod of the call counted with the call's time;
- ``reply``: the rest of the call's round trip — the answer's way back and the loop's turn to read
  it (``handoff`` and ``reply`` were one stage, ``hop``, until the worker told when it started);
- ``observed``: the bind calls returned → the bound pod is seen on the feed (0 when the feed
  brought it before the worker's answer reached the loop).

The stages of one pod add up to its time from write to observed, give or take the loop's own
turns between them. Kept as bucket counts: the heartbeat carries them to ``caldera status`` and
the demo's report, and a registry that :class:`Stages` is registered with exports them as the
histogram ``caldera_agent_stage_seconds{stage}`` (one observation per pod) — counted once, read
at each scrape.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import numpy as np
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

STAGES = ("feed", "queue", "handoff", "decide", "commit", "bind", "reply", "observed")
BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.003,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
)
"""Upper bounds in seconds; a last bucket above them all."""


class StageFigures(msgspec.Struct, frozen=True, kw_only=True):
    """One stage as counted so far: pods per bucket (``BUCKETS``, then one above them) and the sum."""

    counts: list[int]
    seconds: float

    @property
    def pods(self) -> int:
        return sum(self.counts)

    def since(self, earlier: StageFigures | None) -> StageFigures | None:
        """The pods counted after ``earlier`` (None: all of them); None when a count went back (the
        process counting them started again)."""
        if earlier is None:
            return self
        counts = [a - b for a, b in zip(self.counts, earlier.counts, strict=True)]
        if any(n < 0 for n in counts):
            return None
        return StageFigures(counts=counts, seconds=self.seconds - earlier.seconds)

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile in seconds, interpolated within its bucket as Prometheus'
        histogram_quantile does (the last bucket answers with the highest bound); None when empty."""
        total = self.pods
        if not total:
            return None
        rank = q * total
        seen = 0
        for i, n in enumerate(self.counts):
            if n and seen + n >= rank:
                if i >= len(BUCKETS):
                    return BUCKETS[-1]
                low = BUCKETS[i - 1] if i else 0.0
                return low + (BUCKETS[i] - low) * (rank - seen) / n
            seen += n
        return BUCKETS[-1]


METRIC = "caldera_agent_stage_seconds"
HELP = (
    "Where each agent pod's time goes (agent_scheduler.stages): feed (the store's write to the loop "
    "seeing it), queue (seen to handed to a worker), handoff (handed to the worker starting on it), "
    "decide, commit (the binder's round trips), bind (the cluster's pods/binding calls), reply (the "
    "answer back to the loop), observed (bind returned to the bound pod seen on the feed). One "
    "observation per pod."
)


class Stages(Collector):
    """Bucket counts per stage; as a Prometheus collector, the histogram :data:`METRIC`."""

    def __init__(self, names: tuple[str, ...] = STAGES) -> None:
        """``names``: the stages counted (the demo counts its own write of the pods the same way)."""
        self.names = names
        self._bounds = np.array(BUCKETS)
        self._counts = {s: np.zeros(len(BUCKETS) + 1, dtype=np.int64) for s in names}
        self._sums = dict.fromkeys(names, 0.0)

    def observe(self, stage: str, seconds: float, pods: int = 1) -> None:
        """``pods`` pods spent ``seconds`` in ``stage``."""
        if pods <= 0:
            return
        seconds = max(0.0, seconds)
        self._counts[stage][int(np.searchsorted(self._bounds, seconds))] += pods
        self._sums[stage] += seconds * pods

    def observe_each(self, stage: str, seconds: list[float]) -> None:
        """One pod per value."""
        if not seconds:
            return
        values = np.maximum(np.asarray(seconds, dtype=np.float64), 0.0)
        np.add.at(self._counts[stage], np.searchsorted(self._bounds, values), 1)
        self._sums[stage] += float(values.sum())

    def figures(self) -> dict[str, StageFigures]:
        return {
            s: StageFigures(counts=[int(n) for n in self._counts[s]], seconds=round(self._sums[s], 6))
            for s in self.names
        }

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(METRIC, HELP, labels=["stage"])
        for stage in self.names:
            cumulative = np.cumsum(self._counts[stage])
            buckets = [(str(bound), float(n)) for bound, n in zip(BUCKETS, cumulative, strict=False)]
            family.add_metric([stage], [*buckets, ("+Inf", float(cumulative[-1]))], self._sums[stage])
        yield family
