"""Volcano's mutating admission webhook for Jobs: the defaults it sets on CREATE.

Read from Volcano release-1.14 ``pkg/webhooks/admission/jobs/mutate/mutate_job.go``; the
validating webhook that runs after it is :mod:`cluster.model.volcano_admission`.
"""

from __future__ import annotations

import msgspec

from cluster.model.volcano_job_api import (
    DEFAULT_MAX_RETRY,
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER,
    DEFAULT_TASK_PREFIX,
    Job,
    TaskSpec,
)

_SVC_IMPLIED_BY = ("tensorflow", "mpi", "pytorch", "ray")


def mutate_job(job: Job) -> Job:
    """``job`` as Volcano's mutating webhook leaves it (CREATE).

    queue "" → ``default``; schedulerName "" → ``volcano``; maxRetry 0 → 3; an unnamed
    task i → ``default<i>``; a task's minAvailable unset → minPartitions × partitionSize
    when its partitionPolicy has minPartitions, else its replicas; a task's maxRetry 0 → 3;
    then the Job's minAvailable 0 → the sum of the tasks' minAvailable (after their
    defaults, so it is not the sum of replicas when a task states fewer); plugins
    tensorflow, mpi, pytorch or ray bring ``svc``, and mpi brings ``ssh``.
    """
    spec = job.spec
    tasks = [_mutate_task(task, i) for i, task in enumerate(spec.tasks)]
    min_available = spec.min_available or sum(task.min_available or 0 for task in tasks)
    plugins = dict(spec.plugins)
    if any(name in plugins for name in _SVC_IMPLIED_BY):
        plugins.setdefault("svc", [])
    if "mpi" in plugins:
        plugins.setdefault("ssh", [])
    mutated = msgspec.structs.replace(
        spec,
        queue=spec.queue or DEFAULT_QUEUE,
        scheduler_name=spec.scheduler_name or DEFAULT_SCHEDULER,
        max_retry=spec.max_retry or DEFAULT_MAX_RETRY,
        tasks=tasks,
        min_available=min_available,
        plugins=plugins,
    )
    return msgspec.structs.replace(job, spec=mutated)


def _mutate_task(task: TaskSpec, index: int) -> TaskSpec:
    min_available = task.min_available
    if min_available is None:
        partition = task.partition_policy
        if partition is not None and partition.min_partitions > 0:
            min_available = partition.min_partitions * partition.partition_size
        else:
            min_available = task.replicas
    return msgspec.structs.replace(
        task,
        name=task.name or f"{DEFAULT_TASK_PREFIX}{index}",
        min_available=min_available,
        max_retry=task.max_retry or DEFAULT_MAX_RETRY,
    )
