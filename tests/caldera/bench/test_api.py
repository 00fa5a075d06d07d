"""``caldera bench api`` at small scale: caldera's processes bind every pod through the in-repo API
server, beside a binder that decides nothing; the figures it reports are the ones it measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caldera.bench.api import api_config
from caldera.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]


def test_every_pod_is_bound_through_the_api_and_measured_beside_the_ceiling(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "caldera", "bench", "api", "--shapes", "40x400", "--rate", "50", "--steady", "2"]
        + ["--out", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert {"pods_per_s", "ceiling_pods_per_s", "ratio", "p50_ms", "p99_ms"} <= set(report)
    (run,) = report["runs"]
    assert (run["nodes"], run["pods"], run["unbound"]) == (40, 400, 0)
    assert run["pods_per_s"] > 0 and run["ceiling_pods_per_s"] > 0 and run["watch_pods_per_s"] > 0
    assert report["ratio"] == pytest.approx(run["pods_per_s"] / run["ceiling_pods_per_s"], abs=0.002)
    assert 0 < run["p50_ms"] <= run["p99_ms"] and 0 < run["ceiling_p50_ms"] <= run["ceiling_p99_ms"]
    # --out keeps each run's logs: the processes', the API server's and the ceiling binder's.
    assert "workers ready" in (tmp_path / "40x400-caldera" / "logs" / "agent-scheduler.log").read_text()
    assert (tmp_path / "40x400-ceiling" / "api-ceiling.log").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--shapes", "10x"], "--shapes: '10x' (expected NODESxPODS"),
        (["--shapes", "0x10"], "--shapes: '0x10'"),
        (["--shapes", "1e3x10"], "--shapes: '1e3x10'"),
        (["--workers", "65"], "--workers: 65"),
        (["--timeout", "nan"], "--timeout: nan"),
        (["--rate", "0"], "--rate: 0.0"),
        (["--rate", "inf"], "--rate: inf"),
        (["--steady", "-1"], "--steady: -1.0"),
        (["--agent-flag", "workers=3"], "--agent-flag: 'workers=3'"),
    ],
)
def test_bad_flags_are_named(argv: list[str], message: str) -> None:
    args = build_parser().parse_args(["bench", "api", *argv])
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("*", r"\*")):
        api_config(args)
