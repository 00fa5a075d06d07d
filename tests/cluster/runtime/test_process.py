"""Where a process finds its store: the flag, the environment, or a file (a mounted Secret); and what\nit says when the store refuses it or cannot be reached."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.runtime.process import DEFAULT_REDIS_URL, resolve_redis_url
from cluster.runtime.redis_server import RedisServer, free_port
from cluster.store.acl import Role, acl_file
from cluster.store.keys import Keys

ROOT = Path(__file__).resolve().parents[3]


def args(url: str | None = None, path: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(redis_url=url, redis_url_file=path)


def test_the_flag_wins_then_the_environment_then_a_file_then_the_default(tmp_path: Path) -> None:
    secret = tmp_path / "url"
    secret.write_text("rediss://:s3cret@redis.caldera:6380/0\n")
    assert resolve_redis_url(args("redis://a:1/0"), {"CALDERA_REDIS_URL": "redis://b:2/0"}) == "redis://a:1/0"
    assert resolve_redis_url(args(), {"CALDERA_REDIS_URL": "redis://b:2/0"}) == "redis://b:2/0"
    assert resolve_redis_url(args(path=str(secret)), {}) == "rediss://:s3cret@redis.caldera:6380/0"
    assert resolve_redis_url(args(), {"CALDERA_REDIS_URL_FILE": str(secret)}) == "rediss://:s3cret@redis.caldera:6380/0"
    assert resolve_redis_url(args(), {}) == DEFAULT_REDIS_URL


@pytest.mark.parametrize(
    ("a", "env", "needle"),
    [
        (args(path="/nonexistent/url"), {}, "--redis-url-file: /nonexistent/url"),
        (args(), {"CALDERA_REDIS_URL_FILE": "/nonexistent/url"}, "$CALDERA_REDIS_URL_FILE: /nonexistent/url"),
        (args("http://x"), {}, "--redis-url: 'http://x' is not a Redis URL"),
        (args(), {"CALDERA_REDIS_URL": "localhost:6379"}, "$CALDERA_REDIS_URL: 'localhost:6379' is not a Redis URL"),
    ],
)
def test_a_bad_url_or_file_is_one_message_naming_where_it_came_from(
    a: argparse.Namespace, env: dict[str, str], needle: str
) -> None:
    with pytest.raises(ValueError, match="^" + needle.replace("$", r"\$").replace("(", r"\(").replace(")", r"\)")):
        resolve_redis_url(a, env)


def test_a_password_in_a_bad_url_is_not_echoed(tmp_path: Path) -> None:
    secret = tmp_path / "url"
    secret.write_text("http://:s3cret@host/0")
    with pytest.raises(ValueError) as e:
        resolve_redis_url(args(path=str(secret)), {})
    assert "s3cret" not in str(e.value) and "(hidden)" in str(e.value)


def _run(*args: str, url_file: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CALDERA_REDIS_URL_FILE": str(url_file)}
    return subprocess.run(
        [sys.executable, "-m", "caldera", *args], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )


def test_a_store_that_refuses_the_password_or_cannot_be_reached_is_named_without_the_password(
    tmp_path: Path,
) -> None:
    """A refusal is one error line and exit 1 (process, status, audit); an unreachable store is one
    line too: exit 1 for the commands, and a warning for a process, which waits for it until SIGTERM."""
    passwords = {role: secrets.token_hex(8) for role in Role}
    aclfile = tmp_path / "users.acl"
    aclfile.write_text(acl_file(Keys("default"), passwords))
    wrong = "Wr0ngPassw0rd" + secrets.token_hex(4)
    url_file = tmp_path / "url"
    with RedisServer(aclfile=str(aclfile)) as server:
        refused = f"redis://caldera-sharding:{wrong}@127.0.0.1:{server.port}/0"
        url_file.write_text(refused + "\n")
        for prog, args in (
            ("sharding", ("sharding", "--metrics-port", "0")),
            ("caldera status", ("status",)),
            ("caldera audit", ("audit",)),
        ):
            r = _run(*args, url_file=url_file)
            lines = (r.stdout + r.stderr).strip().splitlines()
            assert r.returncode == 1, (args, lines)
            shown = refused.replace(wrong, "***")
            assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: the store at {shown}: "), lines
            assert "invalid username-password pair" in lines[0] and wrong not in lines[0], lines
    unreachable = f"redis://caldera-sharding:{wrong}@127.0.0.1:{free_port()}/0"
    url_file.write_text(unreachable + "\n")
    shown = unreachable.replace(wrong, "***")
    for prog, args in (("caldera status", ("status",)), ("caldera audit", ("audit",))):
        r = _run(*args, url_file=url_file)
        lines = (r.stdout + r.stderr).strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1, (args, lines)
        assert lines[0].startswith(f"{prog}: error: the store at {shown}: ") and "Connection refused" in lines[0]
    env = {**os.environ, "CALDERA_REDIS_URL_FILE": str(url_file)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "caldera", "sharding", "--metrics-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith(f"sharding: warning: the store at {shown}: the store does not answer ("), line
        assert "Connection refused" in line and wrong not in line
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and wrong not in out + err, (out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
