"""Volcano Jobs: expanded into the PodGroup and pods Volcano's job controller makes; refused as its webhook refuses."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.manifests import ManifestError, expand, load_manifests
from cluster.model import GROUP_NAME_ANNOTATION, Container, Node, ObjectMeta, Pod, PodGroup, PodSpec, ResourceRequirements
from cluster.quantity import QuantityError
from cluster.resources import GPU
from cluster.volcano_job import Job, JobError, JobSpec, PodTemplate, TaskSpec, TemplateMeta, expand_job


def task(
    name: str,
    replicas: int = 1,
    *,
    min_available: int | None = None,
    scheduler: str = "default-scheduler",
    priority_class: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **requests: str,
) -> TaskSpec:
    """A task whose pods have one container requesting ``requests`` (``gpu=`` is nvidia.com/gpu)."""
    requests = {GPU if k == "gpu" else k: v for k, v in requests.items()}
    spec = PodSpec(
        containers=[Container(name="main", resources=ResourceRequirements(requests=dict(requests)))],
        scheduler_name=scheduler,
        priority_class_name=priority_class,
    )
    meta = TemplateMeta(labels=labels or {}, annotations=annotations or {})
    return TaskSpec(name=name, replicas=replicas, min_available=min_available, template=PodTemplate(metadata=meta, spec=spec))


def job(name: str, *tasks: TaskSpec, namespace: str = "default", **spec: Any) -> Job:
    return Job(metadata=ObjectMeta(name=name, namespace=namespace), spec=JobSpec(tasks=list(tasks), **spec))


def tf_job(**spec: Any) -> Job:
    """The usual two-task training job: one parameter server, three GPU workers."""
    return job(
        "tf",
        task("ps", 1, cpu="1", memory="2Gi"),
        task("worker", 3, min_available=2, cpu="2", memory="4Gi", gpu="1"),
        namespace="team-a",
        **spec,
    )


def test_two_task_job_expands_into_pods_and_a_gang() -> None:
    group, pods = expand_job(tf_job(min_available=3, queue="research", priority_class_name="high"))

    assert [p.name for p in pods] == ["tf-ps-0", "tf-worker-0", "tf-worker-1", "tf-worker-2"]
    for p in pods:
        assert p.namespace == "team-a"
        assert p.group_name == "tf" and p.metadata.annotations[GROUP_NAME_ANNOTATION] == "tf"
        assert p.scheduler_name == "volcano"
        assert p.spec.priority_class_name == "high"
        assert p.metadata.uid == ""
    assert [p.labels for p in pods[:2]] == [
        {"volcano.sh/job-name": "tf", "volcano.sh/task-spec": "ps", "volcano.sh/queue-name": "research"},
        {"volcano.sh/job-name": "tf", "volcano.sh/task-spec": "worker", "volcano.sh/queue-name": "research"},
    ]
    assert len({p.uid for p in pods}) == 4  # derived from namespace/name, so distinct and stable
    assert pods[1].request() == {"cpu": 2000, "memory": 4 << 30, GPU: 1, "pods": 1}

    assert (group.name, group.namespace) == ("tf", "team-a")
    assert group.spec.min_member == 3
    assert group.spec.min_task_member == {"worker": 2}
    assert group.spec.queue == "research"
    assert group.spec.priority_class_name == "high"
    # ps and the first two workers, in task order; no `pods` entry.
    assert group.spec.min_resources == {"cpu": "5", "memory": "10Gi", GPU: "2"}


@pytest.mark.parametrize(
    ("spec", "min_member", "min_resources"),
    [
        ({}, 4, {"cpu": "7", "memory": "14Gi", GPU: "3"}),
        ({"min_available": 0}, 4, {"cpu": "7", "memory": "14Gi", GPU: "3"}),  # Volcano reads 0 as unset
        ({"min_available": 1}, 1, {"cpu": "1", "memory": "2Gi"}),
        ({"min_available": 4}, 4, {"cpu": "7", "memory": "14Gi", GPU: "3"}),
    ],
)
def test_min_member_and_min_resources(spec: dict[str, Any], min_member: int, min_resources: dict[str, str]) -> None:
    group, _ = expand_job(tf_job(**spec))
    assert group.spec.min_member == min_member
    assert group.spec.min_resources == min_resources
    assert group.min_resources_resources()  # parses back


def test_defaults() -> None:
    group, pods = expand_job(job("j", task("t", 2)))
    assert [p.name for p in pods] == ["j-t-0", "j-t-1"]
    assert group.spec.queue == "default" and pods[0].labels["volcano.sh/queue-name"] == "default"
    assert group.spec.min_member == 2 and group.spec.min_task_member == {}
    assert group.spec.min_resources == {}
    assert pods[0].scheduler_name == "volcano" and pods[0].spec.priority_class_name == ""


def test_zero_replicas_make_no_pods() -> None:
    group, pods = expand_job(job("j", task("a", 0), task("b", 2, cpu="500m")))
    assert [p.name for p in pods] == ["j-b-0", "j-b-1"]
    assert group.spec.min_member == 2 and group.spec.min_resources == {"cpu": "1"}


def test_template_settings_win_where_volcano_keeps_them() -> None:
    t = task(
        "w",
        scheduler="caldera-batch",
        priority_class="low",
        labels={"app": "train", "volcano.sh/job-name": "spoofed"},
        annotations={"note": "x", GROUP_NAME_ANNOTATION: "other"},
    )
    _, [pod] = expand_job(job("j", t, scheduler_name="volcano-2", priority_class_name="high"))
    assert pod.scheduler_name == "caldera-batch"
    assert pod.spec.priority_class_name == "low"
    assert pod.labels["app"] == "train" and pod.labels["volcano.sh/job-name"] == "j"
    assert pod.metadata.annotations == {"note": "x", GROUP_NAME_ANNOTATION: "j"}
    _, [pod] = expand_job(job("j", task("w"), scheduler_name="volcano-2"))
    assert pod.scheduler_name == "volcano-2"


@pytest.mark.parametrize(
    ("tasks", "spec", "message"),
    [
        ([], {}, "spec.tasks: no tasks (a Job needs at least one task"),
        ([task("a"), task("")], {}, "spec.tasks[1].name: missing (every task needs a name: lower-case letters"),
        ([task("Worker")], {}, "spec.tasks[0].name: 'Worker' is not a valid task name (expected lower-case letters"),
        ([task("a"), task("b"), task("a")], {}, "spec.tasks[2].name: 'a' is also the name of spec.tasks[0] (task names must be unique)"),
        ([task("a"), task("b", -1)], {}, "spec.tasks[1].replicas: -1 is negative (expected 0 or more)"),
        ([task("a", 2, min_available=3)], {}, "spec.tasks[0].minAvailable: 3 is out of range (expected 0 to the task's replicas, 2)"),
        ([task("a", 2, min_available=-1)], {}, "spec.tasks[0].minAvailable: -1 is out of range (expected 0 to the task's replicas, 2)"),
        ([task("a", 2), task("b")], {"min_available": 4}, "spec.minAvailable: 4 is out of range (expected 0 to the replicas of all tasks, 3)"),
        ([task("a", 2)], {"min_available": -1}, "spec.minAvailable: -1 is out of range (expected 0 to the replicas of all tasks, 2)"),
    ],
)
def test_invalid_jobs(tasks: list[TaskSpec], spec: dict[str, Any], message: str) -> None:
    with pytest.raises(JobError) as err:
        expand_job(job("j", *tasks, **spec))
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_bad_quantity_names_the_task_template() -> None:
    with pytest.raises(QuantityError, match=r"^spec\.tasks\[1\]\.template\.spec\.containers\[0\]\.resources\.requests\.cpu: "):
        expand_job(job("j", task("a"), task("b", cpu="two")))


JOB_YAML = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {capacity: {cpu: 8}}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: tf, namespace: team-a}
spec:
  minAvailable: 3
  schedulerName: volcano
  queue: research
  priorityClassName: high
  policies: [{event: PodEvicted, action: RestartJob}]
  plugins: {ssh: [], svc: []}
  tasks:
  - name: ps
    replicas: 1
    template:
      metadata: {labels: {role: ps}}
      spec:
        containers:
        - {name: ps, image: tf, resources: {requests: {cpu: 1, memory: 2Gi}}}
  - name: worker
    replicas: 3
    minAvailable: 2
    template:
      spec:
        restartPolicy: OnFailure
        containers:
        - name: worker
          image: tf
          resources:
            limits: {cpu: 2, memory: 4Gi, nvidia.com/gpu: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: lone}
"""


def test_job_loads_from_yaml_and_expands_in_place() -> None:
    objects, skipped = load_manifests(JOB_YAML)
    assert skipped == []
    assert [type(o) for o in objects] == [Node, Job, Pod]
    loaded = objects[1]
    assert isinstance(loaded, Job)
    assert loaded.spec.tasks[1].min_available == 2

    out = expand(objects)
    assert [(type(o).__name__, o.name) for o in out] == [
        ("Node", "n1"),
        ("PodGroup", "tf"),
        ("Pod", "tf-ps-0"),
        ("Pod", "tf-worker-0"),
        ("Pod", "tf-worker-1"),
        ("Pod", "tf-worker-2"),
        ("Pod", "lone"),
    ]
    group = out[1]
    assert isinstance(group, PodGroup)
    assert group.spec.min_member == 3 and group.spec.min_task_member == {"worker": 2}
    assert group.spec.min_resources == {"cpu": "5", "memory": "10Gi", GPU: "2"}  # limits count as requests
    assert isinstance(out[2], Pod) and out[2].labels["role"] == "ps"
    assert expand(out) == out  # nothing left to expand


@pytest.mark.parametrize(
    ("replace", "by", "message"),
    [
        ("cpu: 2,", "cpu: 2 cores,", r"^document 1 \(Job tf\): spec\.tasks\[1\]\.template\.spec\.containers\[0\]\.resources\.limits\.cpu: invalid quantity '2 cores'"),
        ("replicas: 3", "replicas: -3", r"^document 1 \(Job tf\): spec\.tasks\[1\]\.replicas: -3 is negative"),
        ("minAvailable: 3", "minAvailable: 5", r"^document 1 \(Job tf\): spec\.minAvailable: 5 is out of range"),
        ("replicas: 3", "replicas: three", r"^document 1 \(Job tf\): spec\.tasks\[1\]\.replicas: Expected `int`, got `str`"),
    ],
)
def test_bad_job_fails_at_load_with_the_document_index(replace: str, by: str, message: str) -> None:
    assert replace in JOB_YAML
    with pytest.raises(ManifestError, match=message) as err:
        load_manifests(JOB_YAML.replace(replace, by, 1))
    assert "\n" not in str(err.value)
