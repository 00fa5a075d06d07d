"""The sharding controller: splits nodes into NodeShards by utilization band (arrives with the sharding issue)."""
