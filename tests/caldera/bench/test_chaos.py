"""``caldera bench chaos`` at small scale: the real processes on the in-repo API server, the leading
batch scheduler killed with -9 (its standby takes over) and Redis restarted empty; nothing lost,
bound twice or over-committed, and both recover."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caldera.bench.chaos.command import chaos_config
from caldera.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]


def test_two_faults_recover_with_nothing_lost_double_or_over_committed(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "caldera",
            "bench",
            "chaos",
            "--faults",
            "kill-batch-leader,redis-restart-empty",
            "--quick",
            "--warmup",
            "3",
            "--observe",
            "6",
            "--timeout",
            "90",
            "--out",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=ROOT,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads(out.stdout)["faults"]
    assert [r["fault"] for r in rows] == ["kill-batch-leader", "redis-restart-empty"]
    for r in rows:
        assert {"fault", "rounds", "recovery_s_p50", "recovery_s_max", "lost", "double", "overcommitted"} <= set(r)
        assert (r["rounds"], r["lost"], r["double"], r["overcommitted"], r["store_violations"]) == (1, 0, 0, 0, 0), r
        assert r["recovery_s_max"] is not None and r["recovery_s_max"] < 60, r
    logs = [(tmp_path / "logs" / f"batch-scheduler-{x}.log").read_text() for x in "ab"]
    assert any("restarted" in log for log in logs)  # the supervisor brought the killed leader back


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--faults", "kill-everything"], "--faults: 'kill-everything' is not a fault"),
        (["--timeout", "0"], "--timeout: 0.0 (expected a positive number of seconds)"),
        (["--timeout", "nan"], "--timeout: nan (expected a positive number of seconds)"),
        (["--warmup", "-1"], "--warmup: -1.0 (expected a number of seconds, 0 or more)"),
    ],
)
def test_bad_flags_are_one_line_each(argv: list[str], message: str) -> None:
    args = build_parser().parse_args(["bench", "chaos", *argv])
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        chaos_config(args)
