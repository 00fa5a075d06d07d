"""network-topology-aware: Volcano's arguments, and its HyperNode binpack score (NT-3's figures)."""

from __future__ import annotations

import pytest

from batch_scheduler.plugins.network_topology import NetworkTopologyArguments, NetworkTopologyPlugin
from tests.batch_scheduler.inputs import conf, podgroup, queue, session, task
from tests.batch_scheduler.plugins.common import plugin
from tests.builders import hypernode, node


def test_arguments_are_volcanos() -> None:
    args = NetworkTopologyArguments.load(
        "network-topology-aware",
        {
            "weight": "-3",  # negative: 1, as in Volcano
            "hypernode.binpack.cpu": "2",
            "hypernode.binpack.resources": "nvidia.com/gpu",
            "hypernode.binpack.resources.nvidia.com/gpu": "5",
            "hypernode.binpack.normal-pod.enable": "false",
            "hypernode.binpack.normal-pod.fading": "0.5",
        },
    )
    assert args.weight == 1
    assert dict(args.resource_weights) == {"cpu": 2, "memory": 1, "nvidia.com/gpu": 5}
    assert (args.normal_pod, args.fading) == (False, 0.5)
    with pytest.raises(ValueError, match="unknown argument 'hypernode.binpack.gpu'"):
        NetworkTopologyArguments.load("network-topology-aware", {"hypernode.binpack.gpu": "1"})


def test_a_conf_naming_the_plugin_loads_without_a_warning() -> None:
    assert not [w for w in conf(["network-topology-aware"]).warnings if "network-topology-aware" in w]


def test_hypernode_binpack_prefers_the_fuller_domain_and_counts_only_weighted_resources() -> None:
    # NT-3: a 2-cpu/4Gi pod on n0; a gang of two 4-cpu/8Gi pods scores hn0 (2+8)/16 = 0.625, hn1 0.5.
    nodes = [node(f"n{i}", cpu="4", memory="8Gi") for i in range(8)]
    topology = [
        hypernode("hn0", 1, nodes=[f"n{i}" for i in range(4)]),
        hypernode("hn1", 1, nodes=[f"n{i}" for i in range(4, 8)]),
    ]
    pods = [
        task("j-0", cpu="4", memory="8Gi", group="j"),
        task("j-1", cpu="4", memory="8Gi", group="j"),
        task("o", cpu="2", memory="4Gi", node="n0"),
    ]
    ssn = session(
        conf(["network-topology-aware"]),
        nodes,
        pods,
        podgroups=[podgroup("j", min_member=2, queue="q1", phase="Inqueue")],
        queues=[queue("q1")],
        hypernodes=topology,
    )
    p = plugin(ssn, NetworkTopologyPlugin)
    domains = [ssn.topology.domains["hn0"], ssn.topology.domains["hn1"]]
    job = ssn.jobs["default/j"]
    scores = p.hypernode_scores(job, job.pending(), domains)
    # cpu and memory alike: (2 + 8) / 16 and (4 + 16) / 32 for hn0; 8 / 16 and 16 / 32 for hn1.
    assert scores == {"hn0": pytest.approx(62.5), "hn1": pytest.approx(50.0)}
