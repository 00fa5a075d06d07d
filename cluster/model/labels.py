"""Well-known label and annotation keys, in one place: Kubernetes', Volcano's and Kubeflow's.

Each is spelled as its owner spells it; where Volcano uses one key as both a label and an
annotation the name ends in ``_KEY``.
"""

from __future__ import annotations

# Kubernetes (scheduling.k8s.io): the PodGroup a pod belongs to.
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"

# Volcano's PodGroup controller: a lone pod's queue and minMember.
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
"""Volcano's queue admission by scheduling gate: the gate's name, and the pod annotation (``"true"``)
that opts in — the batch scheduler removes the gate once the pod's queue has room for it."""

# Nodes: a warm node (image pulled), preferred by the agent scheduler and kept by sharding.
WARMUP_LABEL = "node.volcano.sh/warmup"

# Volcano Job controller: what it writes on a Job's pods and PodGroup.
TASK_INDEX_KEY = "volcano.sh/task-index"
TASK_SPEC_KEY = "volcano.sh/task-spec"
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
QUEUE_NAME_KEY = "volcano.sh/queue-name"
JOB_VERSION_KEY = "volcano.sh/job-version"
TEMPLATE_UID_KEY = "volcano.sh/template-uid"
JOB_RETRY_COUNT_KEY = "volcano.sh/job-retry-count"
PARTITION_ID_KEY = "volcano.sh/partition-id"
NUMA_POLICY_KEY = "volcano.sh/numa-topology-policy"
INHERITED_PREFIX = "volcano.sh/"

# Volcano's scheduler: what it reads on pods, PodGroups and Queues.
PREEMPTABLE_KEY = "volcano.sh/preemptable"
COOLDOWN_TIME_KEY = "volcano.sh/cooldown-time"
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE_KEY = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE_KEY = "volcano.sh/jdb-max-unavailable"
TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"
NETWORK_TOPOLOGY_MODE_ANNOTATION = "volcano.sh/network-topology-mode"
NETWORK_TOPOLOGY_TIER_ANNOTATION = "volcano.sh/network-topology-highest-tier"

# Kubeflow's training operator: what it writes on the pods it makes.
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
