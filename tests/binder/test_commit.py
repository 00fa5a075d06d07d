"""The binder's commit and release scripts against a real redis-server."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import ResponseError

from binder.commit import Binder
from binder.results import Committed, Conflict, Placement, Reason, Rejected
from caldera.bench.binders import VersionOnlyBinder
from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.store.audit import audit
from cluster.store.records import encode_request
from cluster.store.store import Own, Store
from tests.builders import node, pod


async def placement(store: Store, uid: str, node_name: str, *, version: int | None = None) -> Placement:
    rec = (await store.get_pods([uid]))[uid]
    if version is None:
        version = (await store.get_nodes([node_name]))[node_name].version if node_name else 0
    return Placement(uid=uid, node=node_name, request=rec.request, version=version)


async def dump(store: Store) -> dict[bytes, object]:
    """Everything under the cluster's prefix except the feed, to show that nothing changed."""
    out: dict[bytes, object] = {}
    async for key in store.client.scan_iter(match=store.keys.prefix + "*"):
        t = await store.client.type(key)
        if t == b"hash":
            out[key] = await store.client.hgetall(key)
        elif t == b"set":
            out[key] = await store.client.smembers(key)
        elif t == b"zset":
            out[key] = await store.client.zrange(key, 0, -1, withscores=True)
        elif t == b"string":
            out[key] = await store.client.get(key)
    return out


async def test_commit_accounts_and_is_idempotent(store: Store) -> None:
    await store.upsert_nodes([node("n1", cpu="4")])
    await store.upsert_pods([pod("a", cpu="1500m")])
    binder = Binder(store.client, store.keys, "s")
    p = await placement(store, "uid-a", "n1")
    [first] = await binder.commit([p])
    assert isinstance(first, Committed) and not first.resolved and not first.idempotent
    [again] = await binder.commit([p])
    assert isinstance(again, Committed) and again.idempotent
    n1 = (await store.get_nodes(["n1"]))["n1"]
    assert n1.allocated == Resources({"cpu": 1500, "memory": 2**30, "pods": 1})
    assert n1.version == first.version
    assert await store.pending("s") == []
    assert await audit(store) == []


async def test_refusals_leave_the_store_unchanged(store: Store) -> None:
    await store.upsert_nodes([node("n1", cpu="2"), node("n2", cpu="2")])
    await store.upsert_pods([pod("a", cpu="1"), pod("b", cpu="1")])
    binder = Binder(store.client, store.keys, "s")
    await binder.commit([await placement(store, "uid-a", "n1")])
    before = await dump(store)
    a_elsewhere = await placement(store, "uid-a", "n2")
    b = await placement(store, "uid-b", "n1")
    cases = {
        "unknown node": (Placement(uid="uid-b", node="nope", request=b.request, version=1), Reason.UNKNOWN_NODE),
        "unknown pod": (Placement(uid="ghost", node="n1", request=b.request, version=b.version), Reason.UNKNOWN_POD),
        "already bound": (a_elsewhere, Reason.ALREADY_BOUND),
        "request differs": (
            Placement(uid="uid-b", node="n1", request=b.request + Resources({"cpu": 1}), version=b.version),
            Reason.REQUEST_MISMATCH,
        ),
        "negative request": (
            Placement(uid="uid-b", node="n1", request=Resources({"cpu": -1000, "pods": 1}), version=b.version),
            Reason.INVALID_REQUEST,
        ),
        "does not fit": (Placement(uid="uid-b", node="n1", request=b.request, version=b.version), None),
    }
    await store.client.hset(store.keys.node("n1"), "a:cpu", 1500)  # leave room for less than b
    before = await dump(store)
    for name, (p, reason) in cases.items():
        [r] = await binder.commit([p])
        assert isinstance(r, Rejected), name
        if reason is not None:
            assert r.reason is reason, name
        else:
            assert r.reason is Reason.INSUFFICIENT and r.detail == "cpu", name
        assert await dump(store) == before, name
    [neg] = await binder.commit([cases["negative request"][0]])
    assert isinstance(neg, Rejected) and "cpu -1000" in neg.detail


async def test_fine_commits_both_when_both_fit_coarse_rejects_one(store: Store) -> None:
    await store.upsert_nodes([node("n1", cpu="4")])
    await store.upsert_pods([pod("a"), pod("b"), pod("c"), pod("d")])
    seen = (await store.get_nodes(["n1"]))["n1"].version
    fine = [Binder(store.client, store.keys, "s1"), Binder(store.client, store.keys, "s2")]
    [r1] = await fine[0].commit([await placement(store, "uid-a", "n1", version=seen)])
    [r2] = await fine[1].commit([await placement(store, "uid-b", "n1", version=seen)])
    assert isinstance(r1, Committed) and not r1.resolved
    assert isinstance(r2, Committed) and r2.resolved

    seen = (await store.get_nodes(["n1"]))["n1"].version
    coarse = [VersionOnlyBinder(store.client, store.keys, "s1"), VersionOnlyBinder(store.client, store.keys, "s2")]
    [r3] = await coarse[0].commit([await placement(store, "uid-c", "n1", version=seen)])
    [r4] = await coarse[1].commit([await placement(store, "uid-d", "n1", version=seen)])
    assert isinstance(r3, Committed)
    assert isinstance(r4, Conflict)
    assert r4.version == r3.version
    assert r4.allocated["cpu"] == 3000 and r4.allocatable["cpu"] == 4000
    assert await audit(store) == []


async def test_true_conflict_returns_current_figures(store: Store) -> None:
    await store.upsert_nodes([node("n1", cpu="2")])
    await store.upsert_pods([pod("a", cpu="1500m"), pod("b", cpu="1500m")])
    seen = (await store.get_nodes(["n1"]))["n1"].version
    binder = Binder(store.client, store.keys, "s")
    await binder.commit([await placement(store, "uid-a", "n1", version=seen)])
    [r] = await binder.commit([await placement(store, "uid-b", "n1", version=seen)])
    assert isinstance(r, Conflict)
    assert r.free["cpu"] == 500 and r.free["pods"] == 109
    assert "uid-b" in await store.pending("s")


async def test_figures_on_a_moved_node_are_as_the_call_leaves_it(store: Store) -> None:
    """A scheduler that refreshes its view from these figures ends exact, its own batch included."""
    await store.upsert_nodes([node("n1", cpu="4")])
    await store.upsert_pods([pod("x"), pod("a"), pod("b", cpu="3"), pod("c")])
    seen = (await store.get_nodes(["n1"]))["n1"].version
    binder = Binder(store.client, store.keys, "s")
    await Binder(store.client, store.keys, "other").commit([await placement(store, "uid-x", "n1")])  # the node moves
    # one batch decided on the old version: a fits (re-checked), b (3 cpu) no longer fits, c still fits
    results = await binder.commit([await placement(store, u, "n1", version=seen) for u in ("uid-a", "uid-b", "uid-c")])
    a, b, c = results
    assert isinstance(a, Committed) and a.resolved and isinstance(c, Committed) and c.resolved
    assert isinstance(b, Conflict)
    after = (await store.get_nodes(["n1"]))["n1"]
    for r in (a, b, c):
        assert r.allocated == after.allocated and r.allocatable == after.allocatable and r.version == after.version
    assert after.allocated["cpu"] == 3000 and after.allocated["pods"] == 3
    [plain] = await binder.commit([await placement(store, "uid-b", "n1")])  # not moved: no figures to carry
    assert isinstance(plain, Rejected) and plain.reason is Reason.INSUFFICIENT


async def test_hard_mode_refuses_nodes_of_other_owners(store: Store) -> None:
    await store.upsert_nodes([node("mine"), node("theirs"), node("nobody")])
    await store.write([Own("mine", "s"), Own("theirs", "other")])
    await store.upsert_pods([pod("a"), pod("b"), pod("c")])
    hard = Binder(store.client, store.keys, "s", sharding=ShardingMode.HARD)
    soft = Binder(store.client, store.keys, "s", sharding=ShardingMode.SOFT)
    [r1] = await hard.commit([await placement(store, "uid-a", "theirs")])
    [r2] = await hard.commit([await placement(store, "uid-a", "nobody")])
    [r3] = await hard.commit([await placement(store, "uid-a", "mine")])
    [r4] = await soft.commit([await placement(store, "uid-b", "theirs")])
    assert isinstance(r1, Rejected) and r1.reason is Reason.NOT_OWNER
    assert isinstance(r2, Rejected) and r2.reason is Reason.NOT_OWNER
    assert isinstance(r3, Committed)
    assert isinstance(r4, Committed)


async def test_gang_is_all_or_nothing(store: Store) -> None:
    await store.upsert_nodes([node("n1", cpu="4", gpu=2), node("n2", cpu="4", gpu=1)])
    await store.upsert_pods([pod(f"g{i}", gpu=1) for i in range(4)])
    binder = Binder(store.client, store.keys, "s")
    # Three fit one at a time, but n1 cannot take two more GPUs beside... n1 has 2, n2 has 1: 4 GPUs asked, 3 exist.
    gang = [await placement(store, f"uid-g{i}", n) for i, n in enumerate(["n1", "n1", "n2", "n1"])]
    before = await dump(store)
    results = await binder.commit(gang, gang=True)
    assert [type(r) for r in results] == [Rejected, Rejected, Rejected, Rejected]
    assert results[3].reason is Reason.INSUFFICIENT  # type: ignore[union-attr]
    assert {r.reason for r in results[:3]} == {Reason.GANG_MEMBER_FAILED}  # type: ignore[union-attr]
    assert await dump(store) == before
    results = await binder.commit(gang[:3], gang=True)
    assert all(isinstance(r, Committed) for r in results)
    assert (await store.get_nodes(["n1"]))["n1"].allocated["nvidia.com/gpu"] == 2
    # Repeating a committed gang is idempotent.
    again = await binder.commit(gang[:3], gang=True)
    assert all(isinstance(r, Committed) and r.idempotent for r in again)
    assert await audit(store) == []


async def test_gangs_share_calls_and_each_stands_or_falls_alone(store: Store) -> None:
    """commit_gangs packs several gangs into one script call: a gang that does not fit leaves the
    gangs beside it committed, and a node an earlier gang of the call took from has not moved
    for a later one (a session's gangs decided in that order)."""
    await store.upsert_nodes([node("n1", cpu="8", gpu=2), node("n2", cpu="8", gpu=1)])
    await store.upsert_pods([pod(f"g{i}", gpu=1) for i in range(6)])
    binder = Binder(store.client, store.keys, "s")
    seen = {n: r.version for n, r in (await store.get_nodes(["n1", "n2"])).items()}

    async def at(i: int, n: str) -> Placement:
        return await placement(store, f"uid-g{i}", n, version=seen[n])

    first = [await at(0, "n1")]
    too_big = [await at(1, "n2"), await at(2, "n2")]  # n2 has one GPU
    second = [await at(3, "n1"), await at(4, "n2")]
    results = await binder.commit_gangs([first, too_big, second], per_call=64)
    assert all(isinstance(r, Committed) and not r.resolved for r in results[0] + results[2])
    assert [r.reason for r in results[1]] == [Reason.GANG_MEMBER_FAILED, Reason.INSUFFICIENT]  # type: ignore[union-attr]
    nodes = await store.get_nodes(["n1", "n2"])
    assert nodes["n1"].allocated["nvidia.com/gpu"] == 2 and nodes["n2"].allocated["nvidia.com/gpu"] == 1
    assert sorted(await store.pending("s")) == ["uid-g1", "uid-g2", "uid-g5"]
    assert await audit(store) == []


async def test_gangs_over_several_calls_get_the_same_results(store: Store) -> None:
    """Split over calls (per_call 1), the later call sees n1 moved: it re-checks, still commits,
    and leaves the figures out; the results line up with the gangs either way."""
    await store.upsert_nodes([node("n1", cpu="8", gpu=4)])
    await store.upsert_pods([pod(f"g{i}", gpu=1) for i in range(3)])
    binder = Binder(store.client, store.keys, "s")
    gangs = [[await placement(store, "uid-g0", "n1")], [await placement(store, f"uid-g{i}", "n1") for i in (1, 2)]]
    first, second = await binder.commit_gangs(gangs, per_call=1)
    assert isinstance(first[0], Committed) and not first[0].resolved
    assert all(isinstance(r, Committed) and r.resolved and r.allocated is None for r in second)
    assert (await store.get_nodes(["n1"]))["n1"].allocated["nvidia.com/gpu"] == 3
    with pytest.raises(ValueError, match="a pod appears in two gangs"):
        await binder.commit_gangs([gangs[0], gangs[0]])


async def test_a_gang_stream_sends_each_full_call_as_it_fills_and_answers_like_commit_gangs(store: Store) -> None:
    """Gangs added to a stream: each script call goes to Redis as soon as it holds ``per_call``
    placements — committed before any await — and the results line up with the gangs as
    commit_gangs's would (the last, partial call sent by results())."""
    await store.upsert_nodes([node("n1", cpu="8", gpu=4), node("n2", cpu="8", gpu=1)])
    await store.upsert_pods([pod(f"g{i}", gpu=1) for i in range(6)])
    binder = Binder(store.client, store.keys, "s")
    await binder.load()
    seen = {n: r.version for n, r in (await store.get_nodes(["n1", "n2"])).items()}
    gangs = [
        [await placement(store, "uid-g0", "n1", version=seen["n1"])],
        [await placement(store, f"uid-g{i}", "n2", version=seen["n2"]) for i in (1, 2)],  # one GPU: fails
        [await placement(store, "uid-g3", "n1", version=seen["n1"])],
        [await placement(store, "uid-g4", "n1", version=seen["n1"])],
    ]
    stream = await binder.gang_stream(per_call=2)
    stream.add(gangs[0])
    stream.add(gangs[1])  # over per_call with the first: the first's call is sent alone
    stream.add(gangs[2])  # the second gang's call is full: sent
    assert len(stream.calls) == 2
    for _ in range(200):  # no reply read yet: Redis ran the two calls on its own
        if "uid-g0" not in await store.pending("s"):
            break
        await asyncio.sleep(0.005)
    # g0 committed, g1 and g2 refused (n2 has one GPU), g3 in the call not yet full
    assert sorted(await store.pending("s")) == ["uid-g1", "uid-g2", "uid-g3", "uid-g4", "uid-g5"]
    stream.add(gangs[3])
    results = await stream.results()
    assert [type(r) for g in results for r in g] == [Committed, Rejected, Rejected, Committed, Committed]
    assert sorted(await store.pending("s")) == ["uid-g1", "uid-g2", "uid-g5"]
    assert (await store.get_nodes(["n1"]))["n1"].allocated["nvidia.com/gpu"] == 3
    assert await audit(store) == []


async def test_a_commit_stream_sends_each_batch_when_added_and_answers_each_as_commit_would(store: Store) -> None:
    """The agent worker's stream: each batch is its own script call, in Redis before any await (the
    first pods of a micro-batch committed while the rest are decided), answered as ``commit``
    answers it (a moved node's figures with a commit that re-checked it)."""
    await store.upsert_nodes([node("n1", cpu="4")])
    await store.upsert_pods([pod(f"p{i}", cpu="1") for i in range(5)])
    binder = Binder(store.client, store.keys, "s")
    seen = (await store.get_nodes(["n1"]))["n1"].version
    stream = await binder.commit_stream()
    stream.add([await placement(store, f"uid-p{i}", "n1", version=seen) for i in (0, 1)])
    for _ in range(200):  # no reply read yet: Redis ran the call on its own
        if "uid-p0" not in await store.pending("s"):
            break
        await asyncio.sleep(0.005)
    assert sorted(await store.pending("s")) == ["uid-p2", "uid-p3", "uid-p4"]
    stream.add([await placement(store, f"uid-p{i}", "n1", version=seen) for i in (2, 3, 4)])  # one too many
    first, second = await stream.results()
    assert [type(r) for r in first] == [Committed, Committed]
    assert [type(r) for r in second] == [Committed, Committed, Conflict]  # n1 moved: re-checked, then full
    assert isinstance(second[0], Committed) and second[0].resolved and second[0].allocated is not None
    assert sorted(await store.pending("s")) == ["uid-p4"]
    with pytest.raises(ValueError, match="a pod appears in two batches"):
        again = await binder.commit_stream()
        again.add([await placement(store, "uid-p4", "n1")])
        again.add([await placement(store, "uid-p4", "n1")])
    await again.abandon()
    assert await audit(store) == []


async def test_a_gang_stream_after_redis_lost_its_scripts_loads_them_and_commits(store: Store) -> None:
    """The calls sent ahead met NOSCRIPT (Redis restarted, flushed): loaded, sent again, committed."""
    await store.upsert_nodes([node("n1", cpu="8")])
    await store.upsert_pods([pod(f"p{i}", cpu="1") for i in range(3)])
    binder = Binder(store.client, store.keys, "s")
    await store.client.script_flush()
    stream = await binder.gang_stream(per_call=1)
    for i in range(3):
        stream.add([await placement(store, f"uid-p{i}", "n1")])
    results = await stream.results()
    assert all(isinstance(r, Committed) for g in results for r in g)
    assert (await store.get_nodes(["n1"]))["n1"].allocated["cpu"] == 3000
    assert await audit(store) == []


async def test_gang_sizes_that_do_not_add_up_are_refused_before_any_write(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    await store.upsert_pods([pod("a"), pod("b")])
    binder = Binder(store.client, store.keys, "s")
    await binder.load()
    p = [await placement(store, u, "n1") for u in ("uid-a", "uid-b")]
    args = [store.keys.prefix, 1000, "s", "fine", 0, "1 2", 1]
    for x in p:
        args += [x.uid, x.node, x.version, encode_request(x.request), ""]
    before = await dump(store)
    with pytest.raises(ResponseError, match="gang sizes 1 2 do not add up to the 2 placements"):
        await binder.commit_script.call(store.client, [store.keys.rv], args)
    assert await dump(store) == before


async def test_gang_with_an_invalid_member_touches_nothing(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    await store.upsert_pods([pod("a"), pod("b")])
    binder = Binder(store.client, store.keys, "s")
    good = await placement(store, "uid-a", "n1")
    bad = Placement(uid="uid-b", node="n1", request=Resources({"cpu": -1}), version=good.version)
    before = await dump(store)
    results = await binder.commit([good, bad], gang=True)
    assert isinstance(results[0], Rejected) and results[0].reason is Reason.GANG_MEMBER_FAILED
    assert isinstance(results[1], Rejected) and results[1].reason is Reason.INVALID_REQUEST
    assert await dump(store) == before


async def test_release_requeues_and_is_idempotent(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    await store.upsert_pods([pod("a", cpu="2")])
    binder = Binder(store.client, store.keys, "s")
    await binder.commit([await placement(store, "uid-a", "n1")])
    assert await binder.release(["uid-a"]) == [True]
    assert await binder.release(["uid-a", "ghost"]) == [False, False]
    rec = (await store.get_pods(["uid-a"]))["uid-a"]
    assert rec.node == "" and rec.accounted == ""
    assert await store.pending("s") == ["uid-a"]
    assert (await store.get_nodes(["n1"]))["n1"].allocated == Resources()
    assert await audit(store) == []


async def test_a_pod_twice_in_one_batch_is_a_caller_error(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    await store.upsert_pods([pod("a")])
    p = await placement(store, "uid-a", "n1")
    with pytest.raises(ValueError, match="twice"):
        await Binder(store.client, store.keys, "s").commit([p, p])


async def test_unschedulable_node_refuses(store: Store) -> None:
    await store.upsert_nodes([node("n1", unschedulable=True)])
    await store.upsert_pods([pod("a")])
    [r] = await Binder(store.client, store.keys, "s").commit([await placement(store, "uid-a", "n1")])
    assert isinstance(r, Rejected) and r.reason is Reason.UNSCHEDULABLE


async def test_metrics_count_every_result(store: Store) -> None:
    from prometheus_client import CollectorRegistry

    from binder.metrics import BinderMetrics

    registry = CollectorRegistry()
    binder = Binder(store.client, store.keys, "s", metrics=BinderMetrics(registry))
    await store.upsert_nodes([node("n1", cpu="2")])
    await store.upsert_pods([pod("a", cpu="1500m"), pod("b", cpu="1500m"), pod("c")])
    seen = (await store.get_nodes(["n1"]))["n1"].version
    await binder.commit([await placement(store, "uid-a", "n1", version=seen)])
    await binder.commit([await placement(store, "uid-b", "n1", version=seen)])  # true conflict
    await binder.commit([Placement(uid="uid-c", node="nope", request=Resources({"cpu": 1}), version=0)])
    await store.upsert_nodes([node("n1", cpu="4")])
    await binder.commit([await placement(store, "uid-b", "n1", version=seen)])  # moved, fits now: resolved
    await binder.release(["uid-b"])

    def value(name: str, **labels: str) -> float:
        v = registry.get_sample_value(name, labels)
        return v if v is not None else 0.0

    assert value("caldera_binder_commits_total", result="committed") == 2
    assert value("caldera_binder_commits_total", result="conflict") == 1
    assert value("caldera_binder_commits_total", result="rejected") == 1
    assert value("caldera_binder_conflicts_resolved_total") == 1
    assert value("caldera_binder_commit_duration_seconds_count") == 4
    assert value("caldera_binder_releases_total") == 1
