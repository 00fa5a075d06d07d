"""Command-line plumbing every process shares: a one-line-error parser and Go-style durations."""

from __future__ import annotations

import argparse
import re
from typing import NoReturn

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


class Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (``200ms``, ``1m30s``, ``60s``; a bare ``0`` is zero).

    Raises ValueError naming the value and the accepted form.
    """
    s = text.strip()
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"invalid duration {text!r} (expected a Go duration such as 200ms, 60s or 1m30s)")
    return total


def duration(text: str) -> float:
    """argparse type for a non-negative duration."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
