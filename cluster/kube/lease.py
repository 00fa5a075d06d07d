"""Leader election with a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does.

The holder renews ``renewTime`` every ``retry_period``; it acts only while its last
successful renewal is younger than ``renew_deadline`` (shorter than the lease), so it has
stopped before anyone else may take over. A candidate takes the Lease when it has seen
the same record unchanged for ``lease_duration`` (measured on its own clock, so clocks
need not agree). Every write carries the resourceVersion it read: of two candidates
racing, one gets a 409 and stays a follower.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from cluster.kube.connect import KubeConnection
from cluster.runtime.process import Elect, LeaseConfig
from cluster.store.pause import pause


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class KubeLease:
    def __init__(
        self,
        api: k8s.ApiClient,
        name: str,
        namespace: str,
        holder: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError(
                f"leader election: expected retry period {retry_period}s < renew deadline {renew_deadline}s "
                f"< lease duration {lease_duration}s"
            )
        self.api = k8s.CoordinationV1Api(api)
        self.name, self.namespace, self.holder = name, namespace, holder
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.clock = clock
        self.acquired = asyncio.Event()
        self.transitions = 0
        self._renewed = -1e18  # clock time of our last successful write
        self._observed: tuple[str, float] | None = None  # (the other holder's record, when we first saw it)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lease")

    @property
    def leading(self) -> bool:
        return self.clock() - self._renewed < self.renew_deadline

    def _spec(self, acquire: bool, transitions: int) -> k8s.V1LeaseSpec:
        now = _now()
        return k8s.V1LeaseSpec(
            holder_identity=self.holder,
            lease_duration_seconds=int(self.lease_duration),
            renew_time=now,
            acquire_time=now if acquire else None,
            lease_transitions=transitions,
        )

    def _try(self) -> bool:
        """One attempt to acquire or renew (runs in a thread: the client is synchronous)."""
        try:
            lease: Any = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            body = k8s.V1Lease(
                metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace), spec=self._spec(True, 0)
            )
            try:
                self.api.create_namespaced_lease(self.namespace, body)
                return True
            except ApiException as e2:
                if e2.status == 409:
                    return False  # someone created it first
                raise
        spec = lease.spec or k8s.V1LeaseSpec()
        mine = spec.holder_identity == self.holder
        record = f"{spec.holder_identity}|{spec.renew_time}|{lease.metadata.resource_version}"
        if not mine and spec.holder_identity:
            now = self.clock()
            if self._observed is None or self._observed[0] != record:
                self._observed = (record, now)  # the holder renewed (or changed): wait a full lease from now
                return False
            if now - self._observed[1] < self.lease_duration:
                return False
        transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
        lease.spec = self._spec(not mine, transitions)
        if mine and spec.acquire_time is not None:
            lease.spec.acquire_time = spec.acquire_time
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)  # carries the resourceVersion read
        except ApiException as e:
            if e.status == 409:
                return False
            raise
        if not mine:
            self.transitions += 1
        return True

    async def try_acquire(self) -> bool:
        start = self.clock()
        try:
            ok = await asyncio.get_running_loop().run_in_executor(self._pool, self._try)
        except Exception:  # the API server is unreachable: we cannot renew, so we stop leading in time
            ok = False
        if ok:
            self._renewed = start
            self.acquired.set()
        elif not self.leading:
            self.acquired.clear()
        return ok

    async def run(self, stop: asyncio.Event) -> None:
        """Acquire and renew until ``stop``; then release (an empty holder lets others take it at once)."""
        try:
            while not stop.is_set():
                await self.try_acquire()
                await pause(stop, self.retry_period)
            if self.leading:
                await asyncio.get_running_loop().run_in_executor(self._pool, self._release)
        finally:
            self._renewed = -1e18
            self._pool.shutdown(wait=False)

    def _release(self) -> None:
        try:
            lease: Any = self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is not None and lease.spec.holder_identity == self.holder:
                lease.spec.holder_identity = ""
                self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except Exception:  # best effort: otherwise the lease simply expires
            pass


def kube_elect(connection: KubeConnection) -> Elect:
    """Leader election with a Lease in the cluster ``connection`` reaches (for :func:`run_process`)."""

    def elect(settings: LeaseConfig, name: str, holder: str) -> KubeLease:
        return KubeLease(
            connection.client(),
            name,
            settings.namespace,
            holder,
            lease_duration=settings.duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
        )

    return elect


def lease_holder(api: k8s.ApiClient, name: str, namespace: str) -> str:
    """Who holds the Lease now ('' for nobody, or no such Lease)."""
    try:
        lease = k8s.CoordinationV1Api(api).read_namespaced_lease(name, namespace, _request_timeout=(5, 10))
    except ApiException as e:
        if e.status == 404:
            return ""
        raise
    return str((lease.spec.holder_identity if lease.spec is not None else "") or "")
