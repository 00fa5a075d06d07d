"""Kubeflow training jobs with Volcano: the PodGroup and pods the training operator (kubeflow.org/v1) and the
MPI operator (v2beta1) make, read from kubeflow/training-operator release-1.9 and kubeflow/mpi-operator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster.model.core import Pod
from cluster.model.kubeflow import expand_training_job
from cluster.model.kubeflow_api import KubeflowError, MPIJob, PyTorchJob, TFJob
from cluster.model.labels import GROUP_NAME_ANNOTATION
from cluster.model.manifests import ManifestError, expand, load_manifests
from cluster.model.pod_template import OwnerMeta
from cluster.model.resources import GPU
from cluster.model.volcano import PodGroup
from tests.scenarios.test_scenarios import (
    assert_waits,
    dry_run,
    phases,
    placements,
    podgroup,
)

PYTORCH = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist, namespace: ml, annotations: {team: vision}}
spec:
  runPolicy:
    schedulingPolicy: {queue: research, priorityClass: high}
  pytorchReplicaSpecs:
    master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch
            resources: {requests: {cpu: "2", memory: 8Gi}}
    Worker:
      replicas: 2
      template:
        metadata: {labels: {app: mnist}}
        spec:
          containers:
          - name: pytorch
            image: pytorch
            resources: {limits: {cpu: "4", nvidia.com/gpu: "1"}}
"""


def expanded(text: str) -> tuple[list[PodGroup], list[Pod]]:
    objects, skipped = load_manifests(text)
    assert skipped == []
    out = expand(objects)
    return [o for o in out if isinstance(o, PodGroup)], [o for o in out if isinstance(o, Pod)]


def test_pytorch_job_is_a_gang_named_after_the_job() -> None:
    [group], pods = expanded(PYTORCH)
    assert [p.name for p in pods] == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert (group.name, group.namespace, group.spec.queue, group.spec.priority_class_name) == (
        "mnist",
        "ml",
        "research",
        "high",
    )
    assert group.spec.min_member == 3  # every replica, as schedulingPolicy names no minAvailable
    # The operator sums containers' requests, or a container's limits when it states no requests.
    assert group.spec.min_resources == {"cpu": "10", "memory": "8Gi", GPU: "2"}
    assert group.metadata.annotations == {"team": "vision"} and group.spec.min_task_member == {}
    for pod in pods:
        assert pod.scheduler_name == "volcano" and pod.group_name == "mnist" and pod.namespace == "ml"
    master, worker = pods[0], pods[2]
    assert master.labels == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert worker.labels["app"] == "mnist" and worker.labels["training.kubeflow.org/replica-index"] == "1"
    assert "training.kubeflow.org/job-role" not in worker.labels
    assert worker.metadata.annotations == {GROUP_NAME_ANNOTATION: "mnist", "volcano.sh/task-spec": "worker"}
    assert worker.request() == {"cpu": 4000, GPU: 1, "pods": 1}


def test_scheduling_policy_min_available_and_priority_choose_the_pods_min_resources_count() -> None:
    text = PYTORCH.replace("{queue: research, priorityClass: high}", "{minAvailable: 2}").replace(
        "        metadata: {labels: {app: mnist}}\n        spec:\n",
        "        metadata: {labels: {app: mnist}}\n        spec:\n          priorityClassName: high\n",
    )
    [group], _ = expanded(text)
    assert group.spec.min_member == 2 and group.spec.queue == "default" and group.spec.priority_class_name == ""
    assert group.spec.min_resources == {
        "cpu": "8",
        GPU: "2",
    }  # the two workers: their class is higher than the master's


def test_stated_min_resources_are_taken_as_they_are() -> None:
    text = PYTORCH.replace("{queue: research, priorityClass: high}", "{minResources: {cpu: 500m, nvidia.com/gpu: 1}}")
    [group], _ = expanded(text)
    assert group.spec.min_resources == {"cpu": "500m", GPU: "1"}


def test_without_volcano_the_operator_makes_plain_pods() -> None:
    text = PYTORCH.replace("  runPolicy:\n    schedulingPolicy: {queue: research, priorityClass: high}\n", "")
    groups, pods = expanded(text)
    assert groups == [] and len(pods) == 3
    assert all(p.scheduler_name == "default-scheduler" and p.group_name == "" for p in pods)
    # The operator's setting, when known, decides.
    job = load_manifests(text)[0][1]
    assert isinstance(job, PyTorchJob)
    group, pods = expand_training_job(job, gang_scheduler="volcano")
    assert group is not None and group.spec.min_member == 3 and all(p.scheduler_name == "volcano" for p in pods)


def test_a_template_naming_volcano_turns_gang_scheduling_on() -> None:
    text = PYTORCH.replace("  runPolicy:\n    schedulingPolicy: {queue: research, priorityClass: high}\n", "").replace(
        "      restartPolicy: OnFailure\n      template:\n        spec:\n",
        "      restartPolicy: OnFailure\n      template:\n        spec:\n          schedulerName: volcano\n",
    )
    [group], pods = expanded(text)
    assert group.spec.queue == "default" and all(p.scheduler_name == "volcano" for p in pods)


def test_a_suspended_job_has_nothing_yet() -> None:
    text = PYTORCH.replace("    schedulingPolicy:", "    suspend: true\n    schedulingPolicy:")
    assert expanded(text) == ([], [])


TFJOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist}
spec:
  runPolicy: {schedulingPolicy: {minAvailable: 3}}
  tfReplicaSpecs:
    PS:
      replicas: 1
      template: {spec: {containers: [{name: tensorflow, image: tf, resources: {requests: {cpu: "1"}}}]}}
    Worker:
      template: {spec: {containers: [{name: tensorflow, image: tf, resources: {requests: {cpu: "2"}}}]}}
"""


def test_tfjob_replicas_default_to_one_and_worker_zero_is_the_master_without_a_chief() -> None:
    [group], pods = expanded(TFJOB)
    assert [p.name for p in pods] == ["dist-ps-0", "dist-worker-0"]
    assert group.spec.min_member == 3 and group.spec.min_resources == {"cpu": "3"}
    assert pods[1].labels["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in pods[0].labels
    assert pods[0].labels["training.kubeflow.org/operator-name"] == "tfjob-controller"


def test_tfjob_with_a_chief_makes_the_chief_the_master() -> None:
    text = TFJOB.replace("    PS:\n", "    Chief:\n")
    _, pods = expanded(text)
    assert [p.name for p in pods] == ["dist-chief-0", "dist-worker-0"]
    assert pods[0].labels["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in pods[1].labels


MPI_V1 = """\
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata: {name: hvd}
spec:
  slotsPerWorker: 1
  runPolicy: {schedulingPolicy: {queue: hpc}}
  mpiReplicaSpecs:
    Launcher:
      template: {spec: {containers: [{name: launcher, image: h, resources: {requests: {cpu: 50m, memory: 64Mi}}}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: worker, image: h, resources: {limits: {nvidia.com/gpu: "1"}}}]}}
"""


def test_mpijob_v1_has_a_launcher_with_the_kubectl_delivery_init_container() -> None:
    [group], pods = expanded(MPI_V1)
    assert [p.name for p in pods] == ["hvd-launcher", "hvd-worker-0", "hvd-worker-1"]
    launcher = pods[0]
    assert launcher.labels == {
        "training.kubeflow.org/operator-name": "mpijob-controller",
        "training.kubeflow.org/job-name": "hvd",
        "training.kubeflow.org/replica-type": "launcher",
        "training.kubeflow.org/job-role": "master",
    }
    assert pods[1].labels["training.kubeflow.org/replica-index"] == "0"
    # The init container (100m, 512Mi) outweighs the launcher's own container.
    assert launcher.request() == {"cpu": 100, "memory": 512 << 20, "ephemeral-storage": 5 << 30, "pods": 1}
    assert group.spec.min_member == 3 and group.spec.queue == "hpc"
    assert group.spec.min_resources == {
        "cpu": "50m",
        "memory": "64Mi",
        GPU: "2",
    }  # containers only, as the operator sums them


MPI_V2 = """\
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi, annotations: {scheduling.volcano.sh/queue-name: hpc}}
spec:
  slotsPerWorker: 1
  runPolicy: {schedulingPolicy: {minAvailable: 2}}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template: {spec: {containers: [{name: launcher, image: m, resources: {requests: {cpu: "1"}}}]}}
    Worker:
      replicas: 3
      template:
        spec:
          schedulerName: default-scheduler
          containers: [{name: worker, image: m, resources: {requests: {cpu: "2"}, limits: {nvidia.com/gpu: "1"}}}]
"""


def test_mpijob_v2beta1_launches_through_a_batch_job_and_overrides_the_scheduler() -> None:
    [group], pods = expanded(MPI_V2)
    names = [p.name for p in pods]
    assert names[:3] == ["pi-worker-0", "pi-worker-1", "pi-worker-2"]
    assert names[3].startswith("pi-launcher-") and len(names[3]) == len("pi-launcher-") + 5
    assert all(p.scheduler_name == "volcano" and p.group_name == "pi" for p in pods)
    worker, launcher = pods[0], pods[3]
    assert worker.labels == {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "pi",
        "training.kubeflow.org/job-role": "worker",
        "training.kubeflow.org/replica-index": "0",
    }
    assert launcher.labels["training.kubeflow.org/job-role"] == "launcher"
    assert launcher.labels["batch.kubernetes.io/job-name"] == "pi-launcher"
    assert group.spec.queue == "hpc" and group.spec.min_member == 2 and group.metadata.annotations == {}
    # Launcher and workers have equal priority: the workers are cut to minMember − 1.
    assert group.spec.min_resources == {"cpu": "3", GPU: "1"}
    assert expanded(MPI_V2)[1] == pods  # the launcher's name is the same every time


def test_mpijob_v2beta1_min_member_defaults_to_workers_and_launcher() -> None:
    [group], _ = expanded(
        MPI_V2.replace("  runPolicy: {schedulingPolicy: {minAvailable: 2}}\n", "  runPolicy: {schedulingPolicy: {}}\n")
    )
    assert group.spec.min_member == 4 and group.spec.min_resources == {"cpu": "7", GPU: "3"}


@pytest.mark.parametrize(
    ("text", "replace", "by", "message"),
    [
        (PYTORCH, "replicas: 1\n      restartPolicy", "replicas: 2\n      restartPolicy",
         "spec.pytorchReplicaSpecs.Master.replicas: 2 Master replicas (expected 1)"),
        (PYTORCH, "    Worker:\n", "    Chief:\n", "spec.pytorchReplicaSpecs.Chief: 'Chief' is not a replica type of a PyTorchJob"),
        (PYTORCH, "name: mnist,", "name: 1mnist,", "metadata.name: '1mnist' is not a DNS-1035 label"),
        (TFJOB, "{name: tensorflow, image: tf, resources: {requests: {cpu: \"2\"}}}", "{name: main, image: tf}",
         "spec.tfReplicaSpecs.Worker.template.spec.containers: no container named 'tensorflow'"),
        (TFJOB, "    PS:\n", "    Master:\n      replicas: 1\n      template: {spec: {containers: [{name: tensorflow}]}}\n    Chief:\n",
         "spec.tfReplicaSpecs: both a Chief and a Master"),
        (MPI_V1, "    Launcher:\n", "    Driver:\n", "spec.mpiReplicaSpecs.Driver: 'Driver' is not a replica type of a MPIJob"),
        (MPI_V2, "    Launcher:\n      replicas: 1\n", "    Launcher:\n      replicas: 2\n", "spec.mpiReplicaSpecs.Launcher.replicas: 2 (expected 1)"),
        (MPI_V2, "replicas: 3", "replicas: 0", "spec.mpiReplicaSpecs.Worker.replicas: 0 (expected 1 or more)"),
        (MPI_V2, "slotsPerWorker: 1", "mpiImplementation: LAM", "spec.mpiImplementation: 'LAM' is not supported"),
        (MPI_V2, "apiVersion: kubeflow.org/v2beta1", "apiVersion: kubeflow.org/v1alpha2",
         "apiVersion: 'kubeflow.org/v1alpha2' is not supported (expected kubeflow.org/v1 or kubeflow.org/v2beta1)"),
    ],
)  # fmt: skip
def test_the_operators_refuse(text: str, replace: str, by: str, message: str) -> None:
    assert replace in text
    with pytest.raises(ManifestError) as err:
        load_manifests(text.replace(replace, by, 1))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_generate_name_names_the_job_and_its_pods() -> None:
    job = load_manifests(MPI_V2.replace("name: pi,", "generateName: pi-,"))[0][0]
    assert isinstance(job, MPIJob) and job.metadata.name == ""
    group, pods = expand_training_job(job)
    assert group is not None and group.name.startswith("pi-") and len(group.name) == len("pi-") + 5
    assert pods[0].name == f"{group.name}-worker-0" and pods[0].group_name == group.name
    with pytest.raises(KubeflowError, match=r"^metadata\.name: missing"):
        expand_training_job(TFJob(metadata=OwnerMeta()))


def kinds(objects: list[Any]) -> list[str]:
    return [type(o).__name__ for o in objects]


def test_expand_keeps_the_order_podgroup_then_pods() -> None:
    objects, _ = load_manifests(TFJOB)
    assert kinds(expand(objects)) == ["PodGroup", "Pod", "Pod"]


def test_pytorch_job_runs_as_a_gang_in_caldera_dry_run(tmp_path: Path) -> None:
    """Through the CLI, as a user runs it: one GPU node too few and the whole job waits; enough, and it runs."""
    nodes = "".join(
        f"---\napiVersion: v1\nkind: Node\nmetadata: {{name: gpu-{i}}}\n"
        f"status: {{allocatable: {{cpu: '8', memory: 32Gi, nvidia.com/gpu: '1', pods: '110'}}}}\n"
        for i in range(2)
    )
    queue = "---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: research}\n"
    (tmp_path / "nodes.yaml").write_text(nodes + queue)
    (tmp_path / "job.yaml").write_text(PYTORCH.replace("replicas: 2", "replicas: 3"))  # three one-GPU workers
    result = dry_run(str(tmp_path / "nodes.yaml"), str(tmp_path / "job.yaml"))
    assert_waits(result, "mnist-", "nvidia.com/gpu")
    (tmp_path / "job.yaml").write_text(PYTORCH)
    result = dry_run(str(tmp_path / "nodes.yaml"), str(tmp_path / "job.yaml"))
    assert phases(result, "mnist-") == {"Bound": 3}, placements(result)
    assert podgroup(result, "mnist")["queue"] == "research" and podgroup(result, "mnist")["phase"] == "Running"
