"""``caldera demo``'s flags, and their check into a :class:`DemoConfig` before anything starts.

``--duration`` takes ``90s``, ``30m``, ``1h30m`` or plain seconds (at most 7 days);
``--rate X`` multiplies every arrival rate of the workload (training jobs and agent
bursts, on top of the workload's ramp); ``--sample-every`` is how often the processes'
RSS and open files are sampled and the store audited (default: a tenth of the run, at
least 2 s and at most 60 s — a 60 s demo is sampled 10 times, a 30-minute soak every
minute). A workload or trace that does not load, an ``--out`` that is a file or not
writable, a Redis URL of another scheme: one line naming the flag, exit 2, nothing started.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import msgspec

from caldera.demo import workload as workloads
from caldera.demo.resources import default_period
from caldera.demo.tracker import Tracker
from caldera.demo.workload import WorkloadDriver
from caldera.flag_config import from_flags, number, readable_file, redis_url, seconds, whole, writable_folder
from cluster.runtime.flags import workers_or_auto
from cluster.store.store import Store

WEEK_S = 7 * 86400.0
MAX_WORKERS = 64
MAX_RATE = 100.0
INT64 = 2**63


class DemoConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What ``caldera demo`` runs, checked."""

    duration: Annotated[float, msgspec.Meta(gt=0, le=WEEK_S, description="a duration above 0 and at most 7 days")]
    workload: str | None = None
    trace: str | None = None
    trace_nodes: str | None = None
    speedup: Annotated[float, msgspec.Meta(ge=0, le=1e12, description="0 (fit the trace) or a speedup up to 1e12")] = (
        0.0
    )
    trace_schedulers: str | None = None
    # None: the agent scheduler's --workers auto (one per core beyond one, so 1 on two cores)
    workers: Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS, description=f"1 to {MAX_WORKERS} workers")] | None = None
    seed: Annotated[int, msgspec.Meta(ge=-INT64, le=INT64 - 1, description="a 64-bit integer")] = 1
    rate: Annotated[
        float,
        msgspec.Meta(gt=0, le=MAX_RATE, description=f"a multiple of the arrival rates above 0, at most {MAX_RATE:g}"),
    ] = 1.0
    sample_every: Annotated[float, msgspec.Meta(ge=1, le=3600, description="a duration from 1s to 1h")] | None = None
    out: Path = Path(".")
    redis_url: str | None = None

    def __post_init__(self) -> None:
        if (self.trace or self.trace_nodes) and self.workload:
            raise ValueError("--workload and --trace: give one (a workload description or a trace to replay)")
        if self.trace_schedulers and not self.trace:
            raise ValueError("--trace-schedulers needs --trace")
        if (self.trace or self.trace_nodes) and not (self.trace and self.trace_nodes):
            raise ValueError("--trace and --trace-nodes go together (a pods CSV and its nodes CSV)")
        if self.trace and self.rate != 1.0:
            raise ValueError(f"--rate {self.rate:g}: a workload's (a trace's pace is --speedup)")

    @property
    def sample_every_s(self) -> float:
        """The resource sampler's period: ``--sample-every``, or a tenth of the run within [2 s, 60 s]."""
        return self.sample_every if self.sample_every is not None else default_period(self.duration)


DriverFactory = Callable[[Store, Tracker], Any]


def add_parser(sub: Any, run: Callable[[argparse.Namespace], int]) -> None:
    p = sub.add_parser("demo", help="run the whole system on a simulated cluster, live, and report")
    p.add_argument(
        "--duration",
        type=seconds,
        default="60s",
        help="how long the load runs: 90s, 30m, 1h30m or plain seconds (default: 60s)",
    )
    p.add_argument(
        "--workload", default=None, help="workload YAML (default: the packaged caldera/demo/workloads/default.yaml)"
    )
    p.add_argument("--trace", default=None, help="replay this OpenB-format pods CSV instead of a workload")
    p.add_argument("--trace-nodes", default=None, help="the trace's nodes CSV (with --trace)")
    p.add_argument(
        "--speedup",
        type=number,
        default=0.0,
        help="trace seconds per second; 0 = fit the trace into 90%% of --duration (default: 0)",
    )
    p.add_argument(
        "--trace-schedulers",
        default=None,
        help="QOS=SCHEDULER,...,*=SCHEDULER for trace pods (default: LS=agent-scheduler,*=volcano)",
    )
    p.add_argument(
        "--workers",
        type=workers_or_auto,
        default="auto",
        help="agent scheduler workers, or auto: its own default, one per core beyond one (default: auto)",
    )
    p.add_argument("--seed", type=whole, default=1)
    p.add_argument(
        "--rate",
        type=number,
        default=1.0,
        help="multiply every arrival rate of the workload (training jobs, agent bursts) by this (default: 1)",
    )
    p.add_argument(
        "--sample-every",
        type=seconds,
        default=None,
        help="sample RSS and open files of every process, and audit the store, this often "
        "(default: a tenth of --duration, from 2s to 60s)",
    )
    p.add_argument(
        "--out",
        default=".",
        help="folder for demo-report.json, demo-report.png, demo-resources.png and demo-logs/ (default: .)",
    )
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.set_defaults(run=run)


def parse(args: argparse.Namespace) -> tuple[DemoConfig, DriverFactory]:
    """The flags checked, and the driver they ask for (a workload or a trace, read and checked); ValueError with
    one line on bad input. Reads the files it is given; starts nothing, writes nothing."""
    config = from_flags(
        DemoConfig,
        args,
        out=writable_folder("--out", args.out),
        redis_url=redis_url("--redis-url", args.redis_url),
    )
    if config.trace and config.trace_nodes:
        from caldera.demo.replay import TraceDriver, load_trace

        trace = load_trace(
            readable_file("--trace", config.trace),
            readable_file("--trace-nodes", config.trace_nodes),
            config.trace_schedulers,
            config.speedup,
            config.duration,
        )
        return config, lambda store, tracker: TraceDriver(trace, store, tracker)
    w = workloads.load(readable_file("--workload", config.workload) if config.workload is not None else None)
    return config, lambda store, tracker: WorkloadDriver(
        w, store, tracker, seed=config.seed, duration=config.duration, rate=config.rate
    )
