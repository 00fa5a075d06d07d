"""topology_test.go Test_readTopologyFromPgAnnotations: its 7 cases, ported (Volcano master, ed72c7c).

The Go test hands ``readTopologyFromPgAnnotations`` a JobInfo whose tasks have only a name and
a task role. Here each case is a real session: a PodGroup with the case's annotations, one
pending pod per task (its role in the ``volcano.sh/task-spec`` annotation, as the job
controller writes it), and the task-topology plugin in the conf; the session's own JobInfo
is read. Beyond the Go test, each case also checks what the plugin made of the job at session
open: a topology for the valid cases, the error in ``ignored`` for the invalid ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from batch_scheduler.plugins.task_buckets import TaskTopology
from batch_scheduler.plugins.task_topology import (
    AFFINITY,
    ANTI_AFFINITY,
    TASK_ORDER,
    Malformed,
    TaskTopologyPlugin,
    read_topology,
)
from cluster.model.core import Pod
from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    TASK_SPEC,
    build_node,
    build_pod,
    build_pod_group_with_anno,
    build_queue,
    build_resource_list,
)
from tests.volcano.harness import Case, Plugin, open_session

TIERS = [[Plugin("task-topology", ("enableTaskOrder", "enableNodeOrder"))]]

TF_TASKS = {
    "job1-ps-0": "ps",
    "job1-ps-1": "ps",
    "job1-worker-0": "worker",
    "job1-worker-1": "worker",
    "job1-chief-0": "chief",
    "job1-evaluator-0": "evaluator",
}
PS_WORKER_TASKS = {name: role for name, role in TF_TASKS.items() if role in ("ps", "worker")}

# Per case: description; the job's tasks (pod name -> task role); its PodGroup's annotations;
# the topology read, or the error.
CASES: list[dict[str, Any]] = [
    {
        "description": "correct annotation",
        "tasks": TF_TASKS,
        "annotations": {
            AFFINITY: "ps,worker;ps,chief",
            ANTI_AFFINITY: "ps;worker,chief",
            TASK_ORDER: "ps,worker,chief,evaluator",
        },
        "topology": TaskTopology(
            affinity=(("ps", "worker"), ("ps", "chief")),
            anti_affinity=(("ps",), ("worker", "chief")),
            task_order=("ps", "worker", "chief", "evaluator"),
        ),
    },
    {
        "description": "correct annotation with tasks whose names contain `-`",
        "tasks": {
            "job1-ps-some-0": "ps-some",
            "job1-ps-some-1": "ps-some",
            "job1-worker-another-some-0": "worker-another-some",
            "job1-worker-another-some-1": "worker-another-some",
            "job1-chief-kk-0": "chief-kk",
            "job1-evaluator-tt-0": "evaluator-tt",
        },
        "annotations": {
            AFFINITY: "ps-some,worker-another-some;ps-some,chief-kk",
            ANTI_AFFINITY: "ps-some;worker-another-some,chief-kk",
            TASK_ORDER: "ps-some,worker-another-some,chief-kk,evaluator-tt",
        },
        "topology": TaskTopology(
            affinity=(("ps-some", "worker-another-some"), ("ps-some", "chief-kk")),
            anti_affinity=(("ps-some",), ("worker-another-some", "chief-kk")),
            task_order=("ps-some", "worker-another-some", "chief-kk", "evaluator-tt"),
        ),
    },
    {
        "description": "nil annotation",
        "tasks": {},
        "annotations": {},
        "topology": None,
    },
    {
        "description": "invalid annotation",
        "tasks": TF_TASKS,
        "annotations": {
            AFFINITY: "$%GF$^trtqwrg^",
            ANTI_AFFINITY: "ps;worker,chief;#@FGEW^vfa897bgs;;",
            TASK_ORDER: "ps,worker,chief,evaluator,,,",
        },
        "error": "task $%GF$^trtqwrg^ do not exist in job <default/job1>",
    },
    {
        "description": "invalid task name",
        "tasks": PS_WORKER_TASKS,
        "annotations": {AFFINITY: "ps,worker", ANTI_AFFINITY: "ps", TASK_ORDER: "ps,worker,chief"},
        "error": "task chief do not exist in job <default/job1>",
    },
    {
        "description": "duplicate task name",
        "tasks": PS_WORKER_TASKS,
        "annotations": {AFFINITY: "ps,worker", ANTI_AFFINITY: "ps,ps", TASK_ORDER: "ps,worker"},
        "error": "task ps is duplicate in job <default/job1>",
    },
    {
        "description": "redundant punctuations",
        "tasks": TF_TASKS,
        "annotations": {
            AFFINITY: "ps,worker;ps,,chief,;",
            ANTI_AFFINITY: "ps;worker,chief;;;",
            TASK_ORDER: "ps,worker,chief,evaluator,,,",
        },
        "topology": TaskTopology(
            affinity=(("ps", "worker"), ("ps", "", "chief", ""), ("",)),
            anti_affinity=(("ps",), ("worker", "chief"), ("",), ("",), ("",)),
            task_order=("ps", "worker", "chief", "evaluator", "", "", ""),
        ),
    },
]


def annotated(pod: Pod, role: str) -> Pod:
    """The pod with its task role in the ``volcano.sh/task-spec`` annotation."""
    meta = pod.metadata
    return msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(meta, annotations={**meta.annotations, TASK_SPEC: role})
    )


def case_session(tasks: Mapping[str, str], annotations: Mapping[str, str]) -> Any:
    case = Case(
        name="task topology",
        nodes=[build_node("n1", build_resource_list("8", "16Gi", ("pods", "110")))],
        pods=[
            annotated(build_pod("default", name, "", PENDING, build_resource_list("1", "1Gi"), "job1"), role)
            for name, role in tasks.items()
        ],
        podgroups=[build_pod_group_with_anno("job1", "default", "default", 1, None, PG_INQUEUE, annotations)],
        queues=[build_queue("default", 1, None)],
    )
    return open_session(case, TIERS, ["allocate"])


@pytest.mark.parametrize("case", CASES, ids=[c["description"] for c in CASES])
def test_read_topology_from_pg_annotations(case: dict[str, Any]) -> None:
    ssn = case_session(case["tasks"], case["annotations"])
    job = ssn.jobs["default/job1"]
    plugin = next(p for tier in ssn.tiers.tiers for p in tier if isinstance(p, TaskTopologyPlugin))
    got = read_topology(job)
    if "error" in case:
        assert isinstance(got, Malformed)
        assert got.error == case["error"]
        assert "default/job1" not in plugin.jobs
        assert case["error"] in plugin.ignored["default/job1"]
        return
    assert got == case["topology"]
    assert not plugin.ignored
    assert ("default/job1" in plugin.jobs) == (case["topology"] is not None)
