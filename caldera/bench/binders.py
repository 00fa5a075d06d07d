"""Binders the benches compare caldera's with."""

from __future__ import annotations

from binder.commit import Binder


class VersionOnlyBinder(Binder):
    """Volcano's agent binder's rule: a node whose version moved since the scheduler looked is a
    conflict, whether the placement still fits or not. ``caldera bench agent`` runs it beside
    caldera's binder (which re-checks a moved node) to show what re-checking saves."""

    MODE = "coarse"
