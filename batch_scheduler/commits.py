"""A batch session's commits, sent to Redis while the session places: see :class:`SessionCommits`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from batch_scheduler.tasks import TaskInfo
from binder.commit import GangStream
from binder.results import Placement
from cluster.nodeview.table import NodeTable
from cluster.store.records import PodRecord


class SessionCommits:
    """A session's gangs, each added to its binder's commit stream as the session hands it over
    (``Session.on_commit``, from its statements' commits): every full script call of them is
    sent to Redis at once, so Redis commits the session's first gangs on its own core while the
    session places the rest (Volcano's session binds asynchronously too, as each job's
    statement commits). :meth:`~batch_scheduler.cycle.BatchScheduler._commit` reads the
    results after the session; a session that fails leaves what it sent committed, and the
    rebinder binds it.

    A gang goes to its pods' scheduler's binder (the first scheduler name's when the pod's
    scheduler has none), with each node's version as the cache knows it: the cache does not
    change while the session runs (it runs without awaiting)."""

    def __init__(
        self, streams: dict[str, GangStream], default: str, pods: Mapping[str, PodRecord], columns: NodeTable
    ) -> None:
        self.streams, self.default, self.pods, self.columns = streams, default, pods, columns
        self.jobs: dict[str, list[list[TaskInfo]]] = {name: [] for name in streams}

    def add(self, tasks: list[TaskInfo]) -> None:
        record = self.pods.get(tasks[0].uid)
        name = record.scheduler if record is not None and record.scheduler in self.streams else self.default
        columns = self.columns
        self.streams[name].add(
            [
                Placement(
                    uid=t.uid,
                    node=t.node,
                    request=t.request,
                    version=int(columns.version[columns.index[t.node]]),
                    cards=t.cards,
                )
                for t in tasks
            ]
        )
        self.jobs[name].append(tasks)

    def per_binder(self) -> Iterator[tuple[str, list[list[TaskInfo]], GangStream]]:
        for name, stream in self.streams.items():
            yield name, self.jobs[name], stream

    async def abandon(self) -> None:
        for stream in self.streams.values():
            await stream.abandon()
