"""The kinds caldera models, by API group and kind, and the unions of them the readers return."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from cluster.model.core import Namespace, Node, Pod, PriorityClass
from cluster.model.kubeflow_api import MPIJob, PyTorchJob, TFJob
from cluster.model.pod_controllers import BatchJob, Deployment, ReplicaSet, StatefulSet
from cluster.model.topology import HyperNode
from cluster.model.volcano import NodeShard, PodGroup, Queue
from cluster.model.volcano_job import Job

ClusterObject = Node | Pod | PodGroup | Queue | PriorityClass | NodeShard | HyperNode | Namespace
"""What the cluster itself holds and the schedulers see."""
Workload = Job | PyTorchJob | TFJob | MPIJob | Deployment | ReplicaSet | StatefulSet | BatchJob
"""What controllers turn into pods (and PodGroups): :func:`expand` does."""
KubeObject = ClusterObject | Workload
"""What a manifest may hold: cluster objects, and Volcano Jobs that :func:`expand` turns into them."""

KINDS: Mapping[tuple[str, str], type[KubeObject]] = MappingProxyType(
    {
        ("", "Node"): Node,
        ("", "Pod"): Pod,
        ("", "Namespace"): Namespace,
        ("scheduling.volcano.sh", "PodGroup"): PodGroup,
        ("scheduling.volcano.sh", "Queue"): Queue,
        ("scheduling.k8s.io", "PriorityClass"): PriorityClass,
        ("shard.volcano.sh", "NodeShard"): NodeShard,
        ("topology.volcano.sh", "HyperNode"): HyperNode,
        ("batch.volcano.sh", "Job"): Job,
        ("kubeflow.org", "PyTorchJob"): PyTorchJob,
        ("kubeflow.org", "TFJob"): TFJob,
        ("kubeflow.org", "MPIJob"): MPIJob,  # v1 (training operator) and v2beta1 (MPI operator)
        ("apps", "Deployment"): Deployment,
        ("apps", "ReplicaSet"): ReplicaSet,
        ("apps", "StatefulSet"): StatefulSet,
        ("batch", "Job"): BatchJob,
    }
)
"""The modelled kinds, by (API group, kind); the core group is ''. Any version of a group is read."""
