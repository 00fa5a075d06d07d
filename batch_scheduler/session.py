"""One scheduling session: a snapshot of the cluster, the conf's plugins opened fresh, the actions in order.

The session is pure: built from a :class:`~batch_scheduler.session_input.SessionInput` it
runs the actions and leaves behind what to do — gang batches to commit, pods to evict, a
phase and a reason for every job. The cycle (:mod:`batch_scheduler.cycle`) does the I/O.

Plugins read it through :class:`~batch_scheduler.framework.SessionView`; actions ask it
their questions (where a task goes, what a node will have free); only statements change
it, through the few methods under "what statements change". Nodes are the caldera node
columns: what a node has free now (idle) is allocatable minus allocated, and what it will
have once the evictions under way finish (future idle) adds what releasing tasks hold and
takes off what pipelined tasks wait for.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from batch_scheduler.chooser import Chooser, Template
from batch_scheduler.conf import SchedulerConf
from batch_scheduler.jobs import JobInfo
from batch_scheduler.plugin_set import PluginSet
from batch_scheduler.reasons import MISSING
from batch_scheduler.session_input import SessionConfig, SessionInput, build, session_topology
from batch_scheduler.tasks import TaskInfo, TaskStatus
from batch_scheduler.vector import Vector
from cluster.model.core import Pod
from cluster.model.devices import is_card_resource
from cluster.model.resources import Resources
from cluster.nodeview.devices import CardPolicy, Need, card_need, choose_cards, needed_cards
from cluster.nodeview.fgd_score import FgdScore
from cluster.nodeview.fit import fits_once_freed, resources_fit
from cluster.nodeview.pod_affinity import PlacedPods, Verdict, constrained, pod_rules
from cluster.nodeview.predicates import Filtered, insufficient
from cluster.nodeview.profile import Placing, all_of
from cluster.nodeview.shard import shard_feasible, shard_rank
from cluster.nodeview.table import Mask
from cluster.nodeview.topology import DomainSums
from cluster.store.records import TERMINAL_PHASES

Observe = Callable[[str], AbstractContextManager[object]]
"""``observe(action)``: a context entered around each action as it runs (the cycle times them)."""


_NO_PODS = PlacedPods()
MAX_VERDICTS = 256  # task templates whose verdict a session keeps (then it starts over)


def _has_anti(pod: Pod) -> bool:
    a = pod.spec.affinity
    return (
        a is not None
        and a.pod_anti_affinity is not None
        and bool(a.pod_anti_affinity.required_during_scheduling_ignored_during_execution)
    )


def _has_terms(pod: Pod) -> bool:
    a = pod.spec.affinity
    return a is not None and bool(a.pod_affinity or a.pod_anti_affinity)


class Session:
    def __init__(self, conf: SchedulerConf, config: SessionConfig, inp: SessionInput) -> None:
        self.conf = conf
        self.config = config
        self.columns = inp.columns
        self.n = len(inp.columns)
        self.allowed: Mask = shard_feasible(inp.columns, config.scheduler, config.sharding)
        self.rank = shard_rank(inp.columns, config.scheduler, config.sharding)
        # The cluster the shares divide: every node this scheduler may use (its shard in hard
        # mode), cordoned ones too, as Volcano's TotalResource counts every node it sees.
        self.total = Vector.from_amounts(
            {
                r: int(inp.columns.allocatable[i, : self.n][self.allowed].sum())
                for i, r in enumerate(inp.columns.resources)
                if not is_card_resource(r)  # the cards are in the node totals (nvidia.com/gpu, gpu-memory…)
            }
        )
        self._domain_sums: DomainSums | None = None
        self._placed: PlacedPods | None = None
        self._bound = [r for r in (*inp.pods, *inp.others) if r.node and r.phase not in TERMINAL_PHASES]
        self._namespaces = inp.namespaces
        self._any_anti = any(_has_anti(r.pod) for r in self._bound)
        self._any_terms = self._any_anti or any(_has_terms(r.pod) for r in self._bound)
        self.topology = session_topology(
            inp.columns, inp.hypernodes, inp.hypernodes_generation, config.hypernode_labels
        )
        built = build(inp, config)
        self.queues = built.queues
        self.jobs = built.jobs
        self.tasks = built.tasks
        self.node_tasks = built.node_tasks
        self.releasing: dict[
            str, Resources
        ] = {}  # per node: what releasing tasks free, less what pipelined ones wait for
        for task in built.releasing:
            self.releasing_add(task, +1)
        self.commits: list[list[TaskInfo]] = []  # gang batches for the binder
        # Called with each gang batch as it is handed over (the cycle sends it to Redis at once).
        self.on_commit: Callable[[list[TaskInfo]], None] | None = None
        self.ungated: list[TaskInfo] = []  # pods whose queue-allocation gate this session lifts
        self.evictions: list[TaskInfo] = []
        self.tiers: PluginSet = conf.build()
        self.card_policy: CardPolicy = conf.card_policy()
        self._fgd = next(  # deviceshare's, with SchedulePolicy: fgd
            (f for tier in self.tiers.tiers for p in tier if isinstance(f := getattr(p, "fgd", None), FgdScore)), None
        )
        for plugin in (p for tier in self.tiers.tiers for p in tier):
            plugin.open(self)
        self.chooser = Chooser(self)
        # feasible(task) per task template (and card need), with the length of the chooser's
        # change log it was taken at: see verdict().
        self._verdicts: dict[tuple[Template, Need | None], tuple[int, Filtered]] = {}

    # -- what statements change ---------------------------------------------------------

    def place(self, task: TaskInfo, node: str, sign: int) -> None:
        """Take the task's request on the node (+1) — and the GPU cards it picks there — or give it back (−1)."""
        if sign > 0:
            need = needed_cards(self.columns, task.need)
            if need is not None:
                row = self.columns.index[node]
                picked = choose_cards(self.columns, row, need, self.card_policy, self._fgd_card(task, row, need))
                if picked is None:  # the chooser fitted the cards as they are: a bug if reached
                    raise RuntimeError(f"{task.name}: no GPU card on {node} has room, though the node was chosen")
                task.cards = picked
            self.columns.take(node, task.request)
            if task.cards:
                self.columns.take(node, task.cards)
        else:
            self.columns.give_back(node, task.request)
            if task.cards:
                self.columns.give_back(node, task.cards)
                task.cards = Resources()
        self.chooser.changed(node, task, sign)
        if self._domain_sums is not None:
            self._domain_sums.changed(self.columns.index[node], task.request, sign)
        if self._placed is not None:
            if sign > 0:
                self._placed.add(task.uid, task.pod, self.columns.index[node])
            else:
                self._placed.remove(task.uid)
        if sign > 0 and _has_terms(task.pod):
            self._any_terms = True
            self._any_anti |= _has_anti(task.pod)

    def _fgd_card(self, task: TaskInfo, row: int, need: Need) -> int | None:
        """FGD's card for a share in thousandths on ``row`` (deviceshare's ``SchedulePolicy: fgd``), else None."""
        fgd = self._fgd
        if fgd is None or self.card_policy is not CardPolicy.FGD or need.sharing is not None:
            return None
        _, card = fgd.score_and_cards(self.columns, self.placing(task), np.array([row]))
        return int(card[0]) if card[0] >= 0 else None

    @property
    def placed(self) -> PlacedPods:
        """The pods on the session's nodes (every scheduler's), for inter-pod rules; built when
        first asked, then kept current by :meth:`place`."""
        if self._placed is None:
            placed = PlacedPods(namespace_labels=self._namespaces)
            index = self.columns.index
            for r in self._bound:
                if r.node in index:
                    placed.add(r.uid, r.pod, index[r.node])
            for t in self.tasks.values():
                if t.status in (TaskStatus.ALLOCATED, TaskStatus.BINDING) and t.node in index:
                    placed.add(t.uid, t.pod, index[t.node])
            self._placed = placed
        return self._placed

    @property
    def pods_with_terms(self) -> bool:
        return self._any_terms

    def ruled(self, task: TaskInfo) -> bool:
        """Whether an inter-pod rule can rule out a node for the task (cheap: no verdict computed)."""
        if not self._any_anti and not constrained(task.pod, _NO_PODS):
            return False
        return constrained(task.pod, self.placed)

    def pod_rules(self, task: TaskInfo) -> Verdict | None:
        """Inter-pod affinity, anti-affinity and topology spread for the task (None: nothing to rule out)."""
        return pod_rules(self.columns, task.pod, self.placed) if self.ruled(task) else None

    @property
    def domain_sums(self) -> DomainSums:
        """Each HyperNode's summed figures, built when first asked, then kept current by :meth:`place`."""
        if self._domain_sums is None:
            self._domain_sums = DomainSums(self.topology, self.columns)
        return self._domain_sums

    def releasing_add(self, task: TaskInfo, sign: int) -> None:
        """Count what a releasing task frees (+1) or a pipelined one takes of it (-1) on its node."""
        if not task.node:
            return
        current = self.releasing.get(task.node, Resources())
        held = task.request + task.cards
        self.releasing[task.node] = current + (held if sign > 0 else held.scaled(-1))

    def allocated_event(self, task: TaskInfo) -> None:
        self.tiers.allocated(task)

    def deallocated_event(self, task: TaskInfo) -> None:
        self.tiers.deallocated(task)

    def bind_later(self, tasks: list[TaskInfo]) -> None:
        """Hand placed tasks to the binder, as one gang batch: to ``on_commit`` now when set
        (its commit goes to Redis while the session goes on), their results read once the
        session ends."""
        self.commits.append(tasks)
        if self.on_commit is not None:
            self.on_commit(tasks)

    def evict_later(self, tasks: list[TaskInfo]) -> None:
        self.evictions += tasks

    # -- questions actions ask ----------------------------------------------------------

    def admitted(self, job: JobInfo) -> bool:
        """Inqueue (or running) — or any job at all when the conf has no enqueue action, as in Volcano."""
        return job.inqueue or "enqueue" not in self.conf.actions

    def schedulable(self, job: JobInfo) -> bool:
        """In a queue that exists and a PodGroup that exists, and valid by every plugin (Volcano's JobValid)."""
        if job.reason_kind in MISSING:
            return False
        refusal = self.tiers.why_not_schedulable(job)
        if refusal is not None:
            job.set_reason(refusal.condition, refusal.message)
            return False
        return True

    def in_queue(self, job: JobInfo) -> bool:
        """The job's queue exists (Volcano leaves other jobs out of the session)."""
        return job.reason_kind not in MISSING and job.queue in self.queues

    def victim_order(self, preemptor: TaskInfo) -> Callable[[TaskInfo], Any]:
        """Volcano's ``BuildVictimsPriorityQueue`` as a sort key: the first victim first — within a
        job by reversed task order, across queues by victim queue order, else by reversed job order."""
        mine = self.queues.get(self.jobs[preemptor.job].queue)
        tiers, jobs, queues = self.tiers, self.jobs, self.queues

        def first(a: TaskInfo, b: TaskInfo) -> int:
            if a.job == b.job:
                return -tiers.task_compare(a, b)
            ja, jb = jobs[a.job], jobs[b.job]
            if ja.queue != jb.queue and mine is not None:
                return tiers.victim_queue_compare(queues[ja.queue], queues[jb.queue], mine)
            return -tiers.job_compare(ja, jb)

        return functools.cmp_to_key(first)

    def hierarchy_enabled(self, plugin: str) -> bool:
        """Whether the conf turns ``enableHierarchy`` on for the plugin (Volcano's default: off)."""
        return any(o.name == plugin and "enableHierarchy" in o.enabled for tier in self.conf.tiers for o in tier)

    def placing(self, task: TaskInfo) -> Placing:
        return Placing(
            task.pod, task.request, task.template[1], lambda: self.feasible(task, ignore_resources=True).mask
        )

    def feasible(self, task: TaskInfo, *, ignore_resources: bool = False) -> Filtered:
        """The nodes the task may go to, by every predicate (resources unless told otherwise)."""
        allowed = self.allowed
        if self.tiers.predicates:
            placing = self.placing(task)
            if ignore_resources:
                placing = placing.without_resources()
            return all_of([p.filter(self.columns, placing, allowed) for p in self.tiers.predicates], self.n)
        mask = allowed & ~self.columns.unschedulable[: self.n]
        failed: dict[str, int] = {}
        if self.n - int(np.count_nonzero(mask)):
            failed["unschedulable"] = self.n - int(np.count_nonzero(mask))
        if not ignore_resources:
            fit, short = resources_fit(self.columns, task.request)
            for name, m in short.items():
                count = int(np.count_nonzero(mask & m))
                if count:
                    failed[insufficient(name)] = count
            mask &= fit
        return Filtered(mask=mask, failed=failed, total=self.n)

    def verdict(self, task: TaskInfo) -> Filtered:
        """:meth:`feasible` for the task, shared by the tasks of its template until a placement
        changes the nodes (every change of the columns goes through :meth:`place`, which the
        chooser logs). A backlog of jobs that fit nowhere asks it once per template, not once
        per job. Read-only: the mask cannot be written."""
        key = (task.template, task.need)
        seen = len(self.chooser.changes)
        known = self._verdicts.get(key)
        if known is not None and known[0] == seen:
            return known[1]
        verdict = self.feasible(task)
        verdict.mask.flags.writeable = False
        if len(self._verdicts) >= MAX_VERDICTS:
            self._verdicts.clear()
        self._verdicts[key] = (seen, verdict)
        return verdict

    def best_node(self, task: TaskInfo, within: Mask | None = None) -> tuple[int, bool] | Filtered:
        """Where the task goes: the highest-scoring node with room now (own shard first in soft
        mode; ties go to the first), else the best one whose room evictions are freeing — as
        ``(row, pipelined)`` — or the predicates' verdict when no node will have room.
        ``within``: only these nodes (a HyperNode's). Inter-pod rules narrow them further."""
        domain = within
        rules = self.pod_rules(task)
        if rules is not None:
            within = rules.mask if within is None else within & rules.mask
        extra = None
        if self.tiers.placed_scorers:
            extra = self.tiers.placed_scores(task, self.chooser.candidates(task, within))
        row = self.chooser.choose(task, within, extra)
        if row is not None:
            return row, False
        future = self.future_node(task, within)
        if future is not None:
            return future, True
        verdict = self.verdict(task)
        failed = dict(verdict.failed)
        mask = verdict.mask
        if rules is not None:  # counted over the nodes the predicates let through, as kube-scheduler's message
            again = pod_rules(self.columns, task.pod, self.placed, start=mask)
            failed.update(again.failed)
            mask = mask & rules.mask
        if domain is not None:
            outside = int(np.count_nonzero(mask & ~domain))
            if outside:
                failed["node(s) are outside the gang's network domain"] = outside
            mask = mask & domain
        if domain is None and rules is None:
            return verdict
        return Filtered(mask=mask, failed=failed, total=self.n)

    def future_node(self, task: TaskInfo, within: Mask | None = None) -> int | None:
        """The best node where the task fits in what the node will have once its evictions finish."""
        rows = [
            self.columns.index[name]
            for name, freed in self.releasing.items()
            if name in self.columns.index and not freed.is_empty
        ]
        if not rows:
            return None
        allowed = self.chooser.allowed(task)
        fits = [
            r
            for r in rows
            if allowed[r]
            and (within is None or within[r])
            and self.fits_once_freed(task.request, self.columns.names[r], pod=task.pod)
        ]
        if not fits:
            return None
        idx = np.array(sorted(fits), dtype=np.intp)
        scores = self.tiers.scores(self, task, idx) - self.chooser.penalty[idx]
        return int(idx[int(np.argmax(scores))])

    def idle(self, node: str) -> Resources:
        i = self.columns.index[node]
        return Resources(
            {
                r: int(self.columns.allocatable[k, i] - self.columns.allocated[k, i])
                for k, r in enumerate(self.columns.resources)
            }
        )

    def fits_once_freed(
        self, request: Resources, node: str, victims: Sequence[TaskInfo] = (), pod: Pod | None = None
    ) -> bool:
        """Whether ``request`` fits on the node once the evictions under way there, and ``victims``,
        finish (Volcano's FutureIdle) — and, for ``pod`` asking for GPU cards, whether the cards it
        needs are among those freed (a victim frees its own cards, not just node totals)."""
        freed = self.releasing.get(node, Resources())
        for v in victims:
            freed = freed + v.request + v.cards
        row = self.columns.index[node]
        if not fits_once_freed(self.columns, request, row, freed):
            return False
        need = card_need(pod, request) if pod is not None else None
        if need is None:
            return True
        cards = [
            (self.columns.resource_index[r], amount) for r, amount in freed.items() if r in self.columns.resource_index
        ]
        for r, amount in cards:
            self.columns.allocated[r, row] -= amount
        try:
            return choose_cards(self.columns, row, need, self.card_policy) is not None
        finally:
            for r, amount in cards:
                self.columns.allocated[r, row] += amount

    def future_idle(self, node: str) -> Resources:
        """What the node will have free once the evictions under way finish (Volcano's FutureIdle)."""
        return self.idle(node) + self.releasing.get(node, Resources())

    # -- running ------------------------------------------------------------------------

    def run(self, observe: Observe | None = None) -> None:
        """Run the conf's actions in order."""
        for name in self.conf.actions:
            action = self.conf.registry.actions[name]
            if observe is None:
                action.run(self)
                continue
            with observe(name):
                action.run(self)

    def close(self) -> None:
        """Drop the plugins and the chooser, which point back at the session: without the cycle,
        reference counting frees the session's objects at once instead of the cyclic collector
        (which would walk the scheduler's whole cache to find them)."""
        self.tiers = PluginSet([])
        self.chooser = Chooser.__new__(Chooser)
