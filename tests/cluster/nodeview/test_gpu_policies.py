"""GPU cards per node and the placement policies: what fits, which node and which card each policy takes."""

from __future__ import annotations

import numpy as np
import pytest

from cluster.nodeview.cards import Cards, Task, best_card, random_card, worst_card
from cluster.nodeview.fgd import TypicalPod, Workload
from cluster.nodeview.gpu_policies import best_fit_scores, packing_scores, policies


def cards(*lefts: list[int], cpu: int = 96_000, model: str = "T4") -> Cards:
    c = Cards([cpu] * len(lefts), [10**6] * len(lefts), [len(x) for x in lefts], [model] * len(lefts))
    for i, left in enumerate(lefts):
        c.left[i, : len(left)] = left
    return c


SHARE = Task(cpu=1000, gpus=1, milli=400)
RNG = np.random.default_rng(0)


def test_a_task_is_none_whole_cards_or_one_share() -> None:
    assert Task(cpu=1, gpus=1, milli=300).shared and not Task(cpu=1, gpus=2, milli=1000).shared
    for bad in (
        {"gpus": 2, "milli": 500},
        {"gpus": 1, "milli": 0},
        {"gpus": 0, "milli": 10},
        {"gpus": 1, "milli": 1001},
    ):
        with pytest.raises(ValueError, match="a task asks for"):
            Task(cpu=1, **bad)


def test_fits_needs_cpu_memory_model_and_enough_cards_with_room() -> None:
    c = Cards([4000, 4000, 4000, 500], [1024, 1024, 100, 1024], [2, 2, 2, 2], ["T4", "V100", "T4", "T4"])
    c.left[0] = [300, 1000]
    task = Task(cpu=1000, memory=512, gpus=1, milli=400, models=frozenset({"T4"}))
    assert c.fits(task).tolist() == [True, False, False, False]  # V100; memory; cpu
    assert c.fits(Task(cpu=1000, gpus=2, milli=1000)).tolist() == [False, True, True, False]  # card 0 is partly used
    assert Cards([1000], [1], [0], [""]).fits(Task(cpu=1, gpus=1, milli=1)).tolist() == [False]


def test_take_refuses_a_card_without_room_and_changes_nothing() -> None:
    c = cards([300, 1000])
    with pytest.raises(ValueError, match="cannot host"):
        c.take(0, (0,), SHARE)
    assert c.left[0].tolist() == [300, 1000] and c.cpu[0] == 96_000
    c.take(0, (1,), SHARE)
    assert c.left[0].tolist() == [300, 600] and c.cpu[0] == 95_000 and c.free_milli() == 900


def test_card_picks_tightest_roomiest_and_any() -> None:
    left = np.asarray([300, 500, 1000, 500])
    assert best_card(left, 400) == 1 and worst_card(left, 400) == 2
    assert best_card(left, 1001) == worst_card(left, 1001) == random_card(left, 1001, RNG) == -1
    assert {random_card(left, 400, np.random.default_rng(s)) for s in range(40)} == {1, 2, 3}


@pytest.mark.parametrize(
    ("left", "task", "expected"),
    [  # the simulator's gpu_packing_score_test.go
        ([200, 1000, 1000, 500], Task(cpu=100, gpus=2, milli=1000), 48),  # free cards of a used node
        ([1000] * 4, Task(cpu=100, gpus=2, milli=1000), 29),  # an idle 4-GPU node
        ([1000] * 8, Task(cpu=100, gpus=2, milli=1000), 25),  # an idle 8-GPU node
        ([200, 1000, 1000, 500], Task(cpu=100, gpus=1, milli=200), 98),  # the 200 card, full after: 100 − 20/10
    ],
)
def test_gpu_packing_scores(left: list[int], task: Task, expected: int) -> None:
    assert packing_scores(cards(left), task, np.arange(1)).tolist() == [expected]


def test_gpu_packing_prefers_used_cards_then_used_nodes_then_small_idle_nodes() -> None:
    c = cards([1000] * 8, [1000] * 2, [600, 1000], [1000] * 2)
    place = policies(Workload((), c))["gpu-packing"]
    whole = Task(cpu=1, gpus=1, milli=1000)
    assert place(c, SHARE, np.flatnonzero(c.fits(SHARE)), RNG) == (2, (0,))  # the used card
    assert place(c, whole, np.flatnonzero(c.fits(whole)), RNG) == (2, (1,))  # a free card of a used node
    c.left[2, :2] = 0
    assert place(c, whole, np.flatnonzero(c.fits(whole)), RNG) == (1, (0,))  # the 2-GPU idle node, first


def test_best_fit_leaves_least_and_takes_the_tightest_card() -> None:
    c = cards([1000, 1000], [450, 1000])
    assert best_fit_scores(c, SHARE, np.arange(2)).tolist() == [52, 56]
    assert policies(Workload((), c))["best-fit"](c, SHARE, np.arange(2), RNG) == (1, (0,))


def test_dot_product_prefers_the_node_with_least_free_alongside_the_task() -> None:
    c = cards([1000] * 8, [1000, 1000])
    assert policies(Workload((), c))["dot-product"](c, SHARE, np.arange(2), RNG).node == 1


def test_ties_go_to_the_first_node_and_whole_cards_to_the_first_free() -> None:
    c = cards([1000, 300, 1000], [1000, 1000, 1000])
    for name in ("best-fit", "gpu-packing", "dot-product", "fgd"):
        choice = policies(Workload((), c))[name](c, Task(cpu=1, gpus=2, milli=1000), np.arange(2), RNG)
        assert choice.cards == ((0, 2) if choice.node == 0 else (0, 1)), name


HALF_AND_WHOLE = tuple(TypicalPod(task=Task(cpu=1000, gpus=1, milli=m), share=0.5) for m in (500, 1000))


def test_fgd_places_the_share_where_whole_cards_stay_whole() -> None:
    c = cards([1000, 1000], [500, 1000])  # on the first node the share would cost a whole card
    for name in ("fgd", "fgd-pack"):
        assert policies(Workload(HALF_AND_WHOLE, c))[name](c, Task(cpu=1, gpus=1, milli=500), np.arange(2), RNG) == (
            1,
            (0,),
        ), name


def test_fgd_pack_breaks_ties_toward_a_node_already_in_use() -> None:
    c = cards([1000, 1000], [0, 1000], [1000, 1000])  # a whole card lowers F equally on each
    workload = Workload((TypicalPod(task=Task(cpu=1000), share=1.0),), c)
    task = Task(cpu=1, gpus=1, milli=1000)
    assert policies(workload)["fgd"](c, task, np.arange(3), RNG).node == 0
    assert policies(workload)["fgd-pack"](c, task, np.arange(3), RNG) == (1, (1,))


def test_fgd_pack_takes_the_tightest_of_the_tied_nodes_in_use() -> None:
    c = cards([1000, 1000], [0, 1000], [0, 1000], [0, 1000])
    c.cpu[:] = [96_000, 96_000, 8_000, 48_000]  # node 2 is the tightest of those in use, node 0 is idle
    workload = Workload((TypicalPod(task=Task(cpu=1000), share=1.0),), c)
    task = Task(cpu=1, gpus=1, milli=1000)
    assert policies(workload)["fgd-pack"](c, task, np.arange(4), RNG) == (2, (1,))
    assert policies(workload)["fgd"](c, task, np.arange(4), RNG).node == 0


def test_random_takes_a_node_that_fits_and_a_card_with_room() -> None:
    c = cards([300, 1000], [1000, 450])
    for seed in range(20):
        choice = policies(Workload((), c))["random"](c, SHARE, np.arange(2), np.random.default_rng(seed))
        assert c.left[choice.node, choice.cards[0]] >= 400
