"""``caldera bench mixed``: the demo's workload without the view — both schedulers at once.

The same processes as ``caldera demo`` (sharding controller, batch scheduler, agent
scheduler with Ray workers) and the same workload (``--workload``, default the packaged
one) for ``--duration`` seconds; the figures are the demo report's, printed instead of
drawn: per scheduler pods/s and submit → bound percentiles, gang jobs started per queue,
nodes moved between shards, conflicts and the audit.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from caldera.bench.runner import figures, run_bench
from caldera.demo import workload as workloads
from caldera.demo.processes import Options
from caldera.demo.run import run_system
from caldera.demo.view import View
from caldera.demo.workload import WorkloadDriver
from cluster.model.text import one_line


def add_parser(sub: Any) -> None:
    p = sub.add_parser("mixed", help="the demo's workload without the view: both schedulers, the sharding controller")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of load (default: 30)")
    p.add_argument(
        "--workload", default=None, help="workload YAML (default: the packaged caldera/demo/workloads/default.yaml)"
    )
    p.add_argument("--workers", type=int, default=2, help="agent scheduler workers (default: 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


async def measure(url: str, w: workloads.Workload, duration: float, workers: int, seed: int) -> dict[str, Any]:
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
        for k in ("duration_s", "cluster", "schedulers", "jobs", "shards", "conflicts", "tracebacks", "audit")
    }


def run(args: argparse.Namespace) -> int:
    if args.duration <= 0 or args.workers < 1:
        print(
            f"caldera bench mixed: error: --duration {args.duration:g}, --workers {args.workers} "
            "(expected a positive duration and at least one worker)",
            file=sys.stderr,
        )
        return 2
    try:
        w = workloads.load(args.workload)
    except ValueError as e:
        print(f"caldera bench mixed: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    return run_bench(
        args,
        lambda url: measure(url, w, args.duration, args.workers, args.seed),
        figures(12),
        ok=lambda report: report["audit"] == "ok" and not report["tracebacks"],
    )
