"""The agent scheduler: the low-latency path with Ray-actor workers (arrives with the agent issue)."""
