"""``caldera bench``: the whole suite, one table, each figure beside its ceiling or baseline.

In one process, one private redis-server and one Ray start: ``binder`` (beside the raw
script over a socket), ``sharding`` (beside the policy alone), ``batch`` (a session at
5,000 nodes beside one at 1,000), ``topology`` (gangs on a tiered network beside the same
run without topology), ``mixed`` (the demo's workload; its own processes),
``api`` (pods bound through the in-repo API server beside a binder that decides nothing),
``agent`` (2 workers beside 1 worker, the fine binder beside the coarse one), ``peer``
(Volcano's published shape beside Volcano's published figures), and with ``--trace`` and
``--trace-nodes`` ``saturation`` (the trace through the agent scheduler, binpack beside
least-allocated) and ``trace`` (GPU left unallocated per placement policy, the best beside
FGD and best-fit). Every baseline is
measured in the same run, on this machine, except the published one. Each bench runs at
its own command's defaults; ``caldera bench NAME --help`` tells them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from caldera.bench import agent as bench_agent
from caldera.bench import api as bench_api
from caldera.bench import batch as bench_batch
from caldera.bench import binder as bench_binder
from caldera.bench import mixed as bench_mixed
from caldera.bench import peer as bench_peer
from caldera.bench import saturation as bench_saturation
from caldera.bench import sharding as bench_sharding
from caldera.bench import topology as bench_topology
from caldera.bench import trace as bench_trace
from caldera.bench.runner import local_ray, measured
from caldera.demo import workload as workloads
from caldera.demo.config import WEEK_S
from caldera.flag_config import checked, from_flags, readable_file, redis_url
from cluster.model.core import Node, Pod

if TYPE_CHECKING:
    from rich.table import Table

Row = tuple[str, str, str, str]  # figure, value, beside it, what "beside" is
QUICK = {
    "binder": ["--pods", "800", "--nodes", "50", "--repeat", "1"],
    "sharding": ["--nodes", "500", "--syncs", "5"],
    "batch": ["--nodes", "200", "--pending", "400", "--sessions", "2"],
    "batch-small": ["--nodes", "100", "--pending", "400", "--sessions", "2"],
    "agent": ["--nodes", "200", "--pods", "1000"],
    "topology": ["--nodes", "512", "--rounds", "1"],
    "trace": ["--seeds", "1"],
    "api": ["--shapes", "40x400", "--rate", "50", "--steady", "2"],
}


class Trace(msgspec.Struct):
    """A trace read once for both trace benches: as pods for the schedulers, as cards and tasks for the replay."""

    nodes: list[Node]
    pods: list[Pod]
    cards: Any  # cluster.nodeview.cards.Cards
    tasks: list[Any]  # cluster.nodeview.cards.Task


class Suite(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench``'s own flags, checked."""

    trace: str | None = None
    trace_nodes: str | None = None
    mixed_duration: Annotated[
        float, msgspec.Meta(gt=0, le=WEEK_S, description="a duration above 0 and at most 7 days")
    ] = 30.0
    redis_url: str | None = None
    quick: bool = False
    json: bool = False

    def __post_init__(self) -> None:
        if bool(self.trace) != bool(self.trace_nodes):
            raise ValueError("--trace and --trace-nodes go together (a pods CSV and its nodes CSV)")


def config(args: argparse.Namespace) -> tuple[Suite, Trace | None]:
    """The flags checked and the trace read, if one is given (ValueError naming the flag or the file)."""
    suite = from_flags(Suite, args, redis_url=redis_url("--redis-url", args.redis_url))
    if not (suite.trace and suite.trace_nodes):
        return suite, None
    pods_csv, nodes_csv = readable_file("--trace", suite.trace), readable_file("--trace-nodes", suite.trace_nodes)
    nodes, pods = bench_saturation.load(pods_csv, nodes_csv)
    cards, tasks = bench_trace.load(pods_csv, nodes_csv)
    return suite, Trace(nodes=nodes, pods=pods, cards=cards, tasks=tasks)


def defaults(module: Any, name: str, *argv: str) -> argparse.Namespace:
    """The flags a bench command would have with ``argv``: its own defaults otherwise."""
    parser = argparse.ArgumentParser()
    module.add_parser(parser.add_subparsers())
    return parser.parse_args([name, *argv])


def configured(module: Any, name: str, *argv: str) -> Any:
    """The bench's checked config with ``argv`` (see :func:`defaults`)."""
    return module.config(defaults(module, name, *argv))


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "—"


def binder_rows(r: bench_binder.Report) -> list[Row]:
    return [
        (
            f"commits/s, {name}",
            f"{f.commits_per_s:,.0f}",
            f"{f.ceiling_per_s:,.0f}",
            f"raw script ceiling ({f.ratio:.0%} of it)",
        )
        for name, f in (("single pods", r.single), ("gangs of 8", r.gang8))
    ]


def sharding_rows(r: Any) -> list[Row]:
    return [
        (
            f"full resync p50 / p99 at {r.nodes:,} nodes",
            f"{r.sync_ms_p50:,.0f} / {r.sync_ms_p99:,.0f} ms",
            f"{r.policy_ms_p50:,.1f} ms",
            "the policy alone, p50",
        )
    ]


def batch_rows(big: Any, small: Any) -> list[Row]:
    return [
        (
            f"session p50 / p99, {big.nodes:,} nodes, {big.pending:,} pending (steady)",
            f"{big.steady.session_s_p50:.2f} / {big.steady.session_s_p99:.2f} s",
            f"{small.steady.session_s_p50:.2f} / {small.steady.session_s_p99:.2f} s",
            f"at {small.nodes:,} nodes",
        ),
        (
            f"session p50, {big.nodes:,} nodes, all {big.pending:,} placed (burst)",
            f"{big.burst.session_s_p50:.2f} s",
            f"{small.burst.session_s_p50:.2f} s",
            f"at {small.nodes:,} nodes",
        ),
        (
            "placed pods/s of session time (burst)",
            f"{big.burst.pods_per_s:,.0f}",
            f"{small.burst.pods_per_s:,.0f}",
            f"at {small.nodes:,} nodes",
        ),
    ]


def topology_rows(r: Any) -> list[Row]:
    return [
        (
            f"gangs in their best tier ({r.nodes:,} nodes, {r.leaves:,} leaves, {r.gangs:,} gangs)",
            f"{r.best_tier_share:.1%}",
            "",
            "of those an offline check puts there",
        ),
        (
            "whole leaf domains left free",
            f"{r.free_leaf_share:.2%}",
            f"{r.free_leaf_share_without:.2%}",
            "without topology",
        ),
        (
            "session time",
            f"{r.session_s:.2f} s",
            f"{r.session_s_without:.2f} s",
            f"without topology ({r.session_ratio:.2f}×)",
        ),
    ]


def mixed_rows(r: dict[str, Any]) -> list[Row]:
    agent, batch = r["schedulers"]["agent-scheduler"], r["schedulers"]["volcano"]
    started = sum(q["started"] for q in r["jobs"].values())
    return [
        (
            "agent pods/s, p50 / p99",
            f"{agent['pods_per_s']:,.0f}, {agent['p50_ms']:,.0f} / {agent['p99_ms']:,.0f} ms",
            "",
            "",
        ),
        (
            "training pods/s, p50 / p99",
            f"{batch['pods_per_s']:,.0f}, {batch['p50_ms']:,.0f} / {batch['p99_ms']:,.0f} ms",
            "",
            "",
        ),
        ("gang jobs started, nodes moved between shards", f"{started:,}, {r['shards']['moves']:,}", "", ""),
        ("audit", r["audit"] if r["audit"] == "ok" else f"{len(r['audit'])} violations", "", ""),
    ]


def api_rows(r: Any) -> list[Row]:
    run = r.runs[0]
    shape = f"{run.nodes:,} nodes, {run.pods:,} pods"
    return [
        (
            "pods/s through the API",
            f"{r.pods_per_s:,.0f}",
            f"{r.ceiling_pods_per_s:,.0f}",
            f"a binder deciding nothing, {shape}",
        ),
        ("… ratio", f"{r.ratio:.2f}", "0.5", "the aim"),
        (
            f"p50 / p99 ms at {run.rate:g} pods/s",
            f"{r.p50_ms:.1f} / {r.p99_ms:.1f}",
            f"{run.ceiling_p50_ms:.1f} / {run.ceiling_p99_ms:.1f}",
            "the same binder",
        ),
    ]


def agent_rows(r: dict[str, Any]) -> list[Row]:
    return [
        (
            f"pods/s, {r['nodes']:,} nodes, {r['pods']:,} pods, {r['workers']} workers",
            f"{r['pods_per_s']:,.0f}",
            f"{r['baseline_one_worker_pods_per_s']:,.0f}",
            f"1 worker ({ratio(r['pods_per_s'], r['baseline_one_worker_pods_per_s'])})",
        ),
        ("submit → bound p50 / p99 (burst)", f"{r['p50_ms']:,.0f} / {r['p99_ms']:,.0f} ms", "", ""),
        ("true conflicts ÷ commits", f"{r['conflict_rate']:.2%}", f"{r['coarse_conflict_rate']:.2%}", "coarse binder"),
        ("attempts per pod", f"{r['attempts_per_pod']:.3f}", f"{r['coarse_attempts_per_pod']:.3f}", "coarse binder"),
    ]


def peer_rows(r: Any) -> list[Row]:
    return [
        (
            f"pods/s, {r.nodes:,} nodes, {r.pods:,} pods, {r.workers} workers",
            f"{r.pods_per_s:,.0f}",
            f"{r.volcano_pods_per_s:,.0f}",
            f"Volcano, published ({r.volcano_host})",
        ),
        (
            "create → bound p99",
            f"{r.p99_ms / 1000:.2f} s",
            f"{r.volcano_p99_ms / 1000:.2f} s",
            f"Volcano, published ({r.volcano_host})",
        ),
    ]


def trace_rows(r: Any) -> list[Row]:
    best, fgd, fit = r.policies[r.best_policy], r.policies["fgd"], r.policies["best-fit"]
    where = f"{r.trace}, {r.gpus:,} GPUs, {len(r.seeds)} seed{'s' if len(r.seeds) > 1 else ''}"
    return [
        (
            f"GPUs unallocated at 100% arrived, {r.best_policy} ({where})",
            f"{best.unallocated_at_100:.2%}",
            f"{fgd.unallocated_at_100:.2%}",
            "fgd",
        ),
        ("… fgd", f"{fgd.unallocated_at_100:.2%}", f"{fit.unallocated_at_100:.2%}", "best-fit"),
    ]


def saturation_rows(r: Any) -> list[Row]:
    return [
        (
            f"GPUs allocated at the first GPU pod that fits nowhere ({r.trace}, {r.nodes:,} nodes, {r.gpus:,} GPUs)",
            f"{r.binpack.gpu_allocated:.1%}",
            f"{r.least_allocated.gpu_allocated:.1%}",
            "least-allocated (spread)",
        ),
        (
            "pods/s, p99 until then",
            f"{r.pods_per_s:,.0f}, {r.p99_ms:,.0f} ms",
            f"{r.least_allocated.pods_per_s:,.0f}, {r.least_allocated.p99_ms:,.0f} ms",
            "least-allocated (spread)",
        ),
    ]


async def measure(url: str, args: Suite, trace: Trace | None, progress: Callable[[str], None]) -> dict[str, Any]:
    """Every bench in turn: ``{name: {"report": …, "rows": […], "seconds": …}}``."""
    out: dict[str, Any] = {}

    def flags(name: str) -> list[str]:
        return QUICK.get(name, []) if args.quick else []

    async def bench(name: str, go: Any, rows: Callable[..., list[Row]]) -> None:
        progress(name)
        t = time.monotonic()
        reports = await go()
        out[name] = {
            "report": [msgspec.to_builtins(r) for r in reports]
            if len(reports) > 1
            else msgspec.to_builtins(reports[0]),
            "rows": rows(*reports),
            "seconds": round(time.monotonic() - t, 1),
        }

    async def both_batches() -> tuple[Any, Any]:
        return (
            await bench_batch.measure(url, configured(bench_batch, "batch", *flags("batch"))),
            await bench_batch.measure(url, configured(bench_batch, "batch", "--nodes", "1000", *flags("batch-small"))),
        )

    async def one(x: Any) -> tuple[Any]:
        return (await x,)

    await bench(
        "binder",
        lambda: one(bench_binder.measure_both(url, configured(bench_binder, "binder", *flags("binder")))),
        binder_rows,
    )
    await bench(
        "sharding",
        lambda: one(bench_sharding.measure(url, configured(bench_sharding, "sharding", *flags("sharding")))),
        sharding_rows,
    )
    await bench("batch", both_batches, batch_rows)
    await bench(
        "topology",
        lambda: one(bench_topology.measure(url, configured(bench_topology, "topology", *flags("topology")))),
        topology_rows,
    )
    mixed = defaults(
        bench_mixed, "mixed", "--duration", str(min(args.mixed_duration, 8.0) if args.quick else args.mixed_duration)
    )
    await bench(
        "mixed",
        lambda: one(bench_mixed.measure(url, workloads.load(None), mixed.duration, mixed.workers, mixed.seed)),
        mixed_rows,
    )
    api = bench_api.api_config(defaults(bench_api, "api", *flags("api")))
    await bench("api", lambda: asyncio.to_thread(lambda: (bench_api.measure(api),)), api_rows)
    with local_ray():  # after mixed and api: their agent scheduler processes start their own
        await bench(
            "agent",
            lambda: one(bench_agent.measure(url, configured(bench_agent, "agent", *flags("agent")))),
            agent_rows,
        )
        await bench("peer", lambda: one(bench_peer.measure(url, jobs=2 if args.quick else bench_peer.JOBS)), peer_rows)
        if trace is not None:
            nodes, pods = trace.nodes, trace.pods
            files = ("--trace", args.trace or "", "--trace-nodes", args.trace_nodes or "")
            workers = defaults(bench_saturation, "saturation", *files).workers
            await bench(
                "saturation",
                lambda: one(bench_saturation.measure(url, os.path.basename(args.trace or ""), nodes, pods, workers)),
                saturation_rows,
            )
    if trace is not None:
        frag = defaults(bench_trace, "trace", *files, *flags("trace"))

        async def fragmentation() -> tuple[Any]:
            return (
                bench_trace.measure(
                    os.path.basename(args.trace or ""),
                    trace.cards,
                    trace.tasks,
                    seeds=frag.seeds,
                    tuning=frag.tuning,
                    popularity=frag.popularity,
                    names=bench_trace.POLICIES,
                    processes=frag.processes,
                ),
            )

        await bench("trace", fragmentation, trace_rows)
    return out


def table(results: dict[str, Any], seconds: float) -> Table:
    from rich.table import Table

    t = Table(
        title=f"caldera bench — {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {seconds:.0f} s "
        "(a shared machine: figures drift; the ratios, measured in the same run, hold better)"
    )
    for col in ("bench", "figure", "value", "beside it", "which is"):
        t.add_column(col, justify="right" if col in ("value", "beside it") else "left")
    for name, result in results.items():
        for i, (figure, value, beside, what) in enumerate(result["rows"]):
            t.add_row(name if i == 0 else "", figure, value, beside, what, end_section=i == len(result["rows"]) - 1)
    return t


def run(args: argparse.Namespace) -> int:
    checked_flags = checked("caldera bench", args, config)
    if checked_flags is None:
        return 2
    suite, trace = checked_flags
    from rich.console import Console  # for the table and the progress lines only

    console = Console(stderr=suite.json)
    if not console.is_terminal:
        console = Console(stderr=suite.json, width=150)
    started = time.monotonic()

    def progress(name: str) -> None:
        console.print(f"bench {name}…", highlight=False)

    results = measured(suite.redis_url, lambda url: measure(url, suite, trace, progress))
    took = time.monotonic() - started
    if suite.json:
        print(json.dumps({"seconds": round(took, 1), "cores": os.cpu_count(), "benches": results}))
    else:
        console.print(table(results, took))
    return 0 if all(a == "ok" for a in audits(results)) else 1


def audits(report: Any) -> list[Any]:
    """Every audit verdict anywhere in the reports."""
    if isinstance(report, dict):
        return [v for k, v in report.items() if k == "audit"] + [
            a for k, v in report.items() if k != "audit" for a in audits(v)
        ]
    if isinstance(report, list):
        return [a for v in report for a in audits(v)]
    return []
