"""Batch scheduler plugins, one module each (arrive with the batch issue)."""
