"""binpack: fill nodes up before starting new ones, so whole nodes stay free for big gangs — Volcano's binpack plugin.

A node's score, as Volcano computes it: over the resources the task requests that have a
weight, the weighted mean of (used + request) ÷ allocatable — a resource the node has none
of adds 0 but still counts its weight — times 100 × ``binpack.weight``; and 0 when the
request does not fit in some such resource (used + request above allocatable).

Arguments (Volcano's; a number that is not an integer leaves the default, as in Volcano):
``binpack.weight`` (1), ``binpack.cpu`` (1), ``binpack.memory`` (1), ``binpack.resources``
(extra resource names, comma-separated, e.g. ``nvidia.com/gpu``) and
``binpack.resources.<name>`` (their weights, default 1). A negative cpu, memory or
resource weight is 1, as in Volcano.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

import msgspec
import numpy as np

from batch_scheduler.arguments import Arguments, weight
from batch_scheduler.framework import PluginBase, SessionView
from batch_scheduler.tasks import TaskInfo
from cluster.model.resources import CPU, MEMORY
from cluster.nodeview.scores import MAX_NODE_SCORE, Index, Scores

RESOURCES = "binpack.resources"


class BinpackArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset({"binpack.weight", "binpack.cpu", "binpack.memory", RESOURCES})
    prefixes = (RESOURCES + ".",)
    weight: int = 1
    resource_weights: Mapping[str, int] = msgspec.field(default_factory=lambda: {CPU: 1, MEMORY: 1})

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        listed = [r.strip() for r in arguments.get(RESOURCES, "").split(",") if r.strip()]
        for name in arguments:
            if name.startswith(RESOURCES + ".") and name[len(RESOURCES) + 1 :] not in listed:
                raise ValueError(
                    f"{name}: resource {name[len(RESOURCES) + 1 :]!r} is not listed in {RESOURCES} "
                    f"({', '.join(listed) or 'empty'})"
                )
        weights = {r: weight(arguments, f"{RESOURCES}.{r}", 1, negative=1) for r in listed}
        weights[CPU] = weight(arguments, "binpack.cpu", 1, negative=1)
        weights[MEMORY] = weight(arguments, "binpack.memory", 1, negative=1)
        return cls(weight=weight(arguments, "binpack.weight", 1), resource_weights=weights)


class BinpackPlugin(PluginBase[BinpackArguments]):
    def node_scores(self, ssn: SessionView, task: TaskInfo, nodes: Index | None = None) -> Scores:
        n = ssn.n if nodes is None else len(nodes)
        if not self.args.weight:
            return np.zeros(n, dtype=np.float64)
        cols = ssn.columns
        sel: slice | Index = slice(0, n) if nodes is None else nodes
        total = np.zeros(n, dtype=np.float64)
        short = np.zeros(n, dtype=np.bool_)
        weight_sum = 0
        for name, amount in task.request.items():
            w = self.args.resource_weights.get(name)
            if amount <= 0 or w is None:
                continue
            weight_sum += w
            r = cols.resource_index.get(name)
            if r is None or w == 0:
                continue  # no node has any, or weight 0: adds nothing (and is not checked), as in Volcano
            capacity = cols.allocatable[r, sel]
            used = cols.allocated[r, sel] + amount
            has = capacity > 0
            short |= has & (used > capacity)
            total += np.divide(used * float(w), capacity, out=np.zeros(n, dtype=np.float64), where=has)
        if weight_sum:
            total /= weight_sum
        total *= MAX_NODE_SCORE * self.args.weight
        total[short] = 0.0
        return total
