"""Does a request fit a node's free resources: the one computation every decision uses.

Predicates (the filter of both schedulers), the batch chooser's incremental re-fit of the
nodes a placement changed, the session's fallback without a ``predicates`` plugin, and
preempt and reclaim (where a victim's room counts, :func:`fits_once_freed`) all call
:func:`shortages` or its one-node form, over every node of a table or over a subset of
its rows — as kube-scheduler's ``noderesources.Fits`` serves its Filter, preemption and the
autoscaler alike. A request fits where, for every resource it asks a positive amount of,
``allocated + amount <= allocatable``; a resource the table has never seen fits nowhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from cluster.nodeview.table import NodeTable

Mask = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]


def shortages(table: NodeTable, request: Mapping[str, int], rows: Rows | None = None) -> dict[str, Mask]:
    """Per requested resource (amount > 0), which nodes lack it: a mask over every node, or over
    ``rows`` in their order. The table is not changed."""
    sel: slice | Rows = slice(0, len(table)) if rows is None else rows
    size = len(table) if rows is None else len(rows)
    out: dict[str, Mask] = {}
    for name, amount in request.items():
        if amount <= 0:
            continue
        r = table.resource_index.get(name)
        if r is None:
            out[name] = np.ones(size, dtype=np.bool_)
        else:
            out[name] = table.allocatable[r, sel] - table.allocated[r, sel] < amount
    return out


def resources_fit(
    table: NodeTable, request: Mapping[str, int], rows: Rows | None = None
) -> tuple[Mask, dict[str, Mask]]:
    """Where the request fits in every resource, and per requested resource where it is short."""
    short = shortages(table, request, rows)
    any_short = np.zeros(len(table) if rows is None else len(rows), dtype=np.bool_)
    for mask in short.values():
        any_short |= mask
    return ~any_short, short


def fitting(table: NodeTable, request: Mapping[str, int], rows: Rows | None = None) -> Mask:
    """Where the request fits in every resource (over every node, or over ``rows``)."""
    return resources_fit(table, request, rows)[0]


def fits_once_freed(table: NodeTable, request: Mapping[str, int], row: int, freed: Mapping[str, int]) -> bool:
    """Whether the request fits node ``row`` once ``freed`` comes back to it (evictions under way,
    victims chosen): :func:`shortages`' test on one node, its allocation less ``freed``."""
    for name, amount in request.items():
        if amount <= 0:
            continue
        r = table.resource_index.get(name)
        if r is None or table.allocatable[r, row] - table.allocated[r, row] + freed.get(name, 0) < amount:
            return False
    return True
