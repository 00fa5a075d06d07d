"""The simulated cluster: playing Kubernetes and its kubelets against the store."""
