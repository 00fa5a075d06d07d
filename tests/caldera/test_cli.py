"""The command line as users run it: `caldera audit` and `caldera bench` (the demo: demo/test_run.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil

from cluster.runtime.redis_server import RedisServer
from cluster.store.store import Store
from tests.builders import node, pod


def caldera(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "caldera", *args], capture_output=True, text=True, timeout=timeout)


async def test_audit_passes_a_sound_store_and_names_every_violation(store: Store, redis_server: RedisServer) -> None:
    await store.upsert_nodes([node("n1", cpu="2")])
    await store.upsert_pods([pod("a", cpu="1", node="n1", phase="Running")])
    ok = caldera("audit", "--redis-url", redis_server.url, "--cluster", store.keys.cluster)
    assert (ok.returncode, ok.stdout.strip()) == (0, "audit: ok")
    # Corrupt the store behind the scripts' back: allocated no longer matches, and exceeds allocatable.
    await store.client.hset(store.keys.node("n1"), "u:cpu", 5000)
    await store.client.sadd(store.keys.bound_to("n2"), "uid-a")
    bad = caldera("audit", "--redis-url", redis_server.url, "--cluster", store.keys.cluster)
    assert bad.returncode == 1
    assert "node n1: allocated" in bad.stdout and "!= sum of its pods' requests" in bad.stdout
    assert "node n1: cpu allocated 5000 > allocatable 2000" in bad.stdout
    assert "pod uid-a: bound twice" in bad.stdout
    assert bad.stdout.strip().endswith("violation(s)")


def test_bad_flags_exit_2_with_one_line() -> None:
    for args, needle in [
        (["audit"], "--redis-url"),
        (["audit", "--redis-url", "http://127.0.0.1:1"], "--redis-url: 'http://127.0.0.1:1' is not a Redis URL"),
        (["audit", "--redis-url-file", "/nonexistent/url"], "--redis-url-file: /nonexistent/url"),
        (["redis-acl", "--cluster", "a:b"], "--cluster"),
        (["redis-acl"], "--password-dir: needed with -o acl"),
        (["redis-acl", "-o", "secrets", "--redis-url", "redis://u:pw@h:1/0"], "--redis-url: holds a user or password"),
        (["redis-acl", "-o", "secrets", "--redis-url", "http://h"], "--redis-url: 'http://h'"),
        (["audit", "--redis-url", "redis://127.0.0.1:1", "--cluster", "a:b"], "--cluster"),
        (["bench", "binder", "--pods", "-5"], "--pods"),
        (["bench", "agent", "--curve", "1,x"], "--curve: x (expected a positive integer)"),
        (["bench", "agent", "--curve", "1,100"], "--curve: 1,100 (expected worker counts of 1 to 64"),
        (["bench", "agent", "--fill", "1"], "--fill 1.0: expected a share in [0, 1)"),
        (["bench", "binder", "--pods", "12"], "--pods"),
        (["bench", "batch", "--conf", "/nonexistent.conf"], "--conf /nonexistent.conf: no such file"),
        (["bench", "batch", "--conf", "tests/corpus/confs/refused/docs-custom-plugin.conf"], "unknown plugin 'magic'"),
        (["nonsense"], "invalid choice"),
    ]:
        r = caldera(*args)
        out = (r.stdout + r.stderr).strip()
        assert r.returncode == 2, (args, out)
        assert len(out.splitlines()) == 1 and needle in out, (args, out)


def test_bench_binder_reports_commits_beside_the_ceiling(redis_server: RedisServer) -> None:
    r = caldera(
        "bench", "binder", "--redis-url", redis_server.url, "--pods", "800", "--nodes", "50", "--repeat", "1", "--json"
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    for figures in (report, report["single"], report["gang8"]):
        assert figures["commits_per_s"] > 0 and figures["ceiling_per_s"] > 0
        assert 0 < figures["ratio"] == min(report["single"]["ratio"], report["gang8"]["ratio"]) or figures is not report
    assert report["single"]["commits"] == report["gang8"]["commits"] == 800


def test_bench_sharding_reports_sync_percentiles(redis_server: RedisServer) -> None:
    r = caldera("bench", "sharding", "--redis-url", redis_server.url, "--nodes", "500", "--syncs", "5", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["nodes"] == 500 and report["syncs"] == 5
    assert report["policy_ms_p50"] > 0 and 0 < report["sync_ms_p50"] <= report["sync_ms_p99"]
    assert report["moves_per_sync"] > 0


def test_bench_agent_reports_its_figures_beside_the_baselines(redis_server: RedisServer) -> None:
    """On a shard half full of resident pods (the audit counts them on their nodes), the measured pods
    take half of the room left: every one is placed, nothing over-committed."""
    r = caldera(
        "bench",
        "agent",
        "--redis-url",
        redis_server.url,
        "--nodes",
        "40",
        "--pods",
        "400",
        "--workers",
        "2",
        "--fill",
        "0.5",
        "--take",
        "0.5",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["placed"] == 400 and report["audit"] == "ok" and (report["fill"], report["take"]) == (0.5, 0.5)
    for key in (
        "pods_per_s",
        "p50_ms",
        "p99_ms",
        "attempts_per_pod",
        "conflict_rate",
        "resolved_conflicts",
        "baseline_one_worker_pods_per_s",
        "coarse_conflict_rate",
        "coarse_attempts_per_pod",
    ):
        assert key in report, key
    assert report["pods_per_s"] > 0 and report["baseline_one_worker_pods_per_s"] > 0
    assert report["p50_ms"] <= report["p99_ms"] and report["attempts_per_pod"] >= 1.0


def test_sigterm_stops_a_command_as_ctrl_c_does_with_what_it_started() -> None:
    """SIGTERM cancels the command's run, whose clean-up stops the private redis-server; exit 130."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "caldera", "bench", "sharding", "--nodes", "50000", "--syncs", "1000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (children := {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        time.sleep(3)  # the nodes are being written: the event loop runs
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert not [pid for pid in children if psutil.pid_exists(pid)]


def test_the_command_line_and_the_processes_start_without_the_drawing_libraries() -> None:
    """rich and matplotlib are loaded only by the commands that draw, so a scheduler image could do without them."""
    loaded = "import sys, caldera.cli; print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'matplotlib'}))"
    r = subprocess.run([sys.executable, "-c", loaded], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, "[]"), r.stderr
