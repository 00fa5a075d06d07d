"""The demo's tracker: what it reports per scheduler and per queue adds up."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from binder.commit import Binder
from binder.results import Placement
from caldera.demo.report import SchedulerTotals
from caldera.demo.tracker import Tracker, band_of
from caldera.demo.workload import AGENT, VOLCANO, Workload, WorkloadDriver
from cluster.model.core import Pod
from cluster.model.volcano import PodGroup
from cluster.sim.cluster import SimCluster
from cluster.sim.pods import make_pod
from cluster.store.feed import FeedReader
from cluster.store.informer import Informer
from cluster.store.keys import Kind
from cluster.store.store import Store
from tests.builders import node


def test_each_pod_is_counted_once_however_often_the_feed_reports_it_gone() -> None:
    now = [0.0]
    t = Tracker(["agent-scheduler", "volcano"], clock=lambda: now[0])
    pods = [make_pod(f"p{i}", scheduler="agent-scheduler", requests={"cpu": "1"}) for i in range(4)]
    t.submitted(pods)
    now[0] = 0.5
    t.bound(pods[0].uid, now[0])
    t.bound(pods[0].uid, 0.9)  # seen bound again: the first time counts
    for _ in range(3):  # created and deleted between two reads: reported gone for each change
        t.gone(pods[1].uid)
    t.gone(pods[0].uid)
    t.gone(pods[0].uid)
    totals = t.totals(elapsed=1.0)["agent-scheduler"]
    assert (totals["pods_submitted"], totals["pods_bound"], totals["deleted_before_bound"], totals["pending"]) == (
        4,
        1,
        1,
        2,
    )
    assert totals["p50_ms"] == 500.0 and t.completed == 1


def test_each_submission_round_tells_its_first_pod_bound_from_the_wait_behind_its_own_pods() -> None:
    """Two rounds of agent pods and one of volcano pods: the first bound of each round is its path latency,
    whatever the later pods of the round wait; a round whose pods all went unbound has no first."""
    now = [0.0]
    t = Tracker(["agent-scheduler", "volcano"], clock=lambda: now[0])
    burst = [make_pod(f"a{i}", scheduler="agent-scheduler", requests={"cpu": "1"}) for i in range(4)]
    gang = [make_pod(f"v{i}", scheduler="volcano", requests={"cpu": "1"}) for i in range(2)]
    t.submitted(burst + gang)  # one round each
    later = [make_pod(f"b{i}", scheduler="agent-scheduler", requests={"cpu": "1"}) for i in range(2)]
    now[0] = 1.0
    t.submitted(later)
    for i, p in enumerate(burst):  # 1.010, 1.020 …: ten ms between pods of the burst
        t.bound(p.uid, 1.01 + 0.01 * i)
    t.bound(later[1].uid, 1.005)  # the second of its round bound first
    t.bound(later[0].uid, 1.5)
    t.bound(gang[0].uid, 0.2)
    t.gone(gang[1].uid)
    lone = make_pod("c", scheduler="agent-scheduler", requests={"cpu": "1"})
    t.submitted([lone])
    t.gone(lone.uid)  # deleted before it was bound: its round has no first pod
    agent, volcano = t.totals(elapsed=2.0)["agent-scheduler"], t.totals(elapsed=2.0)["volcano"]
    assert sorted(t.round_firsts["agent-scheduler"]) == pytest.approx([5.0, 1010.0])  # not 1,040 nor 1,500
    assert (agent["rounds"], agent["round_size_mean"]) == (3, 2.3)
    assert agent["round_first_p50_ms"] == 507.5
    assert (volcano["rounds"], volcano["round_size_mean"], volcano["round_first_p50_ms"]) == (1, 2.0, 200.0)
    assert not t._rounds  # every round settled: nothing kept


def test_rounds_are_told_apart_by_size_each_by_its_first_median_and_last_pod() -> None:
    """Per band of round sizes, the p50 over its rounds of their first, median and last pod bound: two small
    rounds (10/20/30 ms and 100…140 ms), one of 151 pods (one gone unbound, the others 10…159 ms); a round
    whose pods all went unbound has no figures. The report reads them as the demo writes them."""
    now = [0.0]
    t = Tracker(["agent-scheduler", "volcano"], clock=lambda: now[0])

    def round_of(prefix: str, n: int) -> list[Pod]:
        pods = [make_pod(f"{prefix}{i}", scheduler="agent-scheduler", requests={"cpu": "1"}) for i in range(n)]
        t.submitted(pods)
        return pods

    small, big, lost, other = round_of("a", 3), round_of("b", 151), round_of("c", 2), round_of("d", 5)
    for i, p in enumerate(small):
        t.bound(p.uid, 0.010 * (i + 1))
    t.gone(big[-1].uid)
    for i, p in enumerate(big[:-1]):
        t.bound(p.uid, 0.010 + 0.001 * i)
    for p in lost:
        t.gone(p.uid)
    for i, p in enumerate(other):
        t.bound(p.uid, 0.100 + 0.010 * i)
    bands = t.totals(elapsed=1.0)["agent-scheduler"]["by_round_size"]
    assert bands == [
        {"band": "1–99", "rounds": 2, "first_p50_ms": 55.0, "median_p50_ms": 70.0, "last_p50_ms": 85.0},
        {"band": "100–199", "rounds": 1, "first_p50_ms": 10.0, "median_p50_ms": 84.5, "last_p50_ms": 159.0},
    ]
    assert [band_of(n) for n in (1, 99, 100, 299, 300, 600)] == ["1–99", "1–99", "100–199", "200–299", "300+", "300+"]
    report = msgspec.convert(t.totals(elapsed=1.0), dict[str, SchedulerTotals])
    assert [b.median_p50_ms for b in report["agent-scheduler"].by_round_size] == [70.0, 84.5]
    assert report["volcano"].by_round_size == []
    assert not t._rounds


def test_a_gang_starts_when_min_available_pods_are_bound_and_waits_otherwise() -> None:
    t = Tracker(["agent-scheduler", "volcano"], clock=lambda: 0.0)
    a = [make_pod(f"a{i}", scheduler="volcano", requests={"cpu": "1"}) for i in range(4)]
    b = [make_pod(f"b{i}", scheduler="volcano", requests={"cpu": "1"}) for i in range(2)]
    t.submitted(a + b)
    t.job("a", "prod", [p.uid for p in a], need=2)
    t.job("b", "research", [p.uid for p in b], need=2)
    t.bound(a[0].uid, 1.0)
    assert t.queues(["prod", "research"])["prod"] == {"submitted": 1, "started": 0, "running": 0, "waiting": 1}
    t.bound(a[1].uid, 1.0)  # two of four: minAvailable reached
    t.bound(b[0].uid, 1.0)
    q = t.queues(["prod", "research"])
    assert q["prod"] == {"submitted": 1, "started": 1, "running": 1, "waiting": 0}
    assert q["research"] == {"submitted": 1, "started": 0, "running": 0, "waiting": 1}
    for p in a:
        t.gone(p.uid)
    assert t.queues(["prod"])["prod"] == {"submitted": 1, "started": 1, "running": 0, "waiting": 0}


async def test_watching_ends_soon_after_stop_even_when_the_feed_is_quiet(store: Store) -> None:
    """At the end of a demo the cluster goes quiet; the tracker must not wait for one more change to notice the stop."""
    t = Tracker(["agent-scheduler", "volcano"])
    pod = make_pod("p", scheduler="agent-scheduler", requests={"cpu": "1"})
    t.submitted([pod])
    stop = asyncio.Event()
    watching = asyncio.create_task(t.watch(store, stop))
    await store.upsert_pods([pod])
    await asyncio.sleep(0.3)  # the feed has gone quiet
    stop.set()
    async with asyncio.timeout(2):
        await watching


async def test_a_finished_jobs_podgroup_is_deleted_and_a_gone_pod_forgotten(store: Store) -> None:
    """Kept, the PodGroups of finished jobs piled up in the store and the batch scheduler's cache over a soak,
    and the tracker kept every pod it had seen bound."""
    w = msgspec.convert(
        {
            "pools": [{"name": "gpu", "count": 1, "resources": {"cpu": 8, "nvidia.com/gpu": 8}}],
            "queues": [{"name": "q"}],
            "training": [
                {"name": "t", "queue": "q", "every_s": 0.05, "pods": [2], "duration_s": [1, 2], "requests": {"cpu": 1}}
            ],
        },
        Workload,
    )
    tracker = Tracker([AGENT, VOLCANO])
    driver = WorkloadDriver(w, store, tracker, seed=3, duration=60)
    stop = asyncio.Event()
    task = asyncio.create_task(driver.run(stop))
    await asyncio.sleep(0.5)
    groups = await store.list_objects(PodGroup)
    assert len(groups) >= 3 and len(tracker.jobs) == len(groups)
    first = min(tracker.jobs, key=lambda n: int(n.rsplit("-", 1)[1]))
    uids = [u for u, j in tracker.job_of.items() if j.name == first]
    for uid in uids:
        tracker.bound(uid, 1.0)
        tracker.gone(uid)  # the simulated kubelet deleted it when it ended
    await asyncio.sleep(0.3)  # a round of the driver
    stop.set()
    await task
    assert f"default/{first}" not in await store.list_objects(PodGroup)
    assert tracker.jobs[first].finished and tracker.completed == 2
    assert not any(u in tracker.bound_at or u in tracker.created for u in uids)


async def test_a_pod_counts_as_bound_when_the_store_wrote_it_not_when_the_watch_read_it(store: Store) -> None:
    """The watch shares the demo's busy process: the latency ends at the store's write of the binding, however
    late the watch reads it (it read bound pods 22-30 ms late at p50, and that lag was counted)."""
    t = Tracker(["agent-scheduler", "volcano"])
    stop = asyncio.Event()
    watching = asyncio.create_task(t.watch(store, stop))
    await asyncio.sleep(0.2)  # listed: what comes next is read from the feed
    pod = make_pod("p", scheduler="agent-scheduler", requests={"cpu": "1"})
    t.submitted([pod])
    await store.upsert_pods([pod])
    await store.upsert_pods([msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name="n1"))])
    time.sleep(0.4)  # the process busy elsewhere: the watch reads the binding late
    await asyncio.sleep(0.3)
    stop.set()
    async with asyncio.timeout(2):
        await watching
    [latency_ms] = t.latencies["agent-scheduler"]
    assert latency_ms < 150  # read 400 ms after the write


async def test_the_simulators_reads_of_the_pods_feed_the_tracker(store: Store) -> None:
    """In the demo the tracker reads no feed of its own: the simulated kubelets hand over what they read."""
    await store.upsert_nodes([node("n1")])
    t = Tracker(["agent-scheduler", "volcano"])
    sim = SimCluster(store, observers=[t.seen])
    running = asyncio.create_task(sim.run())
    await asyncio.sleep(0.2)
    pods = [make_pod(f"p{i}", scheduler="agent-scheduler", requests={"cpu": "1"}, duration=0.2) for i in range(3)]
    t.submitted(pods)
    await store.upsert_pods(pods)
    version = (await store.get_nodes(["n1"]))["n1"].version
    binder = Binder(store.client, store.keys, "agent-scheduler")
    await binder.commit([Placement(uid=p.uid, node="n1", request=p.request(), version=version) for p in pods[:2]])
    for _ in range(100):  # bound, started, ended after 0.2 s, deleted
        if t.completed == 2:
            break
        await asyncio.sleep(0.05)
    sim.stop()
    async with asyncio.timeout(2):
        await running
    assert (len(t.latencies["agent-scheduler"]), t.completed, t.pending("agent-scheduler")) == (2, 2, 1)


async def test_a_pod_bound_between_the_read_of_its_creation_and_the_fetch_counts_at_its_binding(store: Store) -> None:
    """A reader fetches the records of the changes it read; a pod bound in between comes back bound, with
    only its creation's time read so far. Counted then, it was bound at its creation: the demo with the
    simulated kubelets reading 20 ms apart reported agent pods bound at p50 10 ms, their stages adding up
    to 35."""
    reader = Informer(store, [Kind.POD])
    listing = await reader.listing()
    t = Tracker(["agent-scheduler", "volcano"])
    t.seen(listing)
    pod = make_pod("p", scheduler="agent-scheduler", requests={"cpu": "1"})
    t.submitted([pod])
    await store.upsert_pods([pod])
    feed = FeedReader(store, listing.version, listing.epoch)
    created = await feed.read(block_ms=100)
    time.sleep(0.3)
    await store.upsert_pods([msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name="n1"))])
    t.seen(await reader.fetch(feed.position, feed.epoch, created))  # the record says bound; the read, created
    assert len(t.latencies["agent-scheduler"]) == 0
    bound = await feed.read(block_ms=100)
    t.seen(await reader.fetch(feed.position, feed.epoch, bound))
    [latency_ms] = t.latencies["agent-scheduler"]
    assert latency_ms >= 300


async def test_the_write_stage_is_from_the_submission_to_the_stores_write_that_created_the_pod(store: Store) -> None:
    """The demo's write of a round comes before the agent scheduler's first stage (its feed starts at
    the write): submitted 0.2 s before the write, each pod counts 0.2 s or more; a pod first seen in a
    listing (its creation's time unknown) is not counted; ``written_lately`` counts each pod once."""
    reader = Informer(store, [Kind.POD])
    early = make_pod("early", scheduler="agent-scheduler", requests={"cpu": "1"})
    t = Tracker(["agent-scheduler", "volcano"])
    t.submitted([early])
    await store.upsert_pods([early])
    listing = await reader.listing()
    t.seen(listing)
    pods = [make_pod(f"p{i}", scheduler="agent-scheduler", requests={"cpu": "1"}) for i in range(2)]
    t.submitted(pods)
    time.sleep(0.2)
    await store.upsert_pods(pods)
    feed = FeedReader(store, listing.version, listing.epoch)
    t.seen(await reader.fetch(feed.position, feed.epoch, await feed.read(block_ms=100), feed.carried))
    write = t.written("agent-scheduler")
    assert write.pods == 2 and write.seconds >= 0.4 and t.written("volcano").pods == 0
    assert t.written_lately("agent-scheduler") == write
    lately = t.written_lately("agent-scheduler")
    assert lately is not None and lately.pods == 0
    await feed.close()
