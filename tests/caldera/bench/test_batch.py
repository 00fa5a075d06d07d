"""``caldera bench batch --quick --curve``: both runs at every point of a tiny grid, today's keys kept."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def bench_batch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caldera", "bench", "batch", *args], capture_output=True, text=True, timeout=300
    )


def test_the_curve_reports_every_point_beside_todays_figures() -> None:
    r = bench_batch("--quick", "--curve", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert (report["nodes"], report["pending"], report["sessions"]) == (40, 120, 2)
    assert report["session_s_p50"] == report["steady"]["session_s_p50"] > 0
    assert report["pods_per_s"] == report["steady"]["pods_per_s"] > 0
    points = [(p["nodes"], p["pending"]) for p in report["curve"]]
    assert points == [(20, 30), (20, 120), (40, 30), (40, 120)]
    for p in report["curve"]:
        for run in (p["steady"], p["burst"]):
            assert run["session_s_p50"] > 0 and run["pods_per_s"] > 0 and run["audit"] == "ok", p
        # the burst run has half the GPUs (4 a node) free, the steady one 5%
        room = 4 * p["nodes"]
        if p["pending"] <= room:
            assert p["burst"]["placed_per_session"] == p["pending"], p
        else:
            assert 0 < p["burst"]["placed_per_session"] <= room, p
        assert 0 < p["steady"]["placed_per_session"] <= 0.05 * 8 * p["nodes"], p
    # the --nodes/--pending point is on the grid: measured once, reported in both places
    assert report["curve"][-1]["steady"] == report["steady"] and report["curve"][-1]["burst"] == report["burst"]
    assert "bench batch: 20 nodes, 30 pending…" in r.stderr


def test_without_the_curve_the_report_keeps_its_shape() -> None:
    r = bench_batch("--quick", "--nodes", "30", "--pending", "60", "--sessions", "1", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert (report["nodes"], report["pending"], report["sessions"], report["curve"]) == (30, 60, 1, [])
    assert report["burst"]["placed_per_session"] == 60 and report["steady"]["audit"] == "ok"


@pytest.mark.parametrize(
    "argv, line",
    [
        (["--nodes", "200000"], "caldera bench batch: error: --nodes 200000: expected 1 to 100,000 nodes"),
        (["--pending", "1000001"], "caldera bench batch: error: --pending 1000001: expected 1 to 1,000,000 pods"),
        (["--sessions", "20000"], "caldera bench batch: error: --sessions 20000: expected 1 to 10,000 sessions"),
        (["--sessions", "0"], "caldera bench batch: error: argument --sessions: 0 (expected a positive integer)"),
    ],
)
def test_bad_sizes_are_refused_in_one_line(argv: list[str], line: str) -> None:
    r = bench_batch("--curve", *argv)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.strip().splitlines() == [line]
