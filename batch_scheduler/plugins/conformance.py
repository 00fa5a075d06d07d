"""conformance: never evict kube-system pods or pods of the system-critical priority classes."""

from __future__ import annotations

from collections.abc import Sequence

from batch_scheduler.arguments import Arguments
from batch_scheduler.framework import PluginBase
from batch_scheduler.tasks import TaskInfo


class ConformancePlugin(PluginBase[Arguments]):
    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return [c for c in candidates if not c.critical]

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return [c for c in candidates if not c.critical]
