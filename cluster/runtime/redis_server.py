"""A private redis-server on a free loopback port, started and stopped by handle.

Used by ``caldera demo``/``bench``/``dry-run`` when no ``--redis-url`` is given, and by the
tests. Persistence is off: the state is scratch.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from cluster.store.client import wait_until_up


class RedisUnavailable(RuntimeError):
    pass


def _die_with_parent() -> None:
    """In the child before exec: have Linux send SIGTERM when the parent dies, however it dies."""
    if sys.platform == "linux":
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """``with RedisServer() as server: server.url`` — a redis-server that is gone afterwards.

    ``appendonly``: keep an append-only file (fsync every second, Redis's default) in the
    server's folder, so that :meth:`restart` with ``keep_data`` comes back with what it held —
    the fault benches restart it both ways.
    """

    def __init__(self, *, binary: str = "redis-server", timeout: float = 10.0, appendonly: bool = False) -> None:
        path = shutil.which(binary)
        if path is None:
            raise RedisUnavailable(
                "redis-server not found on PATH: install it (Debian: apt-get install redis-server) or pass --redis-url"
            )
        self.binary = path
        self.timeout = timeout
        self.appendonly = appendonly
        self.port = free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="caldera-redis-")
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.appendonly else "no",
                "--dir",
                self._dir.name,
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + self.timeout
        if not wait_until_up("127.0.0.1", self.port, deadline=deadline, alive=lambda: process.poll() is None):
            err = process.stderr.read().decode() if process.stderr else ""
            if process.poll() is None:
                process.kill()
                process.wait()
            self._dir.cleanup()
            raise RedisUnavailable(f"redis-server did not start on port {self.port}: {err.strip()}")
        return process

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def restart(self, *, keep_data: bool, down_s: float = 0.0) -> None:
        """Kill the server (SIGKILL: no last save) and start it again on the same port after
        ``down_s`` seconds: with its append-only file when ``keep_data`` (and ``appendonly``), else empty."""
        self._end(signal.SIGKILL)
        if not keep_data:
            for entry in os.scandir(self._dir.name):
                if entry.is_dir():
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        time.sleep(down_s)
        self.process = self._start()

    def _end(self, sig: signal.Signals) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()

    def stop(self) -> None:
        self._end(signal.SIGTERM)
        self._dir.cleanup()

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
