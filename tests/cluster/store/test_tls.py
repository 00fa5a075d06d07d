"""TLS to the store: a real redis-server serving TLS only (``--port 0 --tls-port``), certificates made
with the ``openssl`` CLI, and caldera connecting with a ``rediss://`` URL whose query string names
the CA and the client's certificate — as deploy/README.md tells users to write it."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cluster.runtime.redis_server import RedisServer
from cluster.store.acl import Role, acl_file
from cluster.store.client import TlsFiles, connect
from cluster.store.keys import Keys
from cluster.store.store import Store
from tests.builders import node

ROOT = Path(__file__).resolve().parents[3]


def openssl(*args: str, cwd: Path) -> None:
    found = shutil.which("openssl")
    if found is None:
        pytest.fail("the openssl CLI is needed to make the test's certificates (Debian: apt-get install openssl)")
    subprocess.run([found, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def certificate(directory: Path, name: str, subject_alt: str) -> None:
    """``name.key`` and ``name.crt``, signed by ``ca``."""
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=directory)
    openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={name}", "-out", f"{name}.csr", cwd=directory)
    (directory / f"{name}.ext").write_text(f"subjectAltName={subject_alt}\n")
    openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        f"{name}.ext",
        "-out",
        f"{name}.crt",
        cwd=directory,
    )


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, the server's certificate (127.0.0.1, localhost) and a client's, in one folder."""
    d = tmp_path_factory.mktemp("tls")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key", cwd=d)
    openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=caldera-test-ca", "-days", "2", "-out", "ca.crt", cwd=d
    )
    certificate(d, "server", "IP:127.0.0.1,DNS:localhost")
    certificate(d, "client", "DNS:caldera-client")
    return d


class TlsRedis:
    def __init__(self, certs: Path, directory: Path) -> None:
        self.certs = certs
        self.passwords = {role: secrets.token_hex(16) for role in Role}
        aclfile = directory / "users.acl"
        aclfile.write_text(acl_file(Keys("tls"), self.passwords))
        tls = TlsFiles(cert=str(certs / "server.crt"), key=str(certs / "server.key"), ca=str(certs / "ca.crt"))
        self.server = RedisServer(tls=tls, aclfile=str(aclfile))

    def url(self, role: Role, **query: str) -> str:
        """The URL a user writes: ``rediss://``, the user, and the TLS files in the query string."""
        files = {
            "ssl_ca_certs": str(self.certs / "ca.crt"),
            "ssl_certfile": str(self.certs / "client.crt"),
            "ssl_keyfile": str(self.certs / "client.key"),
        }
        params = urllib.parse.urlencode({k: v for k, v in {**files, **query}.items() if v})
        return f"rediss://{role.user}:{self.passwords[role]}@127.0.0.1:{self.server.port}/0?{params}"


@pytest.fixture(scope="module")
def tls_redis(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    running = TlsRedis(certs, tmp_path_factory.mktemp("tls-acl"))
    try:
        yield running
    finally:
        running.server.stop()


async def test_a_rediss_url_with_the_ca_and_a_client_certificate_reaches_the_store(tls_redis: TlsRedis) -> None:
    assert tls_redis.server.url.startswith("rediss://")
    client = connect(tls_redis.url(Role.MIRROR))
    try:
        store = Store(client, Keys("tls"))
        await store.upsert_nodes([node("n1")])
        assert [n.name for n in await store.list_nodes()] == ["n1"]
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "query",
    [
        {"ssl_ca_certs": ""},  # the server's certificate cannot be checked: the client refuses it
        {"ssl_certfile": "", "ssl_keyfile": ""},  # no client certificate: the server refuses the client
    ],
    ids=["without-the-ca", "without-a-client-certificate"],
)
async def test_tls_is_checked_both_ways(tls_redis: TlsRedis, query: dict[str, str]) -> None:
    client = connect(tls_redis.url(Role.MIRROR, **query))
    try:
        with pytest.raises(redis.ConnectionError):
            await client.ping()
    finally:
        await client.aclose()


async def test_plain_text_gets_no_answer(tls_redis: TlsRedis) -> None:
    url = tls_redis.url(Role.MIRROR).replace("rediss://", "redis://").split("?")[0]
    client = connect(url + "?socket_timeout=2")
    try:
        with pytest.raises(redis.ConnectionError):
            await client.ping()
    finally:
        await client.aclose()


def caldera(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "caldera", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
    )


async def test_the_sharding_controller_and_status_work_over_tls(tls_redis: TlsRedis, tmp_path: Path) -> None:
    keys = Keys("tls")
    mirror = connect(tls_redis.url(Role.MIRROR))
    await Store(mirror, keys).upsert_nodes([node(f"t{i}", cpu="10") for i in range(4)])
    await mirror.aclose()
    for role in (Role.SHARDING, Role.READONLY):
        (tmp_path / role.value).write_text(tls_redis.url(role) + "\n")
    proc = caldera(
        "sharding",
        "--cluster",
        "tls",
        "--metrics-port",
        "0",
        "--metrics-address",
        "127.0.0.1",
        env={"CALDERA_REDIS_URL_FILE": str(tmp_path / "sharding")},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            status = subprocess.run(
                [sys.executable, "-m", "caldera", "status", "--cluster", "tls", "-o", "json"],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=ROOT,
                env={**os.environ, "CALDERA_REDIS_URL_FILE": str(tmp_path / "readonly")},
            )
            assert status.returncode == 0, status.stderr
            report = json.loads(status.stdout)
            if {s["scheduler"] for s in report["shards"]} == {"volcano", "agent-scheduler"}:
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, status.stdout
            await asyncio.sleep(0.3)
        assert [p["component"] for p in report["processes"]] == ["sharding"]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
