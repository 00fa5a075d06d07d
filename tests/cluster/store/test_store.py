"""The store's observed-state scripts: accounting, versions, the pending index, bad input."""

from __future__ import annotations

import time
from collections.abc import Iterator

import msgspec
import pytest
import redis

from cluster.model.quantity import QuantityError
from cluster.model.resources import Resources
from cluster.runtime.redis_server import RedisServer
from cluster.sim.pods import make_podgroup
from cluster.store.audit import audit
from cluster.store.feed import FeedReader
from cluster.store.keys import Kind
from cluster.store.scripts import Arg, Script
from cluster.store.store import PODS_PER_CALL, Delete, Own, Put, Store
from tests.binder.test_commit import dump
from tests.builders import node, pod


async def test_pods_of_other_schedulers_arrive_bound_and_are_accounted(store: Store) -> None:
    await store.upsert_nodes([node("n1", cpu="4")])
    await store.upsert_pods([pod("other", cpu="3", scheduler="default-scheduler", node="n1", phase="Running")])
    n1 = (await store.get_nodes(["n1"]))["n1"]
    assert n1.allocated["cpu"] == 3000 and n1.allocated["pods"] == 1
    assert await store.pending("default-scheduler") == []
    assert await audit(store) == []


async def test_a_pod_seen_before_its_node_is_accounted_when_the_node_appears(store: Store) -> None:
    await store.upsert_pods([pod("early", cpu="2", node="late", phase="Running")])
    assert (await store.get_pods(["uid-early"]))["uid-early"].accounted == ""
    await store.upsert_nodes([node("late")])
    assert (await store.get_nodes(["late"]))["late"].allocated["cpu"] == 2000
    assert (await store.get_pods(["uid-early"]))["uid-early"].accounted == "late"
    assert await audit(store) == []


async def test_finished_and_deleted_pods_return_their_resources(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    await store.upsert_pods(
        [pod("a", cpu="1", node="n1", phase="Running"), pod("b", cpu="2", node="n1", phase="Running")]
    )
    await store.upsert_pods([pod("a", cpu="1", node="n1", phase="Succeeded")])
    assert (await store.get_nodes(["n1"]))["n1"].allocated["cpu"] == 2000
    await store.delete_pods(["uid-b"])
    assert (await store.get_nodes(["n1"]))["n1"].allocated == Resources()
    assert await store.names(Kind.POD) == ["uid-a"]
    assert await audit(store) == []


async def test_a_burst_of_pods_is_written_in_few_calls_each_call_one_version_and_one_entry(
    store: Store,
) -> None:
    """A burst is a few script calls, not one per pod: every informer reads it in a step or two (the demo's
    200-pod rounds were read one entry, then 65, then 99, and the first pod went to a worker alone)."""
    await store.upsert_nodes([node("n1", cpu="300", memory="512Gi", pods=300), node("n2")])
    reader = FeedReader(store, await store.version())
    burst = [
        pod(f"p{i}", cpu="1", node="n1" if i % 2 else "", phase="Running" if i % 2 else "Pending") for i in range(250)
    ]
    versions = await store.upsert_pods(burst)
    calls = -(-250 // PODS_PER_CALL)
    assert 1 < calls < 250 and versions == [3 + i // PODS_PER_CALL for i in range(250)]
    changes = await reader.read(block_ms=None)
    assert reader.position == 2 + calls
    pod_lines = [c.name for c in changes if c.kind is Kind.POD]
    assert sorted(pod_lines) == sorted(p.uid for p in burst)  # each pod once
    assert [c.name for c in changes if c.kind is Kind.NODE] == ["n1"] * calls  # once per call that moved it
    assert (await store.get_nodes(["n1"]))["n1"].allocated["cpu"] == 125_000
    assert len(await store.pending("s")) == 125
    assert await audit(store) == []
    # The same pod twice in a call: the last write wins, one line on the feed; a missing pod deletes nothing.
    [v, w] = await store.upsert_pods([pod("p1", cpu="2", node="n1", phase="Running")] * 2)
    assert v == w == 3 + calls and [c.name for c in await reader.read(block_ms=None)] == ["uid-p1", "n1"]
    gone = await store.delete_pods(["uid-p1", "uid-missing", "uid-p2"])
    assert gone == [4 + calls, 0, 4 + calls]
    assert (await store.get_nodes(["n1"]))["n1"].allocated["cpu"] == 124_000
    assert await audit(store) == []


async def test_a_streamed_write_sends_each_call_as_soon_as_its_pods_are_made(
    store: Store, redis_server: RedisServer
) -> None:
    """upsert_pods' way (Store._stream): each call is in Redis while the next one's arguments are
    still being made — a burst's first pods are written while the rest are encoded."""
    await store.upsert_pods([pod(f"p{i}") for i in range(5)])
    seen: list[list[str]] = []
    watcher = redis.Redis.from_url(redis_server.url)

    left = [f"uid-p{i}" for i in range(5)]

    def members() -> list[str]:
        return sorted(k.decode() for k in watcher.smembers(store.keys.prefix + "index:pod"))

    def calls() -> Iterator[list[Arg]]:
        for i in range(5):
            if i in (2, 4):  # the call of the two before was sent: Redis runs it (no reply read, no await)
                deadline = time.monotonic() + 5
                while members() != left[i:] and time.monotonic() < deadline:
                    time.sleep(0.002)
            seen.append(members())
            yield [left[i]]

    try:
        versions = await store._stream(Script("cluster.store", "delete_pod"), calls(), 2)
    finally:
        watcher.close()
    assert len(set(versions)) == 3 and 0 not in versions
    assert seen == [left, left, left[2:], left[2:], left[4:]]
    assert await store.get_pods(left) == {}


async def test_a_write_after_redis_lost_its_scripts_loads_them_and_writes(store: Store) -> None:
    await store.upsert_nodes([node("n1", cpu="64", memory="512Gi", pods=64)])
    await store.client.script_flush()
    await store.upsert_pods([pod(f"p{i}", node="n1", phase="Running") for i in range(2 * PODS_PER_CALL + 1)])
    assert (await store.get_nodes(["n1"]))["n1"].allocated["cpu"] == (2 * PODS_PER_CALL + 1) * 1000
    assert await audit(store) == []


async def test_deleting_a_node_frees_nothing_twice(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    await store.upsert_pods([pod("a", node="n1", phase="Running")])
    await store.delete_nodes(["n1"])
    assert (await store.get_pods(["uid-a"]))["uid-a"].accounted == ""
    await store.delete_pods(["uid-a"])
    assert await store.list_nodes() == []
    assert await audit(store) == []


async def test_updating_a_node_keeps_its_allocation_and_bumps_its_version(store: Store) -> None:
    [v1] = await store.upsert_nodes([node("n1", cpu="4", gpu=2)])
    await store.upsert_pods([pod("a", cpu="1", node="n1", phase="Running")])
    [v2] = await store.upsert_nodes([node("n1", cpu="8")])
    rec = (await store.get_nodes(["n1"]))["n1"]
    assert v2 > v1 and rec.version == v2
    assert rec.allocatable == Resources({"cpu": 8000, "memory": 32 * 2**30, "pods": 110})
    assert rec.allocated["cpu"] == 1000


async def test_a_bad_quantity_changes_nothing(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    before = await dump(store)
    bad = pod("bad")
    container = msgspec.structs.replace(
        bad.spec.containers[0],
        resources=msgspec.structs.replace(bad.spec.containers[0].resources, requests={"cpu": "1.2.3"}),
    )
    bad = msgspec.structs.replace(bad, spec=msgspec.structs.replace(bad.spec, containers=[container]))
    with pytest.raises(QuantityError, match=r"cpu.*'1\.2\.3'"):
        await store.upsert_pods([pod("good"), bad])
    assert await dump(store) == before
    # Last in a burst of several script calls: every pod is checked before the first call is written.
    with pytest.raises(QuantityError, match=r"cpu.*'1\.2\.3'"):
        await store.upsert_pods([*(pod(f"good-{i}") for i in range(3 * PODS_PER_CALL)), bad])
    assert await dump(store) == before


async def test_simple_objects_and_owners_are_written_under_one_version(store: Store) -> None:
    await store.upsert_nodes([node("n1"), node("n2")])
    v0 = await store.version()
    group = make_podgroup("train", min_member=4, queue="team-a")
    v = await store.write([Put(group), Own("n1", "volcano"), Own("n2", "agent-scheduler")])
    assert v == v0 + 1
    assert (await store.list_objects(type(group)))["default/train"].spec.min_member == 4
    assert await store.owners() == {"n1": "volcano", "n2": "agent-scheduler"}
    assert {r.name: r.version for r in await store.list_nodes()} == {"n1": v, "n2": v}
    await store.write([Delete(Kind.PODGROUP, "default/train")])
    assert await store.list_objects(type(group)) == {}


async def test_pending_index_is_fifo_per_scheduler(store: Store) -> None:
    await store.upsert_pods([pod("x", scheduler="a"), pod("y", scheduler="b"), pod("z", scheduler="a")])
    assert await store.pending("a") == ["uid-x", "uid-z"]
    await store.upsert_pods([pod("x", scheduler="b")])
    assert await store.pending("a") == ["uid-z"]
    assert await store.pending("b") == ["uid-y", "uid-x"]


async def test_a_kubelets_report_sets_the_phase_of_pods_bound_where_it_says_and_accounts_nothing(
    store: Store,
) -> None:
    """``set_phases``: a bound pod's phase and its pod as reported (nodeName, status), one version for
    the call, its node's figures untouched. A pod gone, bound elsewhere, or in that phase already is
    left as it was (0). An end (Succeeded, Failed) or an unbound pod is refused whole, nothing written."""
    await store.upsert_nodes([node("n1", cpu="8"), node("n2", cpu="8")])
    await store.upsert_pods([pod(n, cpu="1", node="n1") for n in ("a", "b", "c")])
    records = await store.get_pods(["uid-a", "uid-b", "uid-c"])
    n1 = (await store.get_nodes(["n1"]))["n1"]
    await store.delete_pods(["uid-c"])
    elsewhere = msgspec.structs.replace(records["uid-b"], node="n2")
    versions = await store.set_phases([records["uid-a"], elsewhere, records["uid-c"]], "Running")
    assert versions[0] > n1.version and versions[1:] == [0, 0]
    a = (await store.get_pods(["uid-a"]))["uid-a"]
    assert a.phase == "Running" and a.version == versions[0] and a.node == "n1" and a.accounted == "n1"
    assert a.pod.status.phase == "Running" and a.pod.spec.node_name == "n1"
    assert (await store.get_pods(["uid-b"]))["uid-b"].phase == "Pending"
    after = (await store.get_nodes(["n1"]))["n1"]
    assert (
        after.allocated == Resources({"cpu": 2000, "memory": 2 * 2**30, "pods": 2}) and after.version == n1.version + 1
    )
    assert await store.set_phases([a], "Running") == [0]  # in that phase already
    # A report made from a record the pod has moved on from (its labels updated since) writes nothing.
    await store.upsert_pods([pod("d", cpu="1", node="n1")])
    d = (await store.get_pods(["uid-d"]))["uid-d"]
    relabelled = msgspec.structs.replace(d.pod, metadata=msgspec.structs.replace(d.pod.metadata, labels={"k": "v"}))
    await store.upsert_pods([relabelled])
    assert await store.set_phases([d], "Running") == [0]
    now = (await store.get_pods(["uid-d"]))["uid-d"]
    assert now.phase == "Pending" and now.pod.metadata.labels == {"k": "v"}

    head = await store.version()
    for phase in ("Succeeded", "Failed", ""):
        with pytest.raises(ValueError, match="phase"):
            await store.set_phases([a], phase)
    pending = msgspec.structs.replace(records["uid-b"], node="")
    with pytest.raises(ValueError, match="uid-b|b: not bound"):
        await store.set_phases([a, pending], "Unknown")
    assert await store.version() == head and (await store.get_pods(["uid-a"]))["uid-a"].phase == "Running"
    assert await audit(store) == []
