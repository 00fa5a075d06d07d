"""How a scheduler uses the nodes the sharding controller hands it."""

from __future__ import annotations

import enum


class ShardingMode(enum.StrEnum):
    """hard: its own shard only; soft: its own, then unowned nodes, then others'; none: every node alike."""

    HARD = "hard"
    SOFT = "soft"
    NONE = "none"
