"""task-topology: a job's tasks that talk to each other go to the same nodes, others apart — Volcano's plugin.

A PodGroup (a vcjob's annotations reach its PodGroup) names its task names in three
annotations: ``volcano.sh/task-topology-affinity`` (``ps,worker;ps,evaluator``: groups of
task names, ``;`` between groups; a group of one name means that task's pods go together),
``volcano.sh/task-topology-anti-affinity`` (same format: apart), and
``volcano.sh/task-topology-task-order`` (``ps,worker``: the first names are placed first).
At session open, each job with pods to place has the pods its affinity and anti-affinity
lists name dealt into buckets (:mod:`batch_scheduler.plugins.task_buckets`); then, as Volcano's plugin:

- task order: a pod in a bucket goes before one in none (across jobs too, when both jobs
  have a topology); within a job, bigger buckets first (pods still to place), then older
  ones, and within a bucket by the task order, then the strongest relation. The task order
  annotation orders only pods in buckets: alone, without an affinity that names the tasks,
  it changes nothing.
- node score, for a pod in a bucket: per node, its bucket's pods already placed there,
  less the pods placed there this session whose task names it has anti-affinity with,
  plus its bucket's pods still to place, less one for each of them taken out (in bucket
  order; Volcano's is its map's, random) until the rest fit the node's idle resources plus
  what the evictions under way of the session's pods free; 0
  where the pod itself does not fit that; times ``task-topology.weight`` (1) × 100 ÷ the
  biggest bucket's size. Anti-affinity counts only pods this session placed (Volcano's
  ``nodeTaskSet``), not those already running.
- each placement updates the job's buckets (Volcano's AllocateFunc).

Where caldera differs: a placement the session takes back (a gang that could not start, a
pipelined pod backfill places afresh) comes out of the buckets again — Volcano keeps it
counted for the rest of the session; an eviction undone is not counted as a new placement
(Volcano counts the pod again and takes its request off its bucket); a negative weight is
refused, like every caldera weight.

An annotation that names a task the job does not have, or one name twice in one group,
makes Volcano ignore the job's whole topology; so does caldera, and it keeps why in
:attr:`TaskTopologyPlugin.ignored` (job key -> one line naming the annotation), which it
answers as the ``IgnoredSettings`` point: ``caldera status`` lists them under the batch
scheduler (not as the job's pending reason, which says why a job waits: this does not keep
it waiting).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

import msgspec
import numpy as np

from batch_scheduler.arguments import Arguments, weight
from batch_scheduler.framework import PluginBase, SessionView
from batch_scheduler.jobs import JobInfo
from batch_scheduler.plugins.task_buckets import Bucket, Counts, JobBuckets, TaskTopology, spec_name
from batch_scheduler.tasks import TaskInfo, TaskStatus
from cluster.model.resources import CPU, MEMORY
from cluster.nodeview.profile import Values
from cluster.nodeview.table import Mask

WEIGHT = "task-topology.weight"
AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"
MAX_NODE_SCORE = 100.0


class TaskTopologyArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset({WEIGHT})
    weight: int = 1

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        return cls(weight=weight(arguments, WEIGHT, 1))


class Malformed(msgspec.Struct, frozen=True, kw_only=True):
    """An annotation Volcano refuses, and its error (Volcano's words)."""

    annotation: str
    error: str


def check_names(job: JobInfo, groups: tuple[tuple[str, ...], ...]) -> str | None:
    """Volcano's ``affinityCheck``: every non-empty name is a task role of the job, once per group."""
    roles = {t.role for t in job.tasks.values()}
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in roles:
                return f"task {name} do not exist in job <{job.namespace}/{job.name}>"
            if name in seen:
                return f"task {name} is duplicate in job <{job.namespace}/{job.name}>"
            seen.add(name)
    return None


def read_topology(job: JobInfo) -> TaskTopology | Malformed | None:
    """The job's topology from its PodGroup's annotations (Volcano's ``readTopologyFromPgAnnotations``),
    None when it has none, or the first annotation that is wrong."""
    annotations = job.podgroup.metadata.annotations if job.podgroup is not None else {}
    if not any(a in annotations for a in (AFFINITY, ANTI_AFFINITY, TASK_ORDER)):
        return None
    split: dict[str, tuple[tuple[str, ...], ...]] = {}
    for key in (AFFINITY, ANTI_AFFINITY, TASK_ORDER):
        if key not in annotations:
            continue
        text = annotations[key]
        groups = (tuple(text.split(",")),) if key == TASK_ORDER else tuple(tuple(g.split(",")) for g in text.split(";"))
        error = check_names(job, groups)
        if error is not None:
            return Malformed(annotation=key, error=error)
        split[key] = groups
    return TaskTopology(
        affinity=split.get(AFFINITY, ()),
        anti_affinity=split.get(ANTI_AFFINITY, ()),
        task_order=split[TASK_ORDER][0] if TASK_ORDER in split else (),
    )


class TaskTopologyPlugin(PluginBase[TaskTopologyArguments]):
    jobs: dict[str, JobBuckets]
    ignored: dict[str, str]

    def ignored_settings(self) -> Mapping[str, str]:
        return self.ignored

    def open(self, ssn: SessionView) -> None:
        super().open(ssn)
        self.jobs = {}
        self.ignored = {}  # job key -> why its topology annotations are ignored this session
        self._placed: dict[str, str] = {}  # uid -> node, the session's placements the buckets count
        self._releasing: dict[str, TaskInfo] = {}  # uid -> task, evictions under way
        for job in ssn.jobs.values():
            if not ssn.in_queue(job) or not job.count((TaskStatus.PENDING,)):
                continue
            topology = read_topology(job)
            if isinstance(topology, Malformed):
                self.ignored[job.key] = f"{topology.annotation}: {topology.error}; the job's task topology is ignored"
            elif topology is not None:
                self.jobs[job.key] = JobBuckets(topology, job.tasks.values(), ssn.n)
        if self.jobs:
            self._releasing = {
                t.uid: t
                for job in ssn.jobs.values()
                for t in job.tasks.values()
                if t.status is TaskStatus.RELEASING and t.node
            }

    # -- task order -------------------------------------------------------------------

    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        """Volcano's ``TaskOrderFn``."""
        ja, jb = self.jobs.get(a.job), self.jobs.get(b.job)
        if ja is None or jb is None:
            return 0
        ba, bb = ja.bucket(a), jb.bucket(b)
        if (ba is None) != (bb is None):
            return -1 if ba is not None else 1
        if a.job != b.job or ba is None or bb is None:
            return 0
        if len(ba.tasks) != len(bb.tasks):
            return -1 if len(ba.tasks) > len(bb.tasks) else 1
        if ba.index == bb.index:
            return -ja.affinity_order(a, b)
        return -1 if ba.index < bb.index else 1

    def task_order_key(self, task: TaskInfo) -> tuple[int, int, int, int, int]:
        """A sort key ordering one job's tasks as :meth:`task_order` does (allocate sorts each job's
        tasks on their own; across jobs the comparison has no consistent key)."""
        job = self.jobs.get(task.job)
        if job is None:
            return (0, 0, 0, 0, 0)
        bucket = job.bucket(task)
        if bucket is None:
            return (1, 0, 0, 0, 0)
        name = job.name_of.get(task.uid, "")
        return (0, -len(bucket.tasks), bucket.index, -job.exist_order.get(name, 0), -job.priority.get(name, 0))

    # -- node score -------------------------------------------------------------------

    def placed_score(self, task: TaskInfo, candidates: Mask) -> Values | None:
        """Volcano's ``NodeOrderFn`` over every node (not normalised: ``candidates`` does not
        change it); None for a pod in no bucket (Volcano: 0)."""
        job = self.jobs.get(task.job)
        bucket = job.bucket(task) if job is not None else None
        if job is None or bucket is None:
            return None
        value = self._bucket_score(job, bucket, task).astype(np.float64) * self.args.weight
        if job.max_size:
            value = value * MAX_NODE_SCORE / job.max_size
        return value

    def _room(self, resources: tuple[str, ...]) -> Counts:
        """Per resource, every node's idle amount plus what its evictions under way free."""
        cols, n = self.ssn.columns, self.ssn.n
        room = np.zeros((len(resources), n), dtype=np.int64)
        for i, name in enumerate(resources):
            r = cols.resource_index.get(name)
            if r is not None:
                room[i] = cols.allocatable[r, :n] - cols.allocated[r, :n]
        for t in self._releasing.values():
            row = cols.index.get(t.node)
            if row is None:
                continue
            for i, name in enumerate(resources):
                room[i, row] += t.request.get(name, 0)
        return room

    def _bucket_score(self, job: JobBuckets, bucket: Bucket, task: TaskInfo) -> Counts:
        """Volcano's ``calcBucketScore``, an integer per node."""
        resources, remains = bucket.remainder(task)
        names = resources + tuple(r for r in task.request if r not in resources)
        room = self._room(names)
        fits = np.ones(self.ssn.n, dtype=np.bool_)
        for i, name in enumerate(names):
            need = task.request.get(name, 0)
            if need > 0 or name in (CPU, MEMORY):  # Volcano's LessPartly: cpu and memory always
                fits &= room[i] >= need
        score = np.full(self.ssn.n, len(bucket.tasks), dtype=np.int64)
        index = self.ssn.columns.index
        for node, count in bucket.nodes.items():
            row = index.get(node)
            if row is not None:
                score[row] += count
        for other in job.anti_names(spec_name(task)):
            placed = job.on_nodes.get(other)
            if placed is not None:
                score -= placed
        score -= self._taken_out(remains, room[: len(resources)])
        score[~fits] = 0
        return score

    @staticmethod
    def _taken_out(remains: Counts, room: Counts) -> Counts:
        """Per node, how many of the bucket's other pods come out before the rest fits (all of them
        when it never does): the first row of ``remains`` that fits, per resource, the latest of those."""
        others = len(remains) - 1
        first = np.zeros(room.shape[1], dtype=np.int64)
        for i in range(room.shape[0]):
            # remains[:, i] only falls as pods come out: search it rising, negated.
            first = np.maximum(first, np.searchsorted(-remains[:, i], -room[i], side="left"))
        return np.minimum(first, others)

    # -- events -----------------------------------------------------------------------

    def allocated(self, task: TaskInfo) -> None:
        if not self.jobs:
            return
        if self._releasing.pop(task.uid, None) is not None:
            return  # an eviction undone: the pod was counted where it runs
        job = self.jobs.get(task.job)
        if job is None or not task.node:
            return
        job.placed(task, task.node, self.ssn.columns.index.get(task.node), +1)
        self._placed[task.uid] = task.node

    def deallocated(self, task: TaskInfo) -> None:
        if not self.jobs:
            return
        if task.status is TaskStatus.RELEASING:
            if task.node:
                self._releasing[task.uid] = task
            return
        node = self._placed.pop(task.uid, None)
        job = self.jobs.get(task.job)
        if node is not None and job is not None:
            job.placed(task, node, self.ssn.columns.index.get(node), -1)
