"""Unknown fields are refused by name with the nearest known one, for every kind with a schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.model.schema import Problem, Reference, Schemas, nearest, unknown_field

ROOT = Path(__file__).resolve().parents[3]
POD_TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
REPLICAS = {"Worker": {"replicas": 2, "template": POD_TEMPLATE}}


def check(api_version: str, kind: str, data: dict[str, Any]) -> Any:
    schemas = Schemas.bundled()
    schema = schemas.schema(api_version, kind)
    assert schema is not None, f"no schema for {api_version} {kind}"
    return schemas.check({"apiVersion": api_version, "kind": kind, **data}, schema)


# Every kind caldera reads, each with a misspelled field and the line it gets.
MISSPELLED = [
    ("v1", "Node", {"metadata": {"name": "n"}, "spec": {"unschedulabel": True}},
     "spec.unschedulabel: unknown field (did you mean unschedulable?)"),
    ("v1", "Pod", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"requets": {}}}]}},
     "spec.containers[0].resources.requets: unknown field (did you mean requests?)"),
    ("v1", "Pod", {"metadata": {"name": "p", "annotation": {}}}, "metadata.annotation: unknown field (did you mean annotations?)"),
    ("scheduling.k8s.io/v1", "PriorityClass", {"metadata": {"name": "h"}, "valeu": 5},
     "valeu: unknown field (did you mean value?)"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup", {"metadata": {"name": "g"}, "spec": {"minMembers": 2}},
     "spec.minMembers: unknown field (did you mean minMember?)"),
    ("scheduling.volcano.sh/v1beta1", "Queue", {"metadata": {"name": "q"}, "spec": {"capabilty": {"cpu": 1}}},
     "spec.capabilty: unknown field (did you mean capability?)"),
    ("scheduling.volcano.sh/v1beta1", "Queue", {"metadata": {"name": "q"}, "spec": {"guarantee": {"resources": {}}}},
     "spec.guarantee.resources: unknown field (did you mean resource?)"),
    ("shard.volcano.sh/v1alpha1", "NodeShard", {"metadata": {"name": "s"}, "spec": {"nodesDesire": []}},
     "spec.nodesDesire: unknown field (did you mean nodesDesired?)"),
    ("batch.volcano.sh/v1alpha1", "Job", {"metadata": {"name": "j1"}, "spec": {"minAvaliable": 1}},
     "spec.minAvaliable: unknown field (did you mean minAvailable?)"),
    ("batch.volcano.sh/v1alpha1", "Job", {"metadata": {"name": "j1"}, "spec": {"tasks": [{"name": "w", "template": {
        "spec": {"containers": [{"name": "c", "resources": {"limit": {}}}]}}}]}},
     "spec.tasks[0].template.spec.containers[0].resources.limit: unknown field (did you mean limits?)"),
    ("batch.volcano.sh/v1alpha1", "Job", {"metadata": {"name": "j1"}, "spec": {"tasks": [{"name": "w", "replica": 2}]}},
     "spec.tasks[0].replica: unknown field (did you mean replicas?)"),
    ("apps/v1", "Deployment", {"metadata": {"name": "d"}, "spec": {"replica": 2}}, "spec.replica: unknown field (did you mean replicas?)"),
    ("apps/v1", "ReplicaSet", {"metadata": {"name": "r"}, "spec": {"template": {"spec": {"nodeSelecter": {}}}}},
     "spec.template.spec.nodeSelecter: unknown field (did you mean nodeSelector?)"),
    ("apps/v1", "StatefulSet", {"metadata": {"name": "s"}, "spec": {"serviceNam": "x"}},
     "spec.serviceNam: unknown field (did you mean serviceName?)"),
    ("batch/v1", "Job", {"metadata": {"name": "b"}, "spec": {"parallelsim": 2}}, "spec.parallelsim: unknown field (did you mean parallelism?)"),
    ("kubeflow.org/v1", "PyTorchJob", {"metadata": {"name": "t"}, "spec": {"pytorchReplicaSpec": {}}},
     "spec.pytorchReplicaSpec: unknown field (did you mean pytorchReplicaSpecs?)"),
    ("kubeflow.org/v1", "PyTorchJob", {"metadata": {"name": "t"}, "spec": {"pytorchReplicaSpecs": {
        "Worker": {"replicas": 1, "restartPolicies": "Never"}}}},
     "spec.pytorchReplicaSpecs.Worker.restartPolicies: unknown field (did you mean restartPolicy?)"),
    ("kubeflow.org/v1", "TFJob", {"metadata": {"name": "t"}, "spec": {"runPolicy": {"schedulingPolicy": {"minAvailible": 1}}}},
     "spec.runPolicy.schedulingPolicy.minAvailible: unknown field (did you mean minAvailable?)"),
    ("kubeflow.org/v1", "MPIJob", {"metadata": {"name": "m"}, "spec": {"slotPerWorker": 1}},
     "spec.slotPerWorker: unknown field (did you mean slotsPerWorker?)"),
    ("kubeflow.org/v2beta1", "MPIJob", {"metadata": {"name": "m"}, "spec": {"runLauncherAsWorkers": True}},
     "spec.runLauncherAsWorkers: unknown field (did you mean runLauncherAsWorker?)"),
    ("topology.volcano.sh/v1alpha1", "HyperNode", {"metadata": {"name": "h"}, "spec": {"teir": 1}},
     "spec.teir: unknown field (did you mean tier?)"),
]  # fmt: skip


@pytest.mark.parametrize(("api_version", "kind", "data", "line"), MISSPELLED)
def test_a_misspelled_field_is_refused_by_name(api_version: str, kind: str, data: dict[str, Any], line: str) -> None:
    findings = check(api_version, kind, data)
    assert [str(p) for p in findings.unknown] == [line]


# A full object of each kind, with fields caldera does not model: nothing to refuse.
VALID = [
    ("batch.volcano.sh/v1alpha1", "Job", {"metadata": {"name": "j"}, "spec": {
        "schedulerName": "volcano", "minAvailable": 2, "queue": "q", "maxRetry": 3, "ttlSecondsAfterFinished": 60,
        "priorityClassName": "high", "minSuccess": 1, "runningEstimate": "1h", "plugins": {"ssh": [], "env": []},
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}, {"exitCode": 3, "action": "AbortJob"}],
        "volumes": [{"mountPath": "/data", "volumeClaimName": "data"}],
        "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
        "tasks": [{"name": "w", "replicas": 2, "minAvailable": 1, "maxRetry": 1, "topologyPolicy": "best-effort",
                   "dependsOn": {"name": ["ps"], "iteration": "any"},
                   "policies": [{"events": ["PodFailed", "PodEvicted"], "action": "RestartTask", "timeout": "30s"}],
                   "partitionPolicy": {"totalPartitions": 2, "partitionSize": 1, "minPartitions": 1},
                   "template": POD_TEMPLATE}]},
     "status": {"state": {"phase": "Running"}, "minAvailable": 2, "taskStatusCount": {"w": {"phase": {"Running": 2}}},
                "conditions": [{"status": "Running", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
    ("scheduling.volcano.sh/v1beta1", "PodGroup", {"metadata": {"name": "g"}, "spec": {
        "minMember": 2, "minTaskMember": {"w": 2}, "queue": "q", "priorityClassName": "high",
        "minResources": {"cpu": "2", "nvidia.com/gpu": 2},
        "networkTopology": {"mode": "hard", "highestTierName": "rack"},
        "subGroupPolicy": [{"name": "w", "subGroupSize": 2, "minSubGroups": 1, "matchLabelKeys": ["k"],
                            "labelSelector": {"matchLabels": {"a": "b"}}}]},
     "status": {"phase": "Running", "running": 2, "conditions": [{"type": "Scheduled", "status": "True"}]}}),
    ("scheduling.volcano.sh/v1beta1", "Queue", {"metadata": {"name": "q"}, "spec": {
        "weight": 2, "capability": {"cpu": 8}, "deserved": {"cpu": 4}, "guarantee": {"resource": {"cpu": 2}},
        "reclaimable": False, "parent": "root", "priority": 1, "type": "x", "dequeueStrategy": "fifo",
        "extendClusters": [{"name": "c", "weight": 1, "capacity": {"cpu": 1}}],
        "affinity": {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["g"]}}},
     "status": {"state": "Open", "allocated": {"cpu": 1}, "reservation": {"nodes": ["n"], "resource": {"cpu": 1}}}}),
    ("kubeflow.org/v1", "PyTorchJob", {"metadata": {"name": "t"}, "spec": {
        "nprocPerNode": "auto", "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": POD_TEMPLATE,
                                                                  "restartPolicy": "OnFailure"}, **REPLICAS},
        "elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "rdzvBackend": "c10d", "rdzvConf": [{"key": "a", "value": "b"}]},
        "runPolicy": {"cleanPodPolicy": "None", "suspend": False,
                      "schedulingPolicy": {"minAvailable": 2, "queue": "q", "priorityClass": "high",
                                           "minResources": {"cpu": 1}}}},
     "status": {"conditions": [{"type": "Created"}], "replicaStatuses": {"Worker": {"active": 1}}}}),
    ("kubeflow.org/v2beta1", "MPIJob", {"metadata": {"name": "m"}, "spec": {
        "slotsPerWorker": 1, "runLauncherAsWorker": False, "mpiImplementation": "OpenMPI",
        "launcherCreationPolicy": "AtStartup", "sshAuthMountPath": "/root/.ssh",
        "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": POD_TEMPLATE}, **REPLICAS}}}),
    ("topology.volcano.sh/v1alpha1", "HyperNode", {"metadata": {"name": "s0"}, "spec": {
        "tier": 1, "tierName": "rack", "members": [
            {"type": "Node", "selector": {"exactMatch": {"name": "n0"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-"}}},
            {"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"r": "1"}}}}]},
     "status": {"nodeCount": 2}}),
]  # fmt: skip


@pytest.mark.parametrize(("api_version", "kind", "data"), VALID)
def test_every_field_of_the_kind_is_known(api_version: str, kind: str, data: dict[str, Any]) -> None:
    findings = check(api_version, kind, data)
    assert (findings.unknown, findings.invalid) == ([], [])


def test_wrong_types_and_values_are_named() -> None:
    findings = check("batch.volcano.sh/v1alpha1", "Job", {"metadata": {"name": "j", "labels": {"a": 1}}, "spec": {
        "minAvailable": -1, "networkTopology": {"mode": "medium"}, "tasks": [{"name": "w", "template": {"spec": {
            "containers": [{"name": "c", "image": 5, "ports": [{"containerPort": "80"}]}]}}}]}})  # fmt: skip
    assert [str(p) for p in findings.invalid] == [
        "metadata.labels.a: expected a string, got 1",
        "spec.minAvailable: -1 is out of range (expected 0 or more)",
        "spec.networkTopology.mode: 'medium' is not allowed (expected one of: hard, soft)",
        "spec.tasks[0].template.spec.containers[0].image: expected a string, got 5",
        "spec.tasks[0].template.spec.containers[0].ports[0].containerPort: expected an integer, got '80'",
    ]


def test_quantities_and_int_or_string_take_either() -> None:
    findings = check("v1", "Pod", {"metadata": {"name": "p"}, "spec": {"containers": [{
        "name": "c", "resources": {"requests": {"cpu": 0.5, "memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}},
        "readinessProbe": {"httpGet": {"port": "http"}}, "livenessProbe": {"httpGet": {"port": 8080}}}]}})  # fmt: skip
    assert (findings.unknown, findings.invalid) == ([], [])


def test_what_caldera_reads_beyond_the_types() -> None:
    findings = check("batch.volcano.sh/v1alpha1", "Job", {"metadata": {"name": "j"}, "spec": {
        "priorityClassName": "high", "queue": "q", "networkTopology": {"mode": "hard"}, "volumes": [],
        "tasks": [{"name": "w", "topologyPolicy": "single-numa-node", "template": {
            "spec": {"priorityClassName": "low", "containers": [{"name": "c"}]}}}]}})  # fmt: skip
    assert [t.path for t in findings.templates] == ["spec.tasks[0].template"]
    assert findings.templates[0].data["spec"]["priorityClassName"] == "low"
    assert findings.references == [
        Reference("spec.priorityClassName", "PriorityClass", "high"),
        Reference("spec.tasks[0].template.spec.priorityClassName", "PriorityClass", "low"),
    ]  # a Volcano Job's queue is cluster.model.volcano_admission's to check
    assert findings.unhonoured == ["spec.tasks[0].topologyPolicy"]  # empty volumes ask nothing
    group = check(
        "scheduling.volcano.sh/v1beta1",
        "PodGroup",
        {"metadata": {"name": "g"}, "spec": {"queue": "q", "priorityClassName": "p"}},
    )
    assert group.references == [
        Reference("spec.queue", "Queue", "q"),
        Reference("spec.priorityClassName", "PriorityClass", "p"),
    ]


def test_another_version_of_the_group_is_read_with_the_kinds_schema() -> None:
    schemas = Schemas.bundled()
    assert schemas.schema("apps/v1beta2", "Deployment") == schemas.schema("apps/v1", "Deployment")
    assert schemas.schema("scheduling.volcano.sh/v1alpha1", "Queue") == schemas.schema(
        "scheduling.volcano.sh/v1beta1", "Queue"
    )
    assert schemas.schema("kubeflow.org/v1", "MPIJob") != schemas.schema("kubeflow.org/v2beta1", "MPIJob")
    assert schemas.schema("example.com/v1", "Widget") is None


def test_objects_declaring_no_properties_take_anything() -> None:
    findings = check("kubeflow.org/v1", "TFJob", {"metadata": {"name": "t"}, "status": {"anything": {"at": "all"}}})
    assert (findings.unknown, findings.invalid) == ([], [])


@pytest.mark.parametrize(("name", "known", "guess"), [
    ("minAvaliable", ["minAvailable", "queue"], "minAvailable"),
    ("MINMEMBER", ["minMember"], "minMember"),
    ("requets", ["requests", "limits", "claims"], "requests"),
    ("zzz", ["requests", "limits"], None),
])  # fmt: skip
def test_nearest(name: str, known: list[str], guess: str | None) -> None:
    assert nearest(name, known) == guess


def test_without_a_near_name_a_short_list_of_known_fields_is_given() -> None:
    assert unknown_field("spec.zzz", "zzz", ["b", "a"]) == Problem("spec.zzz", "unknown field (expected one of: a, b)")
    assert unknown_field("spec.zzz", "zzz", [f"f{i}" for i in range(20)]) == Problem("spec.zzz", "unknown field")


@pytest.mark.parametrize("crd", sorted((ROOT / "deploy" / "crds").glob("*.yaml")), ids=lambda p: p.name)
def test_every_field_of_the_deployed_crds_is_known(crd: Path) -> None:
    """deploy/crds declares a subset of Volcano's fields; the manifest schemas must know them all."""
    doc = yaml.safe_load(crd.read_text())
    group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
    version = next(v for v in doc["spec"]["versions"] if v["storage"])
    schemas = Schemas.bundled()
    ours = schemas.schema(f"{group}/{version['name']}", kind)
    assert ours is not None

    def example(node: dict[str, Any]) -> Any:  # a value that has every declared property
        if "properties" in node:
            return {k: example(v) for k, v in node["properties"].items() if k not in ("apiVersion", "kind", "metadata")}
        return {}

    findings = schemas.check(example(version["schema"]["openAPIV3Schema"]), ours)
    assert findings.unknown == []
