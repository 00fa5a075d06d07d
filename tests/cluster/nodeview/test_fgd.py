"""Fragmentation and FGD, on the spec's cases (§4.3 FGD-1…6) and the authors' simulator's own tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from cluster.nodeview.cards import Cards, Task, least_sufficient, whole_cards
from cluster.nodeview.fgd import TypicalPod, Workload, cluster_fragment, fgd_scores, typical_pods


def cards(lefts: Sequence[Sequence[int]], *, cpu: Sequence[int] | None = None, model: str = "A") -> Cards:
    """Nodes whose cards have ``lefts`` thousandths left (and ``cpu`` milli left; ample by default)."""
    c = Cards(
        list(cpu or [1_000_000] * len(lefts)), [10**7] * len(lefts), [len(x) for x in lefts], [model] * len(lefts)
    )
    for i, left in enumerate(lefts):
        c.left[i, : len(left)] = left
    return c


def pods(*shapes: tuple[int, int, int, str, float]) -> tuple[TypicalPod, ...]:
    """Typical pods from (cpu, gpus, milli, model, share); model '' for any."""
    return tuple(
        TypicalPod(task=Task(cpu=c, gpus=g, milli=m, models=frozenset([t]) if t else frozenset()), share=p)
        for c, g, m, t, p in shapes
    )


HALF_AND_WHOLE = pods((1000, 1, 1000, "", 0.5), (1000, 1, 500, "", 0.5))


@pytest.mark.parametrize(
    ("left", "expected"),
    [([1000, 1000], 0), ([500, 1000], 250), ([500, 500], 500), ([0, 1000], 0), ([0, 500], 250)],
)
def test_fgd1_fragment_of_a_node_for_half_and_whole_gpu_tasks(left: list[int], expected: float) -> None:
    c = cards([left])
    assert cluster_fragment(c, Workload(HALF_AND_WHOLE, c)) == pytest.approx(expected)


def test_fgd1_every_free_gpu_is_a_fragment_for_cpu_only_pods() -> None:
    c = cards([[1000, 300]])
    assert cluster_fragment(c, Workload(pods((1000, 0, 0, "", 1.0)), c)) == pytest.approx(1300)


def test_fgd2_keeps_whole_gpus_whole() -> None:
    c = cards([[500, 500], [1000, 0]])
    scores, card = fgd_scores(c, Task(cpu=1000, gpus=1, milli=500), np.arange(2), Workload(HALF_AND_WHOLE, c))
    assert scores.tolist() == [56, 43] and card[0] == 0  # A, GPU 0: Δ +250 against −250


def test_fgd3_does_not_strand_a_gpu_behind_cpu() -> None:
    c = Cards([10_000, 40_000], [10**6, 10**6], [1, 1], ["A", "A"])
    workload = Workload(pods((8000, 1, 1000, "", 1.0)), c)
    scores, _ = fgd_scores(c, Task(cpu=4000), np.arange(2), workload)
    assert scores.tolist() == [26, 50]  # A would keep 6 cpus, too few for the 8-cpu GPU pod: Δ −1000


def test_fgd4_a_share_takes_the_card_where_fragmentation_descends_most() -> None:
    c = cards([[600, 1000]])
    scores, card = fgd_scores(
        c, Task(cpu=1000, gpus=1, milli=500), np.arange(1), Workload(pods((1, 1, 500, "", 1.0)), c)
    )
    assert card.tolist() == [1] and scores.tolist() == [50]  # GPU 0 would leave a useless 100 sliver: Δ −100


def test_fgd5_whole_gpus_go_to_the_first_free_cards_and_sub_takes_the_least_sufficient() -> None:
    left = np.asarray([1000, 1000, 300, 1000])
    task = Task(cpu=1000, gpus=2, milli=1000)
    assert whole_cards(left, 2) == (0, 1)
    assert least_sufficient(left, task) == (0, 1)  # stable: ties to the lower index
    assert least_sufficient(np.asarray([700, 400, 900, 400]), Task(cpu=1, gpus=1, milli=400)) == (1,)


def test_score_is_50_without_change_and_73_for_a_whole_gpu_less_fragment() -> None:
    c = cards([[1000], [1000]])
    workload = Workload(pods((1000, 0, 0, "", 1.0)), c)  # cpu pods: every free thousandth is fragment
    scores, _ = fgd_scores(c, Task(cpu=1000, gpus=1, milli=1000), np.arange(2), workload)
    assert scores.tolist() == [73, 73]
    scores, _ = fgd_scores(c, Task(cpu=1000), np.arange(2), workload)
    assert scores.tolist() == [50, 50]


def test_fgd6_typical_pods_stop_at_the_threshold_and_renormalise() -> None:
    tasks = (
        [Task(cpu=4000, gpus=1, milli=1000)] * 60
        + [Task(cpu=2000, gpus=1, milli=500)] * 30
        + [Task(cpu=1000)] * 6
        + [Task(cpu=32000, gpus=8, milli=1000)] * 4
    )
    typical = typical_pods(tasks, threshold=95, step=1)
    assert [(p.task.gpus, p.task.milli) for p in typical] == [(1, 1000), (1, 500), (0, 0)]
    assert [p.share for p in typical] == pytest.approx([0.625, 0.3125, 0.0625])
    assert len(typical_pods(tasks, threshold=95, step=10)) == 4  # the Go default step overshoots
    assert [p.task.gpus for p in typical_pods(tasks, threshold=95, include_cpu=False)] == [1, 1]  # 90 of 94


def test_typical_pods_ignore_memory_and_refuse_a_bad_threshold() -> None:
    typical = typical_pods([Task(cpu=1000, memory=1), Task(cpu=1000, memory=2)])
    assert len(typical) == 1 and typical[0].share == 1.0
    with pytest.raises(ValueError, match="popularityThreshold 0"):
        typical_pods([Task(cpu=1)], threshold=0)


# The simulator's pkg/utils/frag_test.go: its typical pods (shares as given, not renormalised).
SIMULATOR_TYPICAL = pods(
    (6000, 1, 465, "", 0.0933),
    (8000, 1, 440, "2080", 0.0915),
    (8000, 1, 475, "T4", 0.0876),
    (8000, 1, 440, "P100", 0.0872),
    (2000, 1, 465, "", 0.0868),
    (12000, 1, 900, "", 0.0865),
    (4000, 1, 900, "", 0.0843),
    (16000, 1, 678, "T4", 0.0836),
    (8000, 1, 500, "", 0.0829),
    (6000, 1, 511, "", 0.0811),
    (14000, 2, 1000, "2080", 0.0054),
    (4000, 1, 1000, "2080", 0.0043),
    (32000, 2, 1000, "T4", 0.0043),
    (16000, 1, 1000, "V100M16", 0.0040),
    (64000, 2, 1000, "", 0.0040),
    (10000, 2, 1000, "", 0.0040),
    (11400, 1, 1000, "T4", 0.0036),
    (16000, 1, 1000, "T4", 0.0036),
    (4000, 2, 1000, "", 0.0036),
    (14000, 2, 1000, "V100M16", 0.0036),
    (8000, 4, 1000, "", 0.0036),
    (16000, 2, 1000, "", 0.0032),
    (2000, 1, 1000, "T4", 0.0032),
    (6000, 1, 1000, "", 0.0032),
    (4000, 1, 1000, "", 0.0032),
    (5000, 1, 1000, "", 0.0032),
    (32000, 4, 1000, "V100M16", 0.0032),
    (32000, 2, 1000, "", 0.0032),
    (24000, 8, 1000, "2080", 0.0032),
    (40000, 4, 1000, "", 0.0029),
    (32000, 8, 1000, "", 0.0029),
    (32000, 1, 1000, "T4", 0.0029),
    (16000, 1, 1000, "", 0.0025),
    (7000, 1, 1000, "V100M16", 0.0025),
    (24000, 1, 1000, "T4", 0.0025),
)


@pytest.mark.parametrize(
    ("left", "cpu", "expected"),
    [
        ([200, 1000, 1000, 500], 1000, 2566.62),  # 4x1080_used
        ([1000] * 4, 1000, 3802.40),  # 4x1080_full
        ([1000] * 8, 1000, 7604.80),  # 8x1080_full
    ],
)
def test_simulator_node_fragment_on_1080_nodes(left: list[int], cpu: int, expected: float) -> None:
    c = cards([left], cpu=[cpu], model="1080")
    assert cluster_fragment(c, Workload(SIMULATOR_TYPICAL, c)) == pytest.approx(expected, abs=0.01)


def test_simulator_node_fragment_when_the_node_lacks_cpu() -> None:
    c = cards([[200, 1000, 1000, 500]], cpu=[1000], model="1080")
    assert cluster_fragment(c, Workload(SIMULATOR_TYPICAL[:1], c)) == pytest.approx(251.91, abs=0.01)


WITH_NON_GPU = pods(
    (15700, 1, 1000, "", 0.2869),
    (11900, 1, 1000, "", 0.1893),
    (11400, 1, 1000, "", 0.1227),
    (1000, 0, 0, "", 0.0736),
    (18710, 1, 1000, "", 0.0485),
    (8200, 1, 1000, "", 0.0379),
    (16400, 1, 1000, "", 0.0331),
    (9810, 1, 1000, "", 0.0197),
    (15200, 1, 1000, "", 0.0187),
    (11200, 1, 1000, "", 0.0181),
    (14200, 1, 1000, "", 0.0176),
    (12000, 0, 0, "", 0.0165),
    (14900, 1, 1000, "", 0.0139),
    (60200, 4, 1000, "", 0.0123),
    (64200, 8, 1000, "", 0.0107),
    (32200, 4, 1000, "", 0.0101),
    (17400, 2, 1000, "", 0.0091),
    (30200, 2, 1000, "", 0.0069),
    (16000, 1, 1000, "", 0.0064),
    (15000, 1, 1000, "", 0.0059),
    (64000, 8, 1000, "", 0.0053),
    (15000, 0, 0, "", 0.0053),
    (11910, 1, 1000, "", 0.0053),
    (120200, 8, 1000, "", 0.0048),
    (11300, 1, 1000, "", 0.0037),
    (30000, 2, 1000, "", 0.0032),
    (9800, 1, 1000, "", 0.0032),
    (8000, 1, 1000, "", 0.0032),
    (2000, 1, 1000, "", 0.0027),
    (2000, 1, 80, "", 0.0027),
    (1000, 1, 1000, "", 0.0027),
)


@pytest.mark.parametrize(
    ("left", "cpu", "expected"),
    [
        ([1000] * 8, 64000, 887.20),  # 8xP100_empty
        ([1000] * 4 + [0] * 4, 32000, 554.4),  # 8xP100_halved
        ([1000] * 4 + [0] * 4, 0, 4000),  # 8xP100_nocpu
    ],
)
def test_simulator_node_fragment_with_cpu_pods_in_the_workload(left: list[int], cpu: int, expected: float) -> None:
    c = cards([left], cpu=[cpu], model="P100")
    assert cluster_fragment(c, Workload(WITH_NON_GPU, c)) == pytest.approx(expected, abs=0.01)


def test_a_model_the_class_cannot_use_makes_every_free_thousandth_a_fragment() -> None:
    c = Cards([64000, 64000], [10**6] * 2, [2, 2], ["T4", "V100M16"])
    workload = Workload(pods((1000, 1, 500, "T4", 1.0)), c)
    assert cluster_fragment(c, workload) == pytest.approx(2000)  # the T4 node: none; the V100 node: all
