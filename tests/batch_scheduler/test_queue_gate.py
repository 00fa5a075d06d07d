"""Queue admission by scheduling gate (Volcano's ``scheduling.volcano.sh/queue-allocation-gate``).

A pod annotated ``scheduling.volcano.sh/queue-allocation-gate: "true"`` and carrying that gate
waits, gated, until its queue has room for it; then the batch scheduler lifts the gate, and holds
the pod's request against the queue (capacity's reservation) until the pod is placed, so pods that
come later cannot take the room it was promised.
"""

from __future__ import annotations

from typing import Any

from batch_scheduler.session import Session
from batch_scheduler.tasks import TaskInfo
from cluster.model.labels import QUEUE_ALLOCATION_GATE
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import conf, podgroup, queue, session, task
from tests.builders import node

CONF = conf(["priority", "gang"], ["predicates", "capacity", "nodeorder"], actions="enqueue, allocate")
OPT_IN = {QUEUE_ALLOCATION_GATE: "true"}
GATE = [{"name": QUEUE_ALLOCATION_GATE}]
NODES = [node("n0", cpu="16"), node("n1", cpu="16")]


def pod(name: str, gated: bool = True, annotations: dict[str, str] | None = None, **spec: Any) -> PodRecord:
    if gated:
        spec.setdefault("schedulingGates", GATE)
    return task(name, cpu="1", group=name, annotations=OPT_IN if annotations is None else annotations, **spec)


def run(pods: list[PodRecord], capability: str = "2") -> Session:
    ssn = session(
        CONF,
        NODES,
        pods,
        podgroups=[podgroup(p.pod.name, min_member=1, queue="q", phase="Inqueue") for p in pods],
        queues=[queue("q", capability={"cpu": capability, "memory": "100Gi"})],
    )
    ssn.run()
    return ssn


def names(tasks: list[TaskInfo]) -> list[str]:
    return sorted(t.name for t in tasks)


def placed(ssn: Session) -> list[str]:
    return sorted(t.name for batch in ssn.commits for t in batch)


def test_the_gate_is_lifted_for_as_many_pods_as_the_queue_can_take() -> None:
    ssn = run([pod(f"p{i}", created=f"2026-01-01T00:00:0{i}Z") for i in range(3)])
    assert names(ssn.ungated) == ["p0", "p1"]  # 2 cpu of room: the third stays gated
    assert placed(ssn) == []  # gated pods are not placed in the session that lifts their gate
    assert "wait for their scheduling gates" in ssn.jobs["default/p2"].reason


def test_a_lifted_pod_holds_its_room_until_it_is_placed() -> None:
    """The next session: p0 and p1 (gate gone, annotation kept) are placed; a plain pod created
    before them cannot take the room they were promised, and p2 stays gated."""
    early = task("early", cpu="1", group="early", created="2025-12-31T00:00:00Z")
    lifted = [pod(f"p{i}", gated=False, created=f"2026-01-01T00:00:0{i}Z") for i in range(2)]
    ssn = run([early, *lifted, pod("p2", created="2026-01-01T00:00:02Z")])
    assert "early" not in placed(ssn) and placed(ssn) == ["p0", "p1"]
    assert ssn.ungated == []
    without = run([early, *[task(f"p{i}", cpu="1", group=f"p{i}") for i in range(2)]])
    assert "early" in placed(without)  # with no promise held, the first pod in order takes the room


def test_a_pod_with_the_gate_but_without_the_annotation_keeps_it_and_the_reason_says_why() -> None:
    ssn = run([pod("lone", annotations={})])
    assert ssn.ungated == []
    reason = ssn.jobs["default/lone"].reason
    assert QUEUE_ALLOCATION_GATE in reason and "annotated" in reason


def test_other_gates_stay_and_a_full_queue_lifts_nothing() -> None:
    ssn = run([pod("two", schedulingGates=[*GATE, {"name": "example.com/quota"}])])
    assert names(ssn.ungated) == ["two"]  # the queue's gate goes; example.com/quota is not caldera's to lift
    assert run([pod("big")], capability="0.5").ungated == []
