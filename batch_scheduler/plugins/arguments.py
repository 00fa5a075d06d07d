"""Integer plugin arguments, read as Volcano's ``framework.Arguments.GetInt`` reads them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

_INTEGER = re.compile(r"[+-]?[0-9]+")


def weight(arguments: Mapping[str, str], name: str, default: int, *, negative: int | None = None) -> int:
    """A weight argument: an integer is used; another number leaves ``default``, as Volcano's
    ``GetInt`` does (it logs a warning and keeps its default for ``1.5``).

    caldera refuses what is not a number at all, and a negative weight unless ``negative``
    says what Volcano makes of one (binpack's resource weights: 1).
    """
    text = arguments.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (value < 0 and negative is None):
        raise ValueError(f"{name}: {text!r} (expected a number >= 0)")
    if value < 0:
        assert negative is not None
        return negative
    return int(text) if _INTEGER.fullmatch(text.strip()) else default
