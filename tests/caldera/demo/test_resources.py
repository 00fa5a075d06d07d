"""The resource sampler on real processes and a real Redis; growth after the warm-up, robust to one noisy sample."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from caldera.demo.resources import CpuUse, Sampler, Usage, cpu_use, growth
from cluster.runtime.redis_server import RedisServer
from cluster.store.store import Store

PARENT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
time.sleep(600)
"""


@pytest.fixture
def parent() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", PARENT])
    try:
        time.sleep(0.5)  # its child started
        yield proc
    finally:
        import psutil

        for p in psutil.Process(proc.pid).children(recursive=True):
            p.kill()
        proc.kill()
        proc.wait()


async def test_every_process_is_sampled_by_name_and_the_audit_recorded(
    store: Store, parent: subprocess.Popen[bytes]
) -> None:
    sampler = Sampler(store)
    await sampler.sample(1.0, {"sharding": parent.pid, "batch-scheduler": None})
    named = {u.process: u for u in sampler.usage}
    # the demo itself, the Redis it talks to (by the pid INFO gives), the process and what it started, by role
    [child] = set(named) - {"caldera demo", "redis-server", "sharding"}
    assert child.startswith("python"), named
    assert all(u.rss_mb > 1 and u.fds >= 3 and u.t_s == 1.0 for u in sampler.usage), sampler.usage
    assert named["caldera demo"].cpu_s > 0.1 and all(u.cpu_s >= 0 for u in sampler.usage)  # this test's own process
    assert [(a.t_s, a.ok, a.violations) for a in sampler.audits] == [(1.0, True, [])]


async def test_an_audit_the_store_cannot_answer_is_recorded_unfinished_not_raised(redis_server: RedisServer) -> None:
    """A store busy past the client's timeout (a soak's backlog made the audit's dump outlast it) once killed
    the sampler, and with it every later sample."""
    import redis.asyncio as aioredis

    from cluster.store.keys import Keys

    busy = redis.Redis.from_url(redis_server.url, socket_timeout=30)
    spin = (
        "local t = redis.call('TIME') while true do local n = redis.call('TIME') if n[1] - t[1] >= 6 then break end end"
    )
    blocker = threading.Thread(target=lambda: busy.eval(spin, 0))
    blocker.start()
    c = aioredis.Redis.from_url(redis_server.url, socket_timeout=2)
    try:
        await asyncio.sleep(0.3)
        sampler = Sampler(Store(c, Keys("busy")))
        sampler.redis = 0  # not asked: the store is busy
        await sampler.sample(3.0, {})
    finally:
        blocker.join()
        await c.aclose()
        busy.close()
    [a] = sampler.audits
    assert a.ok is None and a.t_s == 3.0 and a.error and not a.violations, a


def usage(process: str, rss: list[float]) -> list[Usage]:
    return [Usage(t_s=10.0 * i, process=process, rss_mb=r, fds=10) for i, r in enumerate(rss)]


@pytest.mark.parametrize(
    "rss, pct",
    [
        ([500, 100, 100, 100, 100, 100, 100, 100, 100, 100], 0.0),  # the warm-up (first 20%) is not counted
        ([100, 100, 100, 100, 100, 400, 100, 100, 100, 100], 0.0),  # one noisy sample moves neither end
        ([100, 100, 100, 100, 100, 100, 100, 100, 100, 900], 0.0),  # not even the last
        ([100, 100, 100, 102, 104, 106, 108, 110, 112, 114], 9.8),  # steady: 102 (median of 100..104) → 112
    ],
)
def test_growth_is_from_the_first_to_the_last_samples_after_the_warm_up_in_medians(
    rss: list[float], pct: float
) -> None:
    [g] = growth(usage("p", rss))
    assert g.rss_pct == pct and g.fds_pct == 0.0, g


def test_a_rising_load_is_warm_up_until_it_stops_rising() -> None:
    """The default workload's load rises over the first 60% of the run; memory that follows it is no leak."""
    from caldera.demo.tracker import Tracker
    from caldera.demo.workload import AGENT, VOLCANO, WorkloadDriver, load

    rising_then_flat = usage("p", [100, 110, 120, 130, 140, 150, 160, 160, 160, 160, 160])
    [early] = growth(rising_then_flat, 0.2)
    [steady] = growth(rising_then_flat, 0.6)
    assert early.rss_pct > 5 and steady.rss_pct == 0.0
    driver = WorkloadDriver(load(None), None, Tracker([AGENT, VOLCANO]), seed=1, duration=60)  # type: ignore[arg-type]
    assert driver.steady_after == 0.6


def cpu(process: str, counts: list[tuple[float, float]]) -> list[Usage]:
    return [Usage(t_s=t, process=process, rss_mb=100, fds=10, cpu_s=c) for t, c in counts]


def test_cpu_is_what_each_process_used_from_its_first_sample_to_its_last_most_first() -> None:
    usage = [
        *cpu("loop", [(0, 5.0), (10, 7.0), (20, 9.0)]),  # 4 s of CPU over 20 s: 0.2 cores
        *cpu("redis", [(20, 12.0), (0, 2.0), (10, 6.0)]),  # in any order: 10 s over 20 s
        # started again under its name between the samples: 1.5 s since, counted whole
        *cpu("worker", [(0, 3.0), (10, 4.0), (20, 1.5)]),
        *cpu("late", [(20, 30.0)]),  # sampled once: no span to measure over
    ]
    assert cpu_use(usage) == [
        CpuUse(process="redis", cpu_s=10.0, cores=0.5),
        CpuUse(process="loop", cpu_s=4.0, cores=0.2),
        CpuUse(process="worker", cpu_s=2.5, cores=0.125),
    ]
