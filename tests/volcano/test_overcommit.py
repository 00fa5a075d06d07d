"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/overcommit/overcommit_test.go``.

``TestOvercommitPlugin``: as the Go test does, each job is first told it was enqueued
(``ssn.JobEnqueued``, so its minResources count twice: already Inqueue, and enqueued
again) and then asked whether it may be enqueued, through the session's tiers.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.volcano.builders import PG_INQUEUE, build_node, build_pod_group, build_queue
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, open_session

NODES = [build_node("n1", rl("2", "4Gi")), build_node("n2", rl("4", "16Gi"))]
HUGE, NORMAL, SMALL = rl("20000m", "20G"), rl("2000m", "2G"), rl("200m", "0.5G")
PG1 = build_pod_group("pg1", "test-namespace", "c1", 2, None, PG_INQUEUE, min_resources=NORMAL)
PG2 = build_pod_group("pg2", "test-namespace", "c1", 2, None, PG_INQUEUE, min_resources=HUGE)
PG3 = build_pod_group("pg2", "test-namespace", "c1", 2, None, PG_INQUEUE)  # no minResources
QUEUE1, QUEUE2 = build_queue("c1", 1, None), build_queue("c1", 1, SMALL)

CASES: list[tuple[Case, dict[str, Any], bool]] = [
    (
        Case(name="overCommitFactor is more than 0", podgroups=[PG1], queues=[QUEUE1], nodes=NODES),
        {"overcommit-factor": 1.2},
        True,
    ),
    (
        Case(name="overCommitFactor is less than 0", podgroups=[PG1], queues=[QUEUE1], nodes=NODES),
        {"overcommit-factor": 0.8},
        True,
    ),
    (
        Case(name="when the required resources of pg are too large", podgroups=[PG2], queues=[QUEUE1], nodes=NODES),
        {"overcommit-factor": 1.2},
        False,
    ),
    (
        Case(name="when pg does not fill MinResources", podgroups=[PG3], queues=[QUEUE2], nodes=NODES),
        {"overcommit-factor": 1.2},
        True,
    ),
]


@pytest.mark.parametrize(("case", "arguments", "enqueueable"), CASES, ids=[c[0].name for c in CASES])
def test_overcommit_plugin(case: Case, arguments: dict[str, Any], enqueueable: bool) -> None:
    """overcommit_test.go TestOvercommitPlugin."""
    ssn = open_session(case, [[Plugin("overcommit", ("enableJobEnqueued",), arguments)]], ["enqueue"])
    assert ssn.jobs
    for job in ssn.jobs.values():
        ssn.tiers.enqueued(job)
        assert (ssn.tiers.enqueueable(job).kind.value == "permit") is enqueueable
