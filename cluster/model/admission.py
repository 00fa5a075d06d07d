"""What Kubernetes' and Volcano's admission refuse beyond the schema, for objects read from manifests.

A manifest is checked as ``kubectl apply --validate=strict`` and the admission behind it
would: its schema first (cluster.model.schema: unknown fields, types), then the rules here, each
refusal a :class:`~cluster.model.schema.Problem` naming the field, the value and what is accepted:

- a pod's resources, as Kubernetes validates them: the names a container may use, whole
  numbers of extended resources, requests at most their limits and, for resources that
  cannot be overcommitted (extended ones, hugepages), equal to them; amounts inside int64;
- a node's extended resources in whole numbers;
- PodGroups: at most one of highestTierAllowed and highestTierName in a network topology;
- PriorityClasses: user values at most one billion, the ``system-`` prefix reserved for the
  two built-in classes, one global default, a known preemption policy;
- Queues: Volcano's queue admission (cluster.model.queue_admission);
- PriorityClasses and Queues together: one global default; the queue tree;
- references across the files: the PriorityClass a pod, PodGroup or Job names; the Queue a
  PodGroup (or a Kubeflow job) names, and that a PodGroup's queue is Open. A Volcano Job's
  queue rules (exists, Open, a leaf) are cluster.model.volcano_admission's, given the files' queues.

Lenient on purpose: an extended resource requested without a limit is accepted as its own
limit (Kubernetes refuses it), since hand-written manifests commonly do that and the
request is what placement reads. A Volcano Job's own rules are cluster.model.volcano_job's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

from cluster.model.core import (
    Node,
    Pod,
    PriorityClass,
    ResourceList,
    ResourceRequirements,
)
from cluster.model.quantity import QuantityError, parse_amount, parse_quantity
from cluster.model.resources import (
    CONTAINER_RESOURCES,
    GPU,
    is_extended_resource,
    is_native_resource,
)
from cluster.model.schema import Problem, Reference, nearest
from cluster.model.volcano import PodGroup, Queue

DEFAULT_QUEUE = "default"
ROOT = "root"
BUILTIN_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
HIGHEST_USER_PRIORITY = 1_000_000_000
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")

_HUGEPAGES = "hugepages-"
_POD_LEVEL = ("cpu", "memory")
# A qualified name: an optional DNS-subdomain prefix and "/", then at most 63 name characters.
_QUALIFIED = re.compile(
    r"(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?",
    re.ASCII,
)
NameRule = Callable[[str], str | None]


# -- resources ------------------------------------------------------------------------------


def _container_name(name: str) -> str | None:
    """Why a container may not name the resource ``name``; None when it may."""
    if "/" not in name:
        if name in CONTAINER_RESOURCES or name.startswith(_HUGEPAGES):
            return None
        guess = nearest(name, (*CONTAINER_RESOURCES, GPU.partition("/")[2]))
        hint = f"; did you mean {GPU if guess == 'gpu' else guess}?" if guess else ""
        return (
            f"{name!r} is not a resource a container may request (expected cpu, memory, ephemeral-storage, "
            f"hugepages-<size>, or an extended resource with a domain such as {GPU}{hint})"
        )
    if not is_native_resource(name) and not _QUALIFIED.fullmatch(name):
        return f"{name!r} is not a valid extended resource name (expected <domain>/<name>, such as {GPU})"
    return None


def _pod_level_name(name: str) -> str | None:
    if name in _POD_LEVEL or name.startswith(_HUGEPAGES):
        return None
    return f"{name!r} cannot be set for the whole pod (expected cpu, memory or hugepages-<size>)"


def _any_name(name: str) -> str | None:
    return None


def resource_list_problems(values: ResourceList | None, field: str, names: NameRule = _any_name) -> list[Problem]:
    """The problems of one ResourceList: its names, its quantities, whole extended resources."""
    return _parse(values, field, names)[1]


def request_problems(values: ResourceList | None, field: str) -> list[Problem]:
    """The problems of a container's requests (or limits) on their own: names a container may use, whole units."""
    return resource_list_problems(values, field, _container_name)


def _parse(values: ResourceList | None, field: str, names: NameRule) -> tuple[dict[str, Fraction], list[Problem]]:
    """Each valid quantity's exact value, and a problem for each other one."""
    parsed: dict[str, Fraction] = {}
    problems: list[Problem] = []
    for name, value in (values or {}).items():
        where = f"{field}.{name}"
        bad_name = names(name)
        if bad_name is not None:
            problems.append(Problem(where, bad_name))
            continue
        try:
            parse_amount(name, value, field=where, negative=False)  # the int64 guard
            q = parse_quantity(value, field=where)
        except QuantityError as e:
            problems.append(Problem(e.field, e.problem))
            continue
        if is_extended_resource(name) and q.denominator != 1:
            problems.append(
                Problem(
                    where, f"{value!r} is not a whole number ({name} is an extended resource, counted in whole units)"
                )
            )
            continue
        parsed[name] = q
    return parsed, problems


def requirements_problems(req: ResourceRequirements, field: str, names: NameRule = _container_name) -> list[Problem]:
    """Kubernetes' rules for one container's (or a pod's) requests and limits; ``field`` is their path."""
    limits, problems = _parse(req.limits, f"{field}.limits", names)
    requests, more = _parse(req.requests, f"{field}.requests", names)
    problems += more
    for name, q in requests.items():
        if name not in limits:
            continue
        asked, limit = req.requests[name], req.limits[name]
        where = f"{field}.requests.{name}"
        if (is_extended_resource(name) or name.startswith(_HUGEPAGES)) and q != limits[name]:
            problems.append(
                Problem(
                    where,
                    f"{asked!r} differs from the limit {limit!r} ({name} cannot be "
                    "overcommitted: give a request equal to the limit, or the limit alone)",
                )
            )
        elif q > limits[name]:
            problems.append(
                Problem(where, f"{asked!r} is more than the limit {limit!r} (a request may be at most its limit)")
            )
    return problems


def pod_problems(pod: Pod) -> list[Problem]:
    """What Kubernetes refuses in a pod's resources (paths from the pod: ``spec.containers[0]...``)."""
    spec = pod.spec
    problems: list[Problem] = []
    for field, containers in (("spec.initContainers", spec.init_containers), ("spec.containers", spec.containers)):
        for i, c in enumerate(containers):
            problems += requirements_problems(c.resources, f"{field}[{i}].resources")
    if spec.resources is not None:
        problems += requirements_problems(spec.resources, "spec.resources", _pod_level_name)
    if not problems:
        try:
            pod.request()  # the overhead, and anything the rules above let through
        except QuantityError as e:
            problems.append(Problem(e.field, e.problem))
    return problems


def node_problems(node: Node) -> list[Problem]:
    return resource_list_problems(node.status.capacity, "status.capacity") + resource_list_problems(
        node.status.allocatable, "status.allocatable"
    )


# -- PriorityClasses ------------------------------------------------------------------------


def priority_class_problems(pc: PriorityClass) -> list[Problem]:
    problems: list[Problem] = []
    if pc.name.startswith("system-") and pc.name not in BUILTIN_PRIORITY_CLASSES:
        problems.append(
            Problem(
                "metadata.name",
                f"{pc.name!r}: the system- prefix is reserved for {' and '.join(BUILTIN_PRIORITY_CLASSES)}",
            )
        )
    elif pc.value > HIGHEST_USER_PRIORITY and pc.name not in BUILTIN_PRIORITY_CLASSES:
        problems.append(
            Problem(
                "value",
                f"{pc.value} is above {HIGHEST_USER_PRIORITY:,} (the highest value a "
                "user-defined PriorityClass may have)",
            )
        )
    if pc.preemption_policy not in PREEMPTION_POLICIES:
        problems.append(
            Problem(
                "preemptionPolicy",
                f"{pc.preemption_policy!r} is not a preemption policy (expected {' or '.join(PREEMPTION_POLICIES)})",
            )
        )
    return problems


def podgroup_problems(pg: PodGroup) -> list[Problem]:
    """Volcano's PodGroup webhook on one object: a network topology (the PodGroup's, or a
    sub-group policy's) names at most one of highestTierAllowed and highestTierName."""
    problems = []
    own = pg.spec.network_topology
    topologies: list[tuple[str, object]] = [("spec.networkTopology", own.raw() if own else None)]
    topologies += [
        (
            f"spec.subGroupPolicy[{i}].networkTopology",
            policy.network_topology.raw() if policy.network_topology else None,
        )
        for i, policy in enumerate(pg.spec.sub_group_policy)
    ]
    for path, topology in topologies:
        if not isinstance(topology, dict):
            continue
        if topology.get("highestTierAllowed") is not None and topology.get("highestTierName"):
            problems.append(
                Problem(
                    path,
                    f"both highestTierAllowed ({topology['highestTierAllowed']}) and "
                    f"highestTierName ({topology['highestTierName']!r}) are set "
                    "(expected at most one of them)",
                )
            )
    return problems


def podgroup_queue_problem(pg: PodGroup, queues: Mapping[str, Queue]) -> Problem | None:
    """Volcano's PodGroup webhook across the files: the queue it names is Open (an empty
    ``status.state`` counts as Open: caldera has no queue controller to set it)."""
    queue = queues.get(pg.spec.queue)
    if queue is None or queue.status.state in ("", "Open"):
        return None
    return Problem(
        "spec.queue",
        f"queue {queue.name!r} is {queue.status.state} (a PodGroup can only be submitted to an Open queue)",
    )


# -- across the files -------------------------------------------------------------------------


class Registry:
    """The names of the PriorityClasses and Queues a set of manifests defines; some exist implicitly."""

    def __init__(self, priority_classes: Iterable[str], queues: Iterable[str]) -> None:
        self.priority_classes = sorted(set(priority_classes))
        self.queues = sorted(set(queues))

    def problem(self, ref: Reference) -> str | None:
        """Why ``ref`` names nothing it may name; None when it is fine."""
        if ref.kind == "PriorityClass":
            if ref.name in self.priority_classes or ref.name in BUILTIN_PRIORITY_CLASSES:
                return None
            return _missing(
                ref.name, "PriorityClass", self.priority_classes, f"built in: {', '.join(BUILTIN_PRIORITY_CLASSES)}"
            )
        if ref.name in self.queues or ref.name in (DEFAULT_QUEUE, ROOT):
            return None
        return _missing(ref.name, "Queue", self.queues, f"built in: {DEFAULT_QUEUE}, {ROOT}")


def _missing(name: str, kind: str, defined: Sequence[str], builtin: str) -> str:
    guess = nearest(name, defined)
    if guess is not None:
        return f"{name!r} is not a {kind} of the files (did you mean {guess}?)"
    listed = ", ".join(defined) if defined else "none"
    return f"{name!r} is not a {kind} of the files (defined: {listed}; {builtin})"


def global_default_problems(priority_classes: Sequence[PriorityClass]) -> dict[int, Problem]:
    """A second global default PriorityClass (Kubernetes' priority admission allows one), by position."""
    defaults = [i for i, pc in enumerate(priority_classes) if pc.global_default]
    first = priority_classes[defaults[0]].name if defaults else ""
    return {
        i: Problem("globalDefault", f"PriorityClass {first!r} is already the global default (only one may be)")
        for i in defaults[1:]
    }
