"""Choosing nodes fast: feasible nodes and scores per task *template*, kept current incrementally.

The tasks of a gang are usually alike (same request, tolerations, selectors, affinity).
For each distinct template the session computes once the nodes the predicates allow
(everything but free resources, which does not change within a session), then the
resource fit and the node scores over all nodes with numpy. Placing a task changes one
node, so afterwards only the nodes changed since a template was last used are fitted and
scored again — a handful of nodes, not thousands. Soft sharding's preference (own
shard, then unowned, then others) is a penalty far larger than any score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from batch_scheduler.info import TaskInfo
from cluster.predicates import resources_fit
from cluster.resources import Resources
from cluster.snapshot import Mask

if TYPE_CHECKING:
    from batch_scheduler.session import Session

RANK_PENALTY = 1e9  # far above any sum of plugin scores
MAX_TEMPLATES = 256


@dataclass(eq=False)
class _Template:
    task: TaskInfo  # any task of the template: scores depend only on what they share
    allowed: Mask  # the predicates' verdict without free resources
    value: npt.NDArray[np.float64]  # score − shard penalty where the task fits now, else −inf
    seen: int  # position in the session's change log up to which ``value`` is current


class Chooser:
    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.penalty = ssn.rank.astype(np.float64) * RANK_PENALTY
        self.templates: dict[tuple[Resources, bytes], _Template] = {}
        self.changes: list[int] = []  # node rows whose allocation changed, in order

    def changed(self, node: str) -> None:
        """A node's allocated figures changed (a statement placed or un-placed a task)."""
        self.changes.append(self.ssn.columns.index[node])

    def choose(self, task: TaskInfo) -> int | None:
        """The best node row for the task right now, or None when it fits nowhere."""
        key = task.template
        template = self.templates.get(key)
        if template is None:
            template = self._build(task)
            if len(self.templates) >= MAX_TEMPLATES:
                self.templates.clear()
            self.templates[key] = template
        elif template.seen < len(self.changes):
            self._refresh(template)
        i = int(np.argmax(template.value)) if len(template.value) else 0
        if not len(template.value) or template.value[i] == -np.inf:
            return None
        return i

    def _score(self, template: _Template, rows: npt.NDArray[np.intp]) -> None:
        ssn = self.ssn
        value = np.full(len(rows), -np.inf)
        cols = ssn.columns
        fits = template.allowed[rows].copy()
        for name, amount in template.task.request.items():
            if amount <= 0:
                continue
            r = cols.resource_index.get(name)
            if r is None:
                fits[:] = False
                break
            fits &= cols.allocated[r, rows] + amount <= cols.allocatable[r, rows]
        ok = rows[fits]
        if len(ok):
            value[fits] = ssn.tiers.scores(ssn, template.task, ok) - self.penalty[ok]
        template.value[rows] = value

    def _build(self, task: TaskInfo) -> _Template:
        ssn = self.ssn
        allowed = ssn.feasible(task, ignore_resources=True).mask.copy()
        template = _Template(task=task, allowed=allowed, value=np.full(ssn.n, -np.inf), seen=len(self.changes))
        fit, _ = resources_fit(ssn.columns, task.request)
        rows = np.flatnonzero(allowed & fit)
        if len(rows):
            template.value[rows] = ssn.tiers.scores(ssn, task, rows) - self.penalty[rows]
        return template

    def _refresh(self, template: _Template) -> None:
        rows = np.unique(np.array(self.changes[template.seen:], dtype=np.intp))
        template.seen = len(self.changes)
        self._score(template, rows)
