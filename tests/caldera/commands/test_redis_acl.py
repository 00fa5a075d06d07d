"""``caldera redis-acl``: passwords come from files (made when missing, mode 0600), never from the
command line; the ACL file holds only their hashes; the Secrets' URLs carry each user and its
password, percent-encoded, and a server loaded with the file lets each URL in."""

from __future__ import annotations

import hashlib
import stat
import subprocess
import sys
import urllib.parse
from pathlib import Path

import redis
import yaml

from cluster.runtime.redis_server import RedisServer
from cluster.store.acl import Role

ROOT = Path(__file__).resolve().parents[3]


def redis_acl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caldera", "redis-acl", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_passwords_are_made_once_kept_private_and_only_hashed_in_the_acl_file(tmp_path: Path) -> None:
    folder = tmp_path / "passwords"
    first = redis_acl("--password-dir", str(folder))
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted(r.user for r in Role)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for role in Role:
        path = folder / role.user
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        password = path.read_text().strip()
        assert len(password) >= 32 and password not in first.stdout
        assert f"user {role.user} reset on #{hashlib.sha256(password.encode()).hexdigest()} " in first.stdout
    assert redis_acl("--password-dir", str(folder)).stdout == first.stdout  # the same users again


def test_the_secrets_carry_each_users_url_and_the_acl_file_a_server_loads(tmp_path: Path) -> None:
    folder = tmp_path / "passwords"
    folder.mkdir()
    (folder / Role.MIRROR.user).write_text("p@ss:w/rd%?#\n")  # a password a URL must escape
    base = "rediss://redis.example.com:6380/0?ssl_ca_certs=/etc/ca.crt"
    r = redis_acl("-o", "secrets", "--password-dir", str(folder), "--redis-url", base, "--namespace", "ns")
    assert r.returncode == 0, r.stderr
    urls, acl = list(yaml.safe_load_all(r.stdout))
    assert (urls["metadata"]["name"], acl["metadata"]["name"]) == ("caldera-redis", "caldera-redis-acl")
    assert urls["metadata"]["namespace"] == acl["metadata"]["namespace"] == "ns"
    assert set(urls["stringData"]) == {f"{role.value}.url" for role in Role}
    mirror = urllib.parse.urlsplit(urls["stringData"]["mirror.url"])
    assert (mirror.scheme, mirror.hostname, mirror.port, mirror.query) == (
        "rediss",
        "redis.example.com",
        6380,
        "ssl_ca_certs=/etc/ca.crt",
    )
    assert mirror.username == "caldera-mirror" and urllib.parse.unquote(mirror.password or "") == "p@ss:w/rd%?#"
    assert acl["stringData"]["users.acl"] == redis_acl("--password-dir", str(folder)).stdout
    aclfile = tmp_path / "users.acl"
    aclfile.write_text(acl["stringData"]["users.acl"])
    with RedisServer(aclfile=str(aclfile)) as server:
        for key, url in urls["stringData"].items():
            parts = urllib.parse.urlsplit(url)
            local = parts._replace(scheme="redis", netloc=f"{parts.netloc.rpartition('@')[0]}@127.0.0.1:{server.port}")
            client = redis.Redis.from_url(local._replace(query="").geturl())
            try:
                assert client.ping(), key
            finally:
                client.close()


def test_an_empty_password_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / Role.SHARDING.user).write_text("\n")
    r = redis_acl("--password-dir", str(tmp_path))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        f"caldera redis-acl: error: --password-dir: {tmp_path / Role.SHARDING.user} is empty "
        "(expected the password of caldera-sharding)"
    )
    assert [p.name for p in tmp_path.iterdir()] == [Role.SHARDING.user], "a password was made before the refusal"
