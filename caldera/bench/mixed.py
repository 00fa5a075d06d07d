"""``caldera bench mixed``: the demo's workload without the view — both schedulers at once.

The same processes as ``caldera demo`` (sharding controller, batch scheduler, agent
scheduler with Ray workers) and the same workload (``--workload``, default the packaged
one) for ``--duration`` seconds; the figures are the demo report's, printed instead of
drawn: per scheduler pods/s and submit → bound percentiles, gang jobs started per queue,
nodes moved between shards, conflicts and the audit.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Annotated, Any

import msgspec

from caldera.bench.runner import MAX_WORKERS, figures, run_bench
from caldera.demo import workload as workloads
from caldera.demo.config import WEEK_S
from caldera.demo.processes import Options
from caldera.demo.run import run_system
from caldera.demo.view import View
from caldera.demo.workload import WorkloadDriver
from caldera.flag_config import checked, from_flags, readable_file, redis_url, seconds, whole
from cluster.runtime.flags import workers_or_auto


def add_parser(sub: Any) -> None:
    p = sub.add_parser("mixed", help="the demo's workload without the view: both schedulers, the sharding controller")
    p.add_argument(
        "--duration",
        type=seconds,
        default="30s",
        help="how long the load runs: 90s, 30m or plain seconds (default: 30s)",
    )
    p.add_argument(
        "--workload", default=None, help="workload YAML (default: the packaged caldera/demo/workloads/default.yaml)"
    )
    p.add_argument(
        "--workers",
        type=workers_or_auto,
        default="auto",
        help="agent scheduler workers, or auto: its own default, one per core beyond one (default: auto)",
    )
    p.add_argument("--seed", type=whole, default=1)
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


class MixedBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench mixed``'s flags, checked."""

    duration: Annotated[float, msgspec.Meta(gt=0, le=WEEK_S, description="a duration above 0 and at most 7 days")]
    workload: str | None = None
    workers: Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS, description=f"1 to {MAX_WORKERS} workers")] | None = None
    seed: Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1, description="a 64-bit integer")] = 1
    redis_url: str | None = None
    json: bool = False


def config(args: argparse.Namespace) -> tuple[MixedBench, workloads.Workload]:
    """The flags checked and the workload read (ValueError naming the flag or the field); nothing started."""
    bench = from_flags(MixedBench, args, redis_url=redis_url("--redis-url", args.redis_url))
    return bench, workloads.load(readable_file("--workload", bench.workload) if bench.workload is not None else None)


async def measure(url: str, w: workloads.Workload, duration: float, workers: int | None, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="caldera-bench-mixed-") as out:
        outcome = await run_system(
            url,
            lambda store, tracker: WorkloadDriver(w, store, tracker, seed=seed, duration=duration),
            Options(duration=duration, workers=workers, out=Path(out)),
            View(None),
        )
    report = msgspec.to_builtins(outcome.report)
    return {
        k: report[k]
        for k in (
            "duration_s",
            "cluster",
            "schedulers",
            "jobs",
            "shards",
            "conflicts",
            "tracebacks",
            "restarts",
            "audit",
        )
    }


def run(args: argparse.Namespace) -> int:
    checked_flags = checked("caldera bench mixed", args, config)
    if checked_flags is None:
        return 2
    bench, w = checked_flags
    return run_bench(
        bench,
        lambda url: measure(url, w, bench.duration, bench.workers, bench.seed),
        figures(12),
        ok=lambda report: report["audit"] == "ok" and not report["tracebacks"] and not report["restarts"],
    )
