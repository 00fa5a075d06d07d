"""Batch scheduler actions, one module each (arrive with the batch issue)."""
