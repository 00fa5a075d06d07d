"""The demo's processes: the sharding controller and both schedulers as OS processes, each logging to a file."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

import msgspec

from cluster.sim.pools import LEAF_LABEL, SPINE_LABEL
from cluster.store.keys import Keys


class Driver(Protocol):
    """Where the load comes from: a workload description or a trace."""

    sharding: str

    def describe(self) -> str: ...
    def queues(self) -> list[str]: ...
    async def prepare(self) -> None: ...
    async def run(self, stop: asyncio.Event) -> None: ...


class Options(msgspec.Struct, frozen=True, kw_only=True):
    duration: float
    workers: int = 2
    out: Path = Path(".")


# -- the processes ---------------------------------------------------------------------------


class Child:
    """One caldera process, its output in a log file."""

    def __init__(self, name: str, args: list[str], logs: Path) -> None:
        self.name = name
        self.log = logs / f"{name}.log"
        env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "caldera", name, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )

    def wait_ready(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-5:]
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {' | '.join(tail)}")
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s (see {self.log})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def traceback(self) -> bool:
        return self.log.exists() and "Traceback" in self.log.read_text(errors="replace")


def start_processes(children: list[Child], url: str, keys: Keys, driver: Driver, options: Options, logs: Path) -> None:
    """Start the three processes into ``children`` (the caller stops them, even when this fails) and wait until they serve."""
    common = ["--redis-url", url, "--cluster", keys.cluster, "--metrics-port", "0"]
    children.append(
        Child(
            "sharding",
            [*common, "--scheduler-configs", driver.sharding, "--shard-sync-period", "5s", "--min-dwell", "20s"],
            logs,
        )
    )
    switches = f"{LEAF_LABEL},{SPINE_LABEL}"  # the HyperNodes of pools with switches
    children.append(
        Child("batch-scheduler", [*common, "--schedule-period", "500ms", "--hypernode-labels", switches], logs)
    )
    children.append(Child("agent-scheduler", [*common, "--workers", str(options.workers)], logs))
    children[0].wait_ready("serving", 60)
    children[1].wait_ready("batch-scheduler: serving", 60)
    children[2].wait_ready("workers ready", 120)
