"""Quantities parse as the API server parses them, and amounts round up like MilliValue()."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.model.quantity import (
    MAX_INT64,
    QuantityError,
    format_amount,
    parse_amount,
    parse_quantity,
    to_amount,
)

FIELD = "spec.containers[0].resources.requests.cpu"

DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


@pytest.mark.parametrize(
    ("text", "expected"),
    [(f"3{s}", 3 * Fraction(10) ** e) for s, e in DECIMAL.items() if s != "E"]
    + [("1E", Fraction(10**18))]
    + [(f"3{s}", Fraction(3 * 2**e)) for s, e in BINARY.items() if s != "Ei"]
    + [("1Ei", Fraction(2**60))]
    + [
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("2E-3", Fraction(2, 1000)),
        ("1e+3", Fraction(1000)),
        ("1.5e2", Fraction(150)),
        ("12e-1", Fraction(6, 5)),
        ("0", Fraction(0)),
        ("000", Fraction(0)),
        ("0.0", Fraction(0)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("1.25", Fraction(5, 4)),
        ("1.Gi", Fraction(2**30)),
        ("+2k", Fraction(2000)),
        ("-1.5", Fraction(-3, 2)),
        ("0.5Ki", Fraction(512)),
        ("0.1Ki", Fraction(512, 5)),
        ("007", Fraction(7)),
        (" 1Gi ", Fraction(2**30)),  # the API server trims when decoding
        (4, Fraction(4)),
        (0.5, Fraction(1, 2)),
        (1e-05, Fraction(1, 100000)),
        (-2, Fraction(-2)),
    ],
)
def test_parse_quantity(text: str | int | float, expected: Fraction) -> None:
    assert parse_quantity(text, field=FIELD) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.5n", Fraction(1, 10**9)),
        ("0.0000000001", Fraction(1, 10**9)),
        ("1e-30", Fraction(1, 10**9)),
        ("1e-99999999999", Fraction(1, 10**9)),
        ("-0.5n", Fraction(-1, 10**9)),
        ("1.0000000001", Fraction(1_000_000_001, 10**9)),
    ],
)
def test_values_round_up_to_a_nano_unit_like_kubernetes(text: str, expected: Fraction) -> None:
    assert parse_quantity(text, field=FIELD) == expected


@pytest.mark.parametrize(
    ("resource", "text", "amount"),
    [
        ("cpu", "0.0001", 1),
        ("cpu", "1.5", 1500),
        ("cpu", "100m", 100),
        ("cpu", "1", 1000),
        ("cpu", 2, 2000),
        ("cpu", 0.25, 250),
        ("cpu", "1500000u", 1500),
        ("cpu", "1500001u", 1501),
        ("cpu", "1n", 1),
        ("cpu", "0", 0),
        ("cpu", "1e-3", 1),
        ("memory", "1Gi", 1073741824),
        ("memory", "1G", 10**9),
        ("memory", "1.5Gi", 1610612736),
        ("memory", "129e6", 129_000_000),
        ("memory", "128974848", 128974848),
        ("memory", "129M", 129_000_000),
        ("memory", "123Mi", 123 * 2**20),
        ("memory", "0.5", 1),
        ("memory", "1m", 1),
        ("nvidia.com/gpu", "8", 8),
        ("nvidia.com/gpu", 1, 1),
        ("pods", "110", 110),
        ("ephemeral-storage", "10Gi", 10 * 2**30),
    ],
)
def test_parse_amount(resource: str, text: str | int | float, amount: int) -> None:
    assert parse_amount(resource, text, field=FIELD) == amount


@pytest.mark.parametrize("bad", ["", "   ", "1.2.3", "1Gb", "abc", "1 Gi", "--1", "-", "+", ".", "1e", "1K", "1ki",
                                 "1E3.5", "1Ee3", "Gi", "1Gi1", "0x10", "1_000", "\u0661", "1e3m", "inf", "nan",
                                 float("inf"), float("nan")])  # fmt: skip
def test_invalid_quantities_name_the_field_and_the_value(bad: str | float) -> None:
    with pytest.raises(QuantityError) as err:
        parse_quantity(bad, field=FIELD)
    message = str(err.value)
    assert message.startswith(f"{FIELD}: invalid quantity {bad!r} (expected ")
    assert "Ki, Mi, Gi" in message and "\n" not in message
    assert err.value.field == FIELD and err.value.value is bad


@pytest.mark.parametrize("bad", [True, False, None, [1], {"a": 1}])
def test_non_numbers_are_refused(bad: object) -> None:
    with pytest.raises(QuantityError) as err:
        parse_quantity(bad, field=FIELD)  # type: ignore[arg-type]
    assert str(err.value).startswith(f"{FIELD}: invalid quantity {bad!r} (a {type(bad).__name__}; expected ")


@pytest.mark.parametrize(("resource", "text"), [("memory", "1e20"), ("memory", "8Ei"), ("memory", "1e999999999999"),
                                                ("cpu", "9223372036854775807"), ("cpu", "1E")])  # fmt: skip
def test_too_large_is_an_error_not_an_overflow(resource: str, text: str) -> None:
    with pytest.raises(QuantityError, match="too large"):
        parse_amount(resource, text, field=FIELD)


def test_largest_values_still_parse() -> None:
    assert parse_amount("memory", str(MAX_INT64), field=FIELD) == MAX_INT64
    assert parse_amount("cpu", "9223372036854775m", field=FIELD) == 9223372036854775


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 2000, "2"),
        ("cpu", 1500, "1500m"),
        ("cpu", 1, "1m"),
        ("cpu", 0, "0"),
        ("cpu", -1500, "-1500m"),
        ("memory", 4 * 2**30, "4Gi"),
        ("memory", 512 * 2**20, "512Mi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 2**60, "1Ei"),
        ("memory", 1000, "1000"),
        ("memory", 0, "0"),
        ("ephemeral-storage", 2**40, "1Ti"),
        ("hugepages-2Mi", 2**21, "2Mi"),
        ("nvidia.com/gpu", 8, "8"),
        ("pods", 1024, "1024"),
    ],
)
def test_format_amount(resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text
    assert parse_amount(resource, text, field=FIELD) == amount


def test_to_amount_is_ceil() -> None:
    assert to_amount("cpu", Fraction(1, 3)) == 334
    assert to_amount("memory", Fraction(1, 3)) == 1
    assert to_amount("memory", Fraction(-1, 3)) == 0


# -- properties ---------------------------------------------------------------------------

amounts = st.integers(min_value=-(2**62), max_value=2**62)


@given(resource=st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage", "example.com/foo"]),
       amount=amounts)  # fmt: skip
def test_format_then_parse_round_trips(resource: str, amount: int) -> None:
    assert parse_amount(resource, format_amount(resource, amount), field=FIELD) == amount


@st.composite
def quantity_texts(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A valid quantity string and its exact value, built independently of the parser."""
    whole = draw(st.integers(min_value=0, max_value=10**6))
    frac = draw(st.text("0123456789", max_size=12))
    number = draw(st.sampled_from([f"{whole}.{frac}", f"{whole}", f".{frac or '0'}", f"{whole}."]))
    int_part, _, frac_part = number.partition(".")
    value = Fraction(int(int_part or "0")) + (Fraction(int(frac_part), 10 ** len(frac_part)) if frac_part else 0)
    form = draw(st.sampled_from(["decimal", "binary", "exponent"]))
    # suffixes small enough that a cpu amount stays inside int64
    if form == "decimal":
        suffix, exp = draw(st.sampled_from([(s, e) for s, e in DECIMAL.items() if e <= 9]))
        return number + suffix, value * Fraction(10) ** exp
    if form == "binary":
        suffix, shift = draw(st.sampled_from([(s, e) for s, e in BINARY.items() if e <= 30]))
        return number + suffix, value * 2**shift
    exp = draw(st.integers(min_value=-12, max_value=9))
    letter = draw(st.sampled_from(["e", "E"]))
    sign = "+" if exp >= 0 and draw(st.booleans()) else ""
    return f"{number}{letter}{sign}{exp}", value * Fraction(10) ** exp


@given(resource=st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), generated=quantity_texts())
def test_amount_is_the_value_rounded_up_to_one_unit(resource: str, generated: tuple[str, Fraction]) -> None:
    text, value = generated
    units = value * 1000 if resource == "cpu" else value
    amount = parse_amount(resource, text, field=FIELD)
    assert units <= amount < units + 1


@given(generated=quantity_texts())
def test_quantity_is_exact_up_to_a_nano_unit(generated: tuple[str, Fraction]) -> None:
    text, value = generated
    parsed = parse_quantity(text, field=FIELD)
    assert value <= parsed < value + Fraction(1, 10**9)
    assert parse_quantity("-" + text, field=FIELD) == -parsed
