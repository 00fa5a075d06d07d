"""The sharding controller: splits the nodes into NodeShards, one per scheduler, by utilization band (pure policy + controller loop)."""
