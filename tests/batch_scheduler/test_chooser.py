"""The chooser's incremental node choice always equals choosing from scratch."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batch_scheduler.session import Session
from batch_scheduler.session_input import SessionConfig, SessionInput
from batch_scheduler.statement import Statement
from batch_scheduler.tasks import TaskInfo, TaskStatus
from cluster.model.sharding import ShardingMode
from tests.batch_scheduler.inputs import columns, conf, session, task
from tests.builders import node

CONFS = {
    "default": conf(["priority", "gang"], ["predicates", "proportion", "nodeorder", "binpack"]),
    "binpack": conf(
        ["gang"],
        ["predicates", {"name": "binpack", "arguments": {"binpack.weight": 5, "binpack.resources": "nvidia.com/gpu"}}],
    ),
    "spread": conf(["gang"], ["predicates", {"name": "nodeorder", "arguments": {"balancedresource.weight": 0}}]),
}
TEMPLATES = [
    dict(cpu="1", memory="2Gi"),
    dict(cpu="2", memory="1Gi", gpu=1),
    dict(cpu="500m", memory="4Gi"),
    dict(cpu="1", memory="2Gi", tolerations=[{"key": "gpu", "operator": "Exists"}]),
]


def from_scratch(ssn: Session, t: TaskInfo) -> np.ndarray:  # type: ignore[type-arg]
    """Every node's value for the task (−inf where it does not fit), computed with nothing cached."""
    values = np.full(ssn.n, -np.inf)
    idx = np.flatnonzero(ssn.feasible(t).mask)
    if len(idx):
        values[idx] = ssn.tiers.scores(ssn, t, idx) - ssn.chooser.penalty[idx]
    return values


@settings(max_examples=60, deadline=None)
@given(
    conf_name=st.sampled_from(sorted(CONFS)),
    sizes=st.lists(st.tuples(st.integers(2, 16), st.integers(0, 3), st.booleans()), min_size=3, max_size=8),
    steps=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 7), st.booleans()), min_size=5, max_size=60),
)
def test_every_choice_is_the_best_node_as_if_scored_from_scratch(
    conf_name: str, sizes: list[tuple[int, int, bool]], steps: list[tuple[int, int, bool]]
) -> None:
    nodes = [
        node(
            f"n{i}",
            cpu=str(cpu),
            memory=f"{4 * cpu}Gi",
            gpu=gpu,
            taints=[{"key": "gpu", "effect": "NoSchedule"}] if tainted else None,
        )
        for i, (cpu, gpu, tainted) in enumerate(sizes)
    ]
    pods = [task(f"p{k}-{i}", **TEMPLATES[k]) for k in range(len(TEMPLATES)) for i in range(8)]
    ssn = session(CONFS[conf_name], nodes, pods)
    by_template = [[t for t in ssn.tasks.values() if t.name.startswith(f"p{k}-")] for k in range(len(TEMPLATES))]
    open_statements: list[Statement] = []
    for k, i, undo in steps:
        if undo and open_statements:
            open_statements.pop().discard()  # the chooser must see a discard as a change too
            continue
        t = by_template[k][i]
        if t.status is not TaskStatus.PENDING:
            continue
        row = ssn.chooser.choose(t)
        expected = from_scratch(ssn, t)
        assert ssn.chooser.templates[t.template].value.tolist() == expected.tolist()
        if row is None:
            assert expected.max() == -np.inf
            continue
        assert expected[row] == expected.max()
        stmt = Statement(ssn)
        stmt.allocate(t, ssn.columns.names[row])
        open_statements.append(stmt)


def test_soft_sharding_prefers_own_nodes_over_better_scores() -> None:
    cols = columns([node("mine", cpu="4"), node("theirs", cpu="64")])
    cols.set_owner("mine", "volcano")
    cols.set_owner("theirs", "agent-scheduler")
    ssn = Session(
        CONFS["spread"],
        SessionConfig(scheduler="volcano", sharding=ShardingMode.SOFT),
        SessionInput(columns=cols, pods=[task("p")], podgroups={}, queues={}),
    )
    row = ssn.chooser.choose(ssn.tasks["uid-p"])
    assert row is not None and ssn.columns.names[row] == "mine"


def test_a_templates_verdict_is_shared_until_a_placement_changes_the_nodes() -> None:
    """Tasks alike that fit nowhere get the same verdict without the predicates run again, and a
    placement (or its discard) makes the next one fresh: the counts always match feasible()."""
    ssn = session(
        CONFS["default"],
        [node("n1", cpu="4"), node("n2", cpu="4")],
        [task("big-1", cpu="6"), task("big-2", cpu="6"), task("small", cpu="3")],
    )
    big1, big2, small = ssn.tasks["uid-big-1"], ssn.tasks["uid-big-2"], ssn.tasks["uid-small"]
    first = ssn.best_node(big1)
    assert not isinstance(first, tuple) and ssn.best_node(big2) is first
    assert first.reason() == "0/2 nodes are available: 2 Insufficient cpu."
    assert not first.mask.flags.writeable  # shared: nobody may change it
    stmt = Statement(ssn)
    row = ssn.chooser.choose(small)
    assert row is not None
    stmt.allocate(small, ssn.columns.names[row])
    after = ssn.best_node(big2)
    assert not isinstance(after, tuple) and after is not first
    assert after.failed == ssn.feasible(big2).failed
    stmt.discard()
    again = ssn.best_node(big1)
    assert not isinstance(again, tuple) and again is not after and again.failed == ssn.feasible(big1).failed
