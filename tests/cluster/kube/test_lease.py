"""Leader election with a Kubernetes Lease against the in-repo API server."""

from __future__ import annotations

import asyncio
import time

import kubernetes

from cluster.kube.lease import KubeLease
from tests.kubeapi.fixtures import kube_api  # noqa: F401
from tests.kubeapi.server import KubeAPIServer

TIMES = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.2}


def lease(server: KubeAPIServer, holder: str) -> KubeLease:
    return KubeLease(
        kubernetes.client.ApiClient(server.configuration()), "batch-scheduler", "caldera-system", holder, **TIMES
    )


async def test_one_leader_at_a_time_and_a_crashed_leader_is_replaced_within_the_lease(kube_api: KubeAPIServer) -> None:  # noqa: F811
    a, b = lease(kube_api, "a"), lease(kube_api, "b")
    stop = asyncio.Event()
    ta, tb = asyncio.create_task(a.run(stop)), asyncio.create_task(b.run(stop))
    deadline = time.monotonic() + 5
    while not (a.leading or b.leading):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    for _ in range(30):  # 1.5 s of samples: never both
        assert not (a.leading and b.leading)
        await asyncio.sleep(0.05)
    leader, follower, leader_task = (a, b, ta) if a.leading else (b, a, tb)
    assert not follower.leading
    leader_task.cancel()  # a crash: no release, the lease must run out
    crashed = time.monotonic()
    while not follower.leading:
        assert time.monotonic() - crashed < TIMES["lease_duration"] + 2 * TIMES["retry_period"] + 1.0
        await asyncio.sleep(0.05)
    assert not leader.leading
    assert follower.transitions == 1
    stop.set()
    await asyncio.gather(ta, tb, return_exceptions=True)


async def test_a_leader_that_stops_hands_over_at_once(kube_api: KubeAPIServer) -> None:  # noqa: F811
    a, b = lease(kube_api, "a"), lease(kube_api, "b")
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    ta = asyncio.create_task(a.run(stop_a))
    await asyncio.wait_for(a.acquired.wait(), 5)
    tb = asyncio.create_task(b.run(stop_b))
    await asyncio.sleep(0.5)
    assert a.leading and not b.leading
    stop_a.set()
    await ta  # releases the lease on the way out
    start = time.monotonic()
    await asyncio.wait_for(b.acquired.wait(), 5)
    assert time.monotonic() - start < TIMES["lease_duration"]  # did not wait for it to run out
    stop_b.set()
    await tb
