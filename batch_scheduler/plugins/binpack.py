"""binpack: fill nodes up before starting new ones, so whole nodes stay free for big gangs.

A node's score is the weighted mean, over the resources the task requests that have a
weight, of (allocated + request) ÷ allocatable, times ``binpack.weight``. Arguments
(Volcano's): ``binpack.weight`` (1), ``binpack.cpu`` (1), ``binpack.memory`` (1),
``binpack.resources`` (extra resource names, comma-separated, e.g.
``nvidia.com/gpu``) and ``binpack.resources.<name>`` (their weights, default 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from batch_scheduler.framework import check_arguments, number
from batch_scheduler.info import TaskInfo
from cluster.scores import Index, Scores, most_allocated

if TYPE_CHECKING:
    from batch_scheduler.session import Session

RESOURCES = "binpack.resources"


class BinpackPlugin:
    name = "binpack"

    def __init__(self, weight: float, resource_weights: Mapping[str, float]) -> None:
        self.weight = weight
        self.resource_weights = resource_weights

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> BinpackPlugin:
        check_arguments(cls.name, arguments, ["binpack.weight", "binpack.cpu", "binpack.memory", RESOURCES],
                        [RESOURCES + "."])
        weights = {"cpu": number(arguments, "binpack.cpu", 1.0), "memory": number(arguments, "binpack.memory", 1.0)}
        listed = [r.strip() for r in arguments.get(RESOURCES, "").split(",") if r.strip()]
        for name in arguments:
            if name.startswith(RESOURCES + ".") and name[len(RESOURCES) + 1:] not in listed:
                raise ValueError(f"{name}: resource {name[len(RESOURCES) + 1:]!r} is not listed in {RESOURCES} "
                                 f"({', '.join(listed) or 'empty'})")
        for r in listed:
            weights[r] = number(arguments, f"{RESOURCES}.{r}", 1.0)
        return cls(number(arguments, "binpack.weight", 1.0), weights)

    def open(self, ssn: Session) -> None:
        pass

    def node_scores(self, ssn: Session, task: TaskInfo, nodes: Index | None = None) -> Scores:
        weights = {r: w for r, w in self.resource_weights.items() if task.request.get(r, 0) > 0 and w > 0}
        if not weights or not self.weight:
            return np.zeros(ssn.n if nodes is None else len(nodes), dtype=np.float64)
        return self.weight * most_allocated(ssn.columns, task.request, weights, nodes)
