"""The sharding controller's configuration, in Volcano's flag format.

``--scheduler-configs=NAME:TYPE:MIN_UTIL:MAX_UTIL:PREFER_WARMUP:MIN_NODES:MAX_NODES,...``
Overlapping bands are allowed; earlier entries win, as in Volcano.
"""

from __future__ import annotations

import enum

import msgspec

DEFAULT_SCHEDULER_CONFIGS = "volcano:volcano:0.0:0.6:false:2:100,agent-scheduler:agent:0.7:1.0:true:2:100"


class SchedulerType(enum.StrEnum):
    VOLCANO = "volcano"
    AGENT = "agent"


class Utilization(enum.StrEnum):
    """Which requests ÷ allocatable ratio places a node in a band."""

    CPU = "cpu"
    MEMORY = "memory"
    GPU = "gpu"
    MAX = "max"


class ShardConfig(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    type: SchedulerType
    min_util: float
    max_util: float
    prefer_warmup: bool
    min_nodes: int
    max_nodes: int


class ConfigError(ValueError):
    """A malformed --scheduler-configs entry; the message names it and the problem."""


def _entry_error(entry: str, problem: str) -> ConfigError:
    return ConfigError(f"--scheduler-configs: entry {entry!r}: {problem}")


def _util(entry: str, field: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _entry_error(entry, f"{field} {text!r} is not a number (expected 0.0 to 1.0)") from None
    if not 0.0 <= value <= 1.0:
        raise _entry_error(entry, f"{field} {value} is outside [0, 1]")
    return value


def _count(entry: str, field: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _entry_error(entry, f"{field} {text!r} is not an integer") from None
    if value < 0:
        raise _entry_error(entry, f"{field} {value} is negative")
    return value


def parse_scheduler_configs(text: str) -> list[ShardConfig]:
    """Parse the flag; raises ConfigError with one line naming the entry and the problem."""
    configs: list[ShardConfig] = []
    entries = [e.strip() for e in text.split(",")]
    if not any(entries):
        raise ConfigError(
            "--scheduler-configs: empty (expected NAME:TYPE:MIN_UTIL:MAX_UTIL:PREFER_WARMUP:MIN_NODES:MAX_NODES,...)"
        )
    for entry in entries:
        fields = entry.split(":")
        if len(fields) != 7:
            raise _entry_error(
                entry,
                f"has {len(fields)} fields (expected 7: NAME:TYPE:MIN_UTIL:MAX_UTIL:PREFER_WARMUP:MIN_NODES:MAX_NODES)",
            )
        name, kind, lo, hi, warm, mn, mx = fields
        if not name:
            raise _entry_error(entry, "NAME is empty")
        if any(c.name == name for c in configs):
            raise _entry_error(entry, f"NAME {name!r} appears twice")
        try:
            stype = SchedulerType(kind)
        except ValueError:
            raise _entry_error(entry, f"TYPE {kind!r} is unknown (expected volcano or agent)") from None
        min_util, max_util = _util(entry, "MIN_UTIL", lo), _util(entry, "MAX_UTIL", hi)
        if min_util > max_util:
            raise _entry_error(entry, f"MIN_UTIL {min_util} > MAX_UTIL {max_util}")
        if warm.lower() not in ("true", "false"):
            raise _entry_error(entry, f"PREFER_WARMUP {warm!r} (expected true or false)")
        min_nodes, max_nodes = _count(entry, "MIN_NODES", mn), _count(entry, "MAX_NODES", mx)
        if min_nodes > max_nodes:
            raise _entry_error(entry, f"MIN_NODES {min_nodes} > MAX_NODES {max_nodes}")
        configs.append(
            ShardConfig(
                name=name,
                type=stype,
                min_util=min_util,
                max_util=max_util,
                prefer_warmup=warm.lower() == "true",
                min_nodes=min_nodes,
                max_nodes=max_nodes,
            )
        )
    return configs
