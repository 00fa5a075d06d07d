"""The overcommit plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

from typing import Any

import pytest

from batch_scheduler.plugins.overcommit import OvercommitPlugin
from batch_scheduler.session import Session
from batch_scheduler.votes import PERMIT, VoteKind
from tests.batch_scheduler.inputs import conf, podgroup, queue, session
from tests.batch_scheduler.plugins.common import plugin, stamp
from tests.builders import node

# -- overcommit ---------------------------------------------------------------------------


def overcommit_session(factor: str | None, used_cpu: int, podgroups: list[Any], scheduler_conf: Any = None) -> Session:
    args = {} if factor is None else {"overcommit-factor": factor}
    c = scheduler_conf or conf([{"name": "overcommit", "arguments": args}])
    return session(c, [node("n1", cpu=10, memory="100Gi")], [], podgroups=podgroups, used={"n1": {"cpu": used_cpu}})


@pytest.mark.parametrize(
    ("factor", "used", "need", "admitted"),
    [
        ("1.5", 4000, "11", True),  # 10 × 1.5 − 4 = 11
        ("1.5", 4000, "12", False),
        (None, 0, "12", True),  # default factor 1.2
        (None, 0, "12100m", False),
        ("1", 0, "10", True),
        ("1", 1, "10", False),
        ("2", 10000, "10", True),
    ],
)
def test_overcommit_admits_up_to_total_times_factor_minus_used(
    factor: str | None, used: int, need: str, admitted: bool
) -> None:
    ssn = overcommit_session(factor, used, [podgroup("j", min_resources={"cpu": need})])
    vote = ssn.tiers.enqueueable(ssn.jobs["default/j"])
    assert (vote == PERMIT) is admitted
    if not admitted:
        assert vote.kind is VoteKind.REJECT and vote.condition == "NotEnoughResources"


def test_overcommit_reason_text() -> None:
    ssn = overcommit_session("1.5", 4000, [podgroup("j", min_resources={"cpu": "12"})])
    vote = ssn.tiers.enqueueable(ssn.jobs["default/j"])
    assert vote.reason == (
        "cluster: job needs cpu 12 to start, only 11 can be admitted (10 allocatable × "
        "overcommit-factor 1.5, 4 allocated, 0 reserved by admitted jobs)"
    )


def test_overcommit_counts_admitted_jobs_and_permits_without_min_resources() -> None:
    ssn = overcommit_session(
        "1.5",
        4000,
        [
            podgroup("old", phase="Inqueue", min_resources={"cpu": "3"}),
            podgroup("a", min_resources={"cpu": "6"}),
            podgroup("b", min_resources={"cpu": "6"}),
            podgroup("free"),
        ],
    )
    oc = plugin(ssn, OvercommitPlugin)
    assert oc.enqueueable(ssn.jobs["default/free"]) == PERMIT  # best effort: Volcano permits it
    assert ssn.tiers.enqueueable(ssn.jobs["default/a"]) == PERMIT  # 11 − 3 reserved ≥ 6
    ssn.tiers.enqueued(ssn.jobs["default/a"])  # admitted: only now reserved
    vote = ssn.tiers.enqueueable(ssn.jobs["default/b"])  # 11 − 9 < 6
    assert vote.kind is VoteKind.REJECT
    assert "only 2 can be admitted" in vote.reason and "9 reserved by admitted jobs" in vote.reason


def test_a_job_refused_by_its_queue_reserves_nothing_in_overcommit() -> None:
    # As in the default conf, overcommit votes before proportion in one tier. A job that
    # proportion refuses is not admitted, so it must not hold cluster room other jobs need.
    c = conf([{"name": "overcommit", "arguments": {"overcommit-factor": "1"}}, "proportion"], actions="enqueue")
    ssn = session(
        c,
        [node("n1", cpu=10, memory="100Gi")],
        [],
        podgroups=[
            podgroup("capped", queue="qa", min_resources={"cpu": "6"}, created=stamp(1)),
            podgroup("fits", queue="qb", min_resources={"cpu": "6"}, created=stamp(2)),
        ],
        queues=[queue("qa", capability={"cpu": "4"}), queue("qb")],
    )
    capped, fits = ssn.jobs["default/capped"], ssn.jobs["default/fits"]
    assert ssn.tiers.enqueueable(capped).kind is VoteKind.REJECT
    assert ssn.tiers.enqueueable(fits) == PERMIT  # 10 cpu idle, nothing admitted
    ssn.tiers.enqueued(fits)  # admitted: only now reserved


def test_enqueue_action_admits_what_the_cluster_can_take_after_a_queue_refusal() -> None:
    c = conf([{"name": "overcommit", "arguments": {"overcommit-factor": "1"}}, "proportion"], actions="enqueue")
    ssn = session(
        c,
        [node("n1", cpu=10, memory="100Gi")],
        [],
        podgroups=[
            podgroup("capped", queue="qa", min_resources={"cpu": "6"}, created=stamp(1)),
            podgroup("fits", queue="qb", min_resources={"cpu": "6"}, created=stamp(2)),
        ],
        queues=[queue("qa", capability={"cpu": "4"}), queue("qb")],
    )
    ssn.run()
    assert ssn.jobs["default/capped"].phase == "Pending"
    assert "capability cpu 4" in ssn.jobs["default/capped"].reason
    assert ssn.jobs["default/fits"].phase == "Inqueue", ssn.jobs["default/fits"].reason


def test_overcommit_reason_rounds_the_room_down_to_whole_gpus() -> None:
    # 1 GPU × 1.2 leaves room for 1.2 GPUs: "only 1 can be admitted", never "only 2" beside "needs 2".
    ssn = session(
        conf(["overcommit"]),
        [node("n1", cpu=10, gpu=1)],
        [],
        podgroups=[podgroup("j", min_resources={"nvidia.com/gpu": "2"})],
    )
    vote = ssn.tiers.enqueueable(ssn.jobs["default/j"])
    assert vote.reason.startswith("cluster: job needs nvidia.com/gpu 2 to start, only 1 can be admitted (1 allocatable")
