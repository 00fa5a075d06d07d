"""Tier semantics, with tiny stand-in plugins for the extension points.

Orders: the first non-zero answer wins, tier by tier. Enqueue: a reject in any tier consulted
fails, a tier with a permit passes, all abstaining passes. Victims: intersected within a
tier, an empty answer makes the tier give nothing, the first tier with victims wins. A
switch set to false takes a plugin out of that one point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import pytest

from batch_scheduler.arguments import Arguments, check_arguments, number
from batch_scheduler.framework import JobOrder, Plugin, Preemptable
from batch_scheduler.jobs import JobInfo
from batch_scheduler.plugin_set import PluginSet
from batch_scheduler.queues import QueueInfo, default_queue
from batch_scheduler.reasons import PendingReason
from batch_scheduler.tasks import TaskInfo, TaskStatus
from batch_scheduler.votes import ABSTAIN, PERMIT, Refusal, Vote, VoteKind
from tests.builders import pod

NONE: frozenset[str] = frozenset()
REJECT = Vote(VoteKind.REJECT, reason="no room", condition="NotEnoughResources")


def created(order: int) -> str:
    return f"2026-01-01T00:00:{order:02d}Z"


def job(name: str, order: int = 0) -> JobInfo:
    return JobInfo(
        key=f"default/{name}",
        namespace="default",
        name=name,
        queue="default",
        priority=0,
        min_member=1,
        min_resources=None,
        podgroup=None,
        phase="Pending",
        order=order,
        created=created(order),
    )


def task(name: str, order: int = 0) -> TaskInfo:
    p = pod(name)
    p = msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, creation_timestamp=created(order)))
    return TaskInfo(
        uid=p.uid,
        pod=p,
        job="default/j",
        request=p.request(),
        priority=0,
        status=TaskStatus.BOUND,
        node="n",
        order=order,
    )


def queue(name: str, order: int = 0) -> QueueInfo:
    q = default_queue(name)
    q.order, q.created = order, created(order)
    return q


class Base:
    name = "fake"

    def __init__(self, name: str = "fake") -> None:
        self.name = name
        self.calls = 0

    def open(self, ssn: Any) -> None:
        pass


class Order(Base):
    """Orders jobs, queues and tasks: ``answer`` for (smaller name, larger name), its negation the
    other way round (or by a rank per name)."""

    def __init__(self, answer: int = 0, rank: dict[str, int] | None = None) -> None:
        super().__init__("order")
        self.answer, self.rank = answer, rank

    def _cmp(self, a: str, b: str) -> int:
        self.calls += 1
        if self.rank is not None:
            return self.rank.get(a, 0) - self.rank.get(b, 0)
        return self.answer if a < b else (-self.answer if a > b else 0)

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        return self._cmp(a.name, b.name)

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        return self._cmp(a.name, b.name)

    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        return self._cmp(a.name, b.name)


class Voter(Base):
    def __init__(self, vote: Vote) -> None:
        super().__init__("voter")
        self.vote = vote

    def enqueueable(self, job: JobInfo) -> Vote:
        self.calls += 1
        return self.vote

    def enqueued(self, job: JobInfo) -> None:
        pass


class Victims(Base):
    """Lets the named candidates go (None: abstains)."""

    def __init__(self, names: set[str] | None) -> None:
        super().__init__("victims")
        self.names = names

    def _pick(self, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        self.calls += 1
        return None if self.names is None else [c for c in candidates if c.name in self.names]

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._pick(candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._pick(candidates)


class Everything(Order, Victims):
    """Orders jobs and votes on victims: for switches that turn off one point only."""

    def __init__(self) -> None:
        Order.__init__(self, rank={"a": 1, "b": 0})
        self.names = {"x"}

    def job_ready(self, job: JobInfo) -> bool:
        return False

    def score(self, table: Any, placing: Any, rows: Any) -> Any:
        return np.ones(len(table) if rows is None else len(rows))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        return Refusal("full", "QueueShareExceeded")

    def overused(self, queue: QueueInfo) -> Refusal | None:
        return Refusal("over", "QueueShareExceeded")

    def enqueueable(self, job: JobInfo) -> Vote:
        return REJECT

    def enqueued(self, job: JobInfo) -> None:
        pass


def tiers(*plugin_tiers: Sequence[Plugin | tuple[Plugin, frozenset[str]]]) -> PluginSet:
    return PluginSet([[p if isinstance(p, tuple) else (p, NONE) for p in tier] for tier in plugin_tiers])


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


# -- orders -------------------------------------------------------------------------------


def compare(key: Any, a: object, b: object) -> int:
    """The sign a sort key built by a PluginSet gives the pair: -1 when ``a`` goes first."""
    ka, kb = key(a), key(b)
    return -1 if ka < kb else (1 if kb < ka else 0)


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ([[0, 0], [0]], 0),
        ([[0, -1], [1]], -1),  # a later plugin of the first tier decides
        ([[1, -1], [-1]], 1),  # the first plugin wins within a tier
        ([[0], [0, 1]], 1),  # all of tier 1 abstain: tier 2 decides
        ([[-1], [1]], -1),  # an earlier tier wins over a later one
        ([[], [0], [0, 0, -1]], -1),  # empty tiers are skipped
        ([[0], [7]], 1),  # any positive means b first
    ],
)
def test_first_non_zero_order_wins(answers: list[list[int]], expected: int) -> None:
    t = tiers(*[[Order(a) for a in tier] for tier in answers])
    # No plugin decides: Volcano's defaults, by creation then name (jobs, queues) or uid (tasks).
    assert compare(t.job_key(), job("a"), job("b")) == (expected or -1)
    assert compare(t.queue_key(), queue("qa"), queue("qb")) == (expected or -1)
    assert compare(t.task_key(), task("ta"), task("tb")) == (expected or -1)


def test_later_plugins_are_not_asked_once_one_decides() -> None:
    first, second, third = Order(0), Order(-1), Order(1)
    t = tiers([first, second], [third])
    assert compare(t.job_key(), job("a"), job("b")) == -1
    assert first.calls == 1 and second.calls == 1 and third.calls == 0


def test_job_key_sorts_by_the_deciding_tier_then_creation_order() -> None:
    t = tiers([Order(0)], [Order(rank={"low": 1, "high": -1})])
    jobs = [job("low", order=0), job("x2", order=2), job("high", order=3), job("x1", order=1)]
    assert [j.name for j in sorted(jobs, key=t.job_key())] == ["high", "x1", "x2", "low"]


def test_queue_key_ties_break_on_order_then_name() -> None:
    t = tiers([Order(0)])
    qs = [queue("b", order=1), queue("c", order=0), queue("a", order=1)]
    assert [q.name for q in sorted(qs, key=t.queue_key())] == ["c", "a", "b"]


def test_task_key_without_plugins_keeps_creation_order() -> None:
    t = tiers([])
    ts = [task("b", order=2), task("a", order=1), task("c", order=0)]
    assert [x.name for x in sorted(ts, key=t.task_key())] == ["c", "a", "b"]


# -- enqueue ------------------------------------------------------------------------------

P, A, R = PERMIT, ABSTAIN, REJECT


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ([[A, A], [A]], PERMIT),  # all abstain: admitted
        ([], PERMIT),  # nobody votes: admitted
        ([[P]], PERMIT),
        ([[R]], REJECT),
        ([[P, R]], REJECT),  # a reject fails even beside a permit
        ([[R, P]], REJECT),
        ([[A], [A, R]], REJECT),  # a reject in a later tier fails when no earlier tier permitted
        ([[A, A], [P, A]], PERMIT),
        ([[P], [R]], PERMIT),  # a tier with a permit passes: later tiers are not asked (Volcano)
        ([[A, P, A]], PERMIT),
    ],
)
def test_enqueueable(votes: list[list[Vote]], expected: Vote) -> None:
    t = tiers(*[[Voter(v) for v in tier] for tier in votes])
    assert t.enqueueable(job("j")) == expected


def test_enqueue_reject_is_the_first_one_with_its_reason() -> None:
    other = Vote(VoteKind.REJECT, reason="queue full", condition="QueueCapabilityExceeded")
    t = tiers([Voter(ABSTAIN), Voter(other), Voter(REJECT)])
    assert t.enqueueable(job("j")) == other


def test_enqueue_does_not_ask_later_tiers_after_a_permit() -> None:
    later = Voter(REJECT)
    t = tiers([Voter(PERMIT)], [later])
    t.enqueueable(job("j"))
    assert later.calls == 0


# -- victims ------------------------------------------------------------------------------

CANDIDATES = ["x", "y", "z"]


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ([[None]], []),  # all abstain: no victims
        ([[{"x", "y"}]], ["x", "y"]),
        ([[{"x", "y"}, {"y", "z"}]], ["y"]),  # intersected within a tier
        ([[{"x", "y"}, None, {"y", "z"}]], ["y"]),  # an abstaining plugin does not narrow it
        ([[{"x"}, {"y"}], [{"z"}]], ["z"]),  # empty intersection: the next tier decides
        ([[set(), {"x"}], [{"y", "z"}]], ["y", "z"]),  # an empty answer makes the tier give nothing
        ([[{"x"}, set()], [{"z"}]], ["z"]),
        ([[None], [{"z"}]], ["z"]),  # a tier of abstainers gives nothing
        ([[{"x"}], [{"y", "z"}]], ["x"]),  # the first tier with victims wins
        ([[set()], [set()]], []),
        ([[{"x", "y"}], [{"x"}, {"y"}]], ["x", "y"]),
    ],
)
def test_preemptable_and_reclaimable(answers: list[list[set[str] | None]], expected: list[str]) -> None:
    t = tiers(*[[Victims(a) for a in tier] for tier in answers])
    cands = [task(n) for n in CANDIDATES]
    assert sorted(v.name for v in t.preemptable(task("p"), cands)) == expected
    assert sorted(v.name for v in t.reclaimable(task("p"), cands)) == expected


def test_victims_are_the_candidate_objects() -> None:
    cands = [task(n) for n in CANDIDATES]
    [victim] = tiers([Victims({"y"})]).preemptable(task("p"), cands)
    assert victim is cands[1]


def test_later_victim_plugins_in_a_tier_are_not_asked_after_an_empty_answer() -> None:
    later = Victims({"x"})
    tiers([Victims(set()), later]).preemptable(task("p"), [task("x")])
    assert later.calls == 0


# -- switches -----------------------------------------------------------------------------


def test_switch_off_removes_the_plugin_from_that_point_only() -> None:
    p = Everything()
    t = tiers([(p, frozenset({"enablePreemptable"}))])
    assert t.preempt_voters == [[]]
    assert t.preemptable(task("p"), [task("x")]) == []
    assert t.reclaim_voters == [[p]] and [v.name for v in t.reclaimable(task("p"), [task("x")])] == ["x"]
    assert t.job_orders == [[p]] and t.queue_orders == [[p]] and t.task_orders == [[p]]
    assert t.ready_checks == [p] and t.node_orders == [p] and t.allocatable_checks == [p] and t.overuse_checks == [p]
    assert t.enqueue_voters == [[p]]
    assert t.tiers == [[p]]  # still opened with the session


@pytest.mark.parametrize(
    ("switch", "attribute"),
    [
        ("enableJobOrder", "job_orders"),
        ("enableQueueOrder", "queue_orders"),
        ("enableTaskOrder", "task_orders"),
        ("enableReclaimable", "reclaim_voters"),
        ("enableJobEnqueued", "enqueue_voters"),
    ],
)
def test_each_tiered_switch_turns_off_its_point(switch: str, attribute: str) -> None:
    p = Everything()
    t = tiers([(p, frozenset({switch}))], [Order(0)])
    assert getattr(t, attribute)[0] == []
    on = tiers([(p, NONE)])
    assert getattr(on, attribute) == [[p]]


@pytest.mark.parametrize(
    ("switch", "attribute"),
    [
        ("enableJobReady", "ready_checks"),
        ("enableNodeOrder", "node_orders"),
        ("enabledAllocatable", "allocatable_checks"),
        ("enabledOverused", "overuse_checks"),
    ],
)
def test_each_flat_switch_turns_off_its_point(switch: str, attribute: str) -> None:
    p = Everything()
    assert getattr(tiers([(p, frozenset({switch}))]), attribute) == []
    assert getattr(tiers([(p, NONE)]), attribute) == [p]


def test_switched_off_order_lets_the_next_plugin_decide() -> None:
    t = tiers([(Order(1), frozenset({"enableJobOrder"})), Order(-1)])
    assert compare(t.job_key(), job("a"), job("b")) == -1


def test_switch_for_an_unimplemented_point_is_harmless() -> None:
    t = tiers([(Victims({"x"}), frozenset({"enableJobOrder", "enableHierarchy"}))])
    assert [v.name for v in t.preemptable(task("p"), [task("x")])] == ["x"]


def test_points_are_sorted_by_protocol() -> None:
    o, v = Order(0), Victims(None)
    t = tiers([o, v])
    assert t.job_orders == [[o]] and t.preempt_voters == [[v]]
    assert isinstance(o, JobOrder) and not isinstance(o, Preemptable)
    assert t.enqueue_voters == [[]] and t.predicates == [] and t.schedulable_checks == []


# -- other combinations -------------------------------------------------------------------


class Ready(Base):
    def __init__(self, ready: bool, starving: bool = True, invalid: str | None = None) -> None:
        super().__init__("ready")
        self.ready, self.starving, self.invalid = ready, starving, invalid

    def job_ready(self, job: JobInfo) -> bool:
        return self.ready

    def job_starving(self, job: JobInfo) -> bool:
        return self.starving

    def why_not_schedulable(self, job: JobInfo) -> Refusal | None:
        return None if self.invalid is None else Refusal(self.invalid, PendingReason.NOT_ENOUGH_PODS)


def test_job_ready_needs_every_plugin_starving_the_first_tier_with_a_plugin_and_valid_takes_the_first_refusal() -> None:
    t = tiers(
        [Ready(True, invalid=None)], [Ready(False, starving=False, invalid="first"), Ready(True, invalid="second")]
    )
    j = job("j")
    assert not t.job_ready(j)
    assert t.job_starving(j)  # tier 1 decides starving (Volcano); tier 2 is not asked
    assert not tiers([], [Ready(True), Ready(True, starving=False)]).job_starving(j)  # every plugin of the tier
    assert t.why_not_schedulable(j) == Refusal("first", PendingReason.NOT_ENOUGH_PODS)
    assert tiers([Ready(True)], [Ready(True)]).job_ready(j)
    assert tiers([]).job_ready(j) and not tiers([]).job_starving(j)  # no voter: ready, not starving


def test_allocatable_and_overused_take_the_first_refusal() -> None:
    p = Everything()
    t = tiers([p])
    assert t.allocatable(queue("q"), task("x")) == Refusal("full", "QueueShareExceeded")
    assert t.overused(queue("q")) == Refusal("over", "QueueShareExceeded")
    assert tiers([]).allocatable(queue("q"), task("x")) is None and tiers([]).overused(queue("q")) is None


class FakeSession:
    n = 3
    columns = [None] * 3

    def placing(self, task: TaskInfo) -> None:
        return None


def test_node_scores_add_up() -> None:
    t = tiers([Everything()], [Everything()])
    assert list(t.scores(FakeSession(), task("x"))) == [2.0, 2.0, 2.0]  # type: ignore[arg-type]
    assert list(t.scores(FakeSession(), task("x"), np.array([0, 2]))) == [2.0, 2.0]  # type: ignore[arg-type]
    assert list(tiers([]).scores(FakeSession(), task("x"))) == [0.0, 0.0, 0.0]  # type: ignore[arg-type]


# -- argument helpers ---------------------------------------------------------------------


def test_check_arguments_names_what_is_accepted() -> None:
    check_arguments("p", {"a": "1", "pre.x": "2"}, ["a"], ["pre."])
    with pytest.raises(ValueError, match=r"unknown argument 'b' for plugin p \(accepted: a, pre\.<name>\)"):
        check_arguments("p", {"b": "1"}, ["a"], ["pre."])
    with pytest.raises(ValueError, match=r"\(accepted: none\)"):
        check_arguments("p", {"b": "1"})


@pytest.mark.parametrize(
    ("text", "minimum", "expected"),
    [
        (None, 0.0, 7.0),
        ("2", 0.0, 2.0),
        ("0", 0.0, 0.0),
        ("1.5", 1.0, 1.5),
    ],
)
def test_number_reads_a_value(text: str | None, minimum: float, expected: float) -> None:
    args = {} if text is None else {"w": text}
    assert number(args, "w", 7.0, minimum=minimum) == expected


@pytest.mark.parametrize(
    ("text", "minimum"), [("-1", 0.0), ("abc", 0.0), ("nan", 0.0), ("inf", 0.0), ("0.9", 1.0), ("", 0.0)]
)
def test_number_refuses_a_bad_value(text: str, minimum: float) -> None:
    with pytest.raises(ValueError, match=rf"^w: '{text}' \(expected a number >= {minimum:g}\)$"):
        number({"w": text}, "w", 1.0, minimum=minimum)


def test_sorting_tasks_by_key_gives_the_order_the_comparisons_give() -> None:
    from batch_scheduler.plugins.priority import PriorityPlugin

    prio = PriorityPlugin("priority", Arguments())

    def t(name: str, priority: int, order: int) -> TaskInfo:
        x = task(name, order)
        x.priority = priority
        return x

    indexed = [t("j-w-2", 1, 0), t("j-w-10", 1, 0), t("j-w-1", 5, 1), t("j-w-3", 1, 2)]
    plain = [t("b", 1, 1), t("a", 1, 1), t("c", 3, 0)]
    mixed = [t("j-w-1", 1, 2), t("solo", 1, 1), t("j-w-0", 1, 3)]
    for tiers_ in (tiers([prio]), tiers([])):
        for tasks in (indexed, plain, mixed):
            assert [x.name for x in tiers_.sort_tasks(tasks)] == [x.name for x in sorted(tasks, key=tiers_.task_key())]
    assert [x.name for x in tiers([prio]).sort_tasks(indexed)] == ["j-w-1", "j-w-2", "j-w-3", "j-w-10"]
