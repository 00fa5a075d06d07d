"""Where a process finds its store: the flag, the environment, or a file (a mounted Secret)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cluster.runtime.process import DEFAULT_REDIS_URL, resolve_redis_url


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
