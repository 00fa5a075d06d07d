"""deploy/redis: the Secrets are what ``caldera redis-acl`` renders (one URL per process with its own
user, and the ACL file Redis loads); no pod spec spells out a password; each Deployment mounts its
own URL only; and the Redis container's own command, run here with the ACL file from its Secret,
refuses anonymous clients and lets each process in as its user."""

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

from caldera.commands.redis_acl import ACL_KEY, ACL_SECRET, URL, base_url, manifests, url_key
from cluster.runtime.redis_server import free_port
from cluster.store.acl import Role
from cluster.store.keys import Keys
from tests.deploy.manifests import (
    DEPLOY,
    NAMESPACE,
    REDIS_SECRET,
    Obj,
    containers,
    label,
    load,
    one,
    redis_secret,
)

PROCESSES = {
    Role.MIRROR: "caldera-mirror",
    Role.SHARDING: "caldera-sharding",
    Role.BATCH_SCHEDULER: "caldera-batch-scheduler",
    Role.AGENT_SCHEDULER: "caldera-agent-scheduler",
}


def passwords(rendered: list[Obj]) -> dict[Role, str]:
    """Each user's password, read from its URL in the Secret."""
    urls = redis_secret(rendered)
    return {role: urllib.parse.unquote(urllib.parse.urlsplit(urls[url_key(role)]).password or "") for role in Role}


def test_the_secrets_are_what_caldera_redis_acl_renders(rendered: list[Obj]) -> None:
    """deploy/redis/secret.yaml is `caldera redis-acl -o secrets` for its placeholder passwords: the ACL
    file Redis loads grants exactly what cluster/store/acl.py says, for those passwords."""
    secret = passwords(rendered)
    assert all(secret.values())
    expected = manifests(Keys("default"), secret, base_url(URL), NAMESPACE)
    on_disk = [o for o in load(DEPLOY / "redis" / "secret.yaml") if o["kind"] == "Secret"]
    assert on_disk == expected, "deploy/redis/secret.yaml differs from `caldera redis-acl -o secrets`"
    service = one(rendered, "Service", "caldera-redis")
    for role in Role:
        url = urllib.parse.urlsplit(redis_secret(rendered)[url_key(role)])
        assert url.scheme == "redis" and url.username == role.user
        assert url.hostname == f"{service['metadata']['name']}.{NAMESPACE}.svc"
        assert url.port == service["spec"]["ports"][0]["port"] == 6379


def test_no_pod_spec_spells_out_a_password(rendered: list[Obj]) -> None:
    secret = passwords(rendered)
    for deployment in (o for o in rendered if o["kind"] == "Deployment"):
        text = json.dumps(deployment)
        assert not any(pw in text for pw in secret.values()), f"{label(deployment)} spells out a Redis password"
    (redis_container,) = containers(one(rendered, "Deployment", "caldera-redis"))
    assert "env" not in redis_container, "the Redis container needs no credential in its environment"


@pytest.mark.parametrize("role", list(PROCESSES), ids=str)
def test_each_process_mounts_its_own_url_and_nothing_of_the_acl(rendered: list[Obj], role: Role) -> None:
    pod = one(rendered, "Deployment", PROCESSES[role])["spec"]["template"]["spec"]
    secrets = [v["secret"] for v in pod["volumes"] if "secret" in v]
    assert [s["secretName"] for s in secrets] == [REDIS_SECRET]
    assert secrets[0]["items"] == [{"key": url_key(role), "path": "url"}], "another process's URL is mounted"


def test_redis_mounts_the_acl_file_and_no_url(rendered: list[Obj]) -> None:
    pod = one(rendered, "Deployment", "caldera-redis")["spec"]["template"]["spec"]
    secrets = [v["secret"] for v in pod["volumes"] if "secret" in v]
    assert [s["secretName"] for s in secrets] == [ACL_SECRET]
    assert secrets[0]["items"] == [{"key": ACL_KEY, "path": ACL_KEY}]


RunningRedis = tuple[Obj, int, "subprocess.Popen[bytes]"]


def _materialize(rendered: list[Obj], pod: Obj, container: Obj, root: Path) -> dict[str, str]:
    """Write the container's Secret volumes under ``root`` as the kubelet would; mount path -> folder."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    out: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret")
        if secret is None:
            continue
        data = one(rendered, "Secret", secret["secretName"])["stringData"]
        folder = root / mount["mountPath"].strip("/")
        folder.mkdir(parents=True)
        for item in secret["items"]:
            (folder / item["path"]).write_text(data[item["key"]])
        out[mount["mountPath"]] = str(folder)
    return out


@pytest.fixture
def redis_container(rendered: list[Obj], tmp_path: Path) -> Iterator[RunningRedis]:
    """The Redis container's own command, run here with its Secret's files; shims pin redis-server
    and redis-cli to a free loopback port. Stopped by handle."""
    real_server, real_cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if real_server is None or real_cli is None:
        pytest.fail("redis-server and redis-cli are needed (`make test` installs them)")
    deployment = one(rendered, "Deployment", "caldera-redis")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = _materialize(rendered, pod, container, tmp_path / "mounts")
    args = list(container["args"])
    for path, folder in mounts.items():
        args = [a.replace(path, folder) if a.startswith(path) else a for a in args]
    port = free_port()
    shims = tmp_path / "bin"
    shims.mkdir()
    for name, line in (
        ("redis-server", f'exec {real_server} "$@" --port {port} --bind 127.0.0.1 --dir "{tmp_path}"'),
        ("redis-cli", f'exec {real_cli} -p {port} "$@"'),
    ):
        (shims / name).write_text(f"#!/bin/sh\n{line}\n")
        (shims / name).chmod(0o755)
    env = {"PATH": f"{shims}:{os.environ['PATH']}"}
    process = subprocess.Popen(
        [*container["command"], *args], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield {**container, "env": env}, port, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _passes(command: list[str], env: dict[str, str]) -> bool:
    return subprocess.run(command, check=False, env=env, capture_output=True, timeout=10).returncode == 0


def test_redis_loads_the_acl_file_and_lets_each_process_in_as_its_user(
    rendered: list[Obj], redis_container: RunningRedis
) -> None:
    container, port, process = redis_container
    probe = container["readinessProbe"]["exec"]["command"]
    deadline = time.monotonic() + 10
    while not _passes(probe, container["env"]):
        assert process.poll() is None, "the Redis container's command exited"
        assert time.monotonic() < deadline, "the readiness probe never passed"
        time.sleep(0.1)
    cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
    assert not any(pw.encode() in cmdline for pw in passwords(rendered).values())
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port).ping()
    for role in Role:
        url = urllib.parse.urlsplit(redis_secret(rendered)[url_key(role)])
        local = url._replace(netloc=f"{url.username}:{url.password}@127.0.0.1:{port}").geturl()
        client = redis.Redis.from_url(local)
        try:
            assert client.ping()
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.config_get("*")  # no user administers the server
        finally:
            client.close()
