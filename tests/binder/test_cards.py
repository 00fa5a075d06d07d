"""GPU cards in the commit: each card's room is checked and taken with the node's, atomically."""

from __future__ import annotations

from binder.commit import Binder
from binder.results import Committed, Placement, Reason, Rejected
from cluster.model.devices import CARDS_ANNOTATION, VGPU_IDS, VGPU_REGISTER, card_resource
from cluster.model.resources import Resources
from cluster.store.audit import audit
from cluster.store.store import Store
from tests.builders import gpu_node, gpu_pod

SHARE = {"volcano.sh/gpu-number": 2, "volcano.sh/gpu-memory": 32000}  # two cards of 16000


def card(i: int, amount: int) -> Resources:
    return Resources({card_resource(i): amount})


async def setup(store: Store, *names: str) -> Binder:
    await store.upsert_nodes([gpu_node("n1", allocatable=SHARE)])
    await store.upsert_pods([gpu_pod(n, limits={"volcano.sh/gpu-memory": 10000}) for n in names])
    return Binder(store.client, store.keys, "s")


async def place(store: Store, uid: str, cards: Resources) -> Placement:
    rec = (await store.get_pods([uid]))[uid]
    version = (await store.get_nodes(["n1"]))["n1"].version  # as the scheduler saw it: a refusal, not a conflict
    return Placement(uid=uid, node="n1", request=rec.request, version=version, cards=cards)


async def used(store: Store, i: int) -> int:
    return (await store.get_nodes(["n1"]))["n1"].allocated.get(card_resource(i), 0)


async def test_a_node_offers_its_cards_and_a_commit_takes_a_cards_room(store: Store) -> None:
    binder = await setup(store, "a", "b", "c")
    n1 = (await store.get_nodes(["n1"]))["n1"]
    assert n1.allocatable.get(card_resource(0)) == n1.allocatable.get(card_resource(1)) == 16000
    [a] = await binder.commit([await place(store, "uid-a", card(0, 10000))])
    assert isinstance(a, Committed)
    # card 0 has 6000 left: b does not fit there although the node has 22000 free in all
    [b] = await binder.commit([await place(store, "uid-b", card(0, 10000))])
    assert isinstance(b, Rejected) and b.reason is Reason.INSUFFICIENT and card_resource(0) in b.detail
    [b] = await binder.commit([await place(store, "uid-b", card(1, 10000))])
    assert isinstance(b, Committed)
    assert (await used(store, 0), await used(store, 1)) == (10000, 10000)
    assert (await store.get_pods(["uid-a"]))["uid-a"].cards == card(0, 10000)
    [again] = await binder.commit([await place(store, "uid-a", card(0, 10000))])
    assert isinstance(again, Committed) and again.idempotent and await used(store, 0) == 10000
    assert await audit(store) == []


async def test_a_gang_takes_every_card_or_none(store: Store) -> None:
    binder = await setup(store, "a", "b", "c")
    gang = [await place(store, f"uid-{n}", card(0, 6000)) for n in "abc"]  # 18000 on a 16000 card
    results = await binder.commit(gang, gang=True)
    assert not any(isinstance(r, Committed) for r in results)
    assert await used(store, 0) == 0 and await store.pending("s") == ["uid-a", "uid-b", "uid-c"]
    records = await store.get_pods(["uid-a", "uid-b", "uid-c"])
    assert all(rec.cards == Resources() for rec in records.values())
    gang[2] = await place(store, "uid-c", card(1, 6000))
    assert all(isinstance(r, Committed) for r in await binder.commit(gang, gang=True))
    assert (await used(store, 0), await used(store, 1)) == (12000, 6000) and await audit(store) == []


async def test_release_delete_and_finishing_give_the_cards_back(store: Store) -> None:
    binder = await setup(store, "a", "b", "c")
    for uid, i in (("uid-a", 0), ("uid-b", 1), ("uid-c", 0)):
        [r] = await binder.commit([await place(store, uid, card(i, 5000))])
        assert isinstance(r, Committed)
    assert await binder.release(["uid-a"]) == [True]  # the bind failed
    assert await used(store, 0) == 5000 and (await store.get_pods(["uid-a"]))["uid-a"].cards == Resources()
    await store.delete_pods(["uid-b"])
    assert await used(store, 1) == 0
    done = gpu_pod("c", limits={"volcano.sh/gpu-memory": 10000}, node="n1", phase="Succeeded")
    await store.upsert_pods([done])
    assert await used(store, 0) == 0 and await audit(store) == []


async def test_a_pod_observed_bound_keeps_its_committed_cards_or_takes_those_its_annotations_name(
    store: Store,
) -> None:
    binder = await setup(store, "a")
    [r] = await binder.commit([await place(store, "uid-a", card(1, 7000))])
    assert isinstance(r, Committed)
    # the observer sees the bound pod (its annotations written by the bind): the cards stay
    await store.upsert_pods([gpu_pod("a", limits={"volcano.sh/gpu-memory": 10000}, node="n1", phase="Running")])
    assert await used(store, 1) == 7000
    # a pod another scheduler bound, annotated by Volcano's gpushare: its memory on card 0
    volcano = gpu_pod(
        "v",
        limits={"volcano.sh/gpu-memory": 4000},
        annotations={"volcano.sh/gpu-index": "0"},
        node="n1",
        phase="Running",
    )
    ours = gpu_pod("o", limits={}, annotations={CARDS_ANNOTATION: "0=3000"}, node="n1", phase="Running")
    await store.upsert_pods([volcano, ours])
    assert await used(store, 0) == 7000 and await audit(store) == []


async def test_cards_must_be_card_resources_and_an_over_committed_card_is_an_audit_finding(store: Store) -> None:
    binder = await setup(store, "a")
    bad = await place(store, "uid-a", Resources({"nvidia.com/gpu": 1}))
    [r] = await binder.commit([bad])
    assert isinstance(r, Rejected) and r.reason is Reason.INVALID_REQUEST
    [r] = await binder.commit([await place(store, "uid-a", card(0, 10000))])
    assert isinstance(r, Committed) and await audit(store) == []
    await store.client.hset(store.keys.node("n1"), f"u:{card_resource(0)}", 20000)
    problems = await audit(store)
    assert any(f"{card_resource(0)} allocated 20000 > allocatable 16000" in p for p in problems), problems


async def test_a_vgpu_pod_another_scheduler_placed_holds_the_cards_hamis_annotation_names(store: Store) -> None:
    """HAMi (or Volcano's vGPU) wrote ``volcano.sh/vgpu-ids-new`` by card UUID: the store reads it
    against the node's register, so caldera cannot over-commit the card it filled."""
    register = "GPU-a,10,16384,NVIDIA-A100,true,hami-core:GPU-b,10,16384,NVIDIA-A100,true,hami-core:"
    vgpu = {"volcano.sh/vgpu-number": 20, "volcano.sh/vgpu-memory": 32768, "volcano.sh/vgpu-cores": 200}
    await store.upsert_nodes([gpu_node("n1", allocatable=vgpu, annotations={VGPU_REGISTER: register})])
    limits = {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 12000, "volcano.sh/vgpu-cores": 30}
    foreign = gpu_pod(
        "hami",
        limits=limits,
        annotations={VGPU_IDS: "GPU-b,NVIDIA,12000,30:;"},
        node="n1",
        phase="Running",
        scheduler="hami-scheduler",
    )
    await store.upsert_pods([foreign, gpu_pod("ours", limits=limits)])
    n1 = (await store.get_nodes(["n1"]))["n1"]
    held = {r: n1.allocated.get(r, 0) for r in (card_resource(1), card_resource(1, "slots"), card_resource(1, "cores"))}
    assert held == {card_resource(1): 12000, card_resource(1, "slots"): 1, card_resource(1, "cores"): 30}
    binder = Binder(store.client, store.keys, "s")
    rec = (await store.get_pods(["uid-ours"]))["uid-ours"]
    taking = Resources({card_resource(1): 12000, card_resource(1, "slots"): 1, card_resource(1, "cores"): 30})
    [r] = await binder.commit(
        [Placement(uid=rec.uid, node="n1", request=rec.request, version=n1.version, cards=taking)]
    )
    assert isinstance(r, Rejected) and r.reason is Reason.INSUFFICIENT and card_resource(1) in r.detail
    assert await audit(store) == []
