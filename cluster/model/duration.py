"""Go durations (``200ms``, ``1m30s``, ``1.5h``), as ``time.ParseDuration`` reads them: the one parser
of flags (``cluster.runtime.flags``) and of Volcano Job policy timeouts."""

from __future__ import annotations

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str, *, signed: bool = False) -> float:
    """Seconds in a Go duration (a bare ``0`` is zero); with ``signed`` one leading ``+`` or ``-``
    is read as Go reads it. Raises ValueError naming the value and the accepted form."""
    s, sign = text, 1.0
    if signed and s[:1] in ("+", "-"):
        sign, s = (-1.0 if s[0] == "-" else 1.0), s[1:]
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
    return sign * total
