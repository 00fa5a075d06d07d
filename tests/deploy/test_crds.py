"""deploy/crds: structural CRDs that declare Volcano's fields (PodGroup, Queue, HyperNode) and NodeShard's,
and whose schemas accept the example objects and refuse broken ones."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import jsonschema
import pytest

from tests.deploy.manifests import (
    Obj,
    crd_schema,
    crds,
    examples,
    label,
    strict,
    validate_custom,
)

# CRD name -> (group, version, kind, scope, field paths its schema must declare).
EXPECTED_CRDS = {
    "podgroups.scheduling.volcano.sh": (
        "scheduling.volcano.sh",
        "v1beta1",
        "PodGroup",
        "Namespaced",
        [
            "spec.minMember",
            "spec.minTaskMember",
            "spec.minResources",
            "spec.queue",
            "spec.priorityClassName",
            "spec.networkTopology.mode",
            "spec.networkTopology.highestTierAllowed",
            "spec.networkTopology.highestTierName",
            "status.phase",
            "status.conditions",
            "status.running",
            "status.succeeded",
            "status.failed",
        ],
    ),
    "queues.scheduling.volcano.sh": (
        "scheduling.volcano.sh",
        "v1beta1",
        "Queue",
        "Cluster",
        [
            "spec.weight",
            "spec.capability",
            "spec.deserved",
            "spec.guarantee.resource",
            "spec.reclaimable",
            "spec.parent",
            "spec.priority",
            "status.state",
            "status.allocated",
            "status.pending",
            "status.running",
            "status.inqueue",
            "status.unknown",
            "status.completed",
        ],
    ),
    "nodeshards.shard.volcano.sh": (
        "shard.volcano.sh",
        "v1alpha1",
        "NodeShard",
        "Cluster",
        [
            "spec.nodesDesired",
            "status.nodesInUse",
            "status.nodesToAdd",
            "status.nodesToRemove",
            "status.lastUpdateTime",
        ],
    ),
    "hypernodes.topology.volcano.sh": (
        "topology.volcano.sh",
        "v1alpha1",
        "HyperNode",
        "Cluster",
        ["spec.tier", "spec.tierName", "spec.members", "status.conditions", "status.nodeCount"],
    ),
}


def _structural_problems(schema: Obj, path: str) -> Iterator[str]:
    """Where a schema breaks the API server's structural-schema rules that matter here."""
    if "type" not in schema and not (
        schema.get("x-kubernetes-int-or-string") or schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        yield f"{path}: no type"
    if "anyOf" in schema and not schema.get("x-kubernetes-int-or-string"):
        yield f"{path}: anyOf outside an int-or-string"
    for name, sub in schema.get("properties", {}).items():
        yield from _structural_problems(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _structural_problems(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        yield from _structural_problems(schema["items"], f"{path}[]")


def _declares(schema: Obj, field_path: str) -> bool:
    node = schema
    for part in field_path.split("."):
        properties = node.get("properties", {})
        if part not in properties:
            return False
        node = properties[part]
    return True


@pytest.mark.parametrize("name", sorted(EXPECTED_CRDS))
def test_crd_declares_volcanos_api(name: str) -> None:
    group, version, kind, scope, fields = EXPECTED_CRDS[name]
    crd = next((c for c in crds() if c["metadata"]["name"] == name), None)
    assert crd is not None, f"no CRD {name} in deploy/crds"
    spec = crd["spec"]
    assert (spec["group"], spec["names"]["kind"], spec["scope"]) == (group, kind, scope)
    assert name == f"{spec['names']['plural']}.{group}", "a CRD's name must be <plural>.<group>"
    assert [v["name"] for v in spec["versions"] if v["storage"]] == [version]
    served = next(v for v in spec["versions"] if v["name"] == version)
    assert served["served"] and served["subresources"].get("status") == {}, f"{name}: status must be a subresource"
    schema = served["schema"]["openAPIV3Schema"]
    assert list(_structural_problems(schema, kind)) == []
    jsonschema.Draft7Validator.check_schema(strict(schema))
    missing = [f for f in fields if not _declares(schema, f)]
    assert missing == [], f"{name} does not declare {missing}"


def test_nodeshard_requires_nodes_desired() -> None:
    schema = crd_schema("shard.volcano.sh/v1alpha1", "NodeShard")
    assert schema["required"] == ["spec"] and schema["properties"]["spec"]["required"] == ["nodesDesired"]


def _custom_objects() -> list[Obj]:
    """Every custom object of the examples, and a NodeShard as Volcano's Go code writes one."""
    nodeshard = {
        "apiVersion": "shard.volcano.sh/v1alpha1",
        "kind": "NodeShard",
        "metadata": {"name": "volcano"},
        "spec": {"nodesDesired": None},
        "status": {
            "nodesInUse": ["n1"],
            "nodesToAdd": None,
            "nodesToRemove": [],
            "lastUpdateTime": "2026-01-01T00:00:00Z",
        },
    }
    custom = [o for o in examples() if o["apiVersion"].split("/")[0].endswith("volcano.sh") and o["kind"] != "Job"]
    return [*custom, nodeshard]


def test_custom_objects_validate_against_the_crds() -> None:
    objects = _custom_objects()
    assert {o["kind"] for o in objects} == {"Queue", "PodGroup", "NodeShard", "HyperNode"}
    for obj in objects:
        assert validate_custom(obj) == [], label(obj)


# Changes the CRDs must refuse, so the validation above is known to bite.
BAD_OBJECTS = [
    ("Queue", ["spec", "weight"], "two"),
    ("Queue", ["spec", "capability", "cpu"], "lots"),
    ("Queue", ["status", "pending"], "3"),
    ("PodGroup", ["spec", "minMember"], "4"),
    ("PodGroup", ["spec", "minTaskMember"], {"worker": "all"}),
    ("PodGroup", ["status", "conditions"], [{"type": "Unschedulable", "lastTransitionTime": 5}]),
    ("PodGroup", ["status", "nodes"], 3),
    ("NodeShard", ["spec", "nodesDesired"], "n1,n2"),
    ("NodeShard", ["spec"], {}),
    ("HyperNode", ["spec", "tier"], -1),
    ("HyperNode", ["spec", "members"], []),
    ("HyperNode", ["spec", "members"], [{"type": "Switch", "selector": {"exactMatch": {"name": "n1"}}}]),
    ("PodGroup", ["spec", "networkTopology", "mode"], "medium"),
]


@pytest.mark.parametrize(("kind", "path", "value"), BAD_OBJECTS, ids=str)
def test_crds_refuse_bad_objects(kind: str, path: list[str], value: object) -> None:
    obj = copy.deepcopy(next(o for o in _custom_objects() if o["kind"] == kind))
    node = obj
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    assert validate_custom(obj) != [], f"{kind} with {'.'.join(path)}={value!r} was accepted"
