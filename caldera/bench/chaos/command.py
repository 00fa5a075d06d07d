"""``caldera bench chaos``: the fault matrix — every fault, several rounds, one row each.

See :mod:`caldera.bench.chaos` for what runs and :mod:`.rounds` for what is measured. The
report is a table, or with ``--json`` ``{"faults": [{"fault", "rounds", "recovery_s_p50",
"recovery_s_max", "lost", "double", "overcommitted", …}, …]}``. It exits 0 when every row
has nothing lost, nothing bound twice, nothing over-committed and every round recovered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from caldera._loop import run_loop
from caldera.bench.chaos.faults import BY_NAME, FAULTS, Fault
from caldera.bench.chaos.rounds import OBSERVE_S, Round, Row, row, run_round, settled
from caldera.bench.chaos.system import NoApiServer, System, running
from caldera.bench.runner import positive_int
from cluster.model.text import one_line

WARMUP_S = 15.0
GAP_S = (2.0, 6.0)  # a quiet moment, then this long (uniform) before the next fault


class Report(msgspec.Struct, frozen=True):
    faults: list[Row]


class ChaosConfig(msgspec.Struct, frozen=True, kw_only=True):
    faults: tuple[Fault, ...]
    rounds: int
    timeout: float
    warmup: float
    observe: float
    seed: int
    workers: int
    out: Path | None


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "chaos", help="faults one at a time (kill -9, Redis and API restarts, slow API, failing binds, stalls)"
    )
    p.add_argument("--rounds", type=positive_int, default=3, help="rounds of each fault (default: 3)")
    p.add_argument("--quick", action="store_true", help="one round of each fault")
    p.add_argument(
        "--faults",
        default="",
        help=f"comma-separated faults to run (default: all: {', '.join(f.name for f in FAULTS)})",
    )
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a round may take to recover (default: 120)")
    p.add_argument(
        "--warmup", type=float, default=WARMUP_S, help=f"seconds of load before the first fault (default: {WARMUP_S:g})"
    )
    p.add_argument(
        "--observe",
        type=float,
        default=OBSERVE_S,
        help=f"seconds each round is watched at least, once its fault is over (default: {OBSERVE_S:g})",
    )
    p.add_argument("--seed", type=int, default=1, help="the load's and the moments' random seed (default: 1)")
    p.add_argument("--workers", type=positive_int, default=2, help="agent scheduler workers (default: 2)")
    p.add_argument("--out", default=None, help="keep the processes' logs in this folder (default: a temporary one)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def chaos_config(args: argparse.Namespace) -> ChaosConfig:
    """The flags, checked (ValueError with one line naming the flag)."""
    names = [n.strip() for n in args.faults.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"--faults: {unknown[0]!r} is not a fault (expected some of: {', '.join(BY_NAME)})")
    if not 0 < args.timeout < float("inf"):
        raise ValueError(f"--timeout: {args.timeout} (expected a positive number of seconds)")
    for flag, value in (("--warmup", args.warmup), ("--observe", args.observe)):
        if not 0 <= value < float("inf"):
            raise ValueError(f"{flag}: {value} (expected a number of seconds, 0 or more)")
    return ChaosConfig(
        faults=tuple(BY_NAME[n] for n in names) if names else FAULTS,
        rounds=1 if args.quick else args.rounds,
        timeout=args.timeout,
        warmup=args.warmup,
        observe=args.observe,
        seed=args.seed,
        workers=args.workers,
        out=Path(args.out) if args.out else None,
    )


async def measure(system: System, config: ChaosConfig) -> Report:
    stop = asyncio.Event()
    background = [
        asyncio.create_task(system.generate(stop), name="chaos-load"),
        asyncio.create_task(system.supervisor.watch(stop), name="chaos-supervisor"),
    ]
    rows = []
    try:
        await asyncio.sleep(config.warmup)
        for fault in config.faults:
            rounds: list[Round] = []
            for _ in range(config.rounds):
                await settled(system, config.timeout)
                await asyncio.sleep(system.rng.uniform(*GAP_S))
                rounds.append(await run_round(system, fault, timeout=config.timeout, observe=config.observe))
                print(f"chaos: {one_line(str(msgspec.to_builtins(rounds[-1])))}", file=sys.stderr, flush=True)
            rows.append(row(fault, rounds))
    finally:
        stop.set()
        await asyncio.gather(*background, return_exceptions=True)
    return Report(faults=rows)


def healthy(report: Report) -> bool:
    return all(r.lost == r.double == r.overcommitted == r.unrecovered == r.store_violations == 0 for r in report.faults)


def table(report: Report) -> str:
    head = (
        f"{'fault':<20} {'rounds':>6} {'recovery p50':>13} {'max':>7} {'longest wait':>13} {'lost':>5} {'double':>7} "
        f"{'over':>5}  what"
    )
    lines = [head]
    for r in report.faults:
        p50 = f"{r.recovery_s_p50:.1f} s" if r.recovery_s_p50 is not None else "—"
        top = f"{r.recovery_s_max:.1f} s" if r.recovery_s_max is not None else "—"
        note = f" ({r.unrecovered} round(s) not recovered)" if r.unrecovered else ""
        audit = f" (store audit: {r.store_violations} violation(s))" if r.store_violations else ""
        lines.append(
            f"{r.fault:<20} {r.rounds:>6} {p50:>13} {top:>7} {r.wait_s_max:>11.1f} s {r.lost:>5} {r.double:>7} "
            f"{r.overcommitted:>5}  "
            f"{r.what}{note}{audit}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        config = chaos_config(args)
    except ValueError as e:
        print(f"caldera bench chaos: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    try:
        with running(config.out, seed=config.seed, workers=config.workers) as system:
            report = run_loop(measure(system, config))
    except NoApiServer as e:
        print(f"caldera bench chaos: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a process did not start; its log says why
        print(f"caldera bench chaos: error: {one_line(str(e))}", file=sys.stderr)
        return 1
    print(json.dumps(msgspec.to_builtins(report)) if args.json else table(report))
    return 0 if healthy(report) else 1
