"""Kubernetes for real: the connection, the mirror of observed state into the store, and its process."""
