"""Command-line plumbing every process shares: a one-line-error parser and Go-style durations."""

from __future__ import annotations

import argparse
from typing import NoReturn

from cluster.model.duration import parse_duration as go_duration
from cluster.model.sharding import ShardingMode
from cluster.model.text import one_line


class Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")  # a value may hold a line break


def parse_duration(text: str) -> float:
    """Seconds in a flag's Go duration (surrounding spaces ignored, no sign). ValueError names the value."""
    return go_duration(text.strip())


def duration(text: str) -> float:
    """argparse type for a non-negative duration."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def workers_or_auto(text: str) -> int | None:
    """argparse type for ``--workers``: a count of 1 or more, or ``auto`` (None: the process sizes it)."""
    if text.strip() == "auto":
        return None
    try:
        count = int(text.strip())
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"{text!r} (expected auto or a positive whole number)")
    return count


def add_sharding_mode(parser: argparse.ArgumentParser, help: str = "") -> None:
    """``--sharding-mode`` (hard, soft or none; default soft), as every scheduler takes it."""
    parser.add_argument(
        "--sharding-mode",
        default=ShardingMode.SOFT.value,
        choices=[m.value for m in ShardingMode],
        help=help or "hard: own shard only; soft: own, then unowned, then others; none (default: soft)",
    )


def add_rebind_after(parser: argparse.ArgumentParser) -> None:
    """``--rebind-after``, as every scheduler takes it (see :mod:`binder.rebind`)."""
    parser.add_argument(
        "--rebind-after",
        default="5s",
        help="bind a pod left committed but unbound this long by a scheduler that stopped (default: 5s)",
    )


def rebind_after(args: argparse.Namespace) -> float:
    """``--rebind-after``, checked: a positive duration (ValueError with one line)."""
    try:
        seconds = parse_duration(args.rebind_after)
    except ValueError as e:
        raise ValueError(f"--rebind-after: {e}") from None
    if seconds <= 0:
        raise ValueError(f"--rebind-after: {args.rebind_after!r} (expected a positive duration such as 5s)")
    return seconds
