"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/drf/hdrf_test.go``.

``TestHDRF``: hierarchical DRF (drf ``enableHierarchy``) shares one node between queue
trees (``volcano.sh/hierarchy``, ``volcano.sh/hierarchy-weights``) as allocate places task
by task; each job's allocation is checked against the case's ``expected`` (cpu, memory,
and pods as the count of tasks placed).

Two things about the Go test: its assertion cannot fail (it compares the whole ``expected``
map with one job's allocation, and fails only when they are equal), and Volcano skipped
"blocking nodes test" in 2023 as not matching its expectation (issue #2810) — before the
port to uthelper that also put pg32 in queue root-pg3-pg31. "rescaling test" was a real
assertion until then. The expectations are checked here as the test states them.

The Go test puts drf (with ``enableHierarchy``) and proportion in one tier, which caldera's
conf loader refuses; that arrangement is kept as an expected failure, and each case also
runs with proportion in the next tier, which decides the same: drf comes first in both for
queue and job order, and proportion's other switches here (job enqueued, reclaimable)
take no part in an allocate-only session.
"""

from __future__ import annotations

import pytest

from batch_scheduler.conf import ConfError
from batch_scheduler.tasks import ALLOCATED_STATUSES
from cluster.model.core import Pod
from cluster.model.volcano import Queue
from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    build_node,
    build_pod,
    build_pod_group,
    build_queue_with_annos,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, open_session

HIERARCHY, WEIGHTS = "volcano.sh/hierarchy", "volcano.sh/hierarchy-weights"
DRF = Plugin("drf", ("enableHierarchy", "enableQueueOrder", "enableJobOrder"))
PROPORTION = Plugin("proportion", ("enableJobEnqueued", "enableQueueOrder", "enableReclaimable"))
G = 1_000_000_000


def make_pods(num: int, cpu: str, mem: str, group: str) -> list[Pod]:
    return [build_pod("default", f"{group}-p{i}", "", PENDING, rl(cpu, mem), group) for i in range(num)]


def hierarchy_queue(name: str, hierarchy: str, weights: str) -> Queue:
    return build_queue_with_annos(name, 1, None, {HIERARCHY: hierarchy, WEIGHTS: weights})


RESCALING = Case(
    name="rescaling test",
    podgroups=[
        build_pod_group("pg1", "default", "root-sci", 0, None, PG_INQUEUE),
        build_pod_group("pg21", "default", "root-eng-dev", 0, None, PG_INQUEUE),
        build_pod_group("pg22", "default", "root-eng-prod", 0, None, PG_INQUEUE),
    ],
    pods=make_pods(10, "1", "1G", "pg1") + make_pods(10, "1", "0G", "pg21") + make_pods(10, "0", "1G", "pg22"),
    queues=[
        hierarchy_queue("root-sci", "root/sci", "100/50"),
        hierarchy_queue("root-eng-dev", "root/eng/dev", "100/50/50"),
        hierarchy_queue("root-eng-prod", "root/eng/prod", "100/50/50"),
    ],
    nodes=[build_node("n", rl("10", "10G", scalar("pods", "50")))],
)
BLOCKING = Case(
    name="blocking nodes test",
    podgroups=[
        build_pod_group("pg1", "default", "root-pg1", 0, None, PG_INQUEUE),
        build_pod_group("pg2", "default", "root-pg2", 0, None, PG_INQUEUE),
        build_pod_group("pg31", "default", "root-pg3-pg31", 0, None, PG_INQUEUE),
        build_pod_group("pg32", "default", "root-pg3-pg31", 0, None, PG_INQUEUE),
        build_pod_group("pg4", "default", "root-pg4", 0, None, PG_INQUEUE),
    ],
    pods=(
        make_pods(30, "1", "0G", "pg1")
        + make_pods(30, "1", "0G", "pg2")
        + make_pods(30, "1", "0G", "pg31")
        + make_pods(30, "0", "1G", "pg32")
        + make_pods(30, "0", "1G", "pg4")
    ),
    queues=[
        hierarchy_queue("root-pg1", "root/pg1", "100/25"),
        hierarchy_queue("root-pg2", "root/pg2", "100/25"),
        hierarchy_queue("root-pg3-pg31", "root/pg3/pg31", "100/25/50"),
        hierarchy_queue("root-pg3-pg32", "root/pg3/pg32", "100/25/50"),
        hierarchy_queue("root-pg4", "root/pg4", "100/25"),
    ],
    nodes=[build_node("n", rl("30", "30G", scalar("pods", "500")))],
)
EXPECTED: dict[str, dict[str, tuple[float, float, int]]] = {  # job -> (milli cpu, memory, pods)
    "rescaling test": {"pg1": (5000, 5 * G, 5), "pg21": (5000, 0, 5), "pg22": (0, 5 * G, 5)},
    "blocking nodes test": {
        "pg1": (10000, 0, 10),
        "pg2": (10000, 0, 10),
        "pg31": (10000, 0, 10),
        "pg32": (0, 15 * G, 15),
        "pg4": (0, 15 * G, 15),
    },
}


def _check(case: Case, tiers: list[list[Plugin]]) -> None:
    ssn = open_session(case, tiers, ["allocate"])
    ssn.run()
    got = {}
    for job in ssn.jobs.values():
        placed = sum(1 for t in job.tasks.values() if t.status in ALLOCATED_STATUSES)
        got[job.name] = (job.allocated.cpu, job.allocated.memory, placed)
    assert got == EXPECTED[case.name]


@pytest.mark.parametrize("case", [RESCALING, BLOCKING], ids=lambda c: c.name)
def test_hdrf(case: Case) -> None:
    """hdrf_test.go TestHDRF, proportion in the tier after drf's."""
    _check(case, [[DRF], [PROPORTION]])


def test_hdrf_one_tier_is_refused_by_the_conf_loader_as_volcanos_is() -> None:
    """hdrf_test.go TestHDRF builds its tier (drf with enableHierarchy beside proportion) in Go,
    past Volcano's conf loader, which refuses that tier ("proportion and drf with hierarchy
    enabled conflicts", pkg/scheduler/util.go UnmarshalSchedulerConf). caldera reads its conf
    through the loader, so the cases run with proportion in the next tier (above), where they
    decide the same: drf orders the queues first either way."""
    with pytest.raises(ConfError, match="drf with enableHierarchy: true cannot share a tier with proportion"):
        open_session(RESCALING, [[DRF, PROPORTION]], ["allocate"])
