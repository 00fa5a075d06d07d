"""The workloads of Volcano's ``example/`` directory (release-1.14) run in ``caldera dry-run`` as Volcano runs them.

Each file under ``examples/`` stands for one or more files of Volcano's ``example/`` (its
first line names them; ``example/invalid_jobs/`` is ``test_invalid.py``'s): our own, smaller
YAML keeping the kinds, fields and annotations a user of that example relies on, with a
cluster sized so that what Volcano does shows in where the pods go. Each runs through
``caldera dry-run -o json`` as a subprocess (the helpers of tests/scenarios).

Left out of the corpus, as nothing of them is a workload caldera sees: the Go and Python
sources, Dockerfiles, READMEs, slides; ``kubecon-2019-china/spark-sample`` (a Spark
operator's SparkApplication and a PodGroup of the long-gone ``scheduling.incubator.k8s.io``
group, both skipped as kinds caldera does not model).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scenarios.test_scenarios import (
    REPO,
    TIMEOUT,
    assert_waits,
    bound,
    dry_run,
    phases,
    placements,
    pod,
    podgroup,
    pods,
)

EXAMPLES = Path(__file__).parent / "examples"

# Volcano's example files (release-1.14, without invalid_jobs/) that hold workloads, and the scenario standing for each.
COVERED = {
    "example/job.yaml": "job.yaml",
    "example/job-plugin.yaml": "job_plugin.yaml",
    "example/deployment/deployment.yaml": "deployment_queue.yaml",
    "example/deployment/queue.yaml": "deployment_queue.yaml",
    "example/hierarchical-jobs/jobs.yaml": "hierarchical_jobs.yaml",
    "example/hierarchical-jobs/queues.yaml": "hierarchical_jobs.yaml",
    "example/cronjob/cronjob.yaml": "cronjob.yaml",
    "example/MindSpore-example/mindspore_cpu/mindspore-cpu.yaml": "mindspore_cpu.yaml",
    "example/MindSpore-example/mindspore_gpu/mindspore-gpu.yaml": "mindspore_gpu.yaml",
    "example/integrations/mpi/mpi-example.yaml": "mindspore_gpu.yaml",
    "example/integrations/argo/10-job-step.yaml": "argo_generate_name.yaml",
    "example/integrations/argo/20-job-DAG.yaml": "argo_generate_name.yaml",
    "example/integrations/mxnet/train/train-mnist-cpu.yaml": "mxnet.yaml",
    "example/integrations/paddlepaddle/ctr-paddlepaddle-on-volcano.yaml": "paddlepaddle.yaml",
    "example/integrations/ray/ray-example.yaml": "ray.yaml",
    "example/integrations/tensorflow/benchmark/tf-example.yaml": "tensorflow.yaml",
    "example/integrations/tensorflow/dist-mnist/tf-dist-mnist-example.yaml": "tensorflow.yaml",
    "example/jobflow/JobFlow.yaml": "jobflow.yaml",
    "example/jobflow/JobTemplate.yaml": "jobflow.yaml",
    "example/kubecon-2019-china/drf/nginx-1.yaml": "drf_replicasets.yaml",
    "example/kubecon-2019-china/drf/nginx-2.yaml": "drf_replicasets.yaml",
    "example/kubecon-2019-china/drf/nginx.yaml": "drf_replicasets.yaml",
    "example/kubecon-2019-china/gang/mpi-example.yaml": "gang.yaml",
    "example/kubecon-2019-china/gang/nginx.yaml": "drf_replicasets.yaml",
    "example/kubecon-2019-china/horovod-sample/lm-horovod-tf-mnist-v0.5.yaml": "gang.yaml",
    "example/kubecon-2019-china/mpi-sample/mpi-example.yaml": "mindspore_gpu.yaml",
    "example/kubecon-2019-china/node-selector/nginx.yaml": "node_selector.yaml",
    "example/kubecon-2019-china/task-priority/elastic-job.yaml": "task_priority.yaml",
    "example/kubecon-2019-china/task-priority/high-priority.yaml": "task_priority.yaml",
    "example/kubecon-2019-china/task-priority/normal-priority.yaml": "task_priority.yaml",
    "example/kubecon-2019-china/task-priority/nginx.yaml": "drf_replicasets.yaml",
    "example/kubecon-2019-china/tf-sample/tf-example.yaml": "tensorflow.yaml",
    "example/task-start-dependency/job.yaml": "task_start_dependency.yaml",
    "example/task-start-dependency/mpi.yaml": "mpi_depends_on.yaml",
}


def run(*names: str) -> dict[str, Any]:
    return dry_run(*(str(EXAMPLES / name) for name in names))


def stderr_of(*names: str) -> str:
    args = [sys.executable, "-m", "caldera", "dry-run", "--sharding-mode", "none", "-o", "json"]
    for name in names:
        args += ["-f", str(EXAMPLES / name)]
    done = subprocess.run(args, check=False, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.parametrize("scenario", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_each_scenario_names_the_volcano_files_it_stands_for(scenario: str) -> None:
    lines = (EXAMPLES / scenario).read_text().splitlines()
    assert lines[0].startswith("# "), f"{scenario}: the first line should say what it stands for"
    comment = " ".join(line for line in lines if line.startswith("#"))
    for example in (e for e, covering in COVERED.items() if covering == scenario):
        assert example.rpartition("/")[2] in comment, f"{scenario} does not name {example}"


def test_every_volcano_example_with_a_workload_has_a_scenario() -> None:
    assert all((EXAMPLES / scenario).is_file() for scenario in COVERED.values())


# -- Volcano Jobs ----------------------------------------------------------------------------


def test_job_with_min_available_below_its_replicas_starts_with_what_fits() -> None:
    result = run("job.yaml")
    assert [p["name"] for p in pods(result)] == [f"test-job-default-nginx-{i}" for i in range(6)]
    assert phases(result, "test-job-") == {"Bound": 4, "Pending": 2}, placements(result)
    assert podgroup(result, "test-job")["phase"] == "Running"
    assert_waits(result, "test-job-default-nginx-4", "deserved share")


def test_job_plugins_with_arguments_are_accepted() -> None:
    result = run("job_plugin.yaml")
    assert phases(result, "test-job-plugin-") == {"Bound": 3}, placements(result)


def test_elastic_job_of_eight_runs_four_on_four_cpus() -> None:
    result = run("mindspore_cpu.yaml")
    assert phases(result, "mindspore-cpu-pod-") == {"Bound": 4, "Pending": 4}, placements(result)


def test_mpi_gang_with_gpu_limits_waits_whole_then_runs_whole() -> None:
    result = run("mindspore_gpu.yaml")
    assert_waits(result, "mindspore-gpu-", "nvidia.com/gpu")
    assert podgroup(result, "mindspore-gpu")["phase"] != "Running"
    result = run("mindspore_gpu.yaml", "second_gpu_node.yaml")
    assert phases(result, "mindspore-gpu-") == {"Bound": 3}, placements(result)
    assert sorted(p["node"] for p in bound(result, "mindspore-gpu-mpiworker-")) == ["gpu-0", "gpu-1"]


def test_gang_that_does_not_fit_starts_no_pod() -> None:
    result = run("gang.yaml")
    assert_waits(result, "lm-mpi-job-", "cpu")
    result = run("gang.yaml", "gang_room.yaml")
    assert phases(result, "lm-mpi-job-") == {"Bound": 4}, placements(result)


def test_argo_jobs_with_generate_name_get_stable_distinct_names() -> None:
    result = run("argo_generate_name.yaml")
    groups = sorted(g["name"] for g in result["podgroups"])
    assert len(groups) == 2 and all(
        g.startswith("step-job-hello1-") and len(g) == len("step-job-hello1-") + 5 for g in groups
    )
    for group in groups:
        assert all(p["phase"] == "Bound" for p in pods(result, f"{group}-default-hello-")), placements(result)
    assert sorted(len(pods(result, f"{g}-default-hello-")) for g in groups) == [1, 2]
    assert len(pods(result)) == 3
    assert sorted(g["name"] for g in run("argo_generate_name.yaml")["podgroups"]) == groups  # a repeat run: the same
    assert "Workflow" in stderr_of("argo_generate_name.yaml")


def test_mxnet_gang_spreads_over_two_nodes_of_three_pod_slots() -> None:
    result = run("mxnet.yaml")
    assert phases(result, "mxnet-job-") == {"Bound": 5}, placements(result)
    assert {p["node"] for p in pods(result)} == {"node-0", "node-1"}


def test_paddle_requests_not_limits_decide_and_ephemeral_storage_counts() -> None:
    result = run("paddlepaddle.yaml")
    assert phases(result, "ctr-volcano-") == {"Bound": 4}, placements(result)
    assert sorted(p["node"] for p in bound(result, "ctr-volcano-trainer-")) == ["node-0", "node-1"]  # 10Gi each of 12Gi


@pytest.mark.parametrize(
    ("scenario", "prefix", "count"),
    [("ray.yaml", "ray-cluster-job-", 3), ("tensorflow.yaml", "tensorflow-dist-mnist-", 3)],
)
def test_framework_jobs_run_whole(scenario: str, prefix: str, count: int) -> None:
    result = run(scenario)
    assert phases(result, prefix) == {"Bound": count}, placements(result)
    assert podgroup(result, prefix.rstrip("-"))["phase"] == "Running"


def test_hierarchy_annotated_queues_each_run_their_job() -> None:
    result = run("hierarchical_jobs.yaml")
    assert (podgroup(result, "eng-prod-job")["queue"], podgroup(result, "sci-dev-job")["queue"]) == (
        "root-eng-prod",
        "root-sci-dev",
    )
    assert phases(result, "eng-prod-job-") == {"Bound": 6} and phases(result, "sci-dev-job-") == {"Bound": 6}, (
        placements(result)
    )


def test_task_priority_starts_the_master_first() -> None:
    result = run("task_priority.yaml")
    assert pod(result, "elastic-job-master-0")["phase"] == "Bound", placements(result)
    assert phases(result, "elastic-job-worker-") == {"Bound": 3, "Pending": 6}, placements(result)


def test_depends_on_changes_no_places() -> None:
    result = run("task_start_dependency.yaml")
    assert phases(result, "job-job-") == {"Bound": 11}, placements(result)
    assert {p["node"] for p in pods(result)} == {"linux-0"}


def test_job_below_its_tasks_min_available_is_ready_at_its_own() -> None:
    result = run("mpi_depends_on.yaml")
    assert phases(result, "lm-mpi-job-") == {"Bound": 5, "Pending": 6}, placements(result)
    assert_waits(result, "lm-mpi-job-mpiworker-9", "pods")


# -- pods of Kubernetes' workload controllers ---------------------------------------------------------


def test_deployment_pods_join_the_queue_their_template_names() -> None:
    result = run("deployment_queue.yaml")
    [group] = result["podgroups"]
    assert group["name"].startswith("podgroup-") and group["queue"] == "test"
    assert all(p["name"].startswith("deploy-with-volcano-") for p in pods(result))
    assert phases(result, "deploy-with-volcano-") == {"Bound": 6, "Pending": 2}, placements(result)  # 6 × 300m ≤ cpu 2
    for waiting in (p["name"] for p in pods(result) if p["phase"] == "Pending"):
        assert_waits(result, waiting, "queue test", "capability")


def test_drf_shares_two_volcano_replicasets_evenly() -> None:
    result = run("drf_replicasets.yaml")
    assert len(bound(result, "nginx-1-")) == 4 and len(bound(result, "nginx-2-")) == 4, placements(result)
    assert len(result["podgroups"]) == 2
    others = [p for p in pods(result, "nginx-") if not p["name"].startswith(("nginx-1-", "nginx-2-"))]
    assert len(others) == 2 and all(p["scheduler"] == "default-scheduler" and p["phase"] == "Pending" for p in others)


def test_node_selector_keeps_pods_on_the_named_node() -> None:
    result = run("node_selector.yaml")
    assert {p["node"] for p in bound(result, "nginx-")} == {"192.168.23.24"}
    assert phases(result, "nginx-") == {"Bound": 4, "Pending": 4}, placements(result)
    waiting = next(p["name"] for p in pods(result) if p["phase"] == "Pending")
    assert_waits(result, waiting, "node affinity/selector")


# -- kinds caldera does not run ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "kinds"), [("cronjob.yaml", ["CronJob"]), ("jobflow.yaml", ["JobFlow", "JobTemplate"])]
)
def test_controllers_caldera_does_not_run_make_no_pods_and_say_so(scenario: str, kinds: list[str]) -> None:
    assert run(scenario)["pods"] == []
    err = stderr_of(scenario)
    assert "skipped" in err and all(kind in err for kind in kinds)
