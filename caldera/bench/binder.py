"""``caldera bench binder``: the binder's commit rate beside the raw rate of its script.

Both runs commit the same number of fresh pods, with the same script, the same arguments
and the same batching (``--pipeline`` script calls per round trip), on two identical
clusters in the same Redis. The ceiling sends pre-encoded EVALSHA calls over a raw socket
and only counts the replies — Redis alone, no Python around the calls — so ``ratio`` is
what the binder's Python keeps of what Redis can do. Runs alternate and the best of
``--repeat`` is kept for each, to damp this shared machine's noise.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import time
from typing import Annotated, Any
from urllib.parse import urlparse

import hiredis
import msgspec

from binder.commit import Binder
from binder.results import Committed, Placement
from caldera._store import client
from caldera.bench.runner import MAX_NODES, MAX_PODS, positive_int, run_bench
from caldera.flag_config import checked, from_flags, redis_url
from cluster.sim.pods import make_pod
from cluster.sim.pools import NodePool, pool_nodes
from cluster.store.keys import Keys
from cluster.store.records import encode_request
from cluster.store.scripts import Script
from cluster.store.store import Store


class Figures(msgspec.Struct):
    commits_per_s: float
    ceiling_per_s: float
    ratio: float
    commits: int


class Report(msgspec.Struct, frozen=True, kw_only=True):
    commits_per_s: float  # the workload with the lower ratio
    ceiling_per_s: float
    ratio: float
    single: Figures
    gang8: Figures
    pods: int
    pipeline: int


def add_parser(sub: Any) -> None:
    p = sub.add_parser("binder", help="commits/s of the binder beside the raw script ceiling")
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--pods", type=positive_int, default=20000, help="pods committed per run (default: 20000)")
    p.add_argument("--nodes", type=positive_int, default=1000, help="nodes in each bench cluster (default: 1000)")
    p.add_argument("--pipeline", type=positive_int, default=100, help="script calls per round trip (default: 100)")
    p.add_argument("--repeat", type=positive_int, default=2, help="runs of each kind; the best is kept (default: 2)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


class BinderBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench binder``'s flags, checked."""

    redis_url: str | None = None
    pods: Annotated[int, msgspec.Meta(ge=8, le=MAX_PODS, description=f"8 to {MAX_PODS:,} pods")] = 20000
    nodes: Annotated[int, msgspec.Meta(ge=1, le=MAX_NODES, description=f"1 to {MAX_NODES:,} nodes")] = 1000
    pipeline: Annotated[int, msgspec.Meta(ge=1, le=100_000, description="1 to 100,000 calls")] = 100
    repeat: Annotated[int, msgspec.Meta(ge=1, le=100, description="1 to 100 runs")] = 2
    json: bool = False

    def __post_init__(self) -> None:
        if self.pods % 8:
            raise ValueError(f"--pods {self.pods}: expected a multiple of 8, the gang size")


def config(args: argparse.Namespace) -> BinderBench:
    """The flags checked (ValueError naming the flag); nothing started."""
    return from_flags(BinderBench, args, redis_url=redis_url("--redis-url", args.redis_url))


async def prepare(store: Store, nodes: int, pods: int, gang: int, rng: random.Random) -> list[list[Placement]]:
    """A cluster with room for every pod, the pods pending, and their placements in calls of ``gang``."""
    pool = NodePool(name="bench", count=nodes, resources={"cpu": 100000, "memory": "100Ti", "pods": 1000000})
    versions = await store.upsert_nodes(pool_nodes(pool))
    names = [f"bench-{i:05d}" for i in range(nodes)]
    version_of = dict(zip(names, versions))
    made = [make_pod(f"p-{i}", requests={"cpu": "100m", "memory": "128Mi"}, scheduler="bench") for i in range(pods)]
    for i in range(0, len(made), 2000):
        await store.upsert_pods(made[i : i + 2000])
    calls = []
    for i in range(0, pods, gang):
        chosen = [rng.choice(names) for _ in range(gang)]
        calls.append(
            [
                Placement(uid=p.uid, node=n, request=p.request(), version=version_of[n])
                for p, n in zip(made[i : i + gang], chosen)
            ]
        )
    return calls


def resp(*parts: str | int | bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        b = part if isinstance(part, bytes) else str(part).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def ceiling(url: str, keys: Keys, script: Script, calls: list[list[Placement]], gang: bool, pipeline: int) -> float:
    """Seconds Redis takes to run the calls, pre-encoded, over a raw socket."""
    head: list[str | int] = [keys.prefix, 200000, "bench", "fine", 0, int(gang), 1]
    encoded = []
    for call in calls:
        args: list[str | int] = list(head)
        for p in call:
            args += [p.uid, p.node, p.version, encode_request(p.request), encode_request(p.cards)]
        encoded.append(resp("EVALSHA", script.sha, 1, keys.rv, *args))
    chunks = [b"".join(encoded[i : i + pipeline]) for i in range(0, len(encoded), pipeline)]
    sizes = [len(encoded[i : i + pipeline]) for i in range(0, len(encoded), pipeline)]
    u = urlparse(url)
    with socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379)) as sock:
        reader = hiredis.Reader()
        start = time.perf_counter()
        for chunk, size in zip(chunks, sizes):
            sock.sendall(chunk)
            got = 0
            while got < size:
                data = sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("redis closed the connection")
                reader.feed(data)
                while (reply := reader.gets()) is not False:
                    if isinstance(reply, hiredis.ReplyError):
                        raise RuntimeError(f"ceiling call failed: {reply}")
                    got += 1
        return time.perf_counter() - start


async def through_binder(binder: Binder, calls: list[list[Placement]], gang: bool, pipeline: int) -> tuple[float, int]:
    committed = 0
    start = time.perf_counter()
    for i in range(0, len(calls), pipeline):
        for results in await binder.commit_many(calls[i : i + pipeline], gang=gang):
            committed += sum(isinstance(r, Committed) for r in results)
    return time.perf_counter() - start, committed


async def measure(url: str, args: BinderBench, gang_size: int) -> Figures:
    gang = gang_size > 1
    best_binder = best_ceiling = float("inf")
    commits = 0
    async with client(url) as c:
        for rep in range(args.repeat):
            rng = random.Random(rep)
            ck = Keys(f"bench-ceiling-{gang_size}-{rep}")
            bk = Keys(f"bench-binder-{gang_size}-{rep}")
            c_calls = await prepare(Store(c, ck), args.nodes, args.pods, gang_size, rng)
            b_calls = await prepare(Store(c, bk), args.nodes, args.pods, gang_size, random.Random(rep))
            binder = Binder(c, bk, "bench")
            await binder.load()
            best_ceiling = min(
                best_ceiling,
                await asyncio.to_thread(ceiling, url, ck, binder.commit_script, c_calls, gang, args.pipeline),
            )
            seconds, commits = await through_binder(binder, b_calls, gang, args.pipeline)
            if commits != args.pods:
                raise RuntimeError(f"binder committed {commits} of {args.pods} pods; the bench cluster should fit all")
            best_binder = min(best_binder, seconds)
            await c.flushdb()
    return Figures(
        commits_per_s=round(args.pods / best_binder),
        ceiling_per_s=round(args.pods / best_ceiling),
        ratio=round(best_ceiling / best_binder, 3),
        commits=commits,
    )


async def measure_both(url: str, args: BinderBench) -> Report:
    """Single pods and gangs of 8; the top-level figures are the workload with the lower ratio."""
    single = await measure(url, args, 1)
    gang8 = await measure(url, args, 8)
    worst = min((single, gang8), key=lambda f: f.ratio)
    return Report(
        commits_per_s=worst.commits_per_s,
        ceiling_per_s=worst.ceiling_per_s,
        ratio=worst.ratio,
        single=single,
        gang8=gang8,
        pods=args.pods,
        pipeline=args.pipeline,
    )


def run(args: argparse.Namespace) -> int:
    bench = checked("caldera bench binder", args, config)
    if bench is None:
        return 2
    return run_bench(bench, lambda url: measure_both(url, bench), table)


def table(report: Report) -> str:
    rows = [
        f"{name:<10} {f.commits_per_s:>10,.0f} {f.ceiling_per_s:>10,.0f} {f.ratio:>6.2f}"
        for name, f in (("single", report.single), ("gang of 8", report.gang8))
    ]
    note = "top-level figures are the workload with the lower ratio; the ceiling is the same script over a raw socket"
    return "\n".join([f"{'workload':<10} {'commits/s':>10} {'ceiling/s':>10} {'ratio':>6}", *rows, note])
