"""What Kubernetes' admission refuses in pods, nodes and PriorityClasses; references across the files."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.model.admission import (
    Registry,
    global_default_problems,
    node_problems,
    pod_problems,
    priority_class_problems,
)
from cluster.model.core import Node, Pod, PriorityClass
from cluster.model.decode import from_builtins
from cluster.model.schema import Reference


def pod(container_resources: dict[str, Any] | None = None, /, **spec: Any) -> Pod:
    container = {"name": "c", "resources": container_resources or {}}
    return from_builtins({"metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}, Pod)


def lines(problems: list[Any]) -> list[str]:
    return [str(p) for p in problems]


R = "spec.containers[0].resources"


@pytest.mark.parametrize(("resources", "expected"), [
    ({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 1, "memory": "1Gi"}}, []),
    ({"limits": {"nvidia.com/gpu": 2}}, []),  # request = limit
    ({"requests": {"nvidia.com/gpu": 2}}, []),  # lenient: Kubernetes wants the limit too
    ({"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": "2"}}, []),
    ({"requests": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}, "limits": {"hugepages-2Mi": "2Mi"}}, []),
    ({"requests": {"example.com/foo": 3, "ephemeral-storage": "1Gi"}}, []),
    ({"limits": {"nvidia.com/gpu": 0.5}},
     [f"{R}.limits.nvidia.com/gpu: 0.5 is not a whole number (nvidia.com/gpu is an extended resource, counted in whole units)"]),
    ({"requests": {"nvidia.com/gpu": "500m"}},
     [f"{R}.requests.nvidia.com/gpu: '500m' is not a whole number (nvidia.com/gpu is an extended resource, counted in whole units)"]),
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
     [f"{R}.requests.cpu: '2' is more than the limit '1' (a request may be at most its limit)"]),
    ({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}},
     [f"{R}.requests.nvidia.com/gpu: 1 differs from the limit 2 (nvidia.com/gpu cannot be overcommitted: give a "
      "request equal to the limit, or the limit alone)"]),
    ({"requests": {"cpu": "1e16"}},
     [f"{R}.requests.cpu: quantity '1e16' is too large (at most 9223372036854775807 millicores)"]),
    ({"requests": {"memory": "-1Gi"}}, [f"{R}.requests.memory: quantity '-1Gi' must not be negative"]),
    ({"requests": {"memroy": "1Gi"}},
     [f"{R}.requests.memroy: 'memroy' is not a resource a container may request (expected cpu, memory, "
      "ephemeral-storage, hugepages-<size>, or an extended resource with a domain such as nvidia.com/gpu; did you mean memory?)"]),
    ({"limits": {"gpu": 1}},
     [f"{R}.limits.gpu: 'gpu' is not a resource a container may request (expected cpu, memory, ephemeral-storage, "
      "hugepages-<size>, or an extended resource with a domain such as nvidia.com/gpu; did you mean nvidia.com/gpu?)"]),
    ({"limits": {"Example.com/Bad Name": 1}},
     [f"{R}.limits.Example.com/Bad Name: 'Example.com/Bad Name' is not a valid extended resource name (expected "
      "<domain>/<name>, such as nvidia.com/gpu)"]),
])  # fmt: skip
def test_container_resources(resources: dict[str, Any], expected: list[str]) -> None:
    assert lines(pod_problems(pod(resources))) == expected


def test_init_containers_and_pod_level_resources() -> None:
    p = pod(
        initContainers=[{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 1.5}}}],
        resources={"requests": {"cpu": 2, "nvidia.com/gpu": 1}},
    )
    assert lines(pod_problems(p)) == [
        "spec.initContainers[0].resources.limits.nvidia.com/gpu: 1.5 is not a whole number (nvidia.com/gpu is an "
        "extended resource, counted in whole units)",
        "spec.resources.requests.nvidia.com/gpu: 'nvidia.com/gpu' cannot be set for the whole pod (expected cpu, "
        "memory or hugepages-<size>)",
    ]


def test_node_extended_resources_are_whole() -> None:
    node = from_builtins(
        {
            "metadata": {"name": "n"},
            "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "1.5"}, "allocatable": {"nvidia.com/gpu": "7.5"}},
        },
        Node,
    )
    assert lines(node_problems(node)) == [
        "status.allocatable.nvidia.com/gpu: '7.5' is not a whole number (nvidia.com/gpu is an extended resource, "
        "counted in whole units)"
    ]


@pytest.mark.parametrize(("data", "expected"), [
    ({"metadata": {"name": "high"}, "value": 1000}, []),
    ({"metadata": {"name": "system-node-critical"}, "value": 2000001000}, []),
    ({"metadata": {"name": "huge"}, "value": 2000000000},
     ["value: 2000000000 is above 1,000,000,000 (the highest value a user-defined PriorityClass may have)"]),
    ({"metadata": {"name": "system-mine"}, "value": 1},
     ["metadata.name: 'system-mine': the system- prefix is reserved for system-cluster-critical and system-node-critical"]),
    ({"metadata": {"name": "p"}, "value": 1, "preemptionPolicy": "Sometimes"},
     ["preemptionPolicy: 'Sometimes' is not a preemption policy (expected PreemptLowerPriority or Never)"]),
])  # fmt: skip
def test_priority_classes(data: dict[str, Any], expected: list[str]) -> None:
    assert lines(priority_class_problems(from_builtins(data, PriorityClass))) == expected


def test_one_global_default() -> None:
    classes = [
        from_builtins({"metadata": {"name": n}, "value": 1, "globalDefault": d}, PriorityClass)
        for n, d in (("a", True), ("b", False), ("c", True))
    ]
    assert {i: str(p) for i, p in global_default_problems(classes).items()} == {
        2: "globalDefault: PriorityClass 'a' is already the global default (only one may be)"
    }


@pytest.mark.parametrize(("ref", "problem"), [
    (Reference("spec.priorityClassName", "PriorityClass", "high"), None),
    (Reference("spec.priorityClassName", "PriorityClass", "system-node-critical"), None),
    (Reference("spec.priorityClassName", "PriorityClass", "hgh"), "'hgh' is not a PriorityClass of the files (did you mean high?)"),
    (Reference("spec.priorityClassName", "PriorityClass", "urgent"),
     "'urgent' is not a PriorityClass of the files (defined: high, low; built in: system-cluster-critical, system-node-critical)"),
    (Reference("spec.queue", "Queue", "default"), None),
    (Reference("spec.queue", "Queue", "research"), None),
    (Reference("spec.queue", "Queue", "reserch"), "'reserch' is not a Queue of the files (did you mean research?)"),
    (Reference("spec.queue", "Queue", "prod"), "'prod' is not a Queue of the files (defined: research; built in: default, root)"),
])  # fmt: skip
def test_references(ref: Reference, problem: str | None) -> None:
    assert Registry(["high", "low"], ["research"]).problem(ref) == problem
