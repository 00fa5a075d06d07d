"""A command's flags, checked into its typed config before anything starts.

As each process's ``main`` does with ``configs_or_none``, every ``caldera`` command that
runs something (``demo``, ``bench`` and each bench, ``dry-run``) turns its flags into a
frozen msgspec Struct first: :func:`from_flags` takes each field from the flag of the same
name, and the field's bounds (``msgspec.Meta``: ``ge``, ``le``…, with a ``description`` of
what is accepted) refuse a value out of range; the command's own checks (files that must
read, a folder that must be writable) raise ValueError. :func:`checked` turns a refusal
into the one line ``<prog>: error: --flag VALUE: what is accepted`` and the caller exits 2,
having started nothing and written nothing.

The argparse types here read numbers as a person types them: ASCII digits only (Python's
``float`` and ``int`` would take ``١٢`` for 12), finite (``nan``, ``inf`` and ``1e400``
are refused), and durations as ``90s``, ``30m``, ``1h30m`` or plain seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import msgspec

from cluster.model.duration import parse_duration
from cluster.model.text import one_line

S = TypeVar("S", bound=msgspec.Struct)
T = TypeVar("T")


def _ascii(text: str, accepted: str) -> str:
    if not text.isascii() or not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} (expected {accepted})")
    return text.strip()


def number(text: str) -> float:
    """argparse type: a finite decimal number."""
    accepted = "a finite number"
    try:
        value = float(_ascii(text, accepted))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} (expected {accepted})") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} (expected {accepted})")
    return value


def whole(text: str) -> int:
    """argparse type: a whole number in decimal digits."""
    accepted = "a whole number"
    try:
        return int(_ascii(text, accepted))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} (expected {accepted})") from None


def seconds(text: str) -> float:
    """argparse type: a duration, ``90s``, ``30m``, ``1h30m`` (Go's form) or plain seconds (``45``, ``1.5``)."""
    accepted = "a duration such as 90s, 30m or 1h30m, or plain seconds"
    stripped = _ascii(text, accepted)
    try:
        value = float(stripped) if stripped[-1].isdigit() or stripped[-1] == "." else parse_duration(stripped)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} (expected {accepted})") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} (expected {accepted})")
    return value


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _accepted(kind: type[msgspec.Struct], field: str, fallback: str) -> str:
    """The field's ``Meta(description=…)``, as "expected …"; else msgspec's own words."""
    hint = typing.get_type_hints(kind, include_extras=True).get(field)
    for arg in (hint, *typing.get_args(hint)):  # Annotated[...], or Annotated[...] | None
        for meta in getattr(arg, "__metadata__", ()):
            if isinstance(meta, msgspec.Meta) and meta.description:
                return f"expected {meta.description}"
    return fallback[:1].lower() + fallback[1:]


def from_flags(kind: type[S], args: argparse.Namespace, **extra: Any) -> S:
    """``kind`` with each field from the flag of the same name (or ``extra``); ValueError naming the
    flag, its value and what is accepted."""
    values = {f.name: getattr(args, f.name) for f in msgspec.structs.fields(kind) if hasattr(args, f.name)}
    values.update(extra)
    try:
        return msgspec.convert(values, kind)
    except msgspec.ValidationError as e:
        message = str(e)
        field = message.rsplit("at `$.", 1)[1].split("`")[0].split("[")[0] if "at `$." in message else ""
        if not field:  # a check of the whole config (__post_init__) says itself what is wrong
            raise ValueError(message) from None
        plain = message.rsplit(" - at ", 1)[0]
        raise ValueError(f"{flag(field)} {values.get(field)}: {_accepted(kind, field, plain)}") from None


def checked(prog: str, args: argparse.Namespace, build: Callable[[argparse.Namespace], T]) -> T | None:
    """``build(args)``, or None after one line on stderr naming what is refused (the caller exits 2)."""
    try:
        return build(args)
    except (ValueError, OSError) as e:
        print(f"{prog}: error: {one_line(str(e))}", file=sys.stderr)
        return None


def _named(option: str, path: str) -> Path:
    if "\x00" in path:  # the system calls refuse it with a ValueError of their own
        raise ValueError(f"{option} {path!r}: not a file name (it holds a NUL byte)")
    return Path(path)


def readable_file(option: str, path: str) -> str:
    """``path`` if it is a file this process can read; ValueError naming ``option`` otherwise."""
    p = _named(option, path)
    if not p.exists():
        raise ValueError(f"{option} {path}: no such file")
    if p.is_dir():
        raise ValueError(f"{option} {path}: a directory (expected a file)")
    if not os.access(p, os.R_OK):
        raise ValueError(f"{option} {path}: not readable")
    return path


def writable_folder(option: str, path: str) -> Path:
    """``path`` if it is a folder this process can write into, or one it can create (created later, not
    here); ValueError naming ``option`` otherwise."""
    p = _named(option, path)
    at = p
    while not at.exists():
        if at.parent == at:
            break
        at = at.parent
    if at.exists() and not at.is_dir():
        raise ValueError(f"{option} {path}: {at} is a file (expected a folder)")
    if not os.access(at, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: {at} is not writable")
    return p


def writable_file(option: str, path: str) -> Path:
    """``path`` if a file can be written there (its folder exists and is writable; not a folder itself)."""
    p = _named(option, path)
    if p.is_dir():
        raise ValueError(f"{option} {path}: a directory (expected a file name)")
    folder = p.parent
    if not folder.is_dir():
        raise ValueError(f"{option} {path}: no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{option} {path}: not writable")
    return p


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def redis_url(option: str, url: str | None) -> str | None:
    """A Redis URL as redis-py takes it (redis://, rediss:// or unix://), or None for a private redis-server."""
    if url is None:
        return None
    accepted = "expected a redis://, rediss:// or unix:// URL"
    if not url.startswith(REDIS_SCHEMES):
        raise ValueError(f"{option} {url}: {accepted}")
    try:
        urlparse(url).port  # noqa: B018 (a port that is no number raises here, not at the first connection)
    except ValueError:
        raise ValueError(f"{option} {url}: its port is not a number ({accepted})") from None
    return url
