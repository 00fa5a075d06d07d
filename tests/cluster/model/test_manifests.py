"""Loading ordinary Kubernetes YAML: modelled kinds decode, others are skipped, errors are one clear line."""

from __future__ import annotations

import textwrap

import pytest

from cluster.model.core import Namespace, Node, Pod, PriorityClass
from cluster.model.kinds import KINDS
from cluster.model.kubeflow_api import MPIJob, PyTorchJob, TFJob
from cluster.model.manifests import ManifestError, decode_object, load_manifests
from cluster.model.pod_controllers import BatchJob, Deployment, ReplicaSet, StatefulSet
from cluster.model.resources import GPU
from cluster.model.topology import HyperNode
from cluster.model.volcano import NodeShard, PodGroup, Queue
from cluster.model.volcano_job import Job

CLUSTER = """\
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels: {nvidia.com/gpu.product: H100}
  creationTimestamp: 2025-01-07T10:00:00Z
spec:
  taints:
  - {key: nvidia.com/gpu, effect: NoSchedule}
status:
  capacity: {cpu: 96, memory: 1Ti, nvidia.com/gpu: 8}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec:
  weight: 2
  capability: {nvidia.com/gpu: 64}
---
# a comment-only document is empty
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: trainer, namespace: team-a}
spec: {minMember: 2, queue: research}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web}
---
apiVersion: v1
kind: Pod
metadata:
  name: trainer-0
  namespace: team-a
  labels:
  annotations: {scheduling.k8s.io/group-name: trainer}
  creationTimestamp: null
spec:
  schedulerName: volcano
  tolerations:
  containers:
  - name: main
    image: pytorch
    resources:
      limits: {cpu: 8, memory: 64Gi, nvidia.com/gpu: 8}
status: {}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: shard.volcano.sh/v1alpha1
kind: NodeShard
metadata: {name: volcano}
spec: {nodesDesired: [gpu-1]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
"""


def test_loads_a_cluster_and_skips_what_it_does_not_model() -> None:
    objects, skipped = load_manifests(CLUSTER)
    assert [type(o) for o in objects] == [Node, Queue, PodGroup, Pod, PriorityClass, NodeShard]
    assert skipped == ["ConfigMap", "Service"]
    node, queue, group, pod, pc, shard = objects
    assert isinstance(node, Node) and node.allocatable_resources() == {
        "cpu": 96_000,
        "memory": 2**40,
        GPU: 8,
        "pods": 110,
    }
    assert node.metadata.creation_timestamp == "2025-01-07T10:00:00Z"
    assert isinstance(queue, Queue) and queue.capability_resources() == {GPU: 64}
    assert isinstance(group, PodGroup) and group.spec.min_member == 2
    assert isinstance(pod, Pod) and pod.group_name == "trainer" and pod.labels == {} and pod.spec.tolerations == []
    assert pod.request() == {"cpu": 8000, "memory": 64 * 2**30, GPU: 8, "pods": 1}
    assert isinstance(pc, PriorityClass) and pc.value == 1000
    assert isinstance(shard, NodeShard) and shard.spec.nodes_desired == ["gpu-1"]


def test_empty_text() -> None:
    assert load_manifests("") == ([], [])
    assert load_manifests("---\n---\n") == ([], [])


def test_list_items_are_expanded() -> None:
    text = textwrap.dedent("""\
        apiVersion: v1
        kind: List
        items:
        - {apiVersion: v1, kind: Node, metadata: {name: a}}
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
        - {apiVersion: v1, kind: Node, metadata: {name: b}}
        """)
    objects, skipped = load_manifests(text)
    assert [o.metadata.name for o in objects] == ["a", "b"] and skipped == ["ConfigMap"]


def test_bad_quantity_in_a_pod_names_document_field_and_value() -> None:
    text = CLUSTER.replace("memory: 64Gi", "memory: 64GB")
    with pytest.raises(ManifestError) as err:
        load_manifests(text)
    assert str(err.value).startswith(
        "document 5 (Pod trainer-0): spec.containers[0].resources.limits.memory: invalid quantity '64GB' (expected "
    )
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: 1.2.3}}",
         "document 0 (Node n): status.allocatable.cpu: invalid quantity '1.2.3' (expected "),
        ("apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: pg}\nspec: {minMember: x}",
         "document 0 (PodGroup pg): spec.minMember: Expected `int`, got `str`"),
        ("apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: pg}\nspec: {minResources: {cpu: -1}}",
         "document 0 (PodGroup pg): spec.minResources.cpu: quantity -1 must not be negative"),
        ("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: {capability: {cpu: lots}}",
         "document 0 (Queue q): spec.capability.cpu: invalid quantity 'lots'"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}",
         "document 0 (Pod <no name>): metadata: Object missing required field `name`"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: {name: c}}",
         "document 0 (Pod p): spec.containers: Expected `array`, got `object`"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: [1]", "document 0 (Pod p): spec: Expected `object`, got `array`"),
        ("- a\n- b", "document 0: expected a Kubernetes object (a mapping with apiVersion and kind), got list"),
        ("apiVersion: v1\nmetadata: {name: p}", "document 0: kind: missing or not a string"),
        ("kind: Pod\nmetadata: {name: p}", "document 0: apiVersion: missing or not a string"),
    ],
)  # fmt: skip
def test_errors_are_one_line_with_document_object_and_field(document: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        load_manifests(document)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_document_index_counts_every_document() -> None:
    text = "---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Node\nmetadata: {name: 7}\n"
    with pytest.raises(
        ManifestError, match=r"^document 2 \(Node <no name>\): metadata\.name: Expected `str`, got `int`"
    ):
        load_manifests(text)


def test_invalid_yaml_is_one_line() -> None:
    with pytest.raises(ManifestError) as err:
        load_manifests("kind: Pod\nmetadata: {name: [unclosed\n")
    assert str(err.value).startswith("invalid YAML: ") and "\n" not in str(err.value)


def test_decode_object() -> None:
    assert decode_object({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}}) is None
    assert decode_object({"apiVersion": "v1", "kind": "Queue", "metadata": {"name": "q"}}) is None  # wrong group
    q = decode_object({"apiVersion": "scheduling.volcano.sh/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}})
    assert isinstance(q, Queue)
    with pytest.raises(
        ManifestError, match=r"^document 4 \(Pod p\): spec\.containers\[0\]\.resources\.requests\.cpu: "
    ):
        decode_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1 core"}}}]}}, index=4)  # fmt: skip


def test_kinds() -> None:
    assert KINDS[("", "Pod")] is Pod and KINDS[("scheduling.volcano.sh", "PodGroup")] is PodGroup
    assert set(KINDS.values()) == {
        Node,
        Pod,
        PodGroup,
        Queue,
        PriorityClass,
        NodeShard,
        HyperNode,
        Namespace,
        Job,
        PyTorchJob,
        TFJob,
        MPIJob,
        Deployment,
        ReplicaSet,
        StatefulSet,
        BatchJob,
    }
    assert KINDS[("batch", "Job")] is BatchJob and KINDS[("batch.volcano.sh", "Job")] is Job
