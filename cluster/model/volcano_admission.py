"""Volcano's validating admission webhook for Jobs: the Jobs it refuses.

The defaults its mutating webhook sets first are :mod:`cluster.model.volcano_mutation`.
Read from Volcano release-1.14: ``pkg/webhooks/admission/jobs/validate/admit_job.go`` and
``validate/util.go`` (:func:`validate_job`, on CREATE), plus the checks its CRD schema
makes (task names, minimums), which the API server runs between the two. Volcano
gathers every problem into one message; here the first one is raised, as a
:class:`JobError` of one line naming the field path, the bad value and what is accepted.

The queue checks need the cluster's queues, which a Job does not carry:
:func:`admit_queue` runs them against the queues the caller has. caldera runs no queue
controller, so nothing sets a Queue's ``status.state``; a Queue with an empty state counts
as Open here (Volcano's webhook would refuse it, #3173). ``default`` and ``root`` exist
without being declared, as Volcano's installation creates them.

Not checked: Kubernetes' own validation of the pod template beyond "at least one
container" (``ValidatePodTemplate``), and ``hostNetwork``'s dnsPolicy default (it changes no
placement).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fractions import Fraction

from cluster.model.quantity import QuantityError, parse_quantity
from cluster.model.topology import NetworkTopologySpec
from cluster.model.volcano import Queue
from cluster.model.volcano_job_api import (
    DEFAULT_QUEUE,
    Job,
    JobError,
    TaskSpec,
)
from cluster.model.volcano_policies import validate_policies, validate_policy_schema

ROOT_QUEUE = "root"
PLUGINS = ("ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "hcclrank", "ray")  # plugins/factory.go
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
NETWORK_TOPOLOGY_MODES = ("hard", "soft")

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
# apimachinery IsQualifiedName without a prefix: what Volcano checks job and pod names with.
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
_DNS1123_ACCEPTED = (
    "lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
)
_QUALIFIED_ACCEPTED = (
    "letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters"
)


# -- validation -------------------------------------------------------------------------


def validate_job(job: Job) -> None:
    """Raise :class:`JobError` if Volcano refuses to create ``job`` (already mutated).

    The CRD schema's checks come first (names, minimums, enums), then the webhook's in its
    order: no tasks, the mpi plugin's tasks, networkTopology, per task (minAvailable ≤
    replicas, unique names, policies, pod name length, template, partitionPolicy), the job
    name, minAvailable ≤ Σ replicas, the job's policies, plugin names, volumes, dependsOn.
    """
    _validate_schema(job)
    spec = job.spec
    if not spec.tasks:
        raise JobError("spec.tasks", [], "no tasks (a Job needs at least one task, with a name and a pod template)")
    _validate_mpi_plugin(job)
    _validate_network_topology(spec.network_topology, "spec.networkTopology")
    seen: dict[str, int] = {}
    for i, task in enumerate(spec.tasks):
        field = f"spec.tasks[{i}]"
        if task.min_available is not None and task.min_available > task.replicas:
            problem = f"{task.min_available} is out of range (expected 0 to the task's replicas, {task.replicas})"
            raise JobError(f"{field}.minAvailable", task.min_available, problem)
        if task.name in seen:
            problem = f"{task.name!r} is also the name of spec.tasks[{seen[task.name]}] (task names must be unique)"
            raise JobError(f"{field}.name", task.name, problem)
        seen[task.name] = i
        validate_policies(task.policies, f"{field}.policies")
        # Volcano checks the pod name with the task's position as the index (a quirk kept here).
        _validate_qualified(
            f"{job.name}-{task.name}-{i}",
            f"{field}.name",
            task.name,
            f"the pod name {job.name}-{task.name}-{i} would be invalid",
        )
        _validate_template(task, field)
        _validate_partition_policy(task, field)
    _validate_qualified(job.name, "metadata.name", job.name, "not a valid job name")
    total = sum(task.replicas for task in spec.tasks)
    if spec.min_available > total:
        problem = f"{spec.min_available} is out of range (expected 0 to the replicas of all tasks, {total})"
        raise JobError("spec.minAvailable", spec.min_available, problem)
    validate_policies(spec.policies, "spec.policies")
    for name in spec.plugins:
        if name not in PLUGINS:
            raise JobError(
                f"spec.plugins.{name}", name, f"unknown job plugin {name!r} (expected one of {', '.join(PLUGINS)})"
            )
    _validate_volumes(job)
    _validate_dependencies(spec.tasks)


def _validate_schema(job: Job) -> None:  # noqa: C901 (a flat list of checks, one branch each)
    """What the Job CRD's OpenAPI schema refuses (minimums, patterns, enums)."""
    spec = job.spec
    for field, value in (
        ("spec.maxRetry", spec.max_retry),
        ("spec.ttlSecondsAfterFinished", spec.ttl_seconds_after_finished),
    ):
        if value is not None and value < 0:
            raise JobError(field, value, f"{value} is negative (expected 0 or more)")
    if spec.min_success is not None and spec.min_success < 1:
        raise JobError(
            "spec.minSuccess", spec.min_success, f"{spec.min_success} is below 1 (expected 1 or more, or no minSuccess)"
        )
    if len(spec.scheduler_name) > 63:
        raise JobError("spec.schedulerName", spec.scheduler_name, "longer than 63 characters")
    for field, name in (("spec.queue", spec.queue), ("spec.priorityClassName", spec.priority_class_name)):
        if name and (len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name)):
            problem = f"{name!r} is not a valid name (expected lower-case letters, digits, '-' and '.', at most 253 characters)"
            raise JobError(field, name, problem)
    _validate_topology_schema(spec.network_topology, "spec.networkTopology")
    for i, task in enumerate(spec.tasks):
        field = f"spec.tasks[{i}]"
        if not _DNS1123_LABEL.fullmatch(task.name):
            raise JobError(
                f"{field}.name", task.name, f"{task.name!r} is not a valid task name (expected {_DNS1123_ACCEPTED})"
            )
        for name, value in (
            ("replicas", task.replicas),
            ("minAvailable", task.min_available),
            ("maxRetry", task.max_retry),
        ):
            if value is not None and value < 0:
                if name == "minAvailable":
                    problem = f"{value} is out of range (expected 0 to the task's replicas, {task.replicas})"
                else:
                    problem = f"{value} is negative (expected 0 or more)"
                raise JobError(f"{field}.{name}", value, problem)
        if task.topology_policy and task.topology_policy not in TOPOLOGY_POLICIES:
            problem = (
                f"{task.topology_policy!r} is not a topology policy (expected one of {', '.join(TOPOLOGY_POLICIES)})"
            )
            raise JobError(f"{field}.topologyPolicy", task.topology_policy, problem)
        partition = task.partition_policy
        if partition is not None:
            for name, value, least in (
                ("totalPartitions", partition.total_partitions, 1),
                ("partitionSize", partition.partition_size, 1),
                ("minPartitions", partition.min_partitions, 0),
            ):
                if value < least:
                    raise JobError(
                        f"{field}.partitionPolicy.{name}", value, f"{value} is below {least} (expected {least} or more)"
                    )
            _validate_topology_schema(partition.network_topology, f"{field}.partitionPolicy.networkTopology")
        for j, policy in enumerate(task.policies):
            validate_policy_schema(policy, f"{field}.policies[{j}]")
    for j, policy in enumerate(spec.policies):
        validate_policy_schema(policy, f"spec.policies[{j}]")
    # After the tasks': a task's negative minAvailable is what makes the defaulted sum negative.
    if spec.min_available < 0:
        total = sum(task.replicas for task in spec.tasks)
        problem = f"{spec.min_available} is out of range (expected 0 to the replicas of all tasks, {total})"
        raise JobError("spec.minAvailable", spec.min_available, problem)


def _validate_topology_schema(topology: NetworkTopologySpec | None, field: str) -> None:
    if topology is None:
        return
    if topology.mode not in NETWORK_TOPOLOGY_MODES:
        problem = f"{topology.mode!r} is not a mode (expected one of {', '.join(NETWORK_TOPOLOGY_MODES)})"
        raise JobError(f"{field}.mode", topology.mode, problem)
    if topology.highest_tier_allowed is not None and topology.highest_tier_allowed < 0:
        raise JobError(f"{field}.highestTierAllowed", topology.highest_tier_allowed, "negative (expected 0 or more)")


def _validate_network_topology(topology: NetworkTopologySpec | None, field: str) -> None:
    if topology is not None and topology.highest_tier_allowed is not None and topology.highest_tier_name:
        problem = (
            f"both highestTierAllowed ({topology.highest_tier_allowed}) and highestTierName "
            f"({topology.highest_tier_name!r}) are set (expected at most one of them)"
        )
        raise JobError(field, topology.highest_tier_name, problem)


def _validate_mpi_plugin(job: Job) -> None:
    """The mpi plugin's master and worker tasks (``--master=``, ``--worker=``) must exist."""
    args = job.spec.plugins.get("mpi")
    if args is None:
        return
    names = {task.name for task in job.spec.tasks}
    for role, default in (("master", "master"), ("worker", "worker")):
        task = _flag(args, role, default)
        if task not in names:
            problem = (
                f"the mpi plugin's {role} task {task!r} is not a task of the job "
                f"(name it with --{role}=<task>; tasks: {', '.join(sorted(names))})"
            )
            raise JobError("spec.plugins.mpi", args, problem)


def _flag(args: Sequence[str], name: str, default: str) -> str:
    """The value of Go flag ``name`` in ``args`` (``--name=v``, ``-name=v``, ``--name v``)."""
    for i, arg in enumerate(args):
        key, sep, value = arg.lstrip("-").partition("=")
        if key == name and arg.startswith("-"):
            if sep:
                return value
            if i + 1 < len(args):
                return args[i + 1]
    return default


def _validate_qualified(name: str, field: str, value: str, what: str) -> None:
    if len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        raise JobError(field, value, f"{what}: {name!r} (expected {_QUALIFIED_ACCEPTED})")


def _validate_template(task: TaskSpec, field: str) -> None:
    spec = task.template.spec
    if not spec.containers:
        raise JobError(f"{field}.template.spec.containers", [], "no containers (a pod template needs at least one)")
    if task.topology_policy in ("", "none"):
        return
    # A NUMA policy needs whole CPUs: each container's cpu request (its limit when it states
    # no requests) a whole number, at least 1 (validateTaskTopoPolicy, guaranteedCPUs).
    for kind, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for j, container in enumerate(containers):
            resources = container.resources
            cpu = (resources.requests or resources.limits).get("cpu", 0)
            where = f"{field}.template.spec.{kind}[{j}].resources.requests.cpu"
            try:
                amount = parse_quantity(cpu, field=where)
            except QuantityError:
                amount = Fraction(0)  # a bad quantity is refused with its own message elsewhere
            if amount < 1 or amount.denominator != 1:
                raise JobError(
                    where,
                    cpu,
                    f"topologyPolicy {task.topology_policy} needs a whole number of CPUs "
                    f"in every container, got {cpu!r}",
                )


def _validate_partition_policy(task: TaskSpec, field: str) -> None:
    partition = task.partition_policy
    if partition is None:
        return
    where = f"{field}.partitionPolicy"
    expected = partition.total_partitions * partition.partition_size
    if task.replicas != expected:
        raise JobError(
            f"{field}.replicas",
            task.replicas,
            f"{task.replicas} is not totalPartitions × partitionSize = {partition.total_partitions} × "
            f"{partition.partition_size} = {expected}",
        )
    if partition.min_partitions > 0 and task.min_available is not None:
        least = partition.min_partitions * partition.partition_size
        if task.min_available != least:
            raise JobError(
                f"{field}.minAvailable",
                task.min_available,
                f"{task.min_available} is not minPartitions × partitionSize = {partition.min_partitions} × "
                f"{partition.partition_size} = {least}",
            )
    _validate_network_topology(partition.network_topology, f"{where}.networkTopology")


def _validate_volumes(job: Job) -> None:
    mounts: dict[str, int] = {}
    for i, volume in enumerate(job.spec.volumes):
        field = f"spec.volumes[{i}]"
        if not volume.mount_path or ":" in volume.mount_path:
            raise JobError(
                f"{field}.mountPath", volume.mount_path, "missing or containing ':' (every volume needs a mount path)"
            )
        if volume.mount_path in mounts:
            raise JobError(
                f"{field}.mountPath",
                volume.mount_path,
                f"{volume.mount_path!r} is also the mount path of spec.volumes[{mounts[volume.mount_path]}]",
            )
        mounts[volume.mount_path] = i
        if volume.volume_claim is None and not volume.volume_claim_name:
            raise JobError(
                field, volume, "neither volumeClaim nor volumeClaimName (expected one: a new claim or an existing one)"
            )
        if volume.volume_claim_name:
            if volume.volume_claim is not None:
                raise JobError(
                    field,
                    volume,
                    "both volumeClaim and volumeClaimName are set (expected volumeClaimName for "
                    "an existing claim, or volumeClaim for a new one)",
                )
            name = volume.volume_claim_name
            if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
                raise JobError(
                    f"{field}.volumeClaimName",
                    name,
                    f"{name!r} is not a valid claim name "
                    "(expected lower-case letters, digits, '-' and '.', at most 253 characters)",
                )


def _validate_dependencies(tasks: Sequence[TaskSpec]) -> None:
    """``dependsOn`` must form a DAG (a task depending on a task the job does not have never starts)."""
    if all(task.depends_on is None for task in tasks):
        return
    graph = {task.name: list(task.depends_on.name) if task.depends_on else [] for task in tasks}
    for i, task in enumerate(tasks):
        for dep in graph[task.name]:
            if dep not in graph:  # Volcano's topological sort never reaches such a task: not a DAG
                raise JobError(
                    f"spec.tasks[{i}].dependsOn.name",
                    dep,
                    f"{dep!r} is not a task of the job, so the "
                    f"dependencies do not form a directed acyclic graph (DAG) (tasks: {', '.join(graph)})",
                )
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in graph.get(name, []):
            if state.get(dep) == 1:
                cycle = " → ".join([*path[path.index(dep) :], dep]) if dep in path else f"{name} → {dep}"
                index = next(i for i, t in enumerate(tasks) if t.name == name)
                raise JobError(
                    f"spec.tasks[{index}].dependsOn.name",
                    dep,
                    f"the tasks' dependencies do not form a directed acyclic graph (DAG): {cycle}",
                )
            if state.get(dep) is None:
                visit(dep, [*path, dep])
        state[name] = 2

    for task in tasks:
        if state.get(task.name) is None:
            visit(task.name, [task.name])


# -- the queue ----------------------------------------------------------------------------


def admit_queue(job: Job, queues: Mapping[str, Queue]) -> None:
    """Raise :class:`JobError` unless ``job``'s queue (mutated) may take new jobs.

    As the webhook: the queue exists, is Open, is not ``root`` and is a leaf (no queue
    names it as ``spec.parent``). ``queues`` are the queues the caller knows, by name;
    ``default`` and ``root`` exist without being listed. An empty ``status.state`` counts
    as Open, because caldera has no queue controller to set it.
    """
    name = job.spec.queue or DEFAULT_QUEUE
    queue = queues.get(name)
    if queue is None and name not in (DEFAULT_QUEUE, ROOT_QUEUE):
        known = ", ".join(sorted({*queues, DEFAULT_QUEUE})) or DEFAULT_QUEUE
        raise JobError("spec.queue", name, f"no queue {name!r} (expected an existing queue: {known})")
    state = queue.status.state if queue is not None else "Open"
    if state not in ("", "Open"):
        raise JobError("spec.queue", name, f"queue {name!r} is {state} (a job can only be submitted to an Open queue)")
    if name == ROOT_QUEUE:
        raise JobError("spec.queue", name, "the root queue takes no jobs (expected a leaf queue)")
    children = sorted(q.name for q in queues.values() if q.spec.parent == name)
    if children:
        raise JobError(
            "spec.queue",
            name,
            f"queue {name!r} has child queues ({', '.join(children)}); a job can only be submitted to a leaf queue",
        )
