"""Volcano Jobs: defaulted and refused as Volcano's admission webhook does, expanded into the PodGroup and pods
Volcano's job controller makes (release-1.14; the acceptance scenarios AD-1..AD-8 of the wave-2 spec, §3.8)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from cluster.model.core import (
    Container,
    Node,
    ObjectMeta,
    Pod,
    PodSpec,
    PriorityClass,
    ResourceRequirements,
)
from cluster.model.labels import GROUP_NAME_ANNOTATION
from cluster.model.manifests import ManifestError, expand, load_manifests
from cluster.model.pod_template import OwnerMeta
from cluster.model.quantity import QuantityError
from cluster.model.resources import GPU
from cluster.model.volcano import PodGroup, Queue
from cluster.model.volcano_job import (
    DependsOn,
    Job,
    JobError,
    JobSpec,
    LifecyclePolicy,
    NetworkTopologySpec,
    PartitionPolicy,
    PodTemplate,
    TaskSpec,
    TemplateMeta,
    VolumeSpec,
    admit_queue,
    admitted_job,
    expand_job,
)


def task(
    name: str,
    replicas: int = 1,
    *,
    min_available: int | None = None,
    scheduler: str = "default-scheduler",
    policies: list[LifecyclePolicy] | None = None,
    depends_on: list[str] | None = None,
    partition: PartitionPolicy | None = None,
    topology_policy: str = "",
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
    return TaskSpec(
        name=name,
        replicas=replicas,
        min_available=min_available,
        template=PodTemplate(metadata=meta, spec=spec),
        policies=policies or [],
        depends_on=DependsOn(name=depends_on) if depends_on is not None else None,
        partition_policy=partition,
        topology_policy=topology_policy,
    )


def job(
    name: str,
    *tasks: TaskSpec,
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> Job:
    meta = OwnerMeta(name=name, namespace=namespace, annotations=annotations or {}, labels=labels or {})
    return Job(metadata=meta, spec=JobSpec(tasks=list(tasks), **spec))


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
    # The labels createJobPod sets (Volcano's Services select on job-name and job-namespace).
    assert [p.labels for p in pods[:2]] == [
        {
            "volcano.sh/task-index": "0",
            "volcano.sh/job-name": "tf",
            "volcano.sh/task-spec": "ps",
            "volcano.sh/job-namespace": "team-a",
            "volcano.sh/queue-name": "research",
        },
        {
            "volcano.sh/task-index": "0",
            "volcano.sh/job-name": "tf",
            "volcano.sh/task-spec": "worker",
            "volcano.sh/job-namespace": "team-a",
            "volcano.sh/queue-name": "research",
        },
    ]
    assert pods[2].metadata.annotations == {
        "volcano.sh/task-index": "1",
        "volcano.sh/task-spec": "worker",
        GROUP_NAME_ANNOTATION: "tf",
        "volcano.sh/job-name": "tf",
        "volcano.sh/queue-name": "research",
        "volcano.sh/job-version": "0",
        "volcano.sh/template-uid": "tf-worker",
        "volcano.sh/job-retry-count": "0",
    }
    assert len({p.uid for p in pods}) == 4  # derived from namespace/name, so distinct and stable
    assert pods[1].request() == {"cpu": 2000, "memory": 4 << 30, GPU: 1, "pods": 1}

    assert (group.name, group.namespace) == ("tf", "team-a")
    assert group.spec.min_member == 3
    assert group.spec.min_task_member == {"ps": 1, "worker": 2}  # every task: its minAvailable, else its replicas
    assert group.spec.queue == "research"
    assert group.spec.priority_class_name == "high"
    # ps and the first two workers, in task order; no `pods` entry.
    assert group.spec.min_resources == {"cpu": "5", "memory": "10Gi", GPU: "2"}


@pytest.mark.parametrize(
    ("spec", "min_member", "min_resources"),
    [
        # Unset: the tasks' minAvailable summed (1 + 2), not every replica (the webhook's default, AD-1).
        ({}, 3, {"cpu": "5", "memory": "10Gi", GPU: "2"}),
        ({"min_available": 0}, 3, {"cpu": "5", "memory": "10Gi", GPU: "2"}),  # Volcano reads 0 as unset
        ({"min_available": 1}, 1, {"cpu": "1", "memory": "2Gi"}),
        ({"min_available": 4}, 4, {"cpu": "7", "memory": "14Gi", GPU: "3"}),
    ],
)
def test_min_member_and_min_resources(spec: dict[str, Any], min_member: int, min_resources: dict[str, str]) -> None:
    group, _ = expand_job(tf_job(**spec))
    assert group.spec.min_member == min_member
    assert group.spec.min_resources == min_resources
    assert group.min_resources_amounts()  # parses back


def test_defaults() -> None:
    group, pods = expand_job(job("j", task("t", 2)))
    assert [p.name for p in pods] == ["j-t-0", "j-t-1"]
    assert group.spec.queue == "default" and pods[0].labels["volcano.sh/queue-name"] == "default"
    assert group.spec.min_member == 2 and group.spec.min_task_member == {"t": 2}
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
    assert pod.metadata.annotations["note"] == "x" and pod.metadata.annotations[GROUP_NAME_ANNOTATION] == "j"
    _, [pod] = expand_job(job("j", task("w"), scheduler_name="volcano-2"))
    assert pod.scheduler_name == "volcano-2"


@pytest.mark.parametrize(
    ("tasks", "spec", "message"),
    [
        ([], {}, "spec.tasks: no tasks (a Job needs at least one task"),
        ([task("Worker")], {}, "spec.tasks[0].name: 'Worker' is not a valid task name (expected lower-case letters"),
        (
            [task("a"), task("b"), task("a")],
            {},
            "spec.tasks[2].name: 'a' is also the name of spec.tasks[0] (task names must be unique)",
        ),
        ([task("a"), task("b", -1)], {}, "spec.tasks[1].replicas: -1 is negative (expected 0 or more)"),
        (
            [task("a", 2, min_available=3)],
            {},
            "spec.tasks[0].minAvailable: 3 is out of range (expected 0 to the task's replicas, 2)",
        ),
        (
            [task("a", 2, min_available=-1)],
            {},
            "spec.tasks[0].minAvailable: -1 is out of range (expected 0 to the task's replicas, 2)",
        ),
        (
            [task("a", 2), task("b")],
            {"min_available": 4},
            "spec.minAvailable: 4 is out of range (expected 0 to the replicas of all tasks, 3)",
        ),
        (
            [task("a", 2)],
            {"min_available": -1},
            "spec.minAvailable: -1 is out of range (expected 0 to the replicas of all tasks, 2)",
        ),
    ],
)
def test_invalid_jobs(tasks: list[TaskSpec], spec: dict[str, Any], message: str) -> None:
    with pytest.raises(JobError) as err:
        expand_job(job("j", *tasks, **spec))
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_bad_quantity_names_the_task_template() -> None:
    with pytest.raises(
        QuantityError, match=r"^spec\.tasks\[1\]\.template\.spec\.containers\[0\]\.resources\.requests\.cpu: "
    ):
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
    assert group.spec.min_member == 3 and group.spec.min_task_member == {"ps": 1, "worker": 2}
    assert group.spec.min_resources == {"cpu": "5", "memory": "10Gi", GPU: "2"}  # limits count as requests
    assert isinstance(out[2], Pod) and out[2].labels["role"] == "ps"
    assert expand(out) == out  # nothing left to expand


@pytest.mark.parametrize(
    ("replace", "by", "message"),
    [
        (
            "cpu: 2,",
            "cpu: 2 cores,",
            r"^document 1 \(Job tf\): spec\.tasks\[1\]\.template\.spec\.containers\[0\]\.resources\.limits\.cpu: invalid quantity '2 cores'",
        ),
        ("replicas: 3", "replicas: -3", r"^document 1 \(Job tf\): spec\.tasks\[1\]\.replicas: -3 is negative"),
        ("minAvailable: 3", "minAvailable: 5", r"^document 1 \(Job tf\): spec\.minAvailable: 5 is out of range"),
        (
            "replicas: 3",
            "replicas: three",
            r"^document 1 \(Job tf\): spec\.tasks\[1\]\.replicas: Expected `int`, got `str`",
        ),
    ],
)
def test_bad_job_fails_at_load_with_the_document_index(replace: str, by: str, message: str) -> None:
    assert replace in JOB_YAML
    with pytest.raises(ManifestError, match=message) as err:
        load_manifests(JOB_YAML.replace(replace, by, 1))
    assert "\n" not in str(err.value)


# -- admission: the webhook's defaults (AD-1) --------------------------------------------------


def test_ad1_webhook_defaults_sum_the_tasks_min_available_not_their_replicas() -> None:
    j = Job(
        metadata=OwnerMeta(name="j"),
        spec=JobSpec(
            tasks=[
                TaskSpec(replicas=3, template=task("x").template),
                TaskSpec(name="b", replicas=4, min_available=2, template=task("x").template),
            ]
        ),
    )
    admitted = admitted_job(j)
    assert (admitted.spec.queue, admitted.spec.scheduler_name, admitted.spec.max_retry) == ("default", "volcano", 3)
    assert [(t.name, t.min_available, t.max_retry) for t in admitted.spec.tasks] == [("default0", 3, 3), ("b", 2, 3)]
    assert admitted.spec.min_available == 5
    group, pods = expand_job(j)
    assert group.spec.min_member == 5 and group.spec.min_task_member == {"default0": 3, "b": 2}
    assert [p.name for p in pods][:4] == ["j-default0-0", "j-default0-1", "j-default0-2", "j-b-0"]


def test_partition_policy_sets_the_task_min_available_and_the_pods_partitions() -> None:
    partition = PartitionPolicy(
        total_partitions=3,
        partition_size=2,
        min_partitions=2,
        network_topology=NetworkTopologySpec(highest_tier_allowed=1),
    )
    group, pods = expand_job(job("j", task("t", 6, partition=partition, gpu="1")))
    assert group.spec.min_member == 4 and group.spec.min_task_member == {"t": 4}  # minPartitions × partitionSize
    assert [p.labels["volcano.sh/partition-id"] for p in pods] == ["0", "0", "1", "1", "2", "2"]
    assert [p.raw() for p in group.spec.sub_group_policy] == [
        {
            "name": "t",
            "subGroupSize": 2,
            "minSubGroups": 2,
            "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "t"}},
            "matchLabelKeys": ["volcano.sh/partition-id"],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
    ]


def test_plugins_that_need_svc_and_ssh_get_them() -> None:
    admitted = admitted_job(job("j", task("master"), task("worker", 2), plugins={"mpi": ["--port=2222"]}))
    assert admitted.spec.plugins == {"mpi": ["--port=2222"], "svc": [], "ssh": []}
    assert admitted_job(job("j", task("t"), plugins={"pytorch": []})).spec.plugins == {"pytorch": [], "svc": []}


def test_a_task_without_replicas_makes_no_pods() -> None:
    objects, _ = load_manifests(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\n"
        "spec:\n  tasks:\n  - name: idle\n    template: {spec: {containers: [{name: c}]}}\n"
        "  - name: busy\n    replicas: 2\n    template: {spec: {containers: [{name: c}]}}\n"
    )
    group, *pods = expand(objects)
    assert (
        isinstance(group, PodGroup)
        and group.spec.min_member == 2
        and group.spec.min_task_member == {"idle": 0, "busy": 2}
    )
    assert [p.name for p in pods] == ["j-busy-0", "j-busy-1"]


# -- admission: what the webhook refuses (AD-2, AD-3, AD-5, AD-6, AD-8) ------------------------


def refused(j: Job) -> str:
    with pytest.raises(JobError) as err:
        expand_job(j)
    assert "\n" not in str(err.value)
    return str(err.value)


NAME_60 = "w" * 60


@pytest.mark.parametrize(
    ("tasks", "spec", "message"),
    [
        # AD-2
        ([task("a", 3), task("b", 4)], {"min_available": 8},
         "spec.minAvailable: 8 is out of range (expected 0 to the replicas of all tasks, 7)"),
        ([task("a", 4, min_available=5)], {}, "spec.tasks[0].minAvailable: 5 is out of range (expected 0 to the task's replicas, 4)"),
        # AD-3
        ([task("w"), task("w")], {}, "spec.tasks[1].name: 'w' is also the name of spec.tasks[0] (task names must be unique)"),
        ([task("Worker_1")], {}, "spec.tasks[0].name: 'Worker_1' is not a valid task name (expected lower-case letters"),
        ([task(NAME_60)], {}, f"spec.tasks[0].name: the pod name a-{NAME_60}-0 would be invalid: 'a-{NAME_60}-0' (expected "),
        # AD-5
        ([task("t", policies=[LifecyclePolicy(event="PodFailed", exit_code=3, action="RestartJob")])], {},
         "spec.tasks[0].policies[0]: both event PodFailed and exitCode 3 are set (expected one of them)"),
        ([task("t")], {"policies": [LifecyclePolicy(exit_code=0, action="RestartJob")]},
         "spec.policies[0].exitCode: 0 is not an error code"),
        ([task("t")], {"policies": [LifecyclePolicy(event="PodEvicted", action="RestartJob"),
                                    LifecyclePolicy(event="PodEvicted", action="AbortJob")]},
         "spec.policies[1].event: duplicated policy event 'PodEvicted': spec.policies[0] names it too"),
        ([task("t")], {"policies": [LifecyclePolicy(event="*", action="RestartJob"),
                                    LifecyclePolicy(event="PodFailed", action="AbortJob")]},
         "spec.policies[0].event: '*' (any event) is used beside PodFailed"),
        ([task("t")], {"policies": [LifecyclePolicy(event="OutOfSync", action="RestartJob")]},
         "spec.policies[0].event: 'OutOfSync' is not a policy event (expected one of *, PodFailed, PodEvicted"),
        ([task("t")], {"policies": [LifecyclePolicy(event="PodFailed", action="SyncJob")]},
         "spec.policies[0].action: 'SyncJob' is not a policy action (expected one of AbortJob"),
        ([task("t")], {"policies": [LifecyclePolicy(action="RestartJob")]},
         "spec.policies[0]: neither an event nor an exitCode"),
        ([task("t")], {"policies": [LifecyclePolicy(exit_code=2, action="RestartJob"), LifecyclePolicy(exit_code=2, action="AbortJob")]},
         "spec.policies[1].exitCode: duplicated exitCode 2"),
        ([task("t")], {"policies": [LifecyclePolicy(event="PodPending", action="RestartJob", timeout="soon")]},
         "spec.policies[0].timeout: 'soon' is not a duration"),
        # AD-6
        ([task("t", 8, partition=PartitionPolicy(total_partitions=3, partition_size=3))], {},
         "spec.tasks[0].replicas: 8 is not totalPartitions × partitionSize = 3 × 3 = 9"),
        ([task("t", 8, min_available=8, partition=PartitionPolicy(total_partitions=2, partition_size=4, min_partitions=1))], {},
         "spec.tasks[0].minAvailable: 8 is not minPartitions × partitionSize = 1 × 4 = 4"),
        ([task("t")], {"network_topology": NetworkTopologySpec(highest_tier_allowed=1, highest_tier_name="rack")},
         "spec.networkTopology: both highestTierAllowed (1) and highestTierName ('rack') are set (expected at most one"),
        ([task("t", 2, partition=PartitionPolicy(total_partitions=1, partition_size=2, network_topology=NetworkTopologySpec(
            highest_tier_allowed=1, highest_tier_name="rack")))], {},
         "spec.tasks[0].partitionPolicy.networkTopology: both highestTierAllowed"),
        ([task("t", 2, partition=PartitionPolicy(total_partitions=0, partition_size=2))], {},
         "spec.tasks[0].partitionPolicy.totalPartitions: 0 is below 1"),
        # AD-8
        ([task("a", depends_on=["b"]), task("b", depends_on=["a"])], {},
         "spec.tasks[1].dependsOn.name: the tasks' dependencies do not form a directed acyclic graph (DAG): a → b → a"),
        ([task("a", depends_on=["a"])], {}, "spec.tasks[0].dependsOn.name: the tasks' dependencies do not form a directed "
                                             "acyclic graph (DAG): a → a"),
        ([task("a"), task("b", depends_on=["c"])], {}, "spec.tasks[1].dependsOn.name: 'c' is not a task of the job"),
        # plugins, volumes, NUMA, the CRD's minimums and patterns
        ([task("t")], {"plugins": {"horovod": []}}, "spec.plugins.horovod: unknown job plugin 'horovod' (expected one of ssh, env"),
        ([task("master")], {"plugins": {"mpi": []}}, "spec.plugins.mpi: the mpi plugin's worker task 'worker' is not a task of the job"),
        ([task("t")], {"volumes": [VolumeSpec(mount_path="/data")]},
         "spec.volumes[0]: neither volumeClaim nor volumeClaimName"),
        ([task("t")], {"volumes": [VolumeSpec(mount_path="/d", volume_claim_name="a"), VolumeSpec(mount_path="/d", volume_claim_name="b")]},
         "spec.volumes[1].mountPath: '/d' is also the mount path of spec.volumes[0]"),
        ([task("t")], {"volumes": [VolumeSpec(mount_path="/d", volume_claim_name="x", volume_claim={"accessModes": ["RWO"]})]},
         "spec.volumes[0]: both volumeClaim and volumeClaimName are set"),
        ([task("t", topology_policy="single-numa-node", cpu="1500m")], {},
         "spec.tasks[0].template.spec.containers[0].resources.requests.cpu: topologyPolicy single-numa-node needs a whole number of CPUs"),
        ([task("t", topology_policy="numa")], {}, "spec.tasks[0].topologyPolicy: 'numa' is not a topology policy"),
        ([task("t")], {"max_retry": -1}, "spec.maxRetry: -1 is negative"),
        ([task("t")], {"min_success": 0}, "spec.minSuccess: 0 is below 1"),
        ([task("t")], {"queue": "Team_A"}, "spec.queue: 'Team_A' is not a valid name"),
        ([TaskSpec(name="t", replicas=1)], {}, "spec.tasks[0].template.spec.containers: no containers"),
    ],
)  # fmt: skip
def test_the_webhook_refuses(tasks: list[TaskSpec], spec: dict[str, Any], message: str) -> None:
    assert refused(job("a", *tasks, **spec)).startswith(message)


def test_the_webhook_accepts() -> None:
    expand_job(
        job(
            "j",
            task("t"),
            policies=[
                LifecyclePolicy(events=["PodFailed", "PodEvicted"], action="RestartJob", timeout="30s"),  # AD-5
                LifecyclePolicy(exit_code=137, action="RestartTask"),
            ],
        )
    )
    expand_job(job("j", task("a"), task("b", depends_on=["a"]), task("c", depends_on=["a", "b"])))  # a DAG
    expand_job(
        job("j", task("mpimaster"), task("mpiworker", 2), plugins={"mpi": ["--master=mpimaster", "--worker=mpiworker"]})
    )
    expand_job(job("j", task("t", topology_policy="best-effort", cpu="2")))


def test_a_job_name_that_is_no_qualified_name_is_refused_by_its_first_pod_name() -> None:
    # Volcano checks each pod name before the job name, and a bad job name makes bad pod names.
    assert refused(job("a" * 64, task("t"))).startswith("spec.tasks[0].name: the pod name ")
    assert refused(job("bad name", task("t"))).startswith(
        "spec.tasks[0].name: the pod name bad name-t-0 would be invalid"
    )


# -- admission: the queue (AD-4) -------------------------------------------------------------


def queue(name: str, *, parent: str = "", state: str = "Open") -> Queue:
    return msgspec.convert({"metadata": {"name": name}, "spec": {"parent": parent}, "status": {"state": state}}, Queue)


@pytest.mark.parametrize(
    ("queue_name", "queues", "message"),
    [
        ("nope", [queue("q")], "spec.queue: no queue 'nope' (expected an existing queue: default, q)"),
        (
            "q",
            [queue("q", state="Closed")],
            "spec.queue: queue 'q' is Closed (a job can only be submitted to an Open queue)",
        ),
        ("root", [], "spec.queue: the root queue takes no jobs (expected a leaf queue)"),
        (
            "parent",
            [queue("parent"), queue("child", parent="parent")],
            "spec.queue: queue 'parent' has child queues (child); a job can only be submitted to a leaf queue",
        ),
    ],
)
def test_ad4_the_queue_must_exist_be_open_and_be_a_leaf(queue_name: str, queues: list[Queue], message: str) -> None:
    with pytest.raises(JobError) as err:
        admit_queue(job("j", task("t"), queue=queue_name), {q.name: q for q in queues})
    assert str(err.value) == message


def test_ad4_a_queue_nothing_has_opened_takes_jobs() -> None:
    """caldera runs no queue controller, so an empty state is Open (Volcano's webhook refuses it, #3173)."""
    admit_queue(job("j", task("t"), queue="q"), {"q": queue("q", state="")})
    admit_queue(job("j", task("t")), {})  # default exists without being declared
    admit_queue(
        job("j", task("t"), queue="child"), {"parent": queue("parent"), "child": queue("child", parent="parent")}
    )


def test_expand_admits_queues_when_given_them() -> None:
    objects = [job("tf", task("t"), namespace="ml", queue="gone")]
    assert len(expand(objects)) == 2  # not checked without queues
    with pytest.raises(ManifestError, match=r"^Job ml/tf: spec\.queue: no queue 'gone'"):
        expand(objects, queues={})


# -- the controller: minResources, copied metadata, names --------------------------------------


def elastic_job(**spec: Any) -> Job:
    """Volcano's task-priority example: nine workers of priority 10, a master of priority 1000."""
    return job(
        "elastic",
        task("worker", 9, priority_class="normal-pri", cpu="1"),
        task("master", 1, priority_class="high-pri", cpu="2"),
        **spec,
    )


def test_min_resources_count_the_highest_priority_task_first() -> None:
    priorities = {"normal-pri": 10, "high-pri": 1000}
    group, _ = expand_job(elastic_job(min_available=3), priority_classes=priorities)
    assert group.spec.min_resources == {"cpu": "4"}  # the master (2) and two workers: the first 3 pods by priority
    group, _ = expand_job(elastic_job(min_available=3))
    assert group.spec.min_resources == {"cpu": "3"}  # unknown classes are 0: three workers, in task order
    # At the tasks' own minAvailable (9 + 1), each task's count, whatever the order.
    group, _ = expand_job(elastic_job(), priority_classes=priorities)
    assert group.spec.min_member == 10 and group.spec.min_resources == {"cpu": "11"}


def test_min_resources_take_the_pod_level_request_init_containers_included() -> None:
    t = task("t", 2, cpu="1")
    spec = msgspec.structs.replace(
        t.template.spec, init_containers=[Container(name="init", resources=ResourceRequirements(requests={"cpu": "3"}))]
    )
    t = msgspec.structs.replace(t, template=PodTemplate(spec=spec))
    group, _ = expand_job(job("j", t))
    assert group.spec.min_resources == {"cpu": "6"}  # each pod needs max(init 3, containers 1)


def test_pods_carry_the_jobs_annotations_and_labels_that_volcano_copies() -> None:
    annotations = {
        "volcano.sh/preemptable": "false",
        "volcano.sh/cooldown-time": "600s",
        "volcano.sh/revocable-zone": "*",
        "volcano.sh/jdb-min-available": "1",
        "volcano.sh/jdb-max-unavailable": "1",
        "team": "a",
    }
    labels = {"volcano.sh/preemptable": "false", "volcano.sh/cooldown-time": "600s", "app": "x"}
    group, [pod] = expand_job(job("j", task("t", topology_policy="none"), annotations=annotations, labels=labels))
    meta = pod.metadata
    for key in (
        "volcano.sh/preemptable",
        "volcano.sh/cooldown-time",
        "volcano.sh/revocable-zone",
        "volcano.sh/jdb-min-available",
    ):
        assert meta.annotations[key] == annotations[key]
    assert "volcano.sh/jdb-max-unavailable" not in meta.annotations  # min-available wins
    assert "team" not in meta.annotations and "app" not in meta.labels
    assert meta.labels["volcano.sh/preemptable"] == "false" and meta.labels["volcano.sh/cooldown-time"] == "600s"
    assert meta.annotations["volcano.sh/numa-topology-policy"] == "none"
    assert group.metadata.annotations == annotations and group.metadata.labels == labels


def test_job_volumes_become_claims_every_pod_mounts() -> None:
    volumes = [
        VolumeSpec(mount_path="/data", volume_claim_name="dataset"),
        VolumeSpec(mount_path="/ckpt", volume_claim={"accessModes": ["ReadWriteOnce"]}),
    ]
    _, pods = expand_job(job("j", task("t", 2), volumes=volumes))
    claims = [[v.persistent_volume_claim for v in p.spec.volumes] for p in pods]
    assert claims[0] == claims[1]
    assert claims[0][0] == {"claimName": "dataset"}
    generated = claims[0][1]
    assert (
        generated is not None
        and str(generated["claimName"]).startswith("j-pvc-")
        and len(str(generated["claimName"])) == 18
    )
    assert expand_job(job("j", task("t", 2), volumes=volumes))[1] == pods  # the same names every time


def test_the_job_network_topology_goes_to_its_podgroup() -> None:
    group, _ = expand_job(
        job("j", task("t"), network_topology=NetworkTopologySpec(mode="soft", highest_tier_name="rack"))
    )
    assert group.spec.network_topology == NetworkTopologySpec(mode="soft", highest_tier_name="rack")


def test_generate_name_gives_each_job_a_name_that_a_repeat_run_gives_again() -> None:
    text = "".join(
        "---\napiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {generateName: step-}\n"
        "spec:\n  tasks:\n  - {name: t, replicas: 1, template: {spec: {containers: [{name: c, image: i}]}}}\n"
        for _ in range(2)
    )
    objects, _ = load_manifests(text)
    names = [o.name for o in expand(objects) if isinstance(o, PodGroup)]
    assert len(set(names)) == 2 and all(n.startswith("step-") and len(n) == len("step-") + 5 for n in names)
    assert [o.name for o in expand(load_manifests(text)[0]) if isinstance(o, PodGroup)] == names
    with pytest.raises(JobError, match=r"^metadata\.name: missing"):
        expand_job(Job(metadata=OwnerMeta(), spec=JobSpec(tasks=[task("t")])))


def test_priority_classes_in_the_manifests_order_the_tasks() -> None:
    objects: list[Any] = [
        elastic_job(min_available=3),
        PriorityClass(metadata=ObjectMeta(name="high-pri"), value=1000),
    ]
    group = expand(objects)[0]
    assert isinstance(group, PodGroup) and group.spec.min_resources == {"cpu": "4"}
