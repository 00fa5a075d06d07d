"""GPU sharing per card in the batch scheduler: the spec's scenarios GS-1…GS-7 (§4.3), through a real session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import pytest

from batch_scheduler.conf import ConfError
from cluster.model.core import Node, Pod
from cluster.model.devices import CARDS_ANNOTATION, VGPU_REGISTER, card_annotations, card_resource
from cluster.model.resources import Resources
from cluster.nodeview.profile import Placing
from tests.batch_scheduler.inputs import SCHEDULER, conf, podgroup, priority_class, record, session
from tests.builders import gpu_node, gpu_pod

GPUSHARE = {"volcano.sh/gpu-number": 2, "volcano.sh/gpu-memory": 32000}  # two cards of 16000
REGISTER = "GPU-a,10,16384,NVIDIA-A100,true,hami-core:GPU-b,10,16384,NVIDIA-A100,true,hami-core:"
VGPU = {"volcano.sh/vgpu-number": 20, "volcano.sh/vgpu-memory": 32768, "volcano.sh/vgpu-cores": 200}


def deviceshare(**arguments: Any) -> dict[str, Any]:
    return {"name": "deviceshare", "arguments": {f"deviceshare.{k}": v for k, v in arguments.items()}}


def pods(
    *specs: tuple[str, Mapping[str, Any]], node: str = "", annotations: Mapping[str, str] | None = None
) -> list[Pod]:
    """Pods created in this order (a second apart), each its own job."""
    out = []
    for i, (name, limits) in enumerate(specs):
        p = gpu_pod(name, limits=limits, scheduler=SCHEDULER, node=node, annotations=annotations)
        meta = msgspec.structs.replace(p.metadata, creation_timestamp=f"2026-01-01T00:00:{i:02d}Z")
        out.append(msgspec.structs.replace(p, metadata=meta))
    return out


def run(nodes: Sequence[Node], pending: Sequence[Pod], bound: Sequence[Pod] = (), *plugins: Any) -> Any:
    ssn = session(conf(["predicates", *plugins], actions="allocate"), nodes, [record(p) for p in (*bound, *pending)])
    ssn.run()
    return ssn


def cards(ssn: Any) -> dict[str, Resources]:
    return {t.name: t.cards for batch in ssn.commits for t in batch}


def card(i: int, amount: int, dim: str = "") -> Resources:
    return Resources({card_resource(i, dim): amount})


def test_gs1_gpushare_takes_the_lowest_card_that_fits() -> None:
    memory = "volcano.sh/gpu-memory"
    ssn = run(
        [gpu_node("n1", allocatable=GPUSHARE)],
        pods(("a", {memory: 10000}), ("b", {memory: 10000}), ("c", {memory: 6000}), ("d", {memory: 7000})),
    )
    assert cards(ssn) == {"a": card(0, 10000), "b": card(1, 10000), "c": card(0, 6000)}
    d = ssn.tasks["uid-d"]
    # 6000 left on card 1, none on card 0: 6000 is all the node has in total too
    assert d.node == "" and "1 Insufficient volcano.sh/gpu-memory" in (ssn.jobs[d.job].reason or "")
    a = ssn.tasks["uid-a"]
    notes = card_annotations(a.pod, "n1", (), a.cards, 1.5)
    assert notes["volcano.sh/gpu-index"] == "0" and notes[CARDS_ANNOTATION] == "0=10000"
    assert notes["volcano.sh/predicate-time"] == str(1_500_000_000)


def test_gs2_a_share_larger_than_any_card_fits_nowhere_though_the_node_has_the_memory() -> None:
    ssn = run([gpu_node("n1", allocatable=GPUSHARE)], pods(("big", {"volcano.sh/gpu-memory": 20000})))
    big = ssn.tasks["uid-big"]
    assert cards(ssn) == {} and big.node == "" and "no GPU card with room" in (ssn.jobs[big.job].reason or "")


def test_gs3_both_gpushare_flags_refuse_the_conf() -> None:
    with pytest.raises(ConfError, match="GPUSharingEnable and deviceshare.GPUNumberEnable are both true"):
        conf(["predicates", deviceshare(GPUSharingEnable="true", GPUNumberEnable="true")])
    with pytest.raises(ConfError, match="VGPUEnable with"):
        conf(["predicates", deviceshare(VGPUEnable="true", GPUNumberEnable="true")])
    with pytest.raises(ConfError, match="SchedulePolicy: 'tight'"):
        conf(["predicates", deviceshare(SchedulePolicy="tight")])


def test_gs3_an_unhealthy_card_does_not_exist() -> None:
    node = gpu_node("n1", allocatable=GPUSHARE, annotations={"volcano.sh/gpu-unhealthy-ids": "1"})
    ssn = run([node], pods(("a", {"volcano.sh/gpu-memory": 10000}), ("b", {"volcano.sh/gpu-memory": 10000})))
    assert cards(ssn) == {"a": card(0, 10000)}


def test_gs3_gpu_number_takes_idle_cards_only() -> None:
    four = {"volcano.sh/gpu-number": 4, "volcano.sh/gpu-memory": 64000}
    running = pods(("r", {"volcano.sh/gpu-number": 1}), node="n1", annotations={"volcano.sh/gpu-index": "2"})
    ssn = run([gpu_node("n1", allocatable=four)], pods(("four", {"volcano.sh/gpu-number": 4})), running)
    assert cards(ssn) == {}
    ssn = run([gpu_node("n1", allocatable=four)], pods(("three", {"volcano.sh/gpu-number": 3})), running)
    assert set(cards(ssn)["three"].names()) == {card_resource(i) for i in (0, 1, 3)}


def vgpu_node(bound: Sequence[Pod] = ()) -> Node:
    return gpu_node("n1", allocatable=VGPU, annotations={VGPU_REGISTER: REGISTER})


def test_gs4_vgpu_takes_the_highest_card_first_and_names_it_for_hami() -> None:
    ssn = run(
        [vgpu_node()],
        pods(("a", {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 8000, "volcano.sh/vgpu-cores": 50})),
    )
    a = ssn.tasks["uid-a"]
    assert a.cards == card(1, 8000) + card(1, 1, "slots") + card(1, 50, "cores")
    notes = card_annotations(a.pod, "n1", ssn.columns.card_ids[0], a.cards, 7.0)
    assert notes["volcano.sh/vgpu-ids-new"] == notes["volcano.sh/devices-to-allocate"] == "GPU-b,NVIDIA,8000,50:"
    assert (notes["volcano.sh/vgpu-node"], notes["volcano.sh/bind-phase"]) == ("n1", "allocating")


def holding(annotation: str) -> list[Pod]:
    return pods(("r", {"volcano.sh/vgpu-number": 1}), node="n1", annotations={CARDS_ANNOTATION: annotation})


def test_gs4_vgpu_fit_rules() -> None:
    after_a = holding("1=8000,1.slots=1,1.cores=50")  # the first pod of GS-4 on GPU-b
    two = pods(("two", {"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 9000}))
    assert cards(run([vgpu_node()], two, after_a)) == {}  # GPU-b has 8384 left
    exclusive = pods(("x", {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 100}))
    assert cards(run([vgpu_node()], exclusive, after_a))["x"].get(card_resource(0)) == 16384  # GPU-a: nothing on it
    whole = pods(("w", {"volcano.sh/vgpu-number": 1}))  # no memory: 100% of a card
    assert cards(run([vgpu_node()], whole, after_a)) == {"w": card(0, 16384) + card(0, 1, "slots")}
    both = holding("0=1,0.slots=1,1=1,1.slots=1")
    assert cards(run([vgpu_node()], whole, both)) == {}
    full_cores = holding("0=100,0.slots=1,0.cores=100,1=100,1.slots=1,1.cores=100")
    assert cards(run([vgpu_node()], pods(("z", {"volcano.sh/vgpu-memory": 100})), full_cores)) == {}


def scored(policy: str, weight: int) -> dict[str, float]:
    x = gpu_node("x", allocatable=VGPU, annotations={VGPU_REGISTER: "GPU-x1,10,16384,NVIDIA-A100,true,hami-core:"})
    y = gpu_node("y", allocatable=VGPU, annotations={VGPU_REGISTER: "GPU-y1,10,16384,NVIDIA-A100,true,hami-core:"})
    used = pods(("r", {"volcano.sh/vgpu-memory": 8000}), node="x", annotations={CARDS_ANNOTATION: "0=8000,0.slots=1"})
    pod = pods(("p", {"volcano.sh/vgpu-memory": 4000}))[0]
    ssn = session(
        conf(["predicates", deviceshare(SchedulePolicy=policy, ScheduleWeight=weight)]), [x, y], [record(used[0])]
    )
    plugin = next(p for tier in ssn.tiers.tiers for p in tier if type(p).__name__ == "DeviceSharePlugin")
    values = plugin.score(ssn.columns, Placing(pod, pod.request()), None)
    return dict(zip(ssn.columns.names, values.tolist()))


def test_gs5_the_vgpu_node_score_needs_a_weight() -> None:
    assert scored("binpack", 10) == {"x": 730.0, "y": 240.0}
    assert scored("spread", 10) == {"x": 0.0, "y": 1000.0}
    assert scored("binpack", 0) == {"x": 0.0, "y": 0.0}


@pytest.mark.parametrize(("policy", "expected"), [("binpack", 1), ("spread", 0), ("", 3), ("best-fit", 1)])
def test_gs6_the_policy_picks_the_card(policy: str, expected: int) -> None:
    register = "".join(f"GPU-{i},10,16384,NVIDIA-A100,true,hami-core:" for i in range(4))
    node = gpu_node("n1", allocatable=VGPU, annotations={VGPU_REGISTER: register})
    used = holding("1=4000,1.slots=1,3=4000,3.slots=1")
    ssn = run([node], pods(("p", {"volcano.sh/vgpu-memory": 2000})), used, deviceshare(SchedulePolicy=policy))
    assert cards(ssn)["p"].get(card_resource(expected)) == 2000


def test_gs7_a_gang_that_fails_takes_no_card_and_leaves_them_free() -> None:
    gang = [
        msgspec.structs.replace(
            p, metadata=msgspec.structs.replace(p.metadata, annotations={"scheduling.k8s.io/group-name": "g"})
        )
        for p in pods(*((f"g{i}", {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 100}) for i in range(3)))
    ]
    ssn = session(
        conf(["gang"], ["predicates"], actions="allocate"),
        [vgpu_node()],
        [record(p, group="default/g") for p in gang],
        podgroups=[podgroup("g", min_member=3)],
    )
    ssn.run()
    assert ssn.commits == [] and all(t.cards == Resources() for t in ssn.tasks.values())
    free = ssn.columns.allocated[[ssn.columns.resource_index[card_resource(i)] for i in (0, 1)], 0]
    assert free.tolist() == [0, 0]  # the trial placements gave their cards back
    later = run([vgpu_node()], pods(("later", {"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-cores": 100})))
    assert set(cards(later)["later"].names()) >= {card_resource(0), card_resource(1)}


def grouped(p: Pod, group: str, priority_class: str) -> Pod:
    meta = msgspec.structs.replace(
        p.metadata, annotations={**p.metadata.annotations, "scheduling.k8s.io/group-name": group}
    )
    return msgspec.structs.replace(
        p, metadata=meta, spec=msgspec.structs.replace(p.spec, priority_class_name=priority_class)
    )


def test_a_victim_frees_the_card_the_preemptor_needs_not_just_node_totals() -> None:
    """Volcano #4863/#5852: 12000 free on the node in all, no card with 12000; evicting either
    low-priority share frees a card whole enough. Without the card check nothing is evicted (the
    node totals already fit) and the share would straddle two cards."""
    memory = "volcano.sh/gpu-memory"
    low = [
        grouped(p, "low", "low")  # one job of minMember 1: gang lets one of its two go
        for p in (
            pods(("l0", {memory: 10000}), node="n1", annotations={"volcano.sh/gpu-index": "0"})
            + pods(("l1", {memory: 10000}), node="n1", annotations={"volcano.sh/gpu-index": "1"})
        )
    ]
    high = grouped(pods(("h", {memory: 12000}))[0], "high", "high")
    groups = [
        podgroup("low", priority_class="low", phase="Running"),
        podgroup("high", priority_class="high", phase="Inqueue"),
    ]
    ssn = session(
        conf(["priority", "gang", "conformance"], ["predicates", "proportion"], actions="enqueue, allocate, preempt"),
        [gpu_node("n1", allocatable=GPUSHARE)],
        [record(p, group=f"default/{p.metadata.annotations['scheduling.k8s.io/group-name']}") for p in (*low, high)],
        podgroups=groups,
        priority_classes=[priority_class("low", 1), priority_class("high", 100)],
    )
    assert ssn.columns.free()[ssn.columns.resource_index[memory], 0] == 12000  # the node totals fit already
    ssn.run()
    assert len(ssn.evictions) == 1 and ssn.evictions[0].name in ("l0", "l1")
    h = ssn.tasks["uid-h"]
    assert h.status.name == "PIPELINED" and h.node == "n1"


def test_fgd_picks_the_card_that_leaves_no_sliver() -> None:
    """The spec's FGD-4 through a session (deviceshare SchedulePolicy fgd): a node of two whole
    cards, 400 taken on card 0 by a running share; a 500 share would leave card 0 a useless 100
    sliver, so FGD takes card 1 where best-fit takes card 0."""
    from cluster.sim.pods import make_pod
    from cluster.sim.trace import GPU_MILLI

    whole = gpu_node("n1", allocatable={"nvidia.com/gpu": 2, GPU_MILLI: 2000})

    def share(name: str, milli: int, **kw: Any) -> Pod:
        return make_pod(
            name, requests={"cpu": "1", GPU_MILLI: str(milli)}, scheduler=SCHEDULER, uid=f"uid-{name}", **kw
        )

    running = share("r", 400, node="n1", phase="Running")
    running = msgspec.structs.replace(
        running, metadata=msgspec.structs.replace(running.metadata, annotations={CARDS_ANNOTATION: "0=400"})
    )
    for policy, expected in (("fgd", 1), ("best-fit", 0)):
        ssn = run([whole], [share("p", 500)], [running], deviceshare(SchedulePolicy=policy))
        assert cards(ssn) == {"p": card(expected, 500)}, policy


def test_fgd_scores_against_the_typical_pods_the_conf_gives() -> None:
    """FGD-4's node again: learned from the session's pods (shares of 400 and 500) FGD keeps card 0
    from a 100 sliver; told the workload is all 100-thousandth shares (deviceshare.FGDTypicalPods),
    a 100 left on card 0 is no fragment, so the tie goes to the first card."""
    from cluster.sim.pods import make_pod
    from cluster.sim.trace import GPU_MILLI

    whole = gpu_node("n1", allocatable={"nvidia.com/gpu": 2, GPU_MILLI: 2000})
    running = make_pod(
        "r", requests={"cpu": "1", GPU_MILLI: "400"}, scheduler=SCHEDULER, uid="uid-r", node="n1", phase="Running"
    )
    running = msgspec.structs.replace(
        running, metadata=msgspec.structs.replace(running.metadata, annotations={CARDS_ANNOTATION: "0=400"})
    )
    pending = make_pod("p", requests={"cpu": "1", GPU_MILLI: "500"}, scheduler=SCHEDULER, uid="uid-p")
    learned = run([whole], [pending], [running], deviceshare(SchedulePolicy="fgd"))
    assert cards(learned) == {"p": card(1, 500)}
    given = deviceshare(SchedulePolicy="fgd", FGDTypicalPods="cpu=1,gpus=1,milli=100,share=1")
    assert cards(run([whole], [pending], [running], given)) == {"p": card(0, 500)}


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        (
            {"SchedulePolicy": "binpack", "FGDWindow": "100"},
            "deviceshare.FGDWindow: set, but deviceshare.SchedulePolicy is 'binpack'",
        ),
        ({"SchedulePolicy": "fgd", "FGDWindow": "0"}, "deviceshare.FGDWindow: '0' (expected a number >= 1)"),
        ({"SchedulePolicy": "fgd", "FGDWindow": "2.5"}, "deviceshare.FGDWindow: '2.5' (expected a whole number"),
        (
            {"SchedulePolicy": "fgd", "FGDPopularityThreshold": "150"},
            "FGDPopularityThreshold: '150' (expected a percentage",
        ),
        (
            {"SchedulePolicy": "fgd", "FGDIncludeCPUPods": "maybe"},
            "FGDIncludeCPUPods: 'maybe' (expected true or false)",
        ),
        (
            {"SchedulePolicy": "fgd", "FGDTypicalPods": "cpu=4,gpus=2,milli=500,share=1"},
            "FGDTypicalPods[0]: a task asks for 2 shares",
        ),
        ({"SchedulePolicy": "fgd", "FGDTypicalPods": "cpu=4,share=1;cpu=1e40,share=1"}, "FGDTypicalPods[1].cpu"),
        (
            {"SchedulePolicy": "fgd", "FGDTypicalPods": "cpu=4,gpu=1,share=1"},
            "FGDTypicalPods[0]: 'gpu=1' (expected each of",
        ),
        ({"SchedulePolicy": "fgd", "FGDTypicalPods": "cpu=4,gpus=1,share=-1"}, "FGDTypicalPods[0].share: '-1'"),
        ({"SchedulePolicy": "fgd", "FGDTypicalPods": " ; "}, "FGDTypicalPods: ' ; ' (expected at least one pod"),
        ({"SchedulePolicy": "fgd", "FGDTypicalPods": "cpu=1,gpus=²,share=1"}, "FGDTypicalPods[0].gpus: '²'"),
        ({"SchedulePolicy": "fgd", "FGDTypicalPods": "cpu=1,milli=500,share=1"}, "FGDTypicalPods[0].milli: '500'"),
    ],
)
def test_bad_fgd_arguments_refuse_the_conf_naming_the_argument(arguments: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfError) as e:
        conf(["predicates", deviceshare(**arguments)])
    assert needle in str(e.value) and "\n" not in str(e.value)
