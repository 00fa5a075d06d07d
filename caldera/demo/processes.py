"""The demo's processes: the sharding controller and both schedulers as supervised OS processes, each logging to a file."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Protocol

import msgspec

from caldera.demo.resources import default_period
from caldera.demo.supervisor import Supervisor
from cluster.sim.pools import LEAF_LABEL, SPINE_LABEL
from cluster.store.keys import Keys


class Driver(Protocol):
    """Where the load comes from: a workload description or a trace."""

    sharding: str
    steady_after: float  # the share of the run after which the load no longer rises (the resources' warm-up)

    def describe(self) -> str: ...
    def queues(self) -> list[str]: ...
    async def prepare(self) -> None: ...
    async def run(self, stop: asyncio.Event) -> None: ...


class Options(msgspec.Struct, frozen=True, kw_only=True):
    duration: float
    workers: int | None = None  # None: the agent scheduler's --workers auto
    out: Path = Path(".")
    sample_every: float | None = None  # the resource sampler's period; None: caldera.demo.resources.default_period
    # How much the run's own thread lowers its CPU priority once the processes serve (caldera demo:
    # caldera.demo.run.HARNESS_NICE; 0 for a bench that goes on in the same process afterwards)
    nice: int = 0

    @property
    def sample_every_s(self) -> float:
        return self.sample_every if self.sample_every is not None else default_period(self.duration)


# -- the processes ---------------------------------------------------------------------------

READY = {
    "sharding": "serving",
    "batch-scheduler": "batch-scheduler: serving volcano",
    "agent-scheduler": "workers ready",
}
READY_TIMEOUT_S = {"sharding": 60.0, "batch-scheduler": 60.0, "agent-scheduler": 120.0}


def start_processes(supervisor: Supervisor, url: str, keys: Keys, driver: Driver, options: Options) -> None:
    """Start the three processes under ``supervisor`` (the caller stops them, even when this fails); call
    :func:`wait_ready` next."""
    common = ["--redis-url", url, "--cluster", keys.cluster, "--metrics-port", "0"]
    switches = f"{LEAF_LABEL},{SPINE_LABEL}"  # the HyperNodes of pools with switches
    flags = {
        "sharding": [
            *common,
            "--scheduler-configs",
            driver.sharding,
            "--shard-sync-period",
            "5s",
            "--min-dwell",
            "20s",
        ],
        "batch-scheduler": [*common, "--schedule-period", "500ms", "--hypernode-labels", switches],
        "agent-scheduler": [*common, *(["--workers", str(options.workers)] if options.workers else [])],
    }
    for name, args in flags.items():
        supervisor.start(name, [sys.executable, "-m", "caldera", name, *args], ready=READY[name])


def wait_ready(supervisor: Supervisor) -> None:
    """Until every process serves; RuntimeError naming the one that did not."""
    for name in supervisor.names():
        supervisor.wait_ready(name, READY_TIMEOUT_S[name])


def demo_env() -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_MODE": "disabled"}
