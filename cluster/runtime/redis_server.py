"""A private redis-server on a free loopback port, started and stopped by handle.

Used by ``caldera demo``/``bench``/``dry-run`` when no ``--redis-url`` is given, and by the
tests, which may also start it with an ACL file (its users, the ``default`` one off) and with
TLS only (``--port 0``). Persistence is off: the state is scratch.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from cluster.store.client import TlsFiles, wait_until_up


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

    ``aclfile``: the server's users (``redis-server --aclfile``). ``tls``: serve TLS only, on
    :attr:`port`, with that certificate, requiring clients' certificates from that CA.
    """

    def __init__(
        self,
        *,
        binary: str = "redis-server",
        timeout: float = 10.0,
        aclfile: str | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        path = shutil.which(binary)
        if path is None:
            raise RedisUnavailable(
                "redis-server not found on PATH: install it (Debian: apt-get install redis-server) or pass --redis-url"
            )
        self.port = free_port()
        self.tls = tls
        self._dir = tempfile.TemporaryDirectory(prefix="caldera-redis-")
        listen = ["--port", str(self.port)]
        if tls is not None:
            listen = ["--port", "0", "--tls-port", str(self.port)]
            listen += ["--tls-cert-file", tls.cert, "--tls-key-file", tls.key, "--tls-ca-cert-file", tls.ca]
        if aclfile is not None:
            listen += ["--aclfile", aclfile]
        self.process = subprocess.Popen(
            [
                path,
                *listen,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
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
        deadline = time.monotonic() + timeout
        up = wait_until_up(
            "127.0.0.1", self.port, deadline=deadline, alive=lambda: self.process.poll() is None, tls=tls
        )
        if not up:
            err = self.process.stderr.read().decode() if self.process.stderr else ""
            self.stop()
            raise RedisUnavailable(f"redis-server did not start on port {self.port}: {err.strip()}")

    @property
    def url(self) -> str:
        """The server's URL, without credentials or TLS files (``rediss://`` when it serves TLS)."""
        return f"{'rediss' if self.tls is not None else 'redis'}://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()
        self._dir.cleanup()

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
