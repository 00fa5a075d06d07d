"""Reading a conf's values: scalars as text, mappings, and the argument values Volcano corrects with a warning.

Helpers of :mod:`batch_scheduler.conf`; every problem is a :class:`ConfError` of one line.
"""

from __future__ import annotations

import datetime
import difflib
import math
from collections.abc import Collection
from typing import Any

from batch_scheduler.plugins.capacity import ANCESTOR_RECLAIM_LEVEL
from cluster.model.text import one_line

OVERCOMMIT_FACTOR = "overcommit-factor"
DEFAULT_OVERCOMMIT_FACTOR = "1.2"  # Volcano's, also where a conf gives less than 1


class ConfError(ValueError):
    """A conf that cannot be used; one line naming the entry, the value and what is accepted."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))  # a key or value of the conf may hold a newline


def nearest(name: str, known: Collection[str]) -> str:
    """``did you mean 'x'? `` for the closest known name, or nothing."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def text_value(value: object, where: str) -> str | None:
    """A scalar argument as text (None: no value, so the default); ConfError for a list or mapping."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    raise ConfError(f"scheduler conf: {where}: {value!r} is not a scalar (expected a string or number)")


def mapping(raw: object, where: str) -> dict[Any, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfError(f"scheduler conf: {where}: expected a mapping of name: value, got {type(raw).__name__}")
    return raw


def unread(owner: str, argument: str, known: Collection[str]) -> str:
    # Closer than for names: arguments share long prefixes (predicate.…) that say nothing.
    near = difflib.get_close_matches(argument, sorted(known), n=1, cutoff=0.8)
    hint = f' (nearest: "{near[0]}")' if near else ""
    return f'conf {owner}: argument "{argument}" is read by neither caldera nor Volcano; it has no effect{hint}'


def ancestor_level(arguments: dict[str, str], owner: str, enabled: frozenset[str], warnings: list[str]) -> None:
    """capacity's ancestorReclaimLevel: below 0 it is 0, as in Volcano; without the hierarchy it
    does nothing, as in Volcano. Both with a warning."""
    try:
        level = int(arguments.get(ANCESTOR_RECLAIM_LEVEL, "0"))
    except ValueError:
        return  # the plugin refuses it, naming it
    if level < 0:
        warnings.append(
            f"conf {owner}: {ANCESTOR_RECLAIM_LEVEL} {level} is below 0; using 0 (only the queues' own "
            "deserved decide reclaim), as Volcano does"
        )
        arguments[ANCESTOR_RECLAIM_LEVEL] = "0"
    elif level > 0 and "enableHierarchy" not in enabled:
        warnings.append(
            f"conf {owner}: {ANCESTOR_RECLAIM_LEVEL} {level} has no effect without enableHierarchy: true "
            "(as in Volcano)"
        )


def overcommit_factor(arguments: dict[str, str], owner: str, where: str, warnings: list[str]) -> None:
    """Refuse a factor that is not a number; one below 1 is Volcano's default, with a warning."""
    text = arguments.get(OVERCOMMIT_FACTOR)
    if text is None:
        return
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ConfError(f"scheduler conf: {where}: {OVERCOMMIT_FACTOR}: {text!r} (expected a number >= 1)")
    if value < 1:
        warnings.append(
            f"conf {owner}: {OVERCOMMIT_FACTOR} {text} is below 1; using {DEFAULT_OVERCOMMIT_FACTOR}, as Volcano does"
        )
        arguments[OVERCOMMIT_FACTOR] = DEFAULT_OVERCOMMIT_FACTOR
