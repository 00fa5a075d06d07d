"""The agent scheduler on a Ray cluster of two raylets on this machine (``ray start --head`` and a
second ``ray start --address``): ``caldera bench agent --ray-address`` places its workers across both
and measures the curve of pods/s against worker counts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from cluster.runtime.redis_server import RedisServer

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes]) -> None:
    """``ray start --block`` stops the raylet (and, on the head, the GCS) it started on SIGTERM."""
    kids = psutil.Process(proc.pid).children(recursive=True)
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    _, alive = psutil.wait_procs(kids, timeout=15)
    for p in alive:
        p.kill()


@pytest.fixture(scope="module")
def two_raylets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("ray")
    port = free_port()
    address = f"127.0.0.1:{port}"
    started = []
    try:
        for extra in (["--head", "--port", str(port), "--include-dashboard", "false"], ["--address", address]):
            started.append(
                subprocess.Popen(
                    [RAY, "start", "--block", "--num-cpus", "1", *extra],
                    env=ENV,
                    stdout=subprocess.DEVNULL,
                    stderr=(logs / f"ray-{len(started)}.log").open("wb"),
                    start_new_session=True,
                )
            )
            deadline = time.monotonic() + 60
            while not ray_nodes(address) >= len(started):
                assert time.monotonic() < deadline and started[-1].poll() is None, "ray start did not come up"
                time.sleep(0.5)
        yield address
    finally:
        for proc in reversed(started):
            stop(proc)
        # `ray start` names its cluster in this file for a later ray.init() to join; gone with it.
        current = Path("/tmp/ray/ray_current_cluster")
        if current.exists() and current.read_text().strip().endswith(f":{port}"):
            current.unlink()


def ray_nodes(address: str) -> int:
    """The raylets alive in the cluster at ``address`` (0 while it does not answer)."""
    probe = "import ray; ray.init(address=%r, log_to_driver=False); print(sum(n['Alive'] for n in ray.nodes()))"
    r = subprocess.run(
        [sys.executable, "-c", probe % address], env=ENV, capture_output=True, text=True, timeout=60, check=False
    )
    return int(r.stdout.strip() or 0) if r.returncode == 0 else 0


def test_workers_run_across_two_raylets_and_the_curve_is_measured(two_raylets: str, redis_server: RedisServer) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "caldera",
            "bench",
            "agent",
            "--ray-address",
            two_raylets,
            "--redis-url",
            redis_server.url,
            "--nodes",
            "40",
            "--pods",
            "200",
            "--workers",
            "2",
            "--curve",
            "1,2",
            "--skip-baselines",
            "--json",
        ],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert report["raylets"] == 2 and report["placed"] == 200 and report["audit"] == "ok"
    assert [(c["workers"], c["raylets"]) for c in report["curve"]] == [(1, 1), (2, 2)]
    assert all(c["pods_per_s"] > 0 and c["audit"] == "ok" for c in report["curve"])


def test_without_an_address_a_local_ray_of_its_own_starts_beside_a_running_cluster(
    two_raylets: str, redis_server: RedisServer
) -> None:
    """ray.init without an address joins a cluster `ray start` left on the machine (and refuses
    num_cpus: the bench failed with a traceback); the process starts its own Ray instead."""
    argv = ["bench", "agent", "--redis-url", redis_server.url, "--nodes", "20", "--pods", "40", "--skip-baselines"]
    r = subprocess.run(
        [sys.executable, "-m", "caldera", *argv, "--json"], env=ENV, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["placed"] == 40 and ray_nodes(two_raylets) == 2  # the cluster untouched
