"""The ``caldera`` command: one subcommand per job, each parsed into a typed config."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from caldera import audit_cmd, bench_binder, demo


class Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> Parser:
    parser = Parser(prog="caldera", description="caldera: a Kubernetes scheduler for AI clusters.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    audit_cmd.add_parser(sub)
    bench = sub.add_parser("bench", help="benchmarks; figures are ratios measured in the same run")
    bench_sub = bench.add_subparsers(dest="bench", required=True, parser_class=Parser)
    bench_binder.add_parser(bench_sub)
    demo.add_parser(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so every context manager (redis-server, tasks) cleans up."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
