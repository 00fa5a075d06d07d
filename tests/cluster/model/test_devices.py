"""A node's GPUs as devices: HAMi's register annotation, Volcano's gpushare resources, whole cards."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from cluster.model.core import Node, Pod
from cluster.model.devices import (
    GPU_UNHEALTHY,
    VGPU_REGISTER,
    CardRequest,
    GpuDemand,
    GpuDevice,
    Sharing,
    node_devices,
    pod_gpu_demand,
)


def node(allocatable: dict[str, Any], annotations: dict[str, str] | None = None) -> Node:
    body = {"metadata": {"name": "n", "annotations": annotations or {}}, "status": {"allocatable": allocatable}}
    return msgspec.convert(body, Node)


VGPU = {"volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-memory": "160000", "volcano.sh/vgpu-cores": "200"}
REGISTER = "GPU-a,10,81920,NVIDIA-A100,true,hami-core:GPU-b,10,81920,NVIDIA-A100,false,hami-core:"


def test_hami_cards_come_from_the_register_annotation_in_order() -> None:
    cards, problems = node_devices(node(VGPU, {VGPU_REGISTER: REGISTER}))
    assert problems == []
    assert cards == [
        GpuDevice(index=0, sharing=Sharing.VGPU, memory=81920, split=10, uuid="GPU-a", type="NVIDIA-A100", mode="hami-core"),
        GpuDevice(
            index=1, sharing=Sharing.VGPU, memory=81920, split=10, uuid="GPU-b", type="NVIDIA-A100", healthy=False,
            mode="hami-core",
        ),
    ]  # fmt: skip


def test_without_the_vgpu_resources_the_register_gives_no_cards() -> None:
    """As Volcano: the annotation alone is not enough (a node whose device plugin is gone)."""
    assert node_devices(node({"volcano.sh/vgpu-number": "20"}, {VGPU_REGISTER: REGISTER})) == ([], [])


@pytest.mark.parametrize(
    ("register", "says"),
    [
        ("GPU-a,10,81920,NVIDIA", "has 4 fields (expected UUID,splitCount,memoryMiB,type,health,mode)"),
        ("GPU-a,ten,81920,NVIDIA,true,hami-core", "splitCount and memoryMiB must be whole numbers"),
        ("GPU-a,10,81920,NVIDIA,true,magic", "mode one of hami-core, mig"),
    ],
)
def test_a_malformed_register_is_one_problem_and_no_card(register: str, says: str) -> None:
    cards, [problem] = node_devices(node(VGPU, {VGPU_REGISTER: f"GPU-z,2,1000,NVIDIA,true,mig:{register}"}))
    assert cards == []  # nothing half-read
    assert problem.path == f"metadata.annotations.{VGPU_REGISTER}" and says in problem.problem


def test_gpushare_splits_the_memory_evenly_and_leaves_out_unhealthy_cards() -> None:
    cards, problems = node_devices(
        node({"volcano.sh/gpu-number": "4", "volcano.sh/gpu-memory": "65537"}, {GPU_UNHEALTHY: "1, 3"})
    )
    assert problems == [] and [(c.index, c.memory, c.split) for c in cards] == [(0, 16384, None), (2, 16384, None)]
    _, [bad] = node_devices(node({"volcano.sh/gpu-number": "4", "volcano.sh/gpu-memory": "64"}, {GPU_UNHEALTHY: "x"}))
    assert bad.path == f"metadata.annotations.{GPU_UNHEALTHY}" and "card indexes" in bad.problem


def test_whole_cards_are_one_pod_each_and_a_node_without_gpus_has_none() -> None:
    cards, _ = node_devices(node({"nvidia.com/gpu": "8"}))
    assert [c.index for c in cards] == list(range(8)) and {c.split for c in cards} == {1}
    assert node_devices(node({"cpu": "8"})) == ([], [])


def pod(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None) -> Pod:
    def container(i: int, limits: dict[str, Any]) -> dict[str, Any]:
        requests = limits.pop("requests", {})
        return {"name": f"c{i}", "resources": {"limits": limits, "requests": requests}}

    body = {
        "containers": [container(i, dict(c)) for i, c in enumerate(containers)],
        "initContainers": [container(i, dict(c)) for i, c in enumerate(init or [])],
    }
    return msgspec.convert({"metadata": {"name": "p"}, "spec": body}, Pod)


def test_a_vgpu_pod_asks_per_container_cards_memory_and_cores() -> None:
    demand = pod_gpu_demand(
        pod(
            {"volcano.sh/vgpu-number": "2", "volcano.sh/vgpu-memory": "3000", "volcano.sh/vgpu-cores": "30"},
            {"volcano.sh/vgpu-memory": "1024"},  # one card when only memory is given
            {"volcano.sh/vgpu-number": "1"},  # neither memory nor percentage: the whole card's memory
            {"cpu": "1"},  # no GPU
        )
    )
    assert demand == GpuDemand(
        sharing=Sharing.VGPU,
        cards=[
            CardRequest(count=2, memory=3000, cores=30),
            CardRequest(count=1, memory=1024),
            CardRequest(count=1, percentage=100),
        ],
    )


def test_gpushare_counts_limits_and_an_init_container_that_asks_more() -> None:
    assert pod_gpu_demand(pod({"volcano.sh/gpu-memory": "1024"}, {"volcano.sh/gpu-memory": "1024"})) == GpuDemand(
        sharing=Sharing.GPUSHARE, memory=2048
    )
    demand = pod_gpu_demand(pod({"volcano.sh/gpu-memory": "1024"}, init=[{"volcano.sh/gpu-memory": "4096"}]))
    assert demand is not None and demand.memory == 4096
    assert pod_gpu_demand(pod({"nvidia.com/gpu": "8"})) == GpuDemand(sharing=Sharing.WHOLE, count=8)
    assert pod_gpu_demand(pod({"cpu": "2"})) is None
