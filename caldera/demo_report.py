"""The demo's report: what it achieved, as ``demo-report.json`` and a chart, ``demo-report.png``.

The demo samples every couple of seconds (pods bound and their latency per scheduler,
shard sizes, cpu used per shard); the report is those samples and the totals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import msgspec  # noqa: E402
import numpy as np  # noqa: E402


class Sample(msgspec.Struct):
    t: float
    pods_per_s: dict[str, float]
    p50_ms: dict[str, float]
    p99_ms: dict[str, float]
    shard_nodes: dict[str, int]
    shard_cpu: dict[str, float]  # share of the shard's cpu allocated


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50_ms": 0.0, "p90_ms": 0.0, "p99_ms": 0.0}
    a = np.array(values)
    return {f"p{q}_ms": round(float(np.percentile(a, q)), 1) for q in (50, 90, 99)}


def write(out: Path, report: dict[str, Any], samples: list[Sample]) -> tuple[Path, Path]:
    """Write the JSON (totals and samples) and the chart; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / "demo-report.json", out / "demo-report.png"
    json_path.write_text(json.dumps({**report, "samples": msgspec.to_builtins(samples)}, indent=2) + "\n")
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 11), sharex=True)
    t = [s.t for s in samples]
    schedulers = sorted({k for s in samples for k in s.pods_per_s})
    for i, name in enumerate(schedulers):  # one colour per scheduler across the panels
        ax1.plot(t, [s.pods_per_s.get(name, 0.0) for s in samples], color=f"C{i}", label=name)
        ax2.plot(t, [s.p50_ms.get(name, 0.0) for s in samples], color=f"C{i}", label=f"{name} p50")
        ax2.plot(t, [s.p99_ms.get(name, 0.0) for s in samples], color=f"C{i}", linestyle="--", label=f"{name} p99")
    ax1.set_ylabel("pods bound / s")
    ax1.set_title("throughput per scheduler")
    ax2.set_ylabel("submit → bound, ms")
    ax2.set_yscale("symlog")
    ax2.set_title("latency percentiles per scheduler")
    shards = sorted({k for s in samples for k in s.shard_nodes})
    right = ax3.twinx()
    for name in shards:
        colour = f"C{schedulers.index(name)}" if name in schedulers else "C7"
        ax3.plot(t, [s.shard_nodes.get(name, 0) for s in samples], color=colour, label=f"{name or 'unowned'} nodes")
        right.plot(t, [100 * s.shard_cpu.get(name, 0.0) for s in samples], color=colour, linestyle=":",
                   label=f"{name or 'unowned'} cpu %")
    ax3.set_ylabel("nodes in shard")
    right.set_ylabel("cpu allocated, %")
    ax3.set_xlabel("seconds")
    ax3.set_title("shard sizes and utilization")
    for ax in (ax1, ax2):
        ax.legend(loc="upper left", fontsize="small")
    lines, labels = ax3.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    ax3.legend(lines + more, labels + more_labels, loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return json_path, png_path
