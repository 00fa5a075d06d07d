"""Decoding JSON and YAML builtins into the model's Structs as Go reads them: a null is absent.

The API server sends ``null`` for unset pointers, hand-written YAML has ``labels:`` with
nothing under it, and YAML turns unquoted timestamps into datetimes: :func:`from_builtins`
drops nulls and writes timestamps back as RFC 3339 text before msgspec decodes, and
:func:`decode_json` does the same for raw JSON (the mirror's watch bodies).
"""

from __future__ import annotations

import datetime
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")


def normalise(obj: Any) -> Any:
    """Go's reading of builtins: a null field is absent; YAML timestamps become RFC 3339 text."""
    if isinstance(obj, dict):
        return {k: normalise(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [normalise(v) for v in obj]
    if isinstance(obj, datetime.datetime):
        if obj.tzinfo is not None:
            obj = obj.astimezone(datetime.UTC).replace(tzinfo=None)
        return obj.isoformat(timespec="microseconds" if obj.microsecond else "seconds") + "Z"
    if isinstance(obj, datetime.date):
        return obj.isoformat()
    return obj


def from_builtins(obj: object, type_: type[T]) -> T:
    """Decode parsed JSON/YAML (dicts, lists, scalars) into ``type_``, nulls meaning absent.

    Raises msgspec.ValidationError naming the path of a wrong field.
    """
    return msgspec.convert(normalise(obj), type_)


def decode_json(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into ``type_``, nulls meaning absent (see :func:`from_builtins`)."""
    return from_builtins(msgspec.json.decode(data), type_)
