"""Eight OS processes race commits (single and gang) on 50 nodes of a real redis-server.

A third of the pods take GPU cards: whole ones, or shares of a card in thousandths, each
racer picking the card from its own (stale) view. Afterwards: `caldera audit` passes, no
node and no card is over its room, no pod was committed to two nodes, every gang commit
was all or nothing, cards filled up, and both resolved and true conflicts happened (so the
run exercised the re-check and the conflict path).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import subprocess
import sys
import time
from pathlib import Path

import redis.asyncio as aioredis

from binder.commit import Binder
from binder.results import Committed, Conflict, Placement
from cluster.model.devices import GPU_MILLI, card_resource
from cluster.model.resources import Resources
from cluster.runtime.redis_server import RedisServer
from cluster.store.keys import Keys
from cluster.store.store import Store
from tests.builders import gpu_node, pod

PROCESSES = 8
CARDS = 4  # each node's GPUs
SECONDS = 10.0
SHARED = 400


async def race(url: str, cluster: str, index: int, seconds: float, out: str) -> None:
    client = aioredis.Redis.from_url(url)
    store = Store(client, Keys(cluster))
    binder = Binder(client, store.keys, f"c{index}")
    rng = random.Random(index)
    view = {r.name: r for r in await store.list_nodes()}
    figures = {n: (r.allocatable - r.allocated, r.version) for n, r in view.items()}
    shared = [f"uid-shared-{i}" for i in range(SHARED)]
    mine: list[str] = []
    requests = {}
    committed: list[tuple[str, str]] = []
    gangs: list[list[str]] = []
    bound_by_me: list[str] = []
    resolved = conflicts = calls = carded = 0
    made = 0
    shares: dict[str, int] = {}  # uid -> thousandths of one card
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        calls += 1
        if calls % 25 == 0:
            figures = {r.name: (r.allocatable - r.allocated, r.version) for r in await store.list_nodes()}
        op = rng.random()
        if op < 0.2 and bound_by_me:
            victims = rng.sample(bound_by_me, min(len(bound_by_me), 5))
            await store.delete_pods(victims)
            bound_by_me = [u for u in bound_by_me if u not in victims]
            continue
        if op < 0.3 or len(mine) < 10:
            new = [
                pod(
                    f"c{index}-{made + k}",
                    cpu=f"{rng.choice([250, 500, 1000, 2000])}m",
                    memory=f"{rng.choice([1, 2, 4])}Gi",
                    gpu=rng.choice([0, 0, 1]),
                )
                for k in range(20)
            ]
            for p in new:  # a third of the pods without whole GPUs share one card
                if not p.request().get("nvidia.com/gpu") and rng.random() < 0.5:
                    shares[p.uid] = rng.choice([250, 400, 500, 700])
            made += 20
            await store.upsert_pods(new)
            mine += [p.uid for p in new]
            continue
        gang = rng.random() < 0.3
        pool = mine if rng.random() < 0.7 else shared
        uids = rng.sample(pool, min(len(pool), rng.randint(2, 5) if gang else rng.randint(1, 8)))
        missing = [u for u in uids if u not in requests]
        if missing:
            for uid, rec in (await store.get_pods(missing)).items():
                requests[uid] = rec.request
        uids = [u for u in uids if u in requests]
        placements = []
        for uid in uids:
            fitting = [n for n, (free, _) in figures.items() if requests[uid].fits_in(free)]
            name = rng.choice(fitting or list(figures))
            amount = 1000 if requests[uid].get("nvidia.com/gpu") else shares.get(uid, 0)
            cards = Resources()
            if amount:
                free = figures[name][0]
                roomy = [i for i in range(CARDS) if free.get(card_resource(i), 0) >= amount]
                cards = Resources({card_resource(rng.choice(roomy or list(range(CARDS)))): amount})
            placements.append(
                Placement(uid=uid, node=name, request=requests[uid], version=figures[name][1], cards=cards)
            )
        if not placements:
            continue
        results = await binder.commit(placements, gang=gang)
        for p, r in zip(placements, results):
            if isinstance(r, Committed):
                committed.append((p.uid, p.node))
                resolved += r.resolved
                if not r.idempotent:
                    bound_by_me.append(p.uid)
                    free, _ = figures[p.node]
                    figures[p.node] = (free - p.request - p.cards, r.version)
                    carded += bool(p.cards)
            elif isinstance(r, Conflict):
                conflicts += 1
                figures[p.node] = (r.free, r.version)
        if gang:
            gangs.append(
                [type(r).__name__ + ("-idem" if isinstance(r, Committed) and r.idempotent else "") for r in results]
            )
        mine = [u for u in mine if u not in {p.uid for p, r in zip(placements, results) if isinstance(r, Committed)}]
    await client.aclose()
    Path(out).write_text(
        json.dumps(
            {"committed": committed, "gangs": gangs, "resolved": resolved, "conflicts": conflicts, "carded": carded}
        )
    )


def racer(url: str, cluster: str, index: int, seconds: float, out: str) -> None:
    asyncio.run(race(url, cluster, index, seconds, out))


async def setup(url: str, keys: Keys) -> None:
    client = aioredis.Redis.from_url(url)
    store = Store(client, keys)
    shared = {"nvidia.com/gpu": 4, GPU_MILLI: 4000, "pods": 30}  # cards shared in thousandths: tracked one by one
    await store.upsert_nodes([gpu_node(f"n{i:02d}", cpu="8", memory="32Gi", allocatable=shared) for i in range(50)])
    await store.upsert_pods([pod(f"shared-{i}", cpu="500m", memory="1Gi") for i in range(SHARED)])
    await client.aclose()


async def over_allocatable(url: str, keys: Keys) -> tuple[list[str], int]:
    """The nodes over their room in some resource or card, and how many cards are full."""
    client = aioredis.Redis.from_url(url)
    nodes = await Store(client, keys).list_nodes()
    await client.aclose()
    full = sum(r.allocated.get(card_resource(i), 0) == 1000 for r in nodes for i in range(CARDS))
    return [r.name for r in nodes if not r.allocated.fits_in(r.allocatable)], full


def test_eight_processes_never_over_commit(redis_server: RedisServer, tmp_path: Path) -> None:
    keys = Keys("race")
    asyncio.run(setup(redis_server.url, keys))
    ctx = multiprocessing.get_context("spawn")
    outs = [str(tmp_path / f"racer{i}.json") for i in range(PROCESSES)]
    procs = [
        ctx.Process(target=racer, args=(redis_server.url, keys.cluster, i, SECONDS, outs[i])) for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    reports = [json.loads(Path(o).read_text()) for o in outs]

    audit = subprocess.run(
        [sys.executable, "-m", "caldera", "audit", "--redis-url", redis_server.url, "--cluster", keys.cluster],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert audit.stdout.strip() == "audit: ok"
    over, full_cards = asyncio.run(over_allocatable(redis_server.url, keys))
    assert over == [] and full_cards > 0
    assert sum(r["carded"] for r in reports) > 300

    nodes_of: dict[str, set[str]] = {}
    for r in reports:
        for uid, name in r["committed"]:
            nodes_of.setdefault(uid, set()).add(name)
    assert all(len(n) == 1 for n in nodes_of.values()), {u: n for u, n in nodes_of.items() if len(n) > 1}
    assert sum(len(r["committed"]) for r in reports) > 1000

    gangs = [g for r in reports for g in r["gangs"]]
    assert any(all(k.startswith("Committed") for k in g) for g in gangs)
    assert any(not any(k.startswith("Committed") for k in g) for g in gangs)
    for g in gangs:
        fresh = [k == "Committed" for k in g]
        assert all(k.startswith("Committed") for k in g) or not any(fresh), g

    assert sum(r["resolved"] for r in reports) > 0
    assert sum(r["conflicts"] for r in reports) > 0
