"""``caldera audit``: check the store's allocation invariant and/or the API server's nodes for
over-commits; exit 1 on any violation.

``--redis-url``: caldera's own books (:mod:`cluster.store.audit`). ``--kubeconfig``/``--master``:
what the cluster holds, whoever bound the pods (:mod:`cluster.kube.audit`). Both may be given.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from caldera._loop import run_loop
from caldera._store import client
from cluster.kube.audit import api_audit
from cluster.kube.connect import api_client
from cluster.model.text import one_line
from cluster.store.audit import audit
from cluster.store.keys import Keys
from cluster.store.store import Store


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "audit", help="check that no node is over-committed and no pod is bound twice (the store, the API server)"
    )
    p.add_argument("--redis-url", default=None, help="the store to check, e.g. redis://127.0.0.1:6379/0")
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
    if not (args.redis_url or args.kubeconfig or args.master):
        print("caldera audit: error: give --redis-url, --kubeconfig or --master (what to check)", file=sys.stderr)
        return 2
    try:
        keys = Keys(args.cluster)
        api = api_client(args.kubeconfig, args.master) if (args.kubeconfig or args.master) else None
    except ValueError as e:
        print(f"caldera audit: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    problems: list[str] = []
    if args.redis_url:
        problems += run_loop(check(args.redis_url, keys.cluster))
    if api is not None:
        problems += [f"API server: {line}" for line in api_audit(api)]
    for line in problems:
        print(line)
    if problems:
        print(f"audit: {len(problems)} violation(s)")
        return 1
    print("audit: ok")
    return 0
