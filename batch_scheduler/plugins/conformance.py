"""conformance: never evict kube-system pods or pods of the system-critical priority classes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from batch_scheduler.framework import check_arguments
from batch_scheduler.info import TaskInfo

if TYPE_CHECKING:
    from batch_scheduler.session import Session


class ConformancePlugin:
    name = "conformance"

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> ConformancePlugin:
        check_arguments(cls.name, arguments)
        return cls()

    def open(self, ssn: Session) -> None:
        pass

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return [c for c in candidates if not c.critical]

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return [c for c in candidates if not c.critical]
