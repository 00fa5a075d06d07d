"""binpack: fill nodes up before starting new ones, so whole nodes stay free for big gangs — Volcano's binpack plugin.

The plugin is the placement framework's :class:`~cluster.nodeview.plugins.Binpack` score,
built from the conf's arguments (an agent profile can run the same one).

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

from batch_scheduler.arguments import Arguments, weight
from batch_scheduler.framework import PluginBase
from cluster.model.resources import CPU, MEMORY
from cluster.nodeview.plugins import Binpack
from cluster.nodeview.profile import Placing, Rows, Values
from cluster.nodeview.table import NodeTable

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
    def __init__(self, name: str, args: BinpackArguments) -> None:
        super().__init__(name, args)
        self.binpack = Binpack(weight=args.weight, resource_weights=args.resource_weights)

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        return self.binpack.score(table, placing, rows)
