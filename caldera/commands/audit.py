"""``caldera audit``: check the allocation invariant of a live store; exit 1 on any violation."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from caldera._loop import run_loop
from caldera._store import client, store_failure, store_url
from cluster.runtime.process import add_redis_flags
from cluster.store.audit import audit
from cluster.store.client import StoreError
from cluster.store.keys import Keys
from cluster.store.store import Store


def add_parser(sub: Any) -> None:
    p = sub.add_parser("audit", help="check that no node is over-committed and no pod is bound twice")
    add_redis_flags(p)
    p.add_argument("--cluster", default="default", help="cluster name in the store (default: default)")
    p.set_defaults(run=run)


async def check(url: str, cluster: str) -> list[str]:
    async with client(url) as c:
        return await audit(Store(c, Keys(cluster)))


def run(args: argparse.Namespace) -> int:
    try:
        keys = Keys(args.cluster)
    except ValueError as e:
        print(f"caldera audit: error: --cluster: {e}", file=sys.stderr)
        return 2
    url = store_url("caldera audit", args)
    if url is None:
        return 2
    try:
        problems = run_loop(check(url, keys.cluster))
    except (OSError, StoreError) as e:
        print(store_failure("caldera audit", url, e), file=sys.stderr)
        return 1
    for line in problems:
        print(line)
    if problems:
        print(f"audit: {len(problems)} violation(s)")
        return 1
    print("audit: ok")
    return 0
