"""deploy/redis: the Secret's URL reaches the Redis Service with the Secret's password, which no
pod spec spells out; the Redis container's own script, run here, takes that password."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cluster.runtime.redis_server import free_port
from tests.deploy.manifests import (
    NAMESPACE,
    REDIS_SECRET,
    Obj,
    containers,
    label,
    one,
    redis_secret,
)


def test_secret_url_points_at_the_redis_service_with_its_password(rendered: list[Obj]) -> None:
    secret = redis_secret(rendered)
    url = urllib.parse.urlsplit(secret["url"])
    service = one(rendered, "Service", "caldera-redis")
    assert url.scheme == "redis" and url.password == secret["password"]
    assert url.hostname == f"{service['metadata']['name']}.{NAMESPACE}.svc"
    assert url.port == service["spec"]["ports"][0]["port"] == 6379


def test_no_pod_spec_spells_out_the_password(rendered: list[Obj]) -> None:
    password = redis_secret(rendered)["password"]
    for deployment in (o for o in rendered if o["kind"] == "Deployment"):
        assert password not in json.dumps(deployment), f"{label(deployment)} spells out the Redis password"
    env = {e["name"]: e for e in containers(one(rendered, "Deployment", "caldera-redis"))[0]["env"]}
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": REDIS_SECRET, "key": "password"}


RunningRedis = tuple[Obj, dict[str, str], int, "subprocess.Popen[bytes]"]


@pytest.fixture
def redis_container(rendered: list[Obj], tmp_path: Path) -> Iterator[RunningRedis]:
    """The Redis container's own command, run here; shims pin redis-server and redis-cli to a free
    loopback port. Stopped by handle."""
    real_server, real_cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if real_server is None or real_cli is None:
        pytest.fail("redis-server and redis-cli are needed (`make test` installs them)")
    container = containers(one(rendered, "Deployment", "caldera-redis"))[0]
    port = free_port()
    shims = tmp_path / "bin"
    shims.mkdir()
    for name, line in (
        ("redis-server", f'exec {real_server} "$@" --port {port} --bind 127.0.0.1 --dir "{tmp_path}"'),
        ("redis-cli", f'exec {real_cli} -p {port} "$@"'),
    ):
        (shims / name).write_text(f"#!/bin/sh\n{line}\n")
        (shims / name).chmod(0o755)
    password = redis_secret(rendered)["password"]
    env = {"PATH": f"{shims}:{os.environ['PATH']}", "REDIS_PASSWORD": password, "REDISCLI_AUTH": password}
    process = subprocess.Popen(
        [*container["command"], *container["args"]],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield container, env, port, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _passes(command: list[str], env: dict[str, str]) -> bool:
    return subprocess.run(command, check=False, env=env, capture_output=True, timeout=10).returncode == 0


def test_redis_takes_the_secrets_password_and_the_secrets_url_works(
    rendered: list[Obj], redis_container: RunningRedis
) -> None:
    container, env, port, process = redis_container
    probe = container["readinessProbe"]["exec"]["command"]
    deadline = time.monotonic() + 10
    while not _passes(probe, env):
        assert process.poll() is None, "the Redis container's command exited"
        assert time.monotonic() < deadline, "the readiness probe never passed"
        time.sleep(0.1)
    assert not _passes(probe, {**env, "REDISCLI_AUTH": "wrong"}), "the probe passes without the password"
    cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
    assert env["REDIS_PASSWORD"].encode() not in cmdline, "the password shows in the process list"
    url = urllib.parse.urlsplit(redis_secret(rendered)["url"])
    client = redis.Redis.from_url(url._replace(netloc=f":{url.password}@127.0.0.1:{port}").geturl())
    try:
        assert client.ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=port, password="wrong").ping()
    finally:
        client.close()
