"""Running one ported Volcano case through one real caldera session, and checking it as Volcano's
``uthelper.TestCommonStruct`` does.

A case states the cluster (nodes, pods, PodGroups, queues, PriorityClasses), the tiers of
plugins with the switches Volcano's test turns on, and what must come out:

- ``expect_bind_map`` / ``expect_binds_num``: the pods the session binds (Volcano's fake
  binder records a pod when a committed statement or backfill dispatches it), and nothing
  else; with ``minimal_bind_check`` only the count is checked;
- ``expect_evicted`` / ``expect_evict_num``: the pods evicted (as a multiset);
- ``expect_pipelined``: per job, the nodes its pipelined tasks may be on (at least one
  task must be pipelined);
- ``expect_status``: per job, the PodGroup phase after the session;
- ``expect_task_status_nums``: per job, how many tasks end in each status.

Plugin switches follow Volcano's unit tests, not its conf loader: a switch a case does not
set is *off*. The conf is built with every switch written out, so the real conf parser
and the real tier logic run. ``expect_*`` jobs are named ``<namespace>/<podgroup>``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from batch_scheduler.conf import KNOWN_SWITCHES
from batch_scheduler.session import Session
from batch_scheduler.session_input import SessionConfig, SessionInput
from batch_scheduler.status import job_phase
from batch_scheduler.tasks import TaskStatus
from cluster.model.core import Node, Pod, PriorityClass
from cluster.model.devices import node_allocatable
from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.model.topology import HyperNode
from cluster.model.volcano import PodGroup, Queue
from cluster.nodeview.table import NodeTable
from cluster.store.records import NodeRecord, PodRecord
from tests.batch_scheduler.inputs import parse

SCHEDULER = "volcano"
OTHER_SCHEDULER = "agent-scheduler"
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Plugin:
    """A ``conf.PluginOption`` of a Volcano test: the name, the switches it sets true, its arguments."""

    name: str
    switches: tuple[str, ...] = ()
    arguments: Mapping[str, Any] = field(default_factory=dict)
    off: tuple[str, ...] = ()  # switches the Go test sets explicitly false (same as unset, kept for fidelity)


@dataclass
class Case:
    name: str
    nodes: Sequence[Node] = ()
    pods: Sequence[Pod] = ()
    podgroups: Sequence[PodGroup] = ()
    queues: Sequence[Queue] = ()
    priority_classes: Sequence[PriorityClass] = ()
    expect_bind_map: Mapping[str, str] = field(default_factory=dict)
    expect_binds_num: int = 0
    minimal_bind_check: bool = False
    expect_evicted: Sequence[str] = ()
    expect_evict_num: int = 0
    expect_pipelined: Mapping[str, Sequence[str]] = field(default_factory=dict)
    expect_status: Mapping[str, str] = field(default_factory=dict)
    expect_task_status_nums: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    sharding_mode: str = ""  # "", "soft" or "hard"
    nodes_in_shard: Sequence[str] = ()
    plugins: Sequence[str] = ()  # the plugin builders a Go case registers; tier entries of others are skipped
    hypernodes: Sequence[HyperNode] = ()


def conf_text(
    tiers: Sequence[Sequence[Plugin]], actions: Sequence[str], configurations: Sequence[Mapping[str, Any]] = ()
) -> str:
    """A Volcano conf in which every switch a plugin does not turn on is written as false."""
    raw_tiers = []
    for tier in tiers:
        plugins = []
        for p in tier:
            entry: dict[str, Any] = {"name": p.name}
            for switch in sorted(KNOWN_SWITCHES):
                entry[switch] = switch in p.switches
            if p.arguments:
                entry["arguments"] = dict(p.arguments)
            plugins.append(entry)
        raw_tiers.append({"plugins": plugins})
    raw: dict[str, Any] = {"actions": ", ".join(actions), "tiers": raw_tiers}
    if configurations:
        raw["configurations"] = [dict(c) for c in configurations]
    return yaml.safe_dump(raw)


def _record(pod: Pod) -> PodRecord:
    phase = pod.status.phase
    node = pod.spec.node_name
    group = pod.metadata.annotations.get("scheduling.k8s.io/group-name", "")
    return PodRecord(
        uid=pod.uid,
        pod=pod,
        request=pod.request(),
        scheduler=SCHEDULER,
        group=f"{pod.namespace}/{group}" if group else "",
        priority=pod.priority,
        node=node,
        accounted=node if phase not in TERMINAL else "",
        phase=phase,
        version=1,
    )


def _columns(nodes: Sequence[Node], records: Sequence[PodRecord], case: Case) -> NodeTable:
    allocated: dict[str, Resources] = {}
    for r in records:
        if r.accounted:
            allocated[r.accounted] = allocated.get(r.accounted, Resources()) + r.request
    in_shard = set(case.nodes_in_shard)
    owner = (lambda n: SCHEDULER if n in in_shard else OTHER_SCHEDULER) if case.sharding_mode else (lambda n: "")
    return NodeTable(
        [
            NodeRecord(
                name=n.name,
                allocatable=node_allocatable(n),
                allocated=allocated.get(n.name, Resources()),
                version=1,
                owner=owner(n.name),
                unschedulable=n.unschedulable,
                node=n,
            )
            for n in nodes
        ]
    )


def open_session(
    case: Case,
    tiers: Sequence[Sequence[Plugin]],
    actions: Sequence[str],
    configurations: Sequence[Mapping[str, Any]] = (),
) -> Session:
    if case.plugins:  # Volcano's session skips a tier entry whose plugin builder is not registered
        tiers = [[p for p in tier if p.name in case.plugins] for tier in tiers]
    conf = parse(conf_text(tiers, actions, configurations))
    records = [_record(p) for p in case.pods]
    mode = ShardingMode(case.sharding_mode) if case.sharding_mode else ShardingMode.NONE
    inp = SessionInput(
        columns=_columns(case.nodes, records, case),
        pods=records,
        podgroups={f"{pg.namespace}/{pg.name}": pg for pg in case.podgroups},
        queues={q.name: q for q in case.queues},
        priority_classes={pc.name: pc for pc in case.priority_classes},
        hypernodes={hn.name: hn for hn in case.hypernodes},
    )
    return Session(conf, SessionConfig(scheduler=SCHEDULER, sharding=mode, default_queue="default"), inp)


def binds(ssn: Session) -> dict[str, str]:
    return {f"{t.namespace}/{t.name}": t.node for batch in ssn.commits for t in batch}


def run_case(
    case: Case,
    tiers: Sequence[Sequence[Plugin]],
    actions: Sequence[str],
    configurations: Sequence[Mapping[str, Any]] = (),
) -> Session:
    """Open a session for ``case``, run ``actions`` in it, and check every expectation."""
    ssn = open_session(case, tiers, actions, configurations)
    ssn.run()
    check(case, ssn)
    return ssn


def check(case: Case, ssn: Session) -> None:
    got = binds(ssn)
    bound = sum(len(batch) for batch in ssn.commits)
    assert bound == len(got), f"a pod was bound twice: {[t.name for b in ssn.commits for t in b]}"
    if case.minimal_bind_check:
        assert len(got) == case.expect_binds_num, f"binds: want {case.expect_binds_num}, got {len(got)}: {got}"
    else:
        assert case.expect_binds_num == len(case.expect_bind_map), "case: bind count and bind map disagree"
        assert got == dict(case.expect_bind_map), f"binds:\n want {dict(case.expect_bind_map)}\n got  {got}"
    assert case.expect_evict_num == len(case.expect_evicted), "case: evict count and evicted list disagree"
    evicted = Counter(f"{t.namespace}/{t.name}" for t in ssn.evictions)
    assert evicted == Counter(case.expect_evicted), (
        f"evicted:\n want {sorted(case.expect_evicted)}\n got  {sorted(evicted.elements())}"
    )
    for job_key, nodes in case.expect_pipelined.items():
        job = ssn.jobs.get(job_key)
        assert job is not None, f"pipelined: job {job_key} is not in the session"
        pipelined = [t for t in job.tasks.values() if t.status is TaskStatus.PIPELINED]
        assert pipelined, f"pipelined: want tasks of {job_key} pipelined to {list(nodes)}, none are"
        for t in pipelined:
            assert t.node in nodes, f"pipelined: {t.name} -> {t.node}, want one of {list(nodes)}"
    for job_key, phase in case.expect_status.items():
        job = ssn.jobs.get(job_key)
        assert job is not None, f"status: job {job_key} is not in the session"
        # Volcano's tests read the phase before the session closes, so the gang plugin has not yet
        # marked unready jobs Unschedulable (what turns a running, unready job Unknown).
        got_phase = job_phase(job, gang=False)
        assert got_phase == phase, f"status of {job_key}: want {phase}, got {got_phase}"
    for job_key, counts in case.expect_task_status_nums.items():
        job = ssn.jobs.get(job_key)
        assert job is not None, f"task statuses: job {job_key} is not in the session"
        for status, n in counts.items():
            have = sum(1 for t in job.tasks.values() if t.status.value == status)
            assert have == n, f"task statuses of {job_key}: want {n} {status}, got {have}"
