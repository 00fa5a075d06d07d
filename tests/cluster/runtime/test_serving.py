"""/metrics and /healthz listen where ``--metrics-address`` says: bound to 127.0.0.1 they are
unreachable on this host's other addresses (its network interfaces', and 127.0.0.2 — on Linux the
whole of 127/8 is this host), bound to 0.0.0.0 reachable on all of them."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cluster.runtime.redis_server import RedisServer
from cluster.runtime.serving import HttpEndpoint

ROOT = Path(__file__).resolve().parents[3]


def other_addresses() -> list[str]:
    """This host's IPv4 addresses other than 127.0.0.1: its interfaces' (from the kernel's local
    routing table) and 127.0.0.2."""
    found = set(re.findall(r"\|-- (\d+\.\d+\.\d+\.\d+)\n\s+/32 host LOCAL", Path("/proc/net/fib_trie").read_text()))
    return sorted(a for a in found if not a.startswith("127.")) + ["127.0.0.2"]


def healthz(address: str, port: int) -> bytes:
    return urllib.request.urlopen(f"http://{address}:{port}/healthz", timeout=5).read()  # type: ignore[no-any-return]


def refused(address: str, port: int) -> bool:
    try:
        healthz(address, port)
    except urllib.error.URLError as e:
        return isinstance(e.reason, ConnectionRefusedError)
    return False


def test_bound_to_loopback_it_answers_there_only_and_bound_to_all_everywhere() -> None:
    others = other_addresses()
    local = HttpEndpoint(CollectorRegistry(), healthy=lambda: True, host="127.0.0.1", port=0)
    everywhere = HttpEndpoint(CollectorRegistry(), healthy=lambda: True, host="0.0.0.0", port=0)
    try:
        assert healthz("127.0.0.1", local.port) == b"ok\n"
        for address in others:
            assert refused(address, local.port), f"reachable on {address}"
            assert healthz(address, everywhere.port) == b"ok\n"
    finally:
        local.close()
        everywhere.close()


def test_ipv6_any_is_served() -> None:
    endpoint = HttpEndpoint(CollectorRegistry(), healthy=lambda: True, host="::", port=0)
    try:
        assert healthz("[::1]", endpoint.port) == b"ok\n"
    finally:
        endpoint.close()


def caldera(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "caldera", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )


def test_a_process_serves_on_the_flags_address(redis_server: RedisServer) -> None:
    proc = caldera("sharding", "--redis-url", redis_server.url, "--metrics-address", "127.0.0.1", "--metrics-port", "0")
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "serving /metrics and /healthz on 127.0.0.1 port" in first, first
        port = int(first.rsplit(" ", 1)[1])
        assert healthz("127.0.0.1", port) == b"ok\n"
        for address in other_addresses():
            assert refused(address, port), f"reachable on {address}"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--metrics-address", "localhost"], "--metrics-address: 'localhost' is not an IP address"),
        (["--metrics-address", "127.0.0.1:80"], "--metrics-address: '127.0.0.1:80' is not an IP address"),
        (["--metrics-port", "70000"], "--metrics-port: 70000 (expected 0 to 65535"),
        # TEST-NET-3: an address this host does not have.
        (["--metrics-address", "203.0.113.7"], "--metrics-address 203.0.113.7 --metrics-port 0: cannot listen there"),
    ],
)
def test_a_bad_metrics_address_is_one_line_and_exit_2(redis_server: RedisServer, flags: list[str], needle: str) -> None:
    proc = caldera("sharding", "--redis-url", redis_server.url, "--metrics-port", "0", *flags)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
