"""Choosing nodes fast: feasible nodes and scores per task *template*, kept current incrementally.

The tasks of a gang are usually alike (same request, tolerations, selectors, affinity).
For each distinct template the session computes once the nodes the predicates allow
(everything but free resources, which does not change within a session), then the
resource fit and the node scores over all nodes with numpy. Placing a task changes one
node, so afterwards only the nodes changed since a template was last used are looked at
again.

Most of those changes are the template's own placements (a gang filling nodes), and for
them nothing needs scoring: a node that took ``j`` tasks of the template since the
session began looks, to the next task, exactly like the node at session start scored
for ``j + 1`` tasks at once — every score depends on a node only through its allocated
amounts plus the request (the Score contract). So *levels* of the whole score array,
for ``j = 0, 1, 2, …`` tasks, are computed with numpy over all nodes, lazily, and a node's
value after a placement is a lookup. A node another template or job touched is fitted and
scored on its own.

Soft sharding's preference (own shard, then unowned, then others) is a penalty far
larger than any score.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from batch_scheduler.framework import SessionView
from batch_scheduler.plugin_set import PluginSet
from batch_scheduler.tasks import TaskInfo
from cluster.model.resources import Resources
from cluster.nodeview.devices import Need, card_fit, idle_cards, needed_cards
from cluster.nodeview.fit import fitting
from cluster.nodeview.shard import preference_penalty
from cluster.nodeview.table import Mask

MAX_TEMPLATES = 64
MAX_LEVELS = 16  # beyond this many of its own tasks on one node, a node is scored on its own
Values = npt.NDArray[np.float64]
Template = tuple[Resources, bytes]


class ChoosingSession(SessionView, Protocol):
    """What the chooser reads of its session beyond the plugins' view: the plugins, the shard ranks."""

    @property
    def tiers(self) -> PluginSet: ...

    @property
    def rank(self) -> npt.NDArray[np.int8]: ...


@dataclass(eq=False)
class _Template:
    task: TaskInfo  # any task of the template: scores depend only on what they share
    # What it asks of GPU cards. Whole cards scale like a request (each task takes its count of
    # idle cards), so those templates keep their levels — fitted on the node totals, each choice
    # confirmed on the cards (:meth:`Chooser.choose`); shares refit every node a placement touches.
    # None too for whole cards where no node tracks its cards one by one.
    need: Need | None
    allowed: Mask  # the predicates' verdict without free resources
    value: Values  # score − shard penalty where the task fits now, else −inf
    seen: int  # position in the session's change log up to which ``value`` is current
    own: npt.NDArray[np.int64]  # per node: this template's tasks placed there, −1 once anything else changed it
    levels: list[Values] = field(default_factory=list)  # levels[j]: value with j own tasks placed, at session start


class Chooser:
    def __init__(self, ssn: ChoosingSession) -> None:
        self.ssn = ssn
        self.penalty = preference_penalty(ssn.rank)
        self.templates: dict[Template, _Template] = {}
        self.changes: list[tuple[int, Template, int]] = []  # (node row, template placed or removed, +1/−1)

    def changed(self, node: str, task: TaskInfo, sign: int) -> None:
        """A statement placed (+1) or took back (−1) a task on a node."""
        self.changes.append((self.ssn.columns.index[node], task.template, sign))

    def _template(self, task: TaskInfo) -> _Template:
        key = task.template
        template = self.templates.get(key)
        if template is None:
            template = self._build(task)
            if len(self.templates) >= MAX_TEMPLATES:
                self.templates.clear()
            self.templates[key] = template
        elif template.seen < len(self.changes):
            self._refresh(key, template)
        return template

    def allowed(self, task: TaskInfo) -> Mask:
        """The nodes the predicates allow the task, free resources aside (read-only)."""
        return self._template(task).allowed

    def candidates(self, task: TaskInfo, within: Mask | None = None) -> Mask:
        """The nodes where the task fits now (among ``within``), as :meth:`choose` would weigh them."""
        value = self._template(task).value
        fits: Mask = np.isfinite(value)
        return fits if within is None else fits & within[: len(fits)]

    def choose(self, task: TaskInfo, within: Mask | None = None, extra: Values | None = None) -> int | None:
        """The best node row for the task right now (among ``within`` when given), or None when it
        fits nowhere. ``extra``: scores for this task alone (per node, added; see ``PlacedScore``)."""
        template = self._template(task)
        if not len(template.value):
            return None
        value = template.value if extra is None else template.value + extra[: len(template.value)]
        value = value if within is None else np.where(within, value, -np.inf)
        i = int(np.argmax(value))
        while value[i] != -np.inf and template.need is not None and template.need.whole:
            idle = idle_cards(self.ssn.columns, i)
            if idle is None or idle >= sum(a.count for a in template.need.asks):
                break
            template.value[i] = value[i] = -np.inf  # shares hold its idle cards: not until the node changes
            i = int(np.argmax(value))
        return None if value[i] == -np.inf else i

    def _values(self, task: TaskInfo, allowed: Mask, rows: npt.NDArray[np.intp] | None) -> Values:
        """Fit and score of ``task`` on ``rows`` (every node when None) as the columns are now."""
        ssn = self.ssn
        fits = (allowed if rows is None else allowed[rows]) & fitting(ssn.columns, task.request, rows)
        need = task.need
        if need is not None and not need.whole:
            fits &= card_fit(ssn.columns, need, rows=rows)
        values = np.full(len(fits), -np.inf)
        ok = np.flatnonzero(fits) if rows is None else rows[fits]
        if len(ok):
            values[fits] = ssn.tiers.scores(ssn, task, ok) - self.penalty[ok]
        return values

    def _build(self, task: TaskInfo) -> _Template:
        ssn = self.ssn
        allowed = ssn.feasible(task, ignore_resources=True).mask.copy()
        value = self._values(task, allowed, None)
        return _Template(
            task=task,
            need=needed_cards(ssn.columns, task.need),
            allowed=allowed,
            value=value,
            seen=len(self.changes),
            own=np.zeros(ssn.n, dtype=np.int64),
            levels=[value.copy()],
        )

    def _level(self, template: _Template, j: int) -> Values:
        """Every node's value for the next task once ``j`` of the template's tasks are on it."""
        while len(template.levels) <= j:
            k = len(template.levels)
            # Scored as one task asking k + 1 times the request, on the columns minus this
            # template's own placements since — which is how the columns looked at the start
            # for every node still at level k (the only ones that read it).
            heavier = dataclasses.replace(template.task, request=template.task.request.scaled(k + 1))
            template.levels.append(self._start_values(template, heavier))
        return template.levels[j]

    def _start_values(self, template: _Template, task: TaskInfo) -> Values:
        cols = self.ssn.columns
        placed = template.own > 0
        if not placed.any():
            return self._values(task, template.allowed, None)
        # Take the template's own tasks back out of the columns for the computation.
        rows = np.flatnonzero(placed)
        request = template.task.request
        taken = [(cols.resource_index[name], amount) for name, amount in request.items() if name in cols.resource_index]
        for r, amount in taken:
            cols.allocated[r, rows] -= template.own[rows] * amount
        try:
            return self._values(task, template.allowed, None)
        finally:
            for r, amount in taken:
                cols.allocated[r, rows] += template.own[rows] * amount

    def _refresh(self, key: Template, template: _Template) -> None:
        own = template.own
        touched: set[int] = set()
        for row, changed_by, sign in self.changes[template.seen :]:
            touched.add(row)
            if own[row] >= 0 and changed_by == key:
                own[row] += sign
            else:
                own[row] = -1
        template.seen = len(self.changes)
        alone = []
        for row in touched:
            j = int(own[row])
            if 0 <= j < MAX_LEVELS and (template.need is None or template.need.whole):  # shares: refit
                template.value[row] = self._level(template, j)[row]
            else:
                alone.append(row)
        if alone:
            rows = np.array(sorted(alone), dtype=np.intp)
            template.value[rows] = self._values(template.task, template.allowed, rows)
