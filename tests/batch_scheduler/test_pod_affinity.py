"""Inter-pod rules in the batch scheduler: a gang's members count each other as they are placed;
other schedulers' pods count too; the reason names the rule."""

from __future__ import annotations

from typing import Any

from batch_scheduler.session import Session
from batch_scheduler.session_input import SessionConfig, SessionInput
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import SCHEDULER, columns, conf, podgroup, task
from tests.builders import node

CONF = conf(["priority", "gang"], ["predicates", "nodeorder", "binpack"], actions="enqueue, allocate")
ONE_PER_NODE = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def run(
    pods: list[PodRecord], nodes: int, *, others: list[PodRecord] = (), min_member: int = 3, **labels: Any
) -> Session:  # type: ignore[assignment]
    ns = [node(f"n{i}", cpu="8") for i in range(nodes)]
    inp = SessionInput(
        columns=columns(ns, [*pods, *others]),
        pods=pods,
        podgroups={"default/j": podgroup("j", min_member=min_member, phase="Inqueue")},
        queues={},
        others=others,
    )
    ssn = Session(CONF, SessionConfig(scheduler=SCHEDULER), inp)
    ssn.run()
    return ssn


def workers(count: int, **spec: Any) -> list[PodRecord]:
    return [task(f"w-{i}", cpu="1", group="j", labels={"app": "w"}, **spec) for i in range(count)]


def placed(ssn: Session) -> dict[str, str]:
    return {t.name: t.node for batch in ssn.commits for t in batch}


def test_a_gang_with_anti_affinity_gets_one_node_per_member() -> None:
    # binpack alone would put all three on one node (each has room for all)
    ssn = run(workers(3, affinity=ONE_PER_NODE), 3)
    assert sorted(placed(ssn).values()) == ["n0", "n1", "n2"]


def test_a_gang_the_rule_cannot_spread_waits_and_names_the_rule() -> None:
    ssn = run(workers(3, affinity=ONE_PER_NODE), 2)
    assert placed(ssn) == {}
    assert "didn't match pod anti-affinity rules" in ssn.jobs["default/j"].reason


def test_another_schedulers_pod_counts() -> None:
    other = task("agent-pod", cpu="1", node="n0", labels={"app": "w"})
    other = PodRecord(**{**{f: getattr(other, f) for f in other.__struct_fields__}, "scheduler": "agent-scheduler"})
    ssn = run(workers(2, affinity=ONE_PER_NODE), 3, others=[other], min_member=2)
    assert sorted(placed(ssn).values()) == ["n1", "n2"]


def test_topology_spread_puts_the_gang_across_zones() -> None:
    ns = [node(f"n{i}", cpu="8", labels={"zone": f"z{i % 2}"}) for i in range(4)]
    spread = [{"maxSkew": 1, "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "w"}}}]
    pods = workers(4, topologySpreadConstraints=spread)
    inp = SessionInput(
        columns=columns(ns, pods),
        pods=pods,
        podgroups={"default/j": podgroup("j", min_member=4, phase="Inqueue")},
        queues={},
    )
    ssn = Session(CONF, SessionConfig(scheduler=SCHEDULER), inp)
    ssn.run()
    zones = [int(n[1:]) % 2 for n in placed(ssn).values()]
    assert len(zones) == 4 and zones.count(0) == zones.count(1) == 2
