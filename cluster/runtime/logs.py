"""Logging, configured once per process: ``--log-level`` and ``--log-format text|json``.

Lines below WARNING go to stdout, the rest to stderr. In text a line reads
``<component>: <message>`` (``<component>: warning: <message>`` from WARNING up), the
form every caldera process has always printed; in json it is one object per line with
``ts``, ``level``, ``logger``, ``component`` and ``msg``.
"""

from __future__ import annotations

import argparse
import enum
import json
import logging
import sys
import time

LEVELS = ("debug", "info", "warning", "error")


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


def add_log_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level", default="info", choices=LEVELS, help="the least severe lines logged (default: info)"
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=[f.value for f in LogFormat],
        help="text lines or one JSON object per line (default: text)",
    )


class _Text(logging.Formatter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.WARNING:
            return f"{self.component}: {record.levelname.lower()}: {message}"
        return f"{self.component}: {message}"


class _Json(logging.Formatter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "component": self.component,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


class _Below(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < self.level


def configure(component: str, level: str = "info", fmt: LogFormat = LogFormat.TEXT) -> None:
    """Route every ``caldera.*`` logger (and the root) to stdout/stderr in one format; idempotent."""
    formatter: logging.Formatter = _Json(component) if fmt is LogFormat.JSON else _Text(component)
    out = logging.StreamHandler(sys.stdout)
    out.addFilter(_Below(logging.WARNING))
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.WARNING)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in (out, err):
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(level.upper())


def logger(component: str) -> logging.Logger:
    """The logger of one process or part (``caldera.<component>``)."""
    return logging.getLogger(f"caldera.{component}")
