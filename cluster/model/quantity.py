"""Kubernetes resource quantities ("500m", "4Gi", "1e3"), parsed as the API server parses them.

A quantity is parsed to its exact value (a Fraction), then turned into the integer
*amount* the store and the schedulers count in: millicores for ``cpu``, plain units
(bytes, GPUs, pods, ...) for everything else, rounded up like the API server's
``MilliValue()`` / ``Value()``.

Decisions, where Kubernetes' own parser is looser or inconsistent:

- Surrounding whitespace is ignored (the API server trims it when decoding JSON and YAML);
  whitespace inside is an error.
- At least one digit is required: Kubernetes' hand-written scanner reads "-", "+" and "."
  as zero; here they are errors, as in its documented grammar.
- Like Kubernetes, a non-zero value is rounded up in magnitude to a whole nano unit
  ("0.1n" is 1n), so the values here are always multiples of 1e-9.
- Values above 2**63 - 1 are an error instead of being capped (Kubernetes caps some
  formats and overflows others); amounts are kept inside int64 as well, since the store
  keeps them in integer fields.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

MAX_INT64 = 2**63 - 1
_NANO = 10**9

_CPU = "cpu"

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

# sign, integer digits, fraction digits, then a binary or decimal suffix or an exponent.
# A suffix "E" (exa) and an exponent "E3" share a letter; the regex backtracks to the
# exponent when digits follow, as Kubernetes does.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<suffix>[KMGTPE]i|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?",
    re.ASCII,
)

ACCEPTED = (
    "a number with an optional suffix: n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent like 1e3"
)


class QuantityError(ValueError):
    """A quantity that cannot be used; the message names the field, the value and what is accepted."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.value = value
        self.problem = problem


def _invalid(field: str, value: object) -> QuantityError:
    return QuantityError(field, value, f"invalid quantity {value!r} (expected {ACCEPTED})")


def _too_large(field: str, value: object, unit: str = "") -> QuantityError:
    return QuantityError(field, value, f"quantity {value!r} is too large (at most {MAX_INT64}{unit})")


def parse_quantity(value: str | int | float, *, field: str) -> Fraction:
    """The exact value of a Kubernetes quantity; ``field`` names it in errors.

    Strings follow Kubernetes' grammar; ints and floats (YAML's ``cpu: 4``) are read as
    their decimal text, as the API server does with a JSON number. Booleans are refused.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        kind = type(value).__name__
        raise QuantityError(
            field, value, f"invalid quantity {value!r} (a {kind}; expected {ACCEPTED}, as a string or a number)"
        )
    text = value.strip() if isinstance(value, str) else repr(value)
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise _invalid(field, value)
    digits, frac = match["int"], match["frac"] or ""
    if not digits and not frac:
        raise _invalid(field, value)

    mantissa = int(digits + frac or "0")
    if mantissa == 0:
        return Fraction(0)
    suffix, exp = match["suffix"], match["exp"]
    if suffix in _BINARY_SUFFIXES:
        exact = Fraction(mantissa << _BINARY_SUFFIXES[suffix], 10 ** len(frac))
    else:
        scale = (int(exp) if exp is not None else _DECIMAL_SUFFIXES[suffix or ""]) - len(frac)
        size = len(str(mantissa))  # mantissa < 10**size
        if size - 1 + scale > 19:  # at least 10**20: no need to build a huge number
            raise _too_large(field, value)
        # below 1n: rounds up to 1n below
        exact = Fraction(1, 10 * _NANO) if -scale > size + 9 else Fraction(mantissa) * Fraction(10) ** scale
    nanos = math.ceil(exact * _NANO)
    if nanos > MAX_INT64 * _NANO:
        raise _too_large(field, value)
    magnitude = Fraction(nanos, _NANO)
    return -magnitude if match["sign"] == "-" else magnitude


def to_amount(resource: str, q: Fraction) -> int:
    """The integer amount of ``resource`` in ``q``: millicores for cpu, whole units otherwise.

    Rounded up (ceil), as the API server's ``MilliValue()`` and ``Value()`` round a
    non-negative quantity: "0.0001" cpu is 1m, "0.5" of a GPU is 1.
    """
    return math.ceil(q * 1000) if resource == _CPU else math.ceil(q)


_AMOUNTS: dict[tuple[str, str, bool], int] = {}
"""Amounts already parsed from quantity strings: a cluster's pods repeat a few ("100m", "1Gi"), and
exact parsing (Fractions) cost the mirror a tenth of its time per pod. Bounded: once full, only looked in."""
_AMOUNTS_MAX = 65_536


def parse_amount(resource: str, value: str | int | float, *, field: str, negative: bool = True) -> int:
    """``to_amount(resource, parse_quantity(value))``, kept inside int64.

    With ``negative=False`` a quantity below zero is an error, before rounding: "-0.0001"
    cpu would otherwise round up to 0m and pass.
    """
    key = (resource, value, negative) if isinstance(value, str) else None
    if key is not None and (known := _AMOUNTS.get(key)) is not None:
        return known
    amount = _parse_amount(resource, value, field=field, negative=negative)
    if key is not None and len(_AMOUNTS) < _AMOUNTS_MAX:
        _AMOUNTS[key] = amount
    return amount


def _parse_amount(resource: str, value: str | int | float, *, field: str, negative: bool) -> int:
    q = parse_quantity(value, field=field)
    if q < 0 and not negative:
        raise QuantityError(field, value, f"quantity {value!r} must not be negative")
    amount = to_amount(resource, q)
    if abs(amount) > MAX_INT64:
        raise _too_large(field, value, " millicores" if resource == _CPU else "")
    return amount


def is_byte_resource(resource: str) -> bool:
    """Whether amounts of ``resource`` are bytes (memory, storage, hugepages)."""
    return resource.endswith(("memory", "storage")) or resource.startswith("hugepages-")


def format_amount(resource: str, amount: int) -> str:
    """The canonical quantity text of an amount; it parses back to the same amount.

    cpu: "2" for whole cores, else "1500m"; bytes: the largest exact binary suffix
    ("4Gi", "512Mi"), else the plain number; anything else: the plain number.
    """
    if resource == _CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount and is_byte_resource(resource):
        for suffix, shift in reversed(_BINARY_SUFFIXES.items()):
            if amount % (1 << shift) == 0:
                return f"{amount >> shift}{suffix}"
    return str(amount)
