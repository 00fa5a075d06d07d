"""The agent scheduler: the low-latency path. A scheduling queue, a pure decision core over the node table, workers as Ray actors committing through the binder."""
