"""A job's task topology dealt into buckets: Volcano's task-topology ``JobManager`` and ``Bucket``.

A *task name* is the vcjob task a pod belongs to, read from its ``volcano.sh/task-spec``
annotation only (Volcano's ``getTaskName``; the task role of :mod:`batch_scheduler.tasks`
falls back to the label, this does not, so a pod labelled but not annotated stays out of
every bucket — the job controller sets both).

At session open the job's pods whose task name the affinity or anti-affinity lists name
are dealt into buckets, in this order: pods already on a node first (by node name), one
bucket per node; then the others, the task order's first names first, then by their
strongest relation (self anti-affinity, inter affinity, self affinity, inter
anti-affinity), then by pod name. A pod joins the bucket whose pods it has most affinity
with, counting −1 per pod it has anti-affinity with; between equal buckets the one
requesting least (Volcano's ``reqScore``: millicores + MiB + every other amount in
Volcano's units, pods counted 1 each and GPUs 1000 each — not "1 CPU = 1 GPU = 1Gi" as
Volcano's comment says); a new bucket when the best is negative. Each bucket is a group of
pods the job wants on the same nodes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgspec
import numpy as np
import numpy.typing as npt

from batch_scheduler.tasks import TaskInfo
from cluster.model.labels import TASK_SPEC_KEY
from cluster.model.resources import CPU, MEMORY

OUT_OF_BUCKET = -1
MIB = 1024 * 1024

# How strongly a task name's relation orders it (Volcano's affinityPriority): higher first.
SELF_ANTI_AFFINITY, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI_AFFINITY = 4, 3, 2, 1

Counts = npt.NDArray[np.int64]


class TaskTopology(msgspec.Struct, frozen=True, kw_only=True):
    """A job's task-topology annotations, split as Volcano splits them (empty names kept)."""

    affinity: tuple[tuple[str, ...], ...] = ()
    anti_affinity: tuple[tuple[str, ...], ...] = ()
    task_order: tuple[str, ...] = ()


def spec_name(task: TaskInfo) -> str:
    """The task's name in the topology annotations ('' for none)."""
    return task.pod.metadata.annotations.get(TASK_SPEC_KEY, "")


def req_score(task: TaskInfo) -> float:
    """What the task weighs when buckets are balanced (Volcano's ``CalcResReq``)."""
    req = task.resreq
    return req.cpu + req.memory / MIB + sum(req.scalars.values())


@dataclass(eq=False)
class Bucket:
    """Pods the job wants together: those still to place (``tasks``) and where the others are."""

    index: int
    tasks: dict[str, TaskInfo] = field(default_factory=dict)  # still to place, by uid
    names: Counter[str] = field(default_factory=Counter)  # its pods by task name, placed ones too
    nodes: Counter[str] = field(default_factory=Counter)  # its placed pods by node
    bound: int = 0
    req_score: float = 0.0
    # Its pods to place at session open, their requests as rows over ``resources`` (built on
    # first use) and which are still to place: what the node score takes out of the bucket.
    members: list[TaskInfo] = field(default_factory=list)
    resources: tuple[str, ...] = ()
    requests: Counts = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    alive: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    position: dict[str, int] = field(default_factory=dict)
    built: bool = False

    def add(self, name: str, task: TaskInfo) -> None:
        """Volcano's ``AddTask``: a pod on a node counts there, another waits in the bucket."""
        self.names[name] += 1
        if task.node:
            self.nodes[task.node] += 1
            self.bound += 1
            return
        self.tasks[task.uid] = task
        self.members.append(task)
        self.req_score += req_score(task)

    def placed(self, task: TaskInfo, node: str, sign: int) -> None:
        """The session placed the pod on ``node`` (+1), or took the placement back (−1)."""
        self.nodes[node] += sign
        self.bound += sign
        self._matrix()
        i = self.position.get(task.uid)
        if i is None or bool(self.alive[i]) != (sign > 0):
            return  # not waiting here (placed before the session): Volcano would take its request off anyway
        self.alive[i] = sign < 0
        if sign > 0:
            del self.tasks[task.uid]
        else:
            self.tasks[task.uid] = task
        self.req_score -= sign * req_score(task)

    def _matrix(self) -> None:
        if self.built:
            return
        self.built = True
        names = {CPU, MEMORY}.union(*(t.request.keys() for t in self.members))
        self.resources = tuple(sorted(names))
        rows = [[t.request.get(r, 0) for r in self.resources] for t in self.members]
        self.requests = np.array(rows, dtype=np.int64).reshape(len(self.members), len(self.resources))
        self.position = {t.uid: i for i, t in enumerate(self.members)}
        self.alive = np.array([t.uid in self.tasks for t in self.members], dtype=np.bool_)

    def remainder(self, task: TaskInfo) -> tuple[tuple[str, ...], Counts]:
        """The bucket's summed request (row 0), then after taking its other pods out one by one (rows
        1..m), over its resources. Volcano takes them out in map order (random); here, in bucket order."""
        self._matrix()
        keep = self.alive.copy()
        i = self.position.get(task.uid)
        total = self.requests[keep].sum(axis=0)
        if i is not None:
            keep[i] = False
        taken = np.cumsum(self.requests[keep], axis=0)
        return self.resources, np.vstack([total[None, :], total[None, :] - taken])


class JobBuckets:
    """One job's task topology: who goes with whom, and its pods in buckets (Volcano's JobManager)."""

    def __init__(self, topology: TaskTopology, tasks: Iterable[TaskInfo], nodes: int) -> None:
        self.buckets: list[Bucket] = []
        self.bucket_of: dict[str, int] = {}  # pod uid -> bucket index, OUT_OF_BUCKET
        self.name_of: dict[str, str] = {}  # pod uid -> task name, for pods with a topology
        self.priority: dict[str, int] = {}  # task name -> its strongest relation
        self.exist_order: dict[str, int] = {}  # task name -> higher for earlier in the task order
        self.inter_affinity: dict[str, set[str]] = {}
        self.self_affinity: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.max_size = 0  # the biggest bucket at session open, placed pods counted
        self.nodes = nodes
        self.on_nodes: dict[str, Counts] = {}  # task name -> per node row, its pods placed this session
        self._apply(topology)
        self._deal(tasks)

    def _mark(self, name: str, priority: int) -> None:
        if priority > self.priority.get(name, 0):
            self.priority[name] = priority

    def _relate(self, groups: tuple[tuple[str, ...], ...], anti: bool) -> None:
        inter, self_set = (self.inter_anti, self.self_anti) if anti else (self.inter_affinity, self.self_affinity)
        for group in groups:
            if len(group) == 1:
                self_set.add(group[0])
                self._mark(group[0], SELF_ANTI_AFFINITY if anti else SELF_AFFINITY)
                continue
            for i, src in enumerate(group):
                for dst in group[:i]:
                    inter.setdefault(src, set()).add(dst)
                    inter.setdefault(dst, set()).add(src)
                self._mark(src, INTER_ANTI_AFFINITY if anti else INTER_AFFINITY)

    def _apply(self, topology: TaskTopology) -> None:
        """Volcano's ``ApplyTaskTopology``: the annotations as relations between task names."""
        self._relate(topology.affinity, anti=False)
        self._relate(topology.anti_affinity, anti=True)
        for i, name in enumerate(topology.task_order):
            self.exist_order[name] = len(topology.task_order) - i

    def affinity_order(self, a: TaskInfo, b: TaskInfo) -> int:
        """Positive when ``a``'s task name ranks higher (task order, then relation), 0 when equal."""
        na, nb = self.name_of.get(a.uid, ""), self.name_of.get(b.uid, "")
        if na == nb:
            return 0
        oa, ob = self.exist_order.get(na, 0), self.exist_order.get(nb, 0)
        if oa != ob:
            return 1 if oa > ob else -1
        pa, pb = self.priority.get(na, 0), self.priority.get(nb, 0)
        return (pa > pb) - (pa < pb)

    def set_affinity(self, name: str, counts: Mapping[str, int], only_anti: bool) -> int:
        """Pods of ``counts`` ``name`` has affinity with, less those it has anti-affinity with
        (Volcano's ``checkTaskSetAffinity``; ``only_anti``: the second part only)."""
        score = 0
        if not name:
            return score
        for other, count in counts.items():
            same = other == name
            if not only_anti and (name in self.self_affinity if same else other in self.inter_affinity.get(name, ())):
                score += count
            if name in self.self_anti if same else other in self.inter_anti.get(name, ()):
                score -= count
        return score

    def anti_names(self, name: str) -> list[str]:
        """The task names ``name`` has anti-affinity with (itself included for self anti-affinity)."""
        out = [name] if name in self.self_anti else []
        return out + sorted(n for n in self.inter_anti.get(name, ()) if n != name)

    def _deal_order(self, task: TaskInfo) -> tuple[int, str, int, int, str, str]:
        """Volcano's reversed ``TaskOrder``: placed pods first by node, then by rank, then by pod name."""
        if task.node:
            return (0, task.node, 0, 0, "", task.uid)
        name = self.name_of[task.uid]
        return (1, "", -self.exist_order.get(name, 0), -self.priority.get(name, 0), task.name, task.uid)

    def _deal(self, tasks: Iterable[TaskInfo]) -> None:
        """Volcano's ``ConstructBucket``."""
        dealt = []
        for task in tasks:
            name = spec_name(task)
            if not name or name not in self.priority:
                self.bucket_of[task.uid] = OUT_OF_BUCKET
                continue
            self.name_of[task.uid] = name
            dealt.append(task)
        by_node: dict[str, Bucket] = {}
        for task in sorted(dealt, key=self._deal_order):
            name = self.name_of[task.uid]
            chosen, best = self._choose(task, name, by_node)
            if best < 0 or chosen is None:
                chosen = Bucket(index=len(self.buckets))
                self.buckets.append(chosen)
                if task.node:
                    by_node[task.node] = chosen
            self.bucket_of[task.uid] = chosen.index
            chosen.add(name, task)
            self.max_size = max(self.max_size, len(chosen.tasks) + chosen.bound)

    def _choose(self, task: TaskInfo, name: str, by_node: Mapping[str, Bucket]) -> tuple[Bucket | None, float]:
        if task.node:
            return by_node.get(task.node), 0
        chosen: Bucket | None = None
        best = -math.inf  # Volcano starts from MinInt32: the first bucket is always a candidate
        for bucket in self.buckets:
            score = self.set_affinity(name, bucket.names, only_anti=False)
            if score > best:
                chosen, best = bucket, score
            elif score == best and chosen is not None and bucket.req_score < chosen.req_score:
                chosen = bucket
        return chosen, best

    def bucket(self, task: TaskInfo) -> Bucket | None:
        index = self.bucket_of.get(task.uid, OUT_OF_BUCKET)
        return None if index == OUT_OF_BUCKET else self.buckets[index]

    def placed(self, task: TaskInfo, node: str, row: int | None, sign: int) -> None:
        """The session placed one of the job's pods on ``node`` (+1) or took it back (−1) (Volcano's
        ``TaskBound``; Volcano has no way back)."""
        name = spec_name(task)
        if name and row is not None:
            counts = self.on_nodes.get(name)
            if counts is None:
                counts = self.on_nodes[name] = np.zeros(self.nodes, dtype=np.int64)
            counts[row] += sign
        bucket = self.bucket(task)
        if bucket is not None:
            bucket.placed(task, node, sign)
