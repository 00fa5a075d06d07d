"""Plugin arguments: each plugin's typed :class:`Arguments`, decoded from the conf's text once, when the conf loads.

Volcano's plugins read their arguments as text (``framework.Arguments``); so does the
conf, and a plugin's :class:`Arguments` subclass turns that text into typed fields,
refusing a bad value with one line naming it (the conf loader puts where it is in front).
The readers here are Volcano's: ``GetInt`` for weights, plain numbers, Go's booleans.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import ClassVar, Self

import msgspec

_INTEGER = re.compile(r"[+-]?[0-9]+")


class Arguments(msgspec.Struct, frozen=True, kw_only=True):
    """A plugin's arguments; this base is those of a plugin that takes none.

    ``reads`` (and names starting with one of ``prefixes``): the arguments the plugin takes;
    the conf loader hands it only those, and accepts any other with no effect.
    """

    reads: ClassVar[frozenset[str]] = frozenset()
    prefixes: ClassVar[tuple[str, ...]] = ()
    # What of Volcano's plugin caldera does not honour yet: a conf naming the plugin warns with it.
    unhonoured: ClassVar[str] = ""

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        """The typed arguments from their text; ValueError naming the first bad one."""
        return cls()

    @classmethod
    def load(cls, plugin: str, arguments: Mapping[str, str]) -> Self:
        """:meth:`decode`, after refusing an argument name the plugin does not take."""
        check_arguments(plugin, arguments, cls.reads, cls.prefixes)
        return cls.decode(arguments)


def check_arguments(
    plugin: str, arguments: Mapping[str, str], accepted: Iterable[str] = (), prefixes: Iterable[str] = ()
) -> None:
    """Refuse an argument name the plugin does not know, naming what it accepts."""
    known, starts = set(accepted), tuple(prefixes)
    for name in arguments:
        if name not in known and not (starts and name.startswith(starts)):
            listed = ", ".join(sorted(known) + [p + "<name>" for p in starts]) or "none"
            raise ValueError(f"unknown argument {name!r} for plugin {plugin} (accepted: {listed})")


def number(arguments: Mapping[str, str], name: str, default: float, *, minimum: float = 0.0) -> float:
    """A numeric argument, at least ``minimum``; ValueError naming it otherwise."""
    text = arguments.get(name)
    if text is None:
        return default
    value = _float(text)
    if not (value >= minimum) or value == float("inf"):
        raise ValueError(f"{name}: {text!r} (expected a number >= {minimum:g})")
    return value


def weight(arguments: Mapping[str, str], name: str, default: int, *, negative: int | None = None) -> int:
    """A weight argument, read as Volcano's ``framework.Arguments.GetInt`` reads it: an integer is
    used; another number leaves ``default`` (Volcano logs a warning and keeps its default for ``1.5``).

    caldera refuses what is not a number at all, and a negative weight unless ``negative``
    says what Volcano makes of one (binpack's resource weights: 1).
    """
    text = arguments.get(name)
    if text is None:
        return default
    value = _float(text)
    if not math.isfinite(value) or (value < 0 and negative is None):
        raise ValueError(f"{name}: {text!r} (expected a number >= 0)")
    if value < 0:
        assert negative is not None
        return negative
    return int(text) if _INTEGER.fullmatch(text.strip()) else default


def _float(text: str) -> float:
    """The text's number; NaN when it is none."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def flag(arguments: Mapping[str, str], name: str, default: bool = True) -> bool:
    """A true/false argument (any case); ValueError naming it otherwise."""
    value = arguments.get(name, "true" if default else "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{name}: {arguments[name]!r} (expected true or false)")
    return value == "true"
