"""API objects decode from what the API server sends; a pod's request is Kubernetes' effective request."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from cluster.model.core import Node, Pod, PriorityClass
from cluster.model.decode import decode_json, from_builtins
from cluster.model.quantity import QuantityError
from cluster.model.resources import DEFAULT_MAX_PODS, GPU, Resources
from cluster.model.volcano import NodeShard, PodGroup, Queue

Mi = 2**20
Gi = 2**30


# -- fluent helpers ---------------------------------------------------------------------


def container(
    name: str = "c",
    *,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox", "resources": {}}
    if requests is not None:
        c["resources"]["requests"] = requests
    if limits is not None:
        c["resources"]["limits"] = limits
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def pod(
    *containers: dict[str, Any],
    init: list[dict[str, Any]] | None = None,
    overhead: dict[str, Any] | None = None,
    **spec: Any,
) -> Pod:
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if init is not None:
        body["initContainers"] = init
    if overhead is not None:
        body["overhead"] = overhead
    return from_builtins({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": body}, Pod)


def node(*, allocatable: dict[str, Any] | None = None, capacity: dict[str, Any] | None = None) -> Node:
    status = {k: v for k, v in (("allocatable", allocatable), ("capacity", capacity)) if v is not None}
    return from_builtins({"metadata": {"name": "n1"}, "status": status}, Node)


# -- what the API server sends ----------------------------------------------------------

API_POD = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "name": "trainer-0",
        "generateName": "trainer-",
        "namespace": "team-a",
        "uid": "6c1e5a0b-8d1d-4c9a-9d5c-0f0c3a6b2b11",
        "resourceVersion": "48213",
        "creationTimestamp": "2025-01-07T10:00:00Z",
        "deletionTimestamp": None,
        "labels": {"app": "trainer", "volcano.sh/job-name": "trainer"},
        "annotations": {"scheduling.k8s.io/group-name": "trainer-pg"},
        "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "trainer", "uid": "x"}],
        "managedFields": [{"manager": "vc-controller-manager", "operation": "Update", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {
        "volumes": [{"name": "kube-api-access", "projected": {"sources": []}}],
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "command": ["torchrun"],
                "resources": {
                    "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"},
                    "requests": {"cpu": "7500m", "memory": "60Gi", "nvidia.com/gpu": "8"},
                },
                "restartPolicy": None,
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "OnFailure",
        "nodeSelector": {"nvidia.com/gpu.product": "H100"},
        "serviceAccountName": "default",
        "schedulerName": "volcano",
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {"key": "x", "tolerationSeconds": None},
        ],
        "affinity": None,
        "priorityClassName": "high",
        "priority": 1000,
        "preemptionPolicy": "PreemptLowerPriority",
        "enableServiceLinks": True,
    },
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": None, "reason": "Unschedulable"}],
        "qosClass": "Burstable",
        "hostIP": None,
    },
}

API_NODE = {
    "kind": "Node",
    "apiVersion": "v1",
    "metadata": {
        "name": "gpu-node-17",
        "uid": "0d5e3c4a-2b35-4b7e-9d0e-8a2f1b7c6d55",
        "resourceVersion": "99120",
        "creationTimestamp": "2024-12-01T08:30:00Z",
        "labels": {"kubernetes.io/hostname": "gpu-node-17", "node.volcano.sh/warmup": "true"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
    },
    "spec": {
        "podCIDR": "10.244.17.0/24",
        "providerID": "aws:///us-east-1a/i-0abc",
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule", "timeAdded": None}],
    },
    "status": {
        "capacity": {"cpu": "96", "memory": "1056440012Ki", "nvidia.com/gpu": "8", "pods": "110",
                     "ephemeral-storage": "3750770428Ki", "hugepages-2Mi": "0"},
        "allocatable": {"cpu": "95690m", "memory": "1045032652Ki", "nvidia.com/gpu": "8", "pods": "110",
                        "ephemeral-storage": "3456718908095", "hugepages-2Mi": "0"},
        "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2025-01-07T10:00:00Z"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.3.17"}],
        "nodeInfo": {"kubeletVersion": "v1.31.2", "containerRuntimeVersion": "containerd://1.7.22"},
        "images": [{"names": ["nvcr.io/nvidia/pytorch:24.05-py3"], "sizeBytes": 9876543210}],
    },
}  # fmt: skip


def test_api_server_pod_decodes() -> None:
    p = msgspec.json.decode(json.dumps(API_POD).encode(), type=Pod)
    assert (p.name, p.namespace, p.uid) == ("trainer-0", "team-a", "6c1e5a0b-8d1d-4c9a-9d5c-0f0c3a6b2b11")
    assert (p.scheduler_name, p.node_name, p.phase, p.group_name, p.priority) == (
        "volcano",
        "",
        "Pending",
        "trainer-pg",
        1000,
    )
    assert p.metadata.resource_version == "48213" and p.metadata.deletion_timestamp is None
    assert p.spec.node_selector == {"nvidia.com/gpu.product": "H100"}
    assert [t.toleration_seconds for t in p.spec.tolerations] == [None, 300, None]
    assert p.spec.tolerations[2].operator == "Equal"
    assert p.spec.affinity is None and p.spec.priority_class_name == "high"
    assert p.request() == {"cpu": 7500, "memory": 60 * Gi, GPU: 8, "pods": 1}
    # decode_json reads the same thing
    assert decode_json(json.dumps(API_POD), Pod) == p


def test_api_server_node_decodes() -> None:
    n = msgspec.json.decode(json.dumps(API_NODE).encode(), type=Node)
    assert n.name == "gpu-node-17" and not n.unschedulable
    assert n.labels["node.volcano.sh/warmup"] == "true"
    assert [(t.key, t.value, t.effect) for t in n.taints] == [("nvidia.com/gpu", "present", "NoSchedule")]
    assert n.allocatable_resources() == {
        "cpu": 95690,
        "memory": 1045032652 * 1024,
        GPU: 8,
        "pods": 110,
        "ephemeral-storage": 3456718908095,
    }


def test_nulls_anywhere_mean_absent_through_from_builtins() -> None:
    data = {
        "metadata": {"name": "p", "namespace": None, "labels": None, "annotations": None, "uid": None},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": None, "limits": {"cpu": "1"}}}],
            "initContainers": None,
            "tolerations": None,
            "nodeSelector": None,
            "overhead": None,
            "priority": None,
        },
        "status": None,
    }
    p = decode_json(json.dumps(data), Pod)
    assert (p.namespace, p.labels, p.spec.tolerations, p.phase, p.priority) == ("default", {}, [], "Pending", 0)
    assert p.request() == {"cpu": 1000, "pods": 1}


def test_yaml_timestamps_become_text() -> None:
    import datetime as dt

    meta = {"name": "n", "creationTimestamp": dt.datetime(2025, 1, 7, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))}
    assert from_builtins({"metadata": meta}, Node).metadata.creation_timestamp == "2025-01-07T10:00:00Z"


def test_wrong_type_names_the_path() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"Expected `int`, got `str` - at `\$\.spec\.minMember`"):
        from_builtins({"metadata": {"name": "pg"}, "spec": {"minMember": "x"}}, PodGroup)
    with pytest.raises(
        msgspec.ValidationError, match=r"got `bool` - at `\$\.spec\.containers\[0\]\.resources\.requests\[\.\.\.\]`"
    ):
        msgspec.json.decode(
            b'{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"requests":{"cpu":true}}}]}}', type=Pod
        )
    with pytest.raises(msgspec.ValidationError, match=r"missing required field `name` - at `\$\.metadata`"):
        from_builtins({"metadata": {}}, Node)


def test_objects_round_trip_through_msgpack() -> None:
    p = from_builtins(API_POD, Pod)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(p), type=Pod) == p
    n = from_builtins(API_NODE, Node)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(n), type=Node) == n


# -- Pod ----------------------------------------------------------------------------------


def test_uid_falls_back_to_a_stable_uuid() -> None:
    a, b = pod(), pod()
    assert a.uid == b.uid and len(a.uid) == 36
    other = from_builtins({"metadata": {"name": "p", "namespace": "other"}}, Pod)
    assert other.uid != a.uid


def test_defaults() -> None:
    p = pod()
    assert (p.scheduler_name, p.node_name, p.phase, p.group_name, p.priority) == (
        "default-scheduler",
        "",
        "Pending",
        "",
        0,
    )
    assert p.request() == {"pods": 1}


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        pytest.param(pod(container(requests={"cpu": "1", "memory": "1Gi"}), container(requests={"cpu": "500m"})),
                     {"cpu": 1500, "memory": Gi}, id="containers add up"),
        pytest.param(pod(container(limits={"cpu": "2", "memory": "4Gi"})),
                     {"cpu": 2000, "memory": 4 * Gi}, id="limits only: requests default to limits"),
        pytest.param(pod(container(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "4Gi"})),
                     {"cpu": 1000, "memory": 4 * Gi}, id="limit fills only the missing request"),
        pytest.param(pod(container(requests={"cpu": "0"}, limits={"cpu": "2"})),
                     {}, id="an explicit zero request is kept"),
        pytest.param(pod(container(requests={"cpu": "1", "memory": "1Gi"}),
                         init=[container(requests={"cpu": "4", "memory": "512Mi"})]),
                     {"cpu": 4000, "memory": Gi}, id="init container peak, per resource"),
        pytest.param(pod(container(requests={"cpu": "1"}),
                         init=[container("i1", requests={"cpu": "2"}), container("i2", requests={"cpu": "3"})]),
                     {"cpu": 3000}, id="init containers run one at a time"),
        pytest.param(pod(container(requests={"cpu": "500m"}),
                         init=[container("s", requests={"cpu": "1"}, sidecar=True), container("i", requests={"cpu": "2"})]),
                     {"cpu": 3000}, id="sidecar before an init container runs beside it"),
        pytest.param(pod(container(requests={"cpu": "500m"}),
                         init=[container("i", requests={"cpu": "2"}), container("s", requests={"cpu": "1"}, sidecar=True)]),
                     {"cpu": 2000}, id="sidecar after an init container does not"),
        pytest.param(pod(container(requests={"cpu": "1", "memory": "1Gi"}),
                         init=[container("i1", requests={"cpu": "2", "memory": "512Mi"}),
                               container("s1", requests={"cpu": "500m", "memory": "256Mi"}, sidecar=True),
                               container("i2", requests={"cpu": "3", "memory": "256Mi"}),
                               container("s2", limits={"cpu": "250m"}, sidecar=True)],
                         overhead={"cpu": "250m", "memory": "64Mi"}),
                     {"cpu": 3750, "memory": 1344 * Mi}, id="sidecars, init containers and overhead"),
        pytest.param(pod(container(requests={"cpu": "1"}), overhead={"cpu": "100m", "memory": "120Mi"}),
                     {"cpu": 1100, "memory": 120 * Mi}, id="overhead is added"),
        pytest.param(pod(container(requests={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": 1}),
                         resources={"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}}),
                     {"cpu": 4000, "memory": 8 * Gi, GPU: 1}, id="pod-level resources replace cpu and memory"),
    ],
)  # fmt: skip
def test_effective_request(p: Pod, expected: dict[str, int]) -> None:
    assert p.request() == Resources(expected) + {"pods": 1}


@pytest.mark.parametrize(
    ("p", "message"),
    [
        (pod(container(requests={"cpu": "1"}), container(requests={"memory": "1GB"})),
         "spec.containers[1].resources.requests.memory: invalid quantity '1GB'"),
        (pod(container(limits={"cpu": "two"})), "spec.containers[0].resources.limits.cpu: invalid quantity 'two'"),
        (pod(init=[container(requests={"cpu": "-1"})]), "spec.initContainers[0].resources.requests.cpu: quantity '-1' must not be negative"),
        (pod(overhead={"cpu": "1..5"}), "spec.overhead.cpu: invalid quantity '1..5'"),
    ],
)  # fmt: skip
def test_request_errors_name_the_field(p: Pod, message: str) -> None:
    with pytest.raises(QuantityError) as err:
        p.request()
    assert str(err.value).startswith(message)


def test_pods_alike_but_for_where_a_quantity_stands_each_get_their_own_request() -> None:
    """Requests are kept by what they are made of (cluster.model.core._REQUESTS): asked one after another,
    and again, pods that differ only in a container's place, a sidecar's order or requests against limits
    each get theirs."""
    cases = [
        (pod(container(requests={"cpu": "500m"}),
             init=[container("s", requests={"cpu": "1"}, sidecar=True), container("i", requests={"cpu": "2"})]),
         {"cpu": 3000}),
        (pod(container(requests={"cpu": "500m"}),
             init=[container("i", requests={"cpu": "2"}), container("s", requests={"cpu": "1"}, sidecar=True)]),
         {"cpu": 2000}),
        (pod(container(requests={"cpu": "500m"}),
             init=[container("s", requests={"cpu": "1"}), container("i", requests={"cpu": "2"})]),
         {"cpu": 2000}),
        (pod(container(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "4Gi"})), {"cpu": 1000, "memory": 4 * Gi}),
        (pod(container(requests={"cpu": "2"}, limits={"cpu": "1", "memory": "4Gi"})), {"cpu": 2000, "memory": 4 * Gi}),
        (pod(container(limits={"cpu": "1", "memory": "4Gi"})), {"cpu": 1000, "memory": 4 * Gi}),
        (pod(container(requests={"cpu": "1"}), container(requests={"cpu": "1"})), {"cpu": 2000}),
        (pod(container(requests={"cpu": "1"})), {"cpu": 1000}),
        (pod(container(requests={"cpu": "1"}), overhead={"cpu": "1"}), {"cpu": 2000}),
    ]  # fmt: skip
    for _ in range(2):
        assert [p.request() for p, _ in cases] == [Resources(want) + {"pods": 1} for _, want in cases]


def test_a_boolean_quantity_is_refused_after_a_pod_asked_for_one_alike() -> None:
    one = pod(container(requests={"cpu": 1}))
    assert one.request() == {"cpu": 1000, "pods": 1}
    c = one.spec.containers[0]
    true = msgspec.structs.replace(
        one,
        spec=msgspec.structs.replace(
            one.spec,
            containers=[
                msgspec.structs.replace(c, resources=msgspec.structs.replace(c.resources, requests={"cpu": True}))
            ],
        ),
    )
    with pytest.raises(QuantityError, match=r"spec.containers\[0\].resources.requests.cpu: invalid quantity True"):
        true.request()


# -- Node ---------------------------------------------------------------------------------


def test_allocatable_falls_back_to_capacity_and_pods_default() -> None:
    assert node(capacity={"cpu": "8", "memory": "32Gi"}).allocatable_resources() == {
        "cpu": 8000, "memory": 32 * Gi, "pods": DEFAULT_MAX_PODS}  # fmt: skip
    assert node(allocatable={"cpu": "7", "pods": 20}, capacity={"cpu": "8"}).allocatable_resources() == {
        "cpu": 7000,
        "pods": 20,
    }
    assert node(allocatable={"cpu": "7", "pods": 0}).allocatable_resources() == {"cpu": 7000}
    assert node().allocatable_resources() == {"pods": DEFAULT_MAX_PODS}


def test_node_quantity_errors_name_the_field() -> None:
    with pytest.raises(QuantityError, match=r"^status\.allocatable\.cpu: invalid quantity '8 cores'"):
        node(allocatable={"cpu": "8 cores"}).allocatable_resources()
    with pytest.raises(QuantityError, match=r"^status\.capacity\.memory: "):
        node(capacity={"memory": "lots"}).allocatable_resources()


def test_unschedulable_and_affinity() -> None:
    n = from_builtins({"metadata": {"name": "n"}, "spec": {"unschedulable": True}}, Node)
    assert n.unschedulable and n.taints == []
    p = pod(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}})  # fmt: skip
    assert p.spec.affinity is not None and p.spec.affinity.node_affinity is not None
    required = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    assert required.node_selector_terms[0].match_expressions[0].values == ["a", "b"]
    preferred = p.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    assert preferred[0].weight == 10 and preferred[0].preference.match_expressions[0].values == []


# -- Volcano and the rest ---------------------------------------------------------------------


def test_podgroup() -> None:
    pg = from_builtins(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "trainer-pg", "namespace": "team-a"},
            "spec": {"minMember": 4, "minTaskMember": {"worker": 4}, "queue": "research",
                     "minResources": {"cpu": "32", "nvidia.com/gpu": "32"}},
            "status": {"phase": "Inqueue", "running": 2,
                       "conditions": [{"type": "Unschedulable", "status": "True", "transitionID": "abc",
                                       "lastTransitionTime": "2025-01-07T10:00:00Z", "reason": "NotEnoughResources",
                                       "message": "3/4 tasks in gang unschedulable"}]},
        },
        PodGroup,
    )  # fmt: skip
    assert (pg.name, pg.namespace, pg.spec.min_member, pg.spec.queue) == ("trainer-pg", "team-a", 4, "research")
    assert pg.min_resources_amounts() == {"cpu": 32000, GPU: 32}
    assert pg.status.conditions[0].transition_id == "abc" and pg.status.running == 2
    assert b'"transitionID":"abc"' in msgspec.json.encode(pg)
    bare = from_builtins({"metadata": {"name": "g"}}, PodGroup)
    assert (bare.spec.min_member, bare.spec.queue, bare.status.phase, bare.status.failed) == (
        1,
        "default",
        "Pending",
        0,
    )
    assert bare.min_resources_amounts() == Resources()


def test_queue() -> None:
    q = from_builtins(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "research"},
            "spec": {"weight": 3, "capability": {"cpu": "100", "nvidia.com/gpu": 64}, "reclaimable": False,
                     "guarantee": {"resource": {"cpu": "10", "memory": "100Gi"}}, "deserved": {"nvidia.com/gpu": 16},
                     "parent": "root"},
        },
        Queue,
    )  # fmt: skip
    assert (q.name, q.spec.weight, q.spec.parent, q.status.state, q.spec.reclaimable) == (
        "research",
        3,
        "root",
        "Open",
        False,
    )
    assert q.capability_resources() == {"cpu": 100_000, GPU: 64}
    assert q.guarantee_resources() == {"cpu": 10_000, "memory": 100 * Gi}
    assert q.deserved_resources() == {GPU: 16}
    bare = from_builtins({"metadata": {"name": "default"}}, Queue)
    assert (bare.spec.weight, bare.spec.reclaimable, bare.capability_resources()) == (1, True, Resources())
    with pytest.raises(QuantityError, match=r"^spec\.guarantee\.resource\.cpu: "):
        from_builtins(
            {"metadata": {"name": "q"}, "spec": {"guarantee": {"resource": {"cpu": "x"}}}}, Queue
        ).guarantee_resources()


def test_priority_class_and_node_shard() -> None:
    pc = from_builtins({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                        "value": 1000, "globalDefault": True}, PriorityClass)  # fmt: skip
    assert (pc.name, pc.value, pc.global_default, pc.preemption_policy) == ("high", 1000, True, "PreemptLowerPriority")
    # Volcano writes an empty nodesDesired as null
    raw = b'{"apiVersion":"shard.volcano.sh/v1alpha1","kind":"NodeShard","metadata":{"name":"volcano"},' \
          b'"spec":{"nodesDesired":null},"status":{"nodesInUse":["n1"],"lastUpdateTime":null}}'  # fmt: skip
    shard = decode_json(raw, NodeShard)
    assert (shard.name, shard.spec.nodes_desired, shard.status.nodes_in_use) == ("volcano", [], ["n1"])
    assert shard.status.last_update_time is None and shard.status.nodes_to_add == []
