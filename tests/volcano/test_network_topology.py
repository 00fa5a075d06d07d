"""allocate_test.go TestAllocateWithNetWorkTopologies: its 25 cases, ported (Volcano master, ed72c7c).

The plugins as the Go test registers them: gang (job order, ready, pipelined, starving),
predicates, network-topology-aware (node order, HyperNode order, gradient); the allocate
action. Each case's HyperNodes: Volcano's ``HyperNodesMap`` when the case gives one (its
members: nodes by exact name, child HyperNodes by name; its tier names), else its
``HyperNodes`` node sets with the tiers of ``HyperNodesSetByTier`` — HyperNodes holding those
nodes by name, without parents, which is what the Go session builds from them. The
``JobAllocatedHyperNode`` annotation the rescheduling cases set is not read: caldera recovers
a job's domain from its running pods (as Volcano does after a restart), and in every case here
that is the annotated HyperNode. Pods are 2 cpu / 4G on nodes of 2 cpu: one pod fills a node.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from cluster.model.topology import NetworkTopologySpec
from cluster.model.volcano import PodGroup
from tests.volcano.builders import build_pod, build_pod_group, build_queue
from tests.volcano.harness import Case, Plugin, run_case
from tests.volcano.topology_clusters import hypernodes, nodes

TIERS = [
    [
        Plugin("gang", ("enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobStarving")),
        Plugin("predicates", ("enablePredicate",)),
        Plugin("network-topology-aware", ("enableNodeOrder", "enabledHyperNodeOrder", "enabledHyperNodeGradient")),
    ]
]

# Per case: name; podgroups (name, namespace, queue, minMember, phase, mode, highestTierAllowed or
# highestTierName); pods (namespace, name, node, phase, cpu, memory, group, labels, nodeSelector);
# nodes (name, cpu, memory, pods, labels); tiers (HyperNodesSetByTier); hmap (HyperNodesMap: tier,
# tier name, members); sets (HyperNodes); the expected binds.
CASES: list[dict[str, Any]] = [
    {
        "name": "soft network topology constrain, can allocate job when resources are enough",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 3, "phase": "Inqueue", "mode": "soft", "tier": 0}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 3,
        "minimal": True,
        "bind_map": {},
        "cluster": "C1",
    },
    {
        "name": "soft network topology constrain, can allocate job when minavailable < replicas",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 1, "phase": "Inqueue", "mode": "soft", "tier": 0}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 2,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "soft network topology constrain, two available hyperNodes, can allocate job to nodes with affinity",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 1, "phase": "Inqueue", "mode": "soft", "tier": 0}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": {"nodeRole": "master"},
            }
        ],
        "binds_num": 1,
        "minimal": False,
        "bind_map": {"c1/p1": "s1-n2"},
        "cluster": "C3",
    },
    {
        "name": "soft network topology constrain and tasks in job rescheduled, can allocate job when resources are enough",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 2, "phase": "Inqueue", "mode": "soft", "tier": 0}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "soft network topology constrain and tasks in job rescheduled, can allocate job when resources are enough and minavailable = replicas",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 3, "phase": "Inqueue", "mode": "soft", "tier": 0}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "soft network topology constrain and tasks in job rescheduled, can allocate job when cross highestTierAllowed tier and hyperNodesInfo has three tier",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 2, "phase": "Inqueue", "mode": "soft", "tier": 0}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s3-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s3-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C4",
    },
    {
        "name": "hard network topology constrain, can not allocate job when cross highestTierAllowed tier",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 3, "phase": "Inqueue", "mode": "hard", "tier": 1}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 0,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "hard network topology constrain, can allocate job when highestTierAllowed not reached",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 3, "phase": "Inqueue", "mode": "hard", "tier": 2}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 3,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "hard network topology constrain, can allocate job when multi hyperNodes are available",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 2, "phase": "Inqueue", "mode": "hard", "tier": 1}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 2,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "hard network topology constrain, can allocate job when minavailable < replicas",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 1, "phase": "Inqueue", "mode": "hard", "tier": 1}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 2,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "hard network topology constrain, two available hyperNodes, can allocate job to nodes with affinity",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 1, "phase": "Inqueue", "mode": "hard", "tier": 1}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": {"nodeRole": "master"},
            }
        ],
        "binds_num": 1,
        "minimal": False,
        "bind_map": {"c1/p1": "s1-n2"},
        "cluster": "C3",
    },
    {
        "name": "hard network topology constrain and tasks in job rescheduled, can allocate job when highestTierAllowed not reached",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 2, "phase": "Inqueue", "mode": "hard", "tier": 2}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "hard network topology constrain and tasks in job rescheduled, can allocate job when highestTierAllowed not reached and minavailable = replicas",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 3, "phase": "Inqueue", "mode": "hard", "tier": 2}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "hard network topology constrain and tasks in job rescheduled, can allocate job when highestTierAllowed not reached and hyperNodesInfo has three tier",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 2, "phase": "Inqueue", "mode": "hard", "tier": 2}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s3-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s3-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C4",
    },
    {
        "name": "hard network topology constrain and tasks in job rescheduled, can not allocate job when cross highestTierAllowed tier",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 2, "phase": "Inqueue", "mode": "hard", "tier": 1}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 0,
        "minimal": True,
        "bind_map": {},
        "cluster": "C2",
    },
    {
        "name": "hard network topology constrain and tasks in job rescheduled, can not allocate job when cross highestTierAllowed tier and hyperNodesInfo has three tier",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 2, "phase": "Inqueue", "mode": "hard", "tier": 1}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s3-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s3-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 0,
        "minimal": True,
        "bind_map": {},
        "cluster": "C4",
    },
    {
        "name": "hard network topology constrain and tasks in job rescheduled, can allocate job when LCAHyperNode is empty",
        "podgroups": [
            {"name": "pg1", "ns": "c1", "queue": "q1", "min": 2, "phase": "Inqueue", "mode": "hard", "tier": 2}
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C5",
    },
    {
        "name": "hard network topology constrain, can not allocate job when cross highestTierName tier",
        "podgroups": [
            {
                "name": "pg1",
                "ns": "c1",
                "queue": "q1",
                "min": 3,
                "phase": "Inqueue",
                "mode": "hard",
                "tier_name": "volcano.sh/task-spec",
            }
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 0,
        "minimal": True,
        "bind_map": {},
        "cluster": "C6",
    },
    {
        "name": "hard network topology constrain, can allocate job when the tier corresponding to highestTierName not reached",
        "podgroups": [
            {
                "name": "pg1",
                "ns": "c1",
                "queue": "q1",
                "min": 3,
                "phase": "Inqueue",
                "mode": "hard",
                "tier_name": "volcano.sh/job-spec",
            }
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 3,
        "minimal": True,
        "bind_map": {},
        "cluster": "C6",
    },
    {
        "name": "hard network topology constrain, can allocate job when multi hyperNodes are available",
        "podgroups": [
            {
                "name": "pg1",
                "ns": "c1",
                "queue": "q1",
                "min": 2,
                "phase": "Inqueue",
                "mode": "hard",
                "tier_name": "volcano.sh/task-spec",
            }
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 2,
        "minimal": True,
        "bind_map": {},
        "cluster": "C6",
    },
    {
        "name": "hard network topology constrain and task in job rescheduled, can allocate job when the tier corresponding to highestTierName not reached",
        "podgroups": [
            {
                "name": "pg1",
                "ns": "c1",
                "queue": "q1",
                "min": 2,
                "phase": "Inqueue",
                "mode": "hard",
                "tier_name": "volcano.sh/job-spec",
            }
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C6",
    },
    {
        "name": "hard network topology constrain and task in job rescheduled, can allocate job when the tier corresponding to highestTierName not reached and minavailable = replicas",
        "podgroups": [
            {
                "name": "pg1",
                "ns": "c1",
                "queue": "q1",
                "min": 3,
                "phase": "Inqueue",
                "mode": "hard",
                "tier_name": "volcano.sh/job-spec",
            }
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C6",
    },
    {
        "name": "hard network topology constrain and task in job rescheduled, can allocate job when the tier corresponding to highestTierName not reached and hyperNodesInfo has three tier",
        "podgroups": [
            {
                "name": "pg1",
                "ns": "c1",
                "queue": "q1",
                "min": 2,
                "phase": "Inqueue",
                "mode": "hard",
                "tier_name": "volcano.sh/job-spec",
            }
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C7",
    },
    {
        "name": "hard network topology constrain and tasks in job rescheduled, can not allocate job when cross the tier corresponding to highestTierName",
        "podgroups": [
            {
                "name": "pg1",
                "ns": "c1",
                "queue": "q1",
                "min": 2,
                "phase": "Inqueue",
                "mode": "hard",
                "tier_name": "volcano.sh/task-spec",
            }
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 0,
        "minimal": True,
        "bind_map": {},
        "cluster": "C6",
    },
    {
        "name": "hard network topology with highestTierName constrain and tasks in job rescheduled, can allocate job when here is no corresponding highestTierAllowed for highestTierName",
        "podgroups": [
            {
                "name": "pg1",
                "ns": "c1",
                "queue": "q1",
                "min": 2,
                "phase": "Inqueue",
                "mode": "hard",
                "tier_name": "volcano.sh/hypercluster",
            }
        ],
        "pods": [
            {
                "ns": "c1",
                "name": "p1",
                "node": "s0-n1",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "master"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p2",
                "node": "s0-n2",
                "phase": "Running",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
            {
                "ns": "c1",
                "name": "p3",
                "node": "",
                "phase": "Pending",
                "cpu": "2",
                "mem": "4G",
                "group": "pg1",
                "labels": {"volcano.sh/task-spec": "worker"},
                "selector": None,
            },
        ],
        "binds_num": 1,
        "minimal": True,
        "bind_map": {},
        "cluster": "C8",
    },
]


def _case(c: dict[str, Any]) -> Case:
    groups = []
    for g in c["podgroups"]:
        group = build_pod_group(g["name"], g["ns"], g["queue"], g["min"], None, g["phase"])
        topology = {"mode": g["mode"]}
        if "tier" in g:
            topology["highestTierAllowed"] = g["tier"]
        else:
            topology["highestTierName"] = g["tier_name"]
        groups.append(_with_topology(group, topology))
    return Case(
        name=c["name"],
        nodes=nodes(c["cluster"]),
        pods=[
            build_pod(
                p["ns"],
                p["name"],
                p["node"],
                p["phase"],
                {"cpu": p["cpu"], "memory": p["mem"]},
                p["group"],
                p["labels"],
                p["selector"],
            )
            for p in c["pods"]
        ],
        podgroups=groups,
        queues=[build_queue("q1", 1, None)],
        hypernodes=hypernodes(c["cluster"]),
        expect_bind_map=c["bind_map"],
        expect_binds_num=c["binds_num"],
        minimal_bind_check=c["minimal"],
    )


def _with_topology(group: PodGroup, topology: dict[str, Any]) -> PodGroup:
    spec = msgspec.convert(topology, NetworkTopologySpec)
    return msgspec.structs.replace(group, spec=msgspec.structs.replace(group.spec, network_topology=spec))


@pytest.mark.parametrize("c", CASES, ids=[c["name"] for c in CASES])
def test_allocate_with_network_topologies(c: dict[str, Any]) -> None:
    """allocate_test.go TestAllocateWithNetWorkTopologies."""
    run_case(_case(c), TIERS, ["allocate"])
