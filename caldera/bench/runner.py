"""What every bench command shares: positive-integer flags, a Redis (and a local Ray) around the
measurement, and the report printed as one JSON object (``--json``) or as the bench's own text."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Protocol, TypeVar

import msgspec

from caldera._loop import run_loop
from caldera._store import redis_url

R = TypeVar("R")


MAX_NODES = 100_000  # a bench cluster's nodes (the upper bounds keep a typo from building without end)
MAX_PODS = 1_000_000
MAX_WORKERS = 64


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1, in decimal digits."""
    try:
        value = int(text) if text.strip().isascii() else 0
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} (expected a positive integer)")
    return value


class Output(Protocol):
    """What :func:`run_bench` reads of a bench's config."""

    @property
    def redis_url(self) -> str | None: ...
    @property
    def json(self) -> bool: ...


def measured(
    redis: str | None, measure: Callable[[str], Coroutine[Any, Any, R]], *, ray: bool = False, ray_address: str = ""
) -> R:
    """``measure(url)`` (see caldera._loop), with the Redis at ``redis`` (or a private redis-server) and, with ``ray``,
    a local Ray around it (or the Ray cluster at ``ray_address``, joined and left)."""
    with redis_url(redis) as url, local_ray(ray_address) if ray else contextlib.nullcontext():
        return run_loop(measure(url))


@contextlib.contextmanager
def local_ray(address: str = "") -> Iterator[None]:
    """A local Ray with a CPU per core (or the cluster at ``address``, joined), stopped (left) on exit."""
    from agent_scheduler.actors import (  # ray is heavy: import it only to use it
        start_ray,
        stop_ray,
    )

    start_ray(address, num_cpus=os.cpu_count() or 2)
    try:
        yield
    finally:
        stop_ray()


def run_bench(
    args: Output,
    measure: Callable[[str], Coroutine[Any, Any, R]],
    text: Callable[[R], str],
    *,
    ok: Callable[[R], bool] = lambda report: True,
    ray: bool = False,
    ray_address: str = "",
) -> int:
    """Measure (see :func:`measured`; ``--redis-url``), print the report, and exit 0 when ``ok(report)``, else 1."""
    report = measured(args.redis_url, measure, ray=ray, ray_address=ray_address)
    print(json.dumps(msgspec.to_builtins(report)) if args.json else text(report))
    return 0 if ok(report) else 1


def figures(width: int) -> Callable[[Any], str]:
    """The report as one ``name value`` line per top-level figure, names padded to ``width``."""

    def lines(report: Any) -> str:
        return "\n".join(f"{k:{width}} {v}" for k, v in msgspec.to_builtins(report).items())

    return lines
