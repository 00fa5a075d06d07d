"""Kubernetes integration: the mirror, CRDs, the bind target and leases (arrives with the Kubernetes issue)."""
