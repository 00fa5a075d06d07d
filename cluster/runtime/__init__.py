"""The process runtime: start-up, flags, /metrics and /healthz, heartbeats, the leader-election interface and its Redis lease, the private redis-server."""
