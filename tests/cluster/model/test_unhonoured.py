"""What caldera does not honour yet is named by field path, from the decoded model."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from cluster.model.core import Pod
from cluster.model.decode import from_builtins
from cluster.model.pod_rules import PodAffinity
from cluster.model.unhonoured import notice, unhonoured
from cluster.model.volcano import PodGroup, Queue

ANTI_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    ]
}

# A pod as the API server sends it, with everything caldera carries but does not honour.
API_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-0",
        "namespace": "team",
        "uid": "u1",
        "annotations": {"volcano.sh/numa-topology-policy": "single-numa-node"},
    },
    "spec": {
        "volumes": [
            {"name": "token", "projected": {"sources": []}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": None}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
        ],
        "initContainers": [{"name": "init", "image": "busybox", "ports": [{"containerPort": 9000}]}],
        "containers": [
            {
                "name": "main",
                "image": "nginx",
                "ports": [
                    {"containerPort": 80, "protocol": "TCP"},
                    {"name": "metrics", "containerPort": 9090, "hostPort": 9090, "hostIP": "0.0.0.0"},
                ],
                "resources": {"claims": [{"name": "gpu"}]},
            }
        ],
        "affinity": {"nodeAffinity": None, "podAffinity": None, "podAntiAffinity": ANTI_AFFINITY},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        "schedulingGates": [{"name": "example.com/quota"}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "hostNetwork": False,
        "schedulerName": "agent-scheduler",
    },
    "status": {"phase": "Pending"},
}

EVERYTHING = [
    "metadata.annotations.volcano.sh/numa-topology-policy",
    "spec.resourceClaims",
    "spec.volumes[1].persistentVolumeClaim",
    "spec.volumes[2].ephemeral",
    "spec.containers[0].ports[1].hostPort",
]


def pod(**spec: Any) -> Pod:
    return from_builtins({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}, Pod)


def test_an_api_server_pod_decodes_with_the_fields_and_names_them() -> None:
    p = msgspec.json.decode(json.dumps(API_POD).encode(), type=Pod)
    assert p.spec.affinity is not None
    assert p.spec.affinity.pod_anti_affinity == msgspec.convert(ANTI_AFFINITY, PodAffinity)
    assert p.spec.affinity.pod_affinity is None
    assert [v.name for v in p.spec.volumes] == ["token", "data", "scratch"]
    assert p.spec.containers[0].ports[1].host_port == 9090 and p.spec.containers[0].ports[1].host_ip == "0.0.0.0"
    assert p.spec.scheduling_gates[0].name == "example.com/quota"
    assert unhonoured(p) == EVERYTHING


def test_the_fields_survive_the_store_encoding() -> None:
    p = from_builtins(API_POD, Pod)
    again = msgspec.msgpack.decode(msgspec.msgpack.encode(p), type=Pod)
    assert again == p and unhonoured(again) == EVERYTHING


@pytest.mark.parametrize(("spec", "paths"), [
    ({}, []),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}, []),
    ({"affinity": {"podAffinity": {}}}, []),  # set but asks nothing
    ({"affinity": {"podAffinity": ANTI_AFFINITY}}, []),  # both schedulers filter by required terms
    ({"affinity": {"podAffinity": ANTI_AFFINITY}, "schedulerName": "agent-scheduler"}, []),
    ({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}}, []),  # and score by preferred ones
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "namespaceSelector": {"matchLabels": {"team": "a"}}}]}}}, []),  # Namespaces' labels
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "mismatchLabelKeys": ["tenant"]}]}}}, []),  # merged, as the API server does
    ({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "matchLabelKeys": ["rev"]}}]}}}, []),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}, []),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]},
     []),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "matchLabelKeys": ["rev"]}]}, []),
    ({"topologySpreadConstraints": []}, []),
    ({"volumes": [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "tmp", "emptyDir": {}}]}, []),
    ({"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}, []),
    ({"hostNetwork": True}, []),  # no ports: nothing to conflict
    ({"hostNetwork": True, "containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}, ["spec.hostNetwork"]),
    ({"initContainers": [{"name": "s", "restartPolicy": "Always", "ports": [{"containerPort": 1, "hostPort": 1}]}]},
     ["spec.initContainers[0].ports[0].hostPort"]),
])  # fmt: skip
def test_pod_fields(spec: dict[str, Any], paths: list[str]) -> None:
    assert unhonoured(pod(**spec)) == paths


def test_podgroup_and_queue_fields() -> None:
    plain = from_builtins({"metadata": {"name": "g"}, "spec": {"minMember": 2}}, PodGroup)
    assert unhonoured(plain) == []
    topo = from_builtins(
        {
            "metadata": {"name": "g"},
            "spec": {
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                "subGroupPolicy": [{"name": "w", "subGroupSize": 4}],
            },
        },
        PodGroup,
    )
    assert unhonoured(topo) == []  # the network topology and the subgroups are honoured
    queue = from_builtins(
        {
            "metadata": {"name": "q"},
            "spec": {"affinity": {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["g1"]}}},
        },
        Queue,
    )
    assert unhonoured(queue) == ["spec.affinity"]
    assert unhonoured(from_builtins({"metadata": {"name": "q"}}, Queue)) == []


def test_notice_is_one_line_naming_the_field() -> None:
    assert notice("spec.affinity.podAntiAffinity") == (
        "spec.affinity.podAntiAffinity is not honoured by caldera yet (placement ignores it)"
    )
