"""Error lines that stay one line, whatever the user's input held."""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with each character that would break or hide a line (newlines, tabs, other control
    and format characters — a field name in a manifest may hold any of them) written as its escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
