"""``caldera audit``: check the store's allocation invariant and/or the API server's nodes for
over-commits; exit 1 on any violation.

``--redis-url`` or ``--redis-url-file`` (or their environment variables): caldera's own books
(:mod:`cluster.store.audit`), read-only. ``--kubeconfig``/``--master``:
what the cluster holds, whoever bound the pods (:mod:`cluster.kube.audit`). Both may be given.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from caldera._loop import run_loop
from caldera._store import client, store_failure, store_url
from cluster.kube.audit import api_audit
from cluster.kube.connect import api_client
from cluster.model.text import one_line
from cluster.runtime.process import REDIS_URL_ENV, REDIS_URL_FILE_ENV, add_redis_flags
from cluster.store.audit import audit
from cluster.store.client import StoreError
from cluster.store.keys import Keys
from cluster.store.store import Store


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "audit", help="check that no node is over-committed and no pod is bound twice (the store, the API server)"
    )
    add_redis_flags(p)
    p.add_argument("--cluster", default="default", help="cluster name in the store (default: default)")
    p.add_argument(
        "--kubeconfig", default=None, help="check the API server of this kubeconfig: bound pods against allocatable"
    )
    p.add_argument("--master", default=None, help="the API server's address, overriding the kubeconfig's")
    p.set_defaults(run=run)


async def check(url: str, cluster: str) -> list[str]:
    async with client(url) as c:
        return await audit(Store(c, Keys(cluster)))


def run(args: argparse.Namespace) -> int:
    # The store is checked when one is named: a flag, or the environment the processes read.
    store_given = bool(
        args.redis_url or args.redis_url_file or os.environ.get(REDIS_URL_ENV) or os.environ.get(REDIS_URL_FILE_ENV)
    )
    if not (store_given or args.kubeconfig or args.master):
        print(
            "caldera audit: error: give --redis-url or --redis-url-file, --kubeconfig or --master (what to check)",
            file=sys.stderr,
        )
        return 2
    try:
        try:
            keys = Keys(args.cluster)
        except ValueError as e:
            raise ValueError(f"--cluster: {e}") from None
        api = api_client(args.kubeconfig, args.master) if (args.kubeconfig or args.master) else None
    except ValueError as e:
        print(f"caldera audit: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    url = None
    if store_given:
        url = store_url("caldera audit", args)
        if url is None:
            return 2
    problems: list[str] = []
    if url is not None:
        try:
            problems += run_loop(check(url, keys.cluster))
        except (OSError, StoreError) as e:
            print(store_failure("caldera audit", url, e), file=sys.stderr)
            return 1
    if api is not None:
        problems += [f"API server: {line}" for line in api_audit(api)]
    for line in problems:
        print(line)
    if problems:
        print(f"audit: {len(problems)} violation(s)")
        return 1
    print("audit: ok")
    return 0
