"""The ``caldera`` commands that read or try the store and stop: ``audit``, ``status``, ``dry-run``."""
